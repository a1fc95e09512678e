"""The simulator's scripted models: the writer's seeded mix of tries, the agent's markers, routing.

Requests are built directly as :class:`SimRequest` objects, no HTTP.  The
writer's task text follows DESIGN §3.2 (the ``Compaction:`` marker, the job,
the limit in bytes and words, a 512-dash ruler, ``<input>`` … ``</input>``);
the checks below re-implement the fact rules of §3.3 on their own, so the
scripted writer is judged by the rule, not by its own helper.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics

import jsonschema
import pytest

from tool_forms import openai_tools
from endless.sim.agent_model import ScriptedAgent
from endless.sim.model import ChatMessage, Segment, SimReply, SimRequest, ToolCall
from endless.sim.responder import route_responder
from endless.sim.writer_model import DEFAULT_MIX, ScriptedWriter, is_writer_request

RULER = "-" * 512

# ---------------------------------------------------------------------------
# Inputs and tasks

_SENTENCES = [
    "Please move the database to port {p} on db-prod-{n}, not the old one.",
    "The config lives in /etc/{w}/config.yaml and the key is MAX_POOL_SIZE={n}.",
    "We decided on {day} to keep \"read replicas\" off until v{n}.{m}.1 ships.",
    "The {n:,} users on the beta list should get the email at 09:{m:02d}.",
    "Never push to main without a review, that is a rule.",
    "The build failed with ImportError in src/{w}/loader.py line {p}.",
    "I tried restarting worker_{n} twice and it crashed both times.",
    "Ticket JIRA-{p} is still open and nobody owns it.",
    "Use camelCase names like fetchUserData in the client, snake_case in Python.",
    "It's fine, we'll revisit the 'cache key' question next week.",
    "Invoice {p} came to {n:,}.{m:02d} euros, paid on {day}.",
    "The deploy script deploy.sh takes about {m} minutes on the {w} cluster.",
    "Ada said the latency p99 is {p} ms after the change to gRPC.",
    "Open question: do we keep the {w} branch or merge it into release-{n}?",
    "The test suite has {p} tests and {m} of them are flaky on CI.",
]
_WORDS = ["alpha", "orion", "kestrel", "juniper", "mosaic", "harbor", "quartz", "tundra"]
_DAYS = ["Monday", "Tuesday", "Friday", "Sunday"]
_TAGS = ["you", "Ada", "did", "result", "note"]


def make_message(rng: random.Random, size: int = 900) -> str:
    """A message of real-looking sentences with numbers, identifiers, paths and quotes."""
    out = f"{rng.choice(_TAGS)}: "
    while len(out.encode()) < size:
        template = rng.choice(_SENTENCES)
        out += template.format(p=rng.randint(1000, 9999), n=rng.randint(2, 4000),
                               m=rng.randint(0, 59), w=rng.choice(_WORDS),
                               day=rng.choice(_DAYS)) + (" " if rng.random() < 0.8 else "\n")
    return out.strip()


def compress_task(message_id: int, message: str, limit: int = 512) -> str:
    return (f"Compaction: compress message {message_id}\n"
            f"Write the line for this message in at most {limit} bytes (roughly {limit // 7} words); "
            f"the ruler below is {limit} bytes long.\n{'-' * limit}\n<input>\n{message}\n</input>")


def merge_task(first: str, second: str, ident: int, n: int, limit: int = 512) -> str:
    return (f"Compaction: merge lines {ident}+{n} and {ident + n}+{n}\n"
            f"Write one line of at most {limit} bytes (roughly {limit // 7} words) joining them.\n"
            f"{'-' * limit}\n<input>\n{ident}+{n}|{first}\n{ident + n}+{n}|{second}\n</input>")


def too_long_feedback(size: int, limit: int = 384) -> str:
    return (f"Too long: that line is {size} bytes. Write the whole line again in at most {limit} "
            f"bytes, ending where the mark is:\n{'-' * limit}| ← cut here")


def request(messages: list[ChatMessage], tools: list[dict] | None = None, api: str = "openai",
            tool_choice: object = None) -> SimRequest:
    text = "".join(m.text for m in messages)
    return SimRequest(api=api, model="sim-model", segments=[Segment(text)], messages=messages,
                      tools=tools or [], stream=False, cache_key=None, max_tokens=None,
                      tool_choice=tool_choice)


def writer_request(task: str, *later: ChatMessage) -> SimRequest:
    view = "<chat>\n0+32|you: an older stretch of the chat\n32+8|Ada: more of it\n</chat>"
    return request([ChatMessage("system", "You are the agent."), ChatMessage("user", view),
                    ChatMessage("user", task), *later])


# ---------------------------------------------------------------------------
# Facts per DESIGN §3.3, re-implemented here

_NUM = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|\d+(?:\.\d+)?")
_QUOTED = re.compile(r"(?<!\w)[\"“«'`]([^\"”»'`\n]{1,80})[\"”»'`](?!\w)")


def facts(text: str) -> list[tuple[str, str]]:
    found = [("number", m.group(0).replace(",", "")) for m in _NUM.finditer(text)]
    for token in text.split():
        bare = token.strip(".,;:!?()[]{}<>\"'`«»“”‘’")
        if not bare:
            continue
        mixed = bool(re.search(r"[A-Za-z]", bare) and re.search(r"\d", bare))
        inner = bool(re.search(r"\w[_\-./]\w", bare)) or bool(re.search(r"[a-z][A-Z]", bare))
        if mixed or inner:
            found.append(("identifier", bare))
    found += [("quoted", m.group(1)) for m in _QUOTED.finditer(text)]
    return found


def missing_facts(line: str, source: str) -> list[tuple[str, str]]:
    flat = source.replace(",", "")
    out = []
    for kind, value in facts(line):
        if kind == "number":
            if value not in flat:
                out.append((kind, value))
        elif value not in source:
            out.append((kind, value))
    return out


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def check_category(outcome, text: str) -> None:
    """What each category promises about the reply's text."""
    size = len(re.sub(r"^\d+\+\d+\|", "", text).encode())
    if outcome.category == "fit":
        assert 0 < size <= outcome.limit
    elif outcome.category == "too_long":
        assert size > 1.25 * outcome.original_limit
    elif outcome.category == "wrong_script":
        assert _CJK.search(text) and size <= outcome.limit
    elif outcome.category == "malformed":
        assert (not text.strip() or "<input>" in text or text.startswith("Compaction:")
                or re.search(r"sorry|cannot|unable", text, re.I)), text


