"""The host RPC's local guards: its credential file, page address expiry, the header deadline on keep-alive.

The attacks themselves (no token, half-sent requests, a flood by another
user) are in ``test_attacks.py``; these pin the parts they rest on.
"""

from __future__ import annotations

import os
import socket
import stat
import sys
import time

import pytest

from endless.core.store.durable import LinkRefused
from endless.core.settings import SettingsError, load_settings
from endless.faces.rpc import credential, start_in_thread
from endless.faces.rpc.app import EXPIRED, PageKeys

import rpc_fixtures as F
from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
from attack import closed_within  # noqa: E402  (one poller for the script and the tests)


def test_token_is_made_once_0600_and_kept(tmp_path):
    root = tmp_path / "root"
    first = credential.ensure_token(root)
    path = credential.token_path(root)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(root.stat().st_mode) == 0o700
    assert credential.ensure_token(root) == first == credential.read_token(root)
    assert len(first) >= 40
    assert credential.matches(f"Bearer {first}", first) and credential.matches(f"bearer  {first} ", first)
    assert not credential.matches(f"Bearer {first}x", first) and not credential.matches(first, first)
    assert not credential.matches(None, first) and not credential.matches("Basic " + first, first)


def test_a_token_others_could_read_is_replaced(tmp_path):
    root = tmp_path / "root"
    first = credential.ensure_token(root)
    os.chmod(credential.token_path(root), 0o644)
    second = credential.ensure_token(root)
    assert second != first
    assert stat.S_IMODE(credential.token_path(root).stat().st_mode) == 0o600


def test_a_linked_token_file_is_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("x" * 50)
    credential.token_path(root).symlink_to(elsewhere)
    with pytest.raises(LinkRefused, match="symbolic link.*rm "):
        credential.ensure_token(root)
    assert elsewhere.read_text() == "x" * 50


def test_page_addresses_work_once_and_expire():
    now = [100.0]
    keys = PageKeys(lifetime=60.0, clock=lambda: now[0])
    used, late, fresh = keys.new_token(), keys.new_token(), keys.new_token()
    cookie = keys.redeem(used)
    assert cookie not in (None, EXPIRED) and keys.valid(cookie)
    assert keys.redeem(used) is None  # once
    now[0] += 61
    assert keys.redeem(late) == EXPIRED
    assert keys.redeem(late) is None
    assert keys.redeem(keys.new_token()) not in (None, EXPIRED)
    assert keys.valid(cookie)  # a page already open stays open
    assert keys.redeem(fresh) == EXPIRED


@pytest.mark.parametrize("name", ["rpc_header_seconds", "rpc_body_seconds", "rpc_page_token_seconds",
                                  "rpc_connections_per_client"])
def test_guard_settings_must_be_positive(name):
    with pytest.raises(SettingsError, match=name):
        load_settings(environ={f"ENDLESS_{name.upper()}": "0", "ENDLESS_CONFIG": "/nonexistent.toml"})


def test_header_deadline_covers_the_second_request_of_a_keep_alive_connection(tmp_path):
    served = start_in_thread(F.small_settings(rpc_header_seconds=1.0), 0, root=tmp_path / "root")
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            request = f"GET /static/app.css HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n\r\n".encode()
            sock.sendall(request)
            sock.settimeout(5)
            first = b""
            while b"\r\n\r\n" not in first:
                first += sock.recv(65536)
            assert first.startswith(b"HTTP/1.1 200"), first[:60]
            length = int(first.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
            body = first.split(b"\r\n\r\n", 1)[1]
            while len(body) < length:
                body += sock.recv(65536)
            start = time.monotonic()
            sock.sendall(b"GET /static/app.css HTTP/1.1\r\nHost: 127.")  # and nothing more
            closed, _, data = closed_within(sock, 4.0)
            took = time.monotonic() - start
        assert closed and not data, data[:60]
        assert 0.8 <= took < 4.0, took  # the deadline (1 s), not the keep-alive limit (5 s)
    finally:
        served.stop()


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="the peer's uid is read on Linux only")
def test_the_peer_uid_from_the_kernel_agrees_with_proc_net_tcp(monkeypatch):
    from endless.faces.rpc import guard

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname()) as client:
            accepted, _ = server.accept()
            with accepted:
                peer, local = accepted.getpeername(), accepted.getsockname()
                asked = guard.peer_uid(peer, local)
                monkeypatch.delattr(socket, "AF_NETLINK")  # the fallback: a scan of /proc/net/tcp
                scanned = guard.peer_uid(peer, local)
                gone = guard.peer_uid((peer[0], client.getsockname()[1] ^ 1), local)
    assert asked == scanned == os.geteuid()
    assert gone is None
