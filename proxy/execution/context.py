"""What the execution and handler modules see of a session and of the server: two `typing.Protocol`s.

Why: the session (proxy.session.session) dispatches to the executor, transactions, prepared statements, metadata,
admin and DistSQL handlers, and the server (proxy.server) creates the sessions; those modules must name
the session and the server they are handed without importing them (the import would point back up and
close a cycle). They name these Protocols instead; `Session` and `ProxyServer` satisfy them structurally.
This module imports only what lies below every room (backends, state, configuration), never a handler.

The session's state as plain data lives in proxy.execution.state; the rest listed here is the session's interface
to its client (answers), to its connections (the broker's leases: backend, give_back, ...) and to the
current command's bookkeeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from protocol.packets import ColumnDefinition41
    from protocol.results import ResultSummary
    from proxy.backends.backend import BackendConnection, DataSource
    from proxy.backends.runtime import LogicalDatabase
    from proxy.backends.xa import TransactionManager
    from proxy.config.model import ProxyConfig, UserConfig
    from proxy.execution.budget import GlobalMemory
    from proxy.execution.state import GroupSessionState, StatementRegistry, TransactionState
    from proxy.frontend.handshake import Authenticator
    from proxy.frontend.wire import ClientPackets
    from routing.plan import SessionHints


class StatsSink(Protocol):
    """proxy.metrics.StatementStats as a session reports to it."""

    def observe(self, kind: str, route: str, seconds: float, errno: int) -> None: ...


class ServerContext(Protocol):
    """The server as sessions and handlers use it: settings (props, some changed live by SET DIST
    VARIABLE), the logical databases, the sessions (SHOW PROCESSLIST, KILL), the transaction manager."""

    config: ProxyConfig
    authenticator: Authenticator
    sessions: dict[int, SessionContext]
    databases_by_name: dict[str, LogicalDatabase]
    sources: dict[tuple[str, str], DataSource]
    tm: TransactionManager
    stats: StatsSink
    server_version: str
    max_packet: int
    started_at: float
    started_monotonic: float
    questions: int
    max_connections: int
    backlog: int
    sql_show: bool
    merge_memory_rows: int
    statement_memory_bytes: int
    global_memory: GlobalMemory
    max_connections_per_query: int
    statement_timeout: float
    digests: Any  # proxy.observe.digests.DigestStore
    slow_query_ms: int
    audit: Any  # proxy.observe.audit.AuditLog

    def database(self, name: str) -> LogicalDatabase | None: ...

    def default_database(self) -> LogicalDatabase | None: ...

    def track(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]: ...

    async def kill_backend_queries(self, target: Any) -> None: ...


class SessionContext(Protocol):
    """One client's session as a handler receives it: its state, its answers, its connections."""

    # -- who and where
    id: int
    server: ServerContext
    user: str
    user_config: UserConfig | None
    client_host: str
    database: LogicalDatabase | None
    capabilities: Any  # protocol.constants.Capability
    charset: str  # the client's character set (the codec of its text)
    names: str  # SET NAMES of the session's character sets and collation (proxy.backends.charset)
    log: Any  # a structlog BoundLogger bound to the connection id

    # -- state (plain data: proxy.execution.state)
    txn: TransactionState
    statements: StatementRegistry
    sql_statements: dict[str, str]
    sql_databases: dict[str, LogicalDatabase]
    read_state: dict[str, GroupSessionState]
    sticky: bool
    last_insert_id: int
    row_count: int
    found_rows_value: int | None
    found_rows_source: str | None
    commit_note: str
    end_warnings: int  # the warnings of the COMMIT / ROLLBACK that just ended the transaction (for its OK)
    diagnostics: Any  # proxy.execution.diagnostics.Diagnostics | None: where the last statement's warnings are
    ending_transaction: bool

    # -- the current command (processlist, metrics, answers)
    wire: ClientPackets
    writer: Any  # the client's asyncio.StreamWriter, or a capture standing in for it
    task: asyncio.Task[None] | None
    command: str
    command_started: float
    info: str | None
    busy: bool
    errored: bool
    last_errno: int
    stmt_kind: str
    route: str
    sql: str | None  # the current statement's text (query digests, slow log), when it has one
    rows_sent: int  # rows the current command sent to the client
    last_digest: tuple[Any, ...] | None  # the last statement's query digest (proxy.observe.statement)
    query_killed: bool  # KILL QUERY reached the current command (SessionConnections.interrupt)

    # -- connections this session holds (the broker's leases)
    backends: dict[str, BackendConnection]
    read_backends: dict[str, BackendConnection]
    in_use: set[BackendConnection]

    @property
    def status(self) -> int: ...

    @property
    def deprecate_eof(self) -> bool: ...

    def set_names(self, names: str) -> None: ...

    # -- answers
    def ok(self, affected: int = 0, last_insert_id: int = 0, info: bytes = b"", warnings: int = 0) -> None: ...

    def error(self, errno: int, message: str, sqlstate: str = "HY000") -> None: ...

    def rows(
        self, columns: list[str | ColumnDefinition41], rows: list[tuple[object, ...]] | list[list[object]],
        warnings: int = 0,
    ) -> None: ...

    def update_status(self, backend_status: int) -> None: ...

    def hints(self) -> SessionHints | None: ...

    def begin_command(self, command: int) -> None: ...

    def end_command(self) -> None: ...

    # -- connections
    async def backend(self, data_source: str, *, read: bool = False, record_write: bool = True
                      ) -> BackendConnection: ...

    async def backends_for(self, data_sources: list[str], **access: bool) -> dict[str, BackendConnection]: ...

    async def acquire_from(self, source: DataSource, *, hold: bool = True) -> BackendConnection: ...

    async def try_extra_backend(self, data_source: str, *, like: BackendConnection | None = None
                                ) -> BackendConnection | None: ...

    def return_extra_backend(self, conn: BackendConnection, *, broken: bool = False) -> None: ...

    def give_back(self, conn: BackendConnection, *, reset: bool = True) -> None: ...

    def drop_broken(self) -> None: ...

    def give_back_idle(self) -> None: ...
    def interrupt(self) -> None: ...

    def release_read_backends(self) -> None: ...

    def _lendable(self, conn: BackendConnection) -> bool: ...

    async def _must(self, conn: BackendConnection, sql: str) -> int: ...

    async def _prepare_connection(self, conn: BackendConnection, *, join_transaction: bool) -> None: ...

    async def relay(self, data_source: str, payload: bytes) -> None: ...

    async def relay_on(
        self, conn: BackendConnection, payload: bytes, error_rewriter: Callable[[bytes], bytes] | None = None,
        *, writer: Any = None, replica: bool = False, column_rewriter: Callable[[bytes], bytes] | None = None,
    ) -> ResultSummary: ...

    # -- databases
    def database_named(self, name: str) -> LogicalDatabase | None: ...

    # -- statements the proxy answers itself (prepared EXECUTE of KILL, SHOW PROCESSLIST, ...)
    async def _proxy_statement(self, stmt: Any, sql: str) -> None: ...


__all__ = ["ServerContext", "SessionContext", "StatsSink"]
