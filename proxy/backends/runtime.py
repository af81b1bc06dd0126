"""A logical database at run time: its data sources, its kernel and the schema metadata the kernel reads.

Metadata (columns of logic tables, where unsharded tables live) is loaded from the backends'
information_schema at start-up and reloaded after DDL, so that routing itself never does I/O.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import structlog

from protocol.packets import ERRPacket
from proxy.backends import table_metadata
from proxy.backends.backend import DataSource
from proxy.backends.rename import Renaming, renaming_of
from proxy.config.model import DatabaseConfig
from proxy.config.props import default as prop_default
from routing.model import ColumnInfo, DatabaseRules, UniqueKey

if TYPE_CHECKING:
    from routing.kernel import ShardingKernel

log = structlog.get_logger("shardproxy.runtime")

_T = TypeVar("_T")

_COLUMNS_SQL = (
    "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, "
    "NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, COLLATION_NAME, IS_NULLABLE, COLUMN_DEFAULT, EXTRA "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION"
)
# without ORDER BY: the server lists a table's keys in the order it keeps (and checks) them, PRIMARY first
_KEYS_SQL = (
    "SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS "
    "WHERE TABLE_SCHEMA = DATABASE() AND NON_UNIQUE = 0"
)


def _text(value: bytes | None) -> str:
    return (value or b"").decode("utf-8", "replace")


def _number(value: bytes | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _column_info(row: tuple[bytes | None, ...]) -> ColumnInfo:
    (_t, column, data_type, column_type, length, precision, scale, dt_precision, charset, collation, nullable,
     default, extra) = row
    return ColumnInfo(
        name=_text(column).lower(),
        data_type=_text(data_type).lower(),
        unsigned="unsigned" in _text(column_type).lower(),
        length=_number(length),
        precision=_number(precision),
        scale=_number(scale),
        datetime_precision=_number(dt_precision),
        charset=_text(charset).lower() or None,
        collation=_text(collation).lower() or None,
        nullable=_text(nullable).upper() == "YES",
        default_null=default is None or _text(default).upper() == "NULL",
        auto_increment="auto_increment" in _text(extra).lower(),
    )


def _unique_keys(rows: list[tuple[bytes | None, ...]]) -> dict[str, tuple[UniqueKey, ...]]:
    found: dict[str, dict[str, list[tuple[int, str, bool]]]] = {}
    for table, index, seq, column, sub_part in rows:
        per = found.setdefault(_text(table).lower(), {})
        per.setdefault(_text(index), []).append((_number(seq) or 0, _text(column).lower(), sub_part is not None))
    return {
        table: tuple(
            UniqueKey(index, tuple(c for _s, c, _p in sorted(cols)), any(p for _s, _c, p in cols))
            for index, cols in per.items()
        )
        for table, per in found.items()
    }


@dataclass
class SchemaSnapshot:
    """Implements routing.model.SchemaMetadata from what the backends reported."""

    rules: DatabaseRules
    tables: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # ds -> table(lower) -> columns
    # ds -> table(lower) -> its PRIMARY / UNIQUE keys, in the order the server checks them
    keys: dict[str, dict[str, tuple[UniqueKey, ...]]] = field(default_factory=dict)
    infos: dict[str, dict[str, dict[str, ColumnInfo]]] = field(default_factory=dict)  # ds -> table -> column

    def _actual(self, logic_table: str, per_ds: dict[str, dict[str, _T]]) -> _T | None:
        """What the first actual table of a logic table that the backends know says (or the table itself)."""
        low = logic_table.lower()
        sharding = self.rules.sharding
        rule = sharding.table(low) if sharding else None
        if rule is not None:
            for node in rule.data_nodes:
                found = per_ds.get(node.data_source, {}).get(node.table.lower())
                if found:
                    return found
            return None
        for ds in self.rules.data_sources:
            found = per_ds.get(ds, {}).get(low)
            if found:
                return found
        return None

    def columns(self, logic_table: str) -> list[str] | None:
        return self._actual(logic_table, self.tables)

    def unique_keys(self, logic_table: str) -> tuple[UniqueKey, ...]:
        return self._actual(logic_table, self.keys) or ()

    def column_info(self, logic_table: str, column: str) -> ColumnInfo | None:
        infos = self._actual(logic_table, self.infos)
        return infos.get(column.lower()) if infos else None

    def column_type(self, logic_table: str, column: str) -> str | None:
        """The DATA_TYPE of a column of a logic table ('int', 'varchar', ...), None when unknown."""
        info = self.column_info(logic_table, column)
        return info.data_type if info is not None else None

    def single_table_data_source(self, table: str) -> str | None:
        low = table.lower()
        for ds in self.rules.data_sources:
            if low in self.tables.get(ds, {}):
                return ds
        return None

    def actual_tables(self, data_source: str) -> list[str]:
        return list(self.tables.get(data_source, {}))


def _kernel(config: DatabaseConfig, metadata: SchemaSnapshot) -> ShardingKernel | None:
    if config.rules.is_pass_through:
        return None
    from routing.kernel import ShardingKernel

    size = int((config.rules.props or {}).get("plan-cache-size") or prop_default("plan-cache-size"))
    return ShardingKernel(config.rules, metadata, plan_cache_size=size)


@dataclass(frozen=True, eq=False)
class ColumnSchema:
    """The database a column definition of a sharded database's answer names (its `schema` field). MariaDB names the
    database of the column's table there: a data node names its physical database, shown as the logical one (`name`);
    `information_schema` (SHOW COLUMNS, SHOW INDEX, SHOW TABLE STATUS read it), `mysql` or another database stay as
    named. Compared by identity (a new one when the data sources change): the answers' column memos key on it."""

    name: str
    physical: frozenset[str]

    def shown(self, schema: str) -> str:
        return self.name if schema in self.physical else schema


