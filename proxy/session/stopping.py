"""Stopping a statement: props.proxy-statement-timeout-seconds, and a client that leaves mid-command.

Why its own module: both end a statement the same way (KILL QUERY on the backends, then, if a backend
does not answer even that, cancel the work and discard its connections), apart from what commands do.
`Session` inherits these methods.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from protocol.constants import ErrorCode
from proxy.frontend.wire import ClientGone

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.execution.context import ServerContext
    from proxy.frontend.wire import ClientPackets

STATEMENT_TIMEOUT_GRACE = 1.0  # seconds a timed-out statement gets to end by KILL QUERY before it is stopped


class StatementStopping:
    """Mixin of `Session` (it also inherits proxy.session.connections.SessionConnections)."""

    # set by Session.__init__
    server: ServerContext
    wire: ClientPackets
    backends: dict[str, BackendConnection]
    read_backends: dict[str, BackendConnection]
    borrowed: set[BackendConnection]
    connecting: list[str]
    command_seq: int
    command: str
    busy: bool
    client_lost: bool
    ending_transaction: bool
    task: asyncio.Task[None] | None
    log: Any

    if TYPE_CHECKING:  # provided by Session and SessionConnections; declared for the type checker only
        def error(self, errno: int, message: str, sqlstate: str = "HY000") -> None: ...

        def return_extra_backend(self, conn: BackendConnection, *, broken: bool = False) -> None: ...

        def drop_broken(self) -> None: ...

    async def _with_timeout(self, work: Coroutine[Any, Any, None]) -> None:
        """props.proxy-statement-timeout-seconds: past it, KILL QUERY whatever the statement still runs on
        the backends, whose error then ends the statement. A backend that does not answer even that (a
        frozen server, a network stall) does not hold the session: after a grace period the statement is
        stopped here, its connections are discarded, and the client gets ER_STATEMENT_TIMEOUT."""
        timeout = self.server.statement_timeout
        if timeout <= 0:
            await work
            return
        task = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait((task,), timeout=timeout)
            if not done:
                self.log.info("statement_timeout", seconds=timeout)
                self._kill_backend_statements()
                done, _ = await asyncio.wait((task,), timeout=min(STATEMENT_TIMEOUT_GRACE, timeout))
            if not done:
                silent = sorted({c.name for c in self._busy_connections()} | set(self.connecting))
                await self._stop_statement(task)
                message = (f"Query execution was interrupted (proxy-statement-timeout-seconds = {timeout:g} "
                           f"exceeded; data source {', '.join(silent) or '?'} did not answer)")
                if self._answer_started:
                    self.log.warning("statement_timeout_mid_answer", data_sources=silent)
                    raise ClientGone("statement timed out in the middle of its answer")
                self.error(ErrorCode.STATEMENT_TIMEOUT, message, "70100")
                return
        except asyncio.CancelledError:
            if not task.done():
                await self._stop_statement(task)
            raise
        task.result()

    def _busy_connections(self) -> list[BackendConnection]:
        return [c for c in (*self.backends.values(), *self.read_backends.values(), *self.borrowed) if c.busy]

    @property
    def _answer_started(self) -> bool:
        """Has the current command's answer begun to reach the client (so an ERR can no longer replace it)?"""
        return self.wire.seq != self.command_seq or any(c.relayed for c in self._busy_connections())

    def _kill_backend_statements(self) -> None:
        """KILL QUERY what this session runs on the backends now, in the background (bounded), on each data
        source's admin connection: it must not wait behind a full pool or a server that does not answer."""
        for conn in self._busy_connections():
            self.server.track(conn.source.kill_query(conn.thread_id))

    async def _stop_statement(self, task: asyncio.Future[None]) -> None:
        """Cancel a statement's work until it has ended (its cleanup may wait on a silent backend too);
        every connection it had on the wire is discarded, never pooled."""
        while not task.done():
            task.cancel()
            await asyncio.wait((task,), timeout=0.2)
        with contextlib.suppress(BaseException):
            task.result()
        for conn in self._busy_connections():
            conn.broken = True
        for conn in list(self.borrowed):
            self.return_extra_backend(conn, broken=True)
        self.drop_broken()

    def _client_lost(self) -> None:
        """The client's socket closed. Mid-command, what the statement still runs on the backends is
        killed at once (a closed client socket does not stop a MariaDB statement until it writes) and the
        session ends; between commands the session's read notices by itself."""
        if not self.busy or self.task is None or self.task.done() or self.client_lost or self.ending_transaction:
            return
        if not self.connecting and not self._busy_connections():
            return  # nothing runs on a backend (the answer is out; what is left is the proxy's own work)
        self.client_lost = True
        self.log.info("client_gone_mid_statement", command=self.command)
        self._kill_backend_statements()
        self.task.cancel()


__all__ = ["STATEMENT_TIMEOUT_GRACE", "StatementStopping"]
