"""One client connection: the handshake, then one command at a time until the client leaves.

The session owns the client's logical state (current logical database, status flags, capabilities) and
the backend connections it holds: one per data source it has used, kept until the session ends, so that
everything a client sets on its connection (SET, user variables, temporary tables, transactions) stays
where the client put it. Connections are reset before they go back to the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from protocol import text
from protocol.constants import Capability, Command, ErrorCode, ServerStatus
from protocol.framing import PacketTooLarge
from protocol.packets import (
    ColumnDefinition41,
    ERRPacket,
    OKPacket,
)
from protocol.results import ResultSummary
from protocol.wire import MalformedPacket
from proxy.backends.backend import BackendConnection
from proxy.backends.charset import names_for_collation
from proxy.config.model import UserConfig
from proxy.execution import txn
from proxy.execution.diagnostics import Diagnostics
from proxy.execution.errors import answer_error, server_errno
from proxy.execution.fastpath import ClientProtocol, FastPath
from proxy.execution.infile import local_infile
from proxy.execution.resultset import result_packets
from proxy.execution.state import GroupSessionState, StatementRegistry, TransactionState
from proxy.execution.txn_text import quote
from proxy.frontend.handshake import HandshakeFailed
from proxy.frontend.wire import ClientGone, ClientPackets
from proxy.observe.audit import session_fields
from proxy.observe.statement import statement_ended
from proxy.privilege import ER_DBACCESS_DENIED_ERROR, denied_message
from proxy.session.connections import SessionConnections
from proxy.session.dispatch import dispatch_command, dispatch_proxy_statement
from proxy.session.statements import ProxyStatement
from proxy.session.stopping import StatementStopping
from routing.plan import SessionHints
from routing.session_functions import printed_back

ER_WRONG_VALUE_FOR_VAR = 1231
# character sets whose characters are not ASCII-compatible: no client may speak them (MariaDB's
# thd_init_client_charset refuses them in the handshake; SET NAMES refuses them too)
NOT_CLIENT_CHARSETS = frozenset({"ucs2", "utf16", "utf16le", "utf32"})

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import ServerContext as ProxyServer

log = structlog.get_logger("shardproxy.session")

# the Command column of SHOW PROCESSLIST: MariaDB's names of the commands (its command_name[])
_COMMAND_NAMES = {int(c): name for c, name in zip(Command, (
    "Sleep", "Quit", "Init DB", "Query", "Field List", "Create DB", "Drop DB", "Refresh", "Shutdown", "Statistics",
    "Processlist", "Connect", "Kill", "Debug", "Ping", "Time", "Delayed insert", "Change user", "Binlog Dump",
    "Table Dump", "Connect Out", "Register Slave", "Prepare", "Execute", "Long Data", "Close stmt", "Reset stmt",
    "Set option", "Fetch", "Daemon", "Unimpl get tid", "Reset connection"), strict=True)}
_IN_TRANS = int(ServerStatus.IN_TRANS)
_AUTOCOMMIT = int(ServerStatus.AUTOCOMMIT)
_MORE_RESULTS = int(ServerStatus.MORE_RESULTS_EXISTS)
_IN_TRANS_READONLY = int(ServerStatus.IN_TRANS_READONLY)
ER_WRONG_DB_NAME = 1102
NAME_CHAR_LEN = 64  # MariaDB's longest identifier, in characters
_READ_ONLY = re.compile(r"\bREAD\s+ONLY\b", re.I)

class Session(SessionConnections, StatementStopping):
    """One client connection's state and lifecycle; commands go to proxy.session.dispatch's tables, the
    connections it holds are managed by the SessionConnections mixin (proxy.session.connections)."""

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
        self.client_port = int(peer[1]) if isinstance(peer, tuple) and len(peer) > 1 else 0
        self.user = ""
        self.database: LogicalDatabase | None = None
        self.capabilities = Capability(0)
        self.secure = False  # TLS
        self._deprecate_eof = False
        self.charset = "utf8mb4"  # the client's character set: the codec of its text
        self.names = "utf8mb4"  # what SET NAMES gives a connection this session's character sets (set_names)
        self._status = int(ServerStatus.AUTOCOMMIT)
        self.more_results = False  # a multi-statement query has statements after the current one
        # the pass-through statement being relayed has rows of the server's own names (proxy.backends.rename)
        self.rename_rows = False
        # SQL-level prepared statements (PREPARE name FROM '...') of a renamed pass-through database whose rows print
        # names (EXPLAIN ...): EXECUTE name shows them in logical names (proxy.backends.rename)
        self.renamed_statements: set[str] = set()
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
        self.sql: str | None = None  # the current statement's text, for its query digest (proxy.observe)
        self.rows_sent = 0  # rows the current command sent to the client
        self.last_digest: tuple[Any, ...] | None = None  # proxy.observe.statement's shortcut for repeated texts
        self.last_insert_id = 0  # sharded databases: the session's, across data sources
        self.row_count = 0  # ROW_COUNT() before any statement, as MariaDB's new connection says
        # sharded databases, FOUND_ROWS(): the value the proxy knows (after a merged SELECT), or else the
        # data source whose connection ran the last SELECT (proxy.execution.routed.routing_hints)
        self.found_rows_value: int | None = None
        self.found_rows_source: str | None = None
        self.multi_statements = True
        self.backends: dict[str, BackendConnection] = {}
        self.txn = TransactionState()
        self.statements = StatementRegistry()
        self.sql_statements: dict[str, str] = {}  # PREPARE name FROM ... on sharded databases
        self.sql_databases: dict[str, LogicalDatabase] = {}  # ... and the database each was prepared in
        self.borrowed: set[BackendConnection] = set()  # pooled connections lent for one statement
        # data sources whose pooled connection this session has renewed (SessionConnections.renew_for_session)
        self.renewed: set[str] = set()
        # connections the current command has used: never given back by `give_back_idle` mid-command
        self.in_use: set[BackendConnection] = set()
        self.client_lost = False  # the client left mid-command and the command was stopped
        self.ending_transaction = False  # COMMIT/ROLLBACK fanning out: not stopped when the client leaves
        self.commit_note = ""  # XA: what the OK of a COMMIT says besides success (proxy.execution.txn)
        self.end_warnings = 0  # the warnings of the COMMIT / ROLLBACK that just ended a transaction (txn_end)
        # the statement's text before session functions were substituted, and their values: its errors print
        # the calls, not the literals (routing.session_functions.printed_back)
        self.substituted: tuple[str, dict[str, str], dict[str, str] | None] | None = None
        # where the last statement's warnings are, on a kernel-routed database (proxy.execution.diagnostics)
        self.diagnostics: Diagnostics | None = None
        self.connecting: list[str] = []  # data sources this command waits on for a connection
        self.query_killed = False  # KILL QUERY reached the current command (see SessionConnections.interrupt)
        self._kill_waits: list[asyncio.Future[None]] = []
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
        self.server.audit.write("connect", **session_fields(self))
        try:
            if not await self._handshake():
                return
            while True:
                try:
                    payload = await self.wire.read(idle=True)
                except PacketTooLarge as exc:  # MariaDB's message, word for word; the sizes go to the log
                    self.log.info("packet_too_large", detail=str(exc))
                    self.wire.send_error(ErrorCode.NET_PACKET_TOO_LARGE,
                                         "Got a packet bigger than 'max_allowed_packet' bytes", "08S01")
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
        """A command starts (here or in proxy.execution.fastpath): processlist state, and nothing of the previous
        statement's results is kept for it any more."""
        self.command = _COMMAND_NAMES.get(command, "?")
        self.command_started = time.monotonic()
        self.command_seq = self.wire.seq
        self.busy = True
        self.errored = False
        self.rows_sent = 0
        self.query_killed = False
        for conn in self.backends.values():
            conn.keep_for_next = False
        if self.in_use:
            self.in_use.clear()

    def end_command(self) -> None:
        """The command is answered: idle again, and held connections others wait for are lent."""
        now = time.monotonic()
        seconds = now - self.command_started
        self.server.stats.observe(self.stmt_kind, self.route, seconds, self.last_errno)
        sql = self.sql
        if sql is not None:
            self.sql = None
            statement_ended(self, sql, seconds, now)
        self.stmt_kind, self.route, self.last_errno = "other", "proxy", 0
        self.command = "Sleep"
        self.info = None
        self.busy = False
        self._lend_idle()

    async def close(self) -> None:
        if self.fast is not None:
            pending = self.fast.abort()
            if pending is not None:  # a COMMIT or ROLLBACK fanned out: every answer is read before anything is
                await pending  # given back (proxy.execution.fastcommit), as the session's own would finish it
        txn.abandon(self)  # an XA branch still open ends with its connection (closed, never reset)
        backends, self.backends = self.backends, {}
        backends.update(self.read_backends)
        self.read_backends = {}
        borrowed, self.borrowed = self.borrowed, set()
        if self.server.sessions.pop(self.id, None) is not None:
            self.server.audit.write("disconnect", **session_fields(self))
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
            self.server.audit.write("login_failed", **session_fields(self), attempted_user=exc.user,
                                    errno=exc.errno, reason=exc.message)
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
        names = names_for_collation(client.response.character_set)  # its exact collation, not the default
        charset = names.split()[0]
        if charset in NOT_CLIENT_CHARSETS:  # MariaDB refuses these in the handshake, after authenticating
            self.wire.send_error(ER_WRONG_VALUE_FOR_VAR,
                                 f"Variable 'character_set_client' can't be set to the value of '{charset}'", "42000")
            await self.wire.flush()
            return False
        self.set_names(names)
        self.multi_statements = bool(client.capabilities & Capability.MULTI_STATEMENTS)
        if client.response.database:
            db, refusal = self.database_access(client.response.database)
            if db is None:
                self.server.audit.write("login_failed", **session_fields(self), attempted_user=self.user,
                                        errno=refusal[0], reason=refusal[1])
                self.wire.send_error(*refusal)
                await self.wire.flush()
                return False
            self.database = db
        self.server.audit.write("login", **session_fields(self), tls=self.secure)
        self.wire.send(OKPacket(status=ServerStatus(self.status)).encode(self.capabilities))
        await self.wire.flush()
        self.log = self.log.bind(user=self.user)
        self.log.debug("session_started", database=self.database.name if self.database else None)
        return True

    # -- commands ---------------------------------------------------------------------------------------

    def ok(self, affected: int = 0, last_insert_id: int = 0, info: bytes = b"", warnings: int = 0) -> None:
        self.row_count = affected  # ROW_COUNT(): an OK's affected rows, as the server counts it
        self.wire.send(
            OKPacket(affected, last_insert_id, ServerStatus(self.status), min(warnings, 0xFFFF), info).encode(
                self.capabilities
            )
        )

    def error(self, errno: int, message: str, sqlstate: str = "HY000") -> None:
        errno, sqlstate = server_errno(errno, sqlstate, message)  # never a client-library number
        if self.substituted is not None:
            message = printed_back(message, *self.substituted)
        self.errored = True
        self.last_errno = errno
        self.diagnostics = Diagnostics(error=(errno, message))  # one server lists an error it answered
        self.row_count = -1  # ROW_COUNT() after an error, as the server says
        self.wire.send(ERRPacket(errno, message, sqlstate).encode(self.capabilities))

    def rows(
        self, columns: list[str | ColumnDefinition41], rows: list[tuple[object, ...]] | list[list[object]],
        warnings: int = 0,
    ) -> None:
        self.row_count = -1  # ROW_COUNT() after a result set
        self.rows_sent += len(rows)
        self.wire.send_many(result_packets(columns, rows, capabilities=self.capabilities, status=self.status,
                                           warnings=warnings))

    async def _dispatch(self, payload: bytes) -> None:
        """One command, answered by its handler (proxy.session.dispatch); what a handler raises becomes
        the command's ERR (proxy.execution.errors.answer_error), and a bug costs the statement, never the session."""
        try:
            await dispatch_command(self, payload)
        except (ClientGone, asyncio.CancelledError):
            raise
        except Exception as exc:  # a ServerError's own ERR, a backend's with its note, a bug's (proxy.execution.errors)
            answer_error(self, exc)

    async def _proxy_statement(self, stmt: ProxyStatement, sql: str) -> None:
        await dispatch_proxy_statement(self, stmt, sql)

    # -- relaying a backend's answer ---------------------------------------------------------------------

    async def relay(self, data_source: str, payload: bytes) -> None:
        await self.relay_on(await self.backend(data_source), payload)

    async def relay_on(
        self, conn: BackendConnection, payload: bytes, error_rewriter: Callable[[bytes], bytes] | None = None,
        *, writer: Any = None, replica: bool = False, column_rewriter: Callable[[bytes], bytes] | None = None,
    ) -> ResultSummary:
        """Send a command on `conn` and relay its answer to the client (or to `writer`, standing in for it).
        A `replica`'s status flags say nothing of the session's transaction, which lives on the primary."""
        db = self.database
        renaming = db.renaming if db is not None and db.kernel is None else None
        if renaming is not None and error_rewriter is None:
            error_rewriter = renaming.error  # (then the session functions' calls printed back, below)
        if self.substituted is not None:
            error_rewriter = _calls_printed(error_rewriter, self.substituted)
        if renaming is not None:  # a pass-through database whose physical database has another name
            summary = await conn.relay(
                payload, writer or self.writer, first_seq=self.wire.seq, client_deprecate_eof=self.deprecate_eof,
                more_results=self.more_results, error_rewriter=error_rewriter,
                column_rewriter=renaming.column, row_rewriter=renaming.row if self.rename_rows else None,
            )
        else:
            summary = await conn.relay(
                payload, writer or self.writer, first_seq=self.wire.seq, client_deprecate_eof=self.deprecate_eof,
                more_results=self.more_results, error_rewriter=error_rewriter, column_rewriter=column_rewriter,
            )
        self.wire.seq = summary.next_seq
        while summary.local_infile is not None:  # LOAD DATA LOCAL INFILE: the client's file, then the answer
            summary = await local_infile(self, conn, writer or self.writer, error_rewriter)
            self.wire.seq = summary.next_seq
        self.rows_sent += conn.relayed_rows
        # ROW_COUNT() of a sharded database's next statement: this answer's, as the server counts it
        self.row_count = -1 if summary.error is not None or summary.result_sets else summary.affected_rows
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
            begin = self.txn.begin_sql
            if begin is not None or (self.txn.active and any(
                    (c := self.backends.get(n)) is not None and c.status & ServerStatus.IN_TRANS
                    for n in self.txn.joined)):
                status |= _IN_TRANS
                if begin is not None and _READ_ONLY.search(begin):
                    status |= _IN_TRANS_READONLY
            self._status = status | self.txn.mode_flags
        else:
            self._status = int(backend_status) & ~_MORE_RESULTS

    def hints(self) -> SessionHints | None:
        return None

    def database_access(self, name: str) -> tuple[LogicalDatabase | None, tuple[int, str, str]]:
        """The logical database `name` for this session's user, or None and the error to answer: MySQL's
        ER_DBACCESS_DENIED_ERROR 1044 when authority.privilege does not permit it (also for a name no
        database has: the error tells nothing of what exists), else 1049 for an unknown name. Before both, as
        MariaDB checks it first: 1102 for a name no database can have (over 64 characters, a trailing space), and
        1046 for an empty one."""
        if not name:
            return None, (ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
        if len(name) > NAME_CHAR_LEN or name.endswith(" "):
            return None, (ER_WRONG_DB_NAME, f"Incorrect database name '{name}'", "42000")
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

    async def _use(self, name: str) -> None:
        bad = text.invalid_string(name, self.charset)
        if bad is not None:  # not a name in the session's character set: MariaDB's answer
            self.error(text.INVALID_CHARACTER_STRING, bad, "HY000")
            return
        db = self.database_named(name)
        if db is None:
            return
        if self.database is not db:
            # chosen first (no database before): the connection the statements ran on so far is the default
            # database's; a pass-through default keeps it, so that what it holds (a transaction, autocommit=0)
            # goes on as on MariaDB, where USE changes neither
            first = self.database is None
            keep = first and db.pass_through_source is not None and db is self.server.default_database()
            txn.abandon(self)
            if not keep:
                for conn in list(self.backends.values()):
                    self.give_back(conn)
                self.backends.clear()
                # prepared statements stay, as on MariaDB (proxy.session.stmt_database); those on the connections
                # given back are prepared again where they run next
                for stmt in self.statements.by_id.values():
                    stmt.backend_id = 0
            self.release_read_backends()
            self.read_state = {}
            # the session's variables are the session's, not the database's: they hold after USE, as on MariaDB
            was, self.txn = self.txn, TransactionState()
            self.txn.session_sets, self.txn.mode_flags = was.session_sets, was.mode_flags
            self.txn.sql_mode_bits = was.sql_mode_bits
            if first and db.kernel is not None:  # so do autocommit and a transaction begun before (no work yet)
                self.txn.autocommit, self.txn.begin_sql = was.autocommit, was.begin_sql
                self.txn.next_tx_sets, self.txn.savepoints = was.next_tx_sets, was.savepoints
            carried = _carried(was) if first and not keep and db.kernel is None else []
        else:
            carried = []
        self.database = db
        if db.kernel is not None:
            self.update_status(0)  # (the flags of the transaction state it carries)
        elif carried:  # another pass-through database than the default: its connection takes the transaction up
            source = db.pass_through_source
            assert source is not None
            conn = await self.backend(source.name)
            for sql in carried:
                await self._must(conn, sql)
            self.update_status(conn.status)
        self.ok()


def _carried(was: TransactionState) -> list[str]:
    """What re-creates, on another connection, the transaction state a session set up before choosing a database
    (autocommit off, a transaction begun, its savepoints): it did no work (nothing can be written without a
    database: proxy.session.nodatabase), so beginning it again there is carrying it over."""
    out = [] if was.autocommit else ["SET autocommit=0"]
    if was.begin_sql is not None:
        out.append(was.begin_sql)
    out += [f"SAVEPOINT {quote(n)}" for n in was.savepoints] if was.active else []
    return out


def _calls_printed(
    rewriter: Callable[[bytes], bytes] | None, substituted: tuple[str, dict[str, str], dict[str, str] | None]
) -> Callable[[bytes], bytes]:
    """A relayed ERR's rewriting, then its message with the substituted session functions printed as calls."""

    def rewrite(payload: bytes) -> bytes:
        payload = rewriter(payload) if rewriter is not None else payload
        try:
            err = ERRPacket.decode(payload)
        except Exception:
            return payload
        message = printed_back(err.message, *substituted)
        return payload if message == err.message else dataclasses.replace(err, message=message).encode()

    return rewrite

__all__ = ["Session"]
