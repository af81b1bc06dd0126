"""SHOW WARNINGS, SHOW ERRORS, their COUNT(*) forms and @@warning_count / @@error_count on a kernel-routed database:
the diagnostics of the session's last statement, as one server keeps them.

Why the proxy answers them: a statement runs on the data sources its units name, each on the session's connection
there, and a statement without tables (these ones too) is routed to the first data source. Read there, SHOW WARNINGS
showed that node's older warnings after a statement that ran elsewhere. So the session records where its
diagnostics are (`Diagnostics`): the data sources of the last statement that replaced them, in unit order, or the
error the proxy answered itself (a refusal: one server lists an error as level 'Error'). One server replaces them
at every statement that uses tables or raises a warning or an error; a statement without tables that raises none
(SELECT 1, SET @a = 1, the proxy's own answers) leaves them as they were, and so does the record here.

A session with no record yet (nothing that replaced them ran since it started) reads them where it did before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.constants import Capability
from protocol.packets import (
    ComQuery,
    ERRPacket,
    column_count_payload,
    decode_text_row,
    encode_text_row,
    end_of_result,
)
from protocol.results import ResultHeader

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

__all__ = ["Diagnostics", "answer", "failed", "ran_on", "reads_diagnostics"]


@dataclass(frozen=True, slots=True)
class Diagnostics:
    """Where the session's last diagnostics are: the connections of these data sources (unit order), or an
    error the proxy answered itself (errno, message)."""

    sources: tuple[str, ...] = ()
    error: tuple[int, str] | None = None


def ran_on(session: Session, data_sources: Sequence[str]) -> None:
    """The statement that just ran on these data sources replaced the session's diagnostics."""
    session.diagnostics = Diagnostics(tuple(dict.fromkeys(data_sources)))


def failed(session: Session, errno: int, message: str) -> None:
    """The proxy answered the statement with this error: it is the session's one diagnostic."""
    session.diagnostics = Diagnostics(error=(errno, message))


_STATEMENT = re.compile(
    r"\s*(?:SHOW\s+(?P<count>COUNT\s*\(\s*\*\s*\)\s+)?(?P<what>WARNINGS|ERRORS)"
    r"(?:\s+LIMIT\s+(?P<a>\d+)(?:\s*(?:,|\s+OFFSET\s+)\s*(?P<b>\d+))?)?"
    r"|SELECT\s+@@(?:SESSION\s*\.\s*)?(?P<var>warning_count|error_count))\s*;?\s*",
    re.I,
)


def reads_diagnostics(sql: str) -> bool:
    """Is this one of the statements `answer` answers (checked cheaply first: most statements are not)?"""
    head = sql.lstrip()[:6].upper()
    return (head.startswith("SHOW") or (head == "SELECT" and "@@" in sql)) and _STATEMENT.fullmatch(sql) is not None


async def answer(session: Session, db: LogicalDatabase, sql: str) -> bool:
    """Answer a diagnostics statement from the session's record; False when it is none, or there is no record."""
    diag = session.diagnostics
    m = _STATEMENT.fullmatch(sql)
    if diag is None or m is None:
        return False
    errors = (m.group("what") or m.group("var") or "").upper().startswith("ERROR")
    counting = m.group("count") is not None or m.group("var") is not None
    conns = [session.backends[ds] for ds in diag.sources if ds in session.backends]
    if diag.error is not None or not conns:
        probe = conns[0] if conns else await session.backend(db.rules.data_sources[0])
        header = await _run(probe, sql if counting else f"SHOW {'ERRORS' if errors else 'WARNINGS'} LIMIT 0")
        if counting:
            rows = [encode_text_row((b"1" if diag.error is not None else b"0",))]
        else:
            rows = (
                [encode_text_row((b"Error", str(diag.error[0]).encode(), diag.error[1].encode()))]
                if diag.error is not None
                else []
            )
            rows = _limited(rows, m)
        _send(session, header[0], rows)
        return True
    answers = [await _run(conn, sql if counting else f"SHOW {'ERRORS' if errors else 'WARNINGS'}") for conn in conns]
    if counting:
        total = sum(int(_first_value(rows) or 0) for _, rows in answers)
        _send(session, answers[0][0], [encode_text_row((str(total).encode(),))])
        return True
    rows = [row for _, node_rows in answers for row in node_rows]
    if len(answers) > 1:
        cap = await _run(conns[0], "SELECT @@max_error_count")
        rows = rows[: int(_first_value(cap[1]) or len(rows))]
    _send(session, answers[0][0], _limited(rows, m))
    return True


def _limited(rows: list[bytes], m: re.Match[str]) -> list[bytes]:
    a, b = m.group("a"), m.group("b")
    if a is None:
        return rows
    if b is None:
        return rows[: int(a)]
    offset, count = (int(b), int(a)) if "OFFSET" in m.group(0).upper() else (int(a), int(b))
    return rows[offset : offset + count]


def _first_value(rows: list[bytes]) -> bytes | None:
    return decode_text_row(rows[0], 1)[0] if rows else None


async def _run(conn: BackendConnection, sql: str) -> tuple[ResultHeader | None, list[bytes]]:
    """The answer's columns and raw text rows (diagnostics statements neither change nor clear the node's)."""
    header: ResultHeader | None = None
    rows: list[bytes] = []
    async for event in conn.events(ComQuery(sql.encode()).encode()):
        if isinstance(event, ResultHeader):
            header = event
        elif isinstance(event, bytes | bytearray | memoryview):
            rows.append(bytes(event))
        elif isinstance(event, ERRPacket):
            raise RuntimeError(f"{conn.name}: {sql!r} failed: {event.message}")
    return header, rows


def _send(session: Session, header: ResultHeader | None, rows: list[bytes]) -> None:
    columns = header.columns if header is not None else ()
    packets = [column_count_payload(len(columns)), *(c.encode() for c in columns)]
    if not int(session.capabilities) & int(Capability.DEPRECATE_EOF):
        packets.append(b"\xfe\x00\x00" + (session.status & 0xFFFF).to_bytes(2, "little"))
    packets.extend(rows)
    packets.append(end_of_result(session.status, 0, session.capabilities))
    session.row_count = -1  # ROW_COUNT() after a result set
    session.wire.send_many(packets)
