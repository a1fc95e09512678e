"""A generated multi-day project conversation, and questions a person would ask about it later.

Each fact is said once, in one message, in the words of the moment; its
question asks for it the way a person asks weeks later, not in the message's
wording ("Which database did we pick for billing?" for "For billing we
settled on Postgres…").  Around the facts: the same names, services and
tools mentioned again in other contexts (the distractors that make a search
hard), small talk, agent replies and tool output.  A fact that changes its
mind later is asked about once, and its answer is the later message.

Deterministic for a seed: the benchmark is the same data every run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SERVICES = ["billing", "invoicing", "auth", "search", "reporting", "notifications", "payroll", "inventory",
            "checkout", "onboarding", "analytics", "shipping", "catalog", "gateway", "scheduler", "exports"]
DATABASES = ["Postgres", "MySQL", "SQLite", "MongoDB", "Cassandra", "Redis", "ClickHouse", "DynamoDB"]
PEOPLE = ["Priya", "Marcus", "Lena", "Tomás", "Aiko", "Jonah", "Fatima", "Oskar", "Grace", "Ravi", "Ines",
          "Dmitri", "Chloe", "Kwame", "Sofia", "Hugo"]
AREAS = ["payments", "the mobile app", "the data warehouse", "the CI pipeline", "the public API",
         "the admin console", "the email templates", "the metrics stack", "the feature flags", "the SSO setup"]
LIBS = ["requests", "pydantic", "django", "react", "numpy", "celery", "sqlalchemy", "fastapi", "webpack",
        "kafka-python", "boto3", "pandas"]
CLOUDS = ["AWS", "GCP", "Azure", "Hetzner", "Fly.io", "DigitalOcean"]
CUSTOMERS = ["Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Logistics", "Wayne Foods",
             "Hooli", "Vandelay Imports", "Soylent Labs", "Tyrell Freight"]
TOOLS = ["Jira", "Datadog", "Sentry", "PagerDuty", "LaunchDarkly", "Figma", "CircleCI", "Snyk"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "September", "October"]
COMPONENTS = ["the upload worker", "the cart page", "the PDF renderer", "the login form", "the sync job",
              "the rate limiter", "the image resizer", "the webhook handler"]


@dataclass
class Fact:
    statement: str  # the message that holds it
    question: str  # how a person asks for it later
    distractors: list[str] = field(default_factory=list)  # other messages naming the same things
    earlier: str | None = None  # a first version the statement later overrides


def _facts(rng: random.Random) -> list[Fact]:
    out: list[Fact] = []
    for service in SERVICES:
        db, other = rng.sample(DATABASES, 2)
        reason = rng.choice(["we need real transactions", "the team already runs it in production",
                             "its replication story is simple", "the hosting bill stays small"])
        out.append(Fact(f"For the {service} service we settled on {db}, mainly because {reason}.",
                        f"Which database did we pick for {service}?",
                        [f"The {service} service threw a few 502s this morning, looks like the proxy.",
                         f"Can you add a dashboard panel for {service} latency?",
                         f"I read that {other} got a new release, not urgent for us.",
                         f"{service} tests are flaky on CI again, I re-ran them."]))
    for person, area in zip(rng.sample(PEOPLE, 10), AREAS):
        out.append(Fact(f"{person} will own the {area.replace('the ', '')} migration from now on; ping them first.",
                        f"Who is responsible for moving {area} over?",
                        [f"{person} is out on Friday, back Monday.",
                         f"Nice work on {area} docs, {person}.",
                         f"We should review {area} before the quarter ends."]))
    for service in rng.sample(SERVICES, 10):
        seconds = rng.choice([5, 8, 12, 15, 20, 30, 45, 90])
        out.append(Fact(f"Set the {service} upstream timeout to {seconds} seconds; anything lower flaps under load.",
                        f"What timeout value did we agree on for {service}?",
                        [f"The {service} logs are noisy, I filtered the health checks out.",
                         f"Load test for {service} is scheduled for next week."]))
    for lib in LIBS:
        version = f"{rng.randint(1, 5)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        out.append(Fact(f"We pinned {lib} to {version} after the regression in the last upgrade broke imports.",
                        f"Which version of {lib} are we stuck on, and why?",
                        [f"Is {lib} still the best choice here? Just wondering.",
                         f"I opened a ticket upstream with {lib} about the warning spam."]))
    for customer in CUSTOMERS:
        month = rng.choice(MONTHS)
        want = rng.choice(["CSV export of all invoices", "single sign-on through Okta", "a Spanish translation",
                           "hourly usage reports", "an audit log they can download", "dark mode"])
        out.append(Fact(f"{customer} asked for {want} by the end of {month}.",
                        f"What did {customer} want from us, and by when?",
                        [f"Call with {customer} went fine, mostly small talk.",
                         f"{customer} paid the last invoice late again."]))
    for tool in TOOLS:
        cost = rng.choice([12, 19, 25, 40, 55, 70])
        out.append(Fact(f"We are dropping {tool}: the licence is {cost} dollars a seat and nobody opens it.",
                        f"Why did we stop using {tool}?",
                        [f"{tool} sent another renewal reminder.",
                         f"Does anyone remember the {tool} admin login?"]))
    for component in COMPONENTS:
        field_name = rng.choice(["user id", "currency code", "file size", "session token", "locale", "tenant id"])
        out.append(Fact(f"Found it: the crash in {component} came from a null {field_name} coming out of the cache.",
                        f"What was the root cause of the {component.replace('the ', '')} crash?",
                        [f"{component.capitalize()} needs a refactor at some point.",
                         f"Added more logging around {component}."]))
    for service in rng.sample(SERVICES, 8):
        port = rng.randint(3000, 9999)
        out.append(Fact(f"The {service} admin panel listens on port {port}, only reachable over the VPN.",
                        f"What port is the {service} admin on?",
                        [f"The {service} admin panel looks dated, maybe a redesign later."]))
    for person in rng.sample(PEOPLE, 8):
        hour = rng.choice(["10:30", "13:00", "14:00", "15:30", "16:00"])
        out.append(Fact(f"{person} prefers meetings after {hour}; mornings are for focused work.",
                        f"When does {person} like to have meetings?",
                        [f"{person} shared a good article on code review.",
                         f"Lunch with {person} tomorrow?"]))
    first, final = rng.sample(CLOUDS, 2)
    out.append(Fact(f"Scratch the earlier plan: we are hosting everything on {final}, the {first} quote was "
                    "twice the price.",
                    "Where are we going to host the production stack in the end?",
                    [f"{first} support answered our ticket."],
                    earlier=f"Let's host production on {first}, it is what everyone knows."))
    out.append(Fact("Rule for this repository: four spaces for indentation, never tabs, and lines under 100 "
                    "characters.",
                    "What are the formatting conventions I asked for?",
                    ["The formatter run changed 40 files, sorry about the noisy diff."]))
    out.append(Fact("Nightly backups go to s3://acme-backups/nightly and are kept for 35 days.",
                    "Where do the backups end up and how long do we keep them?",
                    ["Backup job took longer than usual last night."]))
    out.append(Fact("To rebuild the search index run `make reindex ENV=staging`; it takes about ten minutes.",
                    "How do I rebuild the index on staging?",
                    ["The staging box is slow today."]))
    return out


FILLER_PERSON = [
    "ok, sounds good", "thanks!", "let me check and get back to you", "can you run the tests again?",
    "what do you think we should do next?", "I'm back, where were we?", "good morning", "let's continue",
    "that looks wrong to me, can you double check?", "ship it", "hmm, not sure about that",
    "one more thing before I forget", "let's pause here for today",
]
FILLER_AGENT = [
    "Done. All {n} tests pass.", "I updated {file} and re-ran the linter; no warnings left.",
    "Here is the diff for {file}: two functions renamed and one import removed.",
    "The build finished in {n} seconds.", "I could not reproduce it locally; the logs show nothing unusual.",
    "Sure, I will look into it.", "I opened a draft pull request with the change.",
    "Summary of today: {n} commits, the review comments addressed, one question left open.",
]
FILES = ["app/models.py", "api/routes.py", "web/src/Cart.tsx", "infra/main.tf", "docs/setup.md",
         "tests/test_sync.py", "scripts/deploy.sh", "settings.toml"]


@dataclass
class Conversation:
    messages: list[tuple[str, str, float, str]]  # (kind, text, unix time, chat title)
    questions: list[tuple[str, int]]  # (question, id of the message holding the answer)


def conversation(seed: int = 7, days: int = 14, filler_per_fact: int = 12,
                 start: float = 1_764_000_000.0) -> Conversation:
    rng = random.Random(seed)
    facts = _facts(rng)
    rng.shuffle(facts)
    # Every message to place: facts, their distractors spread over later days, and filler.
    items: list[tuple[str, str, int | None]] = []  # (kind, text, fact number or None)
    for number, fact in enumerate(facts):
        if fact.earlier is not None:
            items.append(("user", fact.earlier, None))
        items.append(("user", fact.statement, number))
        for _ in range(filler_per_fact):
            if rng.random() < 0.45:
                items.append(("user", rng.choice(FILLER_PERSON), None))
            else:
                items.append(("reply", rng.choice(FILLER_AGENT).format(n=rng.randint(2, 300), file=rng.choice(FILES)),
                              None))
    # Distractors land anywhere, before or after their fact.
    for fact in facts:
        for text in fact.distractors:
            items.insert(rng.randrange(len(items) + 1), ("user", text, None))
    titles = ["Kickoff", "Infra week", "Billing push", "Customer requests", "Bug hunt", "Release prep"]
    messages: list[tuple[str, str, float, str]] = []
    answers: dict[int, int] = {}
    per_day = max(1, len(items) // days)
    for k, (kind, text, number) in enumerate(items):
        day = min(days - 1, k // per_day)
        at = start + day * 86_400 + (k % per_day) * 60
        if number is not None:
            answers[number] = len(messages)
        messages.append((kind, text, at, titles[day * len(titles) // days]))
    questions = [(facts[n].question, answers[n]) for n in sorted(answers)]
    return Conversation(messages, questions)
