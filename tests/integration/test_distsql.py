"""DistSQL as a ShardingSphere user types it, through real clients (PyMySQL and mysql-connector), against
real MariaDB servers: ShardingSphere 5.5.2's column names, rows built from the configuration in use, the
run-time variables, and a clear refusal for the DistSQL shardproxy does not implement.

Two proxies: the session-wide ``sharded_env`` (the shipped ``conf/database-sharding.yaml`` rules, read
only here), and ``dist`` below, whose rules have what the shipped example lacks (unused algorithms, a
named table reference, an auto table, a complex default strategy, a single table) and whose variables the
tests may change (each test puts back what it changed).
"""

from __future__ import annotations

import hashlib
import json
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest
import yaml

from proxy.config import load_config
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.sharding_fixtures import ShardedEnv
from tests.integration.test_fastpath_point import LONG, execute, prepare
from tests.integration.test_malformed import RawClient

DIST_RULES = textwrap.dedent("""\
    - !SHARDING
      tables:
        t_a:
          actualDataNodes: ds_${0..1}.t_a_${0..1}
          tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: a_inline}}
          keyGenerateStrategy: {column: id, keyGeneratorName: snow}
        t_b:
          actualDataNodes: ds_${0..1}.t_b_${0..1}
          tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: b_inline}}
        t_only0:
          actualDataNodes: ds_0.t_only0
          databaseStrategy: {none: }
      autoTables:
        t_log:
          actualDataSources: ds_0,ds_1
          shardingStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: mod4}}
          keyGenerateStrategy: {column: id, keyGeneratorName: uu}
      bindingTables:
        - ref_ab:t_a,t_b
      defaultDatabaseStrategy:
        complex: {shardingColumns: 'user_id,id', shardingAlgorithmName: db_complex}
      defaultTableStrategy:
        none:
      shardingAlgorithms:
        a_inline: {type: INLINE, props: {algorithm-expression: 't_a_${id % 2}'}}
        b_inline: {type: INLINE, props: {algorithm-expression: 't_b_${id % 2}'}}
        db_complex:
          type: COMPLEX_INLINE
          props: {algorithm-expression: 'ds_${user_id % 2}', sharding-columns: 'user_id,id'}
        mod4: {type: MOD, props: {sharding-count: 4}}
        spare_mod: {type: MOD, props: {sharding-count: 2}}
      keyGenerators:
        snow: {type: SNOWFLAKE}
        uu: {type: UUID}
        spare_snow: {type: SNOWFLAKE, props: {worker-id: 7}}
    - !BROADCAST
      tables: [t_dict, t_country]
    - !SINGLE
      tables: ["*.*"]
      defaultDataSource: ds_1
    """)

DIST_PHYSICAL = {"ds_0": "dist_0", "ds_1": "dist_1"}


