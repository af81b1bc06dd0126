"""Column definitions at COM_STMT_PREPARE equal MariaDB's (issue 34 item 4).

Each statement is prepared through the proxy (on ``sharding_db``) and on the oracle database ``sht_oracle_db``,
which holds the same t_order / t_order_item tables unsharded; the PREPARE answers' column definitions are compared
field by field: name, org_name, type, flags, decimals, column length, charset, and table / org_table in logic form
(the proxy names t_order_0 as t_order; the schema is the logical database's where MariaDB names one).
"""

from __future__ import annotations

from typing import Any

import mysql.connector
import pytest

from protocol.binary import ComStmtClose, ComStmtExecute, ComStmtPrepare, PrepareResponse, StmtPrepareOK
from protocol.packets import ColumnDefinition41, is_eof, is_err
from tests.integration.sharding_fixtures import ShardedEnv
from tests.integration.test_malformed import RawClient

pytestmark = pytest.mark.integration

# (id, statement, parameters for an EXECUTE): one line per case
CASES: list[tuple[str, str, tuple[Any, ...]]] = [
    ("point", "SELECT * FROM t_order WHERE order_id = ? AND user_id = ?", (1, 1)),
    ("where-subquery", "SELECT order_id, status FROM t_order WHERE order_id IN "
                       "(SELECT order_id FROM t_order_item WHERE user_id = ?)", (1,)),
    ("scalar-subquery", "SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) "
                        "AS n FROM t_order o WHERE o.user_id = ?", (1,)),
    ("exists", "SELECT user_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i "
               "WHERE i.order_id = o.order_id) AND o.order_id = ?", (1,)),
    ("derived", "SELECT d.user_id, d.c FROM (SELECT user_id, COUNT(*) AS c FROM t_order GROUP BY user_id) d "
                "WHERE d.c > ?", (0,)),
    ("cte", "WITH c AS (SELECT order_id, status FROM t_order WHERE user_id = ?) SELECT * FROM c", (1,)),
    ("recursive-cte", "WITH RECURSIVE r (n) AS (SELECT ? UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
                      "SELECT n FROM r", (1,)),
    ("recursive-cte-table", "WITH RECURSIVE r (n) AS (SELECT ? UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
                            "SELECT r.n, o.status FROM r JOIN t_order o ON o.order_id = r.n", (1,)),
    ("union", "SELECT order_id FROM t_order WHERE user_id = ? UNION SELECT order_id FROM t_order_item "
              "WHERE user_id = ?", (1, 1)),
    ("param-alias", "SELECT ? AS p", ("x",)),
    ("param-and-column", "SELECT ? AS p, status FROM t_order WHERE order_id = ?", ("x", 1)),
    ("insert-function", "SELECT INSERT(status, 2, 1, 'XX') FROM t_order WHERE order_id = ?", (1,)),
    ("aggregates", "SELECT user_id, COUNT(*), SUM(order_id), AVG(order_id), MAX(status) FROM t_order "
                   "WHERE status <> ? GROUP BY user_id", ("x",)),
    ("join", "SELECT o.order_id, i.order_item_id, i.status FROM t_order o JOIN t_order_item i "
             "ON o.order_id = i.order_id AND o.user_id = i.user_id WHERE o.user_id = ?", (1,)),
    ("federated-join", "SELECT o.order_id, i.status FROM t_order o JOIN t_order_item i ON o.status = i.status "
                       "WHERE o.status <> ?", ("x",)),
    # a long text (over proxy.execution.decide.OFF_LOOP_TEXT): described from its routed variant first, from
    # its own text when that routes nowhere
    ("long-in-list", "SELECT order_id, status FROM t_order WHERE order_id IN ("
                     + ", ".join(str(i) for i in range(4000)) + ") AND user_id = ?", (1,)),
    ("long-subquery", "SELECT o.order_id, (SELECT MAX(i.status) FROM t_order_item i WHERE i.order_id = o.order_id) "
                      "AS s FROM t_order o WHERE o.order_id IN (" + ", ".join(str(i) for i in range(4000))
                      + ") AND o.user_id = ?", (1,)),
    ("federated-aggregate", "SELECT o.status, COUNT(*) AS n FROM t_order o JOIN t_order_item i "
                            "ON o.user_id = i.order_id WHERE i.status <> ? GROUP BY o.status", ("x",)),
]


def _raw(env: ShardedEnv, *, oracle: bool) -> RawClient:
    if oracle:
        server = env.servers[0]
        c = RawClient(server.host, server.port)
        answer = c.login("root", server.password, database=env.oracle_db)
    else:
        c = RawClient(env.proxy.host, env.proxy.port)
        answer = c.login("root", "root", database="sharding_db")
    assert answer[:1] == b"\x00", answer
    return c


def _prepare(c: RawClient, sql: str) -> PrepareResponse:
    c.send(ComStmtPrepare(sql.encode()).encode())
    first = c.read()[1]
    assert not is_err(first), first
    ok = StmtPrepareOK.decode(first)
    return PrepareResponse.decode([first, *(c.read()[1] for _ in range(ok.following_packets(False)))], False)


