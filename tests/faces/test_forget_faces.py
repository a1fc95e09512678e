"""``endless forget`` and ``endless.forget``: dry run first, same envelope and codes, clear refusals."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
from starlette.testclient import TestClient

from endless.core.memory import Memory
from endless.faces.rpc import create_app, credential

from endless.core.words import count

import rpc_fixtures as F  # noqa: E402
from commands import endless_command  # noqa: E402

BASE = "http://127.0.0.1:8765"


def envelope(method: str, **args) -> dict:
    return {"type": "client-request", "rpcId": 3, "method": f"endless.{method}", "payload": {"args": args}}


def test_rpc_forget_dry_run_then_forget(tmp_path: Path) -> None:
    memory = F.build(tmp_path)
    mid, target = memory.memory_id, 11
    original = memory.message(target).text
    memory.close()
    c = TestClient(create_app(F.small_settings(), root=tmp_path), base_url=BASE, client=("127.0.0.1", 50000),
                   headers=credential.auth_headers(tmp_path))
    with c:
        body = c.post("/api/endless.forget", json=envelope("forget", memoryId=mid, ids=[target], dryRun=True)).json()
        value = body["result"]["value"]
        assert body["result"]["ok"] and value["dryRun"] and value["messages"][0]["text"] == original[:200]
        zoom = c.post("/api/endless.zoom", json=envelope("zoom", memoryId=mid, id=target, n=1)).json()
        assert zoom["result"]["value"]["message"]["text"] == original  # the dry run changed nothing

        body = c.post("/api/endless.forget", json=envelope("forget", memoryId=mid, ids=[target])).json()
        value = body["result"]["value"]
        assert body["rpcId"] == 3 and not value["dryRun"] and value["messages"][0]["id"] == target
        assert "text" not in value["messages"][0] and "provider" in value["cannotReach"]
        zoom = c.post("/api/endless.zoom", json=envelope("zoom", memoryId=mid, id=target, n=1)).json()
        assert zoom["result"]["value"]["message"]["text"].startswith("(forgotten on ")

        for args, code in (({"memoryId": mid}, "endless/bad-request"),
                           ({"memoryId": mid, "ids": [10 ** 9]}, "endless/bad-request"),
                           ({"memoryId": mid, "ids": "11"}, "endless/bad-request"),
                           ({"memoryId": "0" * 16, "ids": [1]}, "endless/unknown-memory")):
            error = c.post("/api/endless.forget", json=envelope("forget", **args)).json()["result"]["error"]
            assert error["code"] == code and "Traceback" not in error["message"], (args, error)
        ui = c.post("/api/endless-ui.forget", json=envelope("forget", memoryId=mid, ids=[1]))
        assert ui.status_code == 403  # the page route wants the page's cookie and Origin
    reopened = Memory.open(memory_id=mid, settings=F.small_settings(), root=tmp_path, readonly=True)
    assert reopened.message(target).text.startswith("(forgotten on ")
    reopened.close()


def test_cli_forget(tmp_path: Path) -> None:
    ws, mid = F.built_workspace(tmp_path)
    env = {"ENDLESS_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = lambda *a: subprocess.run(endless_command() + list(a), capture_output=True, text=True, env=env)  # noqa: E731
    dry = run("forget", "--memory", mid, "--turn", "3", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    listed = [int(line.split()[0]) for line in dry.stdout.splitlines()[:-1]]
    assert listed and f"would forget {count(len(listed), 'message')} and rewrite" in dry.stdout
    done = run("forget", "--memory", mid, "--turn", "3", "--json")
    assert done.returncode == 0, done.stderr
    value = orjson.loads(done.stdout)
    assert [m["id"] for m in value["messages"]] == listed and "backups" in value["cannotReach"]
    again = run("forget", "--memory", mid, "--turn", "3")
    assert again.returncode == 0 and "nothing to forget" in again.stderr
    bad = run("forget", "--memory", mid, "999999")
    assert bad.returncode == 2 and "there is no message 999999" in bad.stderr
    none = run("forget", "--memory", mid)
    assert none.returncode == 2 and none.stderr == ("[endless] say what to forget: message ids (`endless forget 4242`), --turn TURN, "
                                                "--since/--before WHEN or --matching WORDS; add --dry-run to see "
                                                "what would go first\n")


def test_hermes_slash_forget_asks_then_forgets(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "no-hermes"))  # no Hermes home: the memory only
    from endless.faces.hermes.commands import forget_text

    memory = F.build(tmp_path)
    target = 11
    original = memory.message(target).text
    asked = forget_text(memory, f"{target}")
    assert "would forget 1 message" in asked and f"/endless forget {target} confirm" in asked
    assert memory.message(target).text == original  # asking changed nothing
    done = forget_text(memory, f"{target} confirm")
    assert done.startswith("Forgot 1 message") and "state.db" in done
    assert memory.message(target).text.startswith("(forgotten on ")
    from endless.core.privacy import forget
    assert forget.purge_index(memory.folder)  # waits for the merge the command started on its own thread
    assert list(memory.folder.glob("forget.*")) == []
    assert forget_text(memory, f"{target} confirm").startswith("Nothing to forget")
    assert "Nothing was forgotten: there is no message 99999" in forget_text(memory, "99999 confirm")
    assert forget_text(memory, "eleven").startswith("Give message numbers")
    turn = memory.turn(4)
    asked = forget_text(memory, "turn 4")
    assert f"would forget {turn.count} messages" in asked
    memory.close()
