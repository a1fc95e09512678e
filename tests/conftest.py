"""Shared test helpers live beside this file (and the child processes in ``procs/``); every test
folder below, ``e2e`` too, imports them by name."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
for folder in (HERE / "procs", HERE):
    sys.path.insert(0, str(folder))

import os  # noqa: E402
import secrets  # noqa: E402

# An import writes its lines itself by default (the import_catch_up setting), which makes every test that
# imports to test something else wait for the offline writer.  The tests run with it off (their commands
# inherit this); the tests of the catch-up itself (faces/test_catch_up.py) run with the default.
os.environ.setdefault("ENDLESS_IMPORT_CATCH_UP", "false")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def pg_cluster():
    """A real PostgreSQL cluster for the whole session (tests/pg_server.py); skipped without the binaries."""
    import pg_server

    if pg_server.binaries() is None:
        pytest.skip("no PostgreSQL binaries here (/usr/lib/postgresql/*/bin): install the postgresql package")
    cluster = pg_server.start_cluster()
    try:
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
def pg_store_url(pg_cluster) -> str:
    """An ``ENDLESS_STORE`` URL of a schema of its own, for one test (its tables made on first open)."""
    psycopg = pytest.importorskip("psycopg")
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{pg_cluster.dsn()}?options=-csearch_path%3D{schema}"
