"""information_schema of a logical database spread over several data sources, answered as one server would.

`metadata._information_schema` concatenates what each data source answers for its part of the logical view:
right for a plain list of rows, wrong as soon as the statement combines rows — `SELECT COUNT(*) FROM
information_schema.tables` would answer one count per data source, `ORDER BY` / `LIMIT` / `DISTINCT` /
`GROUP BY` would hold per data source only, a join or subquery would see one data source's rows. Such a
statement runs on one data source (the first: it answers the server-wide rows anyway) over the whole logical
view instead: each information_schema table it reads that lists schema objects is copied, already in logical
names, into a TEMPORARY table of the same columns on that connection (`CREATE ... AS SELECT ... WHERE FALSE`
keeps MariaDB's column types), the statement runs there with those tables in their place, and the column
definitions name the information_schema table again. The scratch tables are always dropped.

A copy's LONGTEXT columns are not quite information_schema's: MariaDB declares those with a length of their own
(COLUMNS.COLUMN_TYPE is 196605 characters, which no column type of a created table has), so a column the statement
selects as is gets the length information_schema's definition has (`_as_information_schema`). An expression over
one (`MAX(COLUMN_TYPE)`, `CONCAT(...)`) has the same definition either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import sqlglot
import structlog
from sqlglot import exp

from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket, decode_text_row
from protocol.results import ResultHeader
from proxy.execution.federation import literal
from proxy.execution.resultset import result_packets
from proxy.session.processlist import _NOT_ALIAS, _QUALIFIER, _masked
from proxy.session.schema_scope import _SCHEMA_TABLE, Scope, scope_to_schema

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

log = structlog.get_logger("shardproxy.schema_merge")

Row = tuple[bytes | None, ...]
# (row, its columns, data source, physical database) -> the row in logical names, or None when it is not shown
RowMapper = Callable[[Row, tuple[ColumnDefinition41, ...], str, str], Row | None]
# (information_schema table, its rows of one data source in logical names, their columns) -> the rows shown
RowsMapper = Callable[[str, list[Row], tuple[ColumnDefinition41, ...]], list[Row]]

SCRATCH_PREFIX = "_shardproxy_is_"
_BATCH_ROWS = 500
_READ_ONLY_TRANSACTION = 1792  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
_WRITABLE = "SET STATEMENT tx_read_only=0 FOR "


def needs_one_server(sql: str) -> bool:
    """The statement combines rows (aggregates, grouping, DISTINCT, order, limit, joins, subqueries, set
    operations): concatenated per data source, its answer would differ from one server's. Text the parser
    cannot read counts as combining (the one-server answer is right either way, only slower)."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except Exception:  # sqlglot's errors: read it the safe way
        return True
    if not isinstance(tree, exp.Select):
        return True
    if any(tree.args.get(k) for k in ("joins", "group", "order", "limit", "distinct", "having", "offset")):
        return True
    if len(list(tree.find_all(exp.Select))) > 1:
        return True
    return tree.find(exp.AggFunc, exp.Window) is not None


def read_tables(sql: str) -> list[str]:
    """The information_schema tables listing schema objects that `sql` reads, upper case, in order."""
    masked = _masked(sql)
    out: list[str] = []
    for m in _SCHEMA_TABLE.finditer(masked):
        if not _QUALIFIER.match(masked, m.end()) and m.group(1).upper() not in out:
            out.append(m.group(1).upper())
    return out


def _spliced(sql: str, scratch: Mapping[str, str]) -> str:
    """`sql` with each information_schema table replaced by its scratch table, aliased by the name as typed
    (MariaDB shows it as the columns' table) unless the statement gives an alias of its own."""
    masked = _masked(sql)
    out: list[str] = []
    pos = 0
    for m in _SCHEMA_TABLE.finditer(masked):
        out.append(sql[pos : m.start()])
        typed = m.group(1)
        if _QUALIFIER.match(masked, m.end()):
            out.append(f"`{typed}`")  # information_schema.TABLES.TABLE_NAME: the column of the alias
        else:
            out.append(f"`{scratch[typed.upper()]}`")
            if _NOT_ALIAS.match(masked, m.end()):
                out.append(f" AS `{typed}`")
        pos = m.end()
    out.append(sql[pos:])
    return "".join(out)


