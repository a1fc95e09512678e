"""``endless import`` of OpenAI Codex CLI rollouts, on rollouts the real Codex CLI 0.171.0 wrote.

The fixtures (``tests/fixtures/codex/sessions/2026/12/04/``) were recorded
with ``codex exec`` against ``endless sim serve``: session A (in
``/home/ana/backup-job``) has three turns, a shell call, a resume and an
automatic compaction; session B (in ``/home/ana/notes``) one turn, with an
AGENTS.md that Codex injects.  Each test copies them into a dated
``sessions`` folder with their folder rewritten to the test's own, and runs
the command as a person does (a subprocess from a fresh ``ENDLESS_HOME``).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from endless.core.memory import Memory
from endless.core.settings import Settings
from endless.core.store.keys import workspace_key
from endless.faces.importers.codex import CodexState, codex_entries, read_codex, rollout_cwd
from endless.faces.importers.formats import FormatError, detect, json_lines
from endless.faces.importers.importer import claude_project_name
from commands import endless_command, fresh_home
from paths import FIXTURES

DATED = FIXTURES / "codex" / "sessions" / "2026" / "12" / "04"
A = DATED / "rollout-2026-12-04T19-50-11-01a2429b-69ec-7f43-b828-c8e727363141.jsonl"
B = DATED / "rollout-2026-12-04T19-50-31-01a2429b-b7aa-7ad2-9c2b-b8b3283e511a.jsonl"
A_SESSION = "01a2429b-69ec-7f43-b828-c8e727363141"
B_SESSION = "01a2429b-b7aa-7ad2-9c2b-b8b3283e511a"
A_FOLDER, B_FOLDER = "/home/ana/backup-job", "/home/ana/notes"
FIRST_PROMPT = "Look at the readme of the backup job, attempt 6 [[call:exec_command]] [[reply:200]]"


@pytest.fixture
def place(tmp_path: Path):
    return fresh_home(tmp_path)


def run(place, *args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    home, workspace, base = place
    return subprocess.run([*endless_command(), *args], capture_output=True, timeout=120, text=True,
                          cwd=cwd or workspace, env={**base, **(env or {})})


def run_import(place, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return run(place, "import", "--workspace", str(place[1]), *args, **kwargs)


def sessions_folder(root: Path, folders: dict[Path, str]) -> Path:
    """A Codex ``sessions`` folder holding the fixtures (``{fixture: folder it ran in}``), dated."""
    day = root / "sessions" / "2026" / "12" / "04"
    day.mkdir(parents=True, exist_ok=True)
    for fixture, folder in folders.items():
        text = fixture.read_text().replace(A_FOLDER, folder).replace(B_FOLDER, folder)
        (day / fixture.name).write_text(text)
    return root / "sessions"


def turns_of(place) -> list[tuple]:
    home, workspace, _ = place
    with Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home)), readonly=True) as memory:
        return [(memory.turn(t).session, memory.turn(t).title, memory.turn(t).at,
                 [(m.kind, m.text, m.at) for m in memory.turn_messages(t)]) for t in range(memory.turns)]


def iso(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# -- the real rollouts ------------------------------------------------------------------------


def test_a_real_rollout_imports_into_turns_and_again_adds_nothing(place, tmp_path) -> None:
    sessions = sessions_folder(tmp_path / "codex", {A: str(place[1])})
    proc = run_import(place, str(sessions))
    assert proc.returncode == 0, proc.stderr
    assert "imported 3 turns (7 messages)" in proc.stdout
    turns = turns_of(place)
    assert [(t[0], t[1]) for t in turns] == [(A_SESSION, "Look at the readme of the backup job, attempt 6 "
                                                         "[[call:exec…")] * 3
    first = turns[0][3]
    assert [m[0] for m in first] == ["user", "trace", "reply"]
    assert first[0] == ("user", FIRST_PROMPT, iso("2026-12-04T19:50:11.341Z"))
    trace = first[1][1]
    assert trace.startswith('did: exec_command {"cmd": "cat README.md"}\nresult: Chunk ID: 8fed2c\n')
    assert "The backup job runs every night at 03:00 and keeps 14 copies on the vault host." in trace
    assert first[1][2] == iso("2026-12-04T19:50:11.924Z")
    assert first[2][1].startswith("Short answer first. You mentioned 6. I made 1 tool call (exec_command).")
    assert turns[1][3][0][1] == "Thanks. Move the backups to 04:00 and keep 30 copies from now on. [[reply:150]]"
    assert turns[2][3] == [("user", "Where do the copies go? [[tools:0]] [[reply:120]]",
                            iso("2026-12-04T19:50:23.857Z")),
                           ("reply", "I looked into it. Spring green draft bright label expect request create "
                                     "request recent deliver. Import writer local. the", iso("2026-12-04T19:50:23.966Z"))]
    text = orjson.dumps(turns).decode()
    assert "<environment_context>" not in text and "skills_instructions" not in text  # injected context
    assert "You are a coding agent" not in text  # the instructions
    assert "Lower smooth count compare import screen" not in text  # the compaction's summary
    assert "Another language model" not in text  # the compaction's replacement history
    assert text.count("I made 1 tool call") == 1  # the event_msg copies of the reply are not imported
    again = run_import(place, str(sessions))
    assert again.returncode == 0 and again.stdout.startswith("imported 0 turns")
    assert "3 turns were there already" in again.stdout


def test_a_rollout_is_detected_and_its_folder_read_from_its_first_line() -> None:
    assert detect(A) == "codex" and detect(B) == "codex"
    assert rollout_cwd(A) == A_FOLDER and rollout_cwd(B) == B_FOLDER
    entries = list(read_codex(B))
    assert [(e.role, e.text) for e in entries][0] == (
        "user", "Remind me what the staging host is called: it is kestrel-7 [[tools:0]] [[reply:100]]")
    assert "AGENTS.md" not in orjson.dumps([e.text for e in entries]).decode()


def test_without_provenance_marks_the_injected_context_is_known_by_its_words(tmp_path) -> None:
    """Codex versions before the per-block provenance: the same entries, told by what the blocks say."""
    for fixture in (A, B):
        bare = tmp_path / fixture.name
        lines = []
        for line in fixture.read_text().splitlines():
            record = orjson.loads(line)
            record.pop("metadata", None)
            record["payload"].pop("internal_chat_message_metadata_passthrough", None)
            lines.append(orjson.dumps(record).decode())
        bare.write_text("\n".join(lines) + "\n")
        said = [(e.role, e.text) for e in read_codex(bare) if e.role == "user"]
        assert said == [(e.role, e.text) for e in read_codex(fixture) if e.role == "user"]
        assert said and not any("<environment_context>" in t or "AGENTS.md" in t for _, t in said)


def test_read_a_line_at_a_time_from_an_offset_gives_the_same_entries() -> None:
    """What a live capture does: convert the lines up to a point, later the rest, one state carried."""
    whole = [(e.role, e.text, e.at, e.session, e.title) for e in read_codex(A)]
    state = CodexState()
    records = [record for _, record in json_lines(A)]
    parts = []
    for number, record in enumerate(records[:20] + records[20:] + records[10:16], start=1):
        parts += codex_entries(record, f"{A}:{number}", state)  # the last six again: a replay adds nothing
    assert [(e.role, e.text, e.at, e.session, e.title) for e in parts] == whole


def test_tool_items_the_simulator_cannot_make() -> None:
    """Item shapes of Codex's protocol the simulator does not produce (it calls function tools only):
    written here by hand, after codex-rs's ResponseItem."""
    state = CodexState(session="s")
    at = "2026-12-04T10:00:00Z"
    lines = [
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch",
         "input": "*** Begin Patch\n*** Update File: a.txt\n-old\n+new\n*** End Patch"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Success. Updated a.txt"},
        {"type": "local_shell_call", "call_id": "c2", "status": "completed",
         "action": {"type": "exec", "command": ["ls", "-la"]}},
        {"type": "function_call_output", "call_id": "c2",
         "output": [{"type": "input_text", "text": "a.txt"}, {"type": "input_image", "image_url": "data:…"}]},
        {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "kestrel"}},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "private musing"}],
         "encrypted_content": "gAAA"},
        {"type": "a_newer_item", "text": "whatever it holds"},
    ]
    out = []
    for number, payload in enumerate(lines, start=1):
        out += codex_entries({"timestamp": at, "type": "response_item", "payload": payload}, f"x:{number}", state)
    out += codex_entries({"timestamp": at, "type": "a_newer_line", "payload": {}}, "x:8", state)
    assert [(e.role, e.name, e.text) for e in out] == [
        ("call", "apply_patch", "*** Begin Patch\n*** Update File: a.txt\n-old\n+new\n*** End Patch"),
        ("result", None, "Success. Updated a.txt"),
        ("call", "shell", '{"type":"exec","command":["ls","-la"]}'),
        ("result", None, "a.txt\n[image]"),
        ("call", "web_search", '{"type":"search","query":"kestrel"}')]
    assert all(e.at == iso(at) and e.title == "Codex s" for e in out)


