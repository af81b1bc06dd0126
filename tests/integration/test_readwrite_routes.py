"""A read is routed to the same members of a read/write splitting group whichever engine runs it (issue 33, section 2).

ShardingSphere's `dbtbl_with_readwrite_splitting` scenario: t_order and t_order_item (bound) sharded over two
read/write splitting groups, each a write data source and one read data source. The write and read databases are
plain databases on one server holding the same keys with different `status` values ('write' / 'read'), as the
scenario's datasets do, so every row tells which member answered. Every read of the scenario goes to the read
data sources: literal and prepared, in a fresh session (the statement first) and a warm one (other reads, and
the statement itself, before).

The scenario's `SELECT * FROM t_order o LEFT JOIN t_order_item m ...` over several nodes is answered by federation
(the kernel does not expand `*` over two tables for the merge): its copies read the replicas, but the host data
source, where the scratch tables live and the statement is answered (reading the host's own rows there), took the
group's primary. Federation now takes every connection with the access of any plain read (`units.access`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """\
- !SHARDING
  tables:
    t_order:
      actualDataNodes: readwrite_ds_${0..1}.t_order_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
      tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: t_order_inline}}
    t_order_item:
      actualDataNodes: readwrite_ds_${0..1}.t_order_item_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
      tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: t_item_inline}}
  bindingTables:
    - t_order,t_order_item
  shardingAlgorithms:
    db_inline: {type: INLINE, props: {algorithm-expression: 'readwrite_ds_${user_id % 2}'}}
    t_order_inline: {type: INLINE, props: {algorithm-expression: 't_order_${order_id % 2}'}}
    t_item_inline: {type: INLINE, props: {algorithm-expression: 't_order_item_${order_id % 2}'}}
- !READWRITE_SPLITTING
  dataSourceGroups:
    readwrite_ds_0: {writeDataSourceName: write_ds_0, readDataSourceNames: [read_ds_0], loadBalancerName: rr}
    readwrite_ds_1: {writeDataSourceName: write_ds_1, readDataSourceNames: [read_ds_1], loadBalancerName: rr}
  loadBalancers:
    rr: {type: ROUND_ROBIN}
