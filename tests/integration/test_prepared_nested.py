"""Placeholders of nested parts (issue 33, section 2): every `?` of every set-operation part, subquery, derived
table and CTE is bound, prepared or not.

One table-driven corpus of statement shapes over the shipped example's t_order / t_order_item (``sharded_env``:
``user_id % 2`` picks the data source, ``order_id % 2`` the table). Each case runs

* literal: the values spliced into the text (COM_QUERY);
* binary: COM_STMT_PREPARE / EXECUTE (mysql-connector-python's ``cursor(prepared=True)``);
* sql: ``PREPARE s FROM '...'`` / ``EXECUTE s USING @p0, ...`` as SQL text;

each in a fresh connection and in a warm one (which has run the cases before it, and runs the statement twice),
and every answer must be exactly what the unsharded oracle database answers for the same rows (as a multiset, or
in order where the statement orders totally), or a refusal the case expects (1235, SQLSTATE 42000), the same in
every mode: never a wrong answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import mysql.connector
import pymysql
import pytest

from tests.integration.sharding_fixtures import ShardedEnv

pytestmark = pytest.mark.integration

# (order_id, user_id, status): users 1 / 3 / 7 / 9 / 19 on ds_1, 2 / 4 on ds_0; both tables of each
ORDERS = [
    (900001, 1, "a"), (900002, 2, "b"), (900003, 1, "b"), (900004, 2, "a"), (900005, 3, "c"), (900006, 4, "a"),
    (900007, 9, "x"), (900008, 9, "y"), (900009, 9, "x"), (900010, 9, "y"), (900011, 19, "x"), (900012, 19, "y"),
    (900013, 19, "z"), (900014, 7, None), (900015, 7, "x"), (900016, 4, "z"), (900018, 1, "c"),
]
# (order_item_id, order_id, user_id, status): items of some orders, on their order's node
ITEMS = [
    (1, 900001, 1, "p"), (2, 900001, 1, "q"), (3, 900002, 2, "p"), (4, 900007, 9, "q"), (5, 900011, 19, "p"),
    (6, 900006, 4, "q"),
]
ADDRESSES = [(1, "a"), (2, "x"), (3, "z")]  # t_address: broadcast, a copy on every data source

T_ORDER_UNION = ("SELECT order_id, user_id FROM t_order WHERE user_id = ? AND order_id = ? UNION ALL "
                 "SELECT order_id, user_id FROM t_order WHERE user_id = ? AND order_id = ?")
STATUS_UNION = "SELECT status FROM t_order WHERE user_id = ? UNION SELECT status FROM t_order WHERE user_id = ?"
LIMITED_PARTS = ("(SELECT order_id FROM t_order WHERE user_id = ? ORDER BY order_id LIMIT 2) UNION ALL "
                 "(SELECT order_id FROM t_order WHERE user_id = ? ORDER BY order_id LIMIT 2) ORDER BY 1")
COUNT_IN = ("SELECT COUNT(*) FROM t_order WHERE user_id = ? AND status IN "
            "(SELECT status FROM t_order WHERE user_id = ?)")
COUNT_NOT_IN = ("SELECT COUNT(*) FROM t_order WHERE user_id = ? AND status NOT IN "
                "(SELECT status FROM t_order WHERE user_id = ?)")


@dataclass(frozen=True)
class Case:
    name: str
    sql: str  # `?` for each parameter
    params: tuple[Any, ...]
    ordered: bool = False  # the statement orders its rows totally: compared in order
    refused: bool = False  # the proxy must refuse it (1235, 42000) in every mode


CASES = [
    # set operations: one line per shape, multi-node and single-node
    Case("union_all_two_nodes", T_ORDER_UNION, (1, 900001, 2, 900002)),
    Case("union_all_one_source_two_tables", T_ORDER_UNION, (1, 900001, 1, 900018)),
    Case("union_all_one_table_two_rows", T_ORDER_UNION, (1, 900001, 1, 900003)),
    Case("union_all_one_node", T_ORDER_UNION, (1, 900001, 1, 900001)),
    Case("union_all_no_rows_first", T_ORDER_UNION, (2, 900001, 1, 900003)),
    Case("union_one_source", STATUS_UNION, (1, 3)),
    Case("union_two_sources", STATUS_UNION, (1, 2)),
    Case("union_same_user", STATUS_UNION, (9, 9)),
    Case("limited_parts_ordered", LIMITED_PARTS, (9, 19), ordered=True),
    Case("limited_parts_one_source", LIMITED_PARTS, (1, 3), ordered=True),
    Case("limited_parts_two_sources", LIMITED_PARTS, (2, 19), ordered=True),
    Case("limit_placeholders",
         "(SELECT order_id FROM t_order WHERE user_id = ? ORDER BY order_id LIMIT ?) UNION ALL "
         "(SELECT order_id FROM t_order WHERE user_id = ? ORDER BY order_id DESC LIMIT ?) ORDER BY 1",
         (9, 1, 19, 2), ordered=True),
    Case("intersect", "SELECT status FROM t_order WHERE user_id = ? INTERSECT SELECT status FROM t_order "
         "WHERE user_id = ?", (9, 19)),
    Case("intersect_two_sources", "SELECT status FROM t_order WHERE user_id = ? INTERSECT SELECT status FROM "
         "t_order WHERE user_id = ?", (2, 1)),
    Case("except", "SELECT status FROM t_order WHERE user_id = ? EXCEPT SELECT status FROM t_order "
         "WHERE user_id = ?", (19, 9)),
    Case("three_parts", "SELECT order_id FROM t_order WHERE user_id = ? UNION ALL SELECT order_id FROM t_order "
         "WHERE order_id = ? UNION ALL SELECT order_id FROM t_order WHERE status = ?", (3, 900002, "z")),
    Case("off_key_parts", "SELECT order_id FROM t_order WHERE status = ? UNION ALL SELECT order_id FROM t_order "
         "WHERE status = ?", ("a", "x")),
    Case("literal_then_placeholder", "SELECT order_id FROM t_order WHERE user_id = 1 UNION ALL SELECT order_id "
         "FROM t_order WHERE user_id = ?", (2,)),
    Case("placeholder_then_literal", "SELECT order_id FROM t_order WHERE user_id = ? UNION ALL SELECT order_id "
         "FROM t_order WHERE user_id = 2", (3,)),
    Case("select_list_placeholders", "SELECT ?, order_id FROM t_order WHERE user_id = ? UNION ALL "
         "SELECT ?, order_id FROM t_order WHERE user_id = ?", ("first", 3, "second", 4)),
    Case("two_tables_parts", "SELECT order_id FROM t_order WHERE user_id = ? UNION ALL SELECT order_id FROM "
         "t_order_item WHERE user_id = ?", (1, 2)),
    Case("union_inside_derived", "SELECT COUNT(*), SUM(d.user_id) FROM (SELECT user_id FROM t_order WHERE "
         "user_id = ? UNION ALL SELECT user_id FROM t_order WHERE user_id = ?) d", (9, 19)),
    Case("union_in_subquery", "SELECT order_id FROM t_order WHERE user_id = ? AND status IN (SELECT status FROM "
         "t_order WHERE user_id = ? UNION SELECT status FROM t_order WHERE user_id = ?)", (19, 1, 9)),
    # subqueries in WHERE, beside a placeholder outside
    Case("in_subquery_two_users", COUNT_IN, (9, 19)),
    Case("in_subquery_same_user", COUNT_IN, (9, 9)),
    Case("in_subquery_two_sources", COUNT_IN, (9, 2)),
    Case("not_in_subquery", COUNT_NOT_IN, (9, 19)),
    Case("not_in_subquery_null", COUNT_NOT_IN, (9, 7)),
    Case("not_in_same_alias", "SELECT COUNT(*) FROM t_order o WHERE o.user_id = ? AND o.status NOT IN "
         "(SELECT o.status FROM t_order o WHERE o.user_id = ?)", (19, 9)),
    Case("not_in_select_list", "SELECT order_id, status NOT IN (SELECT status FROM t_order WHERE user_id = ?) "
         "FROM t_order WHERE user_id = ?", (7, 9)),
    Case("in_subquery_point_parts", "SELECT order_id FROM t_order WHERE user_id = ? AND order_id = ? AND status IN "
         "(SELECT status FROM t_order WHERE user_id = ? AND order_id = ?)", (1, 900003, 2, 900002)),
    Case("in_subquery_point_one_node", "SELECT order_id FROM t_order WHERE user_id = ? AND order_id = ? AND "
         "order_id IN (SELECT order_id FROM t_order WHERE user_id = ? AND order_id = ?)", (1, 900001, 1, 900001)),
    Case("in_subquery_point_other_node", "SELECT order_id FROM t_order WHERE user_id = ? AND order_id = ? AND "
         "status IN (SELECT status FROM t_order WHERE user_id = ? AND order_id = ?)", (1, 900001, 1, 900004)),
    Case("subquery_before_outer_key", "SELECT order_id FROM t_order WHERE order_id > ? AND user_id IN "
         "(SELECT user_id FROM t_order WHERE status = ?) AND user_id = ?", (900008, "y", 9), refused=True),
    Case("subquery_before_outer_key_off_key", "SELECT order_id FROM t_order WHERE status > ? AND user_id IN "
         "(SELECT user_id FROM t_order WHERE status = ?) AND user_id = ?", ("a", "y", 9)),
    Case("exists_correlated_item", "SELECT o.order_id FROM t_order o WHERE o.user_id = ? AND EXISTS (SELECT 1 FROM "
         "t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND i.status = ?)", (1, "q")),
    Case("exists_uncorrelated", "SELECT order_id FROM t_order WHERE user_id = ? AND EXISTS (SELECT 1 FROM t_order "
         "WHERE user_id = ? AND status = ?)", (1, 19, "z")),
    Case("scalar_in_select_list", "SELECT order_id, (SELECT COUNT(*) FROM t_order WHERE user_id = ?) FROM t_order "
         "WHERE user_id = ? AND order_id = ?", (19, 1, 900001)),
    Case("scalar_in_where", "SELECT order_id FROM t_order WHERE user_id = ? AND order_id > (SELECT MIN(order_id) "
         "FROM t_order WHERE user_id = ?)", (19, 9)),
    # derived tables and CTEs
    Case("derived_then_outer", "SELECT COUNT(*) FROM (SELECT order_id FROM t_order WHERE user_id = ?) d "
         "WHERE d.order_id > ?", (9, 900008)),
    Case("derived_joined", "SELECT o.order_id FROM t_order o JOIN (SELECT status FROM t_order WHERE user_id = ?) d "
         "ON d.status = o.status WHERE o.user_id = ?", (19, 9)),
    Case("cte_joined", "WITH c AS (SELECT order_id, status FROM t_order WHERE user_id = ?) SELECT COUNT(*) FROM c "
         "JOIN t_order o ON o.status = c.status WHERE o.user_id = ?", (19, 9)),
    Case("cte_two", "WITH a AS (SELECT status FROM t_order WHERE user_id = ?), b AS (SELECT status FROM t_order "
         "WHERE user_id = ?) SELECT a.status FROM a JOIN b ON a.status = b.status", (9, 19)),
    Case("cte_in_subquery", "WITH c AS (SELECT status FROM t_order WHERE user_id = ?) SELECT order_id FROM t_order "
         "WHERE user_id = ? AND status IN (SELECT status FROM c)", (19, 9)),
    # one part's placeholder on the database key, another's on the table key: no part pins the other's node
    Case("union_keys_split", "SELECT order_id FROM t_order WHERE user_id = ? UNION ALL SELECT order_id FROM t_order "
         "WHERE order_id = ?", (1, 900002)),
    Case("subquery_keys_split", "SELECT order_id FROM t_order WHERE user_id = ? AND status IN (SELECT status FROM "
         "t_order WHERE order_id = ?)", (9, 900011)),
    Case("subquery_keys_split_reversed", "SELECT order_id FROM t_order WHERE order_id = ? AND user_id IN (SELECT "
         "user_id FROM t_order WHERE user_id = ?)", (900007, 9)),
    Case("derived_pair_joined", "SELECT a.order_id FROM (SELECT order_id, status FROM t_order WHERE user_id = ?) a "
         "JOIN (SELECT status FROM t_order WHERE order_id = ?) b ON a.status = b.status", (9, 900011)),
    Case("cte_then_union_part", "WITH a AS (SELECT order_id FROM t_order WHERE user_id = ?) SELECT order_id FROM a "
         "UNION ALL SELECT order_id FROM t_order WHERE order_id = ?", (1, 900002)),
    Case("scalar_other_key", "SELECT order_id, (SELECT MAX(user_id) FROM t_order WHERE order_id = ?) FROM t_order "
         "WHERE user_id = ?", (900002, 1)),
    Case("exists_item_other_key", "SELECT o.order_id FROM t_order o WHERE o.user_id = ? AND EXISTS (SELECT 1 FROM "
         "t_order_item i WHERE i.order_id = ?)", (1, 900011)),
    # question marks that are no parameters (a string literal, a comment) between the parts' parameters
    Case("literal_question_marks", "SELECT order_id FROM t_order WHERE user_id = ? AND status <> '¿' UNION ALL "
         "SELECT order_id FROM t_order WHERE user_id = ? AND status <> 'a¿'", (1, 2)),
    Case("comment_question_mark", "SELECT COUNT(*) FROM t_order WHERE user_id = ? /* ¿ */ AND status IN "
         "(SELECT status FROM t_order WHERE user_id = ? AND status <> '¿')", (9, 19)),
    # neighbours without nesting: the same answers (binding join, point, scatter)
    Case("binding_join", "SELECT o.order_id, i.status FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id "
         "AND i.user_id = o.user_id WHERE o.user_id = ? AND i.status = ?", (1, "q")),
    Case("point", "SELECT order_id, status FROM t_order WHERE user_id = ? AND order_id = ?", (9, 900009)),
    # placeholders nested in statements the kernel runs on several nodes itself and merges (no federation)
    Case("exists_scatter_limit", "SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE "
         "i.order_id = o.order_id AND i.user_id = o.user_id AND i.status = ?) ORDER BY o.order_id LIMIT ?, ?",
         ("q", 1, 2), ordered=True),
    Case("exists_scatter_group_having", "SELECT o.user_id, COUNT(*) FROM t_order o WHERE o.status = ? AND EXISTS "
         "(SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND i.status = ?) "
         "GROUP BY o.user_id HAVING COUNT(*) > ? ORDER BY o.user_id LIMIT ?", ("a", "p", 0, 5), ordered=True),
    Case("scalar_correlated_scatter", "SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = "
         "o.order_id AND i.user_id = o.user_id AND i.status = ?) AS n FROM t_order o WHERE o.status = ? "
         "ORDER BY o.order_id LIMIT ?", ("p", "a", 3), ordered=True),
    Case("in_correlated_scatter", "SELECT o.order_id FROM t_order o WHERE o.status = ? AND o.order_id IN (SELECT "
         "i.order_id FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND i.status = ?) "
         "ORDER BY o.order_id LIMIT ?", ("a", "p", 3), ordered=True),
    Case("select_list_then_exists", "SELECT ? AS tag, o.order_id FROM t_order o WHERE o.user_id IN (?, ?) AND EXISTS "
         "(SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND i.status = ?) "
         "ORDER BY o.order_id", ("t", 1, 2, "p"), ordered=True),
    Case("broadcast_subquery_scatter", "SELECT order_id FROM t_order WHERE status IN (SELECT address_name FROM "
         "t_address WHERE address_id >= ?) AND user_id = ?", (2, 9)),
    Case("broadcast_subquery_join", "SELECT o.order_id FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id "
         "AND i.user_id = o.user_id AND i.status = ? WHERE o.user_id = ? AND o.status IN (SELECT a.address_name FROM "
         "t_address a WHERE a.address_id < ?)", ("q", 1, 2)),
    Case("broadcast_union_part", "SELECT status FROM t_order WHERE user_id = ? UNION SELECT address_name FROM "
         "t_address WHERE address_id = ?", (9, 3)),
    Case("derived_group_scatter", "SELECT d.user_id, d.n FROM (SELECT user_id, COUNT(*) AS n FROM t_order WHERE "
         "status = ? GROUP BY user_id) d WHERE d.n > ?", ("x", 1)),
    Case("item_subquery_two_keys", "SELECT o.order_id FROM t_order o WHERE o.user_id = ? AND o.order_id IN (SELECT "
         "i.order_id FROM t_order_item i WHERE i.user_id = ? AND i.status = ?)", (1, 1, "p")),
    Case("scatter_in", "SELECT order_id FROM t_order WHERE user_id IN (?, ?) AND status = ?", (2, 9, "a")),
]

MODES = ("literal", "binary", "sql")


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"


def _spliced(sql: str, params: Sequence[Any]) -> str:
    pieces = sql.split("?")
    assert len(pieces) == len(params) + 1, sql
    return "".join(p + (_literal(params[i]) if i < len(params) else "") for i, p in enumerate(pieces)).replace("¿", "?")


def _marked(sql: str, mark: str) -> str:
    """The case's text with each parameter written `mark` (and each literal question mark, "¿" in the case, as ?)."""
    return sql.replace("?", mark).replace("¿", "?")


