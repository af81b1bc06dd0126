"""Issue 3, end to end: the sharding proxy in front of two real MariaDB servers.

Every statement goes through the proxy; what it did is read back directly from the backends' actual tables
(`ShardedEnv.backend`), so a test proves where rows really are, not what the proxy says about them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from proxy.config import load_config
from proxy.demo import load_schema, write_demo_conf
from tests.conftest import ServerFactory
from tests.integration.harness import start_proxy
from tests.integration.sharding_fixtures import (
    ACTUAL_TABLES,
    DATA_SOURCES,
    EXTRA_TABLES,
    REPO,
    ShardedEnv,
    order_node,
)

Row = tuple[Any, ...]


def by_value(row: Row) -> tuple[tuple[bool, Any], ...]:
    """Sort key for rows that may hold NULLs."""
    return tuple((v is not None, v) for v in row)


def all_rows(env: ShardedEnv, logic: str, db: str = "sharding_db", columns: str = "*") -> list[Row]:
    return sorted((r for rows in env.actual_rows(logic, db, columns).values() for r in rows), key=by_value)


def insert_orders(env: ShardedEnv, rows: list[tuple[int, int, str | None]]) -> None:
    """(order_id, user_id, status) through the proxy."""
    values = ", ".join(f"({o}, {u}, {'NULL' if s is None else repr(s)})" for o, u, s in rows)
    env.run(f"INSERT INTO t_order (order_id, user_id, status) VALUES {values}")


def mariadb_cli(env: ShardedEnv, *args: str, db: str = "sharding_db") -> str:
    """The mariadb command-line client against the proxy; its stdout."""
    cli = shutil.which("mariadb") or shutil.which("mysql")
    assert cli is not None, "the mariadb client is not installed"
    return subprocess.run(
        [cli, "--protocol=TCP", "-h", env.proxy.host, "-P", str(env.proxy.port), "-uroot", "-proot", db, *args],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout


# --- DDL -------------------------------------------------------------------------------------------------------


def test_create_table_made_every_actual_table_and_nothing_else(sharded_env: ShardedEnv) -> None:
    """The session fixture created the schemas with plain CREATE TABLE through the proxy."""
    env = sharded_env
    for ds in DATA_SOURCES:
        assert env.tables_on(ds) == {"t_order_0", "t_order_1", "t_order_item_0", "t_order_item_1", "t_address"}
        expected = {t for logic in EXTRA_TABLES for t in ACTUAL_TABLES[logic][ds]}
        assert env.tables_on(ds, "extra_db") == expected, ds


def _columns(env: ShardedEnv, ds: str, table: str, db: str) -> tuple[str, ...]:
    sql = ("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
           f"AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION")
    return tuple(r[0] for r in env.backend(ds, sql, db))


def _has_index(env: ShardedEnv, ds: str, table: str, db: str) -> bool:
    return any(r[2] == "idx_user" for r in env.backend(ds, f"SHOW INDEX FROM {table}", db))


def _row_count(env: ShardedEnv, ds: str, table: str, db: str) -> int:
    return int(env.backend(ds, f"SELECT COUNT(*) FROM {table}", db)[0][0])


def _exists(env: ShardedEnv, ds: str, table: str, db: str) -> bool:
    return table in env.tables_on(ds, db)


ORDER_COLUMNS = ("order_id", "user_id", "status")
ADD_NOTE = "ALTER TABLE t_order ADD COLUMN note VARCHAR(20) NULL"
ADD_INDEX = "ALTER TABLE t_order ADD INDEX idx_user (user_id)"
SEED_ORDERS = ("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a'), (2, 1, 'b'), (3, 2, 'c'), "
               "(4, 2, 'd')")
CREATE_ITEM = ("CREATE TABLE t_order_item (order_item_id BIGINT NOT NULL, order_id BIGINT NOT NULL, "
               "user_id INT NOT NULL, status VARCHAR(45) NULL, PRIMARY KEY (order_item_id))")

Probe = Callable[[ShardedEnv, str, str, str], Any]
DDL_CASES: list[Any] = [
    # (statements through the proxy, logical db, logic table, probe, value every actual table must show)
    pytest.param([ADD_NOTE], "sharding_db", "t_order", _columns, (*ORDER_COLUMNS, "note"), id="ALTER ADD COLUMN"),
    pytest.param([ADD_NOTE, "ALTER TABLE t_order DROP COLUMN note"], "sharding_db", "t_order", _columns,
                 ORDER_COLUMNS, id="ALTER DROP COLUMN"),
    pytest.param(["CREATE INDEX idx_user ON t_order (user_id)"], "sharding_db", "t_order", _has_index, True,
                 id="CREATE INDEX"),
    pytest.param([ADD_INDEX], "sharding_db", "t_order", _has_index, True, id="ALTER ADD INDEX"),
    pytest.param([ADD_INDEX, "ALTER TABLE t_order DROP INDEX idx_user"], "sharding_db", "t_order", _has_index,
                 False, id="ALTER DROP INDEX"),
    pytest.param([ADD_INDEX, "DROP INDEX idx_user ON t_order"], "sharding_db", "t_order", _has_index, False,
                 id="DROP INDEX ON"),
    pytest.param([SEED_ORDERS, "TRUNCATE TABLE t_order"], "sharding_db", "t_order", _row_count, 0, id="TRUNCATE"),
    pytest.param(["DROP TABLE t_order_item"], "sharding_db", "t_order_item", _exists, False, id="DROP TABLE"),
    pytest.param(["DROP TABLE t_order_item", CREATE_ITEM], "sharding_db", "t_order_item", _exists, True,
                 id="DROP then CREATE"),
    pytest.param(["ALTER TABLE t_address ADD COLUMN zip VARCHAR(10) NULL"], "sharding_db", "t_address", _columns,
                 ("address_id", "address_name", "zip"), id="broadcast ALTER"),
    pytest.param(["ALTER TABLE t_log ADD COLUMN zip VARCHAR(10) NULL"], "extra_db", "t_log", _columns,
                 ("id", "msg", "zip"), id="auto table ALTER"),
]


@pytest.fixture
def ddl_restore(sharded_env: ShardedEnv) -> Iterator[ShardedEnv]:
    """Put the schema back after a DDL case (directly on the backends, then one DDL through the proxy so that
    its metadata is reloaded)."""
    env = sharded_env
    env.clean("t_order", "t_order_item", "t_address")
    yield env
    for ds in DATA_SOURCES:
        for t in ("t_order_0", "t_order_1"):
            env.backend(ds, f"ALTER TABLE {t} DROP COLUMN IF EXISTS note, DROP INDEX IF EXISTS idx_user")
        env.backend(ds, "ALTER TABLE t_address DROP COLUMN IF EXISTS zip")
        for t in ACTUAL_TABLES["t_log"][ds]:
            env.backend(ds, f"ALTER TABLE {t} DROP COLUMN IF EXISTS zip", "extra_db")
    env.run(CREATE_ITEM.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    env.run("CREATE TABLE IF NOT EXISTS t_log (id INT NOT NULL, msg VARCHAR(10))", "extra_db")
    for ds in DATA_SOURCES:
        assert {"t_order_item_0", "t_order_item_1"} <= env.tables_on(ds)


@pytest.mark.parametrize(("statements", "db", "logic", "probe", "expected"), DDL_CASES)
def test_ddl_reaches_every_actual_table(
    ddl_restore: ShardedEnv, statements: list[str], db: str, logic: str, probe: Probe, expected: Any
) -> None:
    env = ddl_restore
    for sql in statements:
        env.run(sql, db)
    seen = {f"{ds}.{t}": probe(env, ds, t, db) for ds, tables in ACTUAL_TABLES[logic].items() for t in tables}
    assert seen == dict.fromkeys(seen, expected)
    assert len(seen) == sum(len(t) for t in ACTUAL_TABLES[logic].values()) >= 2


# --- INSERT: every row in exactly the table its rule demands ----------------------------------------------------

INSERT_CASES: list[tuple[str, list[str], dict[int, tuple[int, str]]]] = [
    (
        "multi-row with column list",
        ["INSERT INTO t_order (order_id, user_id, status) VALUES (10, 1, 'a'), (11, 1, 'b'), (12, 2, 'c'), "
         "(13, 2, 'd'), (14, 3, 'e')"],
        {10: (1, "a"), 11: (1, "b"), 12: (2, "c"), 13: (2, "d"), 14: (3, "e")},
    ),
    (
        "single row, columns in another order",
        ["INSERT INTO t_order (status, user_id, order_id) VALUES ('x', 4, 7)"],
        {7: (4, "x")},
    ),
    (
        "without a column list (columns from the metadata)",
        ["INSERT INTO t_order VALUES (21, 5, 'n'), (22, 6, 'm')"],
        {21: (5, "n"), 22: (6, "m")},
    ),
    (
        "INSERT ... SET",
        ["INSERT INTO t_order SET order_id = 31, user_id = 2, status = 's'"],
        {31: (2, "s")},
    ),
    (
        "schema-qualified and back-quoted",
        ["INSERT INTO `sharding_db`.`t_order` (`order_id`, `user_id`, `status`) VALUES (41, 1, 'q'), (42, 2, 'q')"],
        {41: (1, "q"), 42: (2, "q")},
    ),
    (
        "ON DUPLICATE KEY UPDATE",
        ["INSERT INTO t_order (order_id, user_id, status) VALUES (51, 3, 'new'), (52, 4, 'new')",
         "INSERT INTO t_order (order_id, user_id, status) VALUES (51, 3, 'x'), (52, 4, 'x'), (53, 5, 'fresh') "
         "ON DUPLICATE KEY UPDATE status = 'dup'"],
        {51: (3, "dup"), 52: (4, "dup"), 53: (5, "fresh")},
    ),
    (
        "REPLACE",
        ["INSERT INTO t_order (order_id, user_id, status) VALUES (61, 7, 'old')",
         "REPLACE INTO t_order (order_id, user_id, status) VALUES (61, 7, 'replaced'), (62, 8, 'r')"],
        {61: (7, "replaced"), 62: (8, "r")},
    ),
]


@pytest.mark.parametrize(("statements", "expected"), [c[1:] for c in INSERT_CASES], ids=[c[0] for c in INSERT_CASES])
def test_insert_puts_each_row_in_exactly_its_node(
    sharded_env: ShardedEnv, statements: list[str], expected: dict[int, tuple[int, str]]
) -> None:
    env = sharded_env
    env.clean("t_order")
    for sql in statements:
        env.run(sql)
    for order_id, (user_id, status) in expected.items():
        ds, table = order_node(user_id, order_id)
        assert env.where_is("t_order", "order_id", order_id) == [(ds, table)], order_id
        assert env.backend(ds, f"SELECT user_id, status FROM {table} WHERE order_id = {order_id}") == [
            (user_id, status)
        ]
    assert len(all_rows(env, "t_order")) == len(expected)  # nothing stray anywhere


def test_insert_affected_rows_are_summed_over_nodes(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    env.clean("t_order")
    assert env.run("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, 'c'), "
                   "(4, 4, 'd'), (5, 5, 'e')")[0] == 5
    # MySQL counts an upsert that updates as 2 rows: one row per node updated, one inserted -> 2 + 2 + 1
    assert env.run("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'x'), (2, 2, 'x'), (9, 9, 'n') "
                   "ON DUPLICATE KEY UPDATE status = 'u'")[0] == 5


def test_ok_info_of_multi_node_writes_is_summed(sharded_env: ShardedEnv) -> None:
    """The info text of the OK packet (what `mysql` prints under 'Query OK') covers the whole statement."""
    env = sharded_env
    env.clean("t_order")
    out = mariadb_cli(env, "-vvv", "-e", "INSERT INTO t_order (order_id, user_id, status) VALUES "
                      + ", ".join(f"({o}, {u}, 'seed')" for o, u in GRID))  # two rows per actual table
    assert "8 rows affected" in out and "Records: 8  Duplicates: 0  Warnings: 0" in out, out
    out = mariadb_cli(env, "-vvv", "-e", "UPDATE t_order SET status = 'i' WHERE user_id = 1 OR order_id = 100")
    assert "5 rows affected" in out and "Rows matched: 5  Changed: 5  Warnings: 0" in out, out
    out = mariadb_cli(env, "-vvv", "-e", "UPDATE t_order SET status = 'i'")
    assert "3 rows affected" in out and "Rows matched: 8  Changed: 3  Warnings: 0" in out, out


def test_insert_without_key_generates_snowflake_ids(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    env.clean("t_order")
    affected, last_id, _ = env.run("INSERT INTO t_order (user_id, status) VALUES (1, 'k1'), (2, 'k2'), (3, 'k3'), "
                                   "(4, 'k4')")
    assert affected == 4
    rows = {status: (order_id, user_id) for order_id, user_id, status in all_rows(env, "t_order")}
    assert sorted(rows) == ["k1", "k2", "k3", "k4"]
    ids = [rows[s][0] for s in ("k1", "k2", "k3", "k4")]
    assert len(set(ids)) == 4 and all(i > 1 << 32 for i in ids)  # snowflake ids: timestamp in the high bits
    assert last_id == rows["k1"][0]  # last_insert_id of the OK packet = the first row's generated key
    for order_id, user_id in rows.values():
        assert env.where_is("t_order", "order_id", order_id) == [order_node(user_id, order_id)]

    affected, last_id, _ = env.run("INSERT INTO t_order SET user_id = 6, status = 'kset'")
    assert affected == 1 and last_id is not None
    assert env.where_is("t_order", "order_id", last_id) == [order_node(6, last_id)]


def test_insert_generates_a_key_that_is_not_a_sharding_column(sharded_env: ShardedEnv) -> None:
    """t_order_item's key column is order_item_id; the row is placed by order_id / user_id as given."""
    env = sharded_env
    env.clean("t_order_item")
    _, last_id, _ = env.run("INSERT INTO t_order_item (order_id, user_id, status) VALUES (7, 2, 'i1'), (8, 3, 'i2')")
    rows = {status: (item_id, order_id, user_id) for item_id, order_id, user_id, status in all_rows(env,
                                                                                                    "t_order_item")}
    assert last_id == rows["i1"][0] and rows["i1"][0] != rows["i2"][0]
    for item_id, order_id, user_id in rows.values():
        assert env.where_is("t_order_item", "order_item_id", item_id) == [
            order_node(user_id, order_id, "t_order_item")
        ]


