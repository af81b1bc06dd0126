"""PREPARE / EXECUTE / DEALLOCATE PREPARE sent as SQL text (COM_QUERY) to a sharded database.

The proxy keeps the statement text by name in the session; EXECUTE reads the user variables it names from a
backend, decides the text with their values (proxy.execution.decide) and runs the units as text. The binary
protocol's prepared statements (COM_STMT_*) are `prepared.py`; this is the text-protocol form, which shares
none of its code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import TYPE_CHECKING

from protocol.binary import value_to_sql_literal
from protocol.constants import ColumnType, ErrorCode
from protocol.packets import ComQuery, ERRPacket, decode_text_row
from protocol.results import ResultHeader
from proxy.backends.codec import TEXT
from proxy.execution.decide import decide, federated, federation_plan, view_of
from proxy.execution.executor import execute_plan
from proxy.execution.explain import execute_explain
from proxy.execution.federation import federate
from proxy.execution.plans import Explained, Federated, FederatedExplain, Refused
from proxy.execution.units import log_statement
from proxy.session import metadata
from proxy.session.stmt_database import in_database
from routing.errors import RoutingError
from routing.interpolate import interpolate as _interpolate_values
from routing.parse import NO_BACKSLASH_ESCAPES
from routing.session_functions import label_placeholders

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session


_SQL_PREPARE = re.compile(
    r"^\s*PREPARE\s+(?P<name>`[^`]+`|\w+)\s+FROM\s+(?P<src>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\"|@\w+)"
    r"\s*;?\s*$", re.I | re.S)
_SQL_EXECUTE = re.compile(r"^\s*EXECUTE\s+(?P<name>`[^`]+`|\w+)(?:\s+USING\s+(?P<vars>@\w+(?:\s*,\s*@\w+)*))?\s*;?\s*$",
                          re.I | re.S)
_SQL_DEALLOCATE = re.compile(r"^\s*(?:DEALLOCATE|DROP)\s+PREPARE\s+(?P<name>`[^`]+`|\w+)\s*;?\s*$", re.I | re.S)


def classify_sql_prepared(sql: str) -> tuple[str, re.Match[str]] | None:
    head = sql.lstrip()[:10].upper()
    if not head.startswith(("PREPARE", "EXECUTE", "DEALLOCATE", "DROP")):
        return None
    for kind, pattern in (("prepare", _SQL_PREPARE), ("execute", _SQL_EXECUTE), ("deallocate", _SQL_DEALLOCATE)):
        m = pattern.match(sql)
        if m:
            return kind, m
    return None


def kept_statement(session: Session, sql: str) -> tuple[str, re.Match[str]] | None:
    """On a database that is not sharded (or none): an EXECUTE or DEALLOCATE of a statement prepared on a sharded
    database before a USE, which the proxy keeps (None for anything else). A PREPARE of its name replaces it, as on
    MariaDB: the proxy forgets its own."""
    if not session.sql_statements:
        return None
    found = classify_sql_prepared(sql)
    if found is None:
        return None
    name = _name(found[1].group("name"))
    if name not in session.sql_statements:
        return None
    if found[0] == "prepare":
        session.sql_statements.pop(name, None)
        session.sql_databases.pop(name, None)
        return None
    return found


def _name(raw: str) -> str:
    return raw[1:-1].lower() if raw.startswith("`") else raw.lower()


def _unquote(literal: str) -> str:
    q = literal[0]
    body = literal[1:-1].replace(q + q, q)
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(m.group(1), m.group(1)), body)


async def _user_variables(session: Session, names: list[str]) -> list[object]:
    """The values of user variables, read from a backend connection (SET statements reach every one)."""
    db = session.database
    assert db is not None
    conn = await session.backend(next(iter(db.sources)), record_write=False)
    types: list[tuple[int, int]] = []
    row: tuple[bytes | None, ...] = ()
    async for ev in conn.events(ComQuery(("SELECT " + ", ".join(names)).encode()).encode()):
        if isinstance(ev, ResultHeader):
            types = [(int(c.type), int(c.character_set)) for c in ev.columns]
        elif isinstance(ev, bytes):
            row = decode_text_row(ev, len(types))
        elif isinstance(ev, ERRPacket):
            raise RoutingError(ev.message, errno=ev.errno, sqlstate=ev.sqlstate)
    return [_typed(v, t, charset) for v, (t, charset) in zip(row, types, strict=True)]


_BINARY = 63  # the binary character set's number in a column definition


class _Binary(bytes):
    """A user variable holding a binary string (0x41, a BINARY column's value): bound as one, X'..'."""

    __slots__ = ()


def interpolate(sql: str, params: Sequence[object], mode: int = 0) -> str:
    """`routing.interpolate.interpolate`, binary strings written as hexadecimal literals (a binary string, as
    the server binds them), not as quoted text in the connection's character set."""
    if not any(isinstance(v, _Binary) for v in params):
        return _interpolate_values(sql, params, mode)
    marks = [f"\0shardproxy-binary-{i}\0" for i in range(len(params))]
    text = _interpolate_values(sql, [m if isinstance(v, _Binary) else v for m, v in zip(marks, params, strict=True)],
                               mode)
    for mark, value in zip(marks, params, strict=True):
        if isinstance(value, _Binary):
            literal = value_to_sql_literal(mark, no_backslash_escapes=bool(mode & NO_BACKSLASH_ESCAPES))
            text = text.replace(literal, f"X'{value.hex()}'", 1)
    return text


def _typed(value: bytes | None, column_type: int, charset: int = 0) -> object:
    if value is None:
        return None
    if column_type in (ColumnType.TINY, ColumnType.SHORT, ColumnType.LONG, ColumnType.LONGLONG, ColumnType.INT24):
        return int(value)
    if column_type in (ColumnType.DECIMAL, ColumnType.NEWDECIMAL):
        return Decimal(value.decode())
    if column_type in (ColumnType.FLOAT, ColumnType.DOUBLE):
        return float(value)
    if charset == _BINARY:
        return _Binary(value)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


_SYNTAX_ERRORS = frozenset({ErrorCode.PARSE_ERROR, 1149})  # ER_PARSE_ERROR, ER_SYNTAX_ERROR


async def _syntax_error(session: Session, text: str) -> bool:
    """PREPARE reads the statement, as the server does: a syntax error is PREPARE's (1064 at PREPARE, not at
    EXECUTE), in the server's own words. A data source prepares it; its other errors (a logic table it does not
    hold by that name) are no answer, the kernel decides the text at EXECUTE."""
    db = session.database
    assert db is not None
    conn = await session.backend(next(iter(db.sources)), record_write=False)
    answer = await conn.prepared(text)
    if isinstance(answer, ERRPacket) and answer.errno in _SYNTAX_ERRORS:
        session.error(answer.errno, answer.message, answer.sqlstate)
        return True
    return False


async def sql_statement(session: Session, kind: str, m: re.Match[str]) -> None:
    """PREPARE / EXECUTE / DEALLOCATE PREPARE as SQL on a sharded database: the statement text is kept by
    the proxy; EXECUTE routes it with the values of its user variables and runs the units as text."""
    name = _name(m.group("name"))
    if kind == "prepare":
        src = m.group("src")
        text = str((await _user_variables(session, [src]))[0] or "") if src.startswith("@") else _unquote(src)
        if await _syntax_error(session, text):
            return
        session.sql_statements[name] = text
        assert session.database is not None
        session.sql_databases[name] = session.database
        session.ok(info=b"Statement prepared")
        return
    if kind == "deallocate":
        session.sql_databases.pop(name, None)
        if session.sql_statements.pop(name, None) is None:
            session.error(ErrorCode.UNKNOWN_STMT_HANDLER,
                          f"Unknown prepared statement handler ({name}) given to DEALLOCATE PREPARE", "HY000")
            return
        session.ok()
        return
    text = session.sql_statements.get(name)
    if text is None:
        session.error(ErrorCode.UNKNOWN_STMT_HANDLER, f"Unknown prepared statement handler ({name}) given to EXECUTE",
                      "HY000")
        return
    prepared_in = session.sql_databases.get(name, session.database)
    if prepared_in is not session.database:  # prepared before a USE: it runs in its own database, as on MariaDB
        async with in_database(session, prepared_in, f"prepared statement {name}"):
            await _execute(session, text, m)
        return
    await _execute(session, text, m)


async def _execute(session: Session, text: str, m: re.Match[str]) -> None:
    names = [v.strip() for v in (m.group("vars") or "").split(",") if v.strip()]
    values = await _user_variables(session, names) if names else []
    text = label_placeholders(text)  # the values are written in: `?` keeps its label
    text = metadata.substitute(session, text) or text  # DATABASE() ... are the session's, as in a text statement
    db = session.database
    assert db is not None and db.kernel is not None

    plan = decide(db.kernel, text, values, view_of(session, found_rows=False))
    if isinstance(plan, Refused):
        raise plan.error
    if isinstance(plan, FederatedExplain):
        raise plan.refusal
    if isinstance(plan, Federated):  # federation answers it, run as text with its values in (proxy.federation)
        as_text = interpolate(text, values, session.txn.mode_flags)
        found = federation_plan(db.kernel, as_text)
        if found is None:
            raise plan.refusal
        as_planned = federated(db.kernel, found, None, plan.refusal)
        if isinstance(as_planned, Refused):
            raise as_planned.error
        await federate(session, db, as_text, as_planned, None, TEXT)
        return
    run = plan.run if isinstance(plan, Explained) else plan
    routed = run.routed
    mode = session.txn.mode_flags
    units = tuple(replace(u, sql=interpolate(u.sql, u.params or (), mode), params=None) for u in routed.execution_units)
    routed = replace(routed, execution_units=units)
    if routed.upsert is not None:  # its row-by-row statements run as text too
        render_row = routed.upsert.render_row

        def interpolated(i: int, node: object) -> object:
            unit = render_row(i, node)
            return replace(unit, sql=interpolate(unit.sql, unit.params or (), mode), params=None)

        routed = replace(routed, upsert=replace(routed.upsert, render_row=interpolated))
    log_statement(session, text, routed, values)
    run = replace(run, routed=routed)  # the same strategy: only the units' text changed
    if isinstance(plan, Explained):
        await execute_explain(session, db, Explained(run))
    else:
        await execute_plan(session, db, run)
