# ruff: noqa: E501  (table-driven: one case per line)
"""Issue 17, aggregates in full: select items, HAVING and ORDER BY computed from merged aggregates answer
exactly as one unsharded MariaDB with the same rows (values, their types, column names, the column types
and scales MariaDB sends), text and prepared. Same layout and rows as the differential suite."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.test_differential import MODES, ORACLE_DB, Client, Env, Refused, _typed, env  # noqa: F401

pytestmark = pytest.mark.integration

# (sql, the order is fixed by the query)
CASES: list[tuple[str, bool]] = [
    ("SELECT COUNT(*) + 1 FROM t_order", True),
    ("SELECT SUM(amount * 2), SUM(amount) + 1, COUNT(*) - 1 FROM t_order", True),
    ("SELECT IFNULL(SUM(amount), 0), COALESCE(MAX(price), -1) FROM t_order WHERE user_id = 999", True),
    ("SELECT IFNULL(SUM(amount), 0) AS s FROM t_order WHERE user_id = 7", True),
    ("SELECT ROUND(AVG(amount), 2), ROUND(AVG(price), 3), ROUND(AVG(user_id)) FROM t_order", True),
    ("SELECT SUM(amount) / COUNT(*), SUM(amount) / COUNT(amount), COUNT(*) / 7 FROM t_order", True),
    ("SELECT SUM(price) / COUNT(*), AVG(amount) * 1000000000000, AVG(qty) * 3 FROM t_order, t_order_item WHERE t_order.order_id = t_order_item.order_id AND t_order.user_id = t_order_item.user_id", True),
    ("SELECT MAX(amount) - MIN(amount), MAX(order_id) - MIN(order_id), MAX(price) - MIN(price) FROM t_order", True),
    ("SELECT TRUNCATE(AVG(amount), 1), CEIL(AVG(amount)), FLOOR(SUM(price)), ABS(MIN(amount) - 1000) FROM t_order", True),
    ("SELECT IF(COUNT(*) > 100, 'many', 'few'), CASE WHEN SUM(amount) > 0 THEN 1 ELSE 0 END FROM t_order", True),
    ("SELECT NULLIF(COUNT(*), 0), GREATEST(MAX(user_id), 20), LEAST(MIN(user_id), 3) FROM t_order WHERE user_id > 10", True),
    ("SELECT COUNT(*) DIV 7, COUNT(*) MOD 7, SUM(amount) MOD 3 FROM t_order", True),
    ("SELECT user_id, IFNULL(SUM(amount), 0) AS s, ROUND(AVG(amount), 2), COUNT(*) + 1 FROM t_order GROUP BY user_id", True),
    ("SELECT user_id, MAX(amount) - MIN(amount) AS spread FROM t_order GROUP BY user_id ORDER BY spread, user_id", True),
    ("SELECT user_id, SUM(price) / COUNT(*) FROM t_order GROUP BY user_id ORDER BY user_id", True),
    ("SELECT user_id, SUM(amount) / COUNT(*) AS a FROM t_order GROUP BY user_id ORDER BY a DESC, user_id LIMIT 5", True),
    ("SELECT user_id, COUNT(*) * 2 AS c2 FROM t_order GROUP BY user_id HAVING c2 > 120 ORDER BY user_id", True),
    ("SELECT user_id % 7 AS m, ROUND(AVG(amount), 2) FROM t_order WHERE user_id < 20 GROUP BY m ORDER BY 2, 1", True),
    ("SELECT user_id, (SUM(amount) + SUM(price)) / 2 FROM t_order WHERE user_id < 5 GROUP BY user_id", True),
    ("SELECT order_id % 2 AS p, AVG(amount) / 3, SUM(amount) / 3 * 3 FROM t_order GROUP BY p", True),
    # ORDER BY / HAVING on aggregates that are not selected, and on expressions over them
    ("SELECT user_id FROM t_order GROUP BY user_id ORDER BY AVG(amount) DESC, user_id", True),
    ("SELECT user_id FROM t_order GROUP BY user_id ORDER BY SUM(amount) / COUNT(*), user_id LIMIT 7", True),
    ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY MAX(amount) - MIN(amount) DESC, user_id", True),
    ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING AVG(amount) > 250 ORDER BY user_id", True),
    ("SELECT user_id, AVG(amount) FROM t_order GROUP BY user_id HAVING AVG(amount) BETWEEN 200 AND 300 ORDER BY user_id", True),
    ("SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount) / COUNT(*) > 240 AND AVG(price) < 600 ORDER BY user_id", True),
    ("SELECT user_id, ROUND(AVG(amount), 1) AS r FROM t_order GROUP BY user_id HAVING r > 250 ORDER BY r DESC, user_id", True),
    ("SELECT COUNT(*) FROM t_order HAVING AVG(amount) > 1", True),
    # several DISTINCT aggregates, COUNT(DISTINCT a, b), AVG(DISTINCT x): GROUP BY keys + distinct args pushed down
    ("SELECT COUNT(DISTINCT user_id, status), COUNT(DISTINCT user_id, amount), AVG(DISTINCT amount), AVG(DISTINCT price), AVG(DISTINCT user_id) FROM t_order", True),
    ("SELECT user_id, COUNT(DISTINCT status), SUM(DISTINCT amount), AVG(DISTINCT amount), COUNT(*), SUM(amount), MAX(price) FROM t_order GROUP BY user_id", True),
    ("SELECT user_id % 3 AS m, COUNT(DISTINCT user_id, amount), AVG(DISTINCT qty), COUNT(DISTINCT sku) FROM t_order_item JOIN t_order USING (order_id, user_id) GROUP BY m ORDER BY m DESC", True),
    ("SELECT COUNT(DISTINCT status, note) FROM t_order WHERE note IS NOT NULL", True),
    ("SELECT AVG(DISTINCT amount), COUNT(DISTINCT amount) FROM t_order WHERE user_id = 999", True),
    ("SELECT user_id, AVG(DISTINCT amount) AS a FROM t_order GROUP BY user_id ORDER BY a DESC, user_id LIMIT 4", True),
    ("SELECT user_id, COUNT(DISTINCT status) * 2, SUM(DISTINCT amount) / COUNT(DISTINCT amount), ROUND(AVG(DISTINCT price), 2) FROM t_order GROUP BY user_id", True),
    ("SELECT COUNT(DISTINCT user_id, status) + COUNT(*), IFNULL(SUM(DISTINCT amount), 0), MAX(DISTINCT amount) - MIN(DISTINCT amount) FROM t_order WHERE user_id < 9", True),
    ("SELECT user_id FROM t_order GROUP BY user_id ORDER BY COUNT(DISTINCT amount) * 1, user_id LIMIT 5", True),
    # GROUP_CONCAT with DISTINCT / ORDER BY: values, order keys and their row counts pushed down, joined in the proxy
    ("SELECT GROUP_CONCAT(order_id ORDER BY order_id SEPARATOR '|') FROM t_order WHERE user_id = 4", True),
    ("SELECT user_id, GROUP_CONCAT(order_id ORDER BY order_id DESC), COUNT(*) FROM t_order GROUP BY user_id", True),
    ("SELECT user_id, GROUP_CONCAT(DISTINCT amount ORDER BY amount DESC SEPARATOR ' / '), SUM(amount) FROM t_order WHERE user_id < 6 GROUP BY user_id", True),
    ("SELECT GROUP_CONCAT(DISTINCT user_id % 5), GROUP_CONCAT(DISTINCT user_id ORDER BY user_id DESC) FROM t_order", True),
    ("SELECT user_id, GROUP_CONCAT(order_id, '-', user_id ORDER BY order_id DESC SEPARATOR ';') FROM t_order WHERE user_id IN (3, 4) GROUP BY user_id", True),
    ("SELECT user_id % 2 AS p, GROUP_CONCAT(qty ORDER BY qty, order_item_id) FROM t_order_item WHERE user_id < 4 GROUP BY p", True),
    ("SELECT GROUP_CONCAT(DISTINCT order_id ORDER BY order_id) FROM t_order WHERE user_id = 999", True),
    ("SELECT user_id, GROUP_CONCAT(DISTINCT YEAR(created) ORDER BY YEAR(created)) FROM t_order WHERE user_id < 5 GROUP BY user_id WITH ROLLUP", True),
    # SELECT * over several nodes: the columns come from the table metadata
    ("SELECT * FROM t_order ORDER BY amount DESC, order_id LIMIT 5", True),
    ("SELECT DISTINCT * FROM t_order_item WHERE qty > 3 ORDER BY order_item_id LIMIT 10, 5", True),
    ("SELECT *, COUNT(*) FROM t_order_item WHERE user_id < 5 GROUP BY order_item_id ORDER BY order_item_id LIMIT 8", True),
    ("SELECT o.*, i.qty FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id ORDER BY i.order_item_id LIMIT 4", True),
    # WITH ROLLUP: the nodes group without it, the merge adds the super-aggregate rows
    ("SELECT user_id % 3 AS a, order_id % 2 AS b, COUNT(*), SUM(amount), AVG(price), MIN(created) FROM t_order GROUP BY a, b WITH ROLLUP", True),
    ("SELECT user_id, COUNT(*), MAX(amount) - MIN(amount), ROUND(AVG(amount), 1) FROM t_order WHERE user_id < 6 GROUP BY user_id WITH ROLLUP", True),
    ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id WITH ROLLUP LIMIT 4", True),
    ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id WITH ROLLUP LIMIT 48, 5", True),
    ("SELECT user_id % 4 AS a, COUNT(*) AS n FROM t_order GROUP BY a WITH ROLLUP HAVING n > 700", True),
    ("SELECT user_id % 2 AS a, COUNT(DISTINCT user_id), AVG(DISTINCT amount), SUM(DISTINCT order_id) FROM t_order GROUP BY a WITH ROLLUP", True),
    ("SELECT user_id, COUNT(*) FROM t_order WHERE user_id = 999 GROUP BY user_id WITH ROLLUP", True),
    ("SELECT user_id AS k, COUNT(*) FROM t_order GROUP BY k WITH ROLLUP HAVING k < 3 OR COUNT(*) < 50", True),
    ("SELECT o.user_id % 2 AS a, i.qty, SUM(i.unit_price), COUNT(*) FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id WHERE o.user_id < 8 GROUP BY a, i.qty WITH ROLLUP", True),
]
PREPARED_ONLY: list[tuple[str, bool]] = []


@pytest.fixture(scope="module")
def clients(env: Env, mariadb_shards: list[MariaDBServer]) -> Iterator[dict[str, tuple[Client, Client]]]:  # noqa: F811
    s0 = mariadb_shards[0]
    out = {mode: (Client(mode, env.proxy.host, env.proxy.port, "root", "sharding_db"),
                  Client(mode, s0.host, s0.port, s0.password, ORACLE_DB)) for mode in MODES}
    yield out
    for proxy_client, oracle_client in out.values():
        proxy_client.close()
        oracle_client.close()


def _columns(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    """(name, type code, scale) of each result column, as the server describes it."""
    with conn.cursor() as cur:
        cur.execute(sql)
        cur.fetchall()
        return [(d[0], d[1], d[5]) for d in cur.description]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("sql", "ordered"), CASES, ids=[c[0][:100] for c in CASES])
def test_aggregate_expressions_match_mariadb(clients: dict[str, tuple[Client, Client]], mode: str, sql: str,
                                             ordered: bool) -> None:
    proxy_client, oracle_client = clients[mode]
    exp_names, expected, _ = oracle_client.run(sql)
    try:
        got_names, got, _ = proxy_client.run(sql)
    except Refused as exc:
        pytest.fail(f"refused: {exc}")
    assert got_names == exp_names
    g, e = _typed(got), _typed(expected)
    assert (g == e) if ordered else (Counter(g) == Counter(e)), f"\n proxy  {got[:5]!r}\n oracle {expected[:5]!r}"


@pytest.mark.parametrize(("sql", "ordered"), CASES[:12], ids=[c[0][:100] for c in CASES[:12]])
def test_aggregate_expression_columns_are_described_as_mariadb_does(env: Env, sql: str, ordered: bool) -> None:  # noqa: F811
    assert _columns(env.proxy_conn, sql) == _columns(env.oracle_conn, sql)


@pytest.mark.parametrize("sql", [
    "SELECT user_id AS k, COUNT(*) FROM t_order GROUP BY k WITH ROLLUP HAVING k IS NULL OR k < 3",
    "SELECT user_id AS k, COUNT(*) FROM t_order GROUP BY k WITH ROLLUP HAVING k IS NOT NULL AND COUNT(*) > 50",
])
def test_rollup_having_null_tests_on_keys_are_answered_by_federation(env: Env, sql: str) -> None:  # noqa: F811
    """MariaDB folds `user_id IS NULL` (a NOT NULL column) to FALSE even on super-aggregate rows, which the
    merge cannot reproduce: it refuses, and federation answers on one MariaDB over copies, as MariaDB does."""
    with env.proxy_conn.cursor() as cur:
        cur.execute(sql)
        got = sorted(cur.fetchall(), key=repr)
    with env.oracle_conn.cursor() as cur:
        cur.execute(sql)
        expected = sorted(cur.fetchall(), key=repr)
    assert got == expected


def test_div_precision_increment_applies_to_computed_items(env: Env) -> None:  # noqa: F811
    sql = "SELECT SUM(amount) / COUNT(*), AVG(amount) / 7, COUNT(*) / 9 FROM t_order"
    for conn in (env.proxy_conn, env.oracle_conn):
        with conn.cursor() as cur:
            cur.execute("SET div_precision_increment = 9")
    try:
        with env.proxy_conn.cursor() as cur:
            cur.execute(sql)
            got = cur.fetchall()
        with env.oracle_conn.cursor() as cur:
            cur.execute(sql)
            expected = cur.fetchall()
        assert _typed(list(got)) == _typed(list(expected))
    finally:
        for conn in (env.proxy_conn, env.oracle_conn):
            with conn.cursor() as cur:
                cur.execute("SET div_precision_increment = 4")


def test_integer_overflow_is_mariadbs_error(env: Env) -> None:  # noqa: F811
    sql = "SELECT COUNT(*) * 9223372036854775807 FROM t_order"
    with pytest.raises(pymysql.MySQLError) as oracle:
        with env.oracle_conn.cursor() as cur:
            cur.execute(sql)
    with pytest.raises(pymysql.MySQLError) as proxied:
        with env.proxy_conn.cursor() as cur:
            cur.execute(sql)
    assert proxied.value.args[0] == oracle.value.args[0] == 1690


@pytest.mark.parametrize("mode", MODES)
def test_insert_without_column_list_gets_a_generated_key(clients: dict[str, tuple[Client, Client]], mode: str) -> None:
    """Issue 17 (3): INSERT INTO t VALUES (...) with a value for every column but the generated key."""
    proxy_client, _ = clients[mode]
    user = 777 if mode == "text" else 778
    try:
        proxy_client.run(f"INSERT INTO t_order VALUES ({user}, 'gen', 1.50, 2.5, '2024-01-02 03:04:05', NULL), "
                         f"({user}, 'gen2', NULL, NULL, NULL, 'n')")
        _, rows, _ = proxy_client.run(f"SELECT order_id, status, amount, note FROM t_order WHERE user_id = {user} "
                                      "ORDER BY status")
        assert [r[1:] for r in rows] == [("gen", rows[0][2], None), ("gen2", None, "n")]
        assert str(rows[0][2]) == "1.50"
        assert rows[0][0] != rows[1][0] and all(isinstance(r[0], int) and r[0] > 0 for r in rows)
    finally:
        proxy_client.run(f"DELETE FROM t_order WHERE user_id = {user}")


def test_show_table_metadata_follows_ddl_through_the_proxy(env: Env) -> None:  # noqa: F811
    """Issue 17 (2): SHOW TABLE METADATA lists the logic table's columns and indexes as loaded from the data
    sources, and a DDL through the proxy refreshes them."""

    def rows() -> list[tuple[Any, ...]]:
        with env.proxy_conn.cursor() as cur:
            cur.execute("SHOW TABLE METADATA t_order")
            assert [d[0] for d in cur.description] == ["database_name", "table_name", "type", "name", "value"]
            return list(cur.fetchall())

    before = rows()
    assert [(r[2], r[3]) for r in before if r[2] == "COLUMN"] == [("COLUMN", c) for c in
                                                                ("order_id", "user_id", "status", "amount", "price",
                                                                 "created", "note")]
    assert ("INDEX", "PRIMARY") in [(r[2], r[3]) for r in before]
    with env.proxy_conn.cursor() as cur:
        cur.execute("CREATE INDEX i17_created ON t_order (created)")
    try:
        assert ("INDEX", "i17_created") in [(r[2], r[3]) for r in rows()]
    finally:
        with env.proxy_conn.cursor() as cur:
            cur.execute("DROP INDEX i17_created ON t_order")
    assert ("INDEX", "i17_created") not in [(r[2], r[3]) for r in rows()]


def test_node_differences_are_logged(env: Env, mariadb_shards: list[MariaDBServer]) -> None:  # noqa: F811
    """Issue 17 (2): an actual table that differs from the logic table's first one is reported when the
    metadata is (re)loaded."""
    import structlog

    server = mariadb_shards[1]
    server.execute("ALTER TABLE diff_ds_1.t_order_1 ADD COLUMN i17_extra INT NULL")
    try:
        with structlog.testing.capture_logs() as events:
            with env.proxy_conn.cursor() as cur:
                cur.execute("REFRESH TABLE METADATA")
        found = [e for e in events if e.get("event") == "table_metadata_differs" and e.get("table") == "t_order"]
        assert found and "i17_extra" in found[0]["difference"] and "t_order_1" in found[0]["difference"]
    finally:
        server.execute("ALTER TABLE diff_ds_1.t_order_1 DROP COLUMN i17_extra")
        with env.proxy_conn.cursor() as cur:
            cur.execute("REFRESH TABLE METADATA")


# (sql with ? parameters, the parameters): prepared statements whose parameters are in computed items
PARAM_CASES: list[tuple[str, tuple[Any, ...]]] = [
    ("SELECT COUNT(*) + ?, ROUND(AVG(amount), ?) FROM t_order WHERE user_id < ?", (5, 1, 20)),
    ("SELECT user_id, SUM(amount) / ? AS s FROM t_order GROUP BY user_id HAVING s > ? ORDER BY s DESC, user_id LIMIT ?", (3, 4000, 6)),
    ("SELECT user_id, IFNULL(MAX(price), ?) FROM t_order WHERE user_id IN (?, ?) GROUP BY user_id WITH ROLLUP", (-1, 3, 999)),
    ("SELECT user_id, GROUP_CONCAT(DISTINCT amount ORDER BY amount SEPARATOR '|'), COUNT(amount) * ? FROM t_order WHERE user_id < ? GROUP BY user_id", (2, 4)),
]


@pytest.mark.parametrize(("sql", "params"), PARAM_CASES, ids=[c[0][:80] for c in PARAM_CASES])
def test_prepared_parameters_in_computed_items(env: Env, mariadb_shards: list[MariaDBServer], sql: str,  # noqa: F811
                                               params: tuple[Any, ...]) -> None:
    import mysql.connector

    s0 = mariadb_shards[0]
    answers = []
    for host, port, password, database in ((env.proxy.host, env.proxy.port, "root", "sharding_db"),
                                           (s0.host, s0.port, s0.password, ORACLE_DB)):
        conn = mysql.connector.connect(host=host, port=port, user="root", password=password, database=database,
                                       use_pure=True, ssl_disabled=True, autocommit=True)
        try:
            cur = conn.cursor(prepared=True)
            cur.execute(sql, params)
            answers.append(([d[0] for d in cur.description], [tuple(r) for r in cur.fetchall()]))
            cur.close()
        finally:
            conn.close()
    got, expected = answers
    assert got[0] == expected[0]
    assert _typed(got[1]) == _typed(expected[1])