def _normal(rows: Sequence[Sequence[Any]]) -> list[tuple[str | None, ...]]:
    def one(v: Any) -> str | None:
        if v is None:
            return None
        if isinstance(v, bytes | bytearray):
            return bytes(v).decode()
        return str(v)

    return [tuple(one(v) for v in row) for row in rows]


@dataclass(frozen=True)
class Answer:
    rows: list[tuple[str | None, ...]] | None
    errno: int | None = None
    sqlstate: str | None = None
    message: str = ""


def _connect(env: ShardedEnv) -> Any:
    return mysql.connector.connect(host=env.proxy.host, port=env.proxy.port, user="root", password="root",
                                   database="sharding_db", use_pure=True, ssl_disabled=True, autocommit=True)


def _execute(conn: Any, mode: str, case: Case) -> Any:
    """The case run in `mode` (literal text, binary prepared, SQL PREPARE / EXECUTE); its cursor."""
    if mode == "literal":
        cur = conn.cursor()
        cur.execute(_spliced(case.sql, case.params))
    elif mode == "binary":
        cur = conn.cursor(prepared=True)
        cur.execute(_marked(case.sql, "%s"), case.params)
    else:
        cur = conn.cursor()
        names = [f"@pn{i}" for i in range(len(case.params))]
        if names:
            cur.execute("SET " + ", ".join(f"{n} = {_literal(v)}" for n, v in zip(names, case.params, strict=True)))
        cur.execute("PREPARE pn_stmt FROM " + _literal(_marked(case.sql, "?")))
        cur.execute("EXECUTE pn_stmt" + (" USING " + ", ".join(names) if names else ""))
    return cur


