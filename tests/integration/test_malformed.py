"""Malformed and hostile input on raw sockets, KILL and KILL QUERY: the proxy answers as MySQL would where
it can, never hangs or dies, and keeps serving other clients afterwards.

`RawClient` (also used by `test_passthrough_raw.py`) speaks the protocol with the project's own codec, so a
test can send exactly the bytes it wants and see exactly the bytes that come back.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pymysql
import pytest

from protocol import auth
from protocol.constants import Capability
from protocol.framing import FrameDecoder, encode_packet
from protocol.packets import ERRPacket, HandshakeResponse41, HandshakeV10, SSLRequest, is_eof, is_err, is_ok
from protocol.results import ResultRelay
from tests.integration.harness import RunningProxy

pytestmark = pytest.mark.integration

CLIENT_CAPS = (Capability.LONG_PASSWORD | Capability.LONG_FLAG | Capability.PROTOCOL_41 | Capability.TRANSACTIONS
               | Capability.SECURE_CONNECTION | Capability.MULTI_RESULTS | Capability.PLUGIN_AUTH
               | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA)


class RawClient:
    """A socket that speaks the MySQL protocol one packet at a time."""

    def __init__(self, host: str, port: int, timeout: float = 10) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.frames = FrameDecoder()
        self.pending: list[tuple[int, int, bytes]] = []
        self.greeting = HandshakeV10.decode(self.read()[1])

    def _fill(self) -> bool:
        data = self.sock.recv(1 << 20)
        if not data:
            return False
        self.frames.feed(data)
        self.pending.extend(self.frames.packets())
        return True

    def read(self) -> tuple[int, bytes]:
        """(sequence id, payload) of the next packet; ConnectionError when the server closed."""
        while not self.pending:
            if not self._fill():
                raise ConnectionResetError("closed by the server")
        first, _last, payload = self.pending.pop(0)
        return first, payload

    def closed(self, timeout: float = 5) -> bool:
        """True when the server closes the connection (after whatever it still sends) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self._fill():
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, payload: bytes, seq: int = 0) -> None:
        self.sock.sendall(encode_packet(payload, seq)[0])

    def login(self, user: str = "root", password: str = "root", *, database: str | None = "demo",
              caps: Capability = CLIENT_CAPS, plugin: str = auth.NATIVE_PASSWORD) -> bytes:
        """Sends the handshake response; returns the server's answer (OK or ERR, or the auth exchange's
        first packet for caching_sha2_password)."""
        if database:
            caps |= Capability.CONNECT_WITH_DB
        scramble = self.greeting.auth_data
        response = (auth.caching_sha2_response(password, scramble) if plugin == auth.CACHING_SHA2_PASSWORD
                    else auth.native_password_response(password, scramble))
        self.send(HandshakeResponse41(caps, 1 << 24, 45, user, response, database, plugin).encode(), 1)
        return self.read()[1]

    def command(self, payload: bytes, *, deprecate_eof: bool = False) -> list[tuple[int, bytes]]:
        """Send a command; return the response's packets up to the end of its last result set."""
        self.send(payload, 0)
        relay = ResultRelay(backend_deprecate_eof=deprecate_eof, client_deprecate_eof=deprecate_eof)
        out: list[tuple[int, bytes]] = []
        while not relay.done:
            seq, p = self.read()
            out.append((seq, p))
            relay.feed(encode_packet(p, seq)[0])
        return out

    def simple(self, payload: bytes) -> list[tuple[int, bytes]]:
        """Send a command answered by packets up to the first OK/ERR/EOF (or by one bare string)."""
        self.send(payload, 0)
        out = [self.read()]
        while not (is_ok(out[-1][1]) or is_err(out[-1][1]) or is_eof(out[-1][1])) and payload[:1] == b"\x04":
            out.append(self.read())
        return out

    def close(self) -> None:
        self.sock.close()


def err_of(payload: bytes) -> tuple[int, str, str]:
    assert is_err(payload), payload
    e = ERRPacket.decode(payload)
    return e.errno, e.sqlstate, e.message


def assert_serving(proxy: RunningProxy) -> None:
    """Another client still gets served."""
    with proxy.connect("demo") as c, c.cursor() as cur:
        cur.execute("SELECT 1 + 1")
        assert cur.fetchone() == (2,)


