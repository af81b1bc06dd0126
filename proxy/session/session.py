"""One client connection: the handshake, then one command at a time until the client leaves.

The session owns the client's logical state (current logical database, status flags, capabilities) and
the backend connections it holds: one per data source it has used, kept until the session ends, so that
everything a client sets on its connection (SET, user variables, temporary tables, transactions) stays
where the client put it. Connections are reset before they go back to the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import structlog

from protocol import text
from protocol.constants import Capability, Command, ErrorCode, ServerStatus, SetOption
from protocol.errors import ServerError
from protocol.framing import PacketTooLarge
from protocol.packets import (
    ColumnDefinition41,
    ComChangeUser,
    ComFieldList,
    ComInitDB,
    ComProcessKill,
    ComQuery,
    ComSetOption,
    ERRPacket,
    OKPacket,
    end_of_result,
)
from protocol.results import ResultSummary
from protocol.wire import MalformedPacket
from proxy.backends.backend import BackendConnection, BackendError, DataSource, charset_for_collation
from proxy.backends.readwrite import ReadWriteGroup
from proxy.config import UserConfig
from proxy.execution import txn
from proxy.execution.fastpath import ClientProtocol, FastPath, statement_kind
from proxy.execution.replicas import group_backend, relay_pass_through
from proxy.execution.resultset import result_packets
from proxy.execution.state import GroupSessionState, StatementRegistry, TransactionState
from proxy.execution.sticky import may_be_sticky
from proxy.execution.txn import classify_session_statement
from proxy.frontend.handshake import HandshakeFailed
from proxy.frontend.wire import ClientGone, ClientPackets
from proxy.privilege import ER_DBACCESS_DENIED_ERROR, denied_message
from proxy.session import metadata, prepared
from proxy.session.statements import ProxyStatement, classify, like_to_regex
from routing.plan import SessionHints
from routing.split import split_statements

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import ServerContext as ProxyServer

log = structlog.get_logger("shardproxy.session")

_COMMAND_NAMES = {int(c): c.name.title() for c in Command}
_IN_TRANS = int(ServerStatus.IN_TRANS)
_AUTOCOMMIT = int(ServerStatus.AUTOCOMMIT)
_MORE_RESULTS = int(ServerStatus.MORE_RESULTS_EXISTS)
STATEMENT_TIMEOUT_GRACE = 1.0  # seconds a timed-out statement gets to end by KILL QUERY before it is stopped

class Session:
    def __init__(
        self, server: ProxyServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection_id: int
    ) -> None:
        self.server = server
        self.id = connection_id
        self.writer = writer
        self.wire = ClientPackets(reader, writer, server.max_packet)
        protocol = writer.transport.get_protocol()
        self.fast: FastPath | None = None
        if isinstance(protocol, ClientProtocol):
            self.fast = protocol.fast = self.wire.fast = FastPath(self, protocol, writer.transport)
            protocol.on_lost = self._client_lost
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.client_host = str(peer[0]) if isinstance(peer, tuple) else "localhost"
        self.user = ""
        self.database: LogicalDatabase | None = None
        self.capabilities = Capability(0)
        self.secure = False  # TLS
        self._deprecate_eof = False
        self.charset = "utf8mb4"
        self._status = int(ServerStatus.AUTOCOMMIT)
        self.more_results = False  # a multi-statement query has statements after the current one
        self.errored = False  # the current statement's answer was an ERR
        self.busy = False  # a command is being answered: held connections may not be taken back
        self.sticky = False  # the session put state on its connections that cannot be re-created
        self.user_config: UserConfig | None = None
        self.command_started = time.monotonic()
        self.command_seq = 0  # the client's sequence id when the current command began
        # what the current command is, for proxy.metrics (set by whoever handles it, counted at its end)
        self.stmt_kind = "other"
        self.route = "proxy"
        self.last_errno = 0
        self.last_insert_id = 0  # sharded databases: the session's, across data sources
        self.row_count = -1
        # sharded databases, FOUND_ROWS(): the value the proxy knows (after a merged SELECT), or else the
        # data source whose connection ran the last SELECT (proxy.routed.routing_hints)
        self.found_rows_value: int | None = None
        self.found_rows_source: str | None = None
        self.multi_statements = True
        self.backends: dict[str, BackendConnection] = {}
        self.txn = TransactionState()
        self.statements = StatementRegistry()
        self.sql_statements: dict[str, str] = {}  # PREPARE name FROM ... on sharded databases
        self.borrowed: set[BackendConnection] = set()  # pooled connections lent for one statement
        # connections the current command has used: never given back by `_wait_without_holding` mid-command
        self.in_use: set[BackendConnection] = set()
        self.client_lost = False  # the client left mid-command and the command was stopped
        self.ending_transaction = False  # COMMIT/ROLLBACK fanning out: not stopped when the client leaves
        self.commit_note = ""  # XA: what the OK of a COMMIT says besides success (proxy.txn)
        self.connecting: list[str] = []  # data sources this command waits on for a connection
        # read/write splitting: replica connections (by replica name) and read-after-write state per group
        self.read_backends: dict[str, BackendConnection] = {}
        self.read_state: dict[str, GroupSessionState] = {}
        self.log = log.bind(conn=connection_id)
        self.task: asyncio.Task[None] | None = None
        self.command = "Connect"
        self.info: str | None = None

    # -- lifecycle --------------------------------------------------------------------------------------

    @property
    def status(self) -> int:
        """The status flags for the packet that ends the current answer (with MORE_RESULTS_EXISTS while a
        multi-statement query has statements left)."""
        if self.more_results:
            return self._status | _MORE_RESULTS
        return self._status

    @status.setter
    def status(self, value: int) -> None:
        self._status = int(value) & ~_MORE_RESULTS

    @property
    def deprecate_eof(self) -> bool:
        return self._deprecate_eof

    @property
    def found_rows(self) -> bool:
        return bool(self.capabilities & Capability.FOUND_ROWS)

    async def run(self) -> None:
        try:
            if not await self._handshake():
                return
            while True:
                try:
                    payload = await self.wire.read(idle=True)
                except PacketTooLarge as exc:
                    self.wire.send_error(ErrorCode.NET_PACKET_TOO_LARGE,
                                         f"Got a packet bigger than 'max_allowed_packet' bytes ({exc})", "08S01")
                    await self.wire.flush()
                    return
                if not payload:
                    self.wire.send_error(ErrorCode.MALFORMED_PACKET, "Malformed communication packet: empty", "HY000")
                    await self.wire.flush()
                    continue
                if payload[0] == Command.QUIT:
                    return
                self.begin_command(payload[0])
                try:
                    await self._dispatch(payload)
                finally:
                    self.end_command()
                await self.wire.flush()
        except ClientGone as exc:
            self.log.debug("client_gone", reason=str(exc))
        except asyncio.CancelledError:
            self.log.info("session_killed")
        except Exception:
            self.log.exception("session_failed")
        finally:
            await self.close()

    def begin_command(self, command: int) -> None:
        """A command starts (here or in proxy.fastpath): processlist state, and nothing of the previous
        statement's results is kept for it any more."""
        self.command = _COMMAND_NAMES.get(command, "?")
        self.command_started = time.monotonic()
        self.command_seq = self.wire.seq
        self.busy = True
        self.errored = False
        for conn in self.backends.values():
            conn.keep_for_next = False
        if self.in_use:
            self.in_use.clear()

    def end_command(self) -> None:
        """The command is answered: idle again, and held connections others wait for are lent."""
        self.server.stats.observe(self.stmt_kind, self.route, time.monotonic() - self.command_started,
                                  self.last_errno)
        self.stmt_kind, self.route, self.last_errno = "other", "proxy", 0
        self.command = "Sleep"
        self.info = None
        self.busy = False
        self._lend_idle()

    async def close(self) -> None:
        if self.fast is not None:
            self.fast.abort()
        txn.abandon(self)  # an XA branch still open ends with its connection (closed, never reset)
        backends, self.backends = self.backends, {}
        backends.update(self.read_backends)
        self.read_backends = {}
        borrowed, self.borrowed = self.borrowed, set()
        self.server.sessions.pop(self.id, None)
        with contextlib.suppress(Exception):
            self.writer.close()
        # synchronous: the pool resets (rolls back, clears) or closes them; nothing is left "in use"
        for conn in [*backends.values(), *borrowed]:
            self.give_back(conn)

    async def _handshake(self) -> bool:
        try:
            client = await self.server.authenticator.run(
                self.wire,
                connection_id=self.id,
                server_version=self.server.server_version,
                client_host=self.client_host,
            )
        except HandshakeFailed as exc:
            self.log.info("auth_failed", reason=exc.message)
            self.wire.send_error(exc.errno, exc.message, exc.sqlstate)
            with contextlib.suppress(ClientGone):
                await self.wire.flush()
            return False
        except (PacketTooLarge, MalformedPacket) as exc:
            self.wire.send_error(ErrorCode.HANDSHAKE_ERROR, f"Bad handshake: {exc}", "08S01")
            with contextlib.suppress(ClientGone):
                await self.wire.flush()
            return False
        except TimeoutError:
            return False
        self.capabilities = client.capabilities
        self.secure = client.secure
        if self.fast is not None:
            self.fast.transport = self.writer.transport  # the TLS transport, after an SSLRequest
        self._deprecate_eof = bool(client.capabilities & Capability.DEPRECATE_EOF)
        self.user = client.user.user
        self.user_config = client.user
        self.charset = charset_for_collation(client.response.character_set)
        self.multi_statements = bool(client.capabilities & Capability.MULTI_STATEMENTS)
        if client.response.database:
            db, refusal = self.database_access(client.response.database)
            if db is None:
                self.wire.send_error(*refusal)
                await self.wire.flush()
                return False
            self.database = db
        self.wire.send(OKPacket(status=ServerStatus(self.status)).encode(self.capabilities))
        await self.wire.flush()
        self.log = self.log.bind(user=self.user)
        self.log.debug("session_started", database=self.database.name if self.database else None)
        return True

    # -- commands ---------------------------------------------------------------------------------------

    def ok(self, affected: int = 0, last_insert_id: int = 0, info: bytes = b"") -> None:
        self.wire.send(OKPacket(affected, last_insert_id, ServerStatus(self.status), 0, info).encode(self.capabilities))

    def error(self, errno: int, message: str, sqlstate: str = "HY000") -> None:
        self.errored = True
        self.last_errno = errno
        self.wire.send(ERRPacket(errno, message, sqlstate).encode(self.capabilities))

    def rows(
        self, columns: list[str | ColumnDefinition41], rows: list[tuple[object, ...]] | list[list[object]]
    ) -> None:
        self.wire.send_many(result_packets(columns, rows, capabilities=self.capabilities, status=self.status))

    async def _dispatch(self, payload: bytes) -> None:
        cmd = payload[0]
        try:
            if cmd == Command.QUERY:
                if self.server.statement_timeout > 0:
                    await self._with_timeout(self._query(payload))
                else:
                    await self._query(payload)
            elif cmd == Command.PING:
                self.ok()
            elif cmd == Command.INIT_DB:
                self._use(ComInitDB.decode(payload).database)
            elif cmd == Command.FIELD_LIST:
                await self._field_list(payload)
            elif cmd == Command.SET_OPTION:
                opt = ComSetOption.decode(payload).option
                if opt not in (SetOption.MULTI_STATEMENTS_ON, SetOption.MULTI_STATEMENTS_OFF):
                    self.error(ErrorCode.UNKNOWN_COM_ERROR, "Unknown command", "08S01")
                    return
                self.multi_statements = opt == SetOption.MULTI_STATEMENTS_ON
                for conn in self.backends.values():
                    await conn.simple_command(payload)
                # an EOF, or under DEPRECATE_EOF the OK with 0xFE header that servers send instead
                self.wire.send(end_of_result(ServerStatus(self.status), 0, self.capabilities))
            elif cmd == Command.RESET_CONNECTION:
                await self._reset()
                self.ok()
            elif cmd == Command.STATISTICS:
                await self._statistics()
            elif cmd == Command.PROCESS_KILL:
                await self._kill(ComProcessKill.decode(payload).connection_id, "CONNECTION")
            elif cmd == Command.CHANGE_USER:
                await self._change_user(payload)
            elif cmd == Command.STMT_PREPARE:
                await prepared.prepare(self, payload)
            elif cmd == Command.STMT_EXECUTE:
                if len(payload) >= 5:
                    stmt = self.statements.get(int.from_bytes(payload[1:5], "little"))
                    if stmt is not None:
                        self.stmt_kind = statement_kind(stmt.sql)
                if self.server.statement_timeout > 0:
                    await self._with_timeout(prepared.execute(self, payload))
                else:
                    await prepared.execute(self, payload)
            elif cmd in (Command.STMT_SEND_LONG_DATA, Command.STMT_CLOSE):
                # no answer by protocol, so not even an error: a failure surfaces at the next EXECUTE
                try:
                    if cmd == Command.STMT_CLOSE:
                        await prepared.close(self, payload)
                    else:
                        await prepared.send_long_data(self, payload)
                except (MalformedPacket, BackendError) as exc:
                    self.log.info("unanswered_command_failed", command=cmd, error=str(exc))
            elif cmd == Command.STMT_RESET:
                await prepared.reset(self, payload)
            elif cmd == Command.STMT_FETCH:
                await prepared.fetch(self, payload)
            else:
                self.error(ErrorCode.UNKNOWN_COM_ERROR, "Unknown command", "08S01")
        except MalformedPacket as exc:
            self.error(ErrorCode.MALFORMED_PACKET, f"Malformed communication packet: {exc}", "HY000")
        except ServerError as exc:  # the kernel's refusals, the merge's limits: their own errno and SQLSTATE
            self.error(exc.errno, exc.message, exc.sqlstate)
        except BackendError as exc:
            self.log.warning("backend_error", data_source=exc.data_source, error=str(exc))
            message = txn.note_failure(self, exc)  # drops the broken connections; a lost transaction part is said
            self.error(exc.errno, message, exc.sqlstate)
        except (ClientGone, asyncio.CancelledError):
            raise
        except Exception as exc:
            # a bug must cost one statement, not the session: report it and keep serving
            self.log.exception("command_failed")
            self.drop_broken()
            self.error(ErrorCode.UNKNOWN_ERROR, f"shardproxy internal error: {type(exc).__name__}: {exc}", "HY000")

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

    def give_back(self, conn: BackendConnection, *, reset: bool = True) -> None:
        """Hand a connection this session owns back to its pool (synchronously; never raises)."""
        self.in_use.discard(conn)
        try:
            conn.source.release(conn, owner=self, reset=reset)
        except Exception:
            self.log.exception("release_failed", data_source=conn.name)

    def drop_broken(self) -> None:
        for held in (self.backends, self.read_backends):
            for name, conn in list(held.items()):
                if conn.broken:
                    if held is self.backends:
                        txn.connection_lost(self, conn)  # its part of an open transaction is gone with it
                    del held[name]
                    self.give_back(conn)

    def release_read_backends(self) -> None:
        """Replica connections go back to their pools (USE, RESET, SET): the next read prepares a fresh
        one with the session's state, instead of replaying every change on every replica connection."""
        conns, self.read_backends = self.read_backends, {}
        for conn in conns.values():
            self.give_back(conn)

    def _wait_without_holding(self) -> None:
        """Before waiting for a pool: give back every held connection that this command has not used and
        that holds nothing of ours (no transaction, nothing sticky), so that no set of sessions can wait
        for each other's idle connections (hold-and-wait). The command's connections are taken in one
        order (sorted data source names, see `backends_for`), so the ones it keeps cannot form a cycle."""
        for held in (self.backends, self.read_backends):
            for name, conn in list(held.items()):
                if conn not in self.in_use and self._lendable(conn):
                    del held[name]
                    self.give_back(conn, reset=False)

    async def acquire_from(self, source: DataSource, *, hold: bool = True) -> BackendConnection:
        """A connection of `source` for this session: now if one is free, else after giving back what
        the session holds idle, waiting at most the data source's connectionTimeoutMilliseconds."""
        holder = self if hold else None
        self.connecting.append(source.name)
        try:
            conn = await source.try_acquire(self, found_rows=self.found_rows, holder=holder)
            if conn is None:
                self._wait_without_holding()
                conn = await source.acquire(self, found_rows=self.found_rows, holder=holder)
        finally:
            self.connecting.remove(source.name)
        return conn

    async def backends_for(self, data_sources: list[str], **access: bool) -> dict[str, BackendConnection]:
        """The session's connections to several data sources for one statement, taken in sorted order."""
        return {name: await self.backend(name, **access) for name in sorted(set(data_sources))}

    async def backend(self, data_source: str, *, read: bool = False, record_write: bool = True) -> BackendConnection:
        """The session's connection to a data source, borrowed on first use and kept.

        For a read/write splitting group, a `read` that may use a replica gets the session's connection to
        the replica the load balancer picks (see proxy.readwrite); everything else gets the primary, and a
        `record_write` counts for the group's read-after-write consistency."""
        if self.database is not None:
            group = self.database.sources.get(data_source)
            if isinstance(group, ReadWriteGroup):
                replica = await group_backend(self, group, read=read, record_write=record_write)
                if replica is not None:
                    return replica
        conn = self.backends.get(data_source)
        if conn is not None and not conn.broken:
            self.in_use.add(conn)
            if self.txn.active and data_source not in self.txn.joined and self.database is not None \
                    and self.database.kernel is not None:
                await txn.join(self, conn)
            if not read and self.txn.xa is not None:
                self.txn.xa.written.add(data_source)  # not a plain read: this branch takes part in 2PC
            return conn
        assert self.database is not None
        source = self.database.sources[data_source]
        if conn is not None:
            txn.connection_lost(self, conn)
            self.backends.pop(data_source, None)
            self.give_back(conn)
        if self.txn.lost and data_source in self.txn.lost:
            raise txn.lost_error(self, data_source)  # a new connection would commit apart from the transaction
        conn = await self.acquire_from(source)
        self.in_use.add(conn)
        try:
            await self._prepare_connection(conn, join_transaction=True)
        except BaseException:
            self.give_back(conn)
            raise
        self.backends[data_source] = conn
        if not read and self.txn.xa is not None:
            self.txn.xa.written.add(data_source)
        return conn

    # -- sharing backend connections between sessions ----------------------------------------------------

    def _lendable(self, conn: BackendConnection) -> bool:
        """May this held connection serve another session between our commands? Only when nothing of
        ours lives on it beyond the state `_fit` can re-create: no transaction, no statement results a
        client may ask for next, no prepared statements, no temporary tables or locks (`sticky`)."""
        status = conn.status
        return not (
            conn.broken
            or conn.busy
            or conn.keep_for_next
            or self.sticky
            or status & ServerStatus.IN_TRANS
            or not status & ServerStatus.AUTOCOMMIT
            or self.txn.active
            or conn.xa is not None
            or conn in self.borrowed
            or any(stmt.backend is conn or stmt.cursor_conn is conn for stmt in self.statements.by_id.values())
        )

    def give_up(self, conn: BackendConnection) -> bool:
        """Called (synchronously) by a data source whose pool is exhausted: hand over an idle connection."""
        if self.busy or not self._lendable(conn):
            return False
        for held in (self.backends, self.read_backends):
            for name, c in held.items():
                if c is conn:
                    del held[name]
                    return True
        return False  # not ours to give (the pool's registry and ours disagree: keep it where it is)

    def _lend_idle(self) -> None:
        """Between commands: connections other sessions are waiting for go back to the pool now."""
        if not self.read_backends:
            for c in self.backends.values():
                if c.source.waiters:
                    break
            else:
                return  # nobody waits for what we hold (the common case, checked without a generator)
        for held in (self.backends, self.read_backends):
            for name, conn in list(held.items()):
                if conn.source.waiters > 0 and self._lendable(conn):
                    del held[name]
                    self.give_back(conn, reset=False)

    async def _fit(self, conn: BackendConnection) -> None:
        """Give a borrowed connection this session's state (character set, multi-statement option, SET
        statements); a connection left with another session's state is reset first. A connection that
        already has this state costs nothing."""
        wanted = (self.charset, self.multi_statements, tuple(self.txn.session_sets))
        if conn.state == wanted:
            return
        if not conn.clean:
            await conn.source.reset(conn)
        if self.charset != conn.charset:
            await self._must(conn, f"SET NAMES {self.charset}")
            conn.charset = self.charset
        if not self.multi_statements:
            # match the client's setting so 'a; b' fails as it would on a server
            await conn.simple_command(ComSetOption(SetOption.MULTI_STATEMENTS_OFF).encode())
        for sql in self.txn.session_sets:
            await self._must(conn, sql)
        conn.session_sets = tuple(self.txn.session_sets)

    async def _query(self, payload: bytes) -> None:
        sql = payload[1:].decode("utf-8", errors="surrogateescape")
        self.stmt_kind = statement_kind(sql)
        self.info = sql[:100]
        stmt = classify(sql)
        if stmt is not None:
            await self._proxy_statement(stmt, sql)
            return
        rewritten = metadata.substitute(self, sql)
        if rewritten is not None:
            sql = rewritten
            payload = ComQuery(sql.encode("utf-8", errors="surrogateescape")).encode()
        db = self.database
        if await metadata.answer(self, db, sql):
            return
        if db is None:
            await self._without_database(payload, sql)
            return
        if not self.sticky and may_be_sticky(sql):
            self.sticky = True
        source = db.pass_through_source
        if source is not None:
            await relay_pass_through(self, source, payload, sql)
            self._after_pass_through(source, sql)
            return
        if self.multi_statements and ";" in sql:
            statements = split_statements(sql)
            if len(statements) > 1:
                await self._multi(db, statements)
                return
        await self._routed_query(db, sql)

    def _after_pass_through(self, source: DataSource, sql: str) -> None:
        """What a passed-through statement leaves on its connection that the proxy must know: SET state to
        re-create on another connection, and results the client may ask for next (LAST_INSERT_ID() ...)."""
        conn = self.backends.get(source.name)
        if conn is None or self.errored:
            return
        head = sql.lstrip()[:7].upper()
        if head.startswith(("INSERT", "REPLACE", "UPDATE", "DELETE", "CALL", "LOAD")):
            conn.keep_for_next = True  # LAST_INSERT_ID(), ROW_COUNT() of this statement may come next
        if head.startswith("SET"):
            stmt = classify_session_statement(sql)
            if stmt is not None and stmt.kind == "set":
                if stmt.value:
                    self.charset = conn.charset = stmt.value if stmt.value != "utf8" else "utf8mb3"
                else:
                    self.txn.session_sets.append(sql)
                    conn.session_sets = tuple(self.txn.session_sets)
                if isinstance(source, ReadWriteGroup):
                    self.release_read_backends()  # the next read borrows a replica connection with it
            elif stmt is not None and stmt.kind in ("next_tx", "savepoint"):
                self.sticky = True

    async def _multi(self, db: LogicalDatabase, statements: list[str]) -> None:
        """Several statements in one COM_QUERY on a sharded database: each routed on its own, answered as
        consecutive results flagged MORE_RESULTS_EXISTS; the first error ends the sequence, as on MySQL."""
        for i, statement in enumerate(statements):
            self.more_results = i < len(statements) - 1
            self.errored = False
            try:
                stmt = classify(statement)
                if stmt is not None:
                    await self._proxy_statement(stmt, statement)
                    continue
                statement = metadata.substitute(self, statement) or statement
                if not await metadata.answer(self, self.database or db, statement):
                    await self._routed_query(self.database or db, statement)
            finally:
                self.more_results = False
            if self.errored:
                return

    async def _routed_query(self, db: LogicalDatabase, sql: str) -> None:
        session_stmt = classify_session_statement(sql)
        if session_stmt is not None:
            await txn.session_statement(self, session_stmt, sql)
            return
        sql_prepared = prepared.classify_sql_prepared(sql)
        if sql_prepared is not None:
            await prepared.sql_statement(self, *sql_prepared)
            return
        from proxy.execution.routed import execute_routed

        await execute_routed(self, db, sql)

    async def relay(self, data_source: str, payload: bytes) -> None:
        await self.relay_on(await self.backend(data_source), payload)

    async def relay_on(
        self, conn: BackendConnection, payload: bytes, error_rewriter: Callable[[bytes], bytes] | None = None,
        *, writer: Any = None, replica: bool = False,
    ) -> ResultSummary:
        """Send a command on `conn` and relay its answer to the client (or to `writer`, standing in for it).
        A `replica`'s status flags say nothing of the session's transaction, which lives on the primary."""
        summary = await conn.relay(
            payload, writer or self.writer, first_seq=self.wire.seq, client_deprecate_eof=self.deprecate_eof,
            more_results=self.more_results, error_rewriter=error_rewriter,
        )
        self.wire.seq = summary.next_seq
        if summary.error is not None:
            self.errored = True
            self.last_errno = summary.error.errno
        if not replica:
            self.update_status(summary.status)
        return summary

    def update_status(self, backend_status: int) -> None:
        """Take the transaction flags from a backend's answer (pass-through), or from the proxy's own
        transaction state (sharded databases, where no single backend knows the whole picture)."""
        if self.database is not None and self.database.kernel is not None:
            status = _AUTOCOMMIT if self.txn.autocommit else 0
            # IN_TRANS after BEGIN, and under autocommit=0 once a statement opened the implicit transaction
            # on a joined connection (not right after COMMIT/ROLLBACK: connectors check it, e.g.
            # mysql-connector's start_transaction())
            if self.txn.begin_sql is not None or (self.txn.active and any(
                    (c := self.backends.get(n)) is not None and c.status & ServerStatus.IN_TRANS
                    for n in self.txn.joined)):
                status |= _IN_TRANS
            self._status = status
        else:
            self._status = int(backend_status) & ~_MORE_RESULTS

    def hints(self) -> SessionHints | None:
        return None

    async def try_extra_backend(self, data_source: str, *, like: BackendConnection | None = None
                                ) -> BackendConnection | None:
        """A pooled connection for one statement (a second unit on a data source), with the session's
        character set and SET state applied, or None when the pool has nothing free now: a statement
        never waits for a second connection of a data source while it holds the first (the caller reads
        that unit into memory instead). `like`: from the same source as that connection (the replica a
        read/write splitting group chose for the statement)."""
        assert self.database is not None
        source = like.source if like is not None else self.database.sources[data_source]
        self.connecting.append(source.name)
        try:
            conn = await source.try_acquire(self, found_rows=self.found_rows)
        finally:
            self.connecting.remove(source.name)
        if conn is None:
            return None
        self.borrowed.add(conn)
        try:
            await self._prepare_connection(conn, join_transaction=False)
        except BaseException:
            self.borrowed.discard(conn)
            self.give_back(conn)
            raise
        return conn

    def return_extra_backend(self, conn: BackendConnection, *, broken: bool = False) -> None:
        if broken:
            conn.broken = True
        self.borrowed.discard(conn)
        self.give_back(conn, reset=False)

    async def _prepare_connection(self, conn: BackendConnection, *, join_transaction: bool) -> None:
        await self._fit(conn)
        if join_transaction and self.txn.active:
            await txn.join(self, conn)

    async def _must(self, conn: BackendConnection, sql: str) -> None:
        res = await conn.execute(sql)  # SET values may hold bytes that are not UTF-8
        if isinstance(res, ERRPacket):
            raise BackendError(conn.name, f"{text.shown(sql)!r} failed: {res.message}", errno=res.errno,
                               sqlstate=res.sqlstate)

    async def _without_database(self, payload: bytes, sql: str) -> None:
        """No logical database chosen yet: table-less statements (SELECT @@version_comment, SET ...) run on a
        default data source; anything naming a table needs `USE` first, as on MySQL."""
        default = self.server.default_database()
        if default is None or _mentions_tables(sql):
            self.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
            return
        saved = self.database
        self.database = default
        try:
            ds = next(iter(default.sources))
            await self.relay(ds, payload)
        finally:
            self.database = saved

    def database_access(self, name: str) -> tuple[LogicalDatabase | None, tuple[int, str, str]]:
        """The logical database `name` for this session's user, or None and the error to answer: MySQL's
        ER_DBACCESS_DENIED_ERROR 1044 when authority.privilege does not permit it (also for a name no
        database has: the error tells nothing of what exists), else 1049 for an unknown name."""
        privilege = self.server.config.privilege
        if not privilege.permits(self.user_config, name):
            return None, (ER_DBACCESS_DENIED_ERROR, denied_message(self.user_config, name), "42000")
        db = self.server.database(name)
        if db is None:
            return None, (ErrorCode.BAD_DB_ERROR, f"Unknown database '{name}'", "42000")
        return db, (0, "", "")

    def database_named(self, name: str) -> LogicalDatabase | None:
        """`database_access`, the error sent to the client."""
        db, refusal = self.database_access(name)
        if db is None:
            self.error(*refusal)
        return db

    def visible_databases(self) -> list[str]:
        """The logical databases SHOW DATABASES lists for this session's user."""
        return self.server.config.privilege.visible(self.user_config, sorted(self.server.databases_by_name))

    def _use(self, name: str) -> None:
        bad = text.invalid_string(name, self.charset)
        if bad is not None:  # not a name in the session's character set: MariaDB's answer
            self.error(text.INVALID_CHARACTER_STRING, bad, "HY000")
            return
        db = self.database_named(name)
        if db is None:
            return
        if self.database is not db:
            txn.abandon(self)
            for conn in list(self.backends.values()):
                self.give_back(conn)
            self.backends.clear()
            self.release_read_backends()
            self.read_state = {}
            self.txn = TransactionState()
            self.statements.clear()
            self.sql_statements.clear()
        self.database = db
        self.ok()

    async def _proxy_statement(self, stmt: ProxyStatement, sql: str) -> None:
        if stmt.kind == "use":
            self._use(stmt.arg or "")
        elif stmt.kind == "show_databases":
            names = self.visible_databases()
            if stmt.arg is not None:
                rx = like_to_regex(stmt.arg)
                names = [n for n in names if rx.match(n)]
            self.rows(["Database"], [(n,) for n in names])
        elif stmt.kind == "select_database":
            self.rows(["DATABASE()"], [(self.database.name if self.database else None,)])
        elif stmt.kind == "processlist":
            await metadata.processlist(self, stmt.arg == "FULL")
        elif stmt.kind == "kill":
            await self._kill(int(stmt.arg or 0), stmt.arg2 or "CONNECTION")
        elif stmt.kind == "kill_other":
            self.error(ErrorCode.NOT_SUPPORTED_YET, "shardproxy: KILL takes a proxy connection id, as a number "
                       "(SHOW PROCESSLIST); KILL USER, KILL QUERY ID and expressions are not supported", "42000")
        elif stmt.kind in ("preview", "show_rules", "show_nodes", "units", "show_rw_rules", "show_txn_rule",
                           "show_in_doubt", "alter_txn_rule"):
            from proxy.session.admin import admin_statement

            await admin_statement(self, stmt, sql)
        elif stmt.kind in ("distsql", "distsql_unsupported"):
            from proxy.session.distsql.handler import execute

            await execute(self, stmt)
        else:  # pragma: no cover - classify() only returns the kinds above
            self.error(ErrorCode.NOT_SUPPORTED_YET, f"unsupported proxy statement {stmt.kind}", "42000")

    async def _kill(self, target_id: int, scope: str) -> None:
        target = self.server.sessions.get(target_id)
        if target is None:
            self.error(ErrorCode.NO_SUCH_THREAD, f"Unknown thread id: {target_id}", "HY000")
            return
        if not metadata.may_see(self, target):  # another user's session, and we are no admin
            self.error(ErrorCode.KILL_DENIED_ERROR, f"You are not owner of thread {target_id}", "HY000")
            return
        if scope == "QUERY":
            await self.server.kill_backend_queries(target)
            self.ok()
            return
        if target is self:
            # MySQL answers a self-KILL with ER_QUERY_INTERRUPTED and closes the connection
            self.error(ErrorCode.QUERY_INTERRUPTED, "Query execution was interrupted", "70100")
            await self.wire.flush()
            raise ClientGone("killed itself")
        await self.server.kill_backend_queries(target)
        if target.task is not None:
            target.task.cancel()
        self.ok()

    async def _change_user(self, payload: bytes) -> None:
        """COM_CHANGE_USER: authenticate again, then start over as a fresh session of that user."""
        request = ComChangeUser.decode(payload, self.capabilities)
        try:
            user = await self.server.authenticator.change_user(self.wire, request, self.client_host,
                                                               secure=self.secure)
        except HandshakeFailed as exc:
            # MySQL closes the connection after a failed change-user
            self.error(exc.errno, exc.message, exc.sqlstate)
            await self.wire.flush()
            raise ClientGone("change user failed") from exc
        database = None
        if request.database:
            saved, self.user_config = self.user_config, user  # the new user's privileges decide
            try:
                database, refusal = self.database_access(request.database)
            finally:
                self.user_config = saved
            if database is None:
                self.error(*refusal)
                await self.wire.flush()
                raise ClientGone("change user to a database it may not use")
        txn.abandon(self)
        for conn in list(self.backends.values()) + list(self.read_backends.values()):
            self.give_back(conn)
        self.backends.clear()
        self.read_backends.clear()
        self.txn = TransactionState()
        self.statements.clear()
        self.sql_statements.clear()
        self.user, self.user_config, self.database = user.user, user, database
        if request.character_set:
            self.charset = charset_for_collation(request.character_set)
        self.status = int(ServerStatus.AUTOCOMMIT)
        self.log = self.log.bind(user=self.user)
        self.ok()

    async def _reset(self) -> None:
        txn.abandon(self)  # a connection with an XA branch is closed, not reset (MariaDB would keep it half-open)
        for name, conn in list(self.backends.items()):
            if conn.broken:
                del self.backends[name]
                self.give_back(conn)
        for name, conn in list(self.backends.items()):
            await conn.simple_command(bytes((Command.RESET_CONNECTION,)))
            conn.charset = "utf8mb4"
            if self.charset != "utf8mb4":
                await conn.execute(f"SET NAMES {self.charset}")
                conn.charset = self.charset
            self.backends[name] = conn
        self.release_read_backends()
        self.read_state = {}
        self.txn = TransactionState()
        self.statements.clear()
        self.sql_statements.clear()
        self.status = int(ServerStatus.AUTOCOMMIT)

    async def _field_list(self, payload: bytes) -> None:
        req = ComFieldList.decode(payload)
        db = self.database
        if db is None:
            self.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
            return
        source = db.pass_through_source
        if source is None:
            from proxy.execution.executor import field_list_sharded

            await field_list_sharded(self, db, req)
            return
        conn = await self.backend(source.name, record_write=False)
        # the answer is column definitions then EOF, like a result set without a count or rows
        out = await conn.simple_command(payload)
        if out and out[-1][:1] == b"\xfe":
            out[-1] = end_of_result(ServerStatus(self.status), 0, self.capabilities)
        self.wire.send_many(out)

    async def _statistics(self) -> None:
        uptime = int(asyncio.get_running_loop().time() - self.server.started_at)
        text = (f"Uptime: {uptime}  Threads: {len(self.server.sessions)}  Questions: {self.server.questions}  "
                f"Slow queries: 0  Opens: 0  Open tables: 0  Queries per second avg: 0.000")
        self.wire.send(text.encode())


def _mentions_tables(sql: str) -> bool:
    try:
        import sqlglot
        from sqlglot import exp

        tree = sqlglot.parse_one(sql, read="mysql")
    except Exception:
        return True
    if tree is None:
        return False
    return any(True for _ in tree.find_all(exp.Table))


__all__ = ["Session"]
