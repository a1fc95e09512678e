"""The host RPC and the History page (DESIGN §6): a Starlette app on 127.0.0.1."""

from endless.rpc.app import create_app
from endless.rpc.serve import Served, start_in_thread

__all__ = ["create_app", "start_in_thread", "Served"]