# --- before authentication ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http"),
        pytest.param(b"\x05\x00\x00\x01garba", id="framed-garbage"),
        pytest.param(b"\x00\x00\x00\x01", id="empty-packet"),
        pytest.param(b"\x40\x00\x00\x01" + b"\x00" * 10, id="truncated-then-close"),
        pytest.param(b"\xff\xff\xff\x01", id="16mb-header-then-nothing"),
        pytest.param(b"\xff\xff\xff\x01" + b"\x00" * 5000, id="16mb-header-then-some"),
    ],
)
def test_garbage_instead_of_handshake_response(passthrough_proxy: RunningProxy, data: bytes) -> None:
    c = RawClient(passthrough_proxy.host, passthrough_proxy.port)
    c.send_raw(data)
    c.sock.shutdown(socket.SHUT_WR)  # and the client goes away
    start = time.monotonic()
    assert c.closed(timeout=5)
    assert time.monotonic() - start < 5
    c.close()
    assert_serving(passthrough_proxy)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x05\x00\x00\x00garbage-garbage", id="not-protocol-41"),
        pytest.param(HandshakeResponse41(CLIENT_CAPS, 1 << 24, 45, "root", b"").encode()[:30], id="truncated"),
        pytest.param(HandshakeResponse41(CLIENT_CAPS, 1 << 24, 45, "root", b"").encode()[:36], id="no-nul-user"),
    ],
)
def test_bad_handshake_response_gets_err(passthrough_proxy: RunningProxy, payload: bytes) -> None:
    c = RawClient(passthrough_proxy.host, passthrough_proxy.port)
    c.send(payload, 1)
    seq, answer = c.read()
    assert seq == 2
    errno, sqlstate, message = err_of(answer)
    assert (errno, sqlstate) == (1043, "08S01") and "Bad handshake" in message
    assert c.closed()
    assert_serving(passthrough_proxy)


def test_ssl_request_gets_a_clear_error(passthrough_proxy: RunningProxy) -> None:
    c = RawClient(passthrough_proxy.host, passthrough_proxy.port)
    assert not c.greeting.capabilities & Capability.SSL
    c.send(SSLRequest(CLIENT_CAPS | Capability.SSL, 1 << 24, 45).encode(), 1)
    errno, sqlstate, message = err_of(c.read()[1])
    assert errno == 1043 and sqlstate == "08S01"
    assert "TLS" in message and "SSL" in message
    assert c.closed()
    assert_serving(passthrough_proxy)


# --- after authentication -------------------------------------------------------------------------------


@pytest.fixture
def session(passthrough_proxy: RunningProxy) -> Any:
    c = RawClient(passthrough_proxy.host, passthrough_proxy.port)
    assert is_ok(c.login())
    yield c
    c.close()
    assert_serving(passthrough_proxy)


def _still_works(c: RawClient) -> None:
    packets = c.command(b"\x03SELECT 'still here'")
    assert packets[-2][1] == b"\x0astill here"
    assert [seq for seq, _ in packets] == list(range(1, len(packets) + 1))


# (payload, expected errno, expected SQLSTATE)
BAD_COMMANDS: list[Any] = [
    pytest.param(b"\xee", 1047, "08S01", id="unknown-command-byte"),
    pytest.param(b"\x20\x01\x02", 1047, "08S01", id="command-0x20"),
    pytest.param(b"", 1835, "HY000", id="empty-packet"),
    pytest.param(b"\x0c\x01", 1835, "HY000", id="process-kill-short"),
    pytest.param(b"\x1b\x00", 1835, "HY000", id="set-option-short"),
    pytest.param(b"\x1b\x07\x00", 1047, "08S01", id="set-option-unknown"),
    pytest.param(b"\x11root\x00", 1835, "HY000", id="change-user-truncated"),
    pytest.param(b"\x17\x01\x00\x00\x00\x00\x01\x00\x00\x00", 1243, "HY000", id="stmt-execute-unknown"),
]


@pytest.mark.parametrize(("payload", "errno", "sqlstate"), BAD_COMMANDS)
def test_bad_command_gets_err_and_session_goes_on(session: RawClient, payload: bytes, errno: int,
                                                   sqlstate: str) -> None:
    session.send(payload, 0)
    seq, answer = session.read()
    assert seq == 1
    assert err_of(answer)[:2] == (errno, sqlstate)
    _still_works(session)


def test_commands_without_answer(session: RawClient) -> None:
    session.send(b"\x19\x01\x00\x00\x00", 0)  # COM_STMT_CLOSE: no response by protocol
    _still_works(session)