def _run(conn: Any, mode: str, case: Case) -> Answer:
    try:
        cur = _execute(conn, mode, case)
        rows = _normal(cur.fetchall())
        cur.close()
        return Answer(rows)
    except mysql.connector.Error as exc:
        return Answer(None, int(exc.errno), exc.sqlstate, str(exc.msg))


@pytest.fixture(scope="module")
def nested_env(sharded_env: ShardedEnv) -> Iterator[ShardedEnv]:
    env = sharded_env
    _reset(env)
    env.clean("t_address")
    insert_address = "INSERT INTO t_address (address_id, address_name) VALUES (%s, %s)"
    with env.connect() as conn, conn.cursor() as cur:
        cur.executemany(insert_address, ADDRESSES)
    env.backend("ds_0", "CREATE TABLE IF NOT EXISTS t_address (address_id BIGINT NOT NULL, address_name "
                "VARCHAR(100) NOT NULL, PRIMARY KEY (address_id))", env.oracle_db)
    env.backend("ds_0", "DELETE FROM t_address", env.oracle_db)
    for address in ADDRESSES:
        env.backend("ds_0", insert_address, env.oracle_db, address)
    yield env
    env.clean("t_order", "t_order_item", "t_address")
    for table in ("t_order", "t_order_item"):  # (test_bytes compares what later modules read on both sides)
        env.backend("ds_0", f"DELETE FROM {table}", env.oracle_db)
    env.backend("ds_0", "DROP TABLE IF EXISTS t_address", env.oracle_db)


