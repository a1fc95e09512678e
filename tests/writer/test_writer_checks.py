"""The checks on a writer's try (DESIGN §3.3): each rule with tries that pass and tries that fail."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from endless.writer.checks import (CUT_MARK, ELLIPSIS, PROBLEMS, Verdict, accept_limit, clean, cut_mark,
                                   is_writer_task, judge, trim, utf8_prefix, utf8_size)
from endless.writer.facts import find_facts, invented

SOURCE = (
    "you: Please move the database to port 5433 on db-prod-7, not the old one. "
    "The config lives in /etc/pg/config.yaml and src/app/loader.py reads it; the key is MAX_POOL_SIZE=20. "
    "We decided on Friday to keep \"read replicas\" off until v1.2.1 ships. "
    "The 12,500 users should get the mail at 09:30 on 2026-10-08. Call fetchUserData from the client. "
    "Windows builds read C:\\build\\out. Docs: https://example.com/docs/setup?x=1 ."
)


def verdict(reply: str, sources=(SOURCE,), budget: int = 512) -> Verdict:
    return judge(reply, list(sources), budget)


def assert_ok(reply: str, sources=(SOURCE,), budget: int = 512) -> None:
    v = verdict(reply, sources, budget)
    assert v.ok, v
    assert v.problem is None and v.detail == ""


def assert_problem(reply: str, problem: str, sources=(SOURCE,), budget: int = 512) -> Verdict:
    v = verdict(reply, sources, budget)
    assert not v.ok and v.problem == problem, v
    assert v.problem in PROBLEMS and v.detail
    return v


# ---------------------------------------------------------------------------
# Cleaning


@pytest.mark.parametrize("reply, expected", [
    ("40+8|you: moved the DB to port 5433", "you: moved the DB to port 5433"),
    ("41+0|you: a", "you: a"),
    ("0+1|you: a", "you: a"),
    ("  0+1| you: a  ", "you: a"),
    ("40+8|41+0|you: a", "you: a"),
    ("40+8|you: first\n48+8|Assistant: second\n\n  56+1|did: third", "you: first Assistant: second did: third"),
    ("```\n0+1|you: a\n```", "you: a"),
    ("```text\nyou: a\nb\n```", "you: a b"),
    ("```you: a```", "you: a"),
    ("<think>count the bytes</think>\n0+1|you: a", "you: a"),
    ("you: port 40+8|kept mid-line", "you: port 40+8|kept mid-line"),
    ("", ""),
    (None, ""),
])
def test_clean(reply, expected):
    assert clean(reply) == expected


def test_heads_are_stripped_from_every_line_before_judging():
    v = verdict("40+8|you: moved the DB to port 5433\n48+8|Assistant: changed /etc/pg/config.yaml")
    assert v.ok, v
    assert v.text == "you: moved the DB to port 5433 Assistant: changed /etc/pg/config.yaml"
    assert v.size == utf8_size(v.text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_clean_is_idempotent_and_one_line(text):
    once = clean(text)
    assert clean(once) == once
    assert "\n" not in once and once == once.strip()


# ---------------------------------------------------------------------------
# Empty, refusal, echo, malformed


@pytest.mark.parametrize("reply", ["", " ", "\n\n", "40+8|", "0+1| \n 1+1|", "```\n\n```"])
def test_empty(reply):
    assert_problem(reply, "empty")


@pytest.mark.parametrize("reply", [
    "I'm sorry, but I can't help with that request.",
    "I cannot summarise this conversation.",
    "As an AI language model, I am unable to complete this task.",
    "Sorry, I can't assist with summarizing this.",
    "I can't comply with that.",
    "I'm unable to help with this request.",
    "I am not able to summarize this.",
    "Sorry, I'm unable to do that.",
    "Es tut mir leid, aber dabei kann ich nicht helfen.",
    "Je ne peux pas vous aider avec cela.",
    "Lo siento, pero no puedo hacer eso.",
    "К сожалению, я не могу помочь с этим.",
    "抱歉，我无法完成这个任务。",
])
def test_refusal(reply):
    sources = ["you: summarise the deploy notes, please."] if not any("\u4e00" <= c <= "\u9fff" for c in reply) \
        else ["you: 总结一下部署说明。"]
    assert_problem(reply, "refusal", sources)


@pytest.mark.parametrize("reply", [
    "you: asked why I can't reach db-prod-7; Assistant: the port is 5433.",
    "I can't-miss detail: port 5433 on db-prod-7.",
    "Assistant said it cannot help with the old cluster; you: moved the database to port 5433.",
    "Sorry state of the config: /etc/pg/config.yaml still points at port 5433.",
])
def test_real_summaries_are_not_refusals(reply):
    assert_ok(reply)


def test_a_refusal_the_messages_contain_is_a_summary():
    source = "Assistant: I can't help with deleting production data without a backup."
    assert_ok("I can't help with deleting production data without a backup, Assistant said.", [source])
    assert_problem("I can't help with that.", "refusal", ["you: delete production data"])


@pytest.mark.parametrize("reply, tag", [
    ("<input>\nyou: moved the DB to port 5433\n</input>", "<input>"),
    ("you: moved the DB to port 5433</input>", "</input>"),
    ("Compaction: compress message 41\nyou: moved the DB to port 5433", "Compaction:"),
    ("<chat>you: moved the DB</chat>", "<chat>"),
])
def test_echoed_task_tags(reply, tag):
    v = assert_problem(reply, "echo")
    assert tag in v.items and tag not in v.detail, "the detail names the tag in words"
    assert v.detail.startswith("it repeats the task's own ")


def test_a_tag_the_messages_use_is_not_an_echo():
    source = "you: the writer task wraps each message in <input> tags after the Compaction: marker."
    assert_ok("you: the task wraps messages in <input> tags after Compaction: …", [source])


@pytest.mark.parametrize("reply", [
    "...", "—", "…", "?!", "-- --",
    '{"line": "you: moved the DB to port 5433"}',
    '[{"type": "text", "text": "you: moved the DB"}]',
    '<tool_call>{"name": "zoom", "arguments": {"id": 3}}</tool_call>',
    "<|im_start|>assistant you: moved the DB",
    "<think>the user wants a summary of port 5433",
    "you: moved the DB to port \ufffd\ufffd",
])
def test_malformed(reply):
    assert_problem(reply, "malformed")


@pytest.mark.parametrize("reply", [
    "[moved] you: the DB to port 5433",
    "you: {the DB} moved to port 5433",
    "you: moved the DB → port 5433 ✓",
])
def test_prose_with_brackets_is_not_malformed(reply):
    assert_ok(reply)


# ---------------------------------------------------------------------------
# Size


def test_640_bytes_accepted_at_budget_512_and_641_rejected():
    assert accept_limit(512) == 640
    base = "you: moved the DB to port 5433 "
    fits = base + "x" * (640 - len(base))
    assert utf8_size(fits) == 640
    v = verdict(fits)
    assert v.ok and v.size == 640
    over = fits + "y"
    v = assert_problem(over, "too_long")
    assert v.size == 641 and "641" in v.detail and "512" in v.detail


def test_size_counts_utf8_bytes_after_heads_are_stripped():
    text = "you: " + "é" * 317 + "a"  # 5 + 634 + 1 = 640 bytes, 323 characters
    assert verdict("12+4|" + text, [text]).ok
    v = assert_problem(text + "é", "too_long", [text])
    assert v.size == 642


def test_accept_ratio_and_budget_are_parameters():
    line = "you: " + "a" * 395  # 400 bytes
    assert judge(line, [line], budget=400, accept_ratio=1.0).ok
    assert judge(line, [line], budget=399, accept_ratio=1.0).problem == "too_long"
    assert judge(line, [line], budget=320, accept_ratio=1.25).ok
    assert judge(line, [line], budget=319, accept_ratio=1.25).problem == "too_long"


# ---------------------------------------------------------------------------
# Script


def test_cjk_try_for_an_english_source_is_wrong_script():
    v = assert_problem("用户要求把数据库端口改为 5433。", "wrong_script")
    assert v.items == ("Han",) and "Han" in v.detail
    v = assert_problem("you: 포트 5433 으로 옮김", "wrong_script")
    assert v.items == ("Hangul",)


def test_cjk_try_for_a_cjk_source_is_fine():
    source = "you: 请把数据库迁移到端口 5433，不要用旧的。"
    assert_ok("you: 数据库迁移到端口 5433。", [source])
    japanese = "you: データベースをポート 5433 に移してください。設定を確認します。"
    assert_ok("you: データベースをポート 5433 に移動。", [japanese])
    assert_ok("you: 設定を確認してから移動する。", ["you: ポート 5433 にうつしてください"])  # kanji beside kana


def test_facts_inside_text_without_spaces():
    chinese = ["you: 请把数据库迁移到端口5433，版本v1.2发布后再说。配置在/etc/pg/config.yaml里。"]
    assert_ok("you: 数据库在端口5433，v1.2发布后，配置文件/etc/pg/config.yaml。", chinese)
    assert invented("you: 数据库在端口5432，v1.3发布，/etc/pg/x.yaml", chinese) == ["5432", "v1.3", "/etc/pg/x.yaml"]
    korean = ["you: 포트5433으로 옮겨 주세요. 설정은 config.yaml에 있습니다."]
    assert_ok("you: 포트5433으로 이동, config.yaml에서 설정", korean)
    assert invented("you: 포트5432로 이동", korean) == ["5432"]
    assert_ok("you: 端口５４３３", chinese)  # fullwidth digits read as digits
    assert invented("you: 端口５４３２", chinese) == ["5432"]


def test_a_different_cjk_script_is_still_wrong():
    assert_problem("you: 포트 5433 으로", "wrong_script", ["you: 端口 5433"])
    v = assert_problem("you: ポートを 5433 に", "wrong_script", ["you: 端口 5433"])
    assert v.items == ("Hiragana", "Katakana")


# ---------------------------------------------------------------------------
# Invented facts: numbers


def test_port_5433_written_as_5432_is_invented():
    v = assert_problem("you: move the database to port 5432 on db-prod-7", "invented")
    assert v.items == ("5432",)
    assert "5432" in v.detail
    assert_ok("you: move the database to port 5433 on db-prod-7")


@pytest.mark.parametrize("number", ["12,500", "12500", "12_500", "12'500", "12\u2009500", "12\u202f500"])
def test_thousands_separators_are_ignored(number):
    assert_ok(f"you: {number} users get the mail")


def test_thousands_separators_in_the_source_are_ignored_too():
    assert_ok("you: port 5,433", ["you: use port 5433"])
    assert_ok("you: port 5433", ["you: use port 5,433"])
    assert_problem("you: port 5,432", "invented", ["you: use port 5433"])


def test_a_number_inside_a_longer_number_is_not_found():
    assert_problem("you: port 543", "invented")  # inside 5433
    assert_problem("you: port 54", "invented", ["you: 5433 and 1543"])
    assert invented("you: 2500 users", [SOURCE]) == ["2500"]  # 12,500 is not 2500


def test_single_digit_numbers_are_not_checked():
    assert_ok("you: move the database in 3 steps, 2 of them on db-prod-7")


def test_ordinals_and_units():
    assert_ok("you: the 2nd and 3rd try failed; the 1st one worked")
    sources = ["you: lines are 512 bytes, 20 at most"]
    assert_ok("you: 512-byte lines, 20-line maximum", sources)
    assert_problem("you: 640-byte lines", "invented", sources)
    assert_problem("you: the 21st line", "invented", sources)


def test_units_do_not_hide_numbers():
    assert_ok("you: 12,500 users get it at 09:30", [SOURCE])
    assert_problem("you: 12.5k users", "invented")
    assert_problem("you: latency 120ms", "invented")
    assert_ok("you: latency 120ms", ["you: the latency is 120 ms"])


def test_decimals_dates_and_times_written_the_same_way():
    assert_ok("you: mail at 09:30 on 2026-10-08, until v1.2.1")
    assert_problem("you: mail at 09:31", "invented")
    assert_problem("you: mail on 2026-10-09", "invented")
    assert_problem("you: until v1.2.2", "invented")
    assert_ok("you: ratio 1.25", ["you: accept 1.25 times the budget"])
    assert_problem("you: ratio 1.26", "invented", ["you: accept 1.25 times the budget"])


# ---------------------------------------------------------------------------
# Invented facts: identifiers and paths


@pytest.mark.parametrize("good", ["db-prod-7", "MAX_POOL_SIZE=20", "MAX_POOL_SIZE", "fetchUserData", "config.yaml",
                                  "v1.2.1", "loader.py"])
def test_identifiers_from_the_source_pass(good):
    assert_ok(f"you: see {good} for the move")


@pytest.mark.parametrize("bad", ["db-prod-8", "MAX_POOL", "MAX_POOL_SIZE=21", "fetchUser", "fetchUserDataV2",
                                 "Config.yaml", "max_pool_size", "v2", "worker_3", "getUser", "--dry-run", ".env"])
def test_identifiers_absent_from_the_source_are_invented(bad):
    v = assert_problem(f"you: see {bad} for the move", "invented")
    assert v.items == (bad,)


@pytest.mark.parametrize("good", ["/etc/pg/config.yaml", "src/app/loader.py", "C:\\build\\out", "/etc/pg/",
                                  "app/loader.py"])
def test_paths_from_the_source_pass(good):
    assert_ok(f"you: look at {good} first")


@pytest.mark.parametrize("bad", ["/etc/pg/config.yml", "/etc/x", "src/app/main.py", "C:\\build\\in", "~/notes",
                                 "./run.sh", "src/b.py"])
def test_paths_absent_from_the_source_are_invented(bad):
    v = assert_problem(f"you: look at {bad} first", "invented")
    assert v.items == (bad,)


def test_urls_in_the_source_pass_and_others_do_not():
    assert_ok("you: setup docs at https://example.com/docs/setup?x=1.")
    assert_ok("you: setup docs at https://example.com/docs (shortened)")
    v = assert_problem("you: setup docs at https://example.org/docs", "invented")
    assert v.items == ("https://example.org/docs",)


# ---------------------------------------------------------------------------
# Invented facts: quoted strings


@pytest.mark.parametrize("good", ['"read replicas"', "“Read Replicas”", "'read   replicas'", "«read replicas»",
                                  "`read replicas`", '"keep "', '"keep … off until"', '"We decided … Friday"'])
def test_quotes_from_the_source_pass(good):
    assert_ok(f"you: {good} stays as it is")


@pytest.mark.parametrize("bad", ['"read caches"', "«write replicas»", "`replicas read`", "'keep them on'",
                                 '"keep … them on"'])
def test_quotes_absent_from_the_source_are_invented(bad):
    v = assert_problem(f"you: {bad} stays as it is", "invented")
    assert v.items == (bad,)


def test_apostrophes_are_not_quotes():
    assert_ok("you: don't move the users' mail, it's fine; rock 'n' roll")


# ---------------------------------------------------------------------------
# No false positives on ordinary text


@pytest.mark.parametrize("reply", [
    "Postgres and Friday plans: the Team agreed.",
    "HTTP APIs, IDs and PRs for the DB move.",
    "A follow-up, long-term and built-in and/or TCP/IP fix, e.g. today, i.e. soon.",
    "you: wait...then move it… and so on....",
    "you: [Decision] **move** the DB (port 5433) — done!",
])
def test_ordinary_words_are_not_facts(reply):
    assert_ok(reply)


def test_tags_and_heads_in_sources_do_not_make_checks_fail():
    sources = ["40+1|you: use port 5433 on db-prod-7", "41+1|GPT-4o: moved it to port 5433",
               "you: use port 5433 on db-prod-7", "GPT-4o: moved it"]
    assert_ok("you: use port 5433 on db-prod-7; GPT-4o: moved it.", sources)
    assert_ok("40+2|you: port 5433 on db-prod-7\n GPT-4o: moved", sources)
    assert invented("you: port 5433 GPT-5o: moved", sources) == ["GPT-5o"]


def test_a_merge_reads_all_its_sources():
    sources = ["you: move to port 5433", "Assistant: edited /etc/pg/config.yaml",
               "you: move the database to port 5433 tonight", "Assistant: I edited /etc/pg/config.yaml and restarted"]
    assert_ok("you: move to port 5433 tonight. Assistant: edited /etc/pg/config.yaml, restarted.", sources)
    assert_problem("you: move to port 5433 tonight. Assistant: edited /etc/pg/pg.conf.", "invented", sources)


def test_invented_detail_names_every_item_in_order():
    v = assert_problem('you: port 5432, db-prod-9 and /etc/x, "never again"', "invented")
    assert v.items == ("5432", "db-prod-9", "/etc/x", '"never again"')
    for item in v.items:
        assert item in v.detail


def test_find_facts_kinds():
    kinds = {(f.kind, f.text) for f in find_facts('you: port 5,433 at db-prod-7 in /etc/x, see "a b" and '
                                                  'https://x.org/a; 2nd e.g. Postgres 3')}
    assert kinds == {("number", "5,433"), ("identifier", "db-prod-7"), ("path", "/etc/x"), ("quote", '"a b"'),
                     ("url", "https://x.org/a")}


# ---------------------------------------------------------------------------
# The order of the checks


def test_checks_run_in_the_documented_order():
    long_invented = "you: port 5432 " + "x" * 700
    assert verdict(long_invented).problem == "too_long"
    assert verdict("<input>" + "x" * 700).problem == "echo"
    assert verdict("I can't help with <input>").problem == "refusal"
    assert verdict("用户 5432").problem == "wrong_script"
    assert verdict('{"a": "<input>"}').problem == "echo"
    assert verdict('{"port": 5432}').problem == "malformed"


# ---------------------------------------------------------------------------
# The scripted writer of the simulator, judged by these checks


def _message(rng: random.Random, size: int) -> str:
    sentences = [
        "Please move the database to port {p} on db-prod-{n}, not the old one.",
        "The config lives in /etc/{w}/config.yaml and the key is MAX_POOL_SIZE={n}.",
        "We decided on Friday to keep \"read replicas\" off until v{n}.{m}.1 ships.",
        "The {n:,} users on the beta list should get the email at 09:{m:02d}.",
        "Never push to main without a review, that is a rule.",
        "The build failed with ImportError in src/{w}/loader.py line {p}.",
        "Use camelCase names like fetchUserData in the client, snake_case in Python.",
        "It's fine, we'll revisit the 'cache key' question next week.",
    ]
    out = f"{rng.choice(['you', 'Ada', 'did', 'note'])}: "
    while len(out.encode()) < size:
        out += rng.choice(sentences).format(p=rng.randint(1000, 9999), n=rng.randint(2, 4000),
                                            m=rng.randint(0, 59), w=rng.choice(["alpha", "orion"])) + " "
    return out.strip()


def test_the_scripted_writers_tries_get_the_verdict_their_category_promises():
    from endless.sim.model import ChatMessage, Segment, SimRequest
    from endless.sim.writer_model import ScriptedWriter

    expected = {"empty": "empty", "echo_input": "echo", "echo_task": "echo", "refusal": "refusal"}
    seen = set()
    for seed in range(160):
        rng = random.Random(seed)
        writer = ScriptedWriter(seed=seed, invented_rate=0.3, head_rate=0.3,
                                mix={"fit": 0.5, "too_long": 0.2, "wrong_script": 0.1, "malformed": 0.2})
        message = _message(rng, rng.choice([600, 1500]))
        task = (f"Compaction: compress message {seed}\nAt most 512 bytes (about 70 words).\n{'-' * 512}\n"
                f"<input>\n{message}\n</input>")
        messages = [ChatMessage("system", "You are the agent."), ChatMessage("user", task)]
        request = SimRequest(api="openai", model="sim", segments=[Segment(task)], messages=messages, tools=[],
                             stream=False, cache_key=None, max_tokens=None, tool_choice=None)
        reply = writer.reply(request, 0.0)
        outcome = writer.last_outcome
        v = judge(reply.text, [message])
        if outcome.category == "malformed":
            want = expected[outcome.detail]
        elif outcome.category in ("too_long", "wrong_script"):
            want = outcome.category
        else:
            want = "invented" if outcome.invented else None
        assert v.problem == want, (outcome, v)
        if want == "invented":
            assert outcome.invented in v.items
        seen.add(want)
    assert seen == {None, "invented", "too_long", "wrong_script", "empty", "echo", "refusal"}


# ---------------------------------------------------------------------------
# Trim and the cut mark


def test_trim_leaves_a_fitting_text_alone():
    assert trim("you: short", 512) == "you: short"
    assert trim("a" * 512, 512) == "a" * 512


def test_trim_cuts_at_a_word_boundary_with_an_ellipsis_counted():
    text = "you: moved the database to port 5433 on db-prod-7 tonight"
    out = trim(text, 40)
    assert out == "you: moved the database to port 5433…"
    assert utf8_size(out) <= 40
    assert trim(text, 41) == "you: moved the database to port 5433…"
    assert trim(text, 42) == "you: moved the database to port 5433 on…"


def test_trim_never_cuts_inside_a_character():
    text = "you: " + "é" * 300
    out = trim(text, 100)
    assert out.endswith(ELLIPSIS) and utf8_size(out) <= 100
    assert out[:-1] == text[:len(out) - 1]
    cjk = "you: " + "数据库端口" * 60
    out = trim(cjk, 101)
    assert utf8_size(out) <= 101 and out.endswith(ELLIPSIS)
    assert utf8_size(out) >= 95  # no spaces: cut at a character, not at the tag
    assert cjk.startswith(out[:-1])


def test_trim_drops_a_dangling_comma():
    assert trim("you: one, two, three, four", 18) == "you: one, two…"


@settings(max_examples=400, deadline=None)
@given(st.text(), st.integers(min_value=3, max_value=700))
def test_trim_is_a_prefix_within_the_budget(text, budget):
    out = trim(text, budget)
    assert utf8_size(out) <= budget
    if utf8_size(text) <= budget:
        assert out == text
    else:
        assert out.endswith(ELLIPSIS)
        assert text.startswith(out[:-1])


def test_cut_mark_shows_where_the_cut_falls():
    text = "you: moved the database to port 5433"
    assert cut_mark(text, 10) == "you: moved" + CUT_MARK
    assert cut_mark("é" * 10, 5) == "éé" + CUT_MARK  # never half a character
    assert cut_mark("short", 384) == "short" + CUT_MARK
    assert utf8_prefix("日本語", 4) == "日"


# ---------------------------------------------------------------------------
# Writer tasks


@pytest.mark.parametrize("text", [
    "Compaction: compress message 41\n<input>…</input>",
    "Compaction: merge lines 40+1 and 41+1",
    "  Compaction:  compress message 0",
    "Compaction:\ncompress message 3",
    "Compaction: Merge lines 0+2 and 2+2",
])
def test_writer_tasks(text):
    assert is_writer_task(text)


@pytest.mark.parametrize("text", [
    "", None, "compress message 41", "Compaction:", "Compaction: please summarise", "compaction: compress message 1",
    "Please do the Compaction: compress message 41", "Compaction: compressed message 41",
    "Compaction: merger of lines", "you: Compaction: compress this", "Compaction compress message 41",
])
def test_not_writer_tasks(text):
    assert not is_writer_task(text)


# ---------------------------------------------------------------------------
# Tries that repeat the task's own instructions (issue 15 item 5)

from endless import prompts  # noqa: E402
from endless.writer.checks import instruction_grams, word_grams  # noqa: E402

LINE = "you: move the database to port 5433 on db-prod-7, not the old one; config in /etc/pg/config.yaml."


@pytest.mark.parametrize("name", prompts.names("writer"))
def test_each_instruction_text_repeated_is_an_echo(name):
    text = prompts.text(name).format(only="", budget=512, words=70, ruler="-" * 40, input=LINE, job="compress "
                                     "message 4", first=0, last=1, size=700, target=384, cut=LINE[:40],
                                     script="Han", items="5432", problem="it is empty", count=2, form="",
                                     jobs="", key="1")
    if len(word_grams(text.replace(LINE, ""))) < 4:
        pytest.skip("too few words to measure")
    assert verdict(text, [LINE]).problem == "echo"


def test_the_echoed_retry_message_is_rejected():
    junk = ("That reply is not a usable memory line (it repeats the task's own input tag). Write the line "
            "itself: one paragraph describing the input, with no tags, no task words and no comment.")
    v = assert_problem(junk, "echo")
    assert v.detail == "it repeats the task's instructions instead of describing the input"
    half = "you: move the database to port 5433 on db-prod-7. Write the line itself: one paragraph describing " \
           "the input, with no tags, no task words and no comment."
    assert_problem(half, "echo")


def test_a_faithful_line_with_a_phrase_of_the_instructions_passes():
    # "ran the tests in src" and "the person's own words" are runs of the writer's section
    assert_ok("you: move the database to port 5433 on db-prod-7, not the old one; Ada ran the tests in src "
              "and kept the person's own words about the config in /etc/pg/config.yaml untouched today.")


def test_a_message_that_quotes_the_instructions_may_be_summarised_with_them():
    quoted = ("you: our writer prompt says 'Write the line itself: one paragraph describing the input, with no "
              "tags, no task words and no comment.' Is that clear enough?")
    assert_ok("you: asked if the writer prompt 'Write the line itself: one paragraph describing the input, "
              "with no tags, no task words and no comment.' is clear enough", [quoted])


def test_instruction_runs_stop_at_placeholders():
    grams = instruction_grams()
    assert ("write", "the", "line", "itself", "one") in grams
    assert not any("budget" in g for g in grams), "a placeholder's name is not instruction text"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcxyzABCXYZ", min_size=1, max_size=12), st.integers(0, 500))
def test_a_word_of_letters_holds_the_facts_the_rules_find(token: str, start: int) -> None:
    """The quick answer for a token of ASCII letters (most words) is the one the full rules give:
    an identifier when a capital follows a small letter, else nothing."""
    from endless.writer.facts import _token_facts, _token_facts_by_rules

    quick, ruled = [], []
    _token_facts(token, start, quick)
    _token_facts_by_rules(token, start, ruled)
    assert quick == ruled
    assert bool(quick) == any(a.islower() and b.isupper() for a, b in zip(token, token[1:]))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ1-_ßÉéǅΣσİıﬀ ·"), max_size=8) | st.text(max_size=8))
def test_the_inner_capital_shortcut_answers_as_the_walk(token: str) -> None:
    """A small letter followed by a capital, found by walking every pair; the shortcut for words with
    no capital after their first letter (or no small letter) must never say otherwise, in any script."""
    from endless.writer.facts import _has_inner_capital

    assert _has_inner_capital(token) == any(a.islower() and b.isupper() for a, b in zip(token, token[1:]))


_TEXT_PIECES = st.sampled_from(["the", "Tuesday", "HTTP", "iPhone", "A", "x", "1,000", "12,345,678", "1\u2009000",
                                "3.5", "v2", "5433", "端口", "5433/tcp", "~/src/app.py", "https://a.io/x", "\"quoted\"",
                                "«Quote»", "…", "...", ",", " ", "  ", "\n", "-", "_", "'", "’", "Ｐｏｒｔ", "ß", "É",
                                "follow-up", "10-minute", "e.g.", "(", ")", "`code`", "1,000abc", "abc1,000", "O'Brien"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_TEXT_PIECES, max_size=14).map("".join) | st.text(max_size=40))
def test_facts_found_past_plain_words_are_the_facts_of_every_token(text: str) -> None:
    """Passing over plain words in the regular expression finds what asking every token finds."""
    from endless.writer import facts

    spaced = facts._blank_ellipses(text.translate(facts._FULLWIDTH))
    every: list = []
    for match in facts._TOKEN.finditer(spaced):
        facts._token_facts(match.group(0), match.start(), every)
    quick = [f for f in facts.find_facts(text) if f.kind != "quote"]
    assert quick == every


_HAY_PIECES = st.sampled_from(["word", " ", "\n", "5,433", "12'345'678", "1\u2009000", "1\u00a0000", "...", "…", "..",
                               "Ｐｏｒｔ１２３", "’quoted’", "«it»", "“x”", "端口", "ひらがな", "カタカナ", "한국어",
                               "ﬀ", "ß", "İ", "Σ", "id+3|", "0+1| ", "user: ", "\t", "1,00", "a1,000b", "…...",
                               "..…", "．．．", "\uff5e\uff01", "\u3000", "　", "  "])


@settings(max_examples=400, deadline=None)
@given(st.lists(_HAY_PIECES, max_size=12).map("".join) | st.text(max_size=30))
def test_a_source_haystack_is_the_one_every_step_on_every_text_gives(text: str) -> None:
    """The haystack of a source, with its steps skipped where they change nothing (an ASCII text, no
    ellipsis, no grouped number), equals the one made by running every step on every text."""
    import re

    from endless.writer import facts

    def unsep(t: str) -> str:
        return facts._THOUSANDS.sub(lambda m: "".join(c for c in m.group(0) if c not in facts._SEP_CHARS), t)

    def blank(t: str) -> str:
        return facts._ELLIPSES.sub(lambda m: " " * len(m.group(0)), t)

    def fold(t: str) -> str:
        return " ".join(unsep(t.translate(facts._FULLWIDTH)).translate(facts._QUOTE_MAP).split()).casefold()

    lines = [facts.strip_heads(line) for line in text.splitlines()]
    raw = "\n".join(lines)
    hay, has_lines = facts._source_hay.__wrapped__(text)
    assert has_lines == bool(lines)
    assert hay.plain == blank(unsep(raw.translate(facts._FULLWIDTH)))
    assert hay.folded == fold(raw) and facts._fold(text) == fold(text)
    assert hay.scripts == frozenset(name for name, pattern in facts.SCRIPT_PATTERNS.items() if pattern.search(raw))
    assert facts._blank_ellipses(facts._widths(text)) == blank(text.translate(facts._FULLWIDTH))
    assert facts._unsep(text) == unsep(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(_HAY_PIECES, max_size=12).map("".join) | st.text(alphabet=" \t\nab\x0b", max_size=20))
def test_a_text_s_lines_have_each_run_of_blanks_as_one_space(text: str) -> None:
    """The offline writer's lines, with the blanks left alone where each run is one space already,
    are those of replacing every run."""
    import re

    from endless.writer import facts, offline

    expected = [line for line in (re.sub(r"[ \t]+", " ", facts.strip_heads(raw)).strip()
                                  for raw in text.splitlines()) if line]
    assert offline._lines(text) == expected