# -- folders and scope ------------------------------------------------------------------------


def test_only_the_rollouts_of_this_folder_unless_all_sessions(place, tmp_path) -> None:
    sessions = sessions_folder(tmp_path / "codex", {A: str(place[1]), B: str(tmp_path / "elsewhere")})
    proc = run_import(place, str(sessions))
    assert proc.returncode == 0, proc.stderr
    assert "imported 3 turns (7 messages)" in proc.stdout
    assert "left out 1 Codex rollout run in other folders (take them with --all-sessions)" in proc.stderr
    assert {t[0] for t in turns_of(place)} == {A_SESSION}
    everything = run_import(place, str(sessions), "--all-sessions")
    assert everything.returncode == 0, everything.stderr
    assert "imported 1 turn (2 messages)" in everything.stdout and "3 turns were there already" in everything.stdout
    assert {t[0] for t in turns_of(place)} == {A_SESSION, B_SESSION}


def test_a_session_named_with_session_is_taken_from_any_folder(place, tmp_path) -> None:
    sessions = sessions_folder(tmp_path / "codex", {A: "/somewhere/else", B: "/another/place"})
    proc = run_import(place, str(sessions), "--session", B_SESSION)
    assert proc.returncode == 0, proc.stderr
    assert "imported 1 turn (2 messages)" in proc.stdout
    assert [t[0] for t in turns_of(place)] == [B_SESSION]


