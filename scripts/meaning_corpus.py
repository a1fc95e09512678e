"""A harder recall corpus: questions whose words are not the evidence's words.

scripts/recall_corpus.py asks each question with words its answer holds, so
plain BM25 finds nearly all of them.  People ask otherwise, weeks later:

- **paraphrase**: the question names the thing (a service, a person) but says
  the rest in other words than the message did ("Who looks after moving the
  CI pipeline across?" for "Kwame takes over the CI pipeline migration");
- **other-speaker**: the person asked, the agent answered; the question repeats
  the person's words and the answer is the agent's reply, which holds none of them;
- **unshared**: the evidence holds no content word of the question at all; the
  message before it, by the same speaker, set the topic ("Update on the
  checkout latency problem." then "Turned out to be a missing index …");
- **two-message**: the answer joins two messages said on different days
  (which service the outage hit, who owns that service); evidence is both;
- **time**: the same topic decided differently on several days, the question
  names the day as a person does ("last Tuesday", "yesterday", "three days
  ago", "on March 4"); it is asked at ``asked_at``, the morning after the last day.

Around them: distractors (the same names in other contexts, a dozen each),
small talk, agent replies.  Every question lists the ids of the messages that
hold its answer.  Deterministic for a seed; ``scale`` multiplies the filler.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field

from recall_corpus import FILES, FILLER_AGENT, FILLER_PERSON

SERVICES = ["billing", "invoicing", "auth", "search", "reporting", "notifications", "payroll", "inventory",
            "checkout", "onboarding", "analytics", "shipping", "catalog", "gateway", "scheduler", "exports",
            "ledger", "pricing", "refunds", "webhooks"]
PEOPLE = ["Priya", "Marcus", "Lena", "Tomás", "Aiko", "Jonah", "Fatima", "Oskar", "Grace", "Ravi", "Ines",
          "Dmitri", "Chloe", "Kwame", "Sofia", "Hugo", "Mei", "Anders", "Zara", "Luca"]
AREAS = ["payments", "mobile app", "data warehouse", "CI pipeline", "public API", "admin console",
         "email templates", "metrics stack", "feature flags", "SSO setup", "search cluster", "file storage"]
CUSTOMERS = ["Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Logistics", "Wayne Foods", "Hooli",
             "Vandelay Imports", "Soylent Labs", "Tyrell Freight", "Cyberdyne", "Oscorp"]
ENVS = ["staging", "load-test", "analytics", "sandbox", "preview", "disaster-recovery", "batch", "edge"]
BIRDS = ["heron", "kestrel", "osprey", "plover", "wren", "egret", "curlew", "lapwing", "merlin", "shrike",
         "avocet", "dunlin"]
TOPICS = ["rollout", "pricing page", "hiring plan", "offsite", "roadmap", "on-call rota", "release train",
          "budget review"]
DECISIONS = ["ship it behind a flag to ten percent of users first", "wait until the audit is finished",
             "split it into two smaller pieces", "hand it to the platform team", "freeze it until January",
             "go ahead with the cheaper option", "ask legal before anything else", "run a two-week trial"]
CAUSES = [("a missing index on the orders table", "adding the index and backfilling overnight"),
          ("an expired certificate on the internal proxy", "rotating it and adding an expiry alert"),
          ("a retry loop hammering the cache", "capping retries and adding jitter"),
          ("a cron job running twice after the daylight-saving switch", "pinning it to UTC"),
          ("an oversized connection pool starving the replicas", "halving the pool size"),
          ("a stale DNS entry pointing at the old region", "lowering the TTL and flushing resolvers"),
          ("a memory leak in the image thumbnailer", "upgrading the decoder library"),
          ("a misconfigured feature flag defaulting to on", "flipping the default and adding a review rule")]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
TYPES = ("paraphrase", "other-speaker", "unshared", "two-message", "time")


@dataclass
class Question:
    text: str
    kind: str  # one of TYPES
    evidence: list[int]  # ids of the messages holding the answer


@dataclass
class Corpus:
    messages: list[tuple[str, str, float, str]]  # (kind, text, unix time, chat title)
    questions: list[Question]
    asked_at: float  # when the questions are asked: the morning after the last day


@dataclass
class _Episode:
    lines: list[tuple[str, str]]  # (kind, text) said in a row
    day: int | None = None  # a fixed day, or None: anywhere
    question: tuple[str, str, list[int]] | None = None  # (text, type, offsets into lines)
    joins: list[tuple[str, int]] = field(default_factory=list)  # two-message: (key, offset)


def _paraphrase(rng: random.Random, out: list[_Episode], distract: list[str]) -> None:
    for person, area in zip(rng.sample(PEOPLE, 8), rng.sample(AREAS, 8)):
        said = rng.choice([f"{person} takes over the {area} migration from next sprint; ping them first.",
                           f"From now on {person} owns the {area} migration, so send questions their way."])
        asked = rng.choice([f"Who looks after moving the {area} across?",
                            f"Which colleague is in charge of shifting the {area} over?"])
        out.append(_Episode([("user", said)], question=(asked, "paraphrase", [0])))
        distract += [f"{person} is out on Friday, back on Monday.", f"Nice work on the {area} docs, {person}.",
                     f"We should review the {area} before the quarter ends.",
                     f"The {area} dashboard is slow again today.", f"{person} shared a good article on testing."]
    for service in rng.sample(SERVICES, 8):
        n = rng.randint(2, 9)
        out.append(_Episode([("user", f"We capped {service} retries at {NUMBERS[n]}; the upstream throttles "
                                      "anything more.")],
                            question=(f"How many attempts does {service} make before it gives up?",
                                      "paraphrase", [0])))
        distract += [f"The {service} logs are noisy, I filtered the health checks out.",
                     f"{service.capitalize()} tests are flaky on CI again, I re-ran them.",
                     f"Can you add a panel for {service} latency?"]
    for customer in rng.sample(CUSTOMERS, 8):
        month = rng.choice(MONTHS)
        want = rng.choice(["a CSV export of every invoice", "single sign-on through Okta",
                           "a Spanish translation", "hourly usage reports", "an audit log they can download"])
        out.append(_Episode([("user", f"{customer} asked for {want} by the end of {month}.")],
                            question=(f"What is {customer} waiting on from us, and what is the deadline?",
                                      "paraphrase", [0])))
        distract += [f"Call with {customer} went fine, mostly small talk.",
                     f"{customer} paid the last invoice late again.", f"{customer} renewed for another year."]


def _other_speaker(rng: random.Random, out: list[_Episode], distract: list[str]) -> None:
    for env, bird in zip(rng.sample(ENVS, 8), rng.sample(BIRDS, 8)):
        out.append(_Episode([("user", f"What should we call the new {env} cluster?"),
                             ("reply", f"Let's go with {bird.capitalize()}: short, and nothing else uses it.")],
                            question=(f"What name did we give the new {env} cluster?", "other-speaker", [1])))
        distract += [f"The {env} cluster ran out of disk overnight.", f"Who has access to the {env} cluster?",
                     f"I rebuilt the {env} images this morning."]
    for service in rng.sample(SERVICES, 8):
        port = rng.randint(3000, 9999)
        out.append(_Episode([("user", f"Which port should the {service} admin panel listen on?"),
                             ("reply", f"{port}, reachable only over the VPN.")],
                            question=(f"What port does the {service} admin panel use?", "other-speaker", [1])))
        distract += [f"The {service} admin panel looks dated, maybe a redesign later.",
                     f"Who last logged into the {service} admin panel?"]
    for kind in rng.sample(["audit", "access", "payment", "debug", "error", "webhook", "import", "login"], 8):
        days = rng.choice(["Thirty", "Sixty", "Ninety", "A hundred and eighty"])
        out.append(_Episode([("user", f"How long should we keep the {kind} logs?"),
                             ("reply", f"{days} days is plenty; after that they move to cold storage.")],
                            question=(f"What retention did we settle for {kind} logs?", "other-speaker", [1])))
        distract += [f"The {kind} logs filled the disk again.", f"Can you grep the {kind} logs for errors?"]


def _unshared(rng: random.Random, out: list[_Episode], distract: list[str]) -> None:
    for service, (cause, fix) in zip(rng.sample(SERVICES, 8), CAUSES):
        out.append(_Episode([("user", f"Update on the {service} latency problem."),
                             ("user", f"Turned out to be {cause}; fixed by {fix}.")],
                            question=(f"What was behind the {service} latency problem?", "unshared", [1])))
        distract += [f"The {service} latency alerts fired twice last night.",
                     f"Can we get a {service} latency graph in the weekly report?"]
    for person in rng.sample(PEOPLE, 8):
        hour = rng.choice(["10:30", "13:00", "14:00", "15:30", "16:00"])
        out.append(_Episode([("user", f"A note about meetings with {person}."),
                             ("user", f"Nothing before {hour}; mornings are for focused work.")],
                            question=(f"When is {person} happy to have meetings?", "unshared", [1])))
        distract += [f"{person} moved the meeting to next week.", f"Lunch with {person} tomorrow?"]
    for customer in rng.sample(CUSTOMERS, 8):
        reason = rng.choice(["the price went up twice in a year", "the export kept timing out",
                             "support took a week to answer", "they merged with a competitor"])
        out.append(_Episode([("user", f"Bad news from the {customer} account review."),
                             ("user", f"They are leaving at the end of the quarter because {reason}.")],
                            question=(f"Why did the {customer} account review go badly?", "unshared", [1])))
        distract += [f"{customer} sent the signed contract.", f"The {customer} account manager changed."]


def _two_message(rng: random.Random, out: list[_Episode], distract: list[str]) -> None:
    for customer, service, person in zip(rng.sample(CUSTOMERS, 12), rng.sample(SERVICES, 12),
                                         rng.sample(PEOPLE, 12)):
        first = _Episode([("user", f"The {customer} outage took down {service} for forty minutes.")])
        second = _Episode([("user", f"{person} is the owner of {service} now, after the reorganisation.")])
        first.joins = [(customer, 0)]
        second.joins = [(customer, 0)]
        first.question = (f"Who is responsible for the system that the {customer} outage broke?",
                          "two-message", [])
        out += [first, second]
        distract += [f"{customer} asked for a status page.", f"{person} is reviewing pull requests today.",
                     f"{service.capitalize()} deploys are paused until Thursday."]


def _time(rng: random.Random, out: list[_Episode], distract: list[str], days: int, first_day: dt.date
          ) -> list[tuple[str, int, str]]:
    """Episodes on fixed days; returns (topic, day, how the question names that day) for each asked one."""
    asked = []
    last = days - 1  # the questions are asked the morning after the last day
    for topic in TOPICS:
        chosen = rng.sample(range(days), len(DECISIONS))
        for day, decision in zip(chosen, rng.sample(DECISIONS, len(DECISIONS))):
            out.append(_Episode([("user", f"About the {topic}: let's {decision}.")], day=day))
        for day in chosen[:3]:
            ago = last + 1 - day
            date = first_day + dt.timedelta(days=day)
            if ago == 1:
                named = "yesterday"
            elif ago <= 6:
                named = rng.choice([f"last {WEEKDAYS[date.weekday()]}", f"{NUMBERS[ago]} days ago"])
            else:
                named = rng.choice([f"on {MONTHS[date.month - 1]} {date.day}", f"on {date.isoformat()}"])
            asked.append((topic, day, named))
    return asked


def corpus(seed: int = 11, days: int = 30, scale: float = 1.0, start: dt.date = dt.date(2026, 3, 2)
           ) -> Corpus:
    """The messages and questions; ``scale`` multiplies the filler between episodes."""
    rng = random.Random(seed)
    episodes: list[_Episode] = []
    distract: list[str] = []
    _paraphrase(rng, episodes, distract)
    _other_speaker(rng, episodes, distract)
    _unshared(rng, episodes, distract)
    _two_message(rng, episodes, distract)
    timed = _time(rng, episodes, distract, days, start)
    free = [e for e in episodes if e.day is None]
    fixed = [e for e in episodes if e.day is not None]
    rng.shuffle(free)
    # Spread the free episodes and the distractors over the days; fixed ones go on their day.
    per_day: list[list[_Episode]] = [[] for _ in range(days)]
    for k, episode in enumerate(free):
        per_day[k * days // len(free)].append(episode)
    for text in distract:
        per_day[rng.randrange(days)].append(_Episode([("user", text)]))
    for episode in fixed:
        per_day[episode.day].append(episode)  # type: ignore[index]
    filler = max(1, round(8 * scale))
    messages: list[tuple[str, str, float, str]] = []
    placed: dict[int, int] = {}  # id(episode) -> id of its first message
    for day, todays in enumerate(per_day):
        rng.shuffle(todays)
        date = start + dt.timedelta(days=day)
        title = f"{WEEKDAYS[date.weekday()]} {date.isoformat()}"
        morning = dt.datetime(date.year, date.month, date.day, 9, 0).timestamp()
        said: list[tuple[str, str]] = []
        for episode in todays:
            placed[id(episode)] = -1 - len(said)  # offset within the day, fixed below
            said += episode.lines
            for _ in range(rng.randint(filler // 2, filler)):
                if rng.random() < 0.45:
                    said.append(("user", rng.choice(FILLER_PERSON)))
                else:
                    said.append(("reply", rng.choice(FILLER_AGENT).format(n=rng.randint(2, 300),
                                                                           file=rng.choice(FILES))))
        base = len(messages)
        for k, (kind, text) in enumerate(said):
            messages.append((kind, text, morning + k * 40.0, title))
        for episode in todays:
            placed[id(episode)] = base + (-1 - placed[id(episode)])
    questions: list[Question] = []
    joined: dict[str, list[int]] = {}
    for episode in episodes:
        for key, offset in episode.joins:
            joined.setdefault(key, []).append(placed[id(episode)] + offset)
    for episode in episodes:
        if episode.question is None:
            continue
        text, kind, offsets = episode.question
        evidence = sorted(joined[episode.joins[0][0]]) if kind == "two-message" else \
            [placed[id(episode)] + o for o in offsets]
        questions.append(Question(text, kind, evidence))
    for topic, day, named in timed:
        episode = next(e for e in fixed if e.day == day and e.lines[0][1].startswith(f"About the {topic}:"))
        questions.append(Question(f"What did we decide about the {topic} {named}?", "time", [placed[id(episode)]]))
    last = start + dt.timedelta(days=days)
    asked_at = dt.datetime(last.year, last.month, last.day, 8, 30).timestamp()
    return Corpus(messages, questions, asked_at)
