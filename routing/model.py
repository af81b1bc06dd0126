"""The sharding rule model: what a loaded `!SHARDING` / `!BROADCAST` / `!SINGLE` configuration *is*.

This module is the contract between configuration loading (`routing.config`), the algorithms
(`routing.algorithms`) and the SQL kernel (`routing.route`, `routing.rewrite`). It holds plain, immutable
data plus the small protocols that sharding algorithms implement, so the kernel never needs to know how a
rule was written in YAML.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, order=True)
class DataNode:
    """One actual table on one data source, e.g. ``ds_0.t_order_1``."""

    data_source: str
    table: str

    def __str__(self) -> str:
        return f"{self.data_source}.{self.table}"


@dataclass(frozen=True)
class RangeBound:
    """A range condition on one sharding column; ``None`` means unbounded on that side."""

    lower: Any = None
    lower_inclusive: bool = True
    upper: Any = None
    upper_inclusive: bool = True


# --- algorithm protocols (ShardingSphere's StandardShardingAlgorithm & co, in Python) -----------------


@runtime_checkable
class StandardShardingAlgorithm(Protocol):
    """Shards on one column. ``targets`` are the candidate data source or table names, in rule order."""

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        """The single target for ``column = value``; None when the value maps to no target."""
        ...

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        """Every target that may hold rows inside ``bound`` (widen, never narrow)."""
        ...


@runtime_checkable
class ComplexShardingAlgorithm(Protocol):
    """Shards on several columns at once (COMPLEX_INLINE, CLASS_BASED complex)."""

    def shard(
        self, targets: Sequence[str], values: Mapping[str, Sequence[Any]], ranges: Mapping[str, RangeBound]
    ) -> list[str]:
        """``values`` holds the exact values per column (from = and IN), ``ranges`` the range conditions."""
        ...


@runtime_checkable
class HintShardingAlgorithm(Protocol):
    """Shards on values given by a hint rather than by the SQL (HINT_INLINE, CLASS_BASED hint)."""

    def shard(self, targets: Sequence[str], values: Sequence[Any]) -> list[str]: ...


@runtime_checkable
class KeyGenerator(Protocol):
    """Generates a key value for an INSERT that omits the key column (SNOWFLAKE, UUID)."""

    def generate(self) -> Any: ...


# --- strategies --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoneStrategy:
    """No sharding on this level: every candidate target is used."""


@dataclass(frozen=True)
class StandardStrategy:
    column: str
    algorithm_name: str
    algorithm: StandardShardingAlgorithm


@dataclass(frozen=True)
class ComplexStrategy:
    columns: tuple[str, ...]
    algorithm_name: str
    algorithm: ComplexShardingAlgorithm


@dataclass(frozen=True)
class HintStrategy:
    algorithm_name: str
    algorithm: HintShardingAlgorithm


ShardingStrategy = NoneStrategy | StandardStrategy | ComplexStrategy | HintStrategy


@dataclass(frozen=True)
class KeyGenerateStrategy:
    column: str
    generator_name: str
    generator: KeyGenerator


@dataclass(frozen=True)
class DualRouting:
    """The compatibility window of a resharding (``oldDatabaseStrategy`` / ``oldTableStrategy`` next to the
    new strategies, the seed's "dual routing"): rows not yet moved still live where the *old* strategies
    put them. SELECT, UPDATE and DELETE go to the old and the new nodes, INSERT to the new ones only; a
    SELECT's copies of one logical row are de-duplicated by ``key_column`` (None: the primary key), keeping
    the highest ``version_column`` (or, without one, the copy on the row's new node)."""

    database_strategy: ShardingStrategy
    table_strategy: ShardingStrategy
    key_column: str | None = None
    version_column: str | None = None


@dataclass(frozen=True)
class TableRule:
    """How one logic table is laid out and sharded.

    ``data_nodes`` keeps the order of ``actualDataNodes`` (or of the auto table layout); the kernel relies
    on it to pick the first node for unicast routes and to pair binding tables 1:1 by position.
    """

    logic_table: str
    data_nodes: tuple[DataNode, ...]
    database_strategy: ShardingStrategy
    table_strategy: ShardingStrategy
    key_generate: KeyGenerateStrategy | None = None
    auto: bool = False
    window: DualRouting | None = None  # resharding in progress: old strategies still hold rows

    @property
    def data_sources(self) -> list[str]:
        seen: dict[str, None] = {}
        for node in self.data_nodes:
            seen.setdefault(node.data_source, None)
        return list(seen)

    def tables_in(self, data_source: str) -> list[str]:
        return [n.table for n in self.data_nodes if n.data_source == data_source]

    @property
    def sharding_columns(self) -> set[str]:
        cols: set[str] = set()
        for strategy in (self.database_strategy, self.table_strategy):
            if isinstance(strategy, StandardStrategy):
                cols.add(strategy.column.lower())
            elif isinstance(strategy, ComplexStrategy):
                cols.update(c.lower() for c in strategy.columns)
        return cols


@dataclass(frozen=True)
class ShardingRule:
    """The `!SHARDING` rule of one logical database. Table names are keyed in lower case."""

    tables: Mapping[str, TableRule]
    binding_groups: tuple[tuple[str, ...], ...] = ()
    default_sharding_column: str | None = None

    def table(self, name: str) -> TableRule | None:
        return self.tables.get(name.lower())

    def binding_group(self, name: str) -> tuple[str, ...] | None:
        low = name.lower()
        for group in self.binding_groups:
            if low in group:
                return group
        return None

    def are_bound(self, names: Sequence[str]) -> bool:
        """True when all the named sharded tables belong to one binding group."""
        lows = [n.lower() for n in names]
        if len(lows) <= 1:
            return True
        group = self.binding_group(lows[0])
        return group is not None and all(n in group for n in lows)


@dataclass(frozen=True)
class BroadcastRule:
    """`!BROADCAST`: tables with a full copy on every data source."""

    tables: frozenset[str] = frozenset()  # lower case

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self.tables


@dataclass(frozen=True)
class SingleRule:
    """`!SINGLE`: tables that live whole on one data source.

    ``patterns`` are the configured ``tables`` entries (``*.*``, ``ds_0.*``, ``ds_0.t_user``);
    ``default_data_source`` receives CREATE TABLE of a table no rule knows.
    """

    patterns: tuple[str, ...] = ()
    default_data_source: str | None = None


@dataclass(frozen=True)
class DatabaseRules:
    """Everything the kernel needs about one logical database."""

    name: str
    data_sources: tuple[str, ...]
    sharding: ShardingRule | None = None
    broadcast: BroadcastRule = field(default_factory=BroadcastRule)
    single: SingleRule = field(default_factory=SingleRule)
    props: Mapping[str, Any] = field(default_factory=dict)
    # !MASK (routing.mask.MaskRule) and !SHADOW (routing.shadow.ShadowRule), None without them
    mask: Any = None
    shadow: Any = None

    @property
    def is_pass_through(self) -> bool:
        """One data source and no sharding, broadcast, mask or shadow rule: statements go through untouched."""
        return (
            len(self.data_sources) == 1
            and (self.sharding is None or not self.sharding.tables)
            and not self.broadcast.tables
            and self.mask is None
            and self.shadow is None
        )


@dataclass(frozen=True)
class ColumnInfo:
    """What information_schema.COLUMNS says of one column (names and types lower case)."""

    name: str
    data_type: str  # int, bigint, varchar, char, decimal, datetime, ...
    unsigned: bool = False
    length: int | None = None  # CHARACTER_MAXIMUM_LENGTH (BINARY(n), CHAR(n))
    precision: int | None = None  # NUMERIC_PRECISION
    scale: int | None = None  # NUMERIC_SCALE
    datetime_precision: int | None = None
    charset: str | None = None
    collation: str | None = None
    nullable: bool = True
    default_null: bool = True  # no default, or DEFAULT NULL
    auto_increment: bool = False


@dataclass(frozen=True)
class UniqueKey:
    """A PRIMARY or UNIQUE key of a table, columns lower case in key order. `prefix`: some column is indexed
    on a prefix only (``UNIQUE (name(10))``): equal prefixes collide."""

    name: str
    columns: tuple[str, ...]
    prefix: bool = False


class SchemaMetadata(Protocol):
    """What the kernel may ask about actual schemas; the proxy loads it from the backends at start-up
    and after DDL. Answers are for logic tables (columns) and for unsharded tables (where they live).

    Optional (the kernel asks with getattr; a metadata without them knows no keys):
    ``unique_keys(logic_table) -> tuple[UniqueKey, ...]`` in the order the server checks them (PRIMARY
    first) and ``column_info(logic_table, column) -> ColumnInfo | None``."""

    def columns(self, logic_table: str) -> list[str] | None:
        """Column names of a logic table in table order (for INSERT without a column list)."""
        ...

    def single_table_data_source(self, table: str) -> str | None:
        """The data source holding an unsharded, non-broadcast table, or None if none does."""
        ...

    # optional: `column_type(logic_table, column) -> str | None`, the information_schema DATA_TYPE
    # ('int', 'varchar', ...): lets the multi-node rewrite skip weight columns for keys that are not text
