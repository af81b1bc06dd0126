"""What happens when a statement's answer is complete: its digest is counted (proxy.observe.digests) and, past
`proxy-slow-query-threshold-milliseconds`, it is logged as `slow_query`.

Why one function called from `Session.end_command`: every path that answers a statement (the session's
coroutine, the fast path's socket callbacks, the multi-node fast path) ends there, so none is left out; the
session has set what the statement was (`sql`, `route`, `last_errno`, `rows_sent`) on its way.
"""

from __future__ import annotations

import re
import time
from typing import Any

import structlog

from proxy.observe.audit import redact
from proxy.observe.fingerprint import cached_head

log = structlog.get_logger("shardproxy.slow")

ER_NOT_SUPPORTED_YET = 1235  # the kernel's refusal (routing.errors.RoutingError)
MAX_SLOW_STATEMENT = 2048  # characters of a statement the slow_query event keeps
_SECRET_WORDS = re.compile(r"password|identified", re.I)


def statement_ended(session: Any, sql: str, seconds: float, now: float) -> None:
    """`now`: time.monotonic() at the statement's end, `seconds` its time."""
    server = session.server
    route = session.route
    errno = session.last_errno
    if errno == ER_NOT_SUPPORTED_YET and route == "proxy":
        route = "refused"
    digests = server.digests
    if digests.max_entries:
        db = session.database
        user = session.user
        # the session's last digest again: a prepared statement's text is the same string at each execute, and a
        # text statement repeated with another trailing number (`... WHERE id = 7`) has the same head
        last = session.last_digest
        if last is not None and last[2] is db and last[3] is user and last[4] == digests.generation and (
            last[0] is sql or (last[1] is not None and sql.startswith(last[1]) and _number(sql[len(last[1]):]))
        ):
            last[5].add(route, seconds, errno, session.rows_sent, now)
        else:
            fp, head = cached_head(sql)
            d = digests.record(fp, db.name if db is not None else "", user, route, seconds, errno, session.rows_sent,
                               now)
            session.last_digest = (sql, head, db, user, digests.generation, d)
    threshold = server.slow_query_ms
    if threshold and seconds * 1000 >= threshold:
        slow_query(session, sql, seconds, route, errno)


def _number(text: str) -> bool:
    """ASCII digits only (what `cached_head` strips), at least one."""
    return text.isdigit() and text.isascii()


def slow_query(session: Any, sql: str, seconds: float, route: str, errno: int) -> None:
    """The `slow_query` event: the statement (cut to MAX_SLOW_STATEMENT characters, passwords masked), its time,
    rows sent, route, errno, and each data source the statement used this command with the time from its last
    command's send to its answer's last read (`units`)."""
    started = session.command_started
    now = time.monotonic()
    units = []
    seen: set[int] = set()
    for conn in (
        *session.backends.values(),
        *session.read_backends.values(),
        *session.in_use,
        *getattr(session, "borrowed", ()),
    ):
        if id(conn) in seen or getattr(conn, "sent_at", 0.0) < started:
            continue
        seen.add(id(conn))
        done = conn.read_at if conn.read_at >= conn.sent_at else now
        units.append({"data_source": conn.name, "ms": round((done - conn.sent_at) * 1000, 3)})
    text = redact(sql) if _SECRET_WORDS.search(sql) else sql
    if len(text) > MAX_SLOW_STATEMENT:
        text = text[:MAX_SLOW_STATEMENT] + f"... ({len(sql)} characters)"
    db = session.database
    log.warning(
        "slow_query",
        conn=session.id,
        user=session.user,
        database=db.name if db is not None else None,
        statement=text,
        ms=round(seconds * 1000, 3),
        rows=session.rows_sent,
        route=route,
        errno=errno or None,
        units=units,
    )


__all__ = ["MAX_SLOW_STATEMENT", "slow_query", "statement_ended"]
