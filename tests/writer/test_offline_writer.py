"""The offline writer: deterministic lines within the budget that pass the checks (DESIGN §3.3, §3.4)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from endless.writer.checks import ELLIPSIS, clean, judge, utf8_size
from endless.writer.facts import find_facts
from endless.writer.offline import offline_leaf, offline_merge

TOPICS = ["lunch", "the weather", "a film", "the garden", "a book", "the trains", "music", "football", "tea",
          "the office", "a holiday", "the news", "cooking", "the neighbours", "a podcast", "bicycles"]


def filler(count: int, start: int = 0) -> str:
    """``count`` different sentences without facts."""
    return "".join(f"We talked about {TOPICS[(start + k) % len(TOPICS)]} for a while, "
                   f"{'and then some more' if (start + k) // len(TOPICS) % 2 else 'which was nice'}. "
                   for k in range(count))


def passes(line: str, sources: list[str], budget: int = 512) -> None:
    v = judge(line, sources, budget, 1.0)
    assert v.ok, (v, line)
    assert utf8_size(line) <= budget


def person_message() -> str:
    return ("you: Move the database to port 5433 tonight. " + filler(8) +
            "Never push to main without a review. " + filler(8, 8) +
            "The key is MAX_POOL_SIZE=20 in /etc/pg/config.yaml, says Ada Lovelace.")


# ---------------------------------------------------------------------------
# Messages


def test_a_message_that_fits_is_kept_whole_on_one_line():
    source = "you: move the DB to port 5433.\nThen restart db-prod-7."
    assert offline_leaf(source) == "you: move the DB to port 5433. Then restart db-prod-7."
    assert offline_leaf("41+1|you: short") == "you: short"


def test_the_line_is_deterministic():
    source = person_message()
    lines = {offline_leaf(source, budget) for budget in (512, 512, 512)}
    assert len(lines) == 1
    assert offline_merge(source, source, 300) == offline_merge(source, source, 300)


@pytest.mark.parametrize("budget", [64, 100, 200, 384, 512, 1000])
def test_the_line_is_within_the_budget_and_passes_the_checks(budget):
    source = person_message()
    line = offline_leaf(source, budget)
    assert utf8_size(line) <= budget
    assert utf8_size(line) >= budget * 0.6  # the budget is used, not wasted
    passes(line, [source], budget)


@pytest.mark.parametrize("tag", ["you", "Assistant", "GPT-4o", "colleague", "note", "Claude Code"])
def test_the_tag_is_kept(tag):
    source = f"{tag}: " + filler(20)
    line = offline_leaf(source, 200)
    assert line.startswith(f"{tag}: We talked about lunch")
    assert line.endswith(ELLIPSIS)


def test_the_persons_words_come_first():
    line = offline_leaf(person_message(), 512)
    assert line.startswith("you: Move the database to port 5433 tonight.")
    assert "Never push to main without a review." in line  # a rule, deep in the message
    assert "MAX_POOL_SIZE=20" in line and "/etc/pg/config.yaml" in line


def test_rules_are_kept_before_filler_when_room_is_short():
    line = offline_leaf(person_message(), 160)
    assert line.startswith("you: Move the database to port 5433 tonight.")
    assert "Never push to main without a review." in line
    assert "We talked about the weather" not in line


def test_a_tag_like_line_inside_a_message_stays_the_persons_words():
    source = "you: fix the build please.\nError: ENOENT at /x/y.py\n" + filler(12) + "\nNever merge without CI."
    line = offline_leaf(source, 200)
    assert line.startswith("you: fix the build please. Error: ENOENT at /x/y.py")
    assert line.endswith("Never merge without CI.")
    assert line.count("you:") == 1


def test_facts_of_left_out_sentences_are_listed():
    source = ("Assistant: I looked into it. " + filler(10) +
              "The port is 5433 and the file is /etc/pg/config.yaml, owned by Ada Lovelace.")
    line = offline_leaf(source, 160)
    assert line.startswith("Assistant: I looked into it.")
    for item in ("5433", "/etc/pg/config.yaml", "Ada Lovelace"):
        assert item in line, line
    passes(line, [source], 160)


def test_without_room_the_opening_is_cut_with_an_ellipsis():
    source = "you: " + "please keep every word of this long sentence about the migration plan " * 10
    line = offline_leaf(source, 80)
    assert line.startswith("you: please keep every word") and line.endswith(ELLIPSIS)
    assert utf8_size(line) <= 80


def test_cjk_is_never_cut_inside_a_character():
    source = "you: " + "请把数据库迁移到端口5433，不要用旧的。" * 40
    for budget in range(40, 130, 7):
        line = offline_leaf(source, budget)
        line.encode("utf-8")
        assert utf8_size(line) <= budget
        passes(line, [source], budget)
        assert line.startswith("you: 请把")


def test_a_trace_keeps_what_was_done_to_what_did_lines_first():
    steps = []
    for i in range(6):
        steps.append(f"did: read src/mod{i}.py looking for the import of the loader module and its callers")
        steps.append(f"result: {filler(3, 3 * i)}")
    steps.append("said: The loader moved; I will update the imports.")
    steps.append("did: edited src/app/main.py to import load from app.io")
    steps.append("result: 12 passed in 0.81s")
    trace = "\n".join(steps)
    line = offline_leaf(trace, 512)
    passes(line, [trace])
    assert line.startswith("did: read src/mod0.py")
    for i in range(6):
        assert f"did: read src/mod{i}.py" in line
    assert "did: edited src/app/main.py" in line
    assert line.count("did:") == 7
    assert "12" in line and "0.81" in line


def test_a_trace_keeps_the_agents_own_words_beside_shortened_commands():
    steps = []
    for i in range(3):
        steps.append(f"said: Step {i}: the backup copy number {i} goes to the storage box u38120{i}.")
        steps.append(f"did: terminal {{\"cmd\": \"ssh -p 2222 spoke@203.0.113.47 'sqlite3 /home/spoke/db{i}.db "
                     f".backup /tmp/copy{i}.db && gzip -f /tmp/copy{i}.db && scp -q -P 23 /tmp/copy{i}.db.gz "
                     f"u38120{i}@u38120{i}.your-storagebox.de:backups/'\"}}")
        steps.append("result: " + "\n".join(f"{k:>4} | copied block {k} of the database" for k in range(12)))
    trace = "\n".join(steps)
    line = offline_leaf(trace, 512)
    passes(line, [trace])
    for i in range(3):
        assert f"said: Step {i}: the backup copy number {i} goes to the storage box u38120{i}." in line, line
        assert f"did: terminal {{\"cmd\": \"ssh -p 2222" in line
    assert "your-storagebox.de:backups" not in line, "each command shortened to leave room for what was said"


def test_listed_items_leave_out_flags_keys_and_numbers_without_meaning():
    source = ("Assistant: I set up the server for you. " + filler(10) +
              'I ran pytest -q -k today and {"cmd": "ls"} printed 18 lines. ' + filler(4, 10) +
              "We take 1250 because of the space. " +
              "The server costs 4.59 euros a month and listens on port 2222.")
    line = offline_leaf(source, 200)
    passes(line, [source], 200)
    listed = line.split(ELLIPSIS)[-1]
    assert "4.59 euros" in listed and "2222" in listed and "1250" in listed, line
    assert "1250 because" not in listed, "a number keeps its unit, not the next word whatever it is"
    for noise in ("-q", "-k", '"cmd"', " 18,"):
        assert noise not in listed, (noise, line)


def test_a_pasted_table_shows_its_first_rows_not_a_list_of_its_numbers():
    rows = ["date;time;name;phone"] + [f"2027-01-{k % 28 + 1:02d};{9 + k % 8}:00;Customer {k};0341 555 {1000 + k}"
                                       for k in range(60)]
    source = "you: Here is my old booking spreadsheet. Can we import it?\n" + "\n".join(rows)
    line = offline_leaf(source, 512)
    passes(line, [source])
    assert line.startswith("you: Here is my old booking spreadsheet. Can we import it? date;time;name;phone "
                           "2027-01-01;9:00;Customer 0;0341 555 1000"), line
    assert "1059" not in line and "Customer 59" not in line, "nothing picked from the table's last rows"
    other = "Assistant: " + filler(30)
    merged = offline_merge(line, other, 512)  # a merge reads the line, its rows folded onto one line
    passes(merged, [line, other])
    assert merged.startswith("you: Here is my old booking spreadsheet. Can we import it? date;time;name;phone "
                             "2027-01-01;9:00;Customer 0"), merged
    assert "2027-01-01, 9:00" not in merged, "no list of a folded table's numbers"


def test_unbalanced_quotes_and_cut_numbers_still_pass():
    source = ('you: the "first quote never closes. ' + filler(6) + 'then "second one" and 12,345,678 rows '
              + "'odd quote " + filler(6, 6) + '" and a closing one.')
    for budget in (60, 100, 160, 300, 512):
        passes(offline_leaf(source, budget), [source], budget)


# ---------------------------------------------------------------------------
# Merges


def test_a_merge_that_fits_joins_the_halves_with_a_newline():
    assert offline_merge("40+1|you: port 5433", "41+1|Assistant: done") == "you: port 5433\nAssistant: done"


def test_a_merge_keeps_both_halves_and_their_tags():
    left = "12+4|" + person_message()
    right = "16+4|Assistant: I changed /etc/pg/config.yaml to port 5433 and restarted db-prod-7. " + filler(10)
    for budget in (128, 256, 512):
        line = offline_merge(left, right, budget)
        passes(line, [left, right], budget)
        first, second = line.split("\n")
        assert first.startswith("you: Move the database")
        assert second.startswith("Assistant: I changed")
        assert abs(utf8_size(first) - utf8_size(second)) <= budget * 0.25  # a fair share each
    line = offline_merge(left, right, 512)
    assert "Never push to main" in line and "/etc/pg/config.yaml" in line and "db-prod-7" in line


def test_a_short_half_leaves_its_share_to_the_other():
    left = "you: port 5433."
    right = "Assistant: " + filler(20)
    line = offline_merge(left, right, 300)
    first, second = line.split("\n")
    assert first == "you: port 5433."
    assert utf8_size(line) > 280
    passes(line, [left, right], 300)


def test_a_quotation_mark_pairing_across_the_halves_is_blanked_not_the_whole_line():
    left = 'you: the "first quote never closes, port 5433 on db-prod-7'
    right = 'Assistant: restarted it" and it works'
    line = offline_merge(left, right)
    passes(line, [left, right])
    passes(line, [right, left])
    assert line == "you: the first quote never closes, port 5433 on db-prod-7 Assistant: restarted it and it works"


def test_merge_inputs_with_several_tags_keep_the_persons_words_first():
    left = "you: Use port 5433 for everything. " + filler(4) + "\nAssistant: " + filler(6, 4) + "Done on db-prod-7."
    right = "did: ran migrate.sh on db-prod-7\nresult: " + filler(8) + "\nsaid: all good"
    line = offline_merge(left, right, 300)
    passes(line, [left, right], 300)
    assert line.startswith("you: Use port 5433 for everything.")
    assert "Assistant:" in line and "did: ran migrate.sh on db-prod-7" in line


# ---------------------------------------------------------------------------
# Any input passes the checks

ALPHABET = ("abcdefgXYZ0123456789 _-./\\:,;'\"`«»“”‘’…!?()[]{}<>|+=#@$%éüß日本語カナひらがな한국어 \n\t"
            "\u2009😀")
SPECIAL = ["5,433", "5433", "port", "you:", "Assistant:", "did:", "result:", "said:", "getUser", "src/a.py",
           "/etc/x", "C:\\x", '"quoted words"', "'single'", "«angle»", "...", "…", "v1.2.3", "2nd", "10:30",
           "2026-10-08", "https://example.com/a?b=1", "I can't help", "<input>", "Compaction:", "```", "{}", "[1]",
           "e.g.", "0+1|", "41+1|", "12'345", "1_000"]
WORDS = st.one_of(st.text(alphabet=ALPHABET, min_size=1, max_size=12), st.sampled_from(SPECIAL))
TEXTS = st.lists(WORDS, min_size=1, max_size=120).map(" ".join)
TAGS = st.sampled_from(["you: ", "Assistant: ", "GPT-4o: ", "did: ", "note: ", ""])
BUDGETS = st.sampled_from([48, 64, 100, 200, 512])


def has_content(text: str) -> bool:
    return any(c.isalnum() for c in clean(text))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(TAGS, TEXTS, BUDGETS)
def test_any_message_gives_a_line_that_passes_the_checks(tag, text, budget):
    source = tag + text
    assume(has_content(source))
    line = offline_leaf(source, budget)
    passes(line, [source], budget)
    assert offline_leaf(source, budget) == line


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(TAGS, TEXTS, TAGS, TEXTS, BUDGETS)
def test_any_merge_gives_a_line_that_passes_the_checks(tag1, text1, tag2, text2, budget):
    left, right = tag1 + text1, tag2 + text2
    assume(has_content(left) and has_content(right))
    line = offline_merge(left, right, budget)
    passes(line, [left, right], budget)
    passes(line, [right, "you: unrelated", left], budget)  # the order of the sources does not matter


def test_realistic_messages_keep_most_of_their_facts():
    rng = random.Random(7)
    kept = total = 0
    for _ in range(40):
        sentences = [
            f"Please move the database to port {rng.randint(1000, 9999)} on db-prod-{rng.randint(2, 99)}.",
            f"The config lives in /etc/{rng.choice(['alpha', 'orion'])}/config.yaml.",
            f"We decided to keep \"read replicas\" off until v{rng.randint(1, 9)}.{rng.randint(0, 9)}.1 ships.",
            filler(1, rng.randint(0, 15)), filler(1, rng.randint(0, 15)),
        ]
        source = "you: " + " ".join(rng.choice(sentences) for _ in range(14))
        line = offline_leaf(source, 512)
        passes(line, [source])
        facts = {f.text for f in find_facts(source) if f.kind != "quote"}
        total += len(facts)
        kept += sum(1 for fact in facts if fact in line)
    assert kept / total >= 0.8
