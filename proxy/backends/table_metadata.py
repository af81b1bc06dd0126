"""Table metadata of the logic tables beyond what routing reads: indexes, node differences, SHOW TABLE METADATA.

Why: the kernel reads columns, types, collations and unique keys (`proxy.backends.runtime.SchemaSnapshot`); an
operator also needs to see what the proxy believes a logic table is, and to know when the actual tables
behind one logic table disagree (a column added on one node only, another collation, a missing index):
answers merged over such nodes would differ from node to node. So after every metadata load (start-up,
DDL through the proxy, REFRESH TABLE METADATA) the indexes are loaded too and the actual tables of each
sharded logic table are compared with its first one; every difference is logged
(``table_metadata_differs``). ``SHOW TABLE METADATA t [, t ...] [FROM db]`` answers ShardingSphere's
columns (database_name, table_name, type, name, value), one row per column and per index, the value a JSON
object.
"""

from __future__ import annotations

import json
import re
import weakref
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from protocol.packets import ERRPacket

if TYPE_CHECKING:
    from routing.model import ColumnInfo


class LogicalDatabase(Protocol):
    """What this module reads of proxy.backends.runtime.LogicalDatabase (which calls after_reload: a Protocol
    here keeps the import one way)."""

    name: str
    rules: Any
    sources: Any
    metadata: Any

log = structlog.get_logger("shardproxy.metadata")

_INDEXES_SQL = (
    "SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
    "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX"
)
SHOW_COLUMNS = ("database_name", "table_name", "type", "name", "value")


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]
    unique: bool


# data source -> actual table (lower case) -> its indexes, per logical database
_INDEXES: weakref.WeakKeyDictionary[LogicalDatabase, dict[str, dict[str, tuple[Index, ...]]]] = (
    weakref.WeakKeyDictionary())
# the differences found by the last load, per logical database (logic table -> messages)
_DIFFERENCES: weakref.WeakKeyDictionary[LogicalDatabase, dict[str, list[str]]] = weakref.WeakKeyDictionary()


def _text(value: bytes | None) -> str:
    return (value or b"").decode("utf-8", "replace")


def parse_indexes(rows: list[tuple[bytes | None, ...]]) -> dict[str, tuple[Index, ...]]:
    """information_schema.STATISTICS rows -> table -> its indexes (PRIMARY first, columns in key order)."""
    found: dict[str, dict[str, tuple[list[str], bool]]] = {}
    for table, index, _seq, column, non_unique in rows:
        per = found.setdefault(_text(table).lower(), {})
        cols, _ = per.setdefault(_text(index), ([], _text(non_unique) == "0"))
        cols.append(_text(column).lower())
    return {t: tuple(Index(n, tuple(c), u) for n, (c, u) in per.items()) for t, per in found.items()}


async def after_reload(db: LogicalDatabase) -> None:
    """Load the indexes of every data source and log how the actual tables of a logic table differ."""
    indexes: dict[str, dict[str, tuple[Index, ...]]] = {}
    for name, source in db.sources.items():
        res = await source.admin_execute(_INDEXES_SQL)
        if isinstance(res, ERRPacket) or not isinstance(res, list):
            log.warning("metadata_load_failed", data_source=name, error=str(res), what="indexes")
            continue
        indexes[name] = parse_indexes(res)
    _INDEXES[db] = indexes
    differences = node_differences(db, indexes)
    _DIFFERENCES[db] = differences
    for table, messages in differences.items():
        for message in messages:
            log.warning("table_metadata_differs", database=db.name, table=table, difference=message)


def _columns(db: LogicalDatabase, ds: str, table: str) -> dict[str, ColumnInfo] | None:
    return db.metadata.infos.get(ds, {}).get(table.lower())


