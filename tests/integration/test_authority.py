"""Who may do what: SHOW PROCESSLIST, information_schema.PROCESSLIST and KILL (SQL and COM_PROCESS_KILL) see
and reach only the user's own sessions, unless the user is an admin (`admin: true` in `authority.users`, as
in ShardingSphere) - MySQL's rule for users without the PROCESS / SUPER privilege. Killing another user's
session is ERR 1095 (ER_KILL_DENIED_ERROR, HY000) "You are not owner of thread N", as in MySQL.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pymysql.constants
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.sharding_fixtures import ShardedEnv

pytestmark = pytest.mark.integration

USERS = (
    {"user": "root@%", "password": "root", "admin": True},
    {"user": "boss@%", "password": "bosspw", "admin": True},
    {"user": "alice@%", "password": "alicepw"},
    {"user": "bob@%", "password": "bobpw"},
)
SHARD_RULES = """\
- !SHARDING
  tables:
    t_item:
      actualDataNodes: ds_${0..1}.t_item
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: by_id}}
  shardingAlgorithms:
    by_id: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""
PASSWORDS = {u["user"].split("@")[0]: u["password"] for u in USERS}


@pytest.fixture(scope="module")
def authority_proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    """`demo` passed through; `shard`: t_item sharded by id over two databases of the same server."""
    for physical in ("authority_ds", "authority_s0", "authority_s1"):
        mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {physical}")
    for physical in ("authority_s0", "authority_s1"):
        mariadb.execute("CREATE TABLE IF NOT EXISTS t_item (id INT PRIMARY KEY)", physical)
    conf = write_conf(tmp_path_factory.mktemp("authority-conf"),
                      {"demo": {"ds_0": (mariadb, "authority_ds")},
                       "shard": {"ds_0": (mariadb, "authority_s0"), "ds_1": (mariadb, "authority_s1")}},
                      users=USERS, rules_yaml={"shard": SHARD_RULES})
    proxy = start_proxy(Path(conf))
    yield proxy
    proxy.stop()


class Sessions:
    def __init__(self, proxy: RunningProxy) -> None:
        self.proxy = proxy
        self.open: list[pymysql.connections.Connection[Any]] = []

    def __call__(self, user: str, database: str | None = "demo") -> pymysql.connections.Connection[Any]:
        conn = self.proxy.connect(database, user=user, password=PASSWORDS[user])
        self.open.append(conn)
        return conn

    def close(self) -> None:
        for conn in self.open:
            with contextlib.suppress(Exception):  # killed ones are closed already
                conn.close()


@pytest.fixture
def sessions(authority_proxy: RunningProxy) -> Iterator[Sessions]:
    s = Sessions(authority_proxy)
    yield s
    s.close()


