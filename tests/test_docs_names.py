"""The documents that walk a reader through the code name only what the code has.

``docs/architecture.md`` and ``SEAMS.md`` cite classes and their methods
(`Memory.commit_turn`), modules (`endless.core.store.log`) and files
(`core/store/log.py`); a rename that forgets them leaves a newcomer looking for
a name that never existed.  Every such citation is checked here against the
source: a class with that method or attribute, a module, a file.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = ["docs/architecture.md", "SEAMS.md", "docs/cli-faces.md"]
SOURCES = [REPO / "endless", REPO / "writer"]
# folders a cited path may start from: the repository, or the installed package's root
PATH_ROOTS = [REPO, REPO / "endless"]
# `x.y` is checked as module.name when x is one of our modules' names, but these are also a table's or an
# SDK's words (Hermes's `sessions.message_count`, the SDK's `messages.stream`), and these end file names
PLAIN_WORDS = {"sessions", "messages", "usage", "routes", "keys"}
FILE_KINDS = {"jsonl", "json", "yaml", "yml", "toml", "md", "txt", "db", "py", "html", "sqlite"}
OURS = ("endless/", "core/", "faces/", "writer/", "turn/", "llm/", "sim/", "demo/", "tests/", "scripts/", "prompts/")


@lru_cache(maxsize=1)
def _classes() -> dict[str, set[str]]:
    """Every class of ours and the names it holds: methods, class attributes, attributes set on self."""
    found: dict[str, set[str]] = {}
    for folder in SOURCES:
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                names = found.setdefault(node.name, set())
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(inner.name)
                    elif isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                        names.add(inner.target.id)
                    elif isinstance(inner, ast.Assign):
                        names.update(t.id for t in inner.targets if isinstance(t, ast.Name))
                    elif isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store):
                        names.add(inner.attr)
    return found


@lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    out = {}
    for base, folder in (("endless", REPO / "endless"), ("endless.writer", REPO / "writer")):
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            out[".".join([base, *parts])] = path
    return out


def _top_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _citations(doc: str) -> list[tuple[int, str]]:
    out = []
    for number, line in enumerate((REPO / doc).read_text(encoding="utf-8").splitlines(), 1):
        out += [(number, token) for token in re.findall(r"`([^`\n]+)`", line)]
    return out


def _problem(token: str) -> str | None:
    """Why a citation names nothing of ours (None: it is fine, or it is no citation of code)."""
    token = token.strip()
    path = re.sub(r":\d+(-\d+)?$", "", token)  # a file:line reference names the file
    if path.endswith((".py", ".md", ".txt", ".json", ".html")) or path.endswith("/"):
        if not path.startswith(OURS) or any(c in path for c in "*{<"):
            return None
        if any((root / path).exists() for root in PATH_ROOTS):
            return None
        return f"no file {path}"
    dotted = re.fullmatch(r"(endless(?:\.\w+)+)(?:\(.*\))?", token)
    if dotted:
        parts = dotted.group(1).split(".")
        for cut in range(len(parts), 0, -1):  # the longest prefix that is a module, then names inside it
            module = ".".join(parts[:cut])
            if module in _modules():
                rest = parts[cut:]
                if not rest:
                    return None
                if rest[0] not in _top_names(_modules()[module]):
                    return f"{module} has no {rest[0]}"
                if len(rest) > 1 and rest[1] not in _classes().get(rest[0], set()):
                    return f"{rest[0]} has no {rest[1]}"
                return None
        return f"no module {dotted.group(1)}"
    short = re.fullmatch(r"([a-z_]+)\.([a-z_]\w*)(?:\(.*\))?", token)
    if short and short.group(1) in _stems() and short.group(1) not in PLAIN_WORDS and short.group(2) not in FILE_KINDS:
        module, name = short.groups()
        if any(name in _top_names(path) for path in _stems()[module]):
            return None
        return f"no module {module} holds {name}"
    method = re.fullmatch(r"([A-Z]\w+)\.(\w+)(?:\(.*\))?", token)
    if method:
        cls, attr = method.groups()
        if cls in _classes():
            return None if attr in _classes()[cls] else f"{cls} has no {attr}"
        host = _host_source()
        if host is None:
            return None  # a host's class, and the host is not installed here: nothing to check against
        if not re.search(rf"^class {cls}\b", host, re.M):
            return f"no class {cls} here or in Hermes"
        if not re.search(rf"def {attr}\b|\b{attr}\s*[:=]", host):
            return f"Hermes's {cls} has no {attr}"
    return None


@lru_cache(maxsize=1)
def _stems() -> dict[str, list[Path]]:
    """Our modules by their file's stem (``plugin`` is endless/faces/hermes/plugin.py), for `plugin.name`."""
    out: dict[str, list[Path]] = {}
    for path in _modules().values():
        if path.name != "__init__.py":
            out.setdefault(path.stem, []).append(path)
    return out


@lru_cache(maxsize=1)
def _host_source() -> str | None:
    """Hermes Agent's own source, from its environment (.venv-hermes), where it is installed."""
    found = sorted((REPO / ".venv-hermes" / "lib").glob("python3*/site-packages"))
    if not found:
        return None
    texts = []
    for folder in ("hermes_cli", "agent", "gateway", "tools"):
        texts += [p.read_text(encoding="utf-8", errors="replace") for p in (found[0] / folder).rglob("*.py")]
    texts += [p.read_text(encoding="utf-8", errors="replace") for p in found[0].glob("*.py")]
    return "\n".join(texts)


@pytest.mark.parametrize("doc", DOCS)
def test_every_name_a_document_cites_exists(doc: str) -> None:
    problems = [f"{doc}:{number}: `{token}`: {why}" for number, token in _citations(doc)
                if (why := _problem(token)) is not None]
    assert not problems, "\n".join(problems)


def test_the_check_sees_a_name_that_is_gone() -> None:
    """The checks above would pass on any document if they could not tell a missing name."""
    assert _problem("Memory.commit_turn") is None
    assert _problem("Memory.no_such_method") == "Memory has no no_such_method"
    assert _problem("OrderLog.append") is not None
    assert _problem("endless/core/nowhere.py") == "no file endless/core/nowhere.py"
    assert _problem("endless.core.memory.Memory") is None
    assert _problem("endless.chat_loop.run_turn") is not None
    assert _problem("endless.writer.recorded.RecordedRoutes.record") is None
    assert _problem("endless.writer.recorded.RecordedRoutes.forget_all") is not None
    assert _problem("render.recent_block") is None
    assert _problem("plugin.chat_key") is not None