# ---------------------------------------------------------------------------
# The writer's mix


_POOL_RNG = random.Random(1234)
POOL = [make_message(_POOL_RNG, _POOL_RNG.randint(700, 2500)) for _ in range(60)]


def run_writer(seed: int, tries: int, **knobs) -> tuple[ScriptedWriter, list[tuple]]:
    writer = ScriptedWriter(seed, **knobs)
    inputs = POOL  # the same inputs for every seed
    seen = []
    for index in range(tries):
        message = inputs[index % len(inputs)]
        reply = writer.reply(writer_request(compress_task(100 + index, message)), float(index))
        outcome = writer.last_outcome
        seen.append((outcome.category, outcome.detail, outcome.invented, reply.text,
                     round(reply.duration, 9)))
        if index % 97 == 0:
            check_category(outcome, reply.text)
    return writer, seen


def test_writer_mix_matches_its_seed_over_10000_tries():
    """Frequencies within 4.5 binomial standard deviations of the mix.

    Each try's category is an independent draw, so over n = 10,000 tries a
    category of weight p has a standard deviation of sqrt(p(1-p)/n): 0.49
    points at 62%, 0.46 at 30%, 0.22 at 5%, 0.17 at 3%.  A seeded run is
    deterministic, but the bound is chosen so that any seed passes with
    probability above 1 - 1e-5 per category; a biased draw (say 60% fit) fails.
    """
    n = 10_000
    writer, seen = run_writer(7, n)
    assert sum(writer.counts.values()) == n
    for category, p in DEFAULT_MIX.items():
        sigma = math.sqrt(p * (1 - p) / n)
        assert abs(writer.counts[category] / n - p) <= 4.5 * sigma, (category, writer.counts)
    rate = writer.invented_rate
    assert abs(writer.invented_count / n - rate) <= 4.5 * math.sqrt(rate * (1 - rate) / n)
    # Every malformed kind and every script occurs.
    assert {d for c, d, *_ in seen if c == "malformed"} == {"empty", "echo_input", "echo_task", "refusal"}
    assert {d for c, d, *_ in seen if c == "wrong_script"} == {"han"}

    again, seen_again = run_writer(7, n)
    assert seen_again == seen  # same seed, same requests: the identical sequence
    other, seen_other = run_writer(8, 500)
    assert [s[0] for s in seen_other] != [s[0] for s in seen[:500]]
    assert [s[3] for s in seen_other] != [s[3] for s in seen[:500]]