@pytest.fixture(scope="module")
def warm(nested_env: ShardedEnv) -> Iterator[dict[str, Any]]:
    """One connection per mode, kept across the cases, which has run other statements first."""
    conns = {mode: _connect(nested_env) for mode in MODES}
    for mode, conn in conns.items():
        for case in (Case("w1", "SELECT order_id FROM t_order WHERE user_id = ? AND order_id = ?", (1, 900001)),
                     Case("w2", "SELECT COUNT(*) FROM t_order WHERE status = ?", ("x",)),
                     Case("w3", T_ORDER_UNION, (2, 900002, 2, 900004))):
            assert _run(conn, mode, case).rows is not None
    yield conns
    for conn in conns.values():
        with contextlib.suppress(Exception):
            conn.close()


def _oracle(env: ShardedEnv, case: Case) -> list[tuple[str | None, ...]]:
    return _normal(env.oracle(_spliced(case.sql, case.params))[1])


def _check(env: ShardedEnv, case: Case, got: Answer, mode: str) -> None:
    if case.refused:
        assert got.rows is None and (got.errno, got.sqlstate) == (1235, "42000"), (mode, got)
        return
    assert got.rows is not None, (mode, got)
    expected = _oracle(env, case)
    if case.ordered:
        assert got.rows == expected, mode
    else:
        key = lambda r: tuple((v is not None, v or "") for v in r)  # noqa: E731
        assert sorted(got.rows, key=key) == sorted(expected, key=key), mode


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fresh_connection(nested_env: ShardedEnv, case: Case, mode: str) -> None:
    conn = _connect(nested_env)
    try:
        _check(nested_env, case, _run(conn, mode, case), mode)
    finally:
        conn.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_warm_connection(nested_env: ShardedEnv, warm: dict[str, Any], case: Case, mode: str) -> None:
    for _ in range(2):
        _check(nested_env, case, _run(warm[mode], mode, case), mode)


