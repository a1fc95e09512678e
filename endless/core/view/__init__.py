"""The view floor: the lines a model reads, tiled, kept and rendered (DESIGN §2.4).

The pure sawtooth logic, the keeper of the chat and writer views, the rendering rules
shared by every face, and the free lines that need no model call.  It stands on the store.

Names load on first use, so a command imports only the modules it touches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from endless.core.surface import lazy_names

# each public name and the module of this floor that holds it (a module names itself)
_WHERE = {
    "FreeStretch": "free_nodes",
    "free_above": "free_nodes",
    "free_encoded": "free_nodes",
    "free_leaves": "free_nodes",
    "free_parents": "free_nodes",
    "Prefix": "keeper",
    "ViewKeeper": "keeper",
    "ViewLine": "render",
    "controls_shown": "render",
    "fold": "render",
    "neutralise": "render",
    "recent_block": "render",
    "recent_line": "render",
    "render": "render",
    "state_line": "render",
    "Part": "tiling",
    "tiling": "tiling",
}
__all__ = sorted(_WHERE)
__getattr__ = lazy_names(__name__, _WHERE)

if TYPE_CHECKING:
    from endless.core.view.free_nodes import FreeStretch, free_above, free_encoded, free_leaves, free_parents
    from endless.core.view.keeper import Prefix, ViewKeeper
    from endless.core.view import render
    from endless.core.view.render import ViewLine, controls_shown, fold, neutralise, recent_block, recent_line, state_line
    from endless.core.view import tiling
    from endless.core.view.tiling import Part