"""

ORDERS = [(1000 + i, i % 4) for i in range(8)]  # (order_id, user_id): every node has orders
ITEMS = [(100_000 + 10 * o + k, o, u) for o, u in ORDERS for k in range(2) if o != 1007]  # 1007 has none
_NAMES = itertools.count()

JOIN = ("SELECT * FROM t_order o LEFT JOIN t_order_item m ON o.order_id = m.order_id AND o.user_id = m.user_id "
        "ORDER BY o.order_id, m.item_id")
# (statement, parameters of its prepared form): every read of the scenario, the join first
READS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "left join": (JOIN, ()),
    "left join, one node": (JOIN.replace("ORDER BY", "WHERE o.user_id = %s AND o.order_id = %s ORDER BY"),
                            (0, 1000)),
    "inner join": (JOIN.replace("LEFT JOIN", "JOIN"), ()),
    "join with a filter": (JOIN.replace("ORDER BY", "WHERE o.order_id IN (%s, %s, %s) ORDER BY"),
                           (1001, 1002, 1004)),
    "scatter": ("SELECT * FROM t_order ORDER BY order_id", ()),
    "one node": ("SELECT * FROM t_order WHERE user_id = %s AND order_id = %s", (1, 1001)),
    "one data source": ("SELECT * FROM t_order WHERE user_id = %s ORDER BY order_id", (1,)),
    "aggregate": ("SELECT status, COUNT(*) FROM t_order_item GROUP BY status", ()),
}


class Env:
    def __init__(self, server: MariaDBServer, tmp_path: Path) -> None:
        n = next(_NAMES)
        sources: dict[str, tuple[MariaDBServer, str]] = {}
        for role in ("write", "read"):
            for i in (0, 1):
                db = f"rwr{n}_{role}_{i}"
                sources[f"{role}_ds_{i}"] = (server, db)
                server.execute(f"CREATE DATABASE {db}")
                for t in (0, 1):
                    server.execute(f"CREATE TABLE {db}.t_order_{t} (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, "
                                   f"status VARCHAR(45))")
                    server.execute(f"CREATE TABLE {db}.t_order_item_{t} (item_id BIGINT PRIMARY KEY, order_id BIGINT "
                                   f"NOT NULL, user_id INT NOT NULL, status VARCHAR(45))")
                for o, u in ORDERS:
                    if u % 2 == i:
                        server.execute(f"INSERT INTO {db}.t_order_{o % 2} VALUES ({o}, {u}, '{role}')")
                for item, o, u in ITEMS:
                    if u % 2 == i:
                        server.execute(f"INSERT INTO {db}.t_order_item_{o % 2} VALUES ({item}, {o}, {u}, '{role}')")
        conf = write_conf(tmp_path / "conf", {"rwr_db": sources}, rules_yaml={"rwr_db": RULES})
        self.proxy: RunningProxy = start_proxy(conf)

    def connect(self) -> Any:
        return mysql.connector.connect(host=self.proxy.host, port=self.proxy.port, user="root", password="root",
                                       database="rwr_db", autocommit=True, use_pure=True)


@pytest.fixture(scope="module")
def env(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = Env(mariadb, tmp_path_factory.mktemp("readwrite_routes"))
    yield e
    e.proxy.stop()


def _rows(conn: Any, sql: str, params: tuple[Any, ...], mode: str) -> list[tuple[Any, ...]]:
    cur = conn.cursor(prepared=True) if mode == "prepared" else conn.cursor()
    try:
        if mode == "prepared":
            cur.execute(sql.replace("%s", "?"), params)
        else:
            cur.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


def _members(rows: list[tuple[Any, ...]]) -> set[str]:
    """Which members answered: every 'write' / 'read' status in the rows (bytes or str)."""
    out = set()
    for row in rows:
        for v in row:
            v = v.decode() if isinstance(v, bytes | bytearray) else v
            if v in ("write", "read"):
                out.add(v)
    return out


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
@pytest.mark.parametrize("mode", ["literal", "prepared"])
@pytest.mark.parametrize("read", list(READS))
def test_every_read_goes_to_the_read_data_sources(env: Env, read: str, mode: str, warm: bool) -> None:
    sql, params = READS[read]
    conn = env.connect()
    try:
        if warm:
            for other, other_params in READS.values():
                _rows(conn, other, other_params, mode)
            _rows(conn, sql, params, mode)
        rows = _rows(conn, sql, params, mode)
        assert rows, read
        assert _members(rows) == {"read"}, rows
    finally:
        conn.close()


def test_the_join_reads_every_row_of_the_read_data_sources(env: Env) -> None:
    """The join's rows are the read data sources' rows, in the statement's order, whichever engine answered."""
    conn = env.connect()
    try:
        for mode in ("literal", "prepared", "literal"):
            rows = _rows(conn, JOIN, (), mode)
            assert [(r[0], r[3]) for r in rows] == [
                (o, item) for o, _u in ORDERS for item in ([i for i, io, _ in ITEMS if io == o] or [None])], mode
            assert _members(rows) == {"read"}, mode
    finally:
        conn.close()


def _by_group(rows: list[tuple[Any, ...]]) -> dict[int, set[str]]:
    """Group (user_id % 2) -> the members that answered its rows (t_order's user_id and status come second and
    third in both the join's rows and t_order's)."""
    out: dict[int, set[str]] = {}
    for row in rows:
        status = row[2].decode() if isinstance(row[2], bytes | bytearray) else row[2]
        out.setdefault(int(row[1]) % 2, set()).add(status)
    return out


# the session's situation -> the statements that make it, and the member each group's reads then go to
SITUATIONS: dict[str, tuple[list[str], dict[int, set[str]]]] = {
    "plain": ([], {0: {"read"}, 1: {"read"}}),
    # transactionalReadQueryStrategy PRIMARY (the default): every read of the transaction on the primaries
    "in a transaction": (["BEGIN"], {0: {"write"}, 1: {"write"}}),
    # readAfterWrite SESSION (the default): a group the session wrote to is read on its primary from then on
    "after a write to group 0": (["UPDATE t_order SET status = status WHERE user_id = 0 AND order_id = 1000"],
                                 {0: {"write"}, 1: {"read"}}),
}


@pytest.mark.parametrize("mode", ["literal", "prepared"])
@pytest.mark.parametrize("situation", list(SITUATIONS))
def test_the_join_reads_where_the_session_reads(env: Env, situation: str, mode: str) -> None:
    """The join (answered by federation: the kernel does not expand `*` over two tables) and a merged scatter read
    of the same groups take the same members in every situation of the session."""
    before, expected = SITUATIONS[situation]
    conn = env.connect()
    try:
        for sql in before:
            _rows(conn, sql, (), "literal")
        scatter = _rows(conn, "SELECT * FROM t_order ORDER BY order_id", (), mode)
        join = _rows(conn, JOIN, (), mode)
        assert _by_group(join) == _by_group(scatter) == expected
    finally:
        conn.close()