# writes with placeholders in nested parts: the tables afterwards must be what the oracle's are after the same write
WRITES = [
    Case("update_broadcast_subquery", "UPDATE t_order SET status = ? WHERE user_id = ? AND status IN "
         "(SELECT address_name FROM t_address WHERE address_id = ?)", ("n", 9, 2)),
    Case("update_exists_item", "UPDATE t_order o SET o.status = ? WHERE o.user_id = ? AND EXISTS (SELECT 1 FROM "
         "t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND i.status = ?)", ("n", 1, "q")),
    Case("update_set_scalar_subquery", "UPDATE t_order SET status = (SELECT address_name FROM t_address WHERE "
         "address_id = ?) WHERE user_id = ? AND order_id = ?", (3, 1, 900001)),
    Case("delete_broadcast_subquery", "DELETE FROM t_order WHERE user_id = ? AND status IN (SELECT address_name "
         "FROM t_address WHERE address_id >= ?)", (9, 2)),
    Case("insert_select_point", "INSERT INTO t_order_item (order_item_id, order_id, user_id, status) SELECT "
         "order_id + ?, order_id, user_id, ? FROM t_order WHERE user_id = ? AND order_id = ?", (100, "s", 1, 900001)),
    Case("insert_select_union_one_node", "INSERT INTO t_order_item (order_item_id, order_id, user_id, status) "
         "SELECT order_id + ?, order_id, user_id, ? FROM t_order WHERE user_id = ? AND order_id = ? UNION ALL SELECT "
         "order_id + ?, order_id, user_id, ? FROM t_order WHERE user_id = ? AND order_id = ?",
         (100, "s", 1, 900001, 200, "t", 1, 900003)),
    Case("insert_select_union", "INSERT INTO t_order_item (order_item_id, order_id, user_id, status) SELECT "
         "order_id + ?, order_id, user_id, ? FROM t_order WHERE user_id = ? AND order_id = ? UNION ALL SELECT "
         "order_id + ?, order_id, user_id, ? FROM t_order WHERE user_id = ? AND order_id = ?",
         (100, "s", 1, 900001, 200, "t", 1, 900018), refused=True),
    Case("insert_select_union_two_nodes", "INSERT INTO t_order_item (order_item_id, order_id, user_id, status) SELECT "
         "order_id + ?, order_id, user_id, ? FROM t_order WHERE user_id = ? AND order_id = ? UNION ALL SELECT "
         "order_id + ?, order_id, user_id, ? FROM t_order WHERE user_id = ? AND order_id = ?",
         (100, "s", 1, 900001, 200, "t", 2, 900002), refused=True),
    Case("insert_select_subquery", "INSERT INTO t_order_item (order_item_id, order_id, user_id, status) SELECT "
         "order_id + ?, order_id, user_id, status FROM t_order WHERE user_id = ? AND status IN (SELECT status FROM "
         "t_order WHERE user_id = ?)", (100, 9, 19), refused=True),
    Case("update_in_values_union", "UPDATE t_order SET status = ? WHERE user_id = ? AND order_id IN (SELECT ? UNION "
         "SELECT ?)", ("n", 1, 900001, 900018)),
    Case("update_self_subquery", "UPDATE t_order SET status = ? WHERE user_id = ? AND status IN (SELECT status "
         "FROM t_order WHERE user_id = ?)", ("n", 9, 19), refused=True),
    Case("delete_item_subquery", "DELETE FROM t_order WHERE user_id = ? AND order_id IN (SELECT order_id FROM "
         "t_order_item WHERE user_id = ? AND status = ?)", (1, 1, "p"), refused=True),
]