async def answer(
    session: Session,
    db: LogicalDatabase,
    sql: str,
    scopes: Mapping[str, Scope],
    map_row: RowMapper,
    map_rows: RowsMapper | None = None,
    *,
    why: str = "",
) -> None:
    """Answer `sql` (reading information_schema of `db`) on the first data source over the whole logical view;
    `map_rows`: what each data source's rows of a table become once all are read (encrypted tables' columns in their
    logical shape); `why`: why the statement is answered this way, for the error of a READ ONLY transaction."""
    host_ds = next(iter(db.sources))
    host = await session.backend(host_ds, record_write=False)
    scratch = {table: f"{SCRATCH_PREFIX}{i}" for i, table in enumerate(read_tables(sql))}
    created: list[str] = []
    writes = ""  # what the scratch tables' writes are prefixed with
    originals: dict[str, dict[str, ColumnDefinition41]] = {}  # scratch table -> column -> information_schema's
    try:
        for table, name in scratch.items():
            defined = await _definitions(session, host, table)
            if defined is None:
                return
            originals[name] = defined
            create = f"CREATE TEMPORARY TABLE `{name}` AS SELECT * FROM information_schema.{table} WHERE FALSE"
            res = await host.execute(writes + create)
            if isinstance(res, ERRPacket) and res.errno == _READ_ONLY_TRANSACTION and not writes:
                # a session made READ ONLY (SET SESSION TRANSACTION READ ONLY, a driver's read-only connection) lets
                # one statement write; a transaction started READ ONLY does not
                writes = _WRITABLE
                res = await host.execute(writes + create)
            if isinstance(res, ERRPacket) and res.errno == _READ_ONLY_TRANSACTION:
                why = why or (
                    f"of the sharded database '{db.name}' is read here by a statement that combines rows (aggregate, "
                    "GROUP BY, DISTINCT, ORDER BY, LIMIT, join or subquery)"
                )
                session.error(
                    res.errno,
                    f"shardproxy: information_schema.{table} {why}, answered over TEMPORARY tables on data source "
                    f"{host_ds}, which a READ ONLY transaction does not allow: run it outside the transaction",
                    res.sqlstate,
                )
                return
            if isinstance(res, ERRPacket):
                session.error(res.errno, res.message, res.sqlstate)
                return
            created.append(name)
            for ds, source in db.sources.items():
                conn = host if ds == host_ds else await session.backend(ds, record_write=False)
                if not await _copy(
                    session, host, conn, ds, source.config.database, (table, name), scopes[ds], map_row, map_rows,
                    writes,
                ):
                    return
        await _run(session, host, _spliced(sql, scratch), {v: k for k, v in scratch.items()}, originals)
    finally:
        if created:
            await _drop(session, host, created, writes)


async def _copy(
    session: Session,
    host: BackendConnection,
    conn: BackendConnection,
    ds: str,
    physical: str,
    scratch: tuple[str, str],
    scope: Scope,
    map_row: RowMapper,
    map_rows: RowsMapper | None,
    writes: str,
) -> bool:
    """Copy the rows `ds` answers for of one information_schema table into the scratch table; False after an
    error was sent to the client."""
    table, name = scratch
    read = scope_to_schema(f"SELECT * FROM information_schema.{table}", physical, scope)
    if read is None:
        return True
    columns: tuple[ColumnDefinition41, ...] = ()
    rows: list[Row] = []
    async for ev in conn.events(ComQuery(read.encode("utf-8", "surrogateescape")).encode()):
        if isinstance(ev, ResultHeader):
            columns = ev.columns
        elif isinstance(ev, bytes):
            row = map_row(decode_text_row(ev, len(columns)), columns, ds, physical)
            if row is not None:
                rows.append(row)
        elif isinstance(ev, ERRPacket):
            session.error(ev.errno, ev.message, ev.sqlstate)
            return False
    if map_rows is not None:
        rows = map_rows(table, rows, columns)
    values = ["(" + ", ".join(literal(v, c) for v, c in zip(row, columns, strict=True)) + ")" for row in rows]
    listed = ", ".join("`" + (c.org_name or c.name).replace("`", "``") + "`" for c in columns)
    for start in range(0, len(values), _BATCH_ROWS):
        res = await host.execute(
            f"{writes}INSERT INTO `{name}` ({listed}) VALUES " + ", ".join(values[start : start + _BATCH_ROWS])
        )
        if isinstance(res, ERRPacket):
            session.error(res.errno, res.message, res.sqlstate)
            return False
    return True


