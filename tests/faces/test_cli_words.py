"""The CLI in the user's words (issue 18, item 3): counts, names of commands and flags, forms of ids.

Each test runs the real command line (``main()`` or a subprocess) and holds
the exact text a person reads.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from commands import endless_command
from endless.cli import main
from endless.core.words import agree, count
from endless.faces.cli.doctor import Report, render
from endless.writer.pace import Progress

import rpc_fixtures as F


# -- counts ------------------------------------------------------------------------------------


def test_a_count_takes_the_noun_and_the_verb_it_needs():
    assert count(1, "warning") == "1 warning"
    assert count(0, "error") == "0 errors"
    assert count(3, "file or folder", "files or folders") == "3 files or folders"
    assert count(20000, "message", grouped=True) == "20,000 messages"
    assert f"{count(1, 'message')} {agree(1, 'waits for its line', 'wait for their lines')}" == \
        "1 message waits for its line"
    assert f"{count(3, 'message')} {agree(3, 'waits for its line', 'wait for their lines')}" == \
        "3 messages wait for their lines"


def test_doctor_counts_its_findings_in_words():
    report = Report()
    report.add("a", "ok", "fine")
    report.add("b", "warning", "so-so")
    report.add("c", "error", "broken")
    assert render(report).splitlines()[-1] == "error: 1 ok, 1 warning, 1 error"
    report.add("d", "warning", "again")
    assert render(report).splitlines()[-1] == "error: 1 ok, 2 warnings, 1 error"


def test_the_catch_up_sentence_agrees_with_one_line():
    one = Progress(lines_left=1, messages_without_line=1, calls_per_minute=0.0, seconds_left=30.0)
    assert one.sentence() == ("1 line left to write (1 message without a line of its own), "
                              "0.0 writer calls a minute, done in about 30 s")
    many = Progress(lines_left=3, messages_without_line=2, calls_per_minute=1.5, seconds_left=30.0)
    assert many.sentence() == ("3 lines left to write (2 messages without a line of their own), "
                               "1.5 writer calls a minute, done in about 30 s")


def test_import_says_one_turn(tmp_path: Path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    (tmp_path / "xdg").mkdir()
    source = tmp_path / "one.jsonl"
    source.write_text('{"role": "user", "content": "hello", "at": 1772442060, "session": "s"}\n'
                      '{"role": "assistant", "content": "hi", "at": 1772442061, "session": "s"}\n')
    env = {**os.environ, "ENDLESS_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env.pop("ENDLESS_WRITER_ROUTE", None)
    argv = [*endless_command(), "import", "--workspace", str(workspace), str(source)]
    first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    said = first.stdout.splitlines()[0]
    assert said.startswith("imported 1 turn (2 messages) into memory ")
    assert said.endswith("; 0 turns were there already")
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert again.stdout.splitlines()[0].endswith("; 1 turn was there already"), again.stdout