def test_no_rollout_of_this_folder_is_refused_naming_what_was_found(place, tmp_path) -> None:
    sessions = sessions_folder(tmp_path / "codex", {A: "/home/ana/backup-job", B: "/home/ana/notes"})
    proc = run_import(place, str(sessions))
    assert proc.returncode == 2
    assert ("2 Codex rollouts found, run in /home/ana/backup-job (1), /home/ana/notes (1); none ran in "
            f"{place[1].resolve()}") in proc.stderr
    assert "--all-sessions" in proc.stderr and "--workspace DIR" in proc.stderr
    assert not (place[0] / "memories").exists()


def test_the_same_folder_through_a_link_is_this_folder(place, tmp_path) -> None:
    link = tmp_path / "link-to-work"
    link.symlink_to(place[1])
    sessions = sessions_folder(tmp_path / "codex", {A: str(link)})
    proc = run_import(place, str(sessions))
    assert proc.returncode == 0, proc.stderr
    assert "imported 3 turns" in proc.stdout


def test_a_folder_with_neither_jsonl_nor_rollouts_is_refused(place, tmp_path) -> None:
    empty = tmp_path / "codex" / "sessions" / "2026"
    empty.mkdir(parents=True)
    proc = run_import(place, str(empty.parent))
    assert proc.returncode == 2 and "a folder without .jsonl files (nor Codex rollouts" in proc.stderr


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("line, said", [
    ('{"timestamp": "2026-12-04T19:50:11.477Z", "type": "response_item", "payl', "not valid JSON"),
    ('{"timestamp": "2026-12-04T19:50:11.477Z", "type": "response_item"}', "not a Codex rollout line"),
    ('{"timestamp": "2026-12-04T19:50:11.477Z", "type": "response_item", "payload": '
     '{"type": "function_call", "arguments": "{}", "call_id": "c"}}', "a function_call without its name"),
])
def test_a_bad_line_is_named_and_nothing_is_imported(place, tmp_path, line, said) -> None:
    sessions = sessions_folder(tmp_path / "codex", {A: str(place[1]), B: str(place[1])})
    source = sessions / "2026" / "12" / "04" / A.name
    lines = source.read_text().splitlines()
    lines[9] = line
    source.write_text("\n".join(lines) + "\n")
    proc = run_import(place, str(sessions))
    assert proc.returncode == 2
    assert f"{source}:10: {said}" in proc.stderr and "Nothing was imported" in proc.stderr
    assert not (place[0] / "memories").exists()


def test_unknown_line_and_item_types_are_skipped(tmp_path) -> None:
    source = tmp_path / A.name
    lines = A.read_text().splitlines()
    lines.insert(9, '{"timestamp": "2026-12-04T19:50:11.400Z", "type": "inter_agent_communication", '
                    '"payload": {"text": "not for the memory"}}')
    lines.insert(9, '{"timestamp": "2026-12-04T19:50:11.400Z", "type": "response_item", '
                    '"payload": {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}}')
    source.write_text("\n".join(lines) + "\n")
    assert [(e.role, e.text) for e in read_codex(source)] == [(e.role, e.text) for e in read_codex(A)]
    with pytest.raises(FormatError, match=r":1: not valid JSON"):
        bad = tmp_path / "rollout-bad.jsonl"
        bad.write_text('{"type": "session_meta", "payl\n')
        rollout_cwd(bad)