def test_writer_categories_do_what_they_say():
    writer = ScriptedWriter(11, mix={"fit": 1, "over": 1, "too_long": 1, "wrong_script": 1, "malformed": 1})
    rng = random.Random(5)
    for index in range(600):
        message = make_message(rng, 1500)
        reply = writer.reply(writer_request(compress_task(index, message)), 0.0)
        outcome = writer.last_outcome
        check_category(outcome, reply.text)
        if outcome.category == "over":
            assert outcome.limit < len(reply.text.encode()) <= 1.25 * outcome.limit
        if outcome.category == "malformed" and outcome.detail == "empty":
            assert not reply.text.strip()
    assert set(writer.counts) == {"fit", "over", "too_long", "wrong_script", "malformed"}


def test_a_custom_mix_and_limit_are_followed():
    writer = ScriptedWriter(3, mix={"fit": 0.2, "too_long": 0.8}, invented_rate=0.0)
    for index in range(2000):
        writer.reply(writer_request(compress_task(index, POOL[index % len(POOL)], limit=300)), 0.0)
        check_category(writer.last_outcome, writer.last_outcome.text)
        assert writer.last_outcome.limit == 300
    assert abs(writer.counts["too_long"] / 2000 - 0.8) < 4.5 * math.sqrt(0.16 / 2000)
    assert writer.counts["wrong_script"] == writer.counts["malformed"] == 0


def test_the_limit_falls_back_to_the_ruler_then_the_default():
    writer = ScriptedWriter(1, mix={"fit": 1}, invented_rate=0.0)
    message = make_message(random.Random(2), 2000)
    ruler_only = f"Compaction: compress message 5\nOne line, as long as the ruler:\n{'-' * 200}\n<input>\n{message}\n</input>"
    writer.reply(writer_request(ruler_only), 0.0)
    assert writer.last_outcome.limit == 200 and writer.last_outcome.size <= 200
    bare = f"Compaction: compress message 5\n<input>\n{message}\n</input>"
    writer.reply(writer_request(bare), 0.0)
    assert writer.last_outcome.limit == 512
    # Byte counts inside the input are not the limit.
    noisy = compress_task(5, message + " The file is 90 bytes at most, limit 64 bytes.", limit=400)
    writer.reply(writer_request(noisy), 0.0)
    assert writer.last_outcome.limit == 400


# ---------------------------------------------------------------------------
# Facts


def test_fitting_lines_carry_only_the_inputs_facts():
    writer = ScriptedWriter(21, mix={"fit": 0.7, "over": 0.1, "too_long": 0.2}, invented_rate=0.0)
    rng = random.Random(77)
    checked = 0
    for index in range(1000):
        if index % 3 == 0:
            first, second = make_message(rng, 420), make_message(rng, 420)
            source = f"{first}\n{second}"
            task = merge_task(first, second, 8 * index, 4)
        else:
            source = make_message(rng, rng.randint(600, 3000))
            task = compress_task(index, source)
        reply = writer.reply(writer_request(task), 0.0)
        assert writer.last_outcome.invented is None
        assert missing_facts(reply.text, source) == [], (reply.text, source)
        assert not re.search(r"\d+\+\d+\|", reply.text)  # heads of merge inputs are not copied
        checked += len(facts(reply.text))
    assert checked > 3000  # the lines do carry facts: names, numbers, paths


def test_lines_keep_the_tag_and_real_sentences():
    writer = ScriptedWriter(4, mix={"fit": 1}, invented_rate=0.0)
    rng = random.Random(3)
    for index in range(200):
        message = make_message(rng, 1500)
        reply = writer.reply(writer_request(compress_task(index, message)), 0.0)
        tag = message.split(":", 1)[0] + ":"
        assert reply.text.startswith(tag)
        first_words = " ".join(reply.text.split()[:6])
        assert first_words in " ".join(message.split())


