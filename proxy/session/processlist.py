"""SHOW PROCESSLIST and information_schema.PROCESSLIST: the proxy's client sessions, as MySQL lists its
threads (a user sees its own sessions, an `admin: true` user everyone's); who may KILL whom.

Why its own module: the proxy answers these itself from its sessions, never from a backend (whose threads
are the proxy's pooled connections); proxy.session.metadata sends the statements that read them here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from protocol import text as ptext
from protocol.constants import ColumnFlag, ColumnType
from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket
from protocol.results import ResultHeader
from proxy.clusterport import port
from proxy.execution.resultset import result_packets
from proxy.session.definitions import server_definitions
from proxy.session.statements import classify
from routing.split import _TOKEN, split_statements

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session


def may_see(viewer: Session, other: Session) -> bool:
    """MySQL's rule for SHOW PROCESSLIST, information_schema.PROCESSLIST and KILL, where a user without the
    PROCESS / SUPER privilege sees and kills only the sessions of its own user name: here, unless the user
    is an admin (`admin: true` in authority.users, as in ShardingSphere), only sessions of the same user."""
    config = viewer.user_config
    return (config is not None and config.admin) or other is viewer or (
        other.user_config is not None and other.user == viewer.user)


def visible_sessions(session: Session) -> list[Session]:
    return sorted((s for s in session.server.sessions.values() if may_see(session, s)), key=lambda x: x.id)


# information_schema.PROCESSLIST, with or without backticks, outside literals and comments (see _masked)
_PROCESSLIST_TABLE = re.compile(
    r"(?<![\w$`.])`?information_schema`?\s*\.\s*`?processlist`?(?![\w$`])", re.I)
_QUALIFIER = re.compile(r"\s*\.")
# what may follow a table reference that is not an alias for it
_NOT_ALIAS = re.compile(
    r"\s*(?:$|[),;]|(?:WHERE|ORDER|GROUP|LIMIT|HAVING|WINDOW|UNION|EXCEPT|INTERSECT|JOIN|INNER|LEFT|RIGHT|"
    r"CROSS|NATURAL|STRAIGHT_JOIN|FULL|ON|USING|FOR|LOCK|INTO|PROCEDURE|USE|IGNORE|FORCE)\b)", re.I)
_MARIADB_PROCESSLIST_EXTRA = (
    "CAST(0 AS DECIMAL(22,3)) AS TIME_MS, 0 AS STAGE, 0 AS MAX_STAGE, CAST(0 AS DECIMAL(7,3)) AS PROGRESS, "
    "0 AS MEMORY_USED, 0 AS MAX_MEMORY_USED, 0 AS EXAMINED_ROWS, 0 AS QUERY_ID, CAST(NULL AS BINARY) AS INFO_BINARY, "
    "0 AS TID"
)


def reads_processlist(sql: str) -> bool:
    """Does `sql` read information_schema.PROCESSLIST (which the proxy answers from its own sessions)?"""
    return "processlist" in sql.lower() and _PROCESSLIST_TABLE.search(_masked(sql)) is not None


def _hides_proxy_statement(sql: str) -> bool:
    """A multi-statement query (relayed whole to a pass-through backend) with a statement the proxy must
    answer itself: the backend would kill or list its own threads, the proxy's pooled connections."""
    parts = split_statements(sql)
    if len(parts) < 2:
        return False
    for part in parts:
        stmt = classify(part)
        if (stmt is not None and stmt.kind in ("kill", "kill_other", "processlist")) \
                or _PROCESSLIST_TABLE.search(_masked(part)):
            return True
    return False


def _masked(sql: str) -> str:
    """`sql` with string literals and comments blanked out (same length), so that patterns match only in
    the statement's own words."""
    out = []
    for m in _TOKEN.finditer(sql):
        piece = m.group()
        out.append(" " * len(piece) if piece[:1] in ("'", '"', "#") or piece[:2] in ("/*", "--") else piece)
    return "".join(out)


def _text_literal(value: str | None) -> str:
    """A string literal for any text, whatever the backend's sql_mode; bytes that are not UTF-8 as '?', as
    information_schema shows them."""
    if value is None:
        return "NULL"
    return f"CONVERT(X'{ptext.shown(value).encode().hex()}' USING utf8mb4)"