@dataclass
class Dist:
    proxy: RunningProxy
    servers: list[MariaDBServer]
    conf: Path

    def connect(self, db: str | None = "dist_db", **kw: Any) -> pymysql.connections.Connection[Any]:
        return self.proxy.connect(db, **kw)

    def query(self, sql: str, db: str | None = "dist_db", **kw: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self.connect(db, **kw) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return [d[0] for d in cur.description or ()], [tuple(r) for r in cur.fetchall()]

    def backend(self, ds: str, sql: str) -> None:
        self.servers[int(ds[-1])].execute(sql, DIST_PHYSICAL[ds])


@pytest.fixture(scope="module")
def dist(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dist]:
    s0, s1 = mariadb_shards[:2]
    for server, physical in ((s0, "dist_0"), (s1, "dist_1"), (s0, "dist_pass")):
        server.execute(f"DROP DATABASE IF EXISTS {physical}")
        server.execute(f"CREATE DATABASE {physical}")
    s0.execute("CREATE TABLE t_pass_1 (id INT)", "dist_pass")
    s0.execute("CREATE TABLE t_pass_2 (id INT)", "dist_pass")
    for ds, server in (("ds_0", s0), ("ds_1", s1)):
        for sql in ("CREATE TABLE t_a_0 (id BIGINT, v INT)", "CREATE TABLE t_a_1 (id BIGINT, v INT)",
                    "CREATE TABLE t_b_0 (id BIGINT)", "CREATE TABLE t_b_1 (id BIGINT)", "CREATE TABLE t_dict (id INT)",
                    "CREATE TABLE t_country (id INT)"):
            server.execute(sql, DIST_PHYSICAL[ds])
    s0.execute("CREATE TABLE t_only0 (id INT)", "dist_0")
    s1.execute("CREATE TABLE t_single_1 (id INT)", "dist_1")
    s0.execute("CREATE TABLE t_single_0 (id INT)", "dist_0")
    conf = write_conf(
        tmp_path_factory.mktemp("distsql-conf"),
        {"dist_db": {"ds_0": (s0, "dist_0"), "ds_1": (s1, "dist_1")}, "pass_db": {"ds_p": (s0, "dist_pass")}},
        users=({"user": "root@%", "password": "root", "admin": True}, {"user": "app@%", "password": "app"}),
        props={"sql-show": False, "proxy-frontend-max-connections": 0},
        rules_yaml={"dist_db": DIST_RULES},
    )
    proxy = start_proxy(conf)
    yield Dist(proxy, [s0, s1], conf)
    proxy.stop()


def connector(proxy: RunningProxy, db: str | None, user: str = "root", password: str = "root") -> Any:
    return mysql.connector.connect(host=proxy.host, port=proxy.port, user=user, password=password, database=db,
                                   use_pure=True, ssl_disabled=True, autocommit=True)


def connector_query(proxy: RunningProxy, sql: str, db: str | None) -> tuple[list[str], list[tuple[Any, ...]]]:
    conn = connector(proxy, db)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        rows = [tuple(r) for r in cur.fetchall()]
        return [d[0] for d in cur.description or ()], rows
    finally:
        conn.close()


def refusal(proxy: RunningProxy, sql: str, db: str | None = None, user: str = "root",
            password: str = "root") -> tuple[int, str | None, str]:
    conn = connector(proxy, db, user, password)
    try:
        cur = conn.cursor()
        try:
            cur.execute(sql)
            cur.fetchall()
        except mysql.connector.Error as exc:
            return int(exc.errno), exc.sqlstate, str(exc.msg)
        raise AssertionError(f"the proxy accepted {sql!r}")
    finally:
        conn.close()


def props(algorithm_expression: str) -> str:
    return json.dumps({"algorithm-expression": algorithm_expression}, separators=(",", ":"))


def ref_name(reference: str) -> str:
    return hashlib.md5(reference.encode()).hexdigest()[:16]


ALGORITHM_COLUMNS = ["name", "type", "props"]
STRATEGY_COLUMNS = ["name", "type", "sharding_column", "sharding_algorithm_name", "sharding_algorithm_type",
                    "sharding_algorithm_props"]

# --- the shipped example (sharded_env), with both clients ---------------------------------------------------

SHIPPED_CASES = [
    ("SHOW SHARDING ALGORITHMS", ALGORITHM_COLUMNS, [
        ("database_inline", "INLINE", props("ds_${user_id % 2}")),
        ("t_order_inline", "INLINE", props("t_order_${order_id % 2}")),
        ("t_order_item_inline", "INLINE", props("t_order_item_${order_id % 2}"))]),
    ("SHOW SHARDING KEY GENERATORS", ALGORITHM_COLUMNS, [("snowflake", "SNOWFLAKE", "")]),
    ("SHOW SHARDING AUDITORS", ALGORITHM_COLUMNS, []),
    ("SHOW DEFAULT SHARDING STRATEGY", STRATEGY_COLUMNS, [
        ("TABLE", "NONE", "", "", "", ""),
        ("DATABASE", "STANDARD", "user_id", "database_inline", "INLINE", props("ds_${user_id % 2}"))]),
    ("SHOW SHARDING TABLE REFERENCE RULES", ["name", "sharding_table_reference"],
     [(ref_name("t_order,t_order_item"), "t_order,t_order_item")]),
    (f"SHOW SHARDING TABLE REFERENCE RULE {ref_name('t_order,t_order_item')}", ["name", "sharding_table_reference"],
     [(ref_name("t_order,t_order_item"), "t_order,t_order_item")]),
    ("SHOW SHARDING TABLE REFERENCE RULE nope", ["name", "sharding_table_reference"], []),
    ("SHOW BROADCAST TABLE RULES", ["broadcast_table"], [("t_address",)]),
    ("COUNT SHARDING RULE", ["rule_name", "database", "count"],
     [("sharding_table", "sharding_db", "2"), ("sharding_table_reference", "sharding_db", "1")]),
    ("COUNT BROADCAST RULE", ["rule_name", "database", "count"], [("broadcast_table", "sharding_db", "1")]),
    ("COUNT READWRITE_SPLITTING RULE", ["rule_name", "database", "count"], []),
    ("SHOW UNUSED SHARDING ALGORITHMS", ALGORITHM_COLUMNS, []),
    ("SHOW UNUSED SHARDING KEY GENERATORS", ALGORITHM_COLUMNS, []),
    ("SHOW RULES USED STORAGE UNIT ds_0", ["type", "name"], [("sharding", "t_order"), ("sharding", "t_order_item")]),
    ("SHOW RULES USED STORAGE UNIT ds_9", ["type", "name"], []),
    ("SHOW SHARDING TABLE RULES USED ALGORITHM database_inline", ["type", "name"],
     [("table", "t_order"), ("table", "t_order_item")]),
    ("SHOW SHARDING TABLE RULES USED ALGORITHM t_order_inline", ["type", "name"], [("table", "t_order")]),
    ("SHOW SHARDING TABLE RULES USED KEY GENERATOR snowflake", ["type", "name"],
     [("table", "t_order"), ("table", "t_order_item")]),
    ("SHOW DEFAULT SINGLE TABLE STORAGE UNIT", ["storage_unit_name"], [("RANDOM",)]),
]


@pytest.mark.parametrize(("sql", "columns", "rows"), SHIPPED_CASES, ids=[c[0] for c in SHIPPED_CASES])
@pytest.mark.parametrize("client", ["pymysql", "connector"])
def test_rql_on_the_shipped_example(sharded_env: ShardedEnv, sql: str, columns: list[str],
                                    rows: list[tuple[str, ...]], client: str) -> None:
    for text in (sql, sql.lower() + ";", f"/* a comment */ {sql} FROM sharding_db"):
        if client == "pymysql":
            names, got = sharded_env.query(text, "sharding_db")
        else:
            names, got = connector_query(sharded_env.proxy, text, "sharding_db")
        assert names == columns, text
        assert [tuple(r) for r in got] == rows, text


def test_from_names_another_database(sharded_env: ShardedEnv) -> None:
    _, rows = sharded_env.query("COUNT SHARDING RULE FROM extra_db", "sharding_db")
    assert rows == [("sharding_table", "extra_db", "7"), ("sharding_table_reference", "extra_db", "0")]
    _, rows = sharded_env.query("SHOW SINGLE TABLES FROM extra_db", "sharding_db")
    assert ("t_single", "ds_0") in rows
    assert not {r[0] for r in rows} & {"t_log_0", "t_user", "t_order_0", "t_address", "t_bad"}
    _, rows = sharded_env.query("SHOW SINGLE TABLE t_single FROM extra_db", "sharding_db")
    assert rows == [("t_single", "ds_0")]
    _, rows = sharded_env.query("SHOW SHARDING TABLE RULES USED ALGORITHM mod4 FROM extra_db", "sharding_db")
    assert rows == [("auto_table", "t_log")]
    _, rows = sharded_env.query("SHOW DEFAULT SHARDING STRATEGY FROM extra_db", "sharding_db")
    assert rows == [("TABLE", "", "", "", "", ""), ("DATABASE", "", "", "", "", "")]


def test_unknown_database_and_no_database(sharded_env: ShardedEnv) -> None:
    assert refusal(sharded_env.proxy, "SHOW SHARDING ALGORITHMS FROM nope") == (1049, "42000",
                                                                               "Unknown database 'nope'")
    assert refusal(sharded_env.proxy, "SHOW BROADCAST TABLE RULES") == (1046, "3D000", "No database selected")


# --- the dist proxy: what the shipped example lacks ---------------------------------------------------------

COMPLEX_PROPS = '{"algorithm-expression":"ds_${user_id % 2}","sharding-columns":"user_id,id"}'
DIST_CASES = [
    ("SHOW SHARDING ALGORITHMS", ALGORITHM_COLUMNS, [
        ("a_inline", "INLINE", props("t_a_${id % 2}")), ("b_inline", "INLINE", props("t_b_${id % 2}")),
        ("db_complex", "COMPLEX_INLINE", COMPLEX_PROPS),
        ("mod4", "MOD", '{"sharding-count":4}'), ("spare_mod", "MOD", '{"sharding-count":2}')]),
    ("SHOW UNUSED SHARDING ALGORITHMS", ALGORITHM_COLUMNS, [("spare_mod", "MOD", '{"sharding-count":2}')]),
    ("SHOW SHARDING KEY GENERATORS", ALGORITHM_COLUMNS,
     [("snow", "SNOWFLAKE", ""), ("uu", "UUID", ""), ("spare_snow", "SNOWFLAKE", '{"worker-id":7}')]),
    ("SHOW UNUSED SHARDING KEY GENERATORS", ALGORITHM_COLUMNS, [("spare_snow", "SNOWFLAKE", '{"worker-id":7}')]),
    ("SHOW DEFAULT SHARDING STRATEGY", STRATEGY_COLUMNS, [
        ("TABLE", "NONE", "", "", "", ""),
        ("DATABASE", "COMPLEX", "user_id,id", "db_complex", "COMPLEX_INLINE",
         COMPLEX_PROPS)]),
    ("SHOW SHARDING TABLE REFERENCE RULES", ["name", "sharding_table_reference"], [("ref_ab", "t_a,t_b")]),
    ("SHOW SHARDING TABLE REFERENCE RULE REF_AB", ["name", "sharding_table_reference"], [("ref_ab", "t_a,t_b")]),
    ("SHOW BROADCAST TABLE RULES", ["broadcast_table"], [("t_dict",), ("t_country",)]),
    ("COUNT SHARDING RULE", ["rule_name", "database", "count"],
     [("sharding_table", "dist_db", "4"), ("sharding_table_reference", "dist_db", "1")]),
    ("COUNT BROADCAST RULE", ["rule_name", "database", "count"], [("broadcast_table", "dist_db", "2")]),
    ("COUNT SINGLE TABLE", ["rule_name", "database", "count"], [("single", "dist_db", "2")]),
    ("SHOW SINGLE TABLES", ["table_name", "storage_unit_name"], [("t_single_0", "ds_0"), ("t_single_1", "ds_1")]),
    ("SHOW SINGLE TABLES LIKE '%\\_1'", ["table_name", "storage_unit_name"], [("t_single_1", "ds_1")]),
    ("SHOW SINGLE TABLE t_single_0", ["table_name", "storage_unit_name"], [("t_single_0", "ds_0")]),
    ("SHOW DEFAULT SINGLE TABLE STORAGE UNIT", ["storage_unit_name"], [("ds_1",)]),
    ("SHOW RULES USED STORAGE UNIT ds_1", ["type", "name"], [("sharding", "t_log"), ("sharding", "t_a"),
                                                           ("sharding", "t_b")]),
    ("SHOW RULES USED STORAGE UNIT ds_0", ["type", "name"], [("sharding", "t_log"), ("sharding", "t_a"),
                                                           ("sharding", "t_b"), ("sharding", "t_only0")]),
    ("SHOW SHARDING TABLE RULES USED ALGORITHM db_complex", ["type", "name"], [("table", "t_a"), ("table", "t_b")]),
    ("SHOW SHARDING TABLE RULES USED KEY GENERATOR uu", ["type", "name"], [("auto_table", "t_log")]),
    ("SHOW LOGICAL TABLES LIKE 't\\_single%'", ["Tables_in_dist_db"], [("t_single_0",), ("t_single_1",)]),
    ("SHOW FULL LOGICAL TABLES LIKE 't_a'", ["Tables_in_dist_db", "Table_type"], [("t_a", "TABLE")]),
    ("SHOW SINGLE TABLES FROM pass_db", ["table_name", "storage_unit_name"],
     [("t_pass_1", "ds_p"), ("t_pass_2", "ds_p")]),
    ("SHOW LOGICAL TABLES FROM pass_db", ["Tables_in_pass_db"], [("t_pass_1",), ("t_pass_2",)]),
    ("COUNT SHARDING RULE FROM pass_db", ["rule_name", "database", "count"], []),
    ("SHOW SHARDING ALGORITHMS FROM pass_db", ALGORITHM_COLUMNS, []),
    ("SHOW DEFAULT SHARDING STRATEGY FROM pass_db", STRATEGY_COLUMNS, []),
]


@pytest.mark.parametrize(("sql", "columns", "rows"), DIST_CASES, ids=[c[0] for c in DIST_CASES])
def test_rql_on_a_richer_configuration(dist: Dist, sql: str, columns: list[str], rows: list[tuple[str, ...]]) -> None:
    names, got = dist.query(sql)
    assert (names, got) == (columns, rows)
    names, got = connector_query(dist.proxy, sql, "dist_db")
    assert (names, got) == (columns, rows)


def test_show_storage_units_like(dist: Dist) -> None:
    names, rows = dist.query("SHOW STORAGE UNITS LIKE 'ds\\_1'")
    assert names[:5] == ["name", "type", "host", "port", "db"]
    assert [r[0] for r in rows] == ["ds_1"]
    assert rows[0][4] == "dist_1"


# --- RAL: dist variables ------------------------------------------------------------------------------------

SHARDINGSPHERE_VARIABLES = {  # ShardingSphere 5.5.2's SHOW DIST VARIABLES (test/e2e ... show_dist_variables.xml)
    "agent_plugins_enabled", "cached_connections", "cdc_server_port", "check_table_metadata_enabled",
    "kernel_executor_size", "load_table_metadata_batch_size", "max_connections_size_per_query",
    "proxy_backend_query_fetch_size", "proxy_default_port", "proxy_frontend_database_protocol_type",
    "proxy_frontend_executor_size", "proxy_frontend_flush_threshold", "proxy_frontend_max_connections",
    "proxy_frontend_ssl_cipher", "proxy_frontend_ssl_enabled", "proxy_frontend_ssl_version",
    "proxy_meta_data_collector_enabled", "proxy_netty_backlog", "sql_show", "sql_simple", "system_log_level",
    "system_schema_metadata_assembly_enabled",
}


def test_show_dist_variables(dist: Dist) -> None:
    names, rows = dist.query("SHOW DIST VARIABLES")
    assert names == ["variable_name", "variable_value"]
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    values = dict(rows)
    assert SHARDINGSPHERE_VARIABLES <= set(values)
    assert {k: values[k] for k in ("sql_show", "proxy_frontend_max_connections", "max_connections_size_per_query",
                                    "proxy_backlog", "proxy_merge_memory_rows", "proxy_default_port",
                                    "proxy_frontend_ssl_enabled", "proxy_frontend_ssl_version", "cached_connections",
                                    "proxy_statement_timeout_seconds", "proxy_statement_memory_bytes",
                                    "proxy_global_memory_bytes")} == {
        "sql_show": "false", "proxy_frontend_max_connections": "0", "max_connections_size_per_query": "4",
        "proxy_backlog": "4096", "proxy_merge_memory_rows": "1000000", "proxy_default_port": "3307",
        "proxy_frontend_ssl_enabled": "false", "proxy_frontend_ssl_version": "TLSv1.2,TLSv1.3",
        "cached_connections": "0", "proxy_statement_timeout_seconds": "0",
        "proxy_statement_memory_bytes": "536870912", "proxy_global_memory_bytes": "2147483648"}
    assert dist.query("SHOW DIST VARIABLES LIKE 'sql\\_%'")[1] == [("sql_show", "false"), ("sql_simple", "false")]
    assert connector_query(dist.proxy, "show dist variables like 'SQL_S%';", None)[1] == [
        ("sql_show", "false"), ("sql_simple", "false")]


@pytest.mark.parametrize("sql", ["SHOW DIST VARIABLE WHERE NAME = sql_show", "show dist variable where name=SQL_SHOW;",
                                 "SHOW DIST VARIABLE WHERE name = 'sql_show'"])
def test_show_dist_variable(dist: Dist, sql: str) -> None:
    assert dist.query(sql, None) == (["variable_name", "variable_value"], [("sql_show", "false")])


def test_cached_connections_counts_the_sessions_backend_connections(dist: Dist) -> None:
    with dist.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM t_a")  # both data sources
        cur.fetchall()
        cur.execute("SHOW DIST VARIABLE WHERE NAME = cached_connections")
        assert cur.fetchall() == (("cached_connections", "2"),)


def _variable(dist: Dist, name: str) -> str:
    return str(dist.query(f"SHOW DIST VARIABLE WHERE NAME = {name}", None)[1][0][1])


def test_set_dist_variable_sql_show_applies_to_every_session_at_once(dist: Dist) -> None:
    with dist.connect() as first, first.cursor() as cur:
        try:
            cur.execute("SET DIST VARIABLE sql_show = true")
            assert dist.proxy.call(lambda: dist.proxy.server.sql_show) is True
            assert _variable(dist, "sql_show") == "true"  # a second session
            cur.execute("SELECT * FROM t_a WHERE id = 1")  # statements still run (and are logged)
            assert cur.fetchall() == ()
        finally:
            cur.execute("SET DIST VARIABLE sql_show = FALSE")
    assert _variable(dist, "sql_show") == "false"
    assert dist.proxy.call(lambda: dist.proxy.server.sql_show) is False


def test_set_dist_variable_max_connections_refuses_the_next_client(dist: Dist) -> None:
    with dist.connect() as admin, admin.cursor() as cur:
        try:
            sessions = dist.proxy.call(lambda: len(dist.proxy.server.sessions))
            cur.execute(f"SET DIST VARIABLE proxy_frontend_max_connections = {sessions + 1}")
            with dist.connect():
                with pytest.raises(pymysql.err.OperationalError) as refused:
                    dist.connect()
                assert refused.value.args[0] == 1040
        finally:
            cur.execute("SET DIST VARIABLE proxy_frontend_max_connections = '0'")
        with dist.connect(), dist.connect():
            pass
    assert _variable(dist, "proxy_frontend_max_connections") == "0"


@pytest.mark.parametrize(("name", "value", "attribute", "shown", "applied"), [
    ("max_connections_size_per_query", "2", "max_connections_per_query", "2", 2),
    ("proxy_merge_memory_rows", "5000", "merge_memory_rows", "5000", 5000),
    ("proxy_statement_memory_bytes", "1048576", "statement_memory_bytes", "1048576", 1048576),
    ("proxy_statement_timeout_seconds", "2.5", "statement_timeout", "2.5", 2.5),
])
def test_set_dist_variable_live_props(dist: Dist, name: str, value: str, attribute: str, shown: str,
                                      applied: Any) -> None:
    before = _variable(dist, name)
    try:
        dist.query(f"SET DIST VARIABLE {name} = {value}", None)
        assert _variable(dist, name) == shown
        assert dist.proxy.call(lambda: getattr(dist.proxy.server, attribute)) == applied
        assert dist.query("SELECT COUNT(*) FROM t_a")[1] == [(0,)]
    finally:
        dist.query(f"SET DIST VARIABLE {name} = {before}", None)
    assert _variable(dist, name) == before


def test_set_dist_variable_default_database(dist: Dist) -> None:
    try:
        dist.query("SET DIST VARIABLE proxy_default_database = pass_db", None)
        assert _variable(dist, "proxy_default_database") == "pass_db"
        assert dist.proxy.call(lambda: dist.proxy.server.default_database().name) == "pass_db"
    finally:
        dist.query("SET DIST VARIABLE proxy_default_database = ''", None)
    assert dist.proxy.call(lambda: dist.proxy.server.default_database().name) == "dist_db"


@pytest.mark.parametrize(("sql", "errno", "sqlstate", "message"), [
    ("SET DIST VARIABLE nope = 1", 1193, "HY000", "Unknown dist variable 'nope'"),
    ("SET DIST VARIABLE sql_show = maybe", 1231, "42000", "Variable 'sql_show' can't be set to the value of 'maybe'"),
    ("SET DIST VARIABLE proxy_frontend_max_connections = -1", 1231, "42000", "can't be set to the value of '-1'"),
    ("SET DIST VARIABLE max_connections_size_per_query = 'x'", 1231, "42000", "can't be set"),
    ("SET DIST VARIABLE proxy_default_database = nope", 1049, "42000", "Unknown database 'nope'"),
    ("SET DIST VARIABLE proxy_default_port = 3308", 1238, "HY000", "'proxy_default_port' is a read only variable"),
    ("SET DIST VARIABLE proxy_frontend_ssl_enabled = true", 1238, "HY000", "read only"),
    ("SET DIST VARIABLE cached_connections = 1", 1238, "HY000", "read only"),
    ("SET DIST VARIABLE sql_simple = true", 1235, "42000", "is not supported by shardproxy"),
    ("SHOW DIST VARIABLE WHERE NAME = nope", 1193, "HY000", "Unknown dist variable 'nope'"),
])
def test_set_dist_variable_refusals(dist: Dist, sql: str, errno: int, sqlstate: str, message: str) -> None:
    got = refusal(dist.proxy, sql)
    assert got[:2] == (errno, sqlstate) and message in got[2], got


def test_changes_need_an_admin_user(dist: Dist) -> None:
    for sql in ("SET DIST VARIABLE sql_show = true", "EXPORT DATABASE CONFIGURATION FROM dist_db"):
        errno, sqlstate, message = refusal(dist.proxy, sql, "dist_db", "app", "app")
        assert (errno, sqlstate) == (1227, "42000") and "admin: true" in message
    assert _variable(dist, "sql_show") == "false"
    with pymysql.connect(host=dist.proxy.host, port=dist.proxy.port, user="app", password="app",
                         database="dist_db") as conn, conn.cursor() as cur:
        cur.execute("SHOW SHARDING ALGORITHMS")  # reading rules is for everyone
        assert len(cur.fetchall()) == 5


# --- RAL: compute nodes, metadata, export -------------------------------------------------------------------


def test_show_compute_nodes(dist: Dist) -> None:
    from proxy.cli import version

    names, rows = dist.query("SHOW COMPUTE NODES", None)
    assert names == ["instance_id", "instance_type", "host", "port", "status", "mode_type", "worker_id", "labels",
                     "version", "database_name"]
    assert len(rows) == 1
    (instance, *rest), = rows
    assert rest == ["PROXY", "127.0.0.1", str(dist.proxy.port), "OK", "Standalone", "0", "", version(), ""]
    assert len(instance) == 36 and connector_query(dist.proxy, "show compute nodes", None)[1][0][0] == instance


def test_refresh_table_metadata_sees_tables_made_behind_the_proxy(dist: Dist) -> None:
    dist.backend("ds_1", "CREATE TABLE t_behind (id INT)")
    try:
        assert ("t_behind", "ds_1") not in dist.query("SHOW SINGLE TABLES")[1]
        for sql in ("REFRESH TABLE METADATA", "REFRESH TABLE METADATA t_behind",
                    "REFRESH TABLE METADATA t_behind FROM STORAGE UNIT ds_1",
                    "REFRESH TABLE METADATA FROM STORAGE UNIT ds_0", "REFRESH DATABASE METADATA dist_db",
                    "FORCE REFRESH DATABASE METADATA", "refresh database metadata;"):
            with dist.connect() as conn, conn.cursor() as cur:
                assert cur.execute(sql) == 0
        assert ("t_behind", "ds_1") in dist.query("SHOW SINGLE TABLES")[1]
        assert dist.query("SELECT COUNT(*) FROM t_behind")[1] == [(0,)]  # routed to ds_1 now
    finally:
        dist.backend("ds_1", "DROP TABLE t_behind")
        dist.query("REFRESH TABLE METADATA")
    assert ("t_behind", "ds_1") not in dist.query("SHOW SINGLE TABLES")[1]
    assert refusal(dist.proxy, "REFRESH TABLE METADATA t_behind", "dist_db")[:2] == (1146, "42S02")
    assert refusal(dist.proxy, "REFRESH TABLE METADATA FROM STORAGE UNIT ds_9", "dist_db")[0] == 1105
    assert refusal(dist.proxy, "REFRESH TABLE METADATA", None)[0] == 1046
    assert refusal(dist.proxy, "REFRESH DATABASE METADATA nope", None)[0] == 1049


def test_export_database_configuration(dist: Dist, tmp_path: Path) -> None:
    from routing.config import load_yaml

    names, rows = dist.query("EXPORT DATABASE CONFIGURATION")
    assert names == ["result"] and len(rows) == 1
    text = rows[0][0]
    assert text.startswith("databaseName: dist_db\ndataSources:\n  ds_0:\n    password: ")
    doc = load_yaml(text)
    assert doc["dataSources"]["ds_1"]["url"].endswith("/dist_1?useSSL=false")
    assert [r["__rule__"] for r in doc["rules"]] == ["SHARDING", "BROADCAST", "SINGLE"]
    sharding = doc["rules"][0]
    assert list(sharding) == sorted(sharding)  # ShardingSphere prints the rule's keys sorted
    assert sharding["tables"]["t_a"]["logicTable"] == "t_a" and sharding["autoTables"]["t_log"]["logicTable"] == "t_log"
    assert sharding["defaultTableStrategy"] == {"none": ""}
    assert "- !SHARDING\n" in text and "- !BROADCAST\n" in text
    assert connector_query(dist.proxy, "export database configuration from dist_db", "pass_db")[1][0][0] == text

    target = tmp_path / "out" / "database-dist.yaml"
    _, rows = dist.query(f"EXPORT DATABASE CONFIGURATION FROM dist_db TO FILE '{target}'", None)
    assert rows == [(f"Successfully exported to: '{target}'",)]
    assert target.read_text() == text
    # what was exported loads back as a configuration: the same rules
    (tmp_path / "out" / "global.yaml").write_text((dist.conf / "global.yaml").read_text())
    loaded = load_config(tmp_path / "out").databases["dist_db"]
    original = load_config(dist.conf).databases["dist_db"]
    assert loaded.rules.sharding is not None and original.rules.sharding is not None
    assert {n: r.data_nodes for n, r in loaded.rules.sharding.tables.items()} == {
        n: r.data_nodes for n, r in original.rules.sharding.tables.items()}
    assert loaded.rules.broadcast == original.rules.broadcast and loaded.rules.single == original.rules.single
    assert not [w for w in load_config(tmp_path / "out").warnings if "dist_db" in w or "database-dist" in w]

    _, rows = dist.query("EXPORT DATABASE CONFIGURATION FROM pass_db")
    s0 = dist.servers[0]
    assert yaml.safe_load(rows[0][0]) == {"databaseName": "pass_db", "dataSources": {"ds_p": {
        "password": s0.password, "url": f"jdbc:mysql://{s0.host}:{s0.port}/dist_pass?useSSL=false",
        "username": s0.user, "maxPoolSize": 20, "minPoolSize": 1}}}


# --- the rest of DistSQL: a clear refusal, never a backend's syntax error ------------------------------------

UNSUPPORTED = [
    ("ALTER SQL_PARSER RULE (SQL_STATEMENT_CACHE(INITIAL_CAPACITY=1))", "ALTER SQL_PARSER RULE"),
    ("SHOW KEY GENERATE ALGORITHM PLUGINS", "SHOW KEY GENERATE ALGORITHM PLUGINS"),
    ("CREATE READWRITE_SPLITTING RULE rw (WRITE_STORAGE_UNIT=ds_0, READ_STORAGE_UNITS(ds_1))",
     "CREATE READWRITE_SPLITTING RULE"),
    ("DROP SHARDING KEY GENERATOR IF EXISTS spare_snow", "DROP SHARDING KEY GENERATOR"),
    ("DROP SHARDING ALGORITHM spare_mod", "DROP SHARDING ALGORITHM"),
    ("CREATE DEFAULT SHARDING DATABASE STRATEGY (TYPE='standard', SHARDING_COLUMN=user_id, "
     "SHARDING_ALGORITHM(TYPE(NAME='inline', PROPERTIES('algorithm-expression'='ds_${user_id % 2}'))))",
     "CREATE DEFAULT SHARDING DATABASE STRATEGY"),
    ("CREATE SHARDING TABLE REFERENCE RULE ref (t_a, t_b)", "CREATE SHARDING TABLE REFERENCE RULE"),
    ("SHOW STATUS FROM READWRITE_SPLITTING RULES", "SHOW STATUS FROM READWRITE_SPLITTING RULES"),
    ("SHOW UNLOADED SINGLE TABLES", "SHOW UNLOADED SINGLE TABLES"),
    ("LOAD SINGLE TABLE ds_0.t_x", "LOAD SINGLE TABLE"),
    ("UNLOAD SINGLE TABLE t_single_0", "UNLOAD SINGLE TABLE"),
    ("UNLOAD ALL SINGLE TABLES", "UNLOAD ALL SINGLE TABLES"),
    ("SET DEFAULT SINGLE TABLE STORAGE UNIT = ds_0", "SET DEFAULT SINGLE TABLE STORAGE UNIT"),
    ("IMPORT DATABASE CONFIGURATION FROM FILE '/tmp/x.yaml'", "IMPORT DATABASE CONFIGURATION"),
    ("EXPORT METADATA TO FILE '/tmp/x.json'", "EXPORT METADATA"),
    ("EXPORT STORAGE NODES", "EXPORT STORAGE NODES"),
    ("SHOW COMPUTE NODE INFO", "SHOW COMPUTE NODE INFO"),
    ("ALTER COMPUTE NODE 'x' SET WORKER_ID = 1", "ALTER COMPUTE NODE"),
    ("LABEL COMPUTE NODE 'x' WITH a", "LABEL COMPUTE NODE"),
    ("ENABLE COMPUTE NODE 'x'", "ENABLE COMPUTE NODE"),
    ("LOCK CLUSTER WITH LOCK_STRATEGY(TYPE(NAME='WRITE'))", "LOCK CLUSTER"),
    ("UNLOCK CLUSTER", "UNLOCK CLUSTER"),
    ("SHOW MIGRATION RULE", "SHOW MIGRATION RULE"),  # SHOW MIGRATION LIST is answered (proxy.migration)
    ("START MIGRATION 'j01'", "START MIGRATION"),
    ("SHOW PLUGINS OF 'org.apache.shardingsphere.sharding.spi.KeyGenerateAlgorithm'", "SHOW PLUGINS OF"),
    ("SHOW SHARDING ALGORITHM PLUGINS", "SHOW SHARDING ALGORITHM PLUGINS"),
    ("SHOW KEY GENERATE ALGORITHM PLUGINS", "SHOW KEY GENERATE ALGORITHM PLUGINS"),
    ("SHOW AUTHORITY RULE", "SHOW AUTHORITY RULE"),
    ("SHOW SQL_PARSER RULE", "SHOW SQL_PARSER RULE"),
    ("ALTER SQL_PARSER RULE (SQL_STATEMENT_CACHE(INITIAL_CAPACITY=1000))", "ALTER SQL_PARSER RULE"),
    ("SHOW GLOBAL CLOCK RULE", "SHOW GLOBAL CLOCK RULE"),
    ("FORMAT SELECT 1", "FORMAT"),
    ("PARSE SELECT * FROM t_a", "PARSE"),
    ("SHOW ENCRYPT ALGORITHM PLUGINS", "SHOW ENCRYPT ALGORITHM PLUGINS"),
    ("CONVERT YAML CONFIGURATION FROM FILE 'x.yaml'", "CONVERT YAML CONFIGURATION"),
    ("show readwrite_splitting rules from dist_db where x", "SHOW READWRITE_SPLITTING RULES"),
    ("SHOW DIST VARIABLE sql_show", "SHOW DIST VARIABLE"),
]


@pytest.mark.parametrize(("sql", "name"), UNSUPPORTED, ids=[u[1] for u in UNSUPPORTED])
@pytest.mark.parametrize("db", ["dist_db", "pass_db", None])
def test_other_distsql_is_refused_by_name(dist: Dist, sql: str, name: str, db: str | None) -> None:
    assert refusal(dist.proxy, sql, db) == (1235, "42000", f"{name} is not supported by shardproxy")


@pytest.mark.parametrize("sql", [
    "SHOW STATUS LIKE 'Uptime'", "SHOW PLUGINS", "SHOW GLOBAL VARIABLES LIKE 'version'", "SET NAMES utf8mb4",
    "SHOW TABLE STATUS", "SET @dist = 1", "SHOW GLOBAL STATUS LIKE 'x'", "CHECK TABLE t_pass_1",
])
def test_sql_that_looks_alike_still_reaches_the_backend(dist: Dist, sql: str) -> None:
    with dist.connect("pass_db") as conn, conn.cursor() as cur:
        cur.execute(sql)
        cur.fetchall()


# --- RDL: rules changed at run time, kept across a restart ----------------------------------------------------

RDL_RULES = textwrap.dedent("""\
    - !SHARDING
      tables:
        t_keep:
          actualDataNodes: ds_${0..1}.t_keep
          databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: keep_inline}}
        t_mate:
          actualDataNodes: ds_${0..1}.t_mate
          databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: keep_inline}}
      bindingTables: [t_keep,t_mate]
      shardingAlgorithms:
        keep_inline: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
    - !BROADCAST
      tables: [t_b0]
    """)

T_NEW = ("t_new (DATANODES('ds_${0..1}.t_new_${0..1}'), "
         "DATABASE_STRATEGY(TYPE='standard', SHARDING_COLUMN=user_id, SHARDING_ALGORITHM(TYPE(NAME='inline', "
         "PROPERTIES('algorithm-expression'='ds_${user_id % 2}')))), "
         "TABLE_STRATEGY(TYPE='standard', SHARDING_COLUMN=order_id, SHARDING_ALGORITHM(TYPE(NAME='inline', "
         "PROPERTIES('algorithm-expression'='t_new_${order_id % 2}')))), "
         "KEY_GENERATE_STRATEGY(COLUMN=order_id, TYPE(NAME='snowflake')))")
T_AUTO = ("t_auto (STORAGE_UNITS(ds_0, ds_1), SHARDING_COLUMN=id, TYPE(NAME='hash_mod', "
          "PROPERTIES('sharding-count'='4')), KEY_GENERATE_STRATEGY(COLUMN=id, TYPE(NAME='uuid')))")


@dataclass
class Rdl:
    proxy: RunningProxy
    servers: list[MariaDBServer]
    conf: Path

    @property
    def file(self) -> Path:
        return self.conf / "database-rdl_db.yaml"

    def connect(self, db: str | None = "rdl_db", **kw: Any) -> pymysql.connections.Connection[Any]:
        return self.proxy.connect(db, **kw)

    def run(self, sql: str, db: str | None = "rdl_db") -> list[tuple[Any, ...]]:
        with self.connect(db) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()]

    def restart(self) -> None:
        self.proxy.stop()
        self.proxy = start_proxy(self.conf)

    def backend_tables(self, i: int, physical: str) -> set[str]:
        with self.servers[i].connect(physical) as conn, conn.cursor() as cur:
            cur.execute("SHOW TABLES")
            return {r[0] for r in cur.fetchall()}

    def backend_rows(self, i: int, physical: str, sql: str) -> list[tuple[Any, ...]]:
        with self.servers[i].connect(physical) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()]


