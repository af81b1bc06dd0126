"""The ShardingSphere example rules, built by hand with tiny test-local algorithms.

t_order: ds_${0..1}.t_order_${0..1}, database by user_id % 2, table by order_id % 2, key order_id;
t_order_item bound to t_order (same layout, same columns); t_address broadcast; t_user single on ds_0;
t_log an auto table over ds_0/ds_1 (4 tables, id % 4); t_hint with hint strategies.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from routing.kernel import ShardingKernel
from routing.model import (
    BroadcastRule,
    DatabaseRules,
    DataNode,
    HintStrategy,
    KeyGenerateStrategy,
    NoneStrategy,
    RangeBound,
    ShardingRule,
    SingleRule,
    StandardStrategy,
    TableRule,
)


class Mod:
    """Picks the target whose name ends with ``_{value % n}`` (n = number of targets)."""

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        suffix = f"_{int(value) % len(targets)}"
        return next((t for t in targets if t.endswith(suffix)), None)

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        lo, hi = bound.lower, bound.upper
        if lo is not None and hi is not None and int(hi) - int(lo) < len(targets):
            values = range(int(lo) + (0 if bound.lower_inclusive else 1), int(hi) + (1 if bound.upper_inclusive else 0))
            return sorted({self.shard_precise(targets, column, v) for v in values} - {None})  # type: ignore[arg-type]
        return list(targets)


class HintMod:
    def shard(self, targets: Sequence[str], values: Sequence[Any]) -> list[str]:
        return [t for t in targets if any(t.endswith(f"_{int(v) % len(targets)}") for v in values)]


class Counter:
    """A key generator counting from 1000 (deterministic for tests)."""

    def __init__(self) -> None:
        self._next = itertools.count(1000)

    def generate(self) -> int:
        return next(self._next)


class Metadata:
    def __init__(
        self, columns: Mapping[str, list[str]], singles: Mapping[str, str], types: Mapping[str, str] | None = None
    ) -> None:
        self._columns = columns
        self._types = types or {}
        self._singles = singles

    def columns(self, logic_table: str) -> list[str] | None:
        return self._columns.get(logic_table.lower())

    def column_type(self, logic_table: str, column: str) -> str | None:
        if column.lower() not in (c.lower() for c in self._columns.get(logic_table.lower(), ())):
            return None
        return self._types.get(column.lower())

    def single_table_data_source(self, table: str) -> str | None:
        return self._singles.get(table.lower())


def nodes(table: str, ds_count: int = 2, table_count: int = 2) -> tuple[DataNode, ...]:
    return tuple(DataNode(f"ds_{d}", f"{table}_{t}") for d in range(ds_count) for t in range(table_count))


def build_rules(*, with_keygen: bool = True) -> DatabaseRules:
    mod = Mod()
    db = StandardStrategy("user_id", "db_mod", mod)
    tbl = StandardStrategy("order_id", "t_mod", mod)
    keygen = KeyGenerateStrategy("order_id", "counter", Counter()) if with_keygen else None
    t_order = TableRule("t_order", nodes("t_order"), db, tbl, keygen)
    t_item = TableRule("t_order_item", nodes("t_order_item"), db, tbl)
    t_log = TableRule(
        "t_log",
        (
            DataNode("ds_0", "t_log_0"),
            DataNode("ds_1", "t_log_1"),
            DataNode("ds_0", "t_log_2"),
            DataNode("ds_1", "t_log_3"),
        ),
        NoneStrategy(),
        StandardStrategy("id", "mod4", mod),
        auto=True,
    )
    t_hint = TableRule(
        "t_hint", nodes("t_hint"), HintStrategy("hint_db", HintMod()), HintStrategy("hint_tbl", HintMod())
    )
    t_other = TableRule("t_other", nodes("t_other"), db, NoneStrategy())
    sharding = ShardingRule(
        tables={"t_order": t_order, "t_order_item": t_item, "t_log": t_log, "t_hint": t_hint, "t_other": t_other},
        binding_groups=(("t_order", "t_order_item"),),
    )
    return DatabaseRules(
        name="sharding_db",
        data_sources=("ds_0", "ds_1"),
        sharding=sharding,
        broadcast=BroadcastRule(frozenset({"t_address"})),
        single=SingleRule(("*.*",), "ds_0"),
    )


METADATA = Metadata(
    columns={
        "t_order": ["order_id", "user_id", "status", "amount"],
        "t_order_item": ["order_item_id", "order_id", "user_id", "status"],
        "t_address": ["address_id", "address_name"],
    },
    singles={"t_user": "ds_0", "t_stat": "ds_1"},
    # by column name, whatever the table (text columns get a weight column in multi-node merges)
    types={"order_id": "bigint", "user_id": "int", "status": "varchar", "amount": "decimal",
           "order_item_id": "bigint", "address_id": "bigint", "address_name": "varchar"},
)


@pytest.fixture
def rules() -> DatabaseRules:
    return build_rules()


@pytest.fixture
def kernel(rules: DatabaseRules) -> ShardingKernel:
    return ShardingKernel(rules, METADATA)