# --- UPDATE / DELETE ---------------------------------------------------------------------------------------------

# two rows in each of the four actual tables: (order_id, user_id)
GRID = [(100, 2), (101, 2), (102, 1), (103, 1), (104, 2), (105, 2), (106, 1), (107, 1)]

WRITE_CASES: list[tuple[str, str, int, set[int], int]] = [
    # (id, statement, affected, order_ids changed, route units)
    ("both keys: one table", "UPDATE t_order SET status = 'w' WHERE user_id = 1 AND order_id = 102", 1, {102}, 1),
    ("both keys, no match: one table", "UPDATE t_order SET status = 'w' WHERE user_id = 1 AND order_id = 104", 0,
     set(), 1),
    ("table key only: that table on both", "UPDATE t_order SET status = 'w' WHERE order_id = 104", 1, {104}, 2),
    ("database key only: both tables of one", "UPDATE t_order SET status = 'w' WHERE user_id = 2", 4,
     {100, 101, 104, 105}, 2),
    ("IN on both keys", "UPDATE t_order SET status = 'w' WHERE user_id = 1 AND order_id IN (103, 107)", 2,
     {103, 107}, 1),
    ("no key: all tables", "UPDATE t_order SET status = 'w' WHERE status = 'seed'", 8, {o for o, _ in GRID}, 4),
    ("no WHERE: all tables", "UPDATE t_order SET status = 'w'", 8, {o for o, _ in GRID}, 4),
    ("delete, both keys", "DELETE FROM t_order WHERE user_id = 2 AND order_id = 101", 1, {101}, 1),
    ("delete, table key", "DELETE FROM t_order WHERE order_id IN (100, 102)", 2, {100, 102}, 2),
    ("delete, no key", "DELETE FROM t_order WHERE MOD(order_id, 4) = 0", 2, {100, 104}, 4),
    ("delete all", "DELETE FROM t_order", 8, {o for o, _ in GRID}, 4),
]