def _reset(env: ShardedEnv) -> None:
    env.clean("t_order", "t_order_item")
    for table in ("t_order", "t_order_item"):
        env.backend("ds_0", f"DELETE FROM {table}", env.oracle_db)
    insert_order = "INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)"
    insert_item = "INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES (%s, %s, %s, %s)"
    with env.connect() as conn, conn.cursor() as cur:
        cur.executemany(insert_order, ORDERS)
        cur.executemany(insert_item, ITEMS)
    for row in ORDERS:
        env.backend("ds_0", insert_order, env.oracle_db, row)
    for item in ITEMS:
        env.backend("ds_0", insert_item, env.oracle_db, item)


_CONTENTS = ("SELECT order_id, user_id, status FROM t_order ORDER BY order_id",
             "SELECT order_item_id, order_id, user_id, status FROM t_order_item ORDER BY order_item_id")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", WRITES, ids=[c.name for c in WRITES])
def test_write(nested_env: ShardedEnv, case: Case, mode: str) -> None:
    env = nested_env
    _reset(env)
    try:
        conn = _connect(env)
        try:
            got = _run_write(conn, mode, case)
        finally:
            conn.close()
        if case.refused:
            assert got is not None and (got.errno, got.sqlstate) == (1235, "42000"), (mode, got)
            return
        assert got is None, (mode, got)
        before = [env.oracle(sql)[1] for sql in _CONTENTS]
        env.oracle(_spliced(case.sql, case.params))
        after = [env.oracle(sql)[1] for sql in _CONTENTS]
        assert after != before, "the write changes nothing: the case proves nothing"
        for sql in _CONTENTS:
            assert _normal(env.query(sql)[1]) == _normal(env.oracle(sql)[1]), (mode, sql)
    finally:
        _reset(env)


