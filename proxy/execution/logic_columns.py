"""The column definitions of an answer relayed from one data node of a sharded database, in logical names.

MariaDB names the current database in a column definition's schema field, and the table in table / org_table: one
server holding the rows would say `sharding_db` and `t_order`. A data node says its physical database
(`sht_demo_ds_1`) and its actual table (`t_order_1`), which the client has never heard of (an ORM that maps by
table name finds no such table). Merged answers are built by the proxy in logical names already; this is for the
relayed ones (a single-node SELECT, a routed CALL), applied to each definition as it passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from protocol.packets import ColumnDefinition41
from protocol.wire import MalformedPacket

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase


def physical_databases(db: LogicalDatabase) -> frozenset[str]:
    """The physical databases of the logical database's data sources."""
    return frozenset(name for src in db.sources.values() if (name := getattr(src.config, "database", None)))


_BY_DATABASE: dict[int, tuple[object, Callable[[bytes], bytes]]] = {}


def logic_tables(db: LogicalDatabase) -> dict[str, str]:
    """Actual table (lower case) -> its logic table, for every sharded table of the database (a broadcast or single
    table's actual name is its logic name)."""
    sharding = db.rules.sharding
    if sharding is None:
        return {}
    return {node.table.lower(): rule.logic_table for rule in sharding.tables.values() for node in rule.data_nodes}


def relayed_columns(db: LogicalDatabase) -> Callable[[bytes], bytes]:
    """`column_renamer` of the database with its `logic_tables`, built once per set of rules."""
    known = _BY_DATABASE.get(id(db))
    if known is not None and known[0] is db.rules:
        return known[1]
    renamer = column_renamer(db, logic_tables(db))
    _BY_DATABASE[id(db)] = (db.rules, renamer)
    return renamer


def column_renamer(db: LogicalDatabase, renames: Mapping[str, str]) -> Callable[[bytes], bytes]:
    """A column definition packet with the physical database shown as `db`'s name, and an actual table (lower
    case in `renames`: actual -> logic) as its logic table; an alias, another database's name, untouched."""
    physical = physical_databases(db)
    marks = tuple(name.encode() for name in physical)

    kept: dict[bytes, bytes] = {}  # a statement's definitions are the same bytes at each execute

    def rename(payload: bytes) -> bytes:
        if not any(mark in payload for mark in marks):
            return payload  # (no physical name in it: nothing to change, nothing decoded)
        known = kept.get(payload)
        if known is None:
            known = renamed(payload)
            if len(kept) >= 4096:
                kept.clear()
            kept[payload] = known
        return known

    def renamed(payload: bytes) -> bytes:
        try:
            col = ColumnDefinition41.decode(payload)
        except (MalformedPacket, ValueError, IndexError):
            return payload
        if col.schema not in physical:
            return payload
        return replace(
            col,
            schema=db.name,
            table=renames.get(col.table.lower(), col.table),
            org_table=renames.get(col.org_table.lower(), col.org_table),
        ).encode()

    return rename