@pytest.mark.parametrize(("sql", "affected", "changed", "units"), [c[1:] for c in WRITE_CASES],
                         ids=[c[0] for c in WRITE_CASES])
def test_update_delete_touch_only_routed_tables(
    sharded_env: ShardedEnv, sql: str, affected: int, changed: set[int], units: int
) -> None:
    env = sharded_env
    env.clean("t_order")
    insert_orders(env, [(o, u, "seed") for o, u in GRID])
    before = env.actual_rows("t_order")
    assert len(env.preview(sql)) == units
    assert env.run(sql)[0] == affected
    after = env.actual_rows("t_order")
    for node, rows in before.items():
        untouched = [r for r in rows if r[0] not in changed]
        assert [r for r in after[node] if r[0] not in changed] == untouched, node
        for r in after[node]:
            if r[0] in changed:
                assert r[2] == "w", (node, r)  # updated in place, never moved
    deleted = {r[0] for rows in before.values() for r in rows} - {r[0] for rows in after.values() for r in rows}
    assert deleted in (set(), changed)


# --- SELECT ------------------------------------------------------------------------------------------------------

ORDERS = [(o, u, s) for o, u, s in [(1, 1, "a"), (2, 1, "b"), (3, 2, "c"), (4, 2, "d"), (5, 3, "e"), (6, 4, "f"),
                                     (7, 5, None), (8, 6, "h")]]
