"""TLS on the front end (props.proxy-frontend-ssl-*): SSLRequest in the handshake, then the whole session
over TLS, with the mariadb CLI, PyMySQL, mysql-connector and node mysql2; a self-signed certificate when
none is configured; caching_sha2_password's password in clear only over TLS."""

from __future__ import annotations

import datetime
import json
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pymysql.cursors
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from pymysql._auth import sha2_rsa_encrypt

from protocol import auth
from protocol.constants import Capability
from protocol.framing import FrameDecoder, encode_packet
from protocol.packets import AuthMoreData, HandshakeResponse41, HandshakeV10, SSLRequest
from proxy.execution import fastpath
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = REPO / "tests" / "compat" / "node"
USERS = (
    {"user": "root@%", "password": "root", "admin": True},
    {"user": "sha@%", "password": "sha2pw", "authenticationMethodName": "caching_sha2_password"},
)
CAPS = (Capability.LONG_PASSWORD | Capability.LONG_FLAG | Capability.PROTOCOL_41 | Capability.TRANSACTIONS
        | Capability.SECURE_CONNECTION | Capability.MULTI_RESULTS | Capability.PLUGIN_AUTH
        | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA | Capability.CONNECT_WITH_DB)


def _insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _proxy(mariadb: MariaDBServer, conf_dir: Path, **props: Any) -> RunningProxy:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS tls_ds")
    conf = write_conf(conf_dir, {"tlsdb": {"ds_0": (mariadb, "tls_ds")}}, users=USERS,
                      props={"proxy-frontend-ssl-enabled": True, **props})
    return start_proxy(conf)


@pytest.fixture(scope="module")
def tls_proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    proxy = _proxy(mariadb, tmp_path_factory.mktemp("tls-conf"))
    yield proxy
    proxy.stop()