def _state(asking: Session, s: Session, own: str, states: dict[int, str] | None = None) -> str:
    """MariaDB's State column: empty for a session between commands, `own` for the session that asks (what MariaDB
    shows for it: `starting` in SHOW PROCESSLIST, `Filling schema table` in information_schema.PROCESSLIST),
    for another that runs a command the state of the server thread running it (`backend_states`), else
    `Executing`."""
    if s.command in ("Sleep", "Connect", "Killed") or not s.busy:
        return ""
    if s is asking:
        return own
    return (states or {}).get(s.id) or "Executing"


async def backend_states(asking: Session) -> dict[int, str]:
    """Session id -> the State of the server thread that runs its command, for the visible sessions that run one
    on a data source (`Waiting for table metadata lock`, `Sending data` ...: what tools and tests wait for), read
    over each data source's admin connection; sessions whose thread shows no state are left out."""
    threads: dict[Any, dict[int, int]] = {}  # data source -> thread id -> session id
    for s in visible_sessions(asking):
        if s is asking or not s.busy:
            continue
        for conn in (*s.backends.values(), *s.read_backends.values(), *s.borrowed):
            if conn.busy and not conn.broken:
                threads.setdefault(conn.source, {})[conn.thread_id] = s.id
    out: dict[int, str] = {}
    for source, by_thread in threads.items():
        ids = ", ".join(str(t) for t in sorted(by_thread))
        try:
            res = await source.admin_execute(
                f"SELECT ID, STATE FROM information_schema.PROCESSLIST WHERE ID IN ({ids})"
            )
        except Exception:  # the data source cannot answer now: those sessions show `Executing`
            continue
        if not isinstance(res, list):
            continue
        for thread, state in res:
            if state and thread is not None:
                out.setdefault(by_thread[int(thread)], state.decode("utf-8", "surrogateescape"))
    return out


def _info(text: str | None) -> str | None:
    """The statement as MariaDB keeps it for the processlist: without the `;` and spaces that end it."""
    return text.rstrip().rstrip(";").rstrip() if text else text


def _processlist_rows_sql(
    session: Session, others: Sequence[tuple[Any, ...]] = (), states: dict[int, str] | None = None
) -> str:
    """The proxy's sessions that `session` may see, as a derived table in information_schema.PROCESSLIST's
    columns (MariaDB's when the backends are MariaDB)."""
    now = time.monotonic()
    extra = ", " + _MARIADB_PROCESSLIST_EXTRA if "mariadb" in session.server.server_version.lower() else ""
    head = ("SELECT CAST(0 AS UNSIGNED) AS ID, CAST('' AS CHAR(128)) AS USER, CAST('' AS CHAR(64)) AS HOST, "
            "CAST(NULL AS CHAR(64)) AS DB, CAST('' AS CHAR(16)) AS COMMAND, CAST(0 AS SIGNED) AS TIME, "
            f"CAST('' AS CHAR(64)) AS STATE, CAST(NULL AS CHAR) AS INFO{extra} FROM DUAL WHERE FALSE")
    selects = [head]
    for s in visible_sessions(session):
        extra_values = ", 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0" if extra else ""
        selects.append(
            f"SELECT {s.id}, {_text_literal(s.user)}, {_text_literal(host_shown(s))}, "
            f"{_text_literal(s.database.name if s.database else None)}, {_text_literal(s.command)}, "
            f"{int(now - s.command_started)}, {_text_literal(_state(session, s, 'Filling schema table', states))}, "
            f"{_text_literal(_info(s.info))}{extra_values}")
    for o in others:  # other proxies' sessions (Cluster mode): id, user, host, db, command, time, state, info
        extra_values = ", 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0" if extra else ""
        selects.append(f"SELECT {int(o[0])}, {_text_literal(o[1])}, {_text_literal(o[2])}, {_text_literal(o[3])}, "
                       f"{_text_literal(o[4])}, {int(o[5])}, '', {_text_literal(o[7])}{extra_values}")
    return "(" + " UNION ALL ".join(selects) + ")"


def _processlist_table(
    session: Session, sql: str, others: Sequence[tuple[Any, ...]] = (), states: dict[int, str] | None = None
) -> str | None:
    """`sql` with information_schema.PROCESSLIST replaced by the proxy's own sessions (those the user may
    see), or None when it does not read that table. The backends' PROCESSLIST would list the proxy's
    pooled connections, with every user's statements and ids KILL does not take."""
    masked = _masked(sql)
    matches = list(_PROCESSLIST_TABLE.finditer(masked))
    if not matches:
        return None
    derived = _processlist_rows_sql(session, others, states)
    out: list[str] = []
    pos = 0
    for m in matches:
        out.append(sql[pos : m.start()])
        if _QUALIFIER.match(masked, m.end()):
            out.append("PROCESSLIST")  # information_schema.PROCESSLIST.ID: a column of the derived table
        else:
            out.append(derived)
            if _NOT_ALIAS.match(masked, m.end()):
                out.append(" AS PROCESSLIST")  # a derived table needs a name: the table's own, as columns use it
        pos = m.end()
    out.append(sql[pos:])
    return "".join(out)