def node_differences(db: LogicalDatabase, indexes: dict[str, dict[str, tuple[Index, ...]]]) -> dict[str, list[str]]:
    """Logic table -> how each of its actual tables differs from the first one (empty when they agree)."""
    out: dict[str, list[str]] = {}
    sharding = db.rules.sharding
    if sharding is None:
        return out
    for logic, rule in sharding.tables.items():
        nodes = list(rule.data_nodes)
        if not nodes:
            continue
        first = nodes[0]
        base = _columns(db, first.data_source, first.table)
        base_indexes = indexes.get(first.data_source, {}).get(first.table.lower(), ())
        messages: list[str] = []
        if all(_columns(db, n.data_source, n.table) is None for n in nodes):
            continue  # no actual table yet (CREATE TABLE through the proxy has not run): nothing differs
        if base is None:
            messages.append(f"{first.data_source}.{first.table} does not exist")
        for node in nodes[1:]:
            where = f"{node.data_source}.{node.table}"
            cols = _columns(db, node.data_source, node.table)
            if cols is None:
                if base is not None:
                    messages.append(f"{where} does not exist")
                continue
            if base is None:
                continue
            if list(cols) != list(base):
                messages.append(f"{where} has the columns ({', '.join(cols)}), "
                                f"{first.data_source}.{first.table} ({', '.join(base)})")
            else:
                for column, info in cols.items():
                    if info != base[column]:
                        messages.append(f"{where}.{column} is {_describe(info)}, "
                                        f"{first.data_source}.{first.table}.{column} {_describe(base[column])}")
            mine = indexes.get(node.data_source, {}).get(node.table.lower(), ())
            if set(mine) != set(base_indexes):
                messages.append(f"{where} has the indexes {_names(mine)}, "
                                f"{first.data_source}.{first.table} {_names(base_indexes)}")
        if messages:
            out[logic] = messages
    return out


def _describe(info: ColumnInfo) -> str:
    parts = [info.data_type + (" unsigned" if info.unsigned else "")]
    for label in ("length", "precision", "scale", "collation"):
        value = getattr(info, label)
        if value is not None:
            parts.append(f"{label} {value}")
    parts.append("NULL" if info.nullable else "NOT NULL")
    return " ".join(parts)


def _names(indexes: tuple[Index, ...]) -> str:
    return "(" + ", ".join(f"{i.name}({', '.join(i.columns)})" for i in indexes) + ")"


def differences(db: LogicalDatabase) -> dict[str, list[str]]:
    return dict(_DIFFERENCES.get(db, {}))


def _first_actual(db: LogicalDatabase, logic: str) -> tuple[str, str] | None:
    """(data source, actual table) whose metadata stands for the logic table (as SchemaSnapshot reads it)."""
    sharding = db.rules.sharding
    rule = sharding.table(logic) if sharding is not None else None
    if rule is not None:
        for node in rule.data_nodes:
            if _columns(db, node.data_source, node.table) is not None:
                return node.data_source, node.table.lower()
        return None
    for ds in db.rules.data_sources:
        if _columns(db, ds, logic) is not None:
            return ds, logic.lower()
    return None


def show_rows(db: LogicalDatabase, tables: list[str]) -> list[tuple[Any, ...]]:
    """The rows of SHOW TABLE METADATA for `tables` (unknown tables have none, as in ShardingSphere)."""
    rows: list[tuple[Any, ...]] = []
    for logic in tables:
        found = _first_actual(db, logic)
        if found is None:
            continue
        ds, actual = found
        infos = _columns(db, ds, actual) or {}
        table_indexes = _INDEXES.get(db, {}).get(ds, {}).get(actual, ())
        primary = next((i.columns for i in table_indexes if i.name == "PRIMARY"), ())
        for name, info in infos.items():
            value = {k: v for k, v in asdict(info).items() if k != "name"}
            value = {"name": name, "primaryKey": name in primary, **value}
            rows.append((db.name, logic, "COLUMN", name, json.dumps(value, separators=(",", ":"))))
        for index in table_indexes:
            value = {"name": index.name, "columns": list(index.columns), "unique": index.unique}
            rows.append((db.name, logic, "INDEX", index.name, json.dumps(value, separators=(",", ":"))))
    return rows


_NAMES = re.compile(r"`((?:[^`]|``)+)`|([\w$]+)")


def table_names(text: str) -> list[str]:
    """The table list of ``SHOW TABLE METADATA a, `b` [FROM db]``."""
    m = re.match(r"^\s*SHOW\s+TABLE\s+METADATA\s+(?P<list>.+?)(?:\s+FROM\s+\S+)?\s*;?\s*$", text, re.I | re.S)
    if m is None:
        return []
    return [(a or b).replace("``", "`").lower() for a, b in _NAMES.findall(m.group("list"))]
