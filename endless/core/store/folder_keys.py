"""A folder's identity: what names its memory on every machine, not only at its path here (DESIGN §2.1).

A checkout lives at ``/home/ana/src/shop`` on a laptop and ``/Users/ana/code/shop``
on a desktop; keyed by the path, the two would never share a memory kept in one
database.  So a workspace's key is, strongest first:

* **an id file** (``.endless-id``) in the folder or above it, up to the top of its
  repository: one line the person chose and may commit, so every clone finds it;
* **the repository's remote**, normalised so the spellings of one remote are one
  identity (``git@github.com:ana/shop.git``, ``ssh://git@github.com/ana/shop``,
  ``https://ana@github.com/ana/shop/`` are all ``github.com/ana/shop``; case,
  ports, credentials and a ``.git`` ending are dropped; ``url.*.insteadOf`` is applied
  as git applies it);
* **the real path** otherwise (a repository without a remote, a folder outside any).

A folder below the top of its repository (or of its id file's folder) is its own
memory, as it was under path keys: ``repo:github.com/ana/shop//docs``.  Worktrees
and clones of one remote have one identity, so they share one memory; an id file
in one of them (it need not be committed) gives it a memory of its own.

The git files are read here, not through a ``git`` process: a coding agent's hook
runs this on every turn, and the identity must not change with whether git is
installed.  :class:`FolderIdentity` also names the path key, because a memory
made before identities is still found by it (``endless.core.store.directory``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from endless.core.settings import ID_FILE, ID_FILE_BYTES

REPO, ID, PATH, CHAT = "repo", "id", "path", "chat"
SUB = "//"  # between an identity and the folder below its top: never inside a normalised remote or an id
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+:-]{0,127}")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.S)
_SCP = re.compile(r"^(?:[^@/]+@)?(\[[^\]]+\]|[^:/]+):(.*)$", re.S)  # [user@]host:path, git's scp-like form


class IdFileError(ValueError):
    """An ``.endless-id`` that cannot name a memory; the message names the file and what to write
    (``keys.workspace_key`` raises it as an ``InvalidKey``)."""


@dataclass(frozen=True)
class FolderIdentity:
    """What a folder's memory is keyed by, and what else it may already be under."""

    path: str  # the folder's real path: the key before identities, and the fallback
    kind: str  # ID, REPO or PATH: what ``project`` is made of
    project: str  # the key's project
    origin: str = ""  # where the identity was read: the id file, or the remote (credentials left out)
    weaker: tuple[str, ...] = ()  # the repository's identity, when an id file wins over it

    @property
    def names(self) -> tuple[str, ...]:
        """Every project the folder's memory may be under, in the order they are looked for: its path
        first (a memory made there before identities stays the folder's own), then its identity, then
        the identity an id file replaced."""
        return tuple(dict.fromkeys((self.path, self.project, *self.weaker)))


@dataclass(frozen=True)
class Shown:
    """A key's project as a person reads it: ``repo github.com/ana/shop`` in folder ``docs``."""

    kind: str  # REPO, ID, PATH or CHAT (a gateway conversation, or a project a host bound)
    value: str
    folder: str | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "value": self.value, "folder": self.folder}

    def __str__(self) -> str:
        return f"{self.kind} {self.value}" + (f" (folder {self.folder})" if self.folder else "")


def shown_project(project: str) -> Shown:
    """How a key's project reads: which identity it is, and the folder below its top."""
    for kind in (REPO, ID):
        if project.startswith(kind + ":"):
            value, sub, folder = project[len(kind) + 1:].partition(SUB)
            return Shown(kind, value, folder if sub else None)
    if project.startswith("/"):
        return Shown(PATH, project)
    return Shown(CHAT, project)


def folder_identity(workspace: str | os.PathLike[str]) -> FolderIdentity:
    """The identity of ``workspace`` (module doc); :class:`IdFileError` for an id file that names nothing."""
    folder = Path(workspace).resolve(strict=False)
    path = str(folder)
    repo = _repository(folder)
    top = repo.top if repo is not None else None
    found = _id_file(folder, top)
    remote = _remote_identity(repo) if repo is not None else None
    repo_project = None
    if remote is not None and repo is not None:
        repo_project = f"{REPO}:{remote.identity}{_below(folder, repo.top)}"
    if found is not None:
        where, ident = found
        return FolderIdentity(path, ID, f"{ID}:{ident}{_below(folder, where.parent)}", str(where),
                              (repo_project,) if repo_project else ())
    if repo_project is not None and remote is not None:
        return FolderIdentity(path, REPO, repo_project, f"remote {remote.name} ({remote.shown})")
    return FolderIdentity(path, PATH, path)


