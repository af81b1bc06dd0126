"""Route a statement on a sharded database and run it: the entry the session (text protocol) and
prepared statements (binary) call.

Why its own module: EXPLAIN of a statement is routed like the statement and answered by proxy.execution.explain,
which runs plans through the executor; this entry sits above both, so neither imports the other's caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from proxy.backends.codec import TEXT, StatementCodec
from proxy.execution import explain, federation, preroute
from proxy.execution.executor import execute_plan
from proxy.execution.units import log_statement
from routing.errors import RoutingError
from routing.plan import RoutedStatement, SessionHints

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

# SELECT FOUND_ROWS() with no FROM: the proxy cannot answer it (the last SELECT ran on one node, relayed):
# it goes to that node's connection
_FOUND_ROWS_ONLY = re.compile(r"^(?:(?!\bFROM\b).)*\bFOUND_ROWS\s*\(\s*\)(?:(?!\bFROM\b).)*$", re.I | re.S)


def routing_hints(session: Session, sql: str) -> SessionHints | None:
    """The session's hints, and for SELECT FOUND_ROWS() the data source that knows the answer."""
    hints = session.hints()
    source = session.found_rows_source
    if source is not None and session.found_rows_value is None and hints is None and _FOUND_ROWS_ONLY.match(sql):
        return SessionHints(data_source=source)
    return hints


def _taken_route(session: Session, db: LogicalDatabase, sql: str, params: Sequence[object] | None
                 ) -> RoutedStatement | None:
    """The route the fast path worked out for this statement before it declined it (proxy.execution.preroute)."""
    fast = session.wire.fast
    kept = getattr(fast, "prerouted", None)
    if kept is None:
        return None
    fast.prerouted = None  # type: ignore[union-attr]
    assert db.kernel is not None
    return kept.routed if preroute.matches(kept, db.kernel, sql, params) else None


async def execute_routed(session: Session, db: LogicalDatabase, sql: str) -> None:
    await route_and_execute(session, db, sql, None, TEXT)


async def route_and_execute(
    session: Session, db: LogicalDatabase, sql: str, params: Sequence[object] | None, codec: StatementCodec
) -> None:
    """Route a statement on a sharded database and run it (text or prepared); EXPLAIN of a statement is
    routed like the statement, XA is refused (proxy.execution.explain)."""
    assert db.kernel is not None
    refusal = explain.xa_refusal(sql)
    if refusal is not None:
        raise refusal
    try:
        routed = explain.route_explain(session, db, sql, params)
    except RoutingError:  # EXPLAIN of a statement federation answers (proxy.execution.federation)
        if not federation.explain(session, db, sql, params):
            raise
        return
    if routed is not None:
        log_statement(session, sql, routed, params or ())
        await explain.execute_explain(session, db, routed, codec)
        return
    hints = routing_hints(session, sql)
    routed = _taken_route(session, db, sql, params) if hints is None else None
    try:
        if routed is None:
            routed = db.kernel.route(sql, params, hints)
    except RoutingError as refusal:  # a SELECT the kernel cannot distribute, answered by federation
        if not await federation.federate(session, db, sql, params, codec, refusal):
            raise
        return
    log_statement(session, sql, routed, params or ())
    await execute_plan(session, db, routed, codec)



__all__ = ["execute_routed", "route_and_execute", "routing_hints"]
