"""TLS to the PostgreSQL store (issue 31 item 5): the options in the URL or as settings reach the driver.

A server of its own that accepts nothing but TLS with a client certificate
(``hostssl … cert``), its certificates made here with ``openssl``; the commands
run as a person runs them, from a fresh ENDLESS_HOME.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from commands import endless_command, fresh_home

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the certificates")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _authority(folder: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=folder)


def _signed(folder: Path, name: str, subject: str, authority: str, extensions: str = "") -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={subject}", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=folder)
    (folder / f"{name}.ext").write_text(extensions or "basicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{authority}.pem", "-CAkey", f"{authority}.key",
             "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=folder)
    os.chmod(folder / f"{name}.key", 0o600)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    import pg_server

    if pg_server.binaries() is None:
        pytest.skip("no PostgreSQL binaries here")
    certs = tmp_path_factory.mktemp("certs")
    _authority(certs, "ca")
    _authority(certs, "other-ca")
    _signed(certs, "server", "localhost", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _signed(certs, "client", "postgres", "ca")

    def setup(cluster) -> None:
        data = cluster.data
        for name in ("server.pem", "server.key", "ca.pem"):
            shutil.copy(certs / name, data / name)
            if cluster.as_user:
                owner = pwd.getpwnam("postgres")
                os.chown(data / name, owner.pw_uid, owner.pw_gid)
            os.chmod(data / name, 0o600)
        with open(data / "postgresql.conf", "a") as conf:
            conf.write("\nssl = on\nssl_cert_file = 'server.pem'\nssl_key_file = 'server.key'\n"
                       "ssl_ca_file = 'ca.pem'\n")
        # Only TLS with a certificate this CA signed, for the user it names; no plain connection at all.
        (data / "pg_hba.conf").write_text("local all all trust\nhostssl all all 127.0.0.1/32 cert\n")

    cluster = pg_server.start_cluster(setup)
    try:
        yield cluster, certs
    finally:
        cluster.remove()


def _env(tmp_path: Path, url: str, **settings: str) -> dict:
    (tmp_path / "home-of").mkdir(exist_ok=True)
    env = fresh_home(tmp_path / "home-of")[2]
    return {**env, "ENDLESS_STORE": url, **{f"ENDLESS_{k.upper()}": v for k, v in settings.items()}}


def _import(env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    source = tmp_path / "chat.jsonl"
    source.write_bytes(orjson.dumps({"role": "user", "content": "over TLS", "at": 1.76e9, "session": "s"}) + b"\n")
    return subprocess.run([*endless_command(), "import", "--workspace", str(tmp_path), str(source)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_tls_options_as_settings_reach_the_driver(tmp_path, tls_server):
    cluster, certs = tls_server
    url = f"postgresql://postgres:hunter2-secret@127.0.0.1:{cluster.port}/postgres"
    env = _env(tmp_path, url, store_sslmode="verify-full", store_sslrootcert=str(certs / "ca.pem"),
               store_sslcert=str(certs / "client.pem"), store_sslkey=str(certs / "client.key"))
    done = _import(env, tmp_path)
    assert done.returncode == 0, done.stderr
    doctor = subprocess.run([*endless_command(), "doctor"], capture_output=True, text=True, env=env, timeout=120)
    assert f"the store postgresql://postgres:***@127.0.0.1:{cluster.port}/postgres answers, encrypted (TLSv1." \
        in doctor.stdout, doctor.stdout
    shown = subprocess.run([*endless_command(), "config"], capture_output=True, text=True, env=env, timeout=60)
    assert "hunter2-secret" not in shown.stdout + doctor.stdout + done.stderr + doctor.stderr
    assert "verify-full" in shown.stdout


def test_tls_options_in_the_url_reach_the_driver(tmp_path, tls_server):
    cluster, certs = tls_server
    url = (f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres?sslmode=verify-full"
           f"&sslrootcert={certs / 'ca.pem'}&sslcert={certs / 'client.pem'}&sslkey={certs / 'client.key'}")
    done = _import(_env(tmp_path, url), tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("case", ["no client certificate", "another authority", "plain"])
def test_a_refused_tls_connection_says_so_and_shows_no_secret(tmp_path, tls_server, case):
    cluster, certs = tls_server
    url = f"postgresql://postgres:hunter2-secret@127.0.0.1:{cluster.port}/postgres"
    settings = {"no client certificate": {"store_sslmode": "verify-full", "store_sslrootcert": str(certs / "ca.pem")},
                "another authority": {"store_sslmode": "verify-full", "store_sslrootcert": str(certs / "other-ca.pem"),
                                      "store_sslcert": str(certs / "client.pem"),
                                      "store_sslkey": str(certs / "client.key")},
                "plain": {"store_sslmode": "disable"}}[case]
    done = _import(_env(tmp_path, url, **settings), tmp_path)
    assert done.returncode != 0
    assert f"cannot connect to the memory store postgresql://postgres:***@127.0.0.1:{cluster.port}/postgres" \
        in done.stderr, done.stderr
    assert "hunter2-secret" not in done.stderr + done.stdout and "Traceback" not in done.stderr
    if case == "another authority":
        assert "certificate verify failed" in done.stderr


def test_a_bad_sslmode_is_refused_by_the_settings(tmp_path):
    env = _env(tmp_path, "postgresql://u:p@127.0.0.1:1/x", store_sslmode="very-secure")
    done = subprocess.run([*endless_command(), "config"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "store_sslmode must be one of disable, allow" in done.stderr
