"""``endless demo`` in a clean environment: no key, no network, its own folder, a story a person can check.

The story's facts are checked against the written conversation: the planted
fact recalled word for word, the commands it prints run as printed, no
internal diagnostics, the temporary memory gone after exit without ``--keep``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from endless.demo import conversation


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ENDLESS_", "OPENAI", "ANTHROPIC", "XDG_")) and not k.endswith("_PROXY")}
    env.update(HOME=str(home), NO_PROXY="*", HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
               PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""), COLUMNS="80")
    return env


def _demo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "endless.cli", "demo", *args], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("demo")
    env = _env(tmp_path)
    folder = tmp_path / "demo"
    done = _demo(env, "--no-serve", "--keep", "--dir", str(folder))
    assert done.returncode == 0, done.stderr[-3000:]
    return done, env, folder, tmp_path


def test_the_story_recalls_the_day_one_fact_word_for_word(kept):
    done, _, folder, tmp_path = kept
    out = done.stdout
    turns = conversation.load()
    fact = next(f for t in turns for f in t.facts)
    planted = next(t for t in turns if fact in t.facts)
    asked = next(t for t in turns if t.look)
    assert planted.day == turns[0].day and asked.day == turns[-1].day != planted.day
    answer = next(line for line in out.splitlines() if line.startswith("  Assistant: "))
    assert fact in answer, "the answer quotes the day-one fact as the person wrote it"
    assert f"✓ «{fact}»" in out
    assert "> recall_search(" in out and "> zoom(" in out and "> date(" in out
    assert f"Replayed {len(turns)} turns" in out
    assert "[endless." not in out and "[endless." not in done.stderr, "no internal diagnostics"
    assert "[[" not in out
    assert len(list((folder / "memories").iterdir())) == 1, "one demo memory, in the folder the demo named"
    assert not (tmp_path / "home" / ".local" / "share" / "endless").exists(), "the user's memories untouched"
    assert "writer calls: 0. Here the offline writer" in out
    sent = re.search(r"the last turn sent ([\d,]+) tokens.*? the history it stands for is ([\d,]+) tokens", out)
    assert sent and int(sent[1].replace(",", "")) < int(sent[2].replace(",", "")), "the request is smaller"
    share = re.search(r"prefix cache share: ([\d.]+)% .*?median; ([\d.]+)% at the lowest\. .*? "
                      r"The lowest, turn \d+, \w+", out)
    assert share and 50 < float(share[1]) <= 100 and float(share[2]) <= float(share[1]), "each figure with its sentence"


def test_the_printed_commands_run_as_printed(kept):
    done, env, folder, _ = kept
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Explore this memory with the CLI"))
    printed = [line.strip() for line in lines[start + 1:] if line.startswith("  ENDLESS_HOME=")]
    assert len(printed) == 4 and all(str(folder) in command for command in printed)
    turns = conversation.load()
    fact = next(f for t in turns for f in t.facts)
    expected = {"view": "0+", "search": fact.split()[-1], "zoom": fact, "history": turns[-1].person[:40]}
    for command in printed:
        ran = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=120,
                             cwd=str(Path(env["HOME"])))
        assert ran.returncode == 0, (command, ran.stderr[-2000:])
        word = command.split(" endless ", 1)[1].split()[0]
        assert expected[word] in ran.stdout, (command, ran.stdout[:1500])


def test_without_keep_the_memory_is_served_then_removed_on_exit(tmp_path):
    """The default run: the story, the History page served on the demo memory, nothing left after SIGTERM."""
    env = _env(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env["TMPDIR"] = str(tmp)
    demo = subprocess.Popen([sys.executable, "-m", "endless.cli", "demo", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in demo.stdout:  # the story, line by line, until the page is served
            seen.append(line)
            if line.startswith("Serving it until Ctrl-C"):
                break
        out = "".join(seen)
        folder = Path(out.split("The demo memory lives in ", 1)[1].split(" (", 1)[0])
        assert folder.parent == tmp and (folder / "memories").is_dir(), "the memory exists while it is served"
        assert "removed on exit; --keep keeps it" in out
        url = next(line.split()[2] for line in seen if line.startswith("History page: "))
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # the page's cookie
        with browser.open(url, timeout=30) as page:
            assert page.status == 200 and "<html" in page.read().decode().lower()
        demo.send_signal(signal.SIGTERM)
        rest, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 143, err[-2000:]
    assert list(tmp.iterdir()) == [], "nothing left behind in $TMPDIR"
    assert "[endless." not in out + rest + err


def test_a_busy_port_is_told_before_the_replay(tmp_path):
    env = _env(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env["TMPDIR"] = str(tmp)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = _demo(env, "--port", str(port))
    assert done.returncode == 1
    assert f"port {port} is already in use" in done.stderr and "--port 0" in done.stderr
    assert "Replayed" not in done.stdout and list(tmp.iterdir()) == []