def _start_rdl(servers: list[MariaDBServer], conf_dir: Path, prefix: str) -> Rdl:
    s0, s1 = servers[:2]
    for server, physical in ((s0, "0"), (s1, "1"), (s0, "pass"), (s1, "2")):
        server.execute(f"DROP DATABASE IF EXISTS {prefix}_{physical}")
        server.execute(f"CREATE DATABASE {prefix}_{physical}")
    for server, physical in ((s0, f"{prefix}_0"), (s1, f"{prefix}_1")):
        for table in ("t_keep", "t_mate", "t_b0"):
            server.execute(f"CREATE TABLE {table} (id INT)", physical)
    conf = write_conf(
        conf_dir,
        {"rdl_db": {"ds_0": (s0, f"{prefix}_0"), "ds_1": (s1, f"{prefix}_1")},
         "rdl_pass": {"ds_p": (s0, f"{prefix}_pass")}},
        users=({"user": "root@%", "password": "root", "admin": True}, {"user": "app@%", "password": "app"}),
        rules_yaml={"rdl_db": RDL_RULES},
    )
    return Rdl(start_proxy(conf), [s0, s1], conf)


@pytest.fixture
def rdl(mariadb_shards: list[MariaDBServer], tmp_path: Path) -> Iterator[Rdl]:
    """A proxy of its own per test: its rules change."""
    env = _start_rdl(mariadb_shards, tmp_path / "conf", "rdl")
    yield env
    env.proxy.stop()


