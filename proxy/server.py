"""The proxy server: data sources and logical databases at start-up, one `Session` per client."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from collections.abc import Coroutine
from typing import Any

import structlog

from protocol.packets import ERRPacket
from proxy.backends.backend import BackendError, DataSource
from proxy.backends.readwrite import open_data_sources
from proxy.backends.runtime import LogicalDatabase
from proxy.backends.xa import TransactionManager
from proxy.backends.xalog import LogUnavailable
from proxy.clusterport import STANDALONE, Standalone
from proxy.config.model import DatabaseConfig, ProxyConfig
from proxy.execution import budget
from proxy.execution.fastpath import ClientProtocol
from proxy.frontend import tls
from proxy.frontend.handshake import Authenticator
from proxy.metrics import MetricsEndpoint, StatementStats
from proxy.observe.audit import AuditLog
from proxy.observe.digests import DigestStore
from proxy.ops.health import ReadinessProbe
from proxy.ops.routes import routes
from proxy.session.session import Session

log = structlog.get_logger("shardproxy.server")

DEFAULT_MAX_PACKET = 64 * 1024 * 1024
# connections the kernel may complete before the proxy accepts them: asyncio's default (100) lost clients
# of a 1,000-connection burst to SYN-ACK retransmission timeouts. The kernel caps it at net.core.somaxconn.
DEFAULT_BACKLOG = 4096
BACKLOG_PROPS = ("proxy-backlog", "proxy-netty-backlog")  # shardproxy's name first, then ShardingSphere's


def listen_backlog(config: ProxyConfig) -> int:
    """props.proxy-backlog, else ShardingSphere's props.proxy-netty-backlog, else DEFAULT_BACKLOG (a value
    that is not a positive integer counts as absent)."""
    for name in BACKLOG_PROPS:
        try:
            value = int(config.props.get(name) or 0)
        except (TypeError, ValueError):
            continue
        if value > 0:
            return value
    return DEFAULT_BACKLOG


class ProxyServer:
    def __init__(self, config: ProxyConfig, *, worker: int = 0, workers: int = 1) -> None:
        self.config = config
        self.authenticator = Authenticator(config.users, tls.server_context(config.props))
        self.sources: dict[tuple[str, str], DataSource] = {}
        self.databases_by_name: dict[str, LogicalDatabase] = {}
        self.sessions: dict[int, Session] = {}
        self.cluster: Standalone = STANDALONE  # proxy.cluster.hooks.bind: Cluster mode's ClusterHooks
        self._background: set[asyncio.Task[None]] = set()
        # connection ids stay unique across --workers processes: worker k of n hands out k+1, k+1+n, ...
        self._ids = itertools.count(worker + 1, workers)
        self._server: asyncio.base_events.Server | None = None
        self.server_version = "5.7.99-shardproxy"
        self.max_packet = DEFAULT_MAX_PACKET
        self.started_at = 0.0
        self.questions = 0
        self.max_connections = config.prop_int("proxy-frontend-max-connections")
        self.backlog = listen_backlog(config)
        self.sql_show = config.prop_bool("sql-show")
        self.merge_memory_rows = config.prop_int("proxy-merge-memory-rows")
        self.statement_memory_bytes = config.prop_int(budget.STATEMENT_PROP)
        self.global_memory = budget.GlobalMemory(config.prop_int(budget.GLOBAL_PROP))
        self.max_connections_per_query = config.prop_int("max-connections-size-per-query")
        self.statement_timeout = config.prop_float("proxy-statement-timeout-seconds")
        self.stats = StatementStats()
        self.digests = DigestStore(config.prop_int("proxy-digest-max-entries"))
        self.slow_query_ms = config.prop_int("proxy-slow-query-threshold-milliseconds")
        self.audit = AuditLog(config.prop("proxy-audit-log-file"))
        self.started_monotonic = time.monotonic()
        self.metrics: MetricsEndpoint | None = None
        self.metrics_address: tuple[str, int] | None = None
        self.tm = TransactionManager(config, worker=worker, workers=workers)  # the transaction rule, XA
        self.draining = False  # SIGTERM's drain (proxy.ops.drain): no new clients, /readyz 503
        self.readiness = ReadinessProbe(self)

    # -- start and stop ---------------------------------------------------------------------------------

    async def start_backends(self) -> None:
        """Open every data source's pool (failing fast with the data source named) and load metadata."""
        self.started_at = asyncio.get_running_loop().time()
        opening = None
        try:
            for db in self.config.databases.values():
                opening = db
                sources = await open_data_sources(db, self.config.props, self.sources)
                logical = LogicalDatabase(db, sources)
                await logical.reload_metadata()
                self.databases_by_name[db.name] = logical
                log.info("database_ready", database=db.name, data_sources=list(sources),
                         mode="pass-through" if logical.kernel is None else "sharding")
        except BackendError as exc:
            await self.close_backends()
            reason = str(exc).removeprefix(f"data source {exc.data_source}: ")
            raise BackendError(
                exc.data_source, f"{reason} (configured in {self._file_of(exc.data_source, opening)})",
                errno=exc.errno,
            ) from exc
        await self._detect_version()
        from proxy.session.distsql.migration import resume

        await resume(self)  # migration copies a stopped proxy left unfinished (proxy.migration)
        try:
            await self.tm.start(self)  # XA: the decision log, and a first recovery pass before any client
        except LogUnavailable as exc:
            await self.close_backends()
            raise LogUnavailable(f"{exc} (transaction.props.xa-log-dir in {self.config.transaction.file})"
                                 ) from exc

    def _file_of(self, data_source: str, opening: DatabaseConfig | None) -> str:
        """The file of the database being opened when `data_source` failed: data source names repeat across
        files (the shipped conf/ has ds_0 in two), so the name alone does not say which file is wrong."""
        if opening is not None and data_source in opening.data_sources:
            return opening.source_file
        for db in self.config.databases.values():
            if data_source in db.data_sources:
                return db.source_file
        return "?"

    async def _detect_version(self) -> None:
        override = self.config.props.get("proxy-mysql-default-version")
        if override:
            self.server_version = f"{override}-shardproxy"
            return
        for source in self.sources.values():
            conn = await source.acquire(self)
            try:
                rows = await conn.execute("SELECT VERSION()")
            finally:
                source.release(conn, owner=self, reset=False)
            if isinstance(rows, list) and rows and rows[0][0]:
                version = rows[0][0].decode()
                if "mariadb" in version.lower() and not version.startswith("5.5.5-"):
                    # MariaDB's own greeting prefix, which MySQL-era clients and libraries expect
                    version = "5.5.5-" + version
                self.server_version = f"{version}-shardproxy" if "shardproxy" not in version else version
            return

    async def listen(self, host: str, port: int, *, reuse_port: bool = False) -> list[tuple[str, int]]:
        loop = asyncio.get_running_loop()

        def client_protocol() -> ClientProtocol:
            # what asyncio.start_server builds, with the protocol that offers chunks to the fast path
            return ClientProtocol(asyncio.StreamReader(limit=1 << 20, loop=loop), self._accept, loop=loop)

        self._server = await loop.create_server(
            client_protocol, host=host, port=port, reuse_address=True, reuse_port=reuse_port or None,
            backlog=self.backlog,
        )
        addrs = [s.getsockname()[:2] for s in self._server.sockets]
        metrics_port = self.config.prop("proxy-metrics-port")
        if metrics_port is not None and int(metrics_port) >= 0 and self.metrics is None:  # 0: any free port
            self.metrics = MetricsEndpoint(self, routes(self))
            self.metrics_address = await self.metrics.start(str(self.config.prop("proxy-metrics-host")),
                                                            int(metrics_port))
        for s in self._server.sockets:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return addrs

    def stop_accepting(self) -> None:
        """Close the listening socket(s): a new connection is refused; the sessions go on."""
        if self._server is not None:
            self._server.close()

    def track(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run background work (returning connections) that shutdown must wait for."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def close(self) -> None:
        from proxy.session.distsql.migration import stop_all

        await stop_all(self)  # migration copies resume from their saved position at the next start
        if self.metrics is not None:
            await self.metrics.close()
        if self._server is not None:
            self._server.close()
        for session in list(self.sessions.values()):
            if session.task is not None:
                session.task.cancel()
        tasks = [s.task for s in self.sessions.values() if s.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        if self._background:
            await asyncio.wait(list(self._background), timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=2)
        await self.tm.close()
        await self.close_backends()
        self.audit.close()

    async def close_backends(self) -> None:
        for source in self.sources.values():
            with contextlib.suppress(Exception):
                await source.close()

    # -- sessions ---------------------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn_id = next(self._ids)
        if self.max_connections and len(self.sessions) >= self.max_connections:
            writer.write(_frame(ERRPacket(1040, "Too many connections", "08004").encode()))
            with contextlib.suppress(Exception):
                await writer.drain()
                writer.close()
            return
        session = Session(self, reader, writer, conn_id)
        self.sessions[conn_id] = session
        session.task = asyncio.current_task()
        await session.run()

    def database(self, name: str) -> LogicalDatabase | None:
        db = self.databases_by_name.get(name)
        if db is None:
            low = name.lower()
            for n, d in self.databases_by_name.items():
                if n.lower() == low:
                    return d
        return db

    def default_database(self) -> LogicalDatabase | None:
        default = self.config.props.get("proxy-default-database")
        if default and self.database(str(default)):
            return self.database(str(default))
        return next(iter(self.databases_by_name.values()), None)

    async def kill_backend_queries(self, target: Session) -> None:
        """KILL QUERY on every backend connection the target session holds, over separate connections."""
        for conn in [*target.backends.values(), *target.read_backends.values(), *target.borrowed]:
            if conn.busy:
                await conn.source.kill_query(conn.thread_id)


def _frame(payload: bytes) -> bytes:
    from protocol.framing import encode_packet

    return encode_packet(payload, 0)[0]
