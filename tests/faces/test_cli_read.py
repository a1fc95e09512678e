"""The CLI read commands (issue 8): memories, view, zoom, date, search, history.

``--json`` prints exactly the value the host RPC answers; plain output is for
people; data goes to stdout, diagnostics to stderr; exit codes 0 / 1 (not
found) / 2 (bad usage).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from endless.cli import main
from endless.faces.rpc import create_app, credential

import rpc_fixtures as F  # noqa: E402
from paths import REPO



@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-read")
    ws, mid = F.built_workspace(root)
    return root, ws, mid


@pytest.fixture
def env(place, monkeypatch):
    root, ws, mid = place
    for key in list(os.environ):
        if key.startswith("ENDLESS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("ENDLESS_HOME", str(root))
    monkeypatch.setenv("ENDLESS_CONFIG", str(root / "no-config.toml"))
    monkeypatch.setenv("ENDLESS_ZOOM_PAGE_CHARS", "1000")
    monkeypatch.chdir(ws)
    return root, ws, mid


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def rpc_value(root: Path, method: str, **args):
    app = create_app(F.small_settings(), root=root)
    with TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 1),
                    headers=credential.auth_headers(root)) as c:
        body = c.post(f"/api/endless.{method}", json={"type": "client-request", "rpcId": 1,
                                                      "method": f"endless.{method}", "payload": {"args": args}}).json()
    assert body["result"]["ok"], body
    return body["result"]["value"]


@pytest.mark.parametrize("argv,method,args", [
    (["memories"], "memories", {}),
    (["view"], "view", {}),
    (["zoom", "0", "4"], "zoom", {"id": 0, "n": 4}),
    (["zoom", "28", "1", "--page", "2"], "zoom", {"id": 28, "n": 1, "page": 2}),
    (["search", "ZEBRAcrossing"], "search", {"query": "ZEBRAcrossing"}),
    (["search", "/zebra\\w+/", "--limit", "1"], "search", {"query": "/zebra\\w+/", "limit": 1}),
    (["history", "--before", "20", "--limit", "4"], "history", {"before": 20, "limit": 4}),
    (["history"], "history", {}),
    (["history", "--from", "3", "--limit", "2"], "history", {"from": 3, "limit": 2}),
    (["history", "--since", "2026-09-23"], "history", {"since": "2026-09-23"}),
])
def test_json_is_the_rpc_value(env, capsys, argv, method, args):
    root, _, mid = env
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    if method != "memories":
        args = {"memoryId": mid, **args}
    assert orjson.loads(out) == rpc_value(root, method, **args)


def test_plain_output(env, capsys):
    root, ws, mid = env
    code, out, _ = run(capsys, "memories")
    assert code == 0 and out.startswith(mid) and "60 turns" in out and str(ws) in out
    code, out, _ = run(capsys, "view")
    view = rpc_value(root, "view", memoryId=mid)["lines"]
    assert code == 0 and out.count("\n") == len(view)
    assert out.splitlines()[0].startswith(f"0+{view[0]['n']}|")
    code, out, _ = run(capsys, "zoom", "11", "1")
    assert code == 0 and out.splitlines()[1] == "Please keep this verbatim: " + F.SCRIPT
    assert "message 11 · user · «Garden notes»" in out
    code, out, _ = run(capsys, "zoom", "28", "1")
    assert "page 1 of" in out.splitlines()[0]
    code, out, _ = run(capsys, "date", "11")
    assert code == 0 and "2026" in out
    code, out, err = run(capsys, "search", "zebracrossing")
    # hits named as the recall_search tool names them (ID+0), not by a bare number
    assert code == 0 and [line.split(" ")[0] for line in out.splitlines()] == ["93+0", "15+0"]
    code, out, err = run(capsys, "history", "--limit", "2")
    assert code == 0 and "— turn 58" in out and "— turn 59" in out and "— turn 57" not in out
    assert "--before 58" in err and "--before" not in out


def test_memory_chosen_by_id_workspace_or_folder(env, capsys, tmp_path):
    root, ws, mid = env
    assert run(capsys, "date", "0", "--memory", mid, "--json")[0] == 0
    os.chdir(tmp_path)
    code, out, err = run(capsys, "view")
    assert code == 1 and out == "" and "has no memory yet" in err
    code, out, _ = run(capsys, "view", "--workspace", str(ws), "--json")
    assert code == 0 and orjson.loads(out) == rpc_value(root, "view", memoryId=mid)


@pytest.mark.parametrize("argv,code,says", [
    (["view", "--memory", "0123456789abcdef"], 1, "no memory"),
    (["zoom", "3", "2"], 1, "no line 3+2"),
    (["zoom", "11", "1", "--page", "9"], 1, "has 1 page"),
    (["zoom", "11", "1", "--page", "0"], 2, "page must be"),
    (["date", "100000"], 1, "no message"),
    (["search", "/(/"], 2, "not valid"),
    (["history", "--limit", "500"], 2, "limit must be"),
])
def test_errors_and_exit_codes(env, capsys, argv, code, says):
    got, out, err = run(capsys, *argv)
    assert got == code and out == "" and says in err


def test_bad_usage_exits_2(env, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["zoom", "x", "1"])
    assert stop.value.code == 2
    capsys.readouterr()


def test_a_real_process_keeps_stdout_for_data(env):
    root, ws, mid = env
    result = subprocess.run([sys.executable, "-m", "endless.cli", "search", "zebracrossing", "--json"],
                            capture_output=True, text=True, cwd=ws, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0
    assert [h["id"] for h in orjson.loads(result.stdout)["hits"]] == [93, 15]
    missing = subprocess.run([sys.executable, "-m", "endless.cli", "view", "--memory", "0123456789abcdef"],
                             capture_output=True, text=True, cwd=ws, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert missing.returncode == 1 and missing.stdout == "" and "[endless]" in missing.stderr


def test_endless_serve_prints_the_one_time_address(env):
    import signal

    import httpx

    root, ws, mid = env
    proc = subprocess.Popen([sys.executable, "-m", "endless.cli", "serve", "--port", "0"], cwd=ws,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        address = proc.stdout.readline().strip()
        assert address.startswith("http://127.0.0.1:") and "/?token=" in address
        with httpx.Client(timeout=10) as browser:
            landing = browser.get(address)
            assert landing.status_code == 303 and landing.headers["location"] == f"/?memory={mid}"
            page = browser.get(address.split("/?")[0] + "/")
            assert page.status_code == 200 and "Conversation" in page.text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.stdout.read() == ""  # one line of data: the address
    assert "[endless.serve]" in proc.stderr.read()
