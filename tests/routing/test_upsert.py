# ruff: noqa: E501  (table-driven)
"""Upserts on unique keys without the sharding columns (issue 13, item 11): what the kernel hands the proxy."""

from __future__ import annotations

import pytest

from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.model import ColumnInfo, DatabaseRules, DataNode, UniqueKey
from tests.routing.conftest import build_rules

TYPES = {"status": ColumnInfo("status", "varchar", charset="utf8mb4", collation="utf8mb4_general_ci"),
         "code": ColumnInfo("code", "char", length=4, charset="latin1", collation="latin1_bin"),
         "day": ColumnInfo("day", "date"),
         "order_item_id": ColumnInfo("order_item_id", "bigint", nullable=False)}


class Metadata:
    def __init__(self, keys: dict[str, tuple[UniqueKey, ...]]) -> None:
        self.keys = keys

    def columns(self, table: str) -> list[str] | None:
        return {"t_order": ["order_id", "user_id", "status"],
                "t_order_item": ["order_item_id", "order_id", "user_id", "status"]}.get(table)

    def single_table_data_source(self, table: str) -> str | None:
        return None

    def unique_keys(self, table: str) -> tuple[UniqueKey, ...]:
        return self.keys.get(table, ())

    def column_info(self, table: str, column: str) -> ColumnInfo | None:
        return TYPES.get(column, ColumnInfo(column, "bigint"))


PK_ORDER = {"t_order": (UniqueKey("PRIMARY", ("order_id",)),)}


def kernel(keys: dict[str, tuple[UniqueKey, ...]], rules: DatabaseRules | None = None) -> ShardingKernel:
    return ShardingKernel(rules or build_rules(with_keygen=False), Metadata(keys))


@pytest.mark.parametrize("sql", [
    "INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a') ON DUPLICATE KEY UPDATE status = 'b'",
    "REPLACE INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a')",
    "INSERT IGNORE INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a')",
])
def test_keys_with_the_sharding_columns_change_nothing(sql: str) -> None:
    """The ordinary case: no check, so no lookup, no lock, no extra round trip."""
    k = kernel({"t_order": (UniqueKey("PRIMARY", ("user_id", "order_id")), UniqueKey("u", ("order_id", "status", "user_id")))})
    assert k.route(sql).upsert is None
    assert kernel({}).route(sql).upsert is None  # no keys known
    assert kernel(PK_ORDER).route(sql.replace(" IGNORE", "").replace("REPLACE", "INSERT").split(" ON ")[0]).upsert is None


def test_a_key_without_the_database_column_is_checked_on_every_data_source() -> None:
    routed = kernel(PK_ORDER).route(
        "INSERT INTO t_order (order_id, user_id, status) VALUES (5, 2, 'a'), (6, 1, 'b') ON DUPLICATE KEY UPDATE status = VALUES(status)")
    check = routed.upsert
    assert check is not None and check.mode == "update" and check.lock_source == "ds_0"
    assert [r.home for r in check.rows] == [DataNode("ds_0", "t_order_1"), DataNode("ds_1", "t_order_0")]
    assert [kv.candidates for r in check.rows for kv in r.keys] == [
        (DataNode("ds_0", "t_order_1"), DataNode("ds_1", "t_order_1")),  # order_id still routes the table
        (DataNode("ds_0", "t_order_0"), DataNode("ds_1", "t_order_0")),
    ]
    assert {str(n): check.probe(n, rows, "utf8mb4").sql for n, rows in check.probe_nodes().items()} == {
        "ds_1.t_order_1": "SELECT 1 FROM `t_order_1` WHERE (`order_id` = 5) LIMIT 1 FOR UPDATE",
        "ds_0.t_order_0": "SELECT 1 FROM `t_order_0` WHERE (`order_id` = 6) LIMIT 1 FOR UPDATE",
    }
    unit, keys = check.lookup(0, DataNode("ds_1", "t_order_1"), "utf8mb4")
    assert (unit.data_source, unit.sql, keys) == (
        "ds_1", "SELECT (`order_id` = 5) IS TRUE FROM `t_order_1` WHERE (`order_id` = 5) FOR UPDATE", (0,))
    # row 1 alone, for the node holding the row it conflicts with
    assert check.statement(0, DataNode("ds_1", "t_order_1")).sql == (
        "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (5, 2, 'a') ON DUPLICATE KEY UPDATE status = VALUES(status)")
    assert check.delete(0, DataNode("ds_1", "t_order_1"), 0, "utf8mb4").sql == "DELETE FROM `t_order_1` WHERE `order_id` = 5"
    names, sql = check.lock_names("utf8mb4")
    assert sql is None and len({n for per in names for n in per}) == 2


def test_equal_integer_values_share_a_lock_whatever_their_form() -> None:
    routed = kernel(PK_ORDER).route("REPLACE INTO t_order (order_id, user_id, status) VALUES (?, ?, 'a'), ('7', 2, 'b'), (7.0, 3, 'c')",
                                    [7, 1])
    names, _ = routed.upsert.lock_names("utf8mb4")
    assert len({per[0] for per in names}) == 1


