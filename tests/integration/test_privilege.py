"""authority.privilege (issue 13, item 16), against a real MariaDB server: DATABASE_PERMITTED with
user-database-mappings as ShardingSphere reads them. A user sees only the logical databases it may use
(SHOW DATABASES, information_schema), and naming another one — USE, COM_INIT_DB, the handshake's database,
COM_CHANGE_USER, SHOW ... FROM — is MySQL's ER_DBACCESS_DENIED_ERROR 1044 (42000)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest
import yaml

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

pytestmark = pytest.mark.integration

USERS = (
    {"user": "root@%", "password": "root", "admin": True},
    {"user": "app@%", "password": "apppw"},
    {"user": "both@%", "password": "bothpw"},
    {"user": "star@%", "password": "starpw"},
    {"user": "nobody@%", "password": "nobodypw"},
    {"user": "local@127.0.0.1", "password": "localpw"},
)
PASSWORDS = {u["user"].split("@")[0]: u["password"] for u in USERS}
MAPPINGS = "app@%=shard, both@%=shard, both@%=Demo, star@%=*, local@127.0.0.1=demo, local@10.0.0.1=other"
SHARD_RULES = """\
- !SHARDING
  tables:
    t_item:
      actualDataNodes: ds_${0..1}.t_item
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: by_id}}
  shardingAlgorithms:
    by_id: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""
ALL = ["demo", "other", "shard"]


@pytest.fixture(scope="module")
def proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    for physical in ("priv_demo", "priv_other", "priv_s0", "priv_s1"):
        mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {physical}")
    mariadb.execute("CREATE TABLE IF NOT EXISTS t_secret (id INT)", "priv_demo")
    for physical in ("priv_s0", "priv_s1"):
        mariadb.execute("CREATE TABLE IF NOT EXISTS t_item (id INT PRIMARY KEY)", physical)
    conf = write_conf(tmp_path_factory.mktemp("privilege-conf"),
                      {"demo": {"ds_0": (mariadb, "priv_demo")}, "other": {"ds_0": (mariadb, "priv_other")},
                       "shard": {"ds_0": (mariadb, "priv_s0"), "ds_1": (mariadb, "priv_s1")}},
                      users=USERS, rules_yaml={"shard": SHARD_RULES})
    global_yaml = Path(conf) / "global.yaml"
    doc = yaml.safe_load(global_yaml.read_text())
    doc["authority"]["privilege"] = {"type": "DATABASE_PERMITTED", "props": {"user-database-mappings": MAPPINGS}}
    global_yaml.write_text(yaml.safe_dump(doc))
    p = start_proxy(Path(conf))
    yield p
    p.stop()


def _connect(proxy: RunningProxy, user: str, database: str | None = None) -> pymysql.connections.Connection[Any]:
    return proxy.connect(database, user=user, password=PASSWORDS[user])


def _denied(user: str, db: str, host: str = "%") -> tuple[int, str]:
    return 1044, f"Access denied for user '{user}'@'{host}' to database '{db}'"


def _databases(conn: pymysql.connections.Connection[Any]) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        return [r[0] for r in cur.fetchall()]


@pytest.mark.parametrize(("user", "visible"), [
    ("root", ALL), ("app", ["shard"]), ("both", ["demo", "shard"]), ("star", ALL), ("nobody", []),
    ("local", ["demo"]),  # local@127.0.0.1: `local@10.0.0.1=other` is another user's (ShardingSphere's Grantee.accept)
])
def test_show_databases_lists_the_permitted_ones(proxy: RunningProxy, user: str, visible: list[str]) -> None:
    with _connect(proxy, user) as conn:
        assert _databases(conn) == visible
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE '%o%'")
            assert [r[0] for r in cur.fetchall()] == [d for d in visible if "o" in d]
            assert [d[0] for d in cur.description] == ["Database (%o%)"]  # as MySQL heads it


def test_use_and_com_init_db_of_a_database_not_permitted(proxy: RunningProxy) -> None:
    with _connect(proxy, "app") as conn, conn.cursor() as cur:
        for db in ("demo", "other", "no_such_db"):  # an unknown name too: the error tells nothing of what exists
            with pytest.raises(pymysql.err.OperationalError) as info:
                cur.execute(f"USE {db}")
            assert info.value.args == _denied("app", db)
            with pytest.raises(pymysql.err.OperationalError) as info:
                conn.select_db(db)  # COM_INIT_DB
            assert info.value.args == _denied("app", db)
        cur.execute("USE shard")
        cur.execute("SELECT DATABASE()")
        assert cur.fetchone() == ("shard",)
        for sql in ("SHOW TABLES FROM demo", "SHOW CREATE DATABASE demo", "SHOW TABLE STATUS FROM demo",
                    "SHOW STORAGE UNITS FROM demo", "SHOW SHARDING TABLE RULES FROM demo"):
            with pytest.raises(pymysql.err.OperationalError) as info:
                cur.execute(sql)
            assert info.value.args == _denied("app", "demo"), sql
    with _connect(proxy, "star") as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("USE no_such_db")
        assert info.value.args[0] == 1049  # may use every database: an unknown name is unknown
        cur.execute("USE demo")


def test_handshake_database_not_permitted(proxy: RunningProxy) -> None:
    with pytest.raises(pymysql.err.OperationalError) as info:
        _connect(proxy, "app", "demo")
    assert info.value.args == _denied("app", "demo")
    with pytest.raises(mysql.connector.Error) as cinfo:
        mysql.connector.connect(host=proxy.host, port=proxy.port, user="local", password="localpw", database="other")
    assert (cinfo.value.errno, cinfo.value.sqlstate) == (1044, "42000")
    assert cinfo.value.msg == _denied("local", "other", "127.0.0.1")[1]
    with _connect(proxy, "both", "DEMO") as conn:  # names compare case-insensitively, as the proxy finds them
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t_secret")


def test_change_user_to_a_database_not_permitted(proxy: RunningProxy) -> None:
    conn = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root", database="demo")
    try:
        with pytest.raises(mysql.connector.Error) as info:
            conn.cmd_change_user(username="app", password="apppw", database="demo")
        assert info.value.errno == 1044
    finally:
        conn.close()
    conn = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root", database="demo")
    try:
        conn.cmd_change_user(username="app", password="apppw", database="shard")
        cur = conn.cursor()
        cur.execute("SHOW DATABASES")
        assert [r[0] for r in cur.fetchall()] == ["shard"]
    finally:
        conn.close()


def test_information_schema_does_not_show_other_databases(proxy: RunningProxy) -> None:
    for user, db in (("app", "shard"), ("local", "demo")):
        with _connect(proxy, user, db) as conn, conn.cursor() as cur:
            cur.execute("SELECT schema_name FROM information_schema.schemata")
            names = {r[0] for r in cur.fetchall()}
            assert names - {"information_schema", "performance_schema", "mysql", "sys"} == {db}, names
            cur.execute("SELECT DISTINCT table_schema FROM information_schema.tables")
            assert {r[0] for r in cur.fetchall()} - {"information_schema", "performance_schema", "mysql", "sys"} \
                <= {db}
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_name = 't_secret'")
            assert cur.fetchall() == (() if db != "demo" else (("t_secret",),))
    with _connect(proxy, "nobody") as conn, conn.cursor() as cur:  # no database: nothing to read it in
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("SELECT schema_name FROM information_schema.schemata")
        assert info.value.args[0] == 1046


def test_admin_and_all_permitted_see_everything(proxy: RunningProxy) -> None:
    with _connect(proxy, "root", "other") as conn:
        assert _databases(conn) == ALL
