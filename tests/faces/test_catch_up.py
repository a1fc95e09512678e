"""``endless catch-up`` and the import's own catch-up: the lines of imported messages get written without a chat."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from commands import endless_command, fresh_home


@pytest.fixture()
def place(tmp_path: Path):
    home, workspace, env = fresh_home(tmp_path)
    source = tmp_path / "chat.jsonl"
    with open(source, "w") as handle:
        for k in range(300):
            handle.write(json.dumps({"role": "user", "content": f"question {k}: how do refunds change the ledger "
                                     f"totals of region {k % 7}?", "at": 1_700_000_000 + 60 * k}) + "\n")
            handle.write(json.dumps({"role": "assistant", "content": f"answer {k}: a refund is a negative row, so "
                                     "the totals drop by its amount"}) + "\n")
    return workspace, env, source


def run(place, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    workspace, base_env, _ = place
    return subprocess.run(endless_command() + list(args), capture_output=True, text=True, cwd=workspace,
                          env={**base_env, **(env or {})}, timeout=300)


def lines_left(place) -> bool:
    """Whether ``endless doctor`` says lines are left to write (its own count, not the command's)."""
    findings = json.loads(run(place, "doctor", "--json").stdout)["findings"]
    return any("lines left to write" in f["message"] or "line left to write" in f["message"] for f in findings)


def test_catch_up_writes_every_line_an_import_left_and_then_has_nothing_to_do(place) -> None:
    imported = run(place, "import", str(place[2]), "--json")
    assert imported.returncode == 0, imported.stderr
    summary = json.loads(imported.stdout)
    left = summary["writer"]["lines"]
    assert left > 0 and summary["catchUp"] == {"how": "left", "lines": left}
    assert lines_left(place)
    done = run(place, "catch-up", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["writer"] == "offline" and result["left"] == 0 and result["written"] > 0
    assert result["calls"] == 0  # no model
    assert not lines_left(place)
    again = run(place, "catch-up")
    assert again.returncode == 0 and "wrote 0 lines" in again.stdout and "nothing left to write" in again.stdout


def test_with_import_catch_up_on_the_import_writes_its_own_lines(place) -> None:
    imported = run(place, "import", str(place[2]), env={"ENDLESS_IMPORT_CATCH_UP": "true"})
    assert imported.returncode == 0, imported.stderr
    assert "imported 300 turns (600 messages)" in imported.stdout
    assert "by the offline writer in" in imported.stdout
    done = json.loads(run(place, "catch-up", "--json").stdout)
    assert done["written"] == 0 and done["left"] == 0  # the import wrote them all


def test_catch_up_says_what_is_wrong_in_the_persons_words(place) -> None:
    nothing = run(place, "catch-up")
    assert nothing.returncode == 2 and "has no memory yet" in nothing.stderr
    assert run(place, "import", str(place[2])).returncode == 0
    model = run(place, "catch-up", "--writer", "model")
    assert model.returncode == 2 and "--writer model needs the writer_route setting" in model.stderr
    assert json.loads(run(place, "catch-up", "--json").stdout)["written"] > 0  # the refused run wrote nothing