def test_invented_numbers_are_absent_from_the_request_and_the_only_new_fact():
    writer = ScriptedWriter(5, mix={"fit": 0.8, "too_long": 0.2}, invented_rate=1.0)
    rng = random.Random(8)
    for index in range(800):
        source = make_message(rng, rng.randint(600, 2000))
        req = writer_request(compress_task(index, source))
        reply = writer.reply(req, 0.0)
        number = writer.last_outcome.invented
        assert number is not None and number in reply.text
        assert number not in req.prompt_text().replace(",", "")
        missing = missing_facts(reply.text, source)
        assert missing and all(number in value for _, value in missing), (missing, number)
        if writer.last_outcome.category == "fit":
            assert len(reply.text.encode()) <= writer.last_outcome.limit
    assert writer.invented_count == 800


def test_a_message_without_numbers_gets_a_fresh_one():
    writer = ScriptedWriter(6, mix={"fit": 1}, invented_rate=1.0)
    message = "you: " + " ".join(["please keep the notes short and plain, in English"] * 20)
    reply = writer.reply(writer_request(compress_task(3, message, limit=200)), 0.0)
    assert re.search(r"\d{4,}", reply.text)
    assert len(reply.text.encode()) <= 200


def test_wrong_script_uses_a_script_the_input_lacks():
    writer = ScriptedWriter(2, mix={"wrong_script": 1})
    reply = writer.reply(writer_request(compress_task(1, make_message(random.Random(1)))), 0.0)
    assert re.search(r"[\u4e00-\u9fff]", reply.text)
    chinese = "you: 请把数据库移到端口 5433，" * 40
    reply = writer.reply(writer_request(compress_task(2, chinese)), 0.0)
    assert writer.last_outcome.detail == "hangul" and re.search(r"[\uac00-\ud7af]", reply.text)
    assert not re.search(r"[\u4e00-\u9fff]", reply.text)


# ---------------------------------------------------------------------------
# Retries


def test_retries_after_too_long_feedback_mostly_fit():
    writer = ScriptedWriter(31, invented_rate=0.0)
    rng = random.Random(4)
    fits, conversations = 0, 1000
    for index in range(conversations):
        message = make_message(rng, rng.randint(900, 2500))
        task = compress_task(index, message)
        writer.force("too_long")
        first = writer.reply(writer_request(task), 0.0)
        assert writer.last_outcome.attempt == 1 and writer.last_outcome.category == "too_long"
        size = len(first.text.encode())
        assert size > 640
        retry = writer_request(task, ChatMessage("assistant", first.text),
                               ChatMessage("user", too_long_feedback(size)))
        assert is_writer_request(retry)
        second = writer.reply(retry, 0.0)
        outcome = writer.last_outcome
        assert outcome.attempt == 2 and outcome.limit == 384 and outcome.original_limit == 512
        check_category(outcome, second.text)
        if outcome.category == "fit":
            fits += 1
            assert len(second.text.encode()) <= 384
            assert missing_facts(second.text, message) == []
    # The default retry mix fits 88% of retries: 4.5 sigma below is still above 85%.
    assert fits / conversations >= 0.88 - 4.5 * math.sqrt(0.88 * 0.12 / conversations)


def test_retry_behaviour_is_configurable_and_a_third_try_counts_as_attempt_3():
    writer = ScriptedWriter(1, retry_mix={"too_long": 1})
    message = make_message(random.Random(6), 2000)
    task = compress_task(9, message)
    first = writer.reply(writer_request(task), 0.0)
    feedback1 = ChatMessage("user", too_long_feedback(len(first.text.encode()) + 1000))
    second = writer.reply(writer_request(task, ChatMessage("assistant", first.text), feedback1), 0.0)
    assert writer.last_outcome.category == "too_long" and writer.last_outcome.attempt == 2
    third = writer.reply(writer_request(task, ChatMessage("assistant", first.text), feedback1,
                                        ChatMessage("assistant", second.text),
                                        ChatMessage("user", "Wrong language: write the line in "
                                                            "the messages' language.")), 0.0)
    assert writer.last_outcome.attempt == 3 and writer.last_outcome.category == "too_long"
    assert len(third.text.encode()) > 640


