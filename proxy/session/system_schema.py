"""ShardingSphere-Proxy's `shardingsphere` system schema: `cluster_information` and
`sharding_table_statistics`, which monitoring scripts written for ShardingSphere read.

The proxy builds their rows itself and MariaDB answers the statement: each `shardingsphere.<table>` in the
user's text becomes a derived table of literal rows (numbers as numbers, so ORDER BY id sorts as numbers)
and the statement runs on one backend connection, so WHERE, ORDER BY, aggregates and joins between them
are MariaDB's own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from protocol.packets import ERRPacket
from proxy.session.processlist import _NOT_ALIAS, _QUALIFIER, _masked, _select_on_default, _text_literal
from proxy.version import version

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.session.handle import SessionHandle as Session

_TABLE = re.compile(
    r"(?<![\w$.`])`?shardingsphere`?\s*\.\s*`?(?P<table>cluster_information|sharding_table_statistics)`?(?![\w$`])",
    re.I,
)

STATISTICS_COLUMNS = ("id", "logic_database_name", "logic_table_name", "actual_database_name",
                      "actual_table_name", "row_count", "size")


def reads_system_schema(sql: str) -> bool:
    return "shardingsphere" in sql.lower() and _TABLE.search(_masked(sql)) is not None


def _literal(value: object) -> str:
    return str(value) if isinstance(value, int) else _text_literal(None if value is None else str(value))


def derived_table(columns: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    """`(SELECT ... UNION ALL ...)` of literal rows with these column names (no row: an empty one)."""
    first = rows[0] if rows else tuple(None for _ in columns)
    head = "SELECT " + ", ".join(f"{_literal(v)} AS `{c}`" for v, c in zip(first, columns, strict=True))
    rest = ["SELECT " + ", ".join(_literal(v) for v in r) for r in rows[1:]]
    body = " UNION ALL ".join([head, *rest])
    return f"({body}{'' if rows else ' LIMIT 0'})"


def splice(sql: str, tables: dict[str, str]) -> str:
    """The user's text with each `shardingsphere.<table>` outside literals and comments replaced by its
    derived table (named as the table unless the statement gives an alias; as a column qualifier,
    `shardingsphere.t.c`, by the table's name), as information_schema.PROCESSLIST is replaced
    (proxy.session.processlist)."""
    masked = _masked(sql)
    out, last = [], 0
    for m in _TABLE.finditer(masked):
        name = m.group("table").lower()
        out.append(sql[last : m.start()])
        if _QUALIFIER.match(masked, m.end()):
            out.append(f"`{name}`")
        else:
            out.append(tables[name])
            if _NOT_ALIAS.match(masked, m.end()):
                out.append(f" AS `{name}`")
        last = m.end()
    out.append(sql[last:])
    return "".join(out)


async def _statistics(session: Session) -> list[tuple[object, ...]]:
    """One row per data node of every sharded table of the databases the user may see; row_count and size
    as the data source's information_schema.TABLES estimates them (NULL when it cannot be asked)."""
    rows: list[tuple[object, ...]] = []
    for name in session.visible_databases():
        db: LogicalDatabase | None = session.server.database(name)
        if db is None or db.kernel is None or db.kernel.rules.sharding is None:
            continue
        sizes: dict[tuple[str, str], tuple[object, object]] = {}
        for ds in sorted(db.sources):
            sizes.update(await _table_sizes(session, db, ds))
        for rule in db.kernel.rules.sharding.tables.values():
            for node in rule.data_nodes:
                count, size = sizes.get((node.data_source, node.table.lower()), (None, None))
                rows.append((len(rows) + 1, db.name, rule.logic_table, node.data_source, node.table, count, size))
    return rows


async def _table_sizes(session: Session, db: LogicalDatabase, ds: str) -> dict[tuple[str, str], tuple[object, object]]:
    source = db.sources[ds]
    try:
        conn = await session.acquire_from(source, hold=False)
    except Exception:
        return {}
    try:
        res = await conn.execute("SELECT TABLE_NAME, TABLE_ROWS, DATA_LENGTH FROM information_schema.TABLES "
                                 "WHERE TABLE_SCHEMA = DATABASE()")
    except Exception:
        conn.broken = True
        res = None
    finally:
        session.give_back(conn)
    if isinstance(res, ERRPacket) or not isinstance(res, list):
        return {}
    return {(ds, (t or b"").decode("utf-8", "surrogateescape").lower()):
            (int(n) if n is not None else None, int(s) if s is not None else None) for t, n, s in res}


async def answer(session: Session, db: LogicalDatabase | None, sql: str) -> None:
    wanted = {m.group("table").lower() for m in _TABLE.finditer(_masked(sql))}
    tables: dict[str, str] = {}
    if "cluster_information" in wanted:
        tables["cluster_information"] = derived_table(("version",), [(version(),)])
    if "sharding_table_statistics" in wanted:
        tables["sharding_table_statistics"] = derived_table(STATISTICS_COLUMNS, await _statistics(session))
    await _select_on_default(session, db, splice(sql, tables))


__all__ = ["answer", "derived_table", "reads_system_schema", "splice"]