@pytest.fixture(scope="module")
def rdl_unchanged(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rdl]:
    """One proxy for the tests whose statements must change nothing."""
    env = _start_rdl(mariadb_shards, tmp_path_factory.mktemp("rdl-unchanged") / "conf", "rdlu")
    yield env
    env.proxy.stop()


def _table_rules(env: Rdl, table: str | None = None) -> dict[str, dict[str, str]]:
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW SHARDING TABLE RULES" if table is None else f"SHOW SHARDING TABLE RULE {table}")
        names = [d[0] for d in cur.description]
        return {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}


def test_create_sharding_table_rule_is_seen_by_every_session_and_survives_a_restart(rdl: Rdl) -> None:
    other = rdl.connect()  # a session that exists before the change
    with other.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t_keep")
        assert cur.fetchall() == ((0,),)
    try:
        conn = connector(rdl.proxy, "rdl_db")
        conn.cursor().execute(f"CREATE SHARDING TABLE RULE {T_NEW}")
        conn.close()
        with other.cursor() as cur:
            cur.execute("SHOW SHARDING TABLE RULE t_new")
            (row,) = cur.fetchall()
            assert row[1] == "ds_0.t_new_0, ds_0.t_new_1, ds_1.t_new_0, ds_1.t_new_1"
            cur.execute("SHOW SHARDING ALGORITHMS")
            assert ("t_new_database_inline", "inline", props("ds_${user_id % 2}")) in cur.fetchall()
            cur.execute("SHOW SHARDING KEY GENERATORS")
            assert cur.fetchall() == (("t_new_snowflake", "snowflake", ""),)
            cur.execute("CREATE TABLE t_new (order_id BIGINT NOT NULL, user_id INT NOT NULL, v VARCHAR(10))")
            cur.execute("INSERT INTO t_new (order_id, user_id, v) VALUES (2, 1, 'a'), (3, 2, 'b')")
            cur.execute("INSERT INTO t_new (user_id, v) VALUES (4, 'gen')")  # the snowflake key
    finally:
        other.close()
    assert {"t_new_0", "t_new_1"} <= rdl.backend_tables(0, "rdl_0")
    assert rdl.backend_rows(1, "rdl_1", "SELECT order_id, v FROM t_new_0") == [(2, "a")]
    assert rdl.backend_rows(0, "rdl_0", "SELECT order_id, v FROM t_new_1") == [(3, "b")]
    doc = yaml.safe_load(rdl.file.read_text().replace("!SHARDING", "").replace("!BROADCAST", ""))
    assert doc["rules"][0]["tables"]["t_new"]["keyGenerateStrategy"] == {"column": "order_id",
                                                                         "keyGeneratorName": "t_new_snowflake"}
    assert (rdl.conf / "database-rdl_db.yaml.bak").exists()
    assert set(load_config(rdl.conf).databases["rdl_db"].rules.sharding.tables) == {"t_keep", "t_mate", "t_new"}

    rdl.restart()
    assert "t_new" in _table_rules(rdl)
    assert sorted(rdl.run("SELECT v FROM t_new")) == [("a",), ("b",), ("gen",)]
    assert rdl.run("PREVIEW SELECT * FROM t_new WHERE user_id = 1 AND order_id = 2") == [
        ("ds_1", "SELECT * FROM t_new_0 WHERE user_id = 1 AND order_id = 2")]