def test_forced_outcomes_and_replies():
    writer = ScriptedWriter(1)
    message = make_message(random.Random(6), 2000)
    writer.force(SimReply(status=429, error="slow down", retry_after=3.0), "malformed", "fit")
    reply = writer.reply(writer_request(compress_task(1, message)), 0.0)
    assert reply.status == 429 and reply.retry_after == 3.0 and writer.last_outcome.category == "forced"
    writer.reply(writer_request(compress_task(1, message)), 0.0)
    assert writer.last_outcome.category == "malformed"
    writer.reply(writer_request(compress_task(1, message)), 0.0)
    assert writer.last_outcome.category == "fit"
    with pytest.raises(ValueError):
        writer.force("brilliant")


def test_copied_heads_when_asked():
    writer = ScriptedWriter(1, mix={"fit": 1}, head_rate=1.0, invented_rate=0.0)
    message = make_message(random.Random(6), 2000)
    reply = writer.reply(writer_request(compress_task(41, message)), 0.0)
    assert reply.text.startswith("41+1|") and writer.last_outcome.head
    first, second = make_message(random.Random(1), 400), make_message(random.Random(2), 400)
    reply = writer.reply(writer_request(merge_task(first, second, 40, 1)), 0.0)
    assert reply.text.startswith("40+2|")


# ---------------------------------------------------------------------------
# Batches


def batch_task(messages: list[str], limit: int = 512) -> str:
    jobs = "\n\n".join(
        f"<job id=\"{k}\">\ncompress message {50 + k}\nAt most {limit} bytes.\n{RULER}\n"
        f"<input>\n{m}\n</input>\n</job>" for k, m in enumerate(messages, 1))
    form = "\n".join(f'<line id="{k}">job {k}\'s line</line>' for k in range(1, len(messages) + 1))
    names = "; ".join(f"compress message {50 + k}" for k in range(1, len(messages) + 1))
    return f"Compaction: {names}.\nAnswer each job in its own tag:\n{form}\n\n{jobs}"


def test_a_batched_call_gets_one_tagged_line_per_job_and_a_retry_answers_its_job_alone():
    writer = ScriptedWriter(12, mix={"fit": 1}, retry_mix={"fit": 1}, invented_rate=0.0)
    rng = random.Random(10)
    messages = [make_message(rng, 1200) for _ in range(6)]
    task = batch_task(messages)
    reply = writer.reply(writer_request(task), 0.0)
    lines = dict(re.findall(r'<line id="(\d+)">(.*?)</line>', reply.text, re.S))
    assert sorted(lines, key=int) == [str(k) for k in range(1, 7)]
    assert [o.job for o in writer.last_outcomes] == [f"compress message {50 + k}" for k in range(1, 7)]
    for k, message in enumerate(messages, 1):
        assert missing_facts(lines[str(k)], message) == []
        assert lines[str(k)].split(":")[0] == message.split(":")[0]
    retry = writer_request(task, ChatMessage("assistant", reply.text),
                           ChatMessage("user", "Job 3 only. " + too_long_feedback(700)
                                       + '\n<line id="3">job 3\'s line</line>'))
    again = writer.reply(retry, 0.0)
    only = re.fullmatch(r'<line id="3">([^<]*)</line>', again.text)
    assert only and 0 < len(only.group(1).encode()) <= 384
    assert [o.key for o in writer.last_outcomes] == ["3"] and writer.last_outcome.limit == 384
    assert missing_facts(only.group(1), messages[2]) == []


def test_plain_batches_answer_one_line_per_input():
    writer = ScriptedWriter(12, mix={"fit": 1}, invented_rate=0.0)
    rng = random.Random(10)
    messages = [make_message(rng, 1200) for _ in range(3)]
    task = "Compaction: " + "\n".join(
        f"compress message {k}\nat most 400 bytes\n<input>\n{m}\n</input>" for k, m in enumerate(messages))
    reply = writer.reply(writer_request(task), 0.0)
    lines = reply.text.split("\n")
    assert len(lines) == 3
    for line, message in zip(lines, messages):
        assert len(line.encode()) <= 400 and missing_facts(line, message) == []


# ---------------------------------------------------------------------------
# Latency


