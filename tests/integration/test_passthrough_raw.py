"""Byte-level pass-through: a raw client (with and without CLIENT_DEPRECATE_EOF, which none of the installed
client libraries ask for) gets from the proxy the same packets MariaDB sends it directly."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.constants import Capability, ServerStatus
from protocol.packets import ColumnDefinition41, EOFPacket, OKPacket, is_eof, is_err
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy
from tests.integration.test_malformed import CLIENT_CAPS, RawClient

pytestmark = pytest.mark.integration

SETUP = [
    "DROP TABLE IF EXISTS raw_t",
    "CREATE TABLE raw_t (id INT PRIMARY KEY, ubi BIGINT UNSIGNED, vc VARCHAR(20) DEFAULT 'dflt', dtm DATETIME(6), "
    "bl BLOB, js JSON) CHARACTER SET utf8mb4",
    "INSERT INTO raw_t VALUES (1, 18446744073709551615, '中文😀', '2024-01-02 03:04:05.678901', X'00FF', '[1]'), "
    "(2, NULL, NULL, NULL, NULL, NULL)",
]
QUERIES = [
    "SELECT * FROM raw_t ORDER BY id",
    "SELECT id FROM raw_t WHERE 1 = 0",
    "SELECT 1/0",
    "UPDATE raw_t SET id = id WHERE id = 1",
    "SELECT * FROM raw_no_such",
    "SELECT 1; SELECT 'a', NULL; UPDATE raw_t SET id = id WHERE id = 2; SELECT * FROM raw_t ORDER BY id",
    "SELECT 1; SELECT * FROM raw_no_such; SELECT 2",
]


@pytest.fixture(scope="module")
def proxy(passthrough_proxy: RunningProxy) -> RunningProxy:
    with passthrough_proxy.connect("demo") as c, c.cursor() as cur:
        for sql in SETUP:
            cur.execute(sql)
    return passthrough_proxy


def _pair(proxy: RunningProxy, mariadb: MariaDBServer, caps: Capability) -> tuple[RawClient, RawClient]:
    via = RawClient(proxy.host, proxy.port)
    assert via.login("root", "root", database="demo", caps=caps)[:1] == b"\x00"
    direct = RawClient(mariadb.host, mariadb.port)
    assert direct.login("root", mariadb.password, database="demo_ds", caps=caps)[:1] == b"\x00"
    return via, direct


def _logical(payload: bytes) -> bytes:
    """A column definition or error of the physical database `demo_ds` as the logical database `demo` shows it (issue
    34)."""
    if payload.startswith(b"\x03def\x07demo_ds"):
        return b"\x03def\x04demo" + payload[len(b"\x03def\x07demo_ds") :]
    if payload[:1] == b"\xff":
        return payload.replace(b"'demo_ds.", b"'demo.")
    return payload


@pytest.mark.parametrize("deprecate_eof", [False, True], ids=["classic-eof", "deprecate-eof"])
def test_queries_byte_for_byte(proxy: RunningProxy, mariadb: MariaDBServer, deprecate_eof: bool) -> None:
    caps = CLIENT_CAPS | Capability.MULTI_STATEMENTS | (Capability.DEPRECATE_EOF if deprecate_eof else 0)
    via, direct = _pair(proxy, mariadb, Capability(caps))
    try:
        for sql in QUERIES:
            got = via.command(b"\x03" + sql.encode(), deprecate_eof=deprecate_eof)
            answer = direct.command(b"\x03" + sql.encode(), deprecate_eof=deprecate_eof)
            expected = [(seq, _logical(p)) for seq, p in answer]
            assert got == expected, sql
            end = got[-1][1]
            if len(got) > 1 and not is_err(end):  # a result set's end
                assert end[0] == 0xFE and len(end) == (7 if deprecate_eof else 5)
    finally:
        via.close()
        direct.close()


@pytest.mark.parametrize("deprecate_eof", [False, True], ids=["classic-eof", "deprecate-eof"])
def test_com_field_list(proxy: RunningProxy, mariadb: MariaDBServer, deprecate_eof: bool) -> None:
    caps = Capability(CLIENT_CAPS | (Capability.DEPRECATE_EOF if deprecate_eof else 0))
    via, direct = _pair(proxy, mariadb, caps)
    try:
        got = via.simple(b"\x04raw_t\x00")
        expected = [(seq, _logical(p)) for seq, p in direct.simple(b"\x04raw_t\x00")]
        assert got == expected
        cols = [ColumnDefinition41.decode(p) for _, p in got[:-1]]
        assert [c.name for c in cols] == ["id", "ubi", "vc", "dtm", "bl", "js"]
        assert cols[2].default == b"dflt" and cols[1].has_default and cols[1].default is None
        assert is_eof(got[-1][1])
        assert len(got[-1][1]) == (7 if deprecate_eof else 5)
        assert is_err(via.simple(b"\x04raw_no_such\x00")[-1][1])
    finally:
        via.close()
        direct.close()


@pytest.mark.parametrize("deprecate_eof", [False, True], ids=["classic-eof", "deprecate-eof"])
@pytest.mark.parametrize("option", [1, 0], ids=["multi-off", "multi-on"])
def test_com_set_option(proxy: RunningProxy, mariadb: MariaDBServer, deprecate_eof: bool, option: int) -> None:
    caps = Capability(CLIENT_CAPS | Capability.MULTI_STATEMENTS | (Capability.DEPRECATE_EOF if deprecate_eof else 0))
    via, direct = _pair(proxy, mariadb, caps)
    try:
        payload = b"\x1b" + option.to_bytes(2, "little")
        got = via.simple(payload)
        expected = direct.simple(payload)
        assert [seq for seq, _ in got] == [seq for seq, _ in expected] == [1]
        assert is_eof(got[0][1])
        assert got == expected
        multi = via.command(b"\x03SELECT 1; SELECT 2")
        assert is_err(multi[-1][1]) == (option == 1)
    finally:
        via.close()
        direct.close()


def test_com_statistics(proxy: RunningProxy) -> None:
    c = RawClient(proxy.host, proxy.port)
    try:
        assert c.login()[:1] == b"\x00"
        [(seq, text)] = c.simple(b"\x09")
        assert seq == 1
        assert text.startswith(b"Uptime: ") and b"Threads: " in text and b"Queries per second avg: " in text
        assert c.command(b"\x03SELECT 1")[-1][1][:1] == b"\xfe"
    finally:
        c.close()


def test_com_ping_and_init_db(proxy: RunningProxy) -> None:
    c = RawClient(proxy.host, proxy.port)
    try:
        assert c.login(database=None)[:1] == b"\x00"
        [(seq, ok)] = c.simple(b"\x0e")
        assert seq == 1 and OKPacket.decode(ok).status & ServerStatus.AUTOCOMMIT
        [(_, ok)] = c.simple(b"\x02demo")
        assert ok[:1] == b"\x00"
        [(_, err)] = c.simple(b"\x02nope")
        assert err[:3] == b"\xff\x19\x04"  # 1049
    finally:
        c.close()


def test_status_flags_follow_the_backend(proxy: RunningProxy) -> None:
    """IN_TRANS appears in the end packets while a transaction is open, as the server reports it."""
    c = RawClient(proxy.host, proxy.port)
    try:
        assert c.login()[:1] == b"\x00"
        begin = OKPacket.decode(c.command(b"\x03BEGIN")[-1][1])
        assert begin.status & ServerStatus.IN_TRANS
        end: Any = c.command(b"\x03SELECT 1")[-1][1]
        assert EOFPacket.decode(end).status & ServerStatus.IN_TRANS
        rollback = OKPacket.decode(c.command(b"\x03ROLLBACK")[-1][1])
        assert not rollback.status & ServerStatus.IN_TRANS
        [(_, ping)] = c.simple(b"\x0e")
        assert not OKPacket.decode(ping).status & ServerStatus.IN_TRANS
    finally:
        c.close()
