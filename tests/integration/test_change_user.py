"""COM_CHANGE_USER: a connection logs in again as another user and starts over as a fresh session."""

from __future__ import annotations

from collections.abc import Iterator

import mysql.connector
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf


@pytest.fixture(scope="module")
def proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS cu_a")
    mariadb.execute("CREATE DATABASE IF NOT EXISTS cu_b")
    conf = write_conf(
        tmp_path_factory.mktemp("change-user"),
        {"a_db": {"ds_0": (mariadb, "cu_a")}, "b_db": {"ds_0": (mariadb, "cu_b")}},
        users=(
            {"user": "root@%", "password": "root"},
            {"user": "bob@%", "password": "bobpw"},
            {"user": "carol@%", "password": "carolpw", "authenticationMethodName": "caching_sha2_password"},
        ),
        props={"proxy-frontend-ssl-enabled": True},
    )
    running = start_proxy(conf)
    yield running
    running.stop()


def _one(conn: mysql.connector.MySQLConnection, sql: str) -> tuple[object, ...]:
    cur = conn.cursor()
    cur.execute(sql)
    row = cur.fetchone()
    cur.close()
    assert row is not None
    return tuple(row)


def test_change_user_switches_user_database_and_state(proxy: RunningProxy) -> None:
    conn = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root",
                                   database="a_db", use_pure=True)
    assert _one(conn, "SELECT CURRENT_USER(), DATABASE()") == ("root@%", "a_db")
    conn.cmd_query("SET @v = 1")
    conn.cmd_change_user(username="bob", password="bobpw", database="b_db")
    assert _one(conn, "SELECT CURRENT_USER(), DATABASE(), @v") == ("bob@%", "b_db", None)  # state is gone
    # carol's first login after start-up is a full authentication, whose password in clear is taken over TLS
    # only (mysql-connector's pure client never RSA-encrypts it): the proxy offers TLS, the client uses it
    conn.cmd_change_user(username="carol", password="carolpw", database="a_db")
    assert _one(conn, "SELECT CURRENT_USER(), DATABASE()") == ("carol@%", "a_db")
    with pytest.raises(mysql.connector.Error) as info:
        conn.cmd_change_user(username="bob", password="wrong")
    assert info.value.errno == 1045
    # the server keeps serving others
    other = mysql.connector.connect(host=proxy.host, port=proxy.port, user="bob", password="bobpw", use_pure=True)
    assert _one(other, "SELECT 1") == (1,)
    other.close()