def _run_write(conn: Any, mode: str, case: Case) -> Answer | None:
    """None: done; else the refusal."""
    try:
        _execute(conn, mode, case).close()
        return None
    except mysql.connector.Error as exc:
        return Answer(None, int(exc.errno), exc.sqlstate, str(exc.msg))


# --- generated: every pair of part shapes under every set operator, and each part as a subquery ------------------

# (part, its values for a few draws): every part reads (order_id, status)
_PARTS: list[tuple[str, list[tuple[Any, ...]]]] = [
    ("SELECT order_id, status FROM t_order WHERE user_id = ?", [(1,), (2,), (9,), (19,)]),
    ("SELECT order_id, status FROM t_order WHERE user_id = ? AND order_id = ?",
     [(1, 900001), (1, 900018), (2, 900004), (19, 900013)]),
    ("SELECT order_id, status FROM t_order WHERE status = ?", [("a",), ("x",), ("z",), ("q",)]),
    ("SELECT order_id, status FROM t_order WHERE order_id IN (?, ?)", [(900001, 900002), (900007, 900011),
                                                                       (900018, 900003), (900016, 900006)]),
    ("SELECT order_id, status FROM t_order_item WHERE user_id = ?", [(1,), (2,), (9,), (4,)]),
    ("(SELECT order_id, status FROM t_order WHERE user_id = ? ORDER BY order_id LIMIT ?)",
     [(9, 2), (19, 1), (2, 5), (1, 1)]),
]
_OPERATORS = ("UNION", "UNION ALL", "INTERSECT", "EXCEPT")


