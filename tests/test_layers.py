"""The layers of DESIGN §1 stay as they are: imports run one way, and only ``endless`` is installed.

The order is written once, here.  A module may import its own layer, the
layers before it, and the texts; the simulator imports nothing of ours; the
command-line entry (``endless/cli.py``) wires every command together and may
import anything, but nothing imports it.  Imports inside functions count too:
a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
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
ENTRY = ("endless.cli", "endless")  # the console script, and the package's own __init__
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
                if target == "endless.cli" and module != "endless.cli":
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