# -- the command, end to end ------------------------------------------------------------------


def test_agent_codex_finds_this_folders_rollouts_and_search_finds_them(place, tmp_path) -> None:
    codex_home = tmp_path / "codex-home"
    sessions_folder(codex_home, {A: str(place[1]), B: str(tmp_path / "elsewhere")})
    proc = run(place, "import", "--agent", "codex", env={"CODEX_HOME": str(codex_home)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("imported 3 turns (7 messages) into memory ")
    assert proc.stderr == "[endless.import] left out 1 Codex rollout run in other folders (take them with " \
                          "--all-sessions)\n"
    found = run(place, "search", "vault")
    assert found.returncode == 0, found.stderr
    assert "keeps 14 copies on the vault host" in found.stdout
    missing = run(place, "import", "--agent", "codex", env={"CODEX_HOME": str(tmp_path / "none")})
    assert missing.returncode == 2 and f"no Codex sessions folder at {tmp_path / 'none' / 'sessions'}" in missing.stderr
    nothing = run(place, "import")
    assert nothing.returncode == 2 and "give the files or folders as PATH, or --agent codex" in nothing.stderr


def test_agent_claude_finds_the_transcripts_of_this_folder(place, tmp_path) -> None:
    config = tmp_path / "claude-config"
    # The name Claude Code 2.1.197 gave /tmp/cx/my.proj_x: -tmp-cx-my-proj-x (every other character a dash).
    encoded = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(place[1].resolve()))
    assert claude_project_name("/tmp/cx/my.proj_x") == "-tmp-cx-my-proj-x"
    (config / "projects" / encoded).mkdir(parents=True)
    shutil.copy(FIXTURES / "import" / "claude_session.jsonl", config / "projects" / encoded / "s.jsonl")
    proc = run(place, "import", "--agent", "claude", env={"CLAUDE_CONFIG_DIR": str(config)})
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 turns (5 messages)" in proc.stdout
    elsewhere = run(place, "import", "--agent", "claude", cwd=tmp_path, env={"CLAUDE_CONFIG_DIR": str(config)})
    assert elsewhere.returncode == 2 and "no Claude Code transcripts for" in elsewhere.stderr


# -- the real Codex CLI -----------------------------------------------------------------------


CODEX = os.environ.get("ENDLESS_CODEX") or shutil.which("codex")


@pytest.mark.skipif(CODEX is None, reason="no codex binary on PATH (npm install -g @openai/codex@0.171.0, or set "
                                          "ENDLESS_CODEX to it)")
def test_a_rollout_the_real_codex_writes_now_imports(place, tmp_path) -> None:
    home, workspace, env = place
    server = subprocess.Popen([*endless_command(), "sim", "serve", "--port", "0", "--cache", "openai-auto",
                               "--latency", "0.01"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=env)
    try:
        said = server.stderr.readline()  # "[endless.sim] serving on http://127.0.0.1:PORT (…": it listens
        assert "serving on http://" in said, said
        base = said.split("serving on ", 1)[1].split(" ", 1)[0]
        codex_home = tmp_path / "codex-home"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model = "sim"\nmodel_provider = "sim"\n\n[model_providers.sim]\nname = "sim"\n'
            f'base_url = "{base}/v1"\nwire_api = "responses"\nenv_key = "SIM_API_KEY"\n')
        codex_env = {**env, "CODEX_HOME": str(codex_home), "SIM_API_KEY": "x"}
        ran = subprocess.run([CODEX, "exec", "--skip-git-repo-check", "The heron deploy key is rotated on "
                              "fridays [[tools:0]] [[reply:80]]"], cwd=workspace, env=codex_env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr[-2000:]
    finally:
        server.terminate()
        server.communicate(timeout=10)
    proc = run(place, "import", "--agent", "codex", env={"CODEX_HOME": str(codex_home)})
    assert proc.returncode == 0, proc.stderr
    assert "imported 1 turn (2 messages)" in proc.stdout
    [(session, title, _, messages)] = turns_of(place)
    assert messages[0][:2] == ("user", "The heron deploy key is rotated on fridays [[tools:0]] [[reply:80]]")
    assert messages[1][0] == "reply" and len(messages) == 2
    assert title.startswith("The heron deploy key")
