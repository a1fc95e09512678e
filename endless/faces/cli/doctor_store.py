"""``endless doctor``'s line for a PostgreSQL store: reachable or not, encrypted or not, and what it holds.

The store is named with its password masked, as everywhere.  A connection that is
not encrypted is a warning unless it stays on this machine (a Unix socket or a
loopback address): a memory holds every word of a conversation.
"""

from __future__ import annotations

from typing import Any

from endless.core.settings import Settings, is_postgres_url, masked_store, store_url
from endless.core.words import count

_LOCAL_HOSTS = ("127.0.0.1", "::1", "localhost")


def store_findings(report: Any, settings: Settings) -> None:
    if not is_postgres_url(settings.store):
        return
    shown = masked_store(settings.store)
    try:
        from endless.core.store import Database
    except ImportError:
        report.add("store", "error", f"the store setting names {shown}, but the PostgreSQL driver is not installed",
                   "pip install 'endless-memory[postgres]'")
        return
    db = Database(store_url(settings), directory=True)  # (its search path: the directory of memories)
    try:
        ssl, version, host = db.rows("SELECT s.ssl, s.version, inet_server_addr()::text FROM pg_stat_ssl s "
                                     "WHERE s.pid = pg_backend_pid()")[0]
        made = db.rows("SELECT to_regclass('endless_keys') IS NOT NULL")[0][0]
        memories = db.rows("SELECT count(*) FROM endless_keys")[0][0] if made else 0
    except OSError as exc:  # StoreUnavailable: its message names the store masked and says what to do
        report.add("store", "error", str(exc), "check the server, the URL's user and password, and its TLS options")
        return
    finally:
        db.close()
    tls = f"encrypted ({version})" if ssl else "not encrypted"
    report.add("store", "ok", f"the store {shown} answers, {tls}; it holds {count(memories, 'memory', 'memories')}")
    if not ssl and host is not None and host.split("/")[0] not in _LOCAL_HOSTS:
        report.add("store.tls", "warning", f"the connection to {shown} is not encrypted, and the server is not on "
                                           "this machine: every word of the memories crosses the network in clear",
                   "add ?sslmode=verify-full&sslrootcert=/path/ca.pem to the URL, or set store_sslmode and "
                   "store_sslrootcert")