async def _definitions(
    session: Session, host: BackendConnection, table: str
) -> dict[str, ColumnDefinition41] | None:
    """information_schema's own definitions of `table`'s columns (upper case name -> definition), as the session's
    connection has them sent (lengths in its character set); None after an error was sent to the client."""
    out: dict[str, ColumnDefinition41] = {}
    async for ev in host.events(ComQuery(f"SELECT * FROM information_schema.{table} WHERE FALSE".encode()).encode()):
        if isinstance(ev, ResultHeader):
            out = {(c.org_name or c.name).upper(): c for c in ev.columns}
        elif isinstance(ev, ERRPacket):
            session.error(ev.errno, ev.message, ev.sqlstate)
            return None
    return out


def _as_information_schema(
    col: ColumnDefinition41, tables: Mapping[str, str], originals: Mapping[str, Mapping[str, ColumnDefinition41]]
) -> ColumnDefinition41:
    """A column of the answer over the scratch tables as it is over information_schema: a column of a scratch table
    names the information_schema table, with information_schema's length (its LONGTEXT columns' own)."""
    table = tables.get(col.org_table)
    if table is None:
        return col
    original = originals.get(col.org_table, {}).get(col.org_name.upper())
    length = original.column_length if original is not None and original.type == col.type else col.column_length
    return replace(col, schema="information_schema", org_table=table, column_length=length)


async def _run(
    session: Session,
    host: BackendConnection,
    sql: str,
    tables: Mapping[str, str],
    originals: Mapping[str, Mapping[str, ColumnDefinition41]],
) -> None:
    """The statement over the scratch tables; its columns name the information_schema tables they stand for.
    `originals`: scratch table -> its columns' definitions in information_schema."""
    columns: tuple[ColumnDefinition41, ...] = ()
    rows: list[Row] = []
    header: list[ColumnDefinition41] | None = None
    async for ev in host.events(ComQuery(sql.encode("utf-8", "surrogateescape")).encode()):
        if isinstance(ev, ResultHeader):
            columns = ev.columns
            header = [_as_information_schema(c, tables, originals) for c in columns]
        elif isinstance(ev, bytes):
            rows.append(decode_text_row(ev, len(columns)))
        elif isinstance(ev, ERRPacket):
            message = re.sub(
                rf"`?{SCRATCH_PREFIX}\d+`?", lambda m: tables.get(m.group(0).strip("`"), m.group(0)), ev.message
            )
            session.error(ev.errno, message, ev.sqlstate)
            return
    if header is None:
        session.ok()
        return
    session.wire.send_many(result_packets(header, rows, capabilities=session.capabilities, status=session.status))


async def _drop(session: Session, host: BackendConnection, created: list[str], writes: str) -> None:
    """Scratch tables never outlive the statement: dropped, or their connection is closed with them."""
    try:
        res = await host.execute(f"{writes}DROP TEMPORARY TABLE IF EXISTS " + ", ".join(f"`{n}`" for n in created))
    except Exception as exc:  # the connection failed: it is dropped, the tables with it
        host.broken = True
        log.warning("schema_merge_drop_failed", conn=session.id, error=str(exc))
    else:
        if isinstance(res, ERRPacket):
            host.broken = True
            log.warning("schema_merge_drop_failed", conn=session.id, error=res.message)
    session.drop_broken()


__all__ = ["SCRATCH_PREFIX", "answer", "needs_one_server", "read_tables"]