@pytest.mark.parametrize("median", [2.0, 0.7])
def test_writer_latency_median_is_the_configured_one(median):
    writer = ScriptedWriter(17, latency_median=median)
    message = make_message(random.Random(1), 1500)
    req = writer_request(compress_task(1, message))
    durations, firsts = [], []
    for _ in range(4000):
        reply = writer.reply(req, 0.0)
        durations.append(reply.duration)
        firsts.append(reply.first_byte / reply.duration)
    # The sample median of 4,000 lognormal draws (sigma 0.5) strays about 1% from the true one.
    assert statistics.median(durations) == pytest.approx(median, rel=0.05)
    assert all(0.15 <= f <= 0.4 for f in firsts)
    assert max(durations) > 2 * median > median / 2 > min(durations)  # spread, not a constant


# ---------------------------------------------------------------------------
# The agent

VIEW = ("<chat>\n0+64|you: set up the Berlin server, port 5433, owner Ada\n"
        "64+16|Ada: moved the backups to /srv/backup and rotated keys\n"
        "80+4|you: asked about the invoice 7781\n84+1|Ada: done\n</chat>")
RECENT = "85+0|you: the deploy of release-12 went fine\n86+0|Ada: noted"
HARNESS_TOOL = {"type": "function", "function": {
    "name": "terminal", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"},
                                                    "timeout": {"type": "integer", "minimum": 1}},
                   "required": ["command"]}}}
TOOLS = openai_tools() + [HARNESS_TOOL]


def turn(person: str, *steps: ChatMessage, tools: list[dict] | None = None, api: str = "openai",
         tool_choice: object = None) -> SimRequest:
    messages = [ChatMessage("system", "You are the agent."), ChatMessage("user", VIEW),
                ChatMessage("user", RECENT), ChatMessage("user", person), *steps]
    return request(messages, TOOLS if tools is None else tools, api, tool_choice)


def run_turn(agent: ScriptedAgent, person: str, answer=lambda call: f"result of {call.name}",
             **kw) -> tuple[list[ToolCall], SimReply]:
    steps: list[ChatMessage] = []
    calls: list[ToolCall] = []
    for _ in range(50):
        reply = agent.reply(turn(person, *steps, **kw), 0.0)
        if reply.status != 200 or reply.stall or not reply.tool_calls:
            return calls, reply
        calls += reply.tool_calls
        steps.append(ChatMessage("assistant", "", tool_calls=list(reply.tool_calls)))
        for call in reply.tool_calls:
            steps.append(ChatMessage("tool", answer(call), tool_call_id=call.id))
    raise AssertionError("the turn never ended")


_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def test_zoom_marker_calls_zoom_then_quotes_the_tool_result():
    agent = ScriptedAgent(1)
    first = agent.reply(turn("What did we decide? [[tools:0]] [[zoom:64:16]]"), 0.0)
    assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [("zoom", {"id": 64, "n": 16})]
    result = "64+8|Ada: moved the backups to /srv/backup on host kestrel-9\n72+8|you: rotate keys monthly"
    step = [ChatMessage("assistant", "", tool_calls=first.tool_calls),
            ChatMessage("tool", result, tool_call_id=first.tool_calls[0].id)]
    final = agent.reply(turn("What did we decide? [[tools:0]] [[zoom:64:16]]", *step), 0.0)
    assert not final.tool_calls and result in final.text
    assert agent.last_step.action == "final"


def test_zoom_with_other_tools_quotes_the_right_result():
    agent = ScriptedAgent(2)
    person = "Check it [[zoom:80:4]] and then more [[tools:2]]"
    calls, final = run_turn(agent, person, answer=lambda c: f"answer to {c.id}: kestrel-{c.id[-4:]}")
    assert len(calls) == 3 and calls[0].name == "zoom" and json.loads(calls[0].arguments) == {"id": 80, "n": 4}
    assert f"answer to {calls[0].id}" in final.text
    assert not any(f"answer to {c.id}" in final.text for c in calls[1:])


def test_call_markers_call_the_named_tools_in_order_and_nothing_else():
    agent = ScriptedAgent(3)
    calls, final = run_turn(agent, "Check [[call:date]] then [[call:terminal]] and [[zoom:80:4]]")
    assert [c.name for c in calls] == ["zoom", "date", "terminal"]
    for call in calls[1:]:
        jsonschema.validate(json.loads(call.arguments), _SCHEMAS[call.name])
    assert final.text and not final.tool_calls
    calls, _ = run_turn(agent, "Check [[call:terminal]] [[tools:2]]")
    assert len(calls) == 3 and calls[0].name == "terminal"
    calls, _ = run_turn(agent, "A tool this request does not offer [[call:no_such_tool]]")
    assert calls == []


