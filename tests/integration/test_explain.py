"""EXPLAIN of a statement and XA on a sharded database (issue 13, item 15), against real MariaDB servers.

EXPLAIN is routed like the statement it explains: one unit answers with its backend's plan (naming the
actual table), several units with every unit's plan rows and a last column ``data_source``. XA is refused
on sharded databases (it would reach ds_0 alone) and still relayed on pass-through ones.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mysql.connector
import pytest

from tests.integration.sharding_fixtures import ShardedEnv

pytestmark = pytest.mark.integration


ROWS = ((3, 1, "a"), (4, 1, "b"), (6, 2, "c"), (7, 2, "d"), (8, 3, "e"), (9, 3, "f"))  # every actual table has rows


@pytest.fixture
def orders(sharded_env: ShardedEnv) -> Any:
    """t_order and t_order_item with rows in every actual table (an empty table's plan says only "Impossible
    WHERE"); removed afterwards."""
    env = sharded_env
    env.clean("t_order", "t_order_item")
    for oid, uid, status in ROWS:
        env.run(f"INSERT INTO t_order (order_id, user_id, status) VALUES ({oid}, {uid}, '{status}')")
        env.run(f"INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES ({oid * 10}, {oid}, "
                f"{uid}, '{status}')")
    yield env
    env.clean("t_order", "t_order_item")


def _connector(env: ShardedEnv, db: str = "sharding_db") -> Any:
    return mysql.connector.connect(host=env.proxy.host, port=env.proxy.port, user="root", password="root",
                                   database=db, use_pure=True, autocommit=True)


def _both(env: ShardedEnv, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[list[str], list[tuple[Any, ...]]]]:
    """(columns, rows) of `sql` as text and as a prepared statement (mysql-connector)."""
    out = []
    conn = _connector(env)
    try:
        for prepared in (False, True):
            cur = conn.cursor(prepared=prepared)
            cur.execute(sql if prepared else sql.replace("?", "%s"), params)
            rows = [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in cur.fetchall()]
            out.append(([d[0] for d in cur.description], rows))
            cur.close()
    finally:
        conn.close()
    return out


def _json_table(plan: str) -> str:
    """The first table a JSON plan names."""
    found = re.search(r'"table_name":\s*"(\w+)"', json.dumps(json.loads(plan)))
    assert found is not None, plan
    return found.group(1)


def _tables(columns: list[str], rows: list[tuple[Any, ...]]) -> list[tuple[str, str]]:
    table, source = columns.index("table"), (columns.index("data_source") if "data_source" in columns else None)
    return [(str(r[source]) if source is not None else "", str(r[table])) for r in rows]


def test_explain_of_a_one_unit_select_is_the_backends_plan(orders: ShardedEnv) -> None:
    env = orders
    direct_cols, _ = env.oracle("EXPLAIN SELECT * FROM t_order WHERE user_id = 1 AND order_id = 3")
    for sql, params in (("EXPLAIN SELECT * FROM t_order WHERE user_id = 1 AND order_id = 3", ()),
                        ("EXPLAIN SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", (1, 3)),
                        ("DESCRIBE SELECT status FROM t_order WHERE user_id = ? AND order_id = ?", (1, 3)),
                        ("EXPLAIN EXTENDED SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", (1, 3))):
        for columns, rows in _both(env, sql, params):
            assert columns[: len(direct_cols)] == direct_cols or sql.startswith("EXPLAIN EXTENDED"), (sql, columns)
            assert "data_source" not in columns
            assert _tables(columns, rows) == [("", "t_order_1")], (sql, rows)


def test_explain_of_several_units_lists_each_units_plan_with_its_data_source(orders: ShardedEnv) -> None:
    env = orders
    direct_cols, _ = env.oracle("EXPLAIN SELECT * FROM t_order ORDER BY order_id")
    text, prepared = _both(env, "EXPLAIN SELECT * FROM t_order WHERE status = ? ORDER BY order_id", ("x",))
    assert text == prepared
    columns, rows = text
    assert columns == [*direct_cols, "data_source"]
    assert _tables(columns, rows) == [("ds_0", "t_order_0"), ("ds_0", "t_order_1"), ("ds_1", "t_order_0"),
                                      ("ds_1", "t_order_1")]
    # one user's orders: one data source, both tables
    columns, rows = _both(env, "EXPLAIN SELECT * FROM t_order WHERE user_id = 2")[0]
    assert _tables(columns, rows) == [("ds_0", "t_order_0"), ("ds_0", "t_order_1")]
    # SQL-level PREPARE / EXECUTE the same
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute("PREPARE e FROM 'EXPLAIN SELECT * FROM t_order WHERE user_id = ?'")
        cur.execute("SET @u = 2")
        cur.execute("EXECUTE e USING @u")
        assert _tables([d[0] for d in cur.description], list(cur.fetchall())) == [("ds_0", "t_order_0"),
                                                                                ("ds_0", "t_order_1")]
    # a binding join: each unit joins the two bound tables
    columns, rows = _both(env, "EXPLAIN SELECT t_order.order_id FROM t_order JOIN t_order_item ON t_order.order_id "
                          "= t_order_item.order_id WHERE t_order.user_id = 3")[0]
    assert sorted(set(_tables(columns, rows))) == [("ds_1", "t_order_0"), ("ds_1", "t_order_1"),
                                                  ("ds_1", "t_order_item_0"), ("ds_1", "t_order_item_1")]


def test_explain_format_json_and_of_writes(orders: ShardedEnv) -> None:
    env = orders
    columns, rows = _both(env, "EXPLAIN FORMAT=JSON SELECT * FROM t_order WHERE user_id = ?", (1,))[1]
    assert columns == ["EXPLAIN", "data_source"]
    assert [(r[1], _json_table(r[0])) for r in rows] == [
        ("ds_1", "t_order_0"), ("ds_1", "t_order_1")]
    columns, rows = _both(env, "EXPLAIN FORMAT=JSON SELECT * FROM t_order WHERE user_id = 1 AND order_id = 4")[0]
    assert columns == ["EXPLAIN"] and _json_table(rows[0][0]) == "t_order_0"
    before = env.query("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")[1]
    assert before == [tuple(r) for r in ROWS]
    for sql in ("EXPLAIN UPDATE t_order SET status = 'gone' WHERE user_id = 1 AND order_id = 3",
                "EXPLAIN DELETE FROM t_order WHERE user_id = 1",
                "EXPLAIN DELETE FROM t_order",
                "EXPLAIN INSERT INTO t_order (order_id, user_id, status) VALUES (11, 1, 'x'), (12, 2, 'y')"):
        columns, rows = _both(env, sql)[0]
        assert rows and "table" in columns, sql
    columns, rows = _both(env, "EXPLAIN DELETE FROM t_order")[0]
    assert len(rows) == 4 and columns[-1] == "data_source"
    # nothing was changed, nothing inserted
    assert env.query("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")[1] == before
    # MariaDB's ANALYZE runs the statement: a SELECT may be analyzed, a write is refused
    columns, rows = _both(env, "ANALYZE SELECT * FROM t_order WHERE user_id = ?", (1,))[0]
    assert "r_rows" in columns and columns[-1] == "data_source" and len(rows) == 2
    refusal = env.refusal("ANALYZE DELETE FROM t_order WHERE user_id = 1")
    assert refusal.errno == 1235 and "SELECT" in refusal.message
    assert env.query("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")[1] == before


def test_explain_of_a_table_is_still_describe(sharded_env: ShardedEnv) -> None:
    columns, rows = sharded_env.query("EXPLAIN t_order")
    assert columns[0] == "Field" and [r[0] for r in rows] == ["order_id", "user_id", "status"]
    columns, rows = sharded_env.query("DESC t_order status")
    assert [r[0] for r in rows] == ["status"]


@pytest.mark.parametrize("sql", ["XA START 'x1'", "XA BEGIN 'x1'", "XA END 'x1'", "XA PREPARE 'x1'",
                                 "XA COMMIT 'x1'", "XA ROLLBACK 'x1'", "XA RECOVER", "  /* c */ xa start 'x1'"])
def test_xa_is_refused_on_a_sharded_database(sharded_env: ShardedEnv, sql: str) -> None:
    refusal = sharded_env.refusal(sql)
    assert (refusal.errno, refusal.sqlstate) == (1235, "42000"), refusal
    assert "the client's own xid" in refusal.message
    conn = _connector(sharded_env)
    try:  # prepared, too
        cur = conn.cursor(prepared=True)
        with pytest.raises(mysql.connector.Error) as info:
            cur.execute(sql)
        assert info.value.errno == 1235
    finally:
        conn.close()
    # and no data source was left in an XA transaction: a LOCAL transaction still works on both
    with sharded_env.connect() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT COUNT(*) FROM t_order")
        cur.execute("COMMIT")


def test_xa_is_relayed_on_a_pass_through_database(passthrough_proxy: Any) -> None:
    with passthrough_proxy.connect("demo") as conn, conn.cursor() as cur:
        cur.execute("XA START 'pt1'")
        cur.execute("XA END 'pt1'")
        cur.execute("XA PREPARE 'pt1'")
        cur.execute("XA RECOVER")
        assert any(r[3] == b"pt1" or r[3] == "pt1" for r in cur.fetchall())
        cur.execute("XA ROLLBACK 'pt1'")
