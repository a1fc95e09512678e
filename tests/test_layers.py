"""The layers of DESIGN §1 stay as they are: imports run one way, and only ``endless`` is installed.

The order is written once, here.  A module may import its own layer, the
layers before it, and the texts; the simulator imports nothing of ours; the
command-line entry (``endless/cli.py``) wires every command together and may
import anything, but nothing imports it.  Imports inside functions count too:
a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# (layer, the import names it holds), lowest first; "texts" and "entry" are placed by rule below.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("endless.core",)),
    ("llm", ("endless.llm",)),
    ("writer", ("endless.writer",)),
    ("turn", ("endless.turn",)),
    ("faces", ("endless.faces",)),
    ("simulator", ("endless.sim",)),
    ("harness", ("endless.demo",)),
]
TEXTS = "endless.prompts"
ENTRY = ("endless.cli", "endless", "endless.__main__")  # the console script, the package's own __init__, python -m endless
# Third-party packages only some layers may import (the core never reaches an SDK or a web framework).
ONLY_IN = {
    "openai": {"llm", "simulator"},
    "anthropic": {"llm", "simulator"},
    "starlette": {"faces", "simulator"},
    "uvicorn": {"faces", "simulator"},
    "mcp": {"faces"},
    "httpx": {"faces", "simulator", "harness"},
}
# Where each import name lives in the repository (setuptools' package-dir mapping in pyproject.toml).
SOURCE_DIRS = {"endless": REPO / "endless", "endless.writer": REPO / "writer", "endless.prompts": REPO / "prompts"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for base, folder in SOURCE_DIRS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([base, *parts])
            found[name] = path
    return found


def _layer_of(module: str) -> str:
    if module == TEXTS or module.startswith(TEXTS + "."):
        return "texts"
    if module in ENTRY:
        return "entry"
    for layer, roots in LAYERS:
        if any(module == r or module.startswith(r + ".") for r in roots):
            return layer
    raise AssertionError(f"{module} belongs to no layer: add its folder to LAYERS in {Path(__file__).name}")


def _imports(module: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import in the file; ``from m import name`` names ``m.name``
    when that is a module of ours, else ``m``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                inner = f"{target}.{alias.name}"
                out.append((inner if inner in known else target, node.lineno))
    return out


def test_every_import_runs_down_the_layers() -> None:
    order = [layer for layer, _ in LAYERS]
    modules = _modules()
    problems = []
    for module, path in sorted(modules.items()):
        layer = _layer_of(module)
        for target, line in _imports(module, path, set(modules)):
            where = f"{path.relative_to(REPO)}:{line}"
            top = target.split(".")[0]
            if top in ONLY_IN and layer not in ONLY_IN[top]:
                problems.append(f"{where}: the {layer} layer imports {target}")
            if top != "endless":
                continue
            other = _layer_of(target)
            if other == "entry":
                if target == "endless.cli" and module not in ("endless.cli", "endless.__main__"):
                    problems.append(f"{where}: {module} imports the command-line entry")
                continue
            if layer == "entry" or other == layer or other == "texts":
                continue
            if layer == "texts":
                problems.append(f"{where}: the texts import {target}")
            elif layer == "simulator":
                problems.append(f"{where}: the simulator imports {target} (it depends on nothing of ours)")
            elif other == "simulator" and layer != "harness":
                problems.append(f"{where}: the {layer} layer imports the simulator ({target})")
            elif order.index(other) > order.index(layer):
                problems.append(f"{where}: the {layer} layer imports {target} of the {other} layer above it")
    assert not problems, "imports against the layer order (DESIGN §1):\n" + "\n".join(problems)


def test_every_import_of_ours_names_a_module_that_exists() -> None:
    """An import of ours that names no module would pass the order check above without meaning anything."""
    modules = _modules()
    missing = []
    for module, path in sorted(modules.items()):
        for target, line in _imports(module, path, set(modules)):
            if target.split(".")[0] == "endless" and target not in modules:
                missing.append(f"{path.relative_to(REPO)}:{line}: {target}")
    assert not missing, "\n".join(missing)


def test_core_and_writer_modules_stay_small() -> None:
    """No module of the core or the writer passes 600 lines (DESIGN §1), and ``Memory`` stays under 400."""
    long = []
    for module, path in _modules().items():
        if _layer_of(module) in ("core", "writer"):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > 600:
                long.append(f"{path.relative_to(REPO)}: {lines} lines")
    assert not long, long
    memory = (REPO / "endless" / "core" / "memory.py").read_text(encoding="utf-8")
    tree = ast.parse(memory)
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Memory"]
    assert cls.end_lineno - cls.lineno + 1 < 400, cls.end_lineno - cls.lineno + 1


# -- floors inside the core (DESIGN §1): ground, store, view, search, privacy, then Memory on top ----------

CORE = "endless.core"
GROUND = {"settings", "meanings", "errors", "diagnostics", "words", "moments", "surface"}  # modules of endless/core/ every floor uses
FLOORS = ["store", "view", "search", "privacy"]  # sub-packages, lowest first; the rest of endless/core/ is the top
# private names of other people's code that our faces must touch (the host's internals are read in one place)
FOREIGN_PRIVATE = {"os._exit", "sys._getframe", "argparse._SubParsersAction", "parser._actions"}
HOST_INTERNALS = "endless/faces/hermes/internals.py"  # the one module that reads Hermes's own private state


def _floor_rank(module: str) -> int:
    """0 for the ground, 1.. for the floors, len(FLOORS) + 1 for the top."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[2] in FLOORS:
        return FLOORS.index(parts[2]) + 1
    if len(parts) == 3 and parts[2] in GROUND:
        return 0
    return len(FLOORS) + 1


