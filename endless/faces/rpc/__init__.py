"""The host RPC and the History page (DESIGN §6): a Starlette app on 127.0.0.1.

``create_app``, ``start_in_thread`` and ``Served`` are imported lazily, so the
command line starts without loading Starlette.
"""

from typing import Any

__all__ = ["create_app", "start_in_thread", "Served"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from endless.faces.rpc.app import create_app
        return create_app
    if name in ("start_in_thread", "Served"):
        from endless.faces.rpc import serve
        return getattr(serve, name)
    raise AttributeError(name)
