"""Metadata answers in logical names: what GUI tools, ORMs and drivers ask when they connect and browse.

* Session functions (DATABASE(), CONNECTION_ID(), USER(), ...) are replaced by the session's values.
* `SHOW [FULL] TABLES` on a sharded database lists logic, broadcast and single tables.
* information_schema queries run on every data source with the logical names in their literals turned
  into the physical ones, and the answers are mapped back: physical schema -> logical database, the first
  actual table of a sharded table -> its logic name, the other actual tables hidden, rows deduplicated.
* `SHOW PROCESSLIST` lists the proxy's sessions.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from protocol.constants import ColumnFlag, ColumnType
from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket, decode_text_row
from protocol.results import ResultHeader
from proxy.statements import like_to_regex, unquote_ident
from routing.logical_names import LogicalNames
from routing.session_functions import substitute_session_functions
from routing.split import _TOKEN

if TYPE_CHECKING:
    from proxy.runtime import LogicalDatabase
    from proxy.session import Session

_SHOW_TABLES = re.compile(
    r"^\s*SHOW\s+(?P<full>FULL\s+)?TABLES(?:\s+(?:FROM|IN)\s+(?P<db>`[^`]+`|\w+))?"
    r"(?:\s+LIKE\s+'(?P<like>(?:[^'\\]|\\.|'')*)')?\s*;?\s*$",
    re.I,
)
_SYSTEM_SCHEMAS = {"information_schema", "performance_schema", "mysql", "sys"}


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def function_values(session: Session) -> dict[str, str]:
    db = session.database
    user = session.user_config
    values = {
        "database": _quote(db.name) if db else "NULL",
        "schema": _quote(db.name) if db else "NULL",
        "connection_id": str(session.id),
        "user": _quote(f"{session.user}@{session.client_host}"),
        "session_user": _quote(f"{session.user}@{session.client_host}"),
        "system_user": _quote(f"{session.user}@{session.client_host}"),
        "current_user": _quote(f"{session.user}@{user.host if user else '%'}"),
    }
    if db is not None and db.kernel is not None:
        # on one pass-through connection the backend knows these; across shards only the proxy does
        values["last_insert_id"] = str(session.last_insert_id)
        values["row_count"] = str(session.row_count)
    return values


def substitute(session: Session, sql: str) -> str | None:
    return substitute_session_functions(sql, function_values(session))


def logical_names(db: LogicalDatabase) -> LogicalNames:
    tables = {ds: db.metadata.actual_tables(ds) for ds in db.sources}
    return LogicalNames(db.rules, tables)


async def answer(session: Session, db: LogicalDatabase | None, sql: str) -> bool:
    """Answer `sql` here when it is a metadata statement that needs logical names; False otherwise."""
    head = sql.lstrip()[:20].upper()
    if head.startswith("SHOW"):
        if db is not None and db.kernel is not None:
            m = _SHOW_TABLES.match(sql)
            if m:
                await _show_tables(session, db, m)
                return True
        return False
    if db is not None and "information_schema" in sql.lower() and head.startswith(("SELECT", "WITH", "(")):
        await _information_schema(session, db, sql)
        return True
    return False


async def _show_tables(session: Session, db: LogicalDatabase, m: re.Match[str]) -> None:
    target = db
    if m.group("db"):
        found = session.server.database(unquote_ident(m.group("db")))
        if found is None:
            session.error(1049, f"Unknown database '{unquote_ident(m.group('db'))}'", "42000")
            return
        target = found
    if target.kernel is None:
        await session.relay(next(iter(target.sources)), ComQuery(("SHOW " + (m.group("full") or "") + "TABLES")
                                                                  .encode()).encode())
        return
    await target.reload_metadata()  # tables may have been created behind the proxy's back
    names = logical_names(target).tables
    if m.group("like") is not None:
        rx = like_to_regex(m.group("like"))
        names = [n for n in names if rx.match(n)]
    column = f"Tables_in_{target.name}" + (f" ({m.group('like')})" if m.group("like") is not None else "")
    if m.group("full"):
        session.rows([column, "Table_type"], [(n, "BASE TABLE") for n in names])
    else:
        session.rows([column], [(n,) for n in names])


def _rewrite_literals(sql: str, mapping: dict[str, str]) -> str:
    """Replace string literals whose value is a logical name by the physical one (outside comments)."""
    out: list[str] = []
    for m in _TOKEN.finditer(sql):
        piece = m.group()
        if len(piece) >= 2 and piece[0] in ("'", '"') and piece[-1] == piece[0]:
            value = piece[1:-1]
            replacement = mapping.get(value.lower())
            if replacement is not None:
                out.append(_quote(replacement))
                continue
        out.append(piece)
    return "".join(out)


async def _information_schema(session: Session, db: LogicalDatabase, sql: str) -> None:
    names = logical_names(db)
    header: tuple[ColumnDefinition41, ...] | None = None
    rows: list[tuple[bytes | None, ...]] = []
    seen: set[tuple[bytes | None, ...]] = set()
    for ds, source in db.sources.items():
        physical = source.config.database
        mapping = {db.name.lower(): physical}
        for table in names.tables:
            actual = names.actual(ds, table)
            if actual is not None:
                mapping.setdefault(table.lower(), actual)
        conn = await session.backend(ds)
        columns: tuple[ColumnDefinition41, ...] = ()
        async for ev in conn.events(ComQuery(_rewrite_literals(sql, mapping).encode("utf-8", "surrogateescape"))
                                    .encode()):
            if isinstance(ev, ResultHeader):
                columns = ev.columns
                header = header or columns
            elif isinstance(ev, bytes):
                row = _map_row(decode_text_row(ev, len(columns)), columns, ds, physical, db.name, names)
                if row is not None and row not in seen:
                    seen.add(row)
                    rows.append(row)
            elif isinstance(ev, ERRPacket):
                session.wire.send(ev.encode(session.capabilities))
                session.errored = True
                return
    if header is None:
        session.ok()
        return
    from proxy.resultset import result_packets

    session.wire.send_many(result_packets(list(header), rows, capabilities=session.capabilities,
                                          status=session.status))


def _map_row(row: tuple[bytes | None, ...], columns: tuple[ColumnDefinition41, ...], ds: str, physical: str,
             logical: str, names: LogicalNames) -> tuple[bytes | None, ...] | None:
    out = list(row)
    for i, col in enumerate(columns):
        value = row[i]
        if value is None:
            continue
        label = (col.org_name or col.name).upper()
        text = value.decode("utf-8", "surrogateescape")
        if label.endswith("SCHEMA") or label in ("SCHEMA_NAME", "TABLE_CATALOG_SCHEMA", "DB"):
            if text == physical:
                out[i] = logical.encode()
            elif text.lower() not in _SYSTEM_SCHEMAS:
                return None  # another database on the same server: not part of this logical database
        elif label.endswith("TABLE_NAME"):
            shown = names.view(ds, text)
            if shown is None:
                return None
            out[i] = shown.encode()
    return tuple(out)


async def processlist(session: Session, full: bool) -> None:
    now = time.monotonic()
    rows = []
    for s in sorted(session.server.sessions.values(), key=lambda x: x.id):
        info = s.info if full else (s.info or "")[:100] if s.info else None
        rows.append((s.id, s.user, f"{s.client_host}", s.database.name if s.database else None, s.command,
                     int(now - s.command_started), "", info, 0.0))
    number = ColumnDefinition41("", ColumnType.LONGLONG, column_length=21, flags=ColumnFlag.NOT_NULL | ColumnFlag.NUM)
    columns: list[str | ColumnDefinition41] = [
        replace(number, name="Id"), "User", "Host", "db", "Command", replace(number, name="Time", type=ColumnType.LONG),
        "State", "Info", replace(number, name="Progress", type=ColumnType.NEWDECIMAL, decimals=3),
    ]
    session.rows(columns, rows)