def test_text_values_are_named_and_compared_by_the_server() -> None:
    keys = {"t_order": (UniqueKey("PRIMARY", ("user_id", "order_id")), UniqueKey("uk_status", ("status",)))}
    routed = kernel(keys).route("INSERT IGNORE INTO t_order (order_id, user_id, status) VALUES (?, ?, ?)", [1, 2, b"A'b"])
    check = routed.upsert
    names, sql = check.lock_names("utf8mb4")
    assert names == [[None, ""]]
    assert sql == ("SELECT CONCAT('shp:', SHA1(CONCAT_WS(CHAR(31), _utf8mb4 X'7368617264696e675f6462', _utf8mb4 X'745f6f72646572', "
                   "_utf8mb4 X'756b5f737461747573', HEX(WEIGHT_STRING(CONVERT(RTRIM(CONCAT(_utf8mb4 X'412762')) USING utf8mb4) "
                   "COLLATE utf8mb4_general_ci)))))")
    # every node may hold the status; the row's own node also gets its PRIMARY KEY looked up
    unit, keys_found = check.lookup(0, DataNode("ds_0", "t_order_1"), "utf8mb4")
    assert keys_found == (0, 1) and "`status` = CONCAT(_utf8mb4 X'412762')" in unit.sql and "`user_id` = 2 AND `order_id` = 1" in unit.sql
    assert len(check.rows[0].keys[1].candidates) == 4


def test_other_types_are_cast_to_the_column_type() -> None:
    keys = {"t_order_item": (UniqueKey("PRIMARY", ("order_item_id",)), UniqueKey("uk", ("code", "day")))}
    k = kernel(keys)
    k.metadata.columns = lambda t: ["order_item_id", "order_id", "user_id", "code", "day"]  # type: ignore[method-assign]
    check = k.route("INSERT IGNORE INTO t_order_item VALUES (1, 2, 3, 'ab', '2024-01-02')").upsert
    assert check.spec.keys[1].coarse  # a DATE: one lock for the key
    unit, _ = check.lookup(0, DataNode("ds_0", "t_order_item_0"), "utf8mb4")
    assert "`code` = CONCAT('ab') AND `day` = CAST('2024-01-02' AS DATE)" in unit.sql


@pytest.mark.parametrize(("sql", "words"), [
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (1 + 1, 1, 'a') ON DUPLICATE KEY UPDATE status = 'b'", ("order_id", "PRIMARY", "literal")),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a') ON DUPLICATE KEY UPDATE order_id = 3", ("order_id",)),
    ("REPLACE INTO t_order_item (order_id, user_id, status) VALUES (1, 1, 'a')", ("order_item_id", "default")),
    ("INSERT IGNORE INTO t_order (order_id, user_id, status) VALUES (1.5, 1, 'a')", ("order_id", "integer")),
])
def test_what_cannot_be_decided_exactly_is_refused(sql: str, words: tuple[str, ...]) -> None:
    with pytest.raises(RoutingError) as info:
        kernel({**PK_ORDER, "t_order_item": (UniqueKey("PRIMARY", ("order_item_id",)),)}).route(sql)
    assert info.value.errno == 1235 and "t_order" in info.value.message
    for word in words:
        assert word in info.value.message, info.value.message


def test_identity_assignments_are_no_change() -> None:
    k = kernel({"t_order_item": (UniqueKey("PRIMARY", ("order_item_id",)),)})
    sql = "INSERT INTO t_order_item (order_item_id, order_id, user_id) VALUES (1, 2, 3) ON DUPLICATE KEY UPDATE order_item_id = order_item_id, user_id = user_id"
    assert k.route(sql).upsert is not None
    assert k.route(sql.replace("order_item_id = order_item_id", "order_item_id = LAST_INSERT_ID(order_item_id)")).upsert
    with pytest.raises(RoutingError, match="unique key PRIMARY"):
        k.route(sql.replace("order_item_id = order_item_id", "order_item_id = VALUES(order_item_id)"))


def test_generated_keys_and_null_values_need_no_check() -> None:
    k = kernel(PK_ORDER, build_rules(with_keygen=True))
    assert k.route("INSERT INTO t_order (user_id, status) VALUES (1, 'a') ON DUPLICATE KEY UPDATE status = 'b'").upsert is None
    keys = {"t_order": (UniqueKey("PRIMARY", ("user_id", "order_id")), UniqueKey("uk_status", ("status",)))}
    assert kernel(keys).route("REPLACE INTO t_order (order_id, user_id, status) VALUES (1, 1, NULL)").upsert is None
    assert kernel(keys).route("REPLACE INTO t_order (order_id, user_id, status) VALUES (1, 1, ?)", [None]).upsert is None
    assert kernel(keys).route("REPLACE INTO t_order (order_id, user_id, status) VALUES (1, 1, ?)", [b"x"]).upsert is not None