def rows(conn: pymysql.connections.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def error_of(conn: pymysql.connections.Connection[Any], sql: str) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as exc, conn.cursor() as cur:
        cur.execute(sql)
    return int(exc.value.args[0]), str(exc.value.args[1])


def alive(conn: pymysql.connections.Connection[Any]) -> bool:
    try:
        return rows(conn, "SELECT 'alive'") == [("alive",)]
    except pymysql.err.MySQLError:
        return False


# --- SHOW PROCESSLIST -----------------------------------------------------------------------------------


@pytest.mark.parametrize("statement", ["SHOW PROCESSLIST", "SHOW FULL PROCESSLIST"])
def test_processlist_shows_a_users_own_sessions(sessions: Sessions, statement: str) -> None:
    alice1, alice2, bob, boss = sessions("alice"), sessions("alice"), sessions("bob"), sessions("boss")
    ids = {name: c.thread_id() for name, c in (("alice1", alice1), ("alice2", alice2), ("bob", bob), ("boss", boss))}

    seen_by_alice = rows(alice1, statement)
    assert {r[0] for r in seen_by_alice} == {ids["alice1"], ids["alice2"]}
    assert {r[1] for r in seen_by_alice} == {"alice"}
    assert {r[0] for r in rows(bob, statement)} == {ids["bob"]}
    # an admin sees everyone
    assert set(ids.values()) <= {r[0] for r in rows(boss, statement)}


# --- information_schema.PROCESSLIST ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT ID, USER FROM information_schema.PROCESSLIST",
        "SELECT ID, USER FROM INFORMATION_SCHEMA.processlist ORDER BY ID",
        "SELECT p.ID, p.USER FROM `information_schema`.`PROCESSLIST` p WHERE p.ID > 0",
        "SELECT PROCESSLIST.ID, PROCESSLIST.USER FROM information_schema.PROCESSLIST AS PROCESSLIST",
        "SELECT ID, USER FROM information_schema . PROCESSLIST WHERE COMMAND <> 'Killed' /* processlist */",
        "SELECT information_schema.PROCESSLIST.ID, USER FROM information_schema.PROCESSLIST",
        "SELECT ID, USER FROM (SELECT * FROM information_schema.PROCESSLIST) AS t "
        "WHERE 'information_schema.PROCESSLIST' <> ''",
        "SELECT p.ID, q.USER FROM information_schema.PROCESSLIST p JOIN information_schema.PROCESSLIST q "
        "ON p.ID = q.ID",
    ],
    ids=["plain", "case", "alias-backticks", "as-alias", "spaces-comment", "qualified-column", "subquery", "join"],
)
def test_information_schema_processlist_follows_the_same_rule(sessions: Sessions, sql: str) -> None:
    """Answered from the proxy's sessions (proxy connection ids, as KILL takes them), not the backends'
    threads, which would show every user's statements on the proxy's pooled connections."""
    alice1, alice2, bob, boss = sessions("alice"), sessions("alice"), sessions("bob"), sessions("boss")
    mine = {alice1.thread_id(), alice2.thread_id()}
    assert {r[0] for r in rows(alice1, sql)} == mine
    assert {r[1] for r in rows(alice1, sql)} == {"alice"}
    assert {r[0] for r in rows(bob, sql)} == {bob.thread_id()}
    assert {alice1.thread_id(), bob.thread_id(), boss.thread_id()} <= {r[0] for r in rows(boss, sql)}