def _execute_columns(c: RawClient, stmt_id: int, params: tuple[Any, ...]) -> list[ColumnDefinition41]:
    """The column definitions of the binary result set of one EXECUTE (its rows are read and dropped)."""
    c.send(ComStmtExecute(stmt_id, 0, 1, params, (), True).encode())
    first = c.read()[1]
    assert not is_err(first), first
    columns = [ColumnDefinition41.decode(c.read()[1]) for _ in range(first[0])]
    assert is_eof(c.read()[1])
    while True:
        p = c.read()[1]
        assert not is_err(p), p
        if is_eof(p):
            return columns


def _logic(name: str) -> str:
    """t_order_0 -> t_order (the oracle's tables have the logic names already)."""
    for logic in ("t_order_item", "t_order"):
        if name.lower().startswith(logic + "_") and name[len(logic) + 1:].isdigit():
            return logic
    return name


def _fields(c: ColumnDefinition41) -> dict[str, Any]:
    return {"name": c.name, "org_name": c.org_name, "type": int(c.type), "flags": c.flags, "decimals": c.decimals,
            "length": c.column_length, "charset": c.character_set, "table": _logic(c.table),
            "org_table": _logic(c.org_table), "schema": bool(c.schema)}


def _executed(c: ColumnDefinition41, federated: bool) -> tuple[Any, ...]:
    return (c.name, _logic(c.table), None if federated else _logic(c.org_table), int(c.type), c.character_set,
            c.flags, c.decimals, c.column_length)


@pytest.mark.parametrize(("sql", "params"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_prepare_columns_equal_mariadb(sharded_env: ShardedEnv, sql: str, params: tuple[Any, ...]) -> None:
    proxy, oracle = _raw(sharded_env, oracle=False), _raw(sharded_env, oracle=True)
    try:
        got, want = _prepare(proxy, sql), _prepare(oracle, sql)
        assert got.ok.num_params == want.ok.num_params
        assert [_fields(c) for c in got.columns] == [_fields(c) for c in want.columns]
        assert all(c.schema == "sharding_db" for c in got.columns if c.schema)
        # what EXECUTE sends for those columns: MariaDB's own EXECUTE answer field by field (a column of a `?` has
        # the bound value's type there, not PREPARE's NULL), with the names and tables PREPARE gave; a federated
        # statement's result still names its scratch copies as org_table, text and binary alike (the federation
        # executor relays the host's column definitions as they are): not compared
        executed = _execute_columns(proxy, got.ok.statement_id, params)
        expected = _execute_columns(oracle, want.ok.statement_id, params)
        federated = any(c.org_table.startswith("__shardproxy_fed_") for c in executed)
        assert [_executed(c, federated) for c in executed] == [_executed(c, federated) for c in expected]
        assert [(c.name, _logic(c.table)) for c in executed] == [(c.name, _logic(c.table)) for c in got.columns]
        proxy.send(ComStmtClose(got.ok.statement_id).encode())
    finally:
        proxy.sock.close()
        oracle.sock.close()


# a client library's bound types (mysql-connector binds 1 as TINY UNSIGNED, a str as STRING): MariaDB types a column
# built from a parameter by them
BOUND: list[tuple[str, tuple[Any, ...]]] = [
    ("SELECT ? AS p", ("x",)),
    ("SELECT ? AS p", (1,)),
    ("SELECT ? AS p, ? AS q", (-5, 3.5)),
    ("WITH RECURSIVE r (n) AS (SELECT ? UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r", (1,)),
    ("WITH c AS (SELECT ? AS p) SELECT c.p, o.status FROM c JOIN t_order o ON o.order_id = ?", ("x", 1)),
    ("SELECT d.p FROM (SELECT ? AS p) d", (300,)),
    ("SELECT ? AS p, status FROM t_order WHERE order_id = ?", ("x", 1)),
    ("SELECT ? AS p, status FROM t_order WHERE status <> ?", (1, "x")),
    ("SELECT o.status, ? AS p FROM t_order o JOIN t_order_item i ON o.status = i.status WHERE o.status <> ?",
     (7, "x")),
]


@pytest.mark.parametrize(("sql", "params"), BOUND)
def test_executed_columns_follow_bound_types(sharded_env: ShardedEnv, sql: str, params: tuple[Any, ...]) -> None:
    s0 = sharded_env.servers[0]
    descriptions = []
    for host, port, db, password in ((sharded_env.proxy.host, sharded_env.proxy.port, "sharding_db", "root"),
                                     (s0.host, s0.port, sharded_env.oracle_db, s0.password)):
        conn = mysql.connector.connect(host=host, port=port, user="root", password=password, database=db,
                                       use_pure=True, ssl_disabled=True, autocommit=True)
        try:
            cur = conn.cursor(prepared=True)
            cur.execute(sql, params)
            cur.fetchall()
            descriptions.append([(d[0], d[1], d[7], d[8]) for d in cur.description])  # name, type, flags, charset
        finally:
            conn.close()
    assert descriptions[0] == descriptions[1]