def test_auto_table_create_alter_drop(rdl: Rdl) -> None:
    rdl.run(f"CREATE SHARDING TABLE RULE {T_AUTO}")
    assert rdl.run("SHOW SHARDING TABLE NODES t_auto") == [
        ("t_auto", "ds_0.t_auto_0, ds_1.t_auto_1, ds_0.t_auto_2, ds_1.t_auto_3")]
    assert ("t_auto_hash_mod", "hash_mod", '{"sharding-count":"4"}') in rdl.run("SHOW SHARDING ALGORITHMS")
    assert rdl.run("SHOW SHARDING TABLE RULES USED KEY GENERATOR t_auto_uuid") == [("auto_table", "t_auto")]
    rdl.run("ALTER SHARDING TABLE RULE t_auto (STORAGE_UNITS(ds_0,ds_1), SHARDING_COLUMN=id, "
            "TYPE(NAME='MOD', PROPERTIES('sharding-count'=2)))")
    assert rdl.run("SHOW SHARDING TABLE NODES t_auto") == [("t_auto", "ds_0.t_auto_0, ds_1.t_auto_1")]
    algorithms = rdl.run("SHOW SHARDING ALGORITHMS")
    assert ("t_auto_mod", "mod", '{"sharding-count":2}') in algorithms
    assert not [a for a in algorithms if a[0] == "t_auto_hash_mod"]  # what only the old layout used is gone
    assert rdl.run("SHOW SHARDING KEY GENERATORS") == []
    rdl.run("CREATE TABLE t_auto (id INT NOT NULL, v INT)")
    assert "t_auto_1" in rdl.backend_tables(1, "rdl_1")
    rdl.run("INSERT INTO t_auto (id, v) VALUES (1, 10), (2, 20)")
    assert rdl.backend_rows(1, "rdl_1", "SELECT id FROM t_auto_1") == [(1,)]

    rdl.run("DROP SHARDING TABLE RULE t_auto")
    assert set(_table_rules(rdl)) == {"t_keep", "t_mate"}
    assert [a[0] for a in rdl.run("SHOW SHARDING ALGORITHMS")] == ["keep_inline"]
    rdl.restart()
    assert set(_table_rules(rdl)) == {"t_keep", "t_mate"}


