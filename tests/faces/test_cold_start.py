"""The read commands load only what they use (issue 16): no simulator, demo, SDK, web server or tokenizer.

Each command runs in a fresh interpreter against a real memory; the modules it
loaded are listed after it returns.  ``endless --version`` loads nothing of
the faces at all.
"""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

import rpc_fixtures as F

HEAVY = ("endless.sim", "endless.demo", "endless.llm", "endless.writer.pool", "endless.faces.rpc",
         "endless.faces.hermes", "openai", "anthropic", "httpx", "httpx2", "starlette", "uvicorn", "mcp",
         "tiktoken", "rich", "yaml", "asyncio", "filelock")
PROBE = ("import sys, json\n"
         "from endless.cli import main\n"
         "try:\n"
         "    code = main(sys.argv[1:])\n"
         "except SystemExit as exc:\n"
         "    code = exc.code\n"
         "sys.stdout.flush()\n"
         "sys.stderr.write('\\nMODULES ' + json.dumps({'code': code, 'modules': sorted(sys.modules)}) + '\\n')\n")


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("cold")
    ws, _ = F.built_workspace(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    env.update(ENDLESS_HOME=str(root), ENDLESS_CONFIG=str(root / "no-config.toml"))
    return ws, env


def loaded(place, *argv: str) -> tuple[int, list[str]]:
    ws, env = place
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ws, env=env,
                          timeout=120)
    line = done.stderr.rsplit("MODULES ", 1)[1]
    found = orjson.loads(line)
    return found["code"], found["modules"]


@pytest.mark.parametrize("argv", [("search", "zebracrossing"), ("search", "/zebra.*/", "--json"), ("view",),
                                  ("zoom", "0", "2"), ("date", "3"), ("history", "--limit", "3"), ("memories",),
                                  ("zoom", "0+2"), ("completion", "bash"), ("completion", "zsh"),
                                  ("completion", "words", "--", "vi"), ("completion", "words", "--", "zoom", "--p")])
def test_a_read_command_loads_no_heavy_module(place, argv):
    code, modules = loaded(place, *argv)
    assert code == 0, argv
    heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == [], f"endless {' '.join(argv)} loaded {heavy}"


def test_the_version_loads_no_command(place):
    code, modules = loaded(place, "--version")
    assert code == 0
    ours = sorted(m for m in modules if m.startswith("endless."))
    assert ours == ["endless.cli"], ours


def test_a_reader_that_leaves_early_gets_no_traceback(place):
    """``endless view | head -1``: the pipe closes while the command writes; it ends quietly."""
    ws, env = place
    for argv in (("view",), ("history",), ("search", "zebracrossing")):
        proc = subprocess.Popen([sys.executable, "-c", "import sys; from endless.cli import main; "
                                 "sys.exit(main(sys.argv[1:]))", *argv], cwd=ws, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.read(1)  # the reader takes one byte, then goes away
        proc.stdout.close()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, (argv, err)
