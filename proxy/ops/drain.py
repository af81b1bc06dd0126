"""The SIGTERM drain: stop taking clients, let what is running finish, then stop.

As MySQL's shutdown treats its connections, and as an orchestrator's rolling restart needs: the listening
socket closes at once (a new connection is refused, so the load balancer's retry reaches another proxy),
`/readyz` answers 503, a session that is idle and not in a transaction is closed at once (its client sees the
connection end, as at a MySQL shutdown, and reconnects elsewhere), and a session running a statement or
holding an open transaction (BEGIN, or autocommit off with work done) goes on until it is idle outside a
transaction: its statement answered, its COMMIT or ROLLBACK done. Then it is closed too. After
props.proxy-shutdown-grace-seconds what is left is closed as a plain stop closes it (running statements are
cut, open transactions roll back). A second SIGTERM ends the grace at once.

The sessions are looked at every few milliseconds rather than told: the drain lives outside the statement
path, which then costs nothing for it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog

from protocol.constants import ServerStatus

if TYPE_CHECKING:
    from proxy.ops.view import OpsServer as ProxyServer

log = structlog.get_logger("shardproxy.drain")

POLL_SECONDS = 0.02


def in_transaction(session: Any) -> bool:
    """An open transaction the client may still COMMIT: BEGIN given, or a statement ran under autocommit off
    (an idle session with autocommit off and nothing done has none, as MySQL's IN_TRANS flag says)."""
    txn = session.txn
    return bool(
        int(session.status) & ServerStatus.IN_TRANS or txn.begin_sql is not None or txn.joined or txn.xa is not None
    )


def closable(session: Any) -> bool:
    """Idle between commands, outside a transaction: closing it now loses the client nothing."""
    return not session.busy and not in_transaction(session)


async def drain(server: ProxyServer, grace: float, cut: asyncio.Event | None = None) -> int:
    """Drain `server` for at most `grace` seconds (or until `cut` is set); the sessions left at the end."""
    loop = asyncio.get_running_loop()
    server.draining = True
    server.stop_accepting()
    waiting = [s.id for s in server.sessions.values() if not closable(s)]
    log.info("draining", grace_seconds=grace, sessions=len(server.sessions), waiting_for=waiting)
    deadline = loop.time() + grace
    closed: set[int] = set()
    cut = cut or asyncio.Event()
    while True:
        for session in list(server.sessions.values()):
            if session.id not in closed and closable(session) and session.task is not None:
                closed.add(session.id)
                session.task.cancel()
        left = [s for s in server.sessions.values() if s.id not in closed]
        if not left or cut.is_set() or loop.time() >= deadline:
            break
        try:
            await asyncio.wait_for(cut.wait(), timeout=min(POLL_SECONDS, max(0.0, deadline - loop.time())))
        except TimeoutError:
            pass
    pending = [s.task for s in server.sessions.values() if s.task is not None and s.id in closed]
    if pending:  # the ones closed last: their close (giving back connections) runs before the stop
        await asyncio.wait(pending, timeout=2)
    left_ids = [s.id for s in server.sessions.values() if s.id not in closed]
    if left_ids:
        log.warning("drain_grace_over", sessions_left=left_ids, grace_seconds=grace)
    else:
        log.info("drained")
    return len(left_ids)


__all__ = ["closable", "drain", "in_transaction"]