def _below(folder: Path, top: Path) -> str:
    """``//sub/dir`` for a folder below ``top``, '' for ``top`` itself."""
    try:
        rel = folder.relative_to(top).as_posix()
    except ValueError:
        return ""
    return "" if rel in ("", ".") else SUB + rel


# -- the id file -------------------------------------------------------------------------


def read_id(path: Path) -> str:
    """The id an ``.endless-id`` holds: its first line that is not blank or a ``#`` comment."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(ID_FILE_BYTES + 1)
    except OSError as exc:
        raise IdFileError(f"cannot read {path}: {exc.strerror or exc}; make it readable or remove it "
                          "(it names this folder's memory)") from None
    if len(data) > ID_FILE_BYTES:
        raise IdFileError(f"{path} is longer than {ID_FILE_BYTES} bytes; it holds one id on one line, "
                          "such as `shop-billing`")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise IdFileError(f"{path} is not UTF-8 text; write one id on one line, such as `shop-billing`") from None
    for line in text.splitlines():
        word = line.strip()
        if not word or word.startswith("#"):
            continue
        if not _ID.fullmatch(word):
            raise IdFileError(f"{path} holds {word[:40]!r}, which is not an id: use 1 to 128 letters, digits "
                              "and . _ @ + : - (starting with a letter or digit), such as `shop-billing`")
        return word
    raise IdFileError(f"{path} holds no id; write one on its first line, such as `shop-billing`, "
                      "or remove the file")


def _id_file(folder: Path, top: Path | None) -> tuple[Path, str] | None:
    """The nearest id file at or above ``folder``, not above the repository's top (``top``), and its id."""
    for here in (folder, *folder.parents):
        candidate = here / ID_FILE
        if candidate.is_file():
            return candidate, read_id(candidate)
        if top is not None and here == top:
            return None
    return None


# -- the repository ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Repository:
    top: Path  # the work tree's top folder (a linked worktree's own)
    common: Path  # the git folder holding the shared config (the main one for a linked worktree)


def _repository(folder: Path) -> _Repository | None:
    """The repository holding ``folder``: the nearest ``.git`` folder, or ``.git`` file (a linked worktree,
    a submodule) pointing at one, as git finds it."""
    for here in (folder, *folder.parents):
        dot = here / ".git"
        try:
            if dot.is_dir():
                return _Repository(here, _common(dot))
            if dot.is_file():
                with open(dot, "r", encoding="utf-8", errors="replace") as handle:
                    first = handle.readline(4096).strip()
                if not first.startswith("gitdir:"):
                    return None
                gitdir = (here / first[len("gitdir:"):].strip()).resolve(strict=False)
                return _Repository(here, _common(gitdir))
        except OSError:
            return None
    return None


def _common(gitdir: Path) -> Path:
    """A linked worktree's git folder names the shared one in ``commondir``; others are their own."""
    try:
        with open(gitdir / "commondir", "r", encoding="utf-8", errors="replace") as handle:
            named = handle.readline(4096).strip()
    except OSError:
        return gitdir
    return (gitdir / named).resolve(strict=False) if named else gitdir


@dataclass(frozen=True)
class _Remote:
    name: str
    identity: str
    shown: str


def _remote_identity(repo: _Repository) -> _Remote | None:
    """The identity of the repository's remote: ``origin``, else the first by name."""
    entries = _config_entries(repo.common / "config")
    urls: dict[str, str] = {}
    for section, sub, key, value in entries:
        if section == "remote" and sub is not None and key == "url" and sub not in urls and value:
            urls[sub] = value
    if not urls:
        return None
    name = "origin" if "origin" in urls else sorted(urls)[0]
    rewrites = [entry for path in _global_configs() for entry in _config_entries(path)] + entries
    url = _instead_of(urls[name], rewrites)
    identity = normalise_remote(url, repo.top)
    return None if identity is None else _Remote(name, identity, without_credentials(url))


def _global_configs() -> list[Path]:
    """The person's git configs, where ``url.<base>.insteadOf`` usually lives."""
    named = os.environ.get("GIT_CONFIG_GLOBAL")
    if named:
        return [Path(named)]
    home = Path(os.environ.get("HOME") or Path.home())
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return [xdg / "git" / "config", home / ".gitconfig"]


def _instead_of(url: str, entries: list[tuple[str, str | None, str, str]]) -> str:
    """``url`` with the longest matching ``url.<base>.insteadOf`` prefix replaced by its base, as git does."""
    best = ("", "")
    for section, sub, key, value in entries:
        if section == "url" and sub is not None and key == "insteadof" and value and url.startswith(value) \
                and len(value) > len(best[0]):
            best = (value, sub)
    return best[1] + url[len(best[0]):] if best[0] else url


