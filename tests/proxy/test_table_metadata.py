# ruff: noqa: E501  (table-driven: one case per line)
"""proxy.backends.table_metadata: indexes, the differences between a logic table's actual tables, SHOW TABLE METADATA."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from proxy.backends import table_metadata as tm
from proxy.backends.runtime import SchemaSnapshot
from routing.model import ColumnInfo
from tests.routing.conftest import build_rules

INT = ColumnInfo("order_id", "bigint", nullable=False)
UID = ColumnInfo("user_id", "int", nullable=False)
STATUS = ColumnInfo("status", "varchar", length=45, charset="utf8mb4", collation="utf8mb4_general_ci")
STATUS_BIN = ColumnInfo("status", "varchar", length=45, charset="utf8mb4", collation="utf8mb4_bin")
PK = tm.Index("PRIMARY", ("order_id",), True)
BY_USER = tm.Index("i_user", ("user_id",), False)


class FakeDatabase(SimpleNamespace):
    """What proxy.table_metadata reads of a LogicalDatabase (weak-referenceable like it)."""

    __weakref__: Any
    __hash__ = object.__hash__  # type: ignore[assignment]


def _db(infos: dict[str, dict[str, list[ColumnInfo]]]) -> Any:
    rules = build_rules()
    snapshot = SchemaSnapshot(rules, infos={ds: {t: {c.name: c for c in cols} for t, cols in per.items()} for ds, per in infos.items()})
    return FakeDatabase(rules=rules, metadata=snapshot, name="sharding_db")


SAME = [INT, UID, STATUS]
ALL_SAME = {"ds_0": {"t_order_0": SAME, "t_order_1": SAME}, "ds_1": {"t_order_0": SAME, "t_order_1": SAME}}


@pytest.mark.parametrize(("infos", "indexes", "expected"), [
    (ALL_SAME, {}, []),
    ({}, {}, []),  # not created yet: no actual table differs from another
    ({"ds_1": {"t_order_0": SAME}}, {}, ["ds_0.t_order_0 does not exist"]),
    ({**ALL_SAME, "ds_1": {"t_order_0": SAME}}, {}, ["ds_1.t_order_1 does not exist"]),
    ({**ALL_SAME, "ds_1": {"t_order_0": SAME, "t_order_1": [INT, UID]}}, {}, ["ds_1.t_order_1 has the columns (order_id, user_id), ds_0.t_order_0 (order_id, user_id, status)"]),
    ({**ALL_SAME, "ds_1": {"t_order_0": [INT, UID, STATUS_BIN], "t_order_1": SAME}}, {}, ["ds_1.t_order_0.status is varchar length 45 collation utf8mb4_bin NULL, ds_0.t_order_0.status varchar length 45 collation utf8mb4_general_ci NULL"]),
    (ALL_SAME, {"ds_0": {"t_order_0": (PK,), "t_order_1": (PK,)}, "ds_1": {"t_order_0": (PK, BY_USER), "t_order_1": (PK,)}}, ["ds_1.t_order_0 has the indexes (PRIMARY(order_id), i_user(user_id)), ds_0.t_order_0 (PRIMARY(order_id))"]),
])
def test_node_differences(infos: dict[str, Any], indexes: dict[str, Any], expected: list[str]) -> None:
    assert tm.node_differences(_db(infos), indexes).get("t_order", []) == expected


def test_parse_indexes_primary_first_columns_in_order() -> None:
    rows = [(b"t", b"PRIMARY", b"1", b"a", b"0"), (b"t", b"PRIMARY", b"2", b"b", b"0"), (b"t", b"i_c", b"1", b"C", b"1")]
    assert tm.parse_indexes(rows) == {"t": (tm.Index("PRIMARY", ("a", "b"), True), tm.Index("i_c", ("c",), False))}


@pytest.mark.parametrize(("text", "names"), [
    ("SHOW TABLE METADATA t_order", ["t_order"]),
    ("SHOW TABLE METADATA t_order, `T_Item` FROM sharding_db", ["t_order", "t_item"]),
])
def test_table_names(text: str, names: list[str]) -> None:
    assert tm.table_names(text) == names


def test_show_rows_columns_then_indexes() -> None:
    db = _db(ALL_SAME)
    tm._INDEXES[db] = {"ds_0": {"t_order_0": (PK,)}}  # type: ignore[index]
    rows = tm.show_rows(db, ["t_order", "nope"])
    assert [(r[2], r[3]) for r in rows] == [("COLUMN", "order_id"), ("COLUMN", "user_id"), ("COLUMN", "status"), ("INDEX", "PRIMARY")]
    assert json.loads(rows[0][4])["primaryKey"] is True and json.loads(rows[2][4])["collation"] == "utf8mb4_general_ci"