@pytest.mark.parametrize("count", [0, 1, 3, 7])
def test_tool_count_scripts_make_that_many_calls_one_per_step(count):
    agent = ScriptedAgent(5)
    calls, final = run_turn(agent, f"Look into the Berlin server, port 5433 [[tools:{count}]]")
    assert len(calls) == count and final.text and not final.tool_calls
    for call in calls:
        assert call.name in _SCHEMAS
        jsonschema.validate(json.loads(call.arguments), _SCHEMAS[call.name])
        if call.name == "zoom":  # a real line of the <chat> view or the recent block
            args = json.loads(call.arguments)
            assert f"\n{args['id']}+{args['n']}|" in "\n" + VIEW or args["n"] == 1


def test_tool_choice_covers_every_kind_and_stays_within_the_request():
    agent = ScriptedAgent(8)
    names = set()
    for index in range(60):
        calls, _ = run_turn(agent, f"Question {index} about release-12 [[tools:3]]")
        names |= {c.name for c in calls}
    assert names == {"zoom", "date", "recall_search", "terminal"}
    only = [HARNESS_TOOL]
    calls, _ = run_turn(agent, "run something [[tools:2]]", tools=only)
    assert [c.name for c in calls] == ["terminal", "terminal"]
    calls, final = run_turn(agent, "no tools here [[tools:2]]", tools=[])
    assert calls == [] and final.text
    calls, final = run_turn(agent, "tools off [[tools:2]]", tool_choice="none")
    assert calls == [] and final.text