def test_a_prepared_statement_routes_by_the_rules_altered_after_its_prepare(rdl: Rdl) -> None:
    """The fast path keeps a prepared statement's point plan with it; a rule changed by DistSQL
    (a new kernel) is what its next execute routes by."""
    rdl.run("CREATE SHARDING TABLE RULE t_moved (STORAGE_UNITS(ds_0,ds_1), SHARDING_COLUMN=id, "
            "TYPE(NAME='MOD', PROPERTIES('sharding-count'=2)))")
    rdl.run("CREATE TABLE t_moved (id INT NOT NULL, v INT)")
    rdl.run("INSERT INTO t_moved (id, v) VALUES (1, 10)")  # MOD: t_moved_1 on ds_1
    with rdl.servers[0].connect("rdl_0") as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t_moved_0 (id, v) VALUES (1, 100)")  # where the next rule looks for id 1
    client = RawClient(rdl.proxy.host, rdl.proxy.port)
    try:
        client.login(database="rdl_db", user="root", password="root")
        ok = prepare(client, "SELECT v FROM t_moved WHERE id = ?")
        for bound in (True, False, False):
            assert execute(client, ok.statement_id, (1,), (LONG,), bound) == [(10,)]
        rdl.run("ALTER SHARDING TABLE RULE t_moved (STORAGE_UNITS(ds_0,ds_1), SHARDING_COLUMN=id, "
                "TYPE(NAME='BOUNDARY_RANGE', PROPERTIES('sharding-ranges'='10')))")  # id 1: t_moved_0 on ds_0
        preview = rdl.run("PREVIEW SELECT v FROM t_moved WHERE id = 1")
        assert preview == [("ds_0", "SELECT v FROM t_moved_0 WHERE id = 1")]
        for bound in (False, False, True):
            assert execute(client, ok.statement_id, (1,), (LONG,), bound) == [(100,)]
    finally:
        client.close()

