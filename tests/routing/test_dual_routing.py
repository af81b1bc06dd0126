"""The resharding window (`oldDatabaseStrategy`, `dualRouting`): config loading and the kernel's routes.

The rule is the seed's order database expansion: `datasource-name` expanded to four data sources by
CONSISTENT_HASH on user_id, the old strategy pinning every row to `datasource-name`. U0000000001 hashes to
`datasource-name-1` (the seed's own test), U0000000002 to `datasource-name` itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from routing.config import load_database_rules, load_yaml
from routing.dualread import pick_winners
from routing.errors import ConfigError, RoutingError
from routing.kernel import ShardingKernel
from routing.model import ColumnInfo, DataNode, UniqueKey
from routing.route import precise_group, route_table

SEED = """
databaseName: order_db
dataSources:
  datasource-name: {}
  datasource-name-1: {}
  datasource-name-2: {}
  datasource-name-3: {}
rules:
- !SHARDING
  oldDatabaseStrategy:
    standard: {shardingColumn: user_id, shardingAlgorithmName: old_ds}
  defaultDatabaseStrategy:
    standard: {shardingColumn: user_id, shardingAlgorithmName: ring}
  tables:
    table_0:
      actualDataNodes: datasource-name.table_0_$->{0..63},datasource-name-$->{1..3}.table_0_$->{0..63}
      tableStrategy:
        standard: {shardingColumn: user_id, shardingAlgorithmName: t64}
    t_order_info:
      actualDataNodes: datasource-name.t_order_info, datasource-name-$->{1..3}.t_order_info
      dualRouting: {keyColumn: id, versionColumn: update_time}
    t_plain:
      actualDataNodes: datasource-name.t_plain, datasource-name-$->{1..3}.t_plain
      oldDatabaseStrategy:
        none:
  shardingAlgorithms:
    old_ds: {type: INLINE, props: {algorithm-expression: datasource-name}}
    ring: {type: CONSISTENT_HASH}
    t64: {type: HASH_MOD, props: {sharding-count: 64}}