def test_packet_over_the_limit_after_auth(passthrough_proxy: RunningProxy, session: RawClient) -> None:
    """A command declared bigger than the proxy's 64 MB max_allowed_packet: ERR 1153, then the proxy hangs
    up without reading the rest (the client 'sends' 1 GB as a chain of 16 MB frames)."""
    chunk = b"\xff\xff\xff\x00" + b"\x03" + b"a" * 0xFFFFFE
    sent = 0
    try:
        for i in range(64):  # up to 1 GB, but the proxy stops it long before
            frame = bytearray(chunk)
            frame[3] = i & 0xFF
            session.send_raw(bytes(frame))
            sent += 1
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert sent < 64
    seq, answer = session.read()
    assert seq == 5  # after the fifth frame, whose header takes the packet past 64 MB
    errno, sqlstate, _message = err_of(answer)
    assert (errno, sqlstate) == (1153, "08S01")
    assert session.closed()


@pytest.mark.parametrize("data", [b"\x64\x00\x00\x00\x03SELECT", b"\xff\xff\xff\x00", b"\x05\x00"],
                         ids=["truncated-query", "16mb-header-only", "half-a-header"])
def test_truncated_command_then_close(passthrough_proxy: RunningProxy, session: RawClient, data: bytes) -> None:
    session.send_raw(data)
    session.sock.shutdown(socket.SHUT_WR)
    assert session.closed()


def test_quit_closes(session: RawClient) -> None:
    session.send(b"\x01", 0)
    assert session.closed()


# --- KILL -----------------------------------------------------------------------------------------------


def test_kill_connection_of_another_session(passthrough_proxy: RunningProxy) -> None:
    victim = passthrough_proxy.connect("demo")
    killer = passthrough_proxy.connect("demo")
    try:
        with victim.cursor() as cur:
            cur.execute("SELECT 1")
        with killer.cursor() as cur:
            cur.execute(f"KILL {victim.thread_id()}")
            with pytest.raises(pymysql.err.OperationalError) as exc:
                cur.execute("KILL 999999")
            assert exc.value.args[0] == 1094
        with pytest.raises(pymysql.err.OperationalError) as lost, victim.cursor() as cur:
            cur.execute("SELECT 1")
        assert lost.value.args[0] in (2006, 2013)
    finally:
        killer.close()
    assert_serving(passthrough_proxy)


def test_kill_query_interrupts_sleep(passthrough_proxy: RunningProxy) -> None:
    sleeper = passthrough_proxy.connect("demo")
    outcome: dict[str, Any] = {}

    def sleep() -> None:
        start = time.monotonic()
        try:
            with sleeper.cursor() as cur:
                cur.execute("SELECT SLEEP(30)")
                outcome["result"] = cur.fetchone()
        except pymysql.err.MySQLError as exc:
            outcome["error"] = exc.args[0]
        outcome["seconds"] = time.monotonic() - start

    t = threading.Thread(target=sleep)
    t.start()
    time.sleep(0.5)
    with passthrough_proxy.connect("demo") as killer, killer.cursor() as cur:
        cur.execute(f"KILL QUERY {sleeper.thread_id()}")
    t.join(10)
    assert not t.is_alive()
    assert outcome["seconds"] < 5
    # MariaDB's SLEEP() returns 1 when interrupted; other statements fail with 1317
    assert outcome.get("result") == (1,) or outcome.get("error") == 1317
    with sleeper.cursor() as cur:  # the session goes on
        cur.execute("SELECT 'awake'")
        assert cur.fetchone() == ("awake",)
    sleeper.close()


def test_kill_query_of_an_idle_session_is_harmless(passthrough_proxy: RunningProxy) -> None:
    with passthrough_proxy.connect("demo") as idle, passthrough_proxy.connect("demo") as killer:
        with idle.cursor() as cur:
            cur.execute("SELECT 1")
        with killer.cursor() as cur:
            cur.execute(f"KILL QUERY {idle.thread_id()}")
        with idle.cursor() as cur:
            cur.execute("SELECT 2")
            assert cur.fetchone() == (2,)


def test_kill_self(passthrough_proxy: RunningProxy) -> None:
    c = passthrough_proxy.connect("demo")
    with pytest.raises(pymysql.err.MySQLError) as exc, c.cursor() as cur:
        cur.execute(f"KILL {c.thread_id()}")
    assert exc.value.args[0] in (1927, 1158)  # MariaDB's ER_CONNECTION_KILLED (or the connection gone first)
    assert_serving(passthrough_proxy)