@pytest.mark.parametrize("pause", [0.5, 1.5])
def test_a_tls_client_that_reads_slowly_gets_its_whole_result(tls_proxy: RunningProxy, pause: float) -> None:
    """The fast path stops reading the backend while the client's TLS transport is paused, and reads again
    when it drains. It used to stop at its own threshold (256 KiB queued), below the TLS transport's
    high-water mark (512 KiB): the transport never paused, so it never said it had drained, and a client
    that read slowly waited for the rest of its rows for ever."""
    import time

    conn = pymysql.connect(host=tls_proxy.host, port=tls_proxy.port, user="root", password="root",
                           database="tlsdb", ssl=_insecure(), autocommit=True, read_timeout=20,
                           cursorclass=pymysql.cursors.SSCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")  # the fast path takes the session's next statements
            cur.fetchall()
            cur.execute("SELECT seq, REPEAT('z', 1000) FROM seq_1_to_20000")
            time.sleep(pause)  # the client reads nothing: the proxy's buffers fill, the transport pauses
            got = [(int(seq), len(text)) for seq, text in cur]
            assert got == [(n, 1000) for n in range(1, 20001)]
    finally:
        conn.close()


def test_large_answers_one_after_another_over_tls(tls_proxy: RunningProxy) -> None:
    """Answers of several TLS records and socket buffers each, back to back through the fast path (a
    sequence like this one stalled when the fast path paused below the TLS transport's high-water mark)."""
    conn = pymysql.connect(host=tls_proxy.host, port=tls_proxy.port, user="root", password="root",
                           database="tlsdb", ssl=_insecure(), autocommit=True, read_timeout=20)
    try:
        with conn.cursor() as cur:
            for n in (5_000_000, 300_000, 70_000, 5_000_000, 16_700_000, 5_000_000):
                cur.execute(f"SELECT REPEAT('y', {n})")
                assert len(cur.fetchone()[0]) == n
    finally:
        conn.close()


def test_pymysql_over_tls_runs_the_whole_session_encrypted(tls_proxy: RunningProxy) -> None:
    taken = fastpath.STATS.taken
    conn = pymysql.connect(host=tls_proxy.host, port=tls_proxy.port, user="root", password="root",
                           database="tlsdb", ssl=_insecure(), autocommit=True)
    try:
        sock = conn._sock
        assert isinstance(sock, ssl.SSLSocket) and sock.version() in ("TLSv1.2", "TLSv1.3")
        with conn.cursor() as cur:
            for i in range(5):  # the later ones go through the fast path, over the TLS transport
                cur.execute(f"SELECT {i}, REPEAT('x', 100000)")
                assert cur.fetchall() == ((i, "x" * 100000),)
            cur.execute("SELECT REPEAT('y', 5000000)")  # a result larger than TLS records and socket buffers
            assert len(cur.fetchone()[0]) == 5_000_000
        assert fastpath.STATS.taken > taken
    finally:
        conn.close()


def test_a_client_without_tls_still_connects(tls_proxy: RunningProxy) -> None:
    assert tls_proxy.query("SELECT 1", "tlsdb") == [(1,)]


def test_mysql_connector_over_tls_text_and_prepared(tls_proxy: RunningProxy) -> None:
    conn = mysql.connector.connect(host=tls_proxy.host, port=tls_proxy.port, user="root", password="root",
                                   database="tlsdb", use_pure=True, ssl_disabled=False, ssl_verify_cert=False,
                                   autocommit=True)
    try:
        assert conn._socket.sock.version() in ("TLSv1.2", "TLSv1.3")
        cur = conn.cursor()
        cur.execute("SELECT 'plain', 2")
        assert cur.fetchall() == [("plain", 2)]
        prepared = conn.cursor(prepared=True)
        prepared.execute("SELECT ?, ? + 1", ("bound", 41))
        assert [tuple(r) for r in prepared.fetchall()] == [("bound", 42)]
    finally:
        conn.close()


@pytest.mark.skipif(shutil.which("mariadb") is None, reason="the mariadb CLI is not installed")
def test_mariadb_cli_with_ssl(tls_proxy: RunningProxy) -> None:
    out = subprocess.run(
        ["mariadb", "-h", tls_proxy.host, "-P", str(tls_proxy.port), "-uroot", "-proot", "--ssl",
         "--skip-ssl-verify-server-cert", "tlsdb", "-e", "status; SELECT 'over tls' AS what"],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert "Cipher in use is" in out.stdout, out.stdout
    assert "over tls" in out.stdout


@pytest.mark.skipif(shutil.which("node") is None or not (NODE_DIR / "node_modules" / "mysql2").is_dir(),
                    reason="node mysql2 is not installed (.ci/run installs it)")
def test_node_mysql2_over_tls(tls_proxy: RunningProxy) -> None:
    script = f"""
const mysql = require({json.dumps(str(NODE_DIR / "node_modules" / "mysql2" / "promise"))});
(async () => {{
  const c = await mysql.createConnection({{host: {json.dumps(tls_proxy.host)}, port: {tls_proxy.port},
    user: 'root', password: 'root', database: 'tlsdb', ssl: {{rejectUnauthorized: false}}}});
  const [rows] = await c.query("SELECT 'node' AS who, 7 AS n");
  const [prows] = await c.execute("SELECT ? AS bound", ['p']);
  console.log(JSON.stringify({{rows, prows, tls: c.connection.stream.getProtocol()}}));
  await c.end();
}})().catch(e => {{ console.error(e); process.exit(1); }});
"""
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["rows"] == [{"who": "node", "n": 7}] and got["prows"] == [{"bound": "p"}]
    assert got["tls"] in ("TLSv1.2", "TLSv1.3")


def test_caching_sha2_full_authentication_over_tls_and_over_rsa(tls_proxy: RunningProxy) -> None:
    # first login since start-up: full authentication; over TLS the password goes in clear
    conn = pymysql.connect(host=tls_proxy.host, port=tls_proxy.port, user="sha", password="sha2pw",
                           database="tlsdb", ssl=_insecure())
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchone()[0].startswith("sha@")
    conn.close()


class _Raw:
    def __init__(self, proxy: RunningProxy) -> None:
        self.sock = socket.create_connection((proxy.host, proxy.port), timeout=10)
        self.frames = FrameDecoder()
        self.pending: list[tuple[int, int, bytes]] = []
        self.greeting = HandshakeV10.decode(self.read())

    def read(self) -> bytes:
        while not self.pending:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionResetError("closed")
            self.frames.feed(data)
            self.pending.extend(self.frames.packets())
        return self.pending.pop(0)[2]


def test_caching_sha2_refuses_a_password_in_clear_over_plain_tcp(mariadb: MariaDBServer, tmp_path: Path) -> None:
    proxy = _proxy(mariadb, tmp_path / "conf")  # its own: the caching_sha2 cache starts empty
    try:
        c = _Raw(proxy)
        scramble = c.greeting.auth_data
        c.sock.sendall(encode_packet(HandshakeResponse41(CAPS, 1 << 24, 45, "sha",
                                                         auth.caching_sha2_response("sha2pw", scramble), "tlsdb",
                                                         auth.CACHING_SHA2_PASSWORD).encode(), 1)[0])
        assert AuthMoreData.decode(c.read()).data == auth.PERFORM_FULL_AUTHENTICATION
        c.sock.sendall(encode_packet(b"sha2pw\x00", 3)[0])  # the password, readable on the wire
        answer = c.read()
        assert answer[:1] == b"\xff" and int.from_bytes(answer[1:3], "little") == 1045, answer
        # the RSA way over plain TCP: ask for the public key, send the password encrypted with it
        c = _Raw(proxy)
        scramble = c.greeting.auth_data
        c.sock.sendall(encode_packet(HandshakeResponse41(CAPS, 1 << 24, 45, "sha",
                                                         auth.caching_sha2_response("sha2pw", scramble), "tlsdb",
                                                         auth.CACHING_SHA2_PASSWORD).encode(), 1)[0])
        assert AuthMoreData.decode(c.read()).data == auth.PERFORM_FULL_AUTHENTICATION
        c.sock.sendall(encode_packet(auth.REQUEST_PUBLIC_KEY, 3)[0])
        pem = AuthMoreData.decode(c.read()).data
        c.sock.sendall(encode_packet(sha2_rsa_encrypt(b"sha2pw", scramble, pem), 5)[0])
        assert c.read()[:1] == b"\x00"  # OK
        # and a plain login answered with mysql_native_password, which the proxy checks itself
        conn = pymysql.connect(host=proxy.host, port=proxy.port, user="sha", password="sha2pw", database="tlsdb")
        conn.close()
    finally:
        proxy.stop()


def test_the_client_hello_in_the_same_segment_as_the_ssl_request(tls_proxy: RunningProxy) -> None:
    """A client that sends SSLRequest and its TLS ClientHello in one write (MySQL clients do not wait)."""
    c = _Raw(tls_proxy)
    assert c.greeting.capabilities & Capability.SSL
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _insecure().wrap_bio(incoming, outgoing, server_side=False)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    c.sock.sendall(encode_packet(SSLRequest(CAPS | Capability.SSL, 1 << 24, 45).encode(), 1)[0] + hello)
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            out = outgoing.read()
            if out:
                c.sock.sendall(out)
            incoming.write(c.sock.recv(1 << 16))
    out = outgoing.read()
    if out:
        c.sock.sendall(out)
    scramble = c.greeting.auth_data
    tls.write(encode_packet(HandshakeResponse41(CAPS | Capability.SSL, 1 << 24, 45, "root",
                                                auth.native_password_response("root", scramble), "tlsdb",
                                                auth.NATIVE_PASSWORD).encode(), 2)[0])
    c.sock.sendall(outgoing.read())
    frames = FrameDecoder()
    packets: list[tuple[int, int, bytes]] = []
    while not packets:
        try:
            frames.feed(tls.read(1 << 16))
        except ssl.SSLWantReadError:
            incoming.write(c.sock.recv(1 << 16))
            continue
        packets.extend(frames.packets())
    assert packets[0][2][:1] == b"\x00", packets  # OK


def _cert_files(tmp: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "configured.shardproxy.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2)).sign(key, hashes.SHA256()))
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_configured_certificate_version_and_cipher(mariadb: MariaDBServer, tmp_path: Path) -> None:
    cert_file, key_file = _cert_files(tmp_path)
    proxy = _proxy(mariadb, tmp_path / "conf", **{
        "proxy-frontend-ssl-cert-file": str(cert_file), "proxy-frontend-ssl-key-file": str(key_file),
        "proxy-frontend-ssl-version": "TLSv1.2", "proxy-frontend-ssl-cipher": "ECDHE-RSA-AES128-GCM-SHA256",
    })
    try:
        conn = pymysql.connect(host=proxy.host, port=proxy.port, user="root", password="root", database="tlsdb",
                               ssl=_insecure())
        sock = conn._sock
        assert sock.version() == "TLSv1.2" and sock.cipher()[0] == "ECDHE-RSA-AES128-GCM-SHA256"
        peer = x509.load_der_x509_certificate(sock.getpeercert(binary_form=True))
        assert peer.subject.rfc4514_string() == "CN=configured.shardproxy.test"
        conn.close()
    finally:
        proxy.stop()


@pytest.mark.parametrize("props,needle", [
    ({"proxy-frontend-ssl-version": "TLSv9"}, "proxy-frontend-ssl-version"),
    ({"proxy-frontend-ssl-cert-file": "/nonexistent.pem", "proxy-frontend-ssl-key-file": "/nonexistent.key"},
     "proxy-frontend-ssl-cert-file"),
    ({"proxy-frontend-ssl-cert-file": "/nonexistent.pem"}, "go together"),
], ids=["version", "missing-file", "cert-without-key"])
def test_bad_tls_settings_stop_the_start(mariadb: MariaDBServer, tmp_path: Path, props: dict[str, Any],
                                         needle: str) -> None:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS tls_ds")
    conf = write_conf(tmp_path / "conf", {"tlsdb": {"ds_0": (mariadb, "tls_ds")}}, users=USERS,
                      props={"proxy-frontend-ssl-enabled": True, **props})
    out = subprocess.run([sys.executable, "-m", "proxy", "serve", "--conf", str(conf), "--port", "0"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "configuration error" in out.stderr and needle in out.stderr and "global.yaml" in out.stderr
    assert "Traceback" not in out.stderr


def test_tls_on_uvloop(mariadb: MariaDBServer, tmp_path: Path) -> None:
    """`shardproxy serve` runs on uvloop when it is installed: its start_tls and transports differ."""
    pytest.importorskip("uvloop")
    mariadb.execute("CREATE DATABASE IF NOT EXISTS tls_ds")
    conf = write_conf(tmp_path / "conf", {"tlsdb": {"ds_0": (mariadb, "tls_ds")}}, users=USERS,
                      props={"proxy-frontend-ssl-enabled": True})
    proxy = start_proxy(conf, use_uvloop=True)
    try:
        for _ in range(3):
            conn = pymysql.connect(host=proxy.host, port=proxy.port, user="root", password="root",
                                   database="tlsdb", ssl=_insecure(), autocommit=True)
            assert conn._sock.version() in ("TLSv1.2", "TLSv1.3")
            with conn.cursor() as cur:
                for i in range(3):
                    cur.execute(f"SELECT {i}, REPEAT('z', 300000)")
                    assert cur.fetchall() == ((i, "z" * 300000),)
            conn.close()
        test_the_client_hello_in_the_same_segment_as_the_ssl_request(proxy)
    finally:
        proxy.stop()


def test_tls_handshakes_on_uvloop_under_concurrency(mariadb: MariaDBServer, tmp_path: Path) -> None:
    """Many TLS logins at once on uvloop: each ClientHello reaches the TLS layer, also when it comes in its own
    segment while the loop polls the socket before start_tls runs (it went to the plain protocol and the handshake
    timed out: test_tls_on_uvloop failed about one run in twenty under load)."""
    import threading

    pytest.importorskip("uvloop")
    mariadb.execute("CREATE DATABASE IF NOT EXISTS tls_ds")
    conf = write_conf(tmp_path / "conf", {"tlsdb": {"ds_0": (mariadb, "tls_ds")}}, users=USERS,
                      props={"proxy-frontend-ssl-enabled": True})
    proxy = start_proxy(conf, use_uvloop=True)
    failures: list[str] = []

    def logins(worker: int) -> None:
        for i in range(12):
            try:
                conn = pymysql.connect(host=proxy.host, port=proxy.port, user="root", password="root",
                                       database="tlsdb", ssl=_insecure(), autocommit=True, connect_timeout=20)
                with conn.cursor() as cur:
                    cur.execute(f"SELECT {worker * 100 + i}")
                    if cur.fetchall() != ((worker * 100 + i,),):
                        failures.append(f"worker {worker}: wrong row")
                conn.close()
            except Exception as exc:  # the thread's failure is the test's
                failures.append(f"worker {worker}, login {i}: {exc!r}")

    try:
        threads = [threading.Thread(target=logins, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not failures, failures[:3]
    finally:
        proxy.stop()
