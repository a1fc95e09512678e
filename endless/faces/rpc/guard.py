"""Connection limits of the RPC server: a deadline for each request's headers, and a bound per local user.

uvicorn closes idle keep-alive connections and limits running requests, but
a connection that sends half a request line and stops is held for ever, and
every local user shares 127.0.0.1, so one of them could take every slot.
This protocol (uvicorn's own, with two additions) closes a connection whose
request line and headers have not all arrived within ``rpc_header_seconds``
of its first byte, and answers 503 to a new connection from a user who
already holds ``rpc_connections_per_client`` open ones.  On Linux the user is
the uid owning the peer's socket (asked of the kernel through netlink
sock_diag, else read from ``/proc/net/tcp``); elsewhere the peer's address
stands for it.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections import Counter
from typing import Any

from endless.core.store import durable
from endless.core.settings import Settings

_PROC_TCP = "/proc/net/tcp"


def _hex_endpoint(ip: str, port: int) -> str:
    """An IPv4 endpoint as ``/proc/net/tcp`` writes it (address bytes in host order, port big-endian)."""
    return socket.inet_aton(ip)[::-1].hex().upper() + f":{port:04X}"


_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NO_COOKIE = 0xFFFFFFFF


def _diag_uid(src: str, sport: int, dst: str, dport: int) -> int | None:
    """The uid owning the TCP socket ``src:sport -> dst:dport``, asked of the kernel by its exact
    address (netlink sock_diag, about 0.05 ms; a scan of ``/proc/net/tcp`` takes ~5 ms at 1,400 sockets)."""
    sockid = (struct.pack("!HH", sport, dport) + socket.inet_aton(src) + bytes(12) + socket.inet_aton(dst)
              + bytes(12) + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE))
    request = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0xFFFFFFFF) + sockid
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
        diag.settimeout(1.0)
        diag.send(struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + request)
        answer = diag.recv(8192)
    if len(answer) < 84 or struct.unpack_from("=H", answer, 4)[0] != _SOCK_DIAG_BY_FAMILY:
        return None  # an error message: no such socket
    # nlmsghdr (16), then inet_diag_msg: 4 bytes, the sockid (48), expires, rqueue, wqueue, uid.
    return struct.unpack_from("=I", answer, 16 + 4 + 48 + 12)[0]


def peer_uid(peer: tuple, local: tuple) -> int | None:
    """The uid owning the other end of a loopback IPv4 connection, or None where it cannot be told."""
    ip, port = peer[0], peer[1]
    if ip.startswith("::ffff:"):
        ip = ip[7:]
    here = local[0].removeprefix("::ffff:")
    if hasattr(socket, "AF_NETLINK"):
        try:
            return _diag_uid(ip, port, here, local[1])
        except (OSError, ValueError, struct.error):
            pass  # no sock_diag (a container may forbid it): read /proc/net/tcp instead
    try:
        mine = _hex_endpoint(ip, port)
        ours = _hex_endpoint(here, local[1])
        with open(_PROC_TCP, "rb") as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                if fields[1].decode() == mine and fields[2].decode() == ours:
                    return int(fields[7])
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return None


def client_of(transport: Any) -> str:
    """Who a connection belongs to: ``uid:N`` on Linux loopback, else the peer's address."""
    peer = transport.get_extra_info("peername")
    local = transport.get_extra_info("sockname")
    if not peer:
        return "unknown"
    uid = peer_uid(peer, local) if local else None
    return f"uid:{uid}" if uid is not None else f"addr:{peer[0]}"


def _busy_response(limit: int) -> bytes:
    body = (f"too many open connections from this user (more than {limit}); close some and try again "
            "(the rpc_connections_per_client setting)\n").encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def _base() -> type:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
        return HttpToolsProtocol
    except ImportError:  # httptools not installed: the pure-Python parser
        from uvicorn.protocols.http.h11_impl import H11Protocol
        return H11Protocol


def guarded_protocol(settings: Settings) -> type:
    """uvicorn's HTTP protocol with the header deadline and the per-user bound of ``settings``.

    A new class per server: its count of open connections is that server's own.
    """
    base = _base()
    header_seconds = settings.rpc_header_seconds
    limit = settings.rpc_connections_per_client
    clients: Counter = Counter()

    class Guarded(base):  # type: ignore[misc, valid-type]
        open_by_client = clients

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._endless_client = client_of(transport)
            self._endless_timer: Any = None
            self._endless_cycle: Any = None
            clients[self._endless_client] += 1
            if clients[self._endless_client] > limit:
                durable.log("rpc", f"refused a connection: {self._endless_client} holds "
                                   f"{clients[self._endless_client] - 1} already", logging.WARNING)
                transport.write(_busy_response(limit))
                transport.close()
                return
            self._endless_arm()

        def connection_lost(self, exc: Exception | None) -> None:
            client = getattr(self, "_endless_client", None)
            if client is not None:
                self._endless_client = None
                clients[client] -= 1
                if clients[client] <= 0:
                    del clients[client]
            if getattr(self, "_endless_timer", None) is not None:
                self._endless_timer.cancel()
                self._endless_timer = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            between = self.cycle is None or self.cycle.response_complete
            if between and (self._endless_timer is None or self._endless_cycle is not self.cycle):
                self._endless_arm()  # the first bytes of a new request: its headers' deadline starts
            super().data_received(data)

        def _endless_arm(self) -> None:
            if self._endless_timer is not None:
                self._endless_timer.cancel()
            self._endless_cycle = self.cycle
            self._endless_timer = self.loop.call_later(header_seconds, self._endless_late)

        def _endless_late(self) -> None:
            self._endless_timer = None
            if self.cycle is self._endless_cycle and not self.transport.is_closing():
                # No request began since the deadline was set: its headers never all arrived.
                self.transport.close()

    return Guarded