def test_information_schema_processlist_columns_and_values(sessions: Sessions, mariadb: MariaDBServer) -> None:
    alice = sessions("alice")
    sleeper = sessions("alice")
    t = threading.Thread(target=lambda: rows(sleeper, "SELECT SLEEP(1.5) /* mine */"))
    t.start()
    try:
        time.sleep(0.4)
        with alice.cursor() as cur:
            cur.execute("SELECT * FROM information_schema.PROCESSLIST ORDER BY ID")
            names = [d[0] for d in cur.description]
            got = {r[0]: r for r in cur.fetchall()}
        with mariadb.connect() as direct, direct.cursor() as cur:
            cur.execute("SELECT * FROM information_schema.PROCESSLIST")
            assert names == [d[0] for d in cur.description]  # MariaDB's columns
        me, other = got[alice.thread_id()], got[sleeper.thread_id()]
        assert (me[1], me[3], me[4], me[7]) == ("alice", "demo", "Query",
                                                "SELECT * FROM information_schema.PROCESSLIST ORDER BY ID")
        assert (other[4], other[7]) == ("Query", "SELECT SLEEP(1.5) /* mine */")
        assert rows(alice, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'bob'") == [(0,)]
        assert rows(alice, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()") \
            == [(alice.thread_id(),)]
    finally:
        t.join(5)


def test_information_schema_processlist_without_a_database(sessions: Sessions) -> None:
    alice = sessions("alice", database=None)
    bob = sessions("bob")
    assert {r[0] for r in rows(alice, "SELECT ID FROM information_schema.PROCESSLIST")} == {alice.thread_id()}
    assert bob.thread_id() not in {r[0] for r in rows(alice, "SELECT ID FROM information_schema.PROCESSLIST")}


def test_information_schema_processlist_on_a_sharded_database(sharded_env: ShardedEnv) -> None:
    with sharded_env.connect() as a, sharded_env.connect() as b:
        assert rows(a, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()") == [(a.thread_id(),)]
        listed = {r[0] for r in rows(a, "SELECT ID FROM information_schema.PROCESSLIST")}
        assert {a.thread_id(), b.thread_id()} <= listed


# --- KILL -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("statement", ["KILL {}", "KILL CONNECTION {}", "KILL QUERY {}", "KILL HARD {}",
                                       "KILL SOFT QUERY {}", "KILL ({})"])
def test_kill_another_users_session_is_denied(sessions: Sessions, statement: str) -> None:
    alice, bob = sessions("alice"), sessions("bob")
    target = bob.thread_id()
    assert error_of(alice, statement.format(target)) == (1095, f"You are not owner of thread {target}")
    assert alive(bob) and alive(alice)
    # an unknown thread is still "unknown" (MySQL looks the thread up first)
    assert error_of(alice, statement.format(987654321))[0] == 1094


@pytest.mark.parametrize("statement", ["KILL USER bob", "KILL CONNECTION USER 'bob'", "KILL QUERY ID 1",
                                       "KILL 0 + {}", "KILL @id"])
def test_kill_forms_a_backend_would_apply_to_its_own_threads(sessions: Sessions, statement: str) -> None:
    """A backend takes KILL USER / KILL QUERY ID / KILL <expression> for its threads: the proxy's pooled
    connections, serving every user. They are refused, never relayed."""
    alice, bob = sessions("alice"), sessions("bob")
    rows(alice, f"SET @id = {bob.thread_id()}")
    assert error_of(alice, statement.format(bob.thread_id()))[0] == 1235
    assert alive(bob) and alive(alice)


@pytest.mark.parametrize("statement", ["SELECT 1; KILL {}", "SELECT 1; KILL USER bob", "SELECT 2; SHOW PROCESSLIST",
                                       "SELECT 3; SELECT ID FROM information_schema.PROCESSLIST"])
def test_multi_statement_query_cannot_smuggle_them_to_a_backend(authority_proxy: RunningProxy, sessions: Sessions,
                                                                 statement: str) -> None:
    """On a pass-through database a multi-statement query is relayed whole: one holding a statement the
    proxy answers is refused (the backend would act on its own threads)."""
    bob = sessions("bob")
    alice = authority_proxy.connect("demo", user="alice", password="alicepw",
                                    client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    sessions.open.append(alice)
    assert error_of(alice, statement.format(bob.thread_id()))[0] == 1235
    assert alive(bob) and alive(alice)
    assert rows(alice, "SELECT 1; SELECT 2") == [(1,)]  # other multi-statement queries still work


def test_kill_denied_sqlstate(authority_proxy: RunningProxy, sessions: Sessions) -> None:
    import mysql.connector

    bob = sessions("bob")
    conn = mysql.connector.connect(host=authority_proxy.host, port=authority_proxy.port, user="alice",
                                   password="alicepw", database="demo", use_pure=True, ssl_disabled=True)
    try:
        with pytest.raises(mysql.connector.Error) as exc:
            conn.cursor().execute(f"KILL {bob.thread_id()}")
        assert (exc.value.errno, exc.value.sqlstate) == (1095, "HY000")
    finally:
        conn.close()


def test_com_process_kill_of_another_users_session_is_denied(sessions: Sessions) -> None:
    alice, bob = sessions("alice"), sessions("bob")
    with pytest.raises(pymysql.err.MySQLError) as exc:
        alice.kill(bob.thread_id())  # COM_PROCESS_KILL
    assert exc.value.args[0] == 1095
    assert alive(bob) and alive(alice)


def test_kill_query_of_another_users_statement_leaves_it_running(sessions: Sessions) -> None:
    alice, bob = sessions("alice"), sessions("bob")
    outcome: dict[str, Any] = {}

    def sleep() -> None:
        start = time.monotonic()
        outcome["rows"] = rows(bob, "SELECT SLEEP(1)")
        outcome["seconds"] = time.monotonic() - start

    t = threading.Thread(target=sleep)
    t.start()
    time.sleep(0.3)
    assert error_of(alice, f"KILL QUERY {bob.thread_id()}")[0] == 1095
    t.join(5)
    assert outcome["rows"] == [(0,)] and outcome["seconds"] >= 0.9  # SLEEP() returns 1 when interrupted


def test_own_sessions_and_admins_may_kill(sessions: Sessions) -> None:
    alice1, alice2, bob, boss = sessions("alice"), sessions("alice"), sessions("bob"), sessions("boss")
    rows(alice1, f"KILL {alice2.thread_id()}")  # the same user's other session
    assert not alive(alice2)
    boss.kill(bob.thread_id())  # an admin, over COM_PROCESS_KILL
    assert not alive(bob)
    assert alive(alice1) and alive(boss)


def test_information_schema_processlist_prepared_on_a_sharded_database(sharded_env: ShardedEnv) -> None:
    """COM_STMT_PREPARE / EXECUTE: the same answer in binary rows."""
    import mysql.connector

    conn = mysql.connector.connect(host=sharded_env.proxy.host, port=sharded_env.proxy.port, user="root",
                                   password="root", database="sharding_db", use_pure=True, ssl_disabled=True)
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("SELECT ID, USER, INFO FROM information_schema.PROCESSLIST WHERE ID = ?", (conn.connection_id,))
        got = cur.fetchall()
        assert [(r[0], r[1]) for r in got] == [(conn.connection_id, "root")]
    finally:
        conn.close()


@pytest.mark.parametrize("database", ["demo", "shard"])
@pytest.mark.parametrize(
    ("sql", "params"),
    [("SELECT ID, USER FROM information_schema.PROCESSLIST WHERE ID > ?", (0,)), ("SHOW PROCESSLIST", ())],
    ids=["information_schema", "show"],
)
def test_prepared_processlist(authority_proxy: RunningProxy, sessions: Sessions, sql: str, params: tuple[Any, ...],
                              database: str) -> None:
    """COM_STMT_PREPARE / EXECUTE, on a pass-through and on a sharded database: the proxy's sessions, by the
    same rule (a backend would list its own threads: the proxy's pooled connections)."""
    import mysql.connector

    bob = sessions("bob")
    conn = mysql.connector.connect(host=authority_proxy.host, port=authority_proxy.port, user="alice",
                                   password="alicepw", database=database, use_pure=True, ssl_disabled=True)
    try:
        cur = conn.cursor(prepared=True)
        cur.execute(sql, params)
        got = cur.fetchall()
        assert {(r[0], r[1]) for r in got} == {(conn.connection_id, "alice")}
        assert bob.thread_id() not in {r[0] for r in got}
    finally:
        conn.close()


@pytest.mark.parametrize("database", ["demo", "shard"])
def test_prepared_kill(authority_proxy: RunningProxy, sessions: Sessions, database: str) -> None:
    import mysql.connector

    bob, victim = sessions("bob"), sessions("alice")
    conn = mysql.connector.connect(host=authority_proxy.host, port=authority_proxy.port, user="alice",
                                   password="alicepw", database=database, use_pure=True, ssl_disabled=True)
    try:
        cur = conn.cursor(prepared=True)
        with pytest.raises(mysql.connector.Error) as exc:
            cur.execute("KILL ?", (bob.thread_id(),))
        assert exc.value.errno == 1095
        assert alive(bob)
        cur.execute("KILL ?", (victim.thread_id(),))  # alice's own other session
        assert not alive(victim)
    finally:
        conn.close()
