"""The store floor: what a memory keeps on disk and how it is kept safe (DESIGN §1, §2.5).

Durable writes, locks and the writer's lease, the order log, the journal of a turn in
progress, the tree's lines, turns on their way into the log, keys, sessions and waiters.
Everything above reaches the disk through the names listed here; the storage seam
(:mod:`endless.core.store.contract`) names the operations a second backend must offer.

Names load on first use, so a command imports only the modules it touches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from endless.core.surface import lazy_names

# each public name and the module of this floor that holds it (a module names itself)
_WHERE = {
    "Batch": "contract",
    "LineStore": "contract",
    "LogStore": "contract",
    "MemoryHost": "contract",
    "Store": "contract",
    "contract": "contract",
    "Scan": "checks",
    "byte_ranges": "byte_ranges",
    "checks": "checks",
    "LinkRefused": "durable",
    "durable": "durable",
    "iter_lines": "durable",
    "read_complete": "durable",
    "FileStore": "files",
    "open_store": "choose",
    "open_directory": "choose",
    "copying": "copying",
    "CopyRefused": "copying",
    "FilesSide": "copying",
    "PgSide": "pg_copy",
    "Database": "pg_db",
    "find_memory": "choose",
    "memory_folder": "choose",
    "Directory": "directory",
    "Found": "directory",
    "directory": "directory",
    "FolderIdentity": "folder_keys",
    "IdFileError": "folder_keys",
    "folder_identity": "folder_keys",
    "folder_keys": "folder_keys",
    "shown_project": "folder_keys",
    "path_key": "keys",
    "files": "files",
    "Presence": "identity",
    "identity": "identity",
    "identity_key": "identity",
    "messages_identity": "identity",
    "journal": "journal",
    "FORMAT": "keyfile",
    "keyfile": "keyfile",
    "InvalidKey": "keys",
    "Key": "keys",
    "MEMORY_ID": "keys",
    "check_memory_id": "keys",
    "gateway_key": "keys",
    "memory_id": "keys",
    "workspace_key": "keys",
    "ChangeLock": "locks",
    "Lease": "locks",
    "LockBusy": "locks",
    "holder_pid": "locks",
    "is_held": "locks",
    "Damage": "log",
    "OrderLog": "log",
    "TurnInfo": "log",
    "examine": "records",
    "log": "log",
    "records": "records",
    "parse_turn": "records",
    "record_tail": "records",
    "sealed": "records",
    "shown": "records",
    "stored_from": "records",
    "tombstone": "records",
    "with_tid": "records",
    "tail_tid": "records",
    "KINDS": "messages",
    "Message": "messages",
    "Stored": "messages",
    "TraceBuilder": "messages",
    "check_kind": "messages",
    "prepare": "messages",
    "tag": "messages",
    "utf8_size": "messages",
    "key_for_session": "sessions",
    "sessions": "sessions",
    "TreeStore": "tree",
    "is_erased_line": "tree",
    "NODE_HEAD": "tree_lines",
    "node_part": "tree_lines",
    "parse_node": "tree",
    "COMPLETED": "turns",
    "EncodedTurn": "turns",
    "KEPT": "turns",
    "STATUSES": "turns",
    "TurnInProgress": "turns",
    "TurnRecord": "turns",
    "close_orphans": "turns",
    "decoded": "turns",
    "place_encoded": "turns",
    "Waiters": "waiters",
    "pg_db": "pg_db",
    "REGISTRY": "registry",
    "registry": "registry",
}
__all__ = sorted(_WHERE)
__getattr__ = lazy_names(__name__, _WHERE)

if TYPE_CHECKING:
    from endless.core.store import byte_ranges, checks
    from endless.core.store.checks import Scan
    from endless.core.store import contract
    from endless.core.store.contract import Batch, LineStore, LogStore, MemoryHost, Store
    from endless.core.store import durable
    from endless.core.store.durable import LinkRefused, iter_lines, read_complete
    from endless.core.store import files
    from endless.core.store.files import FileStore
    from endless.core.store.choose import find_memory, memory_folder, open_directory, open_store
    from endless.core.store import copying, directory, folder_keys
    from endless.core.store.copying import CopyRefused, FilesSide
    from endless.core.store.pg_copy import PgSide
    from endless.core.store.pg_db import Database
    from endless.core.store.directory import Directory, Found
    from endless.core.store.folder_keys import FolderIdentity, IdFileError, folder_identity, shown_project
    from endless.core.store import identity
    from endless.core.store.identity import Presence, identity_key, messages_identity
    from endless.core.store import journal
    from endless.core.store import keyfile
    from endless.core.store.keyfile import FORMAT
    from endless.core.store.keys import InvalidKey, Key, MEMORY_ID, check_memory_id, gateway_key, memory_id, path_key, workspace_key
    from endless.core.store.locks import ChangeLock, Lease, LockBusy, holder_pid, is_held
    from endless.core.store import log
    from endless.core.store.log import Damage, OrderLog, TurnInfo, tid_number
    from endless.core.store import records
    from endless.core.store.records import examine, parse_turn, record_tail, sealed, shown, stored_from, tombstone, with_tid
    from endless.core.store.messages import KINDS, Message, Stored, TraceBuilder, check_kind, prepare, tag, utf8_size
    from endless.core.store import sessions
    from endless.core.store.sessions import key_for_session
    from endless.core.store.tree import TreeStore, is_erased_line, parse_node
    from endless.core.store.tree_lines import NODE_HEAD, node_part
    from endless.core.store.turns import COMPLETED, EncodedTurn, KEPT, STATUSES, TurnInProgress, TurnRecord, close_orphans, decoded, place_encoded
    from endless.core.store.waiters import Waiters
    from endless.core.store import pg_db
    from endless.core.store import registry
    from endless.core.store.registry import REGISTRY
