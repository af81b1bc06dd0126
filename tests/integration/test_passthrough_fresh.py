"""Tests that need a proxy of their own: caching_sha2_password's first (full, RSA) login happens once per
proxy start, and 16 MB+ values need the backend's max_allowed_packet raised before the pool connects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import mysql.connector
import pymysql
import pytest
from pymysql import _auth as pymysql_auth

from protocol import auth
from protocol.constants import MAX_PAYLOAD
from protocol.packets import AuthMoreData
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.test_malformed import RawClient

pytestmark = pytest.mark.integration

BIG = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def fresh_proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    mariadb.execute(f"SET GLOBAL max_allowed_packet = {BIG}")
    mariadb.execute("CREATE DATABASE IF NOT EXISTS demo_ds")
    conf = write_conf(
        tmp_path_factory.mktemp("fresh-conf"),
        {"demo": {"ds_0": (mariadb, "demo_ds")}},
        users=(
            {"user": "root@%", "password": "root", "admin": True},
            {"user": "sha@%", "password": "sha2pw", "authenticationMethodName": "caching_sha2_password"},
            {"user": "sha2@%", "password": "другой😀", "authenticationMethodName": "caching_sha2_password"},
        ),
    )
    proxy = start_proxy(Path(conf))
    with proxy.connect("demo") as c, c.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS fr_blob")
        cur.execute("CREATE TABLE fr_blob (id INT PRIMARY KEY, b LONGBLOB)")
    yield proxy
    proxy.stop()


def _sha2_login(proxy: RunningProxy, user: str, password: str) -> bytes:
    """Log in with caching_sha2_password on a raw socket; returns the AuthMoreData status byte seen."""
    c = RawClient(proxy.host, proxy.port)
    try:
        first = c.login(user, password, plugin=auth.CACHING_SHA2_PASSWORD)
        status = AuthMoreData.decode(first).data
        seq = 3
        if status == auth.PERFORM_FULL_AUTHENTICATION:
            c.send(auth.REQUEST_PUBLIC_KEY, seq)
            pem = AuthMoreData.decode(c.read()[1]).data
            assert pem.startswith(b"-----BEGIN PUBLIC KEY-----")
            c.send(pymysql_auth.sha2_rsa_encrypt(password.encode(), c.greeting.auth_data, pem), seq + 2)
        seq_ok, ok = c.read()
        assert ok[:1] == b"\x00", ok
        assert seq_ok == (6 if status == auth.PERFORM_FULL_AUTHENTICATION else 3)
        return status
    finally:
        c.close()


def test_caching_sha2_full_then_fast(fresh_proxy: RunningProxy) -> None:
    assert _sha2_login(fresh_proxy, "sha2", "другой😀") == auth.PERFORM_FULL_AUTHENTICATION
    assert _sha2_login(fresh_proxy, "sha2", "другой😀") == auth.FAST_AUTH_SUCCESS


def test_caching_sha2_wrong_password_on_full_path(fresh_proxy: RunningProxy) -> None:
    c = RawClient(fresh_proxy.host, fresh_proxy.port)
    try:
        answer = c.login("sha", "not-it", plugin=auth.CACHING_SHA2_PASSWORD)
        assert answer[:3] == b"\xff\x15\x04"  # 1045
    finally:
        c.close()


def test_caching_sha2_user_with_pymysql(fresh_proxy: RunningProxy) -> None:
    for _ in range(2):
        with fresh_proxy.connect("demo", user="sha", password="sha2pw") as c, c.cursor() as cur:
            cur.execute("SELECT 'sha'")
            assert cur.fetchone() == ("sha",)
    with pytest.raises(pymysql.err.OperationalError) as exc:
        fresh_proxy.connect("demo", user="sha", password="wrong")
    assert exc.value.args[0] == 1045


def test_caching_sha2_user_with_mysql_connector(fresh_proxy: RunningProxy) -> None:
    """mysql-connector's pure client answers a full authentication with the password in clear: over plain TCP
    that is refused, as MySQL 8 refuses it, with a hint (tests/integration/test_tls.py logs in over TLS)."""
    for _ in range(2):
        with pytest.raises(mysql.connector.Error) as info:
            mysql.connector.connect(host=fresh_proxy.host, port=fresh_proxy.port, user="sha", password="sha2pw",
                                    database="demo", use_pure=True, ssl_disabled=True,
                                    auth_plugin="caching_sha2_password")
        assert info.value.errno == 1045 and "TLS" in str(info.value.msg), info.value


# --- 16 MB and more -------------------------------------------------------------------------------------

# value sizes: just under, at and over the 16 MB frame size (for the row payload and for the query), 20 MB
SIZES = [
    pytest.param(MAX_PAYLOAD - 4 - 1, id="row-payload-0xFFFFFE"),
    pytest.param(MAX_PAYLOAD - 4, id="row-payload-exactly-0xFFFFFF"),
    pytest.param(MAX_PAYLOAD - 3, id="row-payload-0x1000000"),
    pytest.param(20 * 1024 * 1024, id="20MB"),
]


@pytest.mark.parametrize("size", SIZES)
def test_large_value_select(fresh_proxy: RunningProxy, size: int) -> None:
    """A one-column row of REPEAT(): its payload is 4 + size bytes (lenenc 0xFD + 3 length bytes)."""
    with fresh_proxy.connect("demo", max_allowed_packet=BIG) as c, c.cursor() as cur:
        cur.execute(f"SELECT REPEAT('x', {size}) AS v, 'after' AS w")
        v, w = cur.fetchone()
        assert len(v) == size and w == "after"
        cur.execute("SELECT 'next'")
        assert cur.fetchone() == ("next",)


def test_20mb_blob_round_trip(fresh_proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    blob = bytes(range(256)) * (20 * 1024 * 1024 // 256)
    with fresh_proxy.connect("demo", max_allowed_packet=BIG, autocommit=True) as c, c.cursor() as cur:
        cur.execute("REPLACE INTO fr_blob VALUES (1, %s)", (blob,))
        cur.execute("SELECT b, LENGTH(b), MD5(b) FROM fr_blob WHERE id = 1")
        got, length, md5 = cur.fetchone()
    assert got == blob and length == len(blob)
    import hashlib

    assert md5 == hashlib.md5(blob).hexdigest()
    direct = mariadb.connect("demo_ds", max_allowed_packet=BIG)
    try:
        with direct.cursor() as cur:
            cur.execute("SELECT MD5(b) FROM fr_blob WHERE id = 1")
            assert cur.fetchone() == (md5,)
    finally:
        direct.close()


def test_query_of_exactly_16mb(fresh_proxy: RunningProxy) -> None:
    """A COM_QUERY whose payload is exactly 0xFFFFFF bytes: the client ends it with an empty frame."""
    prefix = "SELECT LENGTH('"
    suffix = "')"
    filler = MAX_PAYLOAD - 1 - len(prefix) - len(suffix)
    with fresh_proxy.connect("demo", max_allowed_packet=BIG) as c, c.cursor() as cur:
        cur.execute(prefix + "y" * filler + suffix)
        assert cur.fetchone() == (filler,)
        cur.execute("SELECT 'next'")
        assert cur.fetchone() == ("next",)


def test_packet_over_the_proxy_limit_is_refused(fresh_proxy: RunningProxy) -> None:
    """The proxy's own max_allowed_packet is 64 MB: a bigger query gets ERR 1153 (and the connection ends),
    as from a server; the proxy goes on serving."""
    with fresh_proxy.connect("demo", max_allowed_packet=BIG + 1024) as c, c.cursor() as cur:
        with pytest.raises(pymysql.err.MySQLError) as exc:
            cur.execute("SELECT LENGTH('" + "z" * (BIG + 10) + "')")
        assert exc.value.args[0] == 1153
    with fresh_proxy.connect("demo") as c, c.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
