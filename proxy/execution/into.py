"""`SELECT ... INTO @a, @b` on a sharded logical database: the proxy assigns the variables itself.

User variables live on backend connections, and a session uses one connection per data source: a SELECT
that set `@v` on the connection of the node that answered it would leave `@v` unset everywhere else (and
`SELECT @v` reads the first data source's connection). So the kernel routes the SELECT without its INTO
clause (`routing.into`), it runs as any SELECT does (one node, or several merged), its answer is kept
here instead of going to the client, and then, as MySQL does:

* one row: the variables get its values, as a `SET @a = <literal>, ...` applied to every connection the
  session holds and recorded in the session's SET state, replayed on every connection it takes later;
  the literal keeps the value's type (integer, DECIMAL with its scale, DOUBLE, string with its
  collation, binary string; temporal values are latin1 strings, as MariaDB stores them in variables);
* no row: the variables keep their values and the answer carries warning 1329 (also for SHOW WARNINGS,
  which reads the first data source's connection);
* several rows: the variables get the first row, and the statement fails with 1172 ER_TOO_MANY_ROWS;
* a column count other than the variables': 1222, as MariaDB says it.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Protocol

from protocol import text
from protocol.constants import ColumnFlag, ColumnType, ServerStatus
from protocol.packets import ColumnDefinition41, ComQuery, EOFPacket, ERRPacket, OKPacket, decode_text_row
from protocol.results import ResultHeader
from protocol.wire import Reader
from proxy.backends.backend import BackendConnection, BackendError
from proxy.backends.codec import StatementCodec
from proxy.execution.errors import answer_error
from proxy.execution.plans import Run, run_of
from proxy.execution.units import UnitFailed, _access, _run_unit_to_ok
from proxy.frontend.wire import CapturedWriter
from routing.plan import RoutedStatement

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

ER_TOO_MANY_ROWS = 1172
ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT = 1222
ER_SP_FETCH_NO_DATA = 1329
BINARY_CHARSET = 63

_INTEGERS = {ColumnType.TINY, ColumnType.SHORT, ColumnType.LONG, ColumnType.LONGLONG, ColumnType.INT24,
             ColumnType.YEAR}
_DECIMALS = {ColumnType.DECIMAL, ColumnType.NEWDECIMAL}
_TEMPORAL = {ColumnType.DATE, ColumnType.NEWDATE, ColumnType.TIME, ColumnType.TIME2, ColumnType.DATETIME,
             ColumnType.DATETIME2, ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2}

# collation id -> (character set, collation name), as the data sources' information_schema says
_collation_names: dict[int, tuple[str, str] | None] = {}


class RunPlan(Protocol):
    """How a decided plan runs and answers (the executor's execute_plan, handed in by the executor)."""

    async def __call__(self, session: Session, db: LogicalDatabase, run: Run, codec: StatementCodec) -> None: ...


async def select_into(session: Session, db: LogicalDatabase, routed: RoutedStatement, codec: StatementCodec,
                      run: RunPlan) -> None:
    if len(routed.execution_units) == 1:
        await _on_one_node(session, db, routed, codec)
    else:
        await _merged(session, db, routed, codec, run)


async def _on_one_node(session: Session, db: LogicalDatabase, routed: RoutedStatement,
                       codec: StatementCodec) -> None:
    """One unit: the statement runs as written (its INTO kept) on that node's connection, so MariaDB itself
    assigns, warns and fails; the variables it left there are read back and set on every other connection."""
    unit = routed.execution_units[0]
    conn = await session.backend(unit.data_source, **_access(routed))
    failed: UnitFailed | None = None
    try:
        ok: OKPacket | None = await _run_unit_to_ok(conn, unit, codec)
        err: ERRPacket | None = None
    except UnitFailed as exc:
        ok, err, failed = None, exc.err, exc
    assert ok is not None or err is not None
    if err is None or err.errno == ER_TOO_MANY_ROWS:  # 1172 assigned the first row before it failed
        columns, values = await _read_variables(conn, routed.into_variables)
        literals = [await _literal(session, db, v, c) for v, c in zip(values, columns, strict=True)]
        await assign(session, _set_sql(routed.into_variables, literals), skip=conn)
    if failed is not None:
        answer_error(session, failed, db=db, routed=routed, named=False)
        return
    assert ok is not None
    session.update_status(ok.status)
    if ok.warnings and conn.name != db.rules.data_sources[0] and (not ok.affected_rows or routed.into_trailing):
        await _warn(session, db, routed.into_trailing and not codec.binary, bool(ok.affected_rows))
    session.wire.send(OKPacket(ok.affected_rows, 0, ServerStatus(session.status), ok.warnings,
                               ok.info).encode(session.capabilities))


async def _read_variables(conn: BackendConnection, names: tuple[str, ...]
                          ) -> tuple[list[ColumnDefinition41], tuple[bytes | None, ...]]:
    """The variables' values on one connection, with the column definitions that carry their types. A
    SELECT without tables leaves the connection's warnings as they were (SHOW WARNINGS still sees them)."""
    columns: list[ColumnDefinition41] = []
    row: tuple[bytes | None, ...] = ()
    async for ev in conn.events(ComQuery(text.encode("SELECT " + ", ".join(names))).encode()):
        if isinstance(ev, ResultHeader):
            columns = list(ev.columns)
        elif isinstance(ev, bytes):
            row = decode_text_row(ev, len(columns))
        elif isinstance(ev, ERRPacket):
            raise BackendError(conn.name, f"reading back {', '.join(names)} failed: {ev.message}",
                               errno=ev.errno, sqlstate=ev.sqlstate)
    return columns, row


def _set_sql(names: tuple[str, ...], literals: list[str]) -> str:
    return "SET " + ", ".join(f"{name} = {lit}" for name, lit in zip(names, literals, strict=True))


async def _merged(session: Session, db: LogicalDatabase, routed: RoutedStatement, codec: StatementCodec,
                  run: RunPlan) -> None:
    """Several units: the SELECT (its INTO removed by the kernel) runs and merges as usual into a capture;
    the proxy then does what MariaDB does with the one row. A value that MariaDB would assign with more
    precision than a result shows (a division's DECIMAL digits) is assigned as the merged result shows it."""
    variables = routed.into_variables
    capture = CapturedWriter()
    saved = session.writer, session.wire.writer, session.wire.seq
    session.writer = session.wire.writer = capture  # type: ignore[assignment]
    try:
        # the same route without its INTO: classified by the decision's one rule (a scatter select)
        await run(session, db, run_of(replace(routed, into_variables=())), codec)
    finally:
        session.writer, session.wire.writer, session.wire.seq = saved
    answer = [p for _f, _l, p in capture.frames.packets()]
    if not answer or answer[0][:1] in (b"\x00", b"\xff"):
        session.wire.send_many(answer)  # an error (or, oddly, no result set): the client gets it as it is
        return
    if answer[-1][:1] == b"\xff":
        session.wire.send(answer[-1])  # failed while the rows came
        session.errored = True
        return
    count = Reader(answer[0]).lenenc_int() or 0
    columns = [ColumnDefinition41.decode(p) for p in answer[1 : 1 + count]]
    rows = answer[1 + count + (0 if session.deprecate_eof else 1) : -1]
    if len(columns) != len(variables):
        session.error(ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                      "The used SELECT statements have a different number of columns", "21000")
        return
    if rows:
        values = codec.decode_row(rows[0], columns)
        literals = [await _literal(session, db, v, c) for v, c in zip(values, columns, strict=True)]
        await assign(session, _set_sql(variables, literals))
        if len(rows) > 1:
            session.error(ER_TOO_MANY_ROWS, "Result consisted of more than one row", "42000")
            return
    trailing = routed.into_trailing and not codec.binary  # prepared: MariaDB warns at PREPARE, not here
    warnings = _warnings(answer[-1]) + int(trailing) + int(not rows)
    if warnings:
        await _warn(session, db, trailing, bool(rows))
    session.wire.send(OKPacket(len(rows), 0, ServerStatus(session.status), warnings).encode(session.capabilities))


async def assign(session: Session, sql: str, *, skip: BackendConnection | None = None) -> None:
    """A `SET @v = <literal>` for the whole session: every held connection now (but `skip`, which has the
    variables already), every later one by replay."""
    session.release_read_backends()  # a replica connection taken later gets it by replay
    for conn in list(session.backends.values()):
        if conn is not skip:
            await session._must(conn, sql)
    session.txn.session_sets.append(sql)
    for conn in session.backends.values():
        conn.session_sets = tuple(session.txn.session_sets)


async def _warn(session: Session, db: LogicalDatabase, trailing: bool, assigned: bool) -> None:
    """MariaDB's own warnings for the statement (1287 for an INTO after FROM, then 1329 for no row) on the
    connection SHOW WARNINGS reads (the first data source's, as the kernel routes it), from a SELECT ...
    INTO of the same form that assigns nothing (no row) or NULL to a variable of the proxy's own."""
    conn = await session.backend(db.rules.data_sources[0])
    where = "" if assigned else " WHERE FALSE"
    sql = (f"SELECT NULL FROM DUAL{where} INTO @shardproxy_unused" if trailing
           else f"SELECT NULL INTO @shardproxy_unused FROM DUAL{where}")
    await session._must(conn, sql)


async def _literal(session: Session, db: LogicalDatabase, value: bytes | None, col: ColumnDefinition41) -> str:
    """A SQL literal that gives a user variable what `SELECT col INTO @v` gives it: value and type."""
    ctype = col.type
    if value is None:
        return await _null(session, db, col)
    shown = value.decode("latin1")
    if ctype in _INTEGERS:
        return f"CAST({int(shown)} AS UNSIGNED)" if col.flags & ColumnFlag.UNSIGNED else str(int(shown))
    if ctype in _DECIMALS:
        try:
            digits = str(Decimal(shown))
        except InvalidOperation:
            pass
        else:  # `9.` is a DECIMAL literal (with no fraction digits), `9` would be an integer
            return digits if "." in digits else f"{digits}."
    elif ctype == ColumnType.FLOAT:
        # the variable holds the FLOAT widened to a DOUBLE: the float nearest the text, widened
        return _double(repr(struct.unpack("<f", struct.pack("<f", float(shown)))[0]))
    elif ctype == ColumnType.DOUBLE:
        return _double(shown)
    elif ctype == ColumnType.BIT:
        return str(int.from_bytes(value, "big"))  # a BIT value in a variable is its number
    elif ctype in _TEMPORAL:
        return f"CONVERT(_binary X'{value.hex()}' USING latin1)"
    if col.character_set == BINARY_CHARSET:
        return f"_binary X'{value.hex()}'"
    named = await _collation(session, db, col.character_set)
    if named is None:
        return f"_binary X'{value.hex()}'"
    charset, collation = named
    return f"CONVERT(_binary X'{value.hex()}' USING {charset}) COLLATE {collation}"


async def _null(session: Session, db: LogicalDatabase, col: ColumnDefinition41) -> str:
    """A NULL of the column's type: a NULL variable keeps a type (and a collation) too."""
    ctype = col.type
    if ctype in _INTEGERS or ctype == ColumnType.BIT:
        return "CAST(NULL AS UNSIGNED)" if col.flags & ColumnFlag.UNSIGNED else "CAST(NULL AS SIGNED)"
    if ctype in _DECIMALS:
        return "CAST(NULL AS DECIMAL)"
    if ctype in (ColumnType.FLOAT, ColumnType.DOUBLE):
        return "CAST(NULL AS DOUBLE)"
    if ctype in _TEMPORAL:
        return "CONVERT(NULL USING latin1)"
    if ctype == ColumnType.NULL or col.character_set == BINARY_CHARSET:
        return "NULL"
    named = await _collation(session, db, col.character_set)
    return "NULL" if named is None else f"CONVERT(NULL USING {named[0]}) COLLATE {named[1]}"


def _warnings(end: bytes) -> int:
    """The warning count of the result's last packet (EOF, or OK with an EOF header): the SELECT's own."""
    try:
        return EOFPacket.decode(end).warnings if len(end) < 9 else OKPacket.decode(end).warnings
    except Exception:
        return 0


def _double(text: str) -> str:
    """A DOUBLE literal (a number with an exponent): `1.5` would be a DECIMAL."""
    return text if "e" in text.lower() else f"{text}e0"


async def _collation(session: Session, db: LogicalDatabase, collation_id: int) -> tuple[str, str] | None:
    if collation_id not in _collation_names:
        # any connection the statement holds knows the collations: taking another data source's while
        # holding this one would be a hold-and-wait
        held = [c for c in session.backends.values() if not c.broken and not c.busy]
        conn = held[0] if held else await session.backend(db.rules.data_sources[0])
        res = await conn.execute("SELECT CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLLATIONS "
                                 f"WHERE ID = {int(collation_id)}")
        if isinstance(res, ERRPacket) or not isinstance(res, list) or not res:
            return None
        cs, name = res[0]
        _collation_names[collation_id] = ((cs or b"").decode(), (name or b"").decode())
    return _collation_names[collation_id]


__all__ = ["assign", "select_into"]