def _surface(floor: str) -> dict[str, str]:
    """The floor's public names and the module holding each (its ``__init__``'s ``_WHERE``)."""
    tree = ast.parse((REPO / "endless" / "core" / floor / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_WHERE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"endless/core/{floor}/__init__.py names no _WHERE")


def _core_edges() -> dict[str, set[str]]:
    """Every core module and the core modules it imports (a floor's own name resolved to its module)."""
    modules = _modules()
    surfaces = {f: _surface(f) for f in FLOORS}
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        if not module.startswith(CORE + ".") or path.name == "__init__.py":
            continue
        out = edges.setdefault(module, set())
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(CORE):
                continue
            floor = node.module.split(".")[2] if node.module.count(".") == 2 else None
            for alias in node.names:
                if floor in surfaces and alias.name in surfaces[floor]:
                    out.add(f"{CORE}.{floor}.{surfaces[floor][alias.name]}")
                elif f"{node.module}.{alias.name}" in modules:
                    out.add(f"{node.module}.{alias.name}")
                elif node.module in modules and not node.module.endswith(tuple(FLOORS)):
                    out.add(node.module)
        out.discard(module)
    return edges


def test_the_floors_of_the_core_import_down() -> None:
    """A core module imports its own floor and the floors below it, never one above (type-only imports too)."""
    problems = []
    for module, targets in sorted(_core_edges().items()):
        for target in sorted(targets):
            if _floor_rank(target) > _floor_rank(module):
                problems.append(f"{module} imports {target}, a floor above it")
    assert not problems, "\n".join(problems)


def test_the_core_has_no_import_cycle() -> None:
    edges = _core_edges()
    seen: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def walk(module: str) -> None:  # depth first; a module met again while on the stack closes a cycle
        seen[module] = 1
        stack.append(module)
        for target in sorted(edges.get(module, ())):
            if seen.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in seen:
                walk(target)
        stack.pop()
        seen[module] = 2

    for module in sorted(edges):
        if module not in seen:
            walk(module)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_outside_a_floor_only_its_public_names_are_used() -> None:
    """Other floors and layers import a floor's package and the names its ``__init__`` lists, nothing deeper."""
    surfaces = {f: _surface(f) for f in FLOORS}
    problems = []
    for module, path in sorted(_modules().items()):
        here = module.split(".")[2] if module.startswith(CORE + ".") and module.count(".") >= 2 else None
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(CORE + "."):
                parts = node.module.split(".")
                floor = parts[2]
                if floor not in FLOORS or floor == here:
                    continue
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                if len(parts) > 3:
                    problems.append(f"{where}: imports {node.module}; use `from {CORE}.{floor} import ...`")
                for alias in node.names:
                    if alias.name not in surfaces[floor]:
                        problems.append(f"{where}: {alias.name} is not a public name of {CORE}.{floor}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(CORE + ".") and alias.name.split(".")[2] in FLOORS:
                        problems.append(f"{path.relative_to(REPO)}:{node.lineno}: import {alias.name}")
    assert not problems, "\n".join(problems)


def test_the_surfaces_name_what_exists() -> None:
    """Every public name of a floor loads (a stale ``_WHERE`` entry would fail only when first used)."""
    import importlib

    for floor in FLOORS:
        package = importlib.import_module(f"{CORE}.{floor}")
        for name in _surface(floor):
            assert getattr(package, name) is not None, f"{CORE}.{floor}.{name}"


def test_private_names_stay_in_their_file() -> None:
    """A name starting with ``_`` is used only in the file that defines it: not imported, not reached into."""
    problems = []
    for module, path in sorted(_modules().items()):
        rel = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        own |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("endless"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        problems.append(f"{rel}:{node.lineno}: imports {alias.name} from {node.module}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") or node.attr in own:
                    continue
                text = ast.unparse(node)
                if text in FOREIGN_PRIVATE or (rel == HOST_INTERNALS and isinstance(node.value, ast.Name)):
                    continue
                problems.append(f"{rel}:{node.lineno}: {text}")
    assert not problems, "\n".join(problems)


# -- faces: each its own, sharing one kit --------------------------------------------------------------

# What only the store floor may do with a store's files: their paths, and reading or writing them by
# hand.  Above it the log and the tree are read and patched through the storage seam (contract.py).
STORE_FILE_REACH = re.compile(r"\b(?:log|tree)\.(?:path|index_path|index_dir|slot_path|reader\(\)|offsets_path)\b")


def test_above_the_store_no_module_opens_a_store_file() -> None:
    """The floors above the store, Memory and the faces reach the log and the tree through the seam alone:
    a second backend (PostgreSQL) then serves them unchanged."""
    problems = []
    for module, path in sorted(_modules().items()):
        if module.startswith(f"{CORE}.store") or not module.startswith("endless."):
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            found = STORE_FILE_REACH.search(code)
            if found:
                problems.append(f"{path.relative_to(REPO)}:{number}: {found.group(0)}")
    assert not problems, "reaches a store file past the seam:\n" + "\n".join(problems)


FACES = "endless.faces"
KIT = "kit"  # endless/faces/kit: what several faces share (choosing a memory, errors in words, answers, signals)
# A face that runs another inside its own process: the Hermes plugin serves the History page (DESIGN §6).
EMBEDS = {("hermes", "rpc")}


def _face_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["endless", "faces"] or len(parts) < 3:
        return None
    return parts[2]


def test_faces_do_not_import_each_other() -> None:
    """A face imports its own modules, the kit and the layers below; never another face (the kit no face)."""
    modules = _modules()
    problems = []
    for module, path in sorted(modules.items()):
        face = _face_of(module)
        if face is None:
            continue
        for target, line in _imports(module, path, set(modules)):
            other = _face_of(target)
            if target == FACES:
                continue
            if other is None or other == face or (other == KIT and face != KIT) or (face, other) in EMBEDS:
                continue
            problems.append(f"{path.relative_to(REPO)}:{line}: the {face} face imports {target}")
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(REPO)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = out.glob("endless_memory-*.whl")
    return built


def test_the_wheel_installs_only_the_endless_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"endless"}, sorted(tops)
    (info,) = dist_info
    top_level = zipfile.ZipFile(wheel).read(f"{info}/top_level.txt").decode().split()
    assert top_level == ["endless"]


def test_the_wheel_holds_every_module_and_text(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = set()
    for base, folder in SOURCE_DIRS.items():
        prefix = base.replace(".", "/")
        for path in folder.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".txt", ".json",
                                                                                      ".html", ".css", ".js"):
                wanted.add(f"{prefix}/{path.relative_to(folder).as_posix()}")
    assert wanted - names == set(), sorted(wanted - names)[:20]


def test_the_hermes_entry_point_names_the_plugin_module() -> None:
    """Hermes loads ``endless`` from the entry point; homes installed before the move name only that."""
    from importlib.metadata import entry_points

    (point,) = [p for p in entry_points(group="hermes_agent.plugins") if p.name == "endless"]
    assert point.value == "endless.faces.hermes"
    text = (REPO / "endless" / "faces" / "hermes" / "__init__.py").read_text(encoding="utf-8")
    assert "def register(" in text