NO_COLUMN_SCHEMA = ColumnSchema("", frozenset())


def _column_schema(name: str, sources: dict[str, DataSource]) -> ColumnSchema:
    physical = (getattr(src.config, "database", None) for src in sources.values())
    return ColumnSchema(name, frozenset(db for db in physical if db))


def _renaming(name: str, source: DataSource | None) -> Renaming | None:
    """A pass-through database whose physical database has another name: what the statements and answers need."""
    return renaming_of(name, source.config.database) if source is not None else None


class LogicalDatabase:
    def __init__(self, config: DatabaseConfig, sources: dict[str, DataSource]) -> None:
        self.config = config
        self.name = config.name
        self.rules = config.rules
        self.sources = sources
        self.metadata = SchemaSnapshot(config.rules)
        self.kernel = _kernel(config, self.metadata)
        # without sharding rules, the one data source every statement goes to
        self.pass_through_source: DataSource | None = (
            next(iter(sources.values())) if self.kernel is None else None
        )
        self.renaming = _renaming(self.name, self.pass_through_source)
        self.column_schema = _column_schema(self.name, sources)
        self._reload_lock = asyncio.Lock()
        self._twin: tuple[ShardingKernel, ShardingKernel] | None = None
        # statements decided off the event loop take the twin one at a time (its caches and per-call state are
        # the twin's own, never shared between threads)
        self.twin_lock = asyncio.Lock()

    def twin_kernel(self) -> ShardingKernel | None:
        """A second kernel over the same rules and metadata, with caches of its own, for the statements whose
        decision runs in a worker thread (proxy.execution.routed: routing a big text is CPU work that would hold
        the event loop, and every other session with it). Made anew when the rules or the metadata change."""
        kernel = self.kernel
        if kernel is None:
            return None
        twin = self._twin
        if twin is None or twin[0] is not kernel:
            made = _kernel(self.config, self.metadata)
            assert made is not None
            twin = self._twin = (kernel, made)
        return twin[1]

    def reconfigure(self, config: DatabaseConfig, sources: dict[str, DataSource]) -> None:
        """Take a changed configuration (DistSQL RDL) in one synchronous step: a statement already routed
        finishes on the kernel it holds, every statement routed from now on uses the new rules. The
        metadata loaded so far is kept (reload it for tables the change brings in)."""
        old = self.metadata
        metadata = SchemaSnapshot(config.rules, dict(old.tables), dict(old.keys), dict(old.infos))
        kernel = _kernel(config, metadata)
        pass_through = next(iter(sources.values())) if kernel is None else None
        self.config, self.rules, self.sources = config, config.rules, sources
        self.metadata, self.kernel, self.pass_through_source = metadata, kernel, pass_through
        self.renaming = _renaming(self.name, pass_through)
        self.column_schema = _column_schema(self.name, sources)

    async def reload_metadata(self) -> None:
        if self.kernel is None:
            return
        async with self._reload_lock:
            tables: dict[str, dict[str, list[str]]] = {}
            keys: dict[str, dict[str, tuple[UniqueKey, ...]]] = {}
            infos: dict[str, dict[str, dict[str, ColumnInfo]]] = {}
            for name, source in self.sources.items():
                res = await source.admin_execute(_COLUMNS_SQL)
                if isinstance(res, ERRPacket) or not isinstance(res, list):
                    log.warning("metadata_load_failed", data_source=name, error=str(res))
                    continue
                per: dict[str, list[str]] = {}
                per_info: dict[str, dict[str, ColumnInfo]] = {}
                for row in res:
                    table = _text(row[0]).lower()
                    per.setdefault(table, []).append(_text(row[1]))
                    info = _column_info(row)
                    per_info.setdefault(table, {})[info.name] = info
                tables[name] = per
                infos[name] = per_info
                res = await source.admin_execute(_KEYS_SQL)
                if isinstance(res, ERRPacket) or not isinstance(res, list):
                    log.warning("metadata_load_failed", data_source=name, error=str(res), what="unique keys")
                    continue
                keys[name] = _unique_keys(res)
            self.metadata.tables = tables
            self.metadata.keys = keys
            self.metadata.infos = infos
            await table_metadata.after_reload(self)  # indexes, node differences (logged)
            if self.kernel is not None:
                self.kernel.invalidate()
            self._twin = None
