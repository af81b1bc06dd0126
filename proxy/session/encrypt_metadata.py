"""DESCRIBE / SHOW [FULL] COLUMNS / SHOW CREATE TABLE of an encrypted table, answered in its logical shape.

The statement runs on the physical table by the database's ordinary path (pass-through relay or the sharding kernel,
which already names a logic table for its actual one), without its LIKE or WHERE; its answer is captured (as
proxy.execution.encrypted captures a SELECT's to decrypt it), turned into the logical shape by
routing.encrypt.metadata, selected by the LIKE pattern (here) or the WHERE condition (by MariaDB, over the logical
rows), and sent in the client's protocol (binary rows for an executed prepared statement).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from protocol.binary import text_row_to_binary
from protocol.packets import ColumnDefinition41, decode_text_row, encode_text_row
from protocol.wire import Reader
from proxy.execution.encrypted import REWRITTEN, captured
from proxy.session.metadata import filter_where
from routing.encrypt.metadata import TableMetadata, logical_columns, logical_create_table, table_metadata

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

__all__ = ["answer_metadata", "answer_table"]


async def answer_metadata(
    session: Session, db: LogicalDatabase, sql: str, run_text: Callable[[str], Awaitable[None]], binary: bool
) -> bool:
    """Answer `sql` when it is a metadata statement about an encrypted table of `db` (False: it is not; the
    `OtherStatement` of proxy.execution.encrypted.run_encrypted, asked only about statements that are not SELECT,
    INSERT, ...)."""
    rule = db.config.encrypt
    meta = None if rule is None else table_metadata(sql, rule, db.name)
    if meta is None:
        return False
    await answer_table(session, db, meta, run_text, binary=binary)
    return True


async def answer_table(
    session: Session,
    db: LogicalDatabase,
    meta: TableMetadata,
    run_text: Callable[[str], Awaitable[None]],
    *,
    binary: bool = False,
) -> None:
    """Answer `meta` in the logical shape; `run_text`: the session's ordinary text path for `meta.sql`."""
    token = REWRITTEN.set(True)  # (the physical table's statement: not the encrypt rewrite's again)
    try:
        packets = await captured(session, lambda: run_text(meta.sql))
    finally:
        REWRITTEN.reset(token)
    if not packets or packets[0][:1] in (b"\x00", b"\xff", b"\xfb"):
        session.wire.send_many(packets)  # an error (the table does not exist ...) as it came
        return
    count = Reader(packets[0]).lenenc_int() or 0
    start = 1 + count + (0 if session.deprecate_eof else 1)
    head, body, tail = packets[:start], packets[start:-1], packets[-1:]
    if any(r[:1] == b"\xff" for r in body):
        session.wire.send_many(packets)
        return
    columns = [ColumnDefinition41.decode(p) for p in head[1 : 1 + count]]
    rows = [decode_text_row(p, count) for p in body]
    if meta.kind == "create":
        rule = db.config.encrypt
        assert rule is not None
        rows = [
            (r[0], logical_create_table(r[1].decode("utf-8", "surrogateescape"), rule, meta.table).encode(
                "utf-8", "surrogateescape"), *r[2:]) if len(r) > 1 and r[1] is not None else r
            for r in rows
        ]
    else:
        rows = logical_columns(rows, meta.table, meta.like)
        if meta.where is not None:
            filtered = await filter_where(session, db, [c.name for c in columns], list(rows), meta.where)
            if filtered is None:
                return  # (the error was sent)
            rows = list(filtered)
    encoded = [text_row_to_binary(r, columns) if binary else encode_text_row(r) for r in rows]
    session.wire.send_many([*head, *encoded, *tail])
