"""``SET @v = (SELECT ... FROM t)`` on a sharded database.

A plain SET is replayed on every backend connection the session uses (proxy.execution.txn); one that reads tables
cannot be: its text names logic tables, which the backends do not have, and each data source holds other
rows. It is decided (proxy.execution.decide), routed like the SELECT it contains (one data node, table names
rewritten; several nodes are refused with 1235), it runs on that node's connection, and the values it assigned
are read back there and set on every other connection with literals (``SET @v = 42``), which is what the session keeps
for the connections it borrows later. A SET that fails is answered with its error and changes nothing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from protocol import text
from protocol.constants import ColumnType
from protocol.packets import ComQuery, ERRPacket, decode_text_row
from protocol.results import ResultHeader
from proxy.backends.backend import BackendError
from proxy.execution.decide import decide, view_of
from proxy.execution.plans import Refused, Run
from proxy.execution.units import _logical_message, log_statement

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

_READS = re.compile(r"\bSELECT\b", re.I)
_INTEGERS = {ColumnType.TINY, ColumnType.SHORT, ColumnType.LONG, ColumnType.LONGLONG, ColumnType.INT24,
             ColumnType.YEAR}
_DECIMALS = {ColumnType.DECIMAL, ColumnType.NEWDECIMAL}
_REALS = {ColumnType.FLOAT, ColumnType.DOUBLE}


def reads_tables(sql: str) -> bool:
    """Worth routing through the kernel: the SET holds a query."""
    return _READS.search(sql) is not None


async def routed_set(session: Session, db: LogicalDatabase, sql: str) -> bool:
    """Run a SET that holds a query; False when it is not one the kernel routes to one unit (the caller
    then treats it as a plain SET)."""
    assert db.kernel is not None
    plan = decide(db.kernel, sql, None, view_of(session, federation=False, found_rows=False))
    if isinstance(plan, Refused):
        raise plan.error  # the session answers 1235
    if not isinstance(plan, Run):
        return False
    routed = plan.routed
    if len(routed.execution_units) != 1 or not routed.set_variables:
        return False

    log_statement(session, sql, routed)
    unit = routed.execution_units[0]
    conn = await session.backend(unit.data_source)
    res = await conn.execute(unit.sql)
    if isinstance(res, ERRPacket):
        session.error(res.errno, _logical_message(db, routed, res.message), res.sqlstate)
        return True
    replay = await _as_literals(conn, routed.set_variables)
    txn = session.txn
    session.release_read_backends()
    for other in list(session.backends.values()):
        if other is not conn:
            await session._must(other, replay)
    txn.session_sets.append(replay)
    for held in session.backends.values():
        held.session_sets = tuple(txn.session_sets)
    session.ok()
    return True


async def _as_literals(conn: object, variables: tuple[str, ...]) -> str:
    """``SET @a = <literal>, ...`` reproducing the values (and types, character sets, collations) that
    the variables have on `conn`."""
    parts = [f"{v}, HEX({v}), CHARSET({v}), COLLATION({v})" for v in variables]
    types: list[int] = []
    row: tuple[bytes | None, ...] = ()
    async for ev in conn.events(ComQuery(text.encode("SELECT " + ", ".join(parts))).encode()):  # type: ignore[attr-defined]
        if isinstance(ev, ResultHeader):
            types = [int(c.type) for c in ev.columns]
        elif isinstance(ev, bytes):
            row = decode_text_row(ev, len(types))
        elif isinstance(ev, ERRPacket):

            raise BackendError(getattr(conn, "name", "?"), f"reading the values a SET assigned failed: {ev.message}",
                               errno=ev.errno, sqlstate=ev.sqlstate)
    items = []
    for i, name in enumerate(variables):
        value, hexed, charset, coll = row[4 * i : 4 * i + 4]
        items.append(f"{name} = {_literal(value, types[4 * i], hexed, charset, coll)}")
    return "SET " + ", ".join(items)


def _literal(value: bytes | None, column_type: int, hexed: bytes | None, charset: bytes | None,
             coll: bytes | None) -> str:
    if value is None:
        return "NULL"
    if column_type in _INTEGERS or column_type in _DECIMALS:
        return value.decode("ascii")
    if column_type in _REALS:
        number = value.decode("ascii")
        return number if "e" in number.lower() else number + "e0"  # a DOUBLE literal stays a DOUBLE
    cs = (charset or b"binary").decode("ascii")
    hex_text = (hexed or b"").decode("ascii")
    if cs == "binary":
        return f"X'{hex_text}'"
    collate = f" COLLATE {coll.decode('ascii')}" if coll else ""
    return f"_{cs} X'{hex_text}'{collate}"
