"""What the session room's handlers see of a session: `SessionHandle`, a `typing.Protocol`.

Why: the dispatcher (proxy.session.dispatch) and the handlers it calls (proxy.session.query, .commands,
.prepared, .admin, .metadata, .distsql) are imported by proxy.session.session; they name the session
through this Protocol, never the `Session` class. It extends proxy.execution.context.SessionContext
(what the execution room sees) with the session room's own parts: client options, database choice,
statement timeouts.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from proxy.execution.context import SessionContext

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.fastpath import FastPath
    from proxy.session.statements import ProxyStatement


class SessionHandle(SessionContext, Protocol):
    multi_statements: bool
    more_results: bool
    secure: bool
    fast: FastPath | None
    borrowed: set[BackendConnection]
    connecting: list[str]

    @property
    def status(self) -> int: ...

    @status.setter
    def status(self, value: int) -> None: ...

    def database_access(self, name: str) -> tuple[LogicalDatabase | None, tuple[int, str, str]]: ...

    def visible_databases(self) -> list[str]: ...

    async def _use(self, name: str) -> None: ...

    async def _with_timeout(self, work: Coroutine[Any, Any, None]) -> None: ...

    async def _proxy_statement(self, stmt: ProxyStatement, sql: str) -> None: ...


__all__ = ["SessionHandle"]
