"""A throwaway PostgreSQL cluster for the tests and ``scripts/bench_store.py`` (a real server, no mock).

Debian's PostgreSQL binaries (``/usr/lib/postgresql/<version>/bin``; CI installs
the ``postgresql`` package) make a cluster in a temporary folder, listening on
127.0.0.1 at a free port with its socket in that folder.  PostgreSQL refuses to
run as root, so as root the folder is given to the ``postgres`` user and
``initdb``/``pg_ctl`` run as that user (``runuser``).  No binaries: the caller
skips, saying why.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

PG_ROOT = Path("/usr/lib/postgresql")
PREFERRED = "15"


def binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl`` (``ENDLESS_PG_BIN``, else version 15, else the newest)."""
    named = os.environ.get("ENDLESS_PG_BIN")
    if named:
        return Path(named) if (Path(named) / "initdb").exists() else None
    if (PG_ROOT / PREFERRED / "bin" / "initdb").exists():
        return PG_ROOT / PREFERRED / "bin"
    found = sorted(PG_ROOT.glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                   if p.parent.parent.name.isdigit() else 0)
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Cluster:
    """A running cluster: ``dsn(db)`` names a database of it (user ``postgres``, trust auth on loopback)."""

    folder: Path
    bin: Path
    port: int
    as_user: list[str]

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        result = subprocess.run([*self.as_user, *args], capture_output=True, text=True, cwd=self.folder)
        if result.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed ({result.returncode}): {result.stderr.strip()}\n{tail}")

    def start(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w",
                  "-o", f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


def start_cluster(setup: "Callable[[Cluster], None] | None" = None) -> Cluster:
    """initdb a new cluster in a temporary folder and start it (about 3 s); ``setup(cluster)`` runs between
    the two (a test's own server settings, certificates, ``pg_hba.conf``)."""
    bin_dir = binaries()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL binaries (install the postgresql package, or set ENDLESS_PG_BIN)")
    folder = Path(tempfile.mkdtemp(prefix="endless-pg-"))
    os.chmod(folder, 0o700)
    as_user: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    cluster = Cluster(folder, bin_dir, _free_port(), as_user)
    cluster._run(str(bin_dir / "initdb"), "-D", str(cluster.data), "-A", "trust", "-U", "postgres",
                 "--no-sync", "-E", "UTF8")
    if setup is not None:
        setup(cluster)
    cluster.start()
    return cluster