ITEMS = [(10 + o, o, u, s) for o, u, s in ORDERS] + [(20 + o, o, u, "extra") for o, u, _ in ORDERS if o % 3 == 0]


@pytest.fixture
def orders(sharded_env: ShardedEnv) -> ShardedEnv:
    env = sharded_env
    env.clean("t_order", "t_order_item")
    insert_orders(env, ORDERS)
    values = ", ".join(f"({i}, {o}, {u}, '{s}')" for i, o, u, s in ITEMS)
    env.run(f"INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES {values}")
    return env


def _orders(pred: Callable[[int, int], bool]) -> list[Row]:
    return sorted((o, u, s) for o, u, s in ORDERS if pred(o, u))


SELECT_CASES: list[tuple[str, str, Callable[[int, int], bool], list[tuple[str, str]]]] = [
    ("point", "SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3", lambda o, u: o == 3,
     [("ds_0", "t_order_1")]),
    ("point on table key", "SELECT * FROM t_order WHERE order_id = 4", lambda o, u: o == 4,
     [("ds_0", "t_order_0"), ("ds_1", "t_order_0")]),
    ("database key", "SELECT * FROM t_order WHERE user_id = 1", lambda o, u: u == 1,
     [("ds_1", "t_order_0"), ("ds_1", "t_order_1")]),
    ("IN", "SELECT * FROM t_order WHERE user_id = 1 AND order_id IN (1, 3)", lambda o, u: u == 1 and o in (1, 3),
     [("ds_1", "t_order_1")]),
    ("IN on both", "SELECT * FROM t_order WHERE user_id IN (1, 3) AND order_id IN (1, 5, 9)",
     lambda o, u: u in (1, 3) and o in (1, 5, 9), [("ds_1", "t_order_1")]),
    ("OR of points", "SELECT * FROM t_order WHERE (user_id = 2 AND order_id = 4) OR (user_id = 1 AND order_id = 1)",
     lambda o, u: o in (1, 4), [("ds_0", "t_order_0"), ("ds_1", "t_order_1")]),
    ("full route", "SELECT * FROM t_order", lambda o, u: True,
     [("ds_0", "t_order_0"), ("ds_0", "t_order_1"), ("ds_1", "t_order_0"), ("ds_1", "t_order_1")]),
    ("full route with a non-key filter", "SELECT * FROM t_order WHERE status IN ('a', 'h')",
     lambda o, u: o in (1, 8),
     [("ds_0", "t_order_0"), ("ds_0", "t_order_1"), ("ds_1", "t_order_0"), ("ds_1", "t_order_1")]),
]


@pytest.mark.parametrize(("sql", "pred", "nodes"), [c[1:] for c in SELECT_CASES], ids=[c[0] for c in SELECT_CASES])
def test_select_routes_and_reads(
    orders: ShardedEnv, sql: str, pred: Callable[[int, int], bool], nodes: list[tuple[str, str]]
) -> None:
    env = orders
    preview = env.preview(sql)
    assert sorted((ds, next(t for t in ("t_order_0", "t_order_1") if t in actual)) for ds, actual in preview) == nodes
    assert sorted(env.run(sql)[2]) == _orders(pred)