"""

DS0, DS1 = "datasource-name", "datasource-name-1"
ALL = [DS0, DS1, "datasource-name-2", "datasource-name-3"]
COLUMNS = {"id": "varchar", "user_id": "varchar", "update_time": "datetime", "amount": "int"}


class Meta:
    def columns(self, table: str) -> list[str] | None:
        return list(COLUMNS)

    def single_table_data_source(self, table: str) -> str | None:
        return None

    def unique_keys(self, table: str) -> tuple[UniqueKey, ...]:
        return (UniqueKey("PRIMARY", ("id",)),)

    def column_info(self, table: str, column: str) -> ColumnInfo | None:
        kind = COLUMNS.get(column)
        return ColumnInfo(column, kind) if kind else None


def kernel(text: str = SEED) -> ShardingKernel:
    return ShardingKernel(load_database_rules(load_yaml(text)), Meta())


def test_seed_config_loads_unchanged() -> None:
    rules = load_database_rules(load_yaml(SEED))
    assert rules.data_sources == tuple(ALL)
    assert rules.sharding is not None
    info = rules.sharding.tables["t_order_info"]
    assert info.window is not None and (info.window.key_column, info.window.version_column) == ("id", "update_time")
    assert len(rules.sharding.tables["table_0"].data_nodes) == 256
    one = [precise_group({"user_id": "U0000000001"})]
    assert route_table(info, one) == [DataNode(DS1, "t_order_info")]
    assert route_table(info, one, old=True) == [DataNode(DS0, "t_order_info")]
    table_0 = rules.sharding.tables["table_0"]
    # no oldTableStrategy: the old table strategy is the new one
    assert route_table(table_0, one, old=True)[0].table == route_table(table_0, one)[0].table


@pytest.mark.parametrize(
    ("yaml_edit", "message"),
    [
        (("      dualRouting: {keyColumn: id, versionColumn: update_time}\n", "      dualRouting: []\n"), "mapping"),
        (("  oldDatabaseStrategy:\n    standard: {shardingColumn: user_id, shardingAlgorithmName: old_ds}\n", ""),
         "dualRouting needs an oldDatabaseStrategy"),
        (("old_ds: {type: INLINE", "old_ds: {type: HINT_INLINE"), "cannot serve a standard strategy"),
    ],
)
def test_config_errors(yaml_edit: tuple[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        kernel(SEED.replace(*yaml_edit))


U1, U3 = "'U0000000001'", "'U0000000002'"  # new homes: datasource-name-1, datasource-name (= the old one)


@pytest.mark.parametrize(
    ("sql", "params", "sources", "dual"),
    [
        # dual read: old and new nodes, de-duplicated by the proxy
        (f"SELECT * FROM t_order_info WHERE user_id = {U1}", None, [DS0, DS1], True),
        ("SELECT * FROM t_order_info WHERE user_id = ?", ["U0000000001"], [DS0, DS1], True),
        (f"SELECT COUNT(*) FROM t_order_info WHERE user_id IN ({U1}, {U3})", None, [DS0, DS1], True),
        ("SELECT user_id, COUNT(*) FROM t_order_info GROUP BY user_id ORDER BY 2 DESC LIMIT 3", None, ALL, True),
        # old home = new home: one node holds the only copy, no de-duplication needed
        (f"SELECT * FROM t_order_info WHERE user_id = {U3}", None, [DS0], False),
        # dual update, dual delete: both node sets
        (f"UPDATE t_order_info SET amount = 1 WHERE user_id = {U1}", None, [DS0, DS1], False),
        ("DELETE FROM t_order_info WHERE user_id = ?", ["U0000000001"], [DS0, DS1], False),
        (f"DELETE FROM t_order_info WHERE user_id = {U3}", None, [DS0], False),
        # single insert: the new strategy's node only
        (f"INSERT INTO t_order_info (id, user_id) VALUES ('O1', {U1})", None, [DS1], False),
        ("INSERT INTO t_order_info (id, user_id) VALUES (?, ?)", ["O1", "U0000000001"], [DS1], False),
        # a table whose old strategy is `none`: every data source is an old node
        (f"UPDATE t_plain SET amount = 1 WHERE user_id = {U1}", None, ALL, False),
        (f"INSERT INTO t_plain (id, user_id) VALUES ('O1', {U1})", None, [DS1], False),
    ],
)
def test_window_routes(sql: str, params: list[Any] | None, sources: list[str], dual: bool) -> None:
    routed = kernel().route(sql, params)
    assert [u.data_source for u in routed.route_units] == sources
    assert (routed.dual_read is not None) is dual


def test_dual_read_statements() -> None:
    routed = kernel().route("SELECT id, amount FROM t_order_info o WHERE o.user_id = ? ORDER BY id", ["U0000000001"])
    dual = routed.dual_read
    assert [sql for _, sql in dual.key_sql] == [
        "SELECT `id` FROM `t_order_info` o WHERE o.user_id = 'U0000000001' ",
        "SELECT `id` FROM `t_order_info` o WHERE o.user_id = 'U0000000001' ",
    ]
    assert [u.sql for u in routed.execution_units] == [sql for _, sql in dual.key_sql]  # what PREVIEW shows
    assert dual.final.data_source == DS0
    assert dual.temp_table == "t_order_info__dual_read"  # the node table has the logic name: not shadowed
    assert dual.final.sql == "SELECT id, amount FROM t_order_info__dual_read o WHERE o.user_id = ? ORDER BY id"
    assert dual.final.params == ("U0000000001",)
    assert dual.create_sql() == "CREATE TEMPORARY TABLE `t_order_info__dual_read` LIKE `t_order_info`"
    assert dual.copy_sql(DataNode(DS1, "t_order_info"), [b"O1", b"O'2"]) == [
        "SELECT `id`, `user_id`, `update_time`, `amount` FROM `t_order_info` WHERE `id` IN ('O1', 'O\\'2')"]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM t_order_info a JOIN t_order_info b ON a.user_id = b.user_id",
         "resharding window.*joins or nests other table references"),
        ("SELECT * FROM t_order_info a JOIN t_plain b ON a.user_id = b.user_id", "resharding window.*joins"),
        ("SELECT * FROM t_order_info FOR UPDATE", "resharding window.*locking clause"),
        ("SELECT id INTO @x FROM t_order_info LIMIT 1", "resharding window.*INTO clause"),
        ("WITH c AS (SELECT 1 AS one) SELECT * FROM t_order_info, c", "resharding window.*WITH clause"),
        # refused before the window is considered, with reasons of their own
        ("SELECT * FROM t_order_info UNION SELECT * FROM t_order_info", "UNION / INTERSECT / EXCEPT"),
        ("SELECT * FROM t_order_info WHERE id IN (SELECT id FROM t_order_info WHERE amount > 1)", "subquery"),
    ],
)
def test_window_refusals(sql: str, message: str) -> None:
    with pytest.raises(RoutingError, match=message):
        kernel().route(sql)


def test_insert_select_from_a_windowed_table_is_refused() -> None:
    with pytest.raises(RoutingError, match=r"INSERT \.\.\. SELECT reads sharded table t_order_info during its"):
        kernel().route("INSERT INTO t_plain (id, user_id) SELECT id, user_id FROM t_order_info")


OLD, NEW = DataNode(DS0, "t_order_info"), DataNode(DS1, "t_order_info")
COLS = ["id", "user_id", "update_time", "amount"]


def _home(row: dict[str, Any]) -> DataNode:
    return NEW if row["user_id"] == "U0000000001" else OLD


@pytest.mark.parametrize(
    ("version", "copies", "winners"),
    [
        ("update_time", [(OLD, ("O1", "U0000000001", "2026-01-01 00:00:00.000", "1")),
                         (NEW, ("O1", "U0000000001", "2026-01-02 00:00:00.000", "2"))], ["2"]),
        ("update_time", [(NEW, ("O1", "U0000000001", "2026-01-01 00:00:00.000", "2")),
                         (OLD, ("O1", "U0000000001", "2026-01-02 00:00:00.000", "1"))], ["1"]),  # newer wins
        ("update_time", [(OLD, ("O1", "U0000000001", "2026-01-01 00:00:00.000", "1")),
                         (NEW, ("O1", "U0000000001", "2026-01-01 00:00:00.000", "2"))], ["2"]),  # tie: new node
        ("update_time", [(NEW, ("O1", "U0000000001", None, "2")),
                         (OLD, ("O1", "U0000000001", "2026-01-01 00:00:00.000", "1"))], ["1"]),  # NULL is oldest
        (None, [(NEW, ("O1", "U0000000001", "2026-01-01 00:00:00.000", "2")),
                (OLD, ("O1", "U0000000001", "2026-01-09 00:00:00.000", "1"))], ["2"]),  # no version: new node
        (None, [(OLD, ("O1", "U0000000001", None, "1")), (OLD, ("O2", "U0000000001", None, "3"))], ["1", "3"]),
    ],
)
def test_pick_winners(version: str | None, copies: list[Any], winners: list[str]) -> None:
    rules = load_database_rules(load_yaml(SEED))
    assert rules.sharding is not None
    rule = rules.sharding.tables["t_order_info"]
    raw = [(node, tuple(None if v is None else v.encode() for v in row)) for node, row in copies]
    picked = pick_winners(rule, "id", version, COLUMNS, COLS, raw, _home)
    assert [row[3].decode() for row in picked] == winners  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("sql", "params", "key_sql"),
    [
        ("UPDATE t_order_info SET amount = amount + 1 WHERE user_id = ?", ["U0000000001"],
         "SELECT `id` FROM `t_order_info`  WHERE user_id = 'U0000000001'"),
        ("UPDATE t_order_info o SET o.amount = ? WHERE o.user_id = ?", [3, "U0000000001"],
         "SELECT `id` FROM `t_order_info` o  WHERE o.user_id = 'U0000000001'"),
        ("UPDATE t_order_info SET amount = 1", None, "SELECT `id` FROM `t_order_info` "),
        (f"DELETE FROM t_order_info WHERE user_id = {U1} AND amount > 2", None,
         f"SELECT `id` FROM `t_order_info` WHERE user_id = {U1} AND amount > 2"),
    ],
)
def test_dual_write_reconciles_copies_first(sql: str, params: list[Any] | None, key_sql: str) -> None:
    routed = kernel().route(sql, params)
    repair = routed.dual_repair
    assert repair is not None and routed.dual_read is None
    assert {s for _, s in repair.key_sql} == {key_sql}


def test_repair_overwrites_the_losing_copy_with_the_winner() -> None:
    routed = kernel().route(f"DELETE FROM t_order_info WHERE user_id = {U1}")
    repair = routed.dual_repair
    stale = (b"O1", b"U0000000001", b"2026-01-01 00:00:00.000", b"7")
    fresh = (b"O1", b"U0000000001", b"2026-01-02 00:00:00.000", b"8")
    same = (b"O2", b"U0000000001", b"2026-01-02 00:00:00.000", b"9")
    assert repair.repair_sql([(NEW, stale), (OLD, fresh), (OLD, same), (NEW, same)]) == [
        (NEW, "DELETE FROM `t_order_info` WHERE `id` = 'O1'"),
        (NEW, "INSERT INTO `t_order_info` (`id`, `user_id`, `update_time`, `amount`) "
              "VALUES ('O1', 'U0000000001', '2026-01-02 00:00:00.000', '8')"),
    ]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t_order_info WHERE user_id = 'U0000000001'",
    "UPDATE t_order_info SET amount = 1 WHERE user_id = 'U0000000001'",
    "DELETE FROM t_order_info WHERE user_id = 'U0000000001'",
])  # fmt: skip
def test_point_plans_leave_windowed_tables_to_the_dual_routes(sql: str) -> None:
    """A point plan (routing.point) routes by the new strategy only: inside a window the general plan answers."""
    k = kernel()
    for _ in range(2):  # the second call finds the cached plan
        routed = k.route(sql)
        assert {u.data_source for u in routed.route_units} == {DS0, DS1}
        assert k.route_point(sql) is None
