"""The privacy floor: forgetting and redaction (DESIGN §5, forget).

Forget blanks messages in the log and in every derived copy; redaction keeps secrets out of
the memory at capture.  It stands on the floors below.

Names load on first use, so a command imports only the modules it touches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from endless.core.surface import lazy_names

# each public name and the module of this floor that holds it (a module names itself)
_WHERE = {
    "derived": "derived",
    "PURGE": "forget",
    "REDO": "forget",
    "REGISTRY": "forget",
    "forget": "forget",
    "counts": "redact",
    "redact": "redact",
}
__all__ = sorted(_WHERE)
__getattr__ = lazy_names(__name__, _WHERE)

if TYPE_CHECKING:
    from endless.core.privacy import derived
    from endless.core.privacy import forget
    from endless.core.privacy.forget import PURGE, REDO, REGISTRY
    from endless.core.privacy import redact
    from endless.core.privacy.redact import counts