CLARIFY_TOOL = {"type": "function", "function": {
    "name": "clarify", "description": "Ask the person a question and wait for the answer.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}}


def test_an_unscripted_turn_never_asks_the_person_back():
    """Hermes's clarify waits for an answer a headless run never gives: only [[call:clarify]] calls it."""
    agent = ScriptedAgent(3)
    tools = TOOLS + [CLARIFY_TOOL]
    names: set[str] = set()
    for index in range(80):
        calls, _ = run_turn(agent, f"Question {index} about release-12 [[tools:3]]", tools=tools)
        names |= {c.name for c in calls}
    assert "clarify" not in names and {"zoom", "terminal"} <= names
    calls, _ = run_turn(agent, "Ask me first. [[call:clarify]]", tools=tools)
    assert [c.name for c in calls] == ["clarify"]


def test_unscripted_turns_draw_tool_counts_from_the_weights():
    agent = ScriptedAgent(9, tool_weights={0: 0.5, 2: 0.5})
    counts = [len(run_turn(agent, f"plain question number {i}")[0]) for i in range(200)]
    assert set(counts) == {0, 2} and 70 < counts.count(2) < 130


def test_anthropic_ids_and_arguments_are_json():
    agent = ScriptedAgent(3)
    reply = agent.reply(turn("hello [[tools:1]]", api="anthropic"), 0.0)
    assert reply.tool_calls[0].id.startswith("toolu_")
    json.loads(reply.tool_calls[0].arguments)
    reply = agent.reply(turn("hello [[tools:1]]"), 0.0)
    assert reply.tool_calls[0].id.startswith("call_")


@pytest.mark.parametrize("status", [429, 500, 503, 529])
def test_fail_marker_fails_with_that_status(status):
    agent = ScriptedAgent(1, retry_after=2.5)
    reply = agent.reply(turn(f"please [[fail:{status}]]"), 0.0)
    assert reply.status == status and reply.error
    assert reply.retry_after == (2.5 if status == 429 else None)
    assert agent.last_step.action == "fail"


def test_fail_marker_with_retry_after_and_times():
    agent = ScriptedAgent(1)
    person = "please [[fail:429:7:2]] [[tools:0]]"
    first = agent.reply(turn(person), 0.0)
    second = agent.reply(turn(person), 0.0)
    third = agent.reply(turn(person), 0.0)
    assert (first.status, first.retry_after) == (429, 7.0)
    assert second.status == 429 and third.status == 200 and third.text


def test_stall_slow_and_reply_size_markers():
    agent = ScriptedAgent(4)
    assert agent.reply(turn("wait [[stall]]"), 0.0).stall
    slow = agent.reply(turn("take your time [[slow:42.5]] [[tools:0]]"), 0.0)
    assert slow.duration == slow.first_byte == 42.5 and slow.text
    for size in (1, 37, 300, 5000):
        reply = agent.reply(turn(f"tell me about Rome and 5433 [[reply:{size}]] [[tools:0]]"), 0.0)
        assert len(reply.text.encode()) == size


def test_markers_in_the_view_or_the_recent_block_are_ignored():
    agent = ScriptedAgent(4)
    person = "84+1|you: earlier I said [[stall]] [[fail:500]]\n<chat>\n0+1|x [[stall]]\n</chat>\nnow answer [[tools:0]]"
    reply = agent.reply(turn(person), 0.0)
    assert reply.status == 200 and not reply.stall and reply.text


def test_replies_have_the_configured_size_varied_words_and_the_persons_facts():
    agent = ScriptedAgent(6, reply_bytes=(800, 1200))
    sizes = []
    for index in range(40):
        person = f"Is the Berlin server on port {5400 + index} ready for release-{index}? [[tools:0]]"
        reply = agent.reply(turn(person), 0.0)
        size = len(reply.text.encode())
        sizes.append(size)
        assert 800 <= size <= 1200
        words = re.findall(r"[a-z]+", reply.text.lower())
        assert len(set(words)) > 40
        mentioned = [f for f in (str(5400 + index), f"release-{index}", "Berlin") if f in reply.text]
        assert mentioned
    assert len(set(sizes)) > 20


def test_agent_latency_median_and_first_byte():
    agent = ScriptedAgent(10, latency_median=3.0)
    durations = []
    for index in range(3000):
        reply = agent.reply(turn(f"message {index} [[tools:0]]"), 0.0)
        durations.append(reply.duration)
        assert 0.1 * reply.duration <= reply.first_byte <= 0.3 * reply.duration
    assert statistics.median(durations) == pytest.approx(3.0, rel=0.05)


def test_agent_is_deterministic_per_seed():
    def transcript(seed: int) -> list:
        agent = ScriptedAgent(seed)
        out = []
        for index in range(30):
            calls, final = run_turn(agent, f"question {index} about kestrel-{index}")
            out.append(([(c.id, c.name, c.arguments) for c in calls], final.text, final.duration))
        return out

    assert transcript(1) == transcript(1)
    assert transcript(1) != transcript(2)


def test_a_turns_steps_share_one_plan_whatever_the_order():
    agent = ScriptedAgent(3)
    person = "Check the Berlin server [[tools:3]]"
    calls, _ = run_turn(agent, person)
    other = ScriptedAgent(3)
    other.reply(turn("something else entirely [[tools:2]]"), 0.0)  # interleaved traffic
    again, _ = run_turn(other, person)
    assert [(c.id, c.name, c.arguments) for c in calls] == [(c.id, c.name, c.arguments) for c in again]


# ---------------------------------------------------------------------------
# Routing


def test_route_responder_sends_writer_tasks_and_their_retries_to_the_writer():
    writer, agent = ScriptedWriter(1), ScriptedAgent(1)
    routed = route_responder(writer, agent)
    message = make_message(random.Random(1), 1500)
    task = compress_task(3, message)
    first = routed.reply(writer_request(task), 0.0)
    assert writer.requests == 1 and agent.requests == 0
    routed.reply(writer_request(task, ChatMessage("assistant", first.text),
                                ChatMessage("user", too_long_feedback(900))), 0.0)
    assert writer.requests == 2 and agent.requests == 0
    routed.reply(turn("What is Compaction: anyway? [[tools:0]]"), 0.0)
    routed.reply(turn("Compaction is a word I like [[tools:0]]"), 0.0)
    assert writer.requests == 2 and agent.requests == 2
    assert (routed.writer_requests, routed.agent_requests) == (2, 2)
    # A person's message that opens with the marker is the writer's by the rule.
    assert is_writer_request(request([ChatMessage("user", "Compaction: compress message 1")]))
    assert not is_writer_request(request([ChatMessage("user", "hello")]))