def test_alter_standard_table_rule(rdl: Rdl) -> None:
    rdl.run(f"CREATE SHARDING TABLE RULE {T_NEW}")
    rdl.run("ALTER SHARDING TABLE RULE t_new (DATANODES('ds_0.t_new_${0..1}'), TABLE_STRATEGY(TYPE='standard', "
            "SHARDING_COLUMN=order_id, SHARDING_ALGORITHM(TYPE(NAME='inline', "
            "PROPERTIES('algorithm-expression'='t_new_${order_id % 2}')))))")
    rule = _table_rules(rdl, "t_new")["t_new"]
    assert rule["actual_data_nodes"] == "ds_0.t_new_0, ds_0.t_new_1"
    assert rule["key_generate_column"] == ""
    names = [a[0] for a in rdl.run("SHOW SHARDING ALGORITHMS")]
    assert "t_new_database_inline" not in names and "t_new_table_inline" in names
    assert rdl.run("SHOW SHARDING KEY GENERATORS") == []


REFUSED_RDL = [
    (f"CREATE SHARDING TABLE RULE {T_NEW.replace('t_new (', 't_keep (')}", 1105, "Duplicate sharding rule names"),
    ("CREATE SHARDING TABLE RULE t_x (DATANODES('ds_9.t_x'))", 1105, "data source 'ds_9', which is not defined"),
    ("CREATE SHARDING TABLE RULE t_x (STORAGE_UNITS(ds_0), SHARDING_COLUMN=id, TYPE(NAME='nope'))", 1105,
     "unknown sharding algorithm type 'nope'"),
    ("CREATE SHARDING TABLE RULE t_x (STORAGE_UNITS(ds_0), SHARDING_COLUMN=id, TYPE(NAME='inline', "
     "PROPERTIES('algorithm-expression'='t_x')))", 1105, "not an auto-table algorithm"),
    ("CREATE SHARDING TABLE RULE t_b0 (DATANODES('ds_0.t_b0'))", 1105, "is a broadcast table"),
    ("CREATE SHARDING TABLE RULE t_x (DATANODES('ds_0.t_x'), AUDIT_STRATEGY(TYPE(NAME='DML_SHARDING_CONDITIONS'), "
     "ALLOW_HINT_DISABLE=true))", 1235, "AUDIT_STRATEGY is not supported by shardproxy"),
    ("CREATE SHARDING TABLE RULE t_x (DATANODES('ds_0.t_x'), DATABASE_STRATEGY(TYPE='standard'))", 1064,
     "needs SHARDING_ALGORITHM"),
    ("CREATE SHARDING TABLE RULE t_x (DATANODES('ds_0.t_x'", 1064, "DistSQL syntax"),
    ("ALTER SHARDING TABLE RULE t_nope (DATANODES('ds_0.t_nope'))", 1105, "`t_nope` does not exist"),
    ("DROP SHARDING TABLE RULE t_nope", 1105, "`t_nope` does not exist"),
    ("DROP SHARDING TABLE RULE t_keep", 1105, "still used by a sharding table reference"),
    ("CREATE BROADCAST TABLE RULE t_b0", 1105, "Duplicate broadcast rule names `t_b0`"),
    ("CREATE BROADCAST TABLE RULE t_keep", 1105, "is a sharded table"),
    ("DROP BROADCAST TABLE RULE t_nope", 1105, "`t_nope` does not exist"),
    ("UNREGISTER STORAGE UNIT ds_0", 1105, "still used by sharding rule t_keep"),
    ("UNREGISTER STORAGE UNIT ds_9", 1105, "`ds_9` does not exist"),
    ("REGISTER STORAGE UNIT ds_0 (URL='jdbc:mysql://127.0.0.1:1/x', USER='root')", 1105, "Duplicate storage unit"),
    ("REGISTER STORAGE UNIT ds_9 (HOST='127.0.0.1', PORT=1, DB='x', USER='root')", 1429, "cannot connect"),
    ("REGISTER STORAGE UNIT ds_9 (HOST='127.0.0.1', USER='root')", 1064, "HOST=..., PORT=..., DB=... or URL="),
]


@pytest.mark.parametrize(("sql", "errno", "message"), REFUSED_RDL, ids=[r[0][:60] for r in REFUSED_RDL])
def test_refused_changes_change_nothing(rdl_unchanged: Rdl, sql: str, errno: int, message: str) -> None:
    rdl = rdl_unchanged
    before = rdl.file.read_bytes()
    rules_before = _table_rules(rdl)
    got = refusal(rdl.proxy, sql, "rdl_db")
    assert got[0] == errno and message in got[2], got
    assert rdl.file.read_bytes() == before and not (rdl.conf / "database-rdl_db.yaml.bak").exists()
    assert _table_rules(rdl) == rules_before
    assert [r[0] for r in rdl.run("SHOW STORAGE UNITS")] == ["ds_0", "ds_1"]


def test_if_exists_and_if_not_exists_and_admin_only(rdl_unchanged: Rdl) -> None:
    rdl = rdl_unchanged
    before = rdl.file.read_bytes()
    for sql in (f"CREATE SHARDING TABLE RULE IF NOT EXISTS {T_NEW.replace('t_new (', 't_keep (')}",
                "DROP SHARDING TABLE RULE IF EXISTS t_nope", "CREATE BROADCAST TABLE RULE IF NOT EXISTS t_b0",
                "DROP BROADCAST TABLE RULE IF EXISTS t_nope", "UNREGISTER STORAGE UNIT IF EXISTS ds_9"):
        assert rdl.run(sql) == []
    assert rdl.file.read_bytes() == before  # nothing to do: nothing written
    errno, _, message = refusal(rdl.proxy, "CREATE BROADCAST TABLE RULE t_z", "rdl_db", "app", "app")
    assert errno == 1227 and "admin: true" in message
    assert rdl.run("SHOW BROADCAST TABLE RULES") == [("t_b0",)]


