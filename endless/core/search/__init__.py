"""The search floor: the query language, the full-text index and the scans (DESIGN §5).

The index is derived from the store and can always be rebuilt from it; every hit is read
back from the log before a face shows it.  It stands on the store and the view.

Names load on first use, so a command imports only the modules it touches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from endless.core.surface import lazy_names

# each public name and the module of this floor that holds it (a module names itself)
_WHERE = {
    "Searchable": "finder",
    "finder": "finder",
    "follow": "follow",
    "CHATS_RENAMED": "index",
    "IndexBusy": "index",
    "SearchIndex": "index",
    "WordIndex": "word_index",
    "open_index": "word_index",
    "word_index": "word_index",
    "pg_index": "pg_index",
    "ZEROED": "index",
    "index": "index",
    "is_damage": "index",
    "line_key": "index",
    "query": "query",
    "ranking": "ranking",
    "scan": "scan",
    "upkeep": "upkeep",
    "when": "when",
}
__all__ = sorted(_WHERE)
__getattr__ = lazy_names(__name__, _WHERE)

if TYPE_CHECKING:
    from endless.core.search import finder
    from endless.core.search.finder import Searchable
    from endless.core.search import follow
    from endless.core.search import index
    from endless.core.search.index import CHATS_RENAMED, IndexBusy, SearchIndex, ZEROED, is_damage, line_key
    from endless.core.search import word_index
    from endless.core.search.word_index import WordIndex, open_index
    from endless.core.search import pg_index
    from endless.core.search import query
    from endless.core.search import ranking
    from endless.core.search import scan
    from endless.core.search import upkeep
    from endless.core.search import when
