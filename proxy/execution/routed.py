"""Decide a statement on a sharded database and carry the plan out: the entry the session (text protocol) and
prepared statements (binary) call.

Why its own module: the plans name several engines (the executor, EXPLAIN, federation); this entry sits above
them all and dispatches a decided plan (proxy.execution.decide) to the one that runs it, so none of them imports
another's caller. A plan the fast path decided and declined is taken as it is (proxy.execution.preroute).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from proxy.backends.codec import TEXT, StatementCodec
from proxy.execution import budget, explain, federation, preroute
from proxy.execution.decide import OFF_LOOP_TEXT, SessionView, decide, view_of
from proxy.execution.executor import execute_plan
from proxy.execution.plans import Explained, Federated, FederatedExplain, Plan, Refused, Run
from proxy.execution.units import log_statement
from routing.kernel import first_word_kind
from routing.plan import StatementKind

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session


async def execute_routed(session: Session, db: LogicalDatabase, sql: str) -> None:
    await route_and_execute(session, db, sql, None, TEXT)


async def route_and_execute(
    session: Session, db: LogicalDatabase, sql: str, params: Sequence[object] | None, codec: StatementCodec
) -> None:
    """Decide a statement on a sharded database and run its plan (text or prepared), within its memory budget
    (proxy.execution.budget): its routing is charged by its text's size, its merges and copies as they hold."""
    assert db.kernel is not None
    view = view_of(session)
    with budget.statement(session.server) as memory:
        plan = preroute.take(session.wire.fast, db.kernel, sql, params, view)
        if plan is None:
            parse = budget.parse_bytes(sql)
            memory.charge(parse, "the routing of its text")
            try:
                plan = await decide_fairly(db, sql, params, view)
            finally:
                memory.release(parse)
        await run_plan(session, db, sql, params, plan, codec)


def on_loop(sql: str) -> bool:
    """Is this text decided on the event loop? A short one is (a thread's hand-off would cost more), and so is an
    INSERT / REPLACE however long (its first word after any comments): its keys come from the rules' generators,
    which the twin kernel shares with the kernel."""
    return len(sql) < OFF_LOOP_TEXT or first_word_kind(sql) is StatementKind.INSERT


async def decide_fairly(db: LogicalDatabase, sql: str, params: Sequence[object] | None, view: SessionView) -> Plan:
    """`decide`, in a worker thread when the text is long (decide.OFF_LOOP_TEXT), on the database's twin kernel,
    while the loop goes on serving the other sessions."""
    assert db.kernel is not None
    if on_loop(sql):
        return decide(db.kernel, sql, params, view)
    async with db.twin_lock:
        twin = db.twin_kernel()
        assert twin is not None
        return await asyncio.to_thread(decide, twin, sql, params, view)


async def run_plan(session: Session, db: LogicalDatabase, sql: str, params: Sequence[object] | None, plan: Plan,
                   codec: StatementCodec) -> None:
    """Carry out a decided plan: a RoutingError for a refusal (the session answers it), else the plan's engine."""
    if isinstance(plan, Run):
        log_statement(session, sql, plan.routed, params or ())
        await execute_plan(session, db, plan, codec)
    elif isinstance(plan, Refused):
        session.route = "refused"
        raise plan.error
    elif isinstance(plan, Explained):
        log_statement(session, sql, plan.run.routed, params or ())
        await explain.execute_explain(session, db, plan, codec)
    elif isinstance(plan, FederatedExplain):
        federation.answer_explain(session, plan)
    elif isinstance(plan, Federated):
        await federation.federate(session, db, sql, plan, params, codec)
    else:  # pragma: no cover - the set of plans is closed
        raise AssertionError(plan)


__all__ = ["execute_routed", "route_and_execute", "run_plan"]