def normalise_remote(url: str, top: Path | None = None) -> str | None:
    """One spelling for every way of writing one remote: host and path, lower case, without scheme,
    user, password, port, ``.git`` or trailing slash; a local remote as its real path.  None: no remote."""
    url = url.strip()
    if not url:
        return None
    match = _SCHEME.match(url)
    if match:
        scheme, rest = match.group(1).lower(), match.group(2)
        if scheme == "file":
            return _local(unquote(rest), top)
        hostport, _, path = rest.partition("/")
        host = _host(hostport.rpartition("@")[2])
        path = unquote(path)
    else:
        scp = _SCP.match(url)
        if scp is None or (len(scp.group(1)) == 1 and url[1:2] == ":"):  # (C:\repo is a path, not host C)
            return _local(url, top)
        host, path = _host(scp.group(1)), scp.group(2)
    parts = [p for p in path.replace("\\", "/").split("/") if p and p != "."]
    if parts and parts[-1].lower().endswith(".git"):
        parts[-1] = parts[-1][:-4]
    parts = [p for p in parts if p]
    if not host or not parts:
        return None
    return "/".join([host, *parts]).lower()


def _host(hostport: str) -> str:
    """The host without a port (``[::1]:22`` keeps its brackets' inside)."""
    if hostport.startswith("["):
        return hostport[1:hostport.find("]")] if "]" in hostport else hostport[1:]
    return hostport.split(":", 1)[0]


def _local(path: str, top: Path | None) -> str | None:
    """A remote on this machine's disk, as its real path (a relative one from the repository's top)."""
    if not path.strip():
        return None
    where = Path(path).expanduser()
    if not where.is_absolute() and top is not None:
        where = top / where
    text = str(where.resolve(strict=False))
    if text.lower().endswith(".git"):
        text = text[:-4]
    return text.rstrip("/") or "/"


def without_credentials(url: str) -> str:
    """A remote's URL as it may be shown: a user's password or token left out."""
    match = _SCHEME.match(url.strip())
    if not match:
        return url.strip()
    scheme, rest = match.group(1), match.group(2)
    hostport, slash, path = rest.partition("/")
    user, at, host = hostport.rpartition("@")
    if at and ":" in user:
        hostport = f"{user.split(':', 1)[0]}:***@{host}"
    return f"{scheme}://{hostport}{slash}{path}"


# -- git's config files ------------------------------------------------------------------


def _config_entries(path: Path) -> list[tuple[str, str | None, str, str]]:
    """``(section, subsection, key, value)`` of a git config file (sections and keys in lower case, as
    git compares them); [] when it cannot be read.  Includes are not followed."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return []
    return parse_git_config(data.decode("utf-8", errors="replace"))


_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')


def parse_git_config(text: str) -> list[tuple[str, str | None, str, str]]:
    """The entries of git config text: ``[section "sub"]`` or ``[section.sub]`` headers, ``key = value``
    lines with quotes, escapes, comments and ``\\`` line continuations."""
    entries: list[tuple[str, str | None, str, str]] = []
    section, sub = "", None
    lines = text.lstrip("\ufeff").split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        k += 1
        head = _SECTION.match(line)
        if head:
            name, quoted = head.group(1), head.group(2)
            if quoted is not None:
                section, sub = name.lower(), re.sub(r"\\(.)", r"\1", quoted)
            elif "." in name:
                first, _, rest = name.partition(".")
                section, sub = first.lower(), rest.lower()
            else:
                section, sub = name.lower(), None
            line = line[head.end():]
        stripped = line.strip()
        if not stripped or stripped[0] in "#;" or not section:
            continue
        key, eq, raw = stripped.partition("=")
        key = key.strip().lower()
        if not re.fullmatch(r"[a-z][a-z0-9-]*", key):
            continue
        if not eq:
            entries.append((section, sub, key, "true"))
            continue
        value, more = _value(raw)
        while more and k < len(lines):
            part, more = _value(lines[k])
            k += 1
            value += part
        entries.append((section, sub, key, value))
    return entries


def _value(raw: str) -> tuple[str, bool]:
    """A config value's text, and whether it goes on on the next line (a trailing backslash)."""
    out: list[str] = []
    quoted = False
    k = 0
    pending_space = ""
    while k < len(raw):
        c = raw[k]
        k += 1
        if c == "\\":
            if k >= len(raw):
                return "".join(out).strip() if not quoted else "".join(out), True
            nxt = raw[k]
            k += 1
            out.append(pending_space + {"n": "\n", "t": "\t", "b": "\b"}.get(nxt, nxt))
            pending_space = ""
        elif c == '"':
            out.append(pending_space)
            pending_space = ""
            quoted = not quoted
        elif c in "#;" and not quoted:
            break
        elif c in " \t" and not quoted:
            pending_space += c if out else ""
        else:
            out.append(pending_space + c)
            pending_space = ""
    return "".join(out), False
