"""What every way of running a routed statement shares: a unit's failure, a unit run to its OK, error
texts in the client's names, the access a statement asks of read/write splitting, props.sql-show.

Why its own module: the executor, SELECT ... INTO, the upsert check, EXPLAIN, routed SET and the fast path
all need these, and the executor dispatches to several of them; kept here, below all of them, the imports
run one way (no module imports the executor only to reach a helper).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import structlog

from protocol.errors import ServerError
from protocol.packets import ERRPacket, OKPacket
from proxy.backends.codec import StatementCodec, StatementFailed
from proxy.execution.memo import IdentityMemo
from routing.plan import ExecutionUnit, RoutedStatement, RouteUnit, StatementKind

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.runtime import LogicalDatabase

log = structlog.get_logger("shardproxy.executor")


class _ShowsSql(Protocol):
    """What log_statement reads of a server: props.sql-show."""

    sql_show: bool


class _LoggingSession(Protocol):
    """What log_statement reads of a session."""

    id: int

    @property
    def server(self) -> _ShowsSql: ...


class UnitFailed(ServerError):
    """A unit's backend answered with ERR; carries it to the client with the data source named. Its errno,
    SQLSTATE and message are the ERR's; the client's text (logic names, `[ds]`, `note`) is made by
    proxy.execution.errors, which knows the statement."""

    def __init__(self, data_source: str, err: ERRPacket) -> None:
        super().__init__(err.message, errno=err.errno, sqlstate=err.sqlstate)
        self.data_source = data_source
        self.err = err
        self.note = ""  # what became of the rest of the statement (proxy.execution.atomic), added to the message



def _logical_message(db: LogicalDatabase, routed: RoutedStatement, message: str) -> str:
    """A backend's error text in the client's names: actual tables -> logic tables, physical databases ->
    the logical database (`Table 'demo_ds_0.t_order_1' doesn't exist` -> `Table 'sharding_db.t_order' ...`)."""
    names = {actual: logic for actual, logic in _renames(routed).items()}
    for source in db.sources.values():
        config = getattr(source, "config", None)
        if config is not None and config.database != db.name:
            names[config.database.lower()] = db.name
    if not names:
        return message
    pattern = re.compile(r"(?<![\w$])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
                         + r")(?![\w$])", re.I)
    return pattern.sub(lambda m: names[m.group(1).lower()], message)


def error_renamer(db: LogicalDatabase, routed: RoutedStatement) -> Callable[[bytes], bytes]:
    """For relayed answers: the same renaming applied to an ERR packet (worked out only if one comes)."""

    def rename(payload: bytes) -> bytes:
        try:
            err = ERRPacket.decode(payload)
        except Exception:
            return payload
        message = _logical_message(db, routed, err.message)
        return payload if message == err.message else replace(err, message=message).encode()

    return rename



# A route's renames, by its route units (names only, not the statement's SQL): the kernel hands out the
# same tuple of units for every call routed to all nodes (a kept text route, and any range over an inline rule)
_RENAMES: IdentityMemo[dict[str, str]] = IdentityMemo(256)


def _renames(routed: RoutedStatement) -> dict[str, str]:
    """Actual table name (lower case) -> logic name, for the answer's column definitions and messages (not to be
    changed by the caller: it may be shared)."""
    units = routed.route_units
    if routed.result_table_renames:
        return _route_renames(units, routed.result_table_renames)
    known = _RENAMES.get(units)
    return known if known is not None else _RENAMES.put(units, _route_renames(units, {}))


def _route_renames(units: tuple[RouteUnit, ...], result_table_renames: Mapping[str, str]) -> dict[str, str]:
    out = {actual.lower(): logic for actual, logic in result_table_renames.items()}
    for ru in units:
        for logic, actual in ru.table_map.items():
            if actual.lower() != logic.lower():
                out.setdefault(actual.lower(), logic)
    return out



def access(kind: StatementKind, write: bool) -> dict[str, bool]:
    """Read/write splitting, decided here for every way of running a statement (the executor's units, a federated
    statement's copies and its answer on the host, SELECT ... INTO): a plain SELECT may use a replica; locking or
    hinted SELECTs (`write`: the kernel's `RoutedStatement.write`) go to the primary without counting as writes;
    every other statement is a write. Whether a replica is used after all (the session wrote, a transaction, the
    group's rules) is the group's own decision (proxy.execution.replicas.group_backend), the same for all of them."""
    select = kind is StatementKind.SELECT
    return {"read": select and not write, "record_write": not select}


def _access(routed: RoutedStatement) -> dict[str, bool]:
    """`access` of a routed statement."""
    return access(routed.kind, routed.write)



async def _run_unit_to_ok(conn: BackendConnection, unit: ExecutionUnit, codec: StatementCodec,
                          prefix: Sequence[str] = (), began: Callable[[BackendConnection], None] | None = None
                          ) -> OKPacket:
    """A write's unit, to its OK (UnitFailed for its ERR). `prefix`: statements sent in the same write before it
    (BEGIN, SAVEPOINT: proxy.execution.atomic); `began` is told of the connection once they succeeded."""
    try:
        payload = await codec.command(conn, unit)
    except StatementFailed as exc:
        raise UnitFailed(unit.data_source, exc.err) from exc
    if not prefix:
        return _ok_of(unit, [ev async for ev in conn.events(payload)])
    answers, events = await conn.run_after(list(prefix), payload)
    for sql, answer in zip(prefix, answers, strict=True):
        if isinstance(answer, ERRPacket):
            conn.broken = True  # the unit ran outside what should have held it: closed, never reused
            raise UnitFailed(unit.data_source, replace(answer, message=f"{sql} failed: {answer.message}"))
    if began is not None:
        began(conn)
    return _ok_of(unit, events)


def _ok_of(unit: ExecutionUnit, events: Sequence[object]) -> OKPacket:
    """A write's answer: its OK (several, as one), or UnitFailed for its ERR."""
    result: OKPacket | None = None
    for ev in events:
        if isinstance(ev, ERRPacket):
            raise UnitFailed(unit.data_source, ev)
        if isinstance(ev, OKPacket):
            result = ev if result is None else replace(
                ev, affected_rows=result.affected_rows + ev.affected_rows,
                last_insert_id=result.last_insert_id or ev.last_insert_id,
            )
    return result or OKPacket()



_RECORDS = re.compile(rb"Records: (\d+)  Duplicates: (\d+)")


def insert_info(mode: str | None, oks: Sequence[OKPacket]) -> bytes:
    """The OK info of an INSERT that ran as several parts (`mode`: the kernel's `RoutedStatement.insert_mode`): what
    one server reports for the whole statement, `Records: N  Duplicates: D  Warnings: W` when it has several rows
    (none for one). A part of several rows says its own counts; a part of one row says none, and its duplicate
    follows from its affected rows as the server counts them: an IGNOREd row affects 0, an upsert's changed row 2
    (an unchanged one is no duplicate), a REPLACE 1 + the rows it deleted."""
    records = duplicates = warnings = 0
    for ok in oks:
        warnings += ok.warnings
        counted = _RECORDS.search(ok.info)
        if counted is not None:
            records += int(counted.group(1))
            duplicates += int(counted.group(2))
            continue
        records += 1
        affected = ok.affected_rows
        if mode == "replace":
            duplicates += max(affected - 1, 0)
        elif mode == "update":
            duplicates += affected == 2
        elif mode == "ignore":
            duplicates += affected == 0
    if records <= 1:
        return b""
    return f"Records: {records}  Duplicates: {duplicates}  Warnings: {warnings}".encode()


_INFO_NUMBER = re.compile(rb"\d+")


def _merged_info(infos: list[bytes]) -> bytes:
    """One OK info for several units, the counts summed: 'Rows matched: 3  Changed: 3  Warnings: 0' of an
    UPDATE, 'Records: 4  Duplicates: 1  Warnings: 0' of a multi-row INSERT, as one server would report them.
    Infos that do not share one shape (or have none) give none."""
    if len(infos) <= 1:
        return infos[0] if infos else b""
    shape = _INFO_NUMBER.sub(b"#", infos[0])
    if not infos[0] or any(_INFO_NUMBER.sub(b"#", info) != shape for info in infos[1:]):
        return b""
    totals = [sum(n) for n in zip(*([int(m) for m in _INFO_NUMBER.findall(info)] for info in infos), strict=True)]
    numbers = iter(totals)
    return _INFO_NUMBER.sub(lambda _m: str(next(numbers)).encode(), infos[0])




def log_statement(session: _LoggingSession, sql: str, routed: RoutedStatement, params: Sequence[object] = ()) -> None:
    """props.sql-show: the logic statement and every actual statement with its data source."""
    if not session.server.sql_show:
        return
    log.info("logic_sql", conn=session.id, sql=sql, params=list(params) if params else None)
    for unit in routed.execution_units:
        log.info("actual_sql", conn=session.id, data_source=unit.data_source, sql=unit.sql,
                 params=list(unit.params) if unit.params else None)