def test_between_on_mod_and_range_tolerant_inline(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    env.clean("t_log", "t_range", db="extra_db")
    env.run("INSERT INTO t_log (id, msg) VALUES " + ", ".join(f"({i}, 'm{i}')" for i in range(12)), "extra_db")
    for i in range(12):  # MOD 4 over ds_0, ds_1 alternating: t_log_k on ds_{k % 2}
        assert env.where_is("t_log", "id", i, "extra_db") == [(f"ds_{i % 4 % 2}", f"t_log_{i % 4}")]
    sql = "SELECT id FROM t_log WHERE id BETWEEN 2 AND 4 ORDER BY id"
    assert sorted(a.split(" FROM ")[1].split()[0] for _, a in env.preview(sql, "extra_db")) == [
        "t_log_0", "t_log_2", "t_log_3"]
    assert env.run(sql, "extra_db")[2] == [(2,), (3,), (4,)]

    env.run("INSERT INTO t_range (id) VALUES (1), (2), (3), (4), (5)", "extra_db")
    assert env.where_is("t_range", "id", 3, "extra_db") == [("ds_1", "t_range")]
    sql = "SELECT id FROM t_range WHERE id BETWEEN 2 AND 4 ORDER BY id"
    assert len(env.preview(sql, "extra_db")) == 2  # allow-range-query-with-inline-sharding: every data source
    assert env.run(sql, "extra_db")[2] == [(2,), (3,), (4,)]


def test_consistent_hash_and_single_tables(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    env.clean("t_ring", "t_single", db="extra_db")
    codes = ["U0000000001", "U0000000002", "abc", "order-42", "zz"]
    env.run("INSERT INTO t_ring (code, n) VALUES " + ", ".join(f"('{c}', {k})" for k, c in enumerate(codes)),
            "extra_db")
    for k, code in enumerate(codes):
        (node,) = env.where_is("t_ring", "code", code, "extra_db")  # exactly one copy
        preview = env.preview(f"SELECT n FROM t_ring WHERE code = '{code}'", "extra_db")
        assert [(ds, actual.split()[3]) for ds, actual in preview] == [node]  # reads go where the write went
        assert env.run(f"SELECT n FROM t_ring WHERE code = '{code}'", "extra_db")[2] == [(k,)]

    env.run("INSERT INTO t_single (id, v) VALUES (1, 'one'), (2, 'two')", "extra_db")
    assert env.backend("ds_0", "SELECT id, v FROM t_single ORDER BY id", "extra_db") == [(1, "one"), (2, "two")]
    assert "t_single" not in env.tables_on("ds_1", "extra_db")
    assert [ds for ds, _ in env.preview("SELECT * FROM t_single", "extra_db")] == ["ds_0"]


# --- binding tables and broadcast tables --------------------------------------------------------------------------

def test_binding_join_routes_one_to_one(orders: ShardedEnv) -> None:
    env = orders
    sql = ("SELECT o.order_id, i.order_item_id FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
           "WHERE o.user_id = 2 AND o.order_id = 3")
    assert env.preview(sql) == [("ds_0", sql.replace("t_order o", "t_order_1 o").replace("t_order_item i",
                                                                                       "t_order_item_1 i"))]
    assert sorted(env.run(sql)[2]) == [(3, 13), (3, 23)]

    full = "SELECT o.order_id, i.order_item_id FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id"
    units = env.preview(full)
    assert len(units) == 4  # 2 data sources x 2 table pairs, never the 2 x 2 x 2 cartesian product
    pairs = set()
    for ds, actual in units:
        k = "0" if "t_order_0 o" in actual else "1"
        assert f"t_order_{k} o" in actual and f"t_order_item_{k} i" in actual, actual
        assert f"t_order_item_{1 - int(k)}" not in actual and f"t_order_{1 - int(k)} " not in actual, actual
        pairs.add((ds, k))
    assert pairs == {(ds, k) for ds in DATA_SOURCES for k in "01"}
    expected = sorted((o, i) for i, o, _, _ in ITEMS)
    assert sorted(env.run(full)[2]) == expected


def test_broadcast_table_reads_one_node_and_writes_all(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    env.clean("t_address", "t_order")
    assert len(env.preview("INSERT INTO t_address (address_id, address_name) VALUES (1, 'Beijing')")) == 2
    assert env.run("INSERT INTO t_address (address_id, address_name) VALUES (1, 'Beijing'), (2, 'Shanghai')")[0] == 2
    for ds in DATA_SOURCES:
        assert env.backend(ds, "SELECT * FROM t_address ORDER BY address_id") == [(1, "Beijing"), (2, "Shanghai")]
    # affected rows count the logical rows once, not once per copy (ShardingSphere does not accumulate them)
    assert env.run("UPDATE t_address SET address_name = 'Hangzhou' WHERE address_id = 2")[0] == 1
    assert env.run("DELETE FROM t_address WHERE address_id = 1")[0] == 1
    for ds in DATA_SOURCES:
        assert env.backend(ds, "SELECT * FROM t_address") == [(2, "Hangzhou")]

    reads = env.preview("SELECT * FROM t_address WHERE address_id = 2")
    assert len(reads) == 1 and reads[0][1] == "SELECT * FROM t_address WHERE address_id = 2"
    assert env.run("SELECT * FROM t_address")[2] == [(2, "Hangzhou")]  # once, not once per copy
    # a broadcast table joins a sharded one on every node without being multiplied
    env.run("INSERT INTO t_order (order_id, user_id, status) VALUES (2, 1, 'x')")
    env.run("DELETE FROM t_order WHERE order_id <> 2")
    assert env.run("SELECT o.order_id, a.address_name FROM t_order o JOIN t_address a ON a.address_id = o.order_id"
                   )[2] == [(2, "Hangzhou")]


# --- refusals -----------------------------------------------------------------------------------------------------

REFUSALS: list[tuple[str, str, str, int, str, tuple[str, ...]]] = [
    # (id, logical db, statement, errno, SQLSTATE, words the message must contain)
    # an UPDATE of a sharding column runs (issue 17, proxy.stepwise: rows move) unless the moved rows could
    # not be found again (the primary key assigned too) or not be named at all (no key)
    ("update sharding column (table) that is the primary key", "sharding_db",
     "UPDATE t_order SET order_id = 8 WHERE user_id = 1", 1235, "42000", ("t_order", "order_id")),
    ("update sharding column of a table without a key", "extra_db", "UPDATE t_bad SET user_id = 5 WHERE id = 1",
     1235, "42000", ("t_bad", "PRIMARY")),
    ("upsert assigns sharding column", "sharding_db",
     "INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a') ON DUPLICATE KEY UPDATE user_id = 3",
     1235, "42000", ("t_order", "user_id")),
    ("multi-row insert, one row routes nowhere", "extra_db",
     "INSERT INTO t_bad (id, user_id, v) VALUES (0, 0, 'a'), (1, 1, 'b'), (5, 0, 'c')",
     1235, "42000", ("t_bad", "id", "5")),
    # (without FOR UPDATE federation answers it, tests/integration/test_federation.py; a locking read is not
    # federated: locks on copies would lock nothing)
    ("locking join of unbound tables across data sources", "extra_db",
     "SELECT * FROM t_user u JOIN t_acct a ON u.user_id = a.user_id WHERE u.user_id = 1 AND a.acct_id = 2 "
     "FOR UPDATE", 1235, "42000", ("t_user", "t_acct")),
    ("unparsable statement naming a sharded table", "sharding_db",
     "SELECT * FROM t_order WHERE order_id = 1 FORCE ((( NONSENSE", 1235, "42000", ("t_order",)),
    ("range on an INLINE sharding column", "sharding_db", "SELECT * FROM t_order WHERE order_id BETWEEN 1 AND 3",
     1235, "42000", ("order_id", "allow-range-query-with-inline-sharding")),
    ("DATA_SOURCE_NAME hint naming no data source", "sharding_db",
     "/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_9 */ SELECT 1", 1049, "42000", ("ds_9",)),
]


@pytest.mark.parametrize(("db", "sql", "errno", "sqlstate", "words"), [c[1:] for c in REFUSALS],
                         ids=[c[0] for c in REFUSALS])
def test_refusals_are_mysql_errors_naming_the_problem(
    sharded_env: ShardedEnv, db: str, sql: str, errno: int, sqlstate: str, words: tuple[str, ...]
) -> None:
    refusal = sharded_env.refusal(sql, db)
    assert (refusal.errno, refusal.sqlstate) == (errno, sqlstate), refusal
    for word in words:
        assert word in refusal.message, (word, refusal.message)
    # the session survives a refusal
    assert sharded_env.run("SELECT 1", db)[2] == [(1,)]


def test_refused_statements_write_nothing(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    env.clean("t_bad", db="extra_db")
    env.clean("t_order")
    insert_orders(env, [(1, 1, "keep"), (2, 2, "keep")])
    env.refusal("INSERT INTO t_bad (id, user_id, v) VALUES (0, 0, 'a'), (1, 1, 'b'), (5, 0, 'c'), (0, 1, 'd')",
                "extra_db")
    assert all_rows(env, "t_bad", "extra_db") == []  # not even the rows that had a node
    env.refusal("UPDATE t_order SET order_id = 9, user_id = 3, status = 'moved' WHERE order_id = 1")
    env.refusal("INSERT INTO t_order (order_id, user_id, status) VALUES (3, 1, 'n'), (2, 2, 'n') "
                "ON DUPLICATE KEY UPDATE user_id = 5")
    assert all_rows(env, "t_order") == [(1, 1, "keep"), (2, 2, "keep")]
    # a good multi-row INSERT after the refusal lands normally
    env.run("INSERT INTO t_bad (id, user_id, v) VALUES (0, 0, 'a'), (1, 1, 'b')", "extra_db")
    assert env.where_is("t_bad", "id", 1, "extra_db") == [("ds_1", "t_bad_1")]


def test_refusal_names_the_missing_table(sharded_env: ShardedEnv) -> None:
    refusal = sharded_env.refusal("INSERT INTO t_bad (id, user_id, v) VALUES (5, 0, 'c')", "extra_db")
    assert "t_bad_5" in refusal.message, refusal.message


def test_unbound_join_without_conditions_is_correct_or_refused(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    env.clean("t_user", "t_acct", db="extra_db")
    env.run("INSERT INTO t_user (user_id, name) VALUES (1, 'ann')", "extra_db")  # ds_1
    env.run("INSERT INTO t_acct (acct_id, user_id) VALUES (2, 1)", "extra_db")  # ds_0
    sql = "SELECT u.name, a.acct_id FROM t_user u JOIN t_acct a ON u.user_id = a.user_id"
    try:
        rows = env.run(sql, "extra_db")[2]
    except pymysql.MySQLError:
        return  # a refusal is a correct answer
    assert rows == [("ann", 2)]


# --- hints --------------------------------------------------------------------------------------------------------

def test_data_source_hint_goes_to_that_data_source_untouched(orders: ShardedEnv) -> None:
    env = orders
    sql = "/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_1 */ SELECT order_id, user_id, status FROM t_order_0"
    assert env.preview(sql) == [("ds_1", sql)]
    direct = env.backend("ds_1", "SELECT order_id, user_id, status FROM t_order_0")
    assert direct and direct != env.backend("ds_0", "SELECT order_id, user_id, status FROM t_order_0")
    assert sorted(env.run(sql)[2]) == sorted(direct)  # PyMySQL sends the comment as written

    # the logic name is not rewritten either: t_order does not exist on the backend
    refusal = env.refusal("/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_0 */ SELECT * FROM t_order")
    assert refusal.errno == 1146 and "t_order" in refusal.message

    # a write with the hint goes to that data source only, into the table it names
    write = ("/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_0 */ INSERT INTO t_order_1 (order_id, user_id, status) "
             "VALUES (99, 1, 'hinted')")
    assert env.run(write)[0] == 1
    assert env.where_is("t_order", "order_id", 99) == [("ds_0", "t_order_1")]  # not where the rules would put it

    out = mariadb_cli(env, "-c", "-N", "-B", "-e", sql + " ORDER BY order_id")  # -c: keep the comment
    assert [tuple(line.split("\t")) for line in out.splitlines()] == [
        (str(o), str(u), str(s)) for o, u, s in sorted(direct)]


def test_sharding_value_hints_on_a_hint_table(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    env.clean("t_hint", db="extra_db")
    hint = "/* SHARDINGSPHERE_HINT: t_hint.SHARDING_DATABASE_VALUE=1, t_hint.SHARDING_TABLE_VALUE=2 */ "
    env.run(hint + "INSERT INTO t_hint (id, v) VALUES (1, 'one'), (2, 'two')", "extra_db")
    assert env.actual_rows("t_hint", "extra_db") == {
        ("ds_0", "t_hint_0"): [], ("ds_0", "t_hint_1"): [],
        ("ds_1", "t_hint_0"): [(1, "one"), (2, "two")], ("ds_1", "t_hint_1"): [],
    }
    other = "/* SHARDINGSPHERE_HINT: SHARDING_DATABASE_VALUE=0, SHARDING_TABLE_VALUE=1 */ "
    env.run(other + "INSERT INTO t_hint (id, v) VALUES (3, 'three')", "extra_db")
    assert env.where_is("t_hint", "id", 3, "extra_db") == [("ds_0", "t_hint_1")]

    assert env.preview(hint + "SELECT * FROM t_hint", "extra_db") == [("ds_1", hint + "SELECT * FROM t_hint_0")]
    assert sorted(env.run(hint + "SELECT * FROM t_hint", "extra_db")[2]) == [(1, "one"), (2, "two")]
    assert len(env.preview("SELECT * FROM t_hint", "extra_db")) == 4  # no hint: every node
    assert sorted(env.run("SELECT * FROM t_hint", "extra_db")[2]) == [(1, "one"), (2, "two"), (3, "three")]


# --- admin statements ---------------------------------------------------------------------------------------------

def test_preview_and_show_sharding_rules(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    names, rows = env.query("PREVIEW SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2")
    assert names == ["data_source_name", "actual_sql"]
    assert rows == [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = 1 AND order_id = 2")]
    _, rows = env.query("PREVIEW INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a'), (2, 2, 'b')")
    assert sorted(rows) == [("ds_0", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (2, 2, 'b')"),
                            ("ds_1", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (1, 1, 'a')")]

    names, rows = env.query("SHOW SHARDING TABLE RULES")
    by_table = {r[0]: dict(zip(names, r, strict=True)) for r in rows}
    assert set(by_table) == {"t_order", "t_order_item"}
    order = by_table["t_order"]
    assert order["actual_data_nodes"] == "ds_0.t_order_0, ds_0.t_order_1, ds_1.t_order_0, ds_1.t_order_1"
    assert (order["database_sharding_column"], order["table_sharding_column"]) == ("user_id", "order_id")
    assert (order["key_generate_column"], order["key_generator_type"]) == ("order_id", "SNOWFLAKE")
    assert "ds_${user_id % 2}" in order["database_sharding_algorithm_props"]
    assert "t_order_${order_id % 2}" in order["table_sharding_algorithm_props"]
    assert by_table["t_order_item"]["key_generate_column"] == "order_item_id"
    _, rows = env.query("SHOW SHARDING TABLE RULES t_order_item")
    assert [r[0] for r in rows] == ["t_order_item"]

    names, rows = env.query("SHOW SHARDING TABLE NODES t_order")
    assert names == ["name", "nodes"]
    assert rows == [("t_order", "ds_0.t_order_0, ds_0.t_order_1, ds_1.t_order_0, ds_1.t_order_1")]
    _, rows = env.query("SHOW SHARDING TABLE NODES t_log FROM extra_db")
    assert rows == [("t_log", "ds_0.t_log_0, ds_1.t_log_1, ds_0.t_log_2, ds_1.t_log_3")]


# --- LOCAL transactions across two data sources -------------------------------------------------------------------

@pytest.mark.parametrize("begin", ["BEGIN", "START TRANSACTION", "SET autocommit=0"])
@pytest.mark.parametrize("end", ["ROLLBACK", "COMMIT"])
def test_local_transaction_across_two_shards(sharded_env: ShardedEnv, begin: str, end: str) -> None:
    env = sharded_env
    env.clean("t_order")
    rows = [(1, 1, "tx"), (2, 2, "tx"), (3, 1, "tx"), (4, 2, "tx")]
    with env.connect(autocommit=True) as conn, conn.cursor() as cur:  # the client's own autocommit stays on
        cur.execute(begin)
        cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'tx')")  # ds_1
        cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (2, 2, 'tx')")  # ds_0
        cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (3, 1, 'tx'), (4, 2, 'tx')")  # both
        cur.execute("SELECT * FROM t_order ORDER BY order_id")
        assert list(cur.fetchall()) == rows  # the transaction sees its own rows on both shards
        assert all_rows(env, "t_order") == []  # nobody else does yet
        cur.execute(end)
        assert all_rows(env, "t_order") == (rows if end == "COMMIT" else [])
        # the session goes on normally afterwards: autocommit again after BEGIN, a new transaction under
        # autocommit=0 (only visible once committed)
        cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (9, 1, 'after'), (10, 2, 'after')")
        after = [r for r in all_rows(env, "t_order") if r[2] == "after"]
        assert after == ([] if begin == "SET autocommit=0" else [(9, 1, "after"), (10, 2, "after")])
        cur.execute("COMMIT")
    assert [r for r in all_rows(env, "t_order") if r[2] == "after"] == [(9, 1, "after"), (10, 2, "after")]


def test_failing_unit_in_a_transaction_rolls_back_everywhere(sharded_env: ShardedEnv) -> None:
    """A multi-node INSERT whose ds_1 part fails: the client gets the backend's ERR naming the data source, the
    statement's part that ran on ds_0 is taken back at once (as one server takes back a failed statement), the
    transaction stays usable, and ROLLBACK removes what it did before."""
    env = sharded_env
    env.clean("t_order")
    insert_orders(env, [(1, 1, "old")])  # ds_1.t_order_1
    with env.connect(autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (2, 2, 'tx')")
        with pytest.raises(pymysql.MySQLError) as info:
            cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (4, 2, 'tx'), (1, 1, 'dup')")
        errno, message = info.value.args[:2]
        assert errno == 1062 and "[ds_1]" in message and "Duplicate entry" in message
        assert "nothing of the statement was applied" in message
        with pytest.raises(pymysql.MySQLError) as info:  # a refusal does not end the transaction either
            cur.execute("UPDATE t_order SET order_id = 6, user_id = 3 WHERE order_id = 2")
        assert info.value.args[0] == 1235
        cur.execute("SELECT order_id FROM t_order ORDER BY order_id")
        assert [r[0] for r in cur.fetchall()] == [1, 2]
        cur.execute("ROLLBACK")
    assert all_rows(env, "t_order") == [(1, 1, "old")]


def test_backend_errors_of_multi_node_statements_reach_the_client(sharded_env: ShardedEnv) -> None:
    env = sharded_env
    refusal = env.refusal("SELECT no_such_column FROM t_order ORDER BY order_id")
    assert (refusal.errno, refusal.sqlstate) == (1054, "42S22") and "no_such_column" in refusal.message
    refusal = env.refusal("UPDATE t_order SET no_such_column = 1")
    assert (refusal.errno, refusal.sqlstate) == (1054, "42S22") and "no_such_column" in refusal.message


# --- shipped configuration and the demo ---------------------------------------------------------------------------

def test_shipped_conf_loads_and_demo_flow_works(mariadb_factory: ServerFactory, tmp_path: Path) -> None:
    servers = mariadb_factory.many(2)
    conf = tmp_path / "conf"
    write_demo_conf(REPO / "conf", conf, servers)
    shipped = (REPO / "conf" / "database-sharding.yaml").read_text(encoding="utf-8")
    copied = (conf / "database-sharding.yaml").read_text(encoding="utf-8")
    assert copied.split("\nrules:", 1)[1] == shipped.split("\nrules:", 1)[1]  # only the URLs were moved

    shipped_rules = load_config(REPO / "conf").databases["sharding_db"].rules  # as shipped: loading connects to nothing
    assert shipped_rules.sharding is not None and sorted(shipped_rules.sharding.tables) == ["t_order", "t_order_item"]
    config = load_config(conf)
    assert {"sharding_db", "demo_db"} <= set(config.databases)
    rules = config.databases["sharding_db"].rules
    assert rules.sharding is not None
    assert sorted(rules.sharding.tables) == ["t_order", "t_order_item"]
    assert "t_address" in rules.broadcast
    assert list(rules.data_sources) == ["ds_0", "ds_1"]

    proxy = start_proxy(conf)
    try:
        user = config.users[0]
        load_schema(proxy.host, proxy.port, user.user, user.password, list(config.databases))
        # `shardproxy demo-schema` again (the compose stack restarted): nothing fails, nothing doubles
        load_schema(proxy.host, proxy.port, user.user, user.password, list(config.databases))
        conn = pymysql.connect(host=proxy.host, port=proxy.port, user=user.user, password=user.password,
                               database="sharding_db")
        with conn, conn.cursor() as cur:
            cur.execute("SELECT o.order_id, i.order_item_id FROM t_order o JOIN t_order_item i "
                        "ON o.order_id = i.order_id WHERE o.user_id = 2 ORDER BY o.order_id")
            assert list(cur.fetchall()) == [(3, 3), (4, 4)]
            cur.execute("SELECT address_name FROM t_address ORDER BY address_id")
            assert list(cur.fetchall()) == [("Beijing",), ("Shanghai",)]
        for k, server in enumerate(servers):
            assert server.execute("SELECT COUNT(*) FROM t_address", f"demo_ds_{k}") == [(2,)]
            placed = {(t, o) for t in ("t_order_0", "t_order_1")
                      for (o,) in server.execute(f"SELECT order_id FROM {t}", f"demo_ds_{k}")}
            assert placed == {(f"t_order_{o % 2}", o) for o, u in ((1, 1), (2, 1), (3, 2), (4, 2)) if u % 2 == k}
    finally:
        proxy.stop()


# --- multi-node SELECT results equal what one unsharded MariaDB answers ------------------------------------------

MERGE_ORDERS = [(o, 1 + o % 7, [None, "INIT", "PAID", "SHIPPED", "PAID", "DONE"][o % 6]) for o in range(1, 41)]
MERGE_ITEMS = [(1000 + o * 3 + k, o, u, f"s{k}") for o, u, _ in MERGE_ORDERS for k in range(o % 3)]

MERGE_QUERIES: list[tuple[str, bool]] = [
    # (query, the query orders its rows completely)
    ("SELECT * FROM t_order ORDER BY order_id", True),
    ("SELECT * FROM t_order ORDER BY user_id DESC, order_id", True),
    ("SELECT order_id, status FROM t_order ORDER BY status, order_id DESC", True),
    ("SELECT * FROM t_order ORDER BY order_id LIMIT 5", True),
    ("SELECT * FROM t_order ORDER BY order_id DESC LIMIT 3, 4", True),
    ("SELECT order_id FROM t_order ORDER BY user_id, order_id LIMIT 2, 6", True),
    ("SELECT order_id FROM t_order WHERE user_id = 3 ORDER BY order_id DESC LIMIT 2", True),
    ("SELECT COUNT(*), SUM(order_id), MIN(order_id), MAX(order_id), AVG(order_id) FROM t_order", True),
    ("SELECT COUNT(status), MIN(status), MAX(status) FROM t_order WHERE status <> 'DONE'", True),
    ("SELECT user_id, COUNT(*), SUM(order_id) FROM t_order GROUP BY user_id ORDER BY user_id", True),
    ("SELECT status, COUNT(*) AS n FROM t_order GROUP BY status ORDER BY n DESC, status", True),
    ("SELECT user_id, AVG(order_id), MAX(status) FROM t_order GROUP BY user_id", False),
    ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING COUNT(*) > 5 ORDER BY user_id", True),
    ("SELECT DISTINCT status FROM t_order ORDER BY status", True),
    ("SELECT DISTINCT user_id FROM t_order", False),
    ("SELECT COUNT(DISTINCT user_id) FROM t_order", True),
    ("SELECT o.user_id, COUNT(*) FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
     "GROUP BY o.user_id ORDER BY o.user_id", True),
    ("SELECT o.order_id, i.order_item_id FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
     "ORDER BY i.order_item_id DESC LIMIT 4", True),
]


@pytest.fixture
def merge_data(sharded_env: ShardedEnv) -> Iterator[ShardedEnv]:
    env = sharded_env
    env.clean("t_order", "t_order_item")
    insert_orders(env, MERGE_ORDERS)
    items = ", ".join(f"({i}, {o}, {u}, '{s}')" for i, o, u, s in MERGE_ITEMS)
    env.run(f"INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES {items}")
    oracle = env.oracle_db  # on ds_0's server
    env.backend("ds_0", "DELETE FROM t_order", oracle)
    env.backend("ds_0", "DELETE FROM t_order_item", oracle)
    values = ", ".join(f"({o}, {u}, {'NULL' if s is None else repr(s)})" for o, u, s in MERGE_ORDERS)
    env.backend("ds_0", f"INSERT INTO t_order (order_id, user_id, status) VALUES {values}", oracle)
    env.backend("ds_0", f"INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES {items}", oracle)
    yield env


@pytest.mark.parametrize(("sql", "ordered"), MERGE_QUERIES, ids=[q for q, _ in MERGE_QUERIES])
def test_multi_node_select_equals_one_database(merge_data: ShardedEnv, sql: str, ordered: bool) -> None:
    env = merge_data
    assert len(env.preview(sql)) > 1  # really a multi-node statement
    names, rows = env.query(sql)
    want_names, want = env.oracle(sql)
    assert names == want_names
    if not ordered:
        rows, want = sorted(rows, key=repr), sorted(want, key=repr)
    assert rows == want