def _generated() -> list[Case]:
    cases: list[Case] = []
    n = 0
    for i, (left, left_values) in enumerate(_PARTS):
        for j, (right, right_values) in enumerate(_PARTS):
            for op in _OPERATORS:
                for draw in range(2):
                    lv = left_values[(n + draw) % len(left_values)]
                    rv = right_values[(n + 2 * draw + 1) % len(right_values)]
                    cases.append(Case(f"g{i}{j}_{op.replace(' ', '_').lower()}_{draw}", f"{left} {op} {right}",
                                      (*lv, *rv)))
                n += 1
            # the right part as a subquery beside an outer placeholder (its first column)
            inner = right.replace("SELECT order_id, status", "SELECT status", 1)
            for draw in range(2):
                lv = left_values[(n + draw) % len(left_values)]
                rv = right_values[(n + draw + 1) % len(right_values)]
                for neg in ("", "NOT "):
                    cases.append(Case(f"g{i}{j}_{neg.strip().lower() or 'in'}_{draw}",
                                      f"SELECT COUNT(*), SUM(x.order_id) FROM ({left}) x WHERE x.status {neg}IN "
                                      f"({inner})", (*lv, *rv)))
    return cases


GENERATED = _generated()


@pytest.mark.parametrize("mode", MODES)
def test_generated(nested_env: ShardedEnv, mode: str) -> None:
    """Every generated shape in one warm connection per mode (and the binary ones each in a fresh one too)."""
    env = nested_env
    conn = _connect(env)
    mismatches: list[str] = []
    try:
        for case in GENERATED:
            try:
                expected = _oracle(env, case)
            except pymysql.MySQLError as exc:  # MariaDB refuses it itself (LIMIT in an IN subquery): so must we
                refused = int(exc.args[0])
                got = _run(conn, mode, case)
                if got.errno != refused:
                    mismatches.append(f"{case.name}: {case.sql} {case.params}: {got} where MariaDB refuses {exc}")
                continue
            answers = [_run(conn, mode, case)]
            if mode == "binary":
                fresh = _connect(env)
                try:
                    answers.append(_run(fresh, mode, case))
                finally:
                    fresh.close()
            for got in answers:
                if got.rows is None:
                    if (got.errno, got.sqlstate) != (1235, "42000"):
                        mismatches.append(f"{case.name}: {case.sql} {case.params}: {got}")
                    continue
                key = lambda r: tuple((v is not None, v or "") for v in r)  # noqa: E731
                if sorted(got.rows, key=key) != sorted(expected, key=key):
                    mismatches.append(f"{case.name}: {case.sql} {case.params}: {got.rows} != {expected}")
    finally:
        conn.close()
    assert not mismatches, "\n".join(mismatches[:20]) + f"\n({len(mismatches)} of {len(GENERATED)})"