def test_broadcast_table_rules(rdl: Rdl) -> None:
    other = rdl.connect()
    try:
        rdl.run("CREATE BROADCAST TABLE RULE t_dict2, t_dict3")
        with other.cursor() as cur:
            cur.execute("SHOW BROADCAST TABLE RULES")
            assert cur.fetchall() == (("t_b0",), ("t_dict2",), ("t_dict3",))
            cur.execute("CREATE TABLE t_dict2 (id INT PRIMARY KEY, name VARCHAR(10))")
            cur.execute("INSERT INTO t_dict2 VALUES (1, 'one')")
    finally:
        other.close()
    for i, physical in ((0, "rdl_0"), (1, "rdl_1")):
        assert rdl.backend_rows(i, physical, "SELECT * FROM t_dict2") == [(1, "one")]
    rdl.run("DROP BROADCAST TABLE RULE t_dict3, t_b0")
    assert rdl.run("SHOW BROADCAST TABLE RULES") == [("t_dict2",)]
    rdl.restart()
    assert rdl.run("SHOW BROADCAST TABLE RULES") == [("t_dict2",)]
    assert rdl.run("COUNT BROADCAST RULE") == [("broadcast_table", "rdl_db", "1")]
    rdl.run("DROP BROADCAST TABLE RULE t_dict2")
    assert rdl.run("SHOW BROADCAST TABLE RULES") == [] and "!BROADCAST" not in rdl.file.read_text()


def test_register_and_unregister_storage_units(rdl: Rdl) -> None:
    s1 = rdl.servers[1]
    rdl.run(f"REGISTER STORAGE UNIT ds_2 (HOST='{s1.host}', PORT={s1.port}, DB='rdl_2', USER='{s1.user}', "
            f"PASSWORD='{s1.password}', PROPERTIES('maxPoolSize'='5', 'minPoolSize'=1))")
    units = {r[0]: r for r in rdl.run("SHOW STORAGE UNITS")}
    assert set(units) == {"ds_0", "ds_1", "ds_2"} and units["ds_2"][4] == "rdl_2" and units["ds_2"][8] == "5"
    rdl.run("CREATE SHARDING TABLE RULE t_on2 (DATANODES('ds_2.t_on2'))")
    rdl.run("CREATE TABLE t_on2 (id INT)")
    rdl.run("INSERT INTO t_on2 VALUES (7)")
    assert rdl.backend_rows(1, "rdl_2", "SELECT id FROM t_on2") == [(7,)]
    assert rdl.run("SHOW RULES USED STORAGE UNIT ds_2") == [("sharding", "t_on2")]
    errno, _, message = refusal(rdl.proxy, "UNREGISTER STORAGE UNIT ds_2", "rdl_db")
    assert errno == 1105 and "still used by sharding rule t_on2" in message
    rdl.run("DROP SHARDING TABLE RULE t_on2")
    errno, _, message = refusal(rdl.proxy, "UNREGISTER STORAGE UNIT ds_2", "rdl_db")
    assert "single tables (t_on2)" in message and "IGNORE SINGLE TABLES" in message
    assert "IGNORE BROADCAST TABLES" in refusal(rdl.proxy, "UNREGISTER STORAGE UNIT ds_2 IGNORE SINGLE TABLES",
                                                "rdl_db")[2]
    rdl.run(f"REGISTER STORAGE UNIT ds_3 (URL='jdbc:mysql://{s1.host}:{s1.port}/rdl_2?useSSL=false', "
            f"USER='{s1.user}', PASSWORD='{s1.password}')")
    rdl.restart()
    assert [r[0] for r in rdl.run("SHOW STORAGE UNITS")] == ["ds_0", "ds_1", "ds_2", "ds_3"]
    rdl.run("UNREGISTER STORAGE UNIT ds_2, ds_3 IGNORE SINGLE, BROADCAST TABLES")
    assert [r[0] for r in rdl.run("SHOW STORAGE UNITS")] == ["ds_0", "ds_1"]
    assert rdl.proxy.call(lambda: sorted(n for _, n in rdl.proxy.server.sources)) == ["ds_0", "ds_1", "ds_p"]
    rdl.restart()
    assert [r[0] for r in rdl.run("SHOW STORAGE UNITS")] == ["ds_0", "ds_1"]


def test_a_pass_through_database_becomes_sharded_only_when_no_transaction_is_open(rdl: Rdl) -> None:
    s1 = rdl.servers[1]
    register = (f"REGISTER STORAGE UNIT ds_q (HOST='{s1.host}', PORT={s1.port}, DB='rdl_2', USER='{s1.user}', "
                f"PASSWORD='{s1.password}')")
    rdl.servers[0].execute("CREATE TABLE t_p (id INT)", "rdl_pass")
    busy = rdl.connect("rdl_pass", autocommit=False)
    try:
        with busy.cursor() as cur:
            cur.execute("SELECT * FROM t_p")
        errno, _, message = refusal(rdl.proxy, register, "rdl_pass")
        assert errno == 1105 and "open transaction" in message
        busy.rollback()
        busy.autocommit(True)
        rdl.run(register, "rdl_pass")
        assert rdl.proxy.call(lambda: rdl.proxy.server.database("rdl_pass").kernel is not None)
        with busy.cursor() as cur:  # the same session, now on a sharded database: t_p is a single table on ds_p
            cur.execute("INSERT INTO t_p VALUES (1)")
            cur.execute("SELECT * FROM t_p")
            assert cur.fetchall() == ((1,),)
        assert rdl.run("SHOW SINGLE TABLES", "rdl_pass") == [("t_p", "ds_p")]
        rdl.run("UNREGISTER STORAGE UNIT ds_q", "rdl_pass")
        assert rdl.proxy.call(lambda: rdl.proxy.server.database("rdl_pass").kernel is None)
        with busy.cursor() as cur:
            cur.execute("SELECT * FROM t_p")
            assert cur.fetchall() == ((1,),)
    finally:
        busy.close()


def test_a_statement_in_flight_finishes_on_the_rules_it_started_with(rdl: Rdl) -> None:
    import threading

    rdl.run(f"CREATE SHARDING TABLE RULE {T_NEW}")
    rdl.run("CREATE TABLE t_new (order_id BIGINT NOT NULL, user_id INT NOT NULL, v VARCHAR(10))")
    rdl.run("INSERT INTO t_new (order_id, user_id, v) VALUES (1, 1, 'a'), (2, 2, 'b')")
    result: list[Any] = []

    def slow() -> None:
        try:
            result.extend(rdl.run("SELECT v, SLEEP(1) FROM t_new ORDER BY v"))
        except Exception as exc:  # reported below
            result.append(exc)

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    rdl.run("DROP SHARDING TABLE RULE t_new")  # does not wait for the statement
    assert time.monotonic() - started < 0.7
    thread.join(10)
    assert result == [("a", 0), ("b", 0)]
    assert "t_new" not in _table_rules(rdl)


def test_prepared_distsql(dist: Dist) -> None:
    """DistSQL sent as a prepared statement (mysql-connector's prepared cursor) is answered the same."""
    conn = connector(dist.proxy, "dist_db")
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("SHOW SHARDING KEY GENERATORS")
        assert [tuple(r) for r in cur.fetchall()] == [("snow", "SNOWFLAKE", ""), ("uu", "UUID", ""),
                                                      ("spare_snow", "SNOWFLAKE", '{"worker-id":7}')]
        cur.execute("SHOW DIST VARIABLE WHERE NAME = sql_show")
        assert [tuple(r) for r in cur.fetchall()] == [("sql_show", "false")]
        with pytest.raises(mysql.connector.Error) as refused:
            cur.execute("SHOW KEY GENERATE ALGORITHM PLUGINS")
            cur.fetchall()
        assert refused.value.errno == 1235
        assert "SHOW KEY GENERATE ALGORITHM PLUGINS is not supported by shardproxy" in refused.value.msg
    finally:
        conn.close()