_INTO = re.compile(r"\bINTO\b", re.I)


async def _select_on_default(session: Session, db: LogicalDatabase | None, sql: str, original: str | None = None
                             ) -> None:
    """Run a SELECT that reads no table of a logical database on one backend connection of the session
    (of the default database's when none is chosen) and answer its result (text or binary rows).

    `original`: the user's statement that `sql` rewrites (information_schema.PROCESSLIST as a derived table of the
    proxy's sessions): its answer carries the column definitions MariaDB sends for it (the table's, with its
    schema, flags and lengths), read by running it there first, its rows dropped. Not for a statement that writes
    somewhere (`INTO`), nor when it fails there or has another shape: then the rewrite's own definitions."""

    target = db or session.server.default_database()
    if target is None:
        session.error(1046, "No database selected", "3D000")
        return
    saved = session.database
    session.database = target
    try:
        conn = await session.backend(next(iter(target.sources)), record_write=False)
    finally:
        session.database = saved
    defined: tuple[ColumnDefinition41, ...] | None = None
    if original is not None and not _INTO.search(_masked(original)):
        defined = await _definitions_on(conn, original)
    answer = await conn.answer(sql)
    if isinstance(answer, ERRPacket):
        session.error(answer.errno, answer.message, answer.sqlstate)
        return
    columns, rows = answer
    if not columns:
        session.ok()
        return
    if defined is not None and len(defined) == len(columns):
        columns = defined
    session.wire.send_many(result_packets(list(columns), rows, capabilities=session.capabilities,
                                          status=session.status))


async def _definitions_on(conn: BackendConnection, sql: str) -> tuple[ColumnDefinition41, ...] | None:
    """The column definitions of `sql`'s answer on `conn` (its rows read and dropped); None for an error or no
    result set."""
    columns: tuple[ColumnDefinition41, ...] = ()
    failed = False
    async for ev in conn.events(ComQuery(ptext.encode(sql)).encode()):
        if isinstance(ev, ResultHeader):
            columns = ev.columns
        elif isinstance(ev, ERRPacket):
            failed = True
    return None if failed or not columns else columns


def host_shown(s: Session) -> str:
    """A client's Host as MariaDB's processlist shows it: `address:port` for a TCP client."""
    port_number = getattr(s, "client_port", 0)
    return f"{s.client_host}:{port_number}" if port_number else s.client_host


async def processlist(session: Session, full: bool) -> None:
    """SHOW [FULL] PROCESSLIST: the proxy's sessions under the definitions MariaDB sends for the statement (read from
    a data source: its own threads' rows are dropped)."""
    states = await backend_states(session)
    now = time.monotonic()
    rows = []
    for s in visible_sessions(session):
        text = _info(s.info)
        info = text if full else text[:100] if text else None
        rows.append((s.id, s.user, host_shown(s), s.database.name if s.database else None, s.command,
                     int(now - s.command_started), _state(session, s, "starting", states), info, "0.000"))
    # Cluster mode: the other proxies' sessions too
    rows = sorted([*rows, *await port(session.server).other_sessions(session, full)], key=lambda r: int(r[0]))
    defined = await server_definitions(session, "SHOW FULL PROCESSLIST" if full else "SHOW PROCESSLIST")
    if defined is not None and len(defined) == len(_PROCESSLIST_COLUMNS):
        session.rows(list(defined), rows)
        return
    number = ColumnDefinition41("", ColumnType.LONGLONG, column_length=21, flags=ColumnFlag.NOT_NULL | ColumnFlag.NUM)
    columns: list[str | ColumnDefinition41] = [
        replace(number, name="Id"), "User", "Host", "db", "Command", replace(number, name="Time", type=ColumnType.LONG),
        "State", "Info", replace(number, name="Progress", type=ColumnType.NEWDECIMAL, decimals=3),
    ]
    session.rows(columns, rows)


# SHOW PROCESSLIST's columns (MariaDB's: MySQL's have no Progress)
_PROCESSLIST_COLUMNS = ("Id", "User", "Host", "db", "Command", "Time", "State", "Info", "Progress")


__all__ = ["backend_states", "may_see", "processlist", "reads_processlist", "visible_sessions"]
