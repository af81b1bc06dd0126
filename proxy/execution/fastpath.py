"""The synchronous relay: single-connection commands answered inside the socket callbacks.

Why: on a point select the proxy's own work is small next to what asyncio streams cost around it: a
StreamReader future and a Task step to wake the session for the command, another pair to wake it for the
backend's answer, and the coroutine frames in between, more than the relay itself costs (bench/RESULTS.md).
Here the client's packet is checked and written to the backend inside the client socket's `data_received`,
and the backend's answer is relayed to the client inside the backend socket's `data_received`: two reads and
two writes per query and no coroutine switch. It serves pass-through databases and, for SELECTs the kernel
routes to one node, sharded ones.

The session's coroutine stays the one place where behaviour is defined. The fast path takes only a
command whose slow-path handling would be exactly "relay to the connection the session already holds"
(`fast_forward`); everything else, and anything that arrives while the fast path is not armed, goes to
the coroutine in arrival order. The coroutine arms it only while it waits for the next command with
nothing buffered (`ClientPackets.read(idle=True)`).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from protocol.binary import ParamType, encode_execute
from protocol.constants import ErrorCode
from protocol.framing import encode_packet
from protocol.packets import ERRPacket
from protocol.results import ResultRelay
from protocol.retarget import execute_layout, execute_params, retarget_execute
from protocol.verbatim import VerbatimRelay, relay_for
from protocol.wire import MalformedPacket
from proxy.backends.backend import BACKEND_DEPRECATE_EOF, BackendError
from proxy.backends.codec import execute_payload
from proxy.execution.decide import NO_FEDERATION, OFF_LOOP_TEXT, decide, prepared_point, route_point
from proxy.execution.decrypting import DecryptingRelay
from proxy.execution.diagnostics import ran_on, reads_diagnostics
from proxy.execution.encrypted import (
    encrypted_statement,
    fast_encrypted_execute,
    fast_encrypted_select,
    kept_encrypted_select,
    mapped_execute,
    physical_binding,
)
from proxy.execution.errors import error_packet
from proxy.execution.fastcommit import CommitFan
from proxy.execution.fastlocal import (
    ANSWERED,
    STATS,
    Answered,
    EndForward,
    FastPathStats,
    join_frame,
    local_transaction,
)
from proxy.execution.logic_columns import relayed_columns
from proxy.execution.multipath import MultiAnswer, MultiForward, multi_forward
from proxy.execution.plain import SELECT, TRANSACTION, WRITE, plain_statement, statement_kind
from proxy.execution.plans import Run, Strategy
from proxy.execution.preroute import Declined, declined
from proxy.execution.units import error_renamer
from routing.plan import ExecutionUnit, StatementKind

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.runtime import LogicalDatabase
    from proxy.backends.tap import BackendTap
    from proxy.execution.context import SessionContext as Session
    from proxy.execution.state import ClientStatement

# bytes queued for a client before its transport pauses (and the fast path stops reading the backend); the
# plain TCP transport's high-water mark is set to it, a TLS transport keeps its own (512 KiB)
CLIENT_BUFFER_LIMIT = 1 << 18
_QUERY = 0x03
_STMT_EXECUTE = 0x17
_MAX_FRAME = 0xFFFFFF
_SELECT = StatementKind.SELECT
_RELAY = Strategy.RELAY


class ClientProtocol(asyncio.StreamReaderProtocol):
    """The client socket's protocol: a StreamReaderProtocol (the session's coroutine reads through it)
    that first offers each chunk to the session's fast path."""

    fast: FastPath | None = None
    on_lost: Callable[[], None] | None = None  # the session's: a client gone mid-command stops its statement
    writing_paused = False  # between the transport's pause_writing and resume_writing

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if isinstance(transport, asyncio.WriteTransport):
            transport.set_write_buffer_limits(high=CLIENT_BUFFER_LIMIT)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        on_lost = self.on_lost
        if on_lost is not None:
            self.on_lost = None
            on_lost()

    def data_received(self, data: bytes) -> None:
        fast = self.fast
        if fast is not None and fast.take(data):
            return
        super().data_received(data)

    def eof_received(self) -> bool | None:
        fast = self.fast
        if fast is not None and fast.relay is not None:
            fast.eof_pending = True  # after the answer in flight and the commands that came before the EOF
            return True
        keep_open = super().eof_received()
        if self.on_lost is not None:
            self.on_lost()  # a statement running in the session's coroutine is stopped (the client left)
        return keep_open

    def pause_writing(self) -> None:
        self.writing_paused = True
        super().pause_writing()

    def resume_writing(self) -> None:
        self.writing_paused = False
        super().resume_writing()
        if self.fast is not None:
            self.fast.client_drained()


# the answers that read their backends' bytes themselves (a tuple: `A | B` would build a union object per check)
_SELF_READ = (MultiAnswer, CommitFan)

class FastPath:
    """One session's synchronous relay state."""

    __slots__ = ("armed", "backend_transport", "client", "conn", "declined", "decrypting", "eof_pending", "joining",
                 "keep_for_next", "paused", "pending", "relay", "session", "tap", "transport", "verbatim")

    def __init__(self, session: Session, client: ClientProtocol, transport: asyncio.WriteTransport) -> None:
        self.session = session
        self.client = client
        self.transport = transport
        self.armed = False  # the session's coroutine waits for a command and holds no buffered bytes
        # the answer being relayed (a MultiAnswer: a multi-node SELECT, proxy.execution.multipath; a CommitFan: a
        # COMMIT or ROLLBACK, proxy.execution.fastcommit; both read their backends' bytes themselves)
        self.relay: ResultRelay | VerbatimRelay | DecryptingRelay | MultiAnswer | CommitFan | None = None
        self.conn: BackendConnection | None = None
        self.tap: BackendTap | None = None
        self.backend_transport: Any = None
        self.keep_for_next = False  # the command in flight is a write passed through
        self.pending: list[bytes] = []  # client bytes that arrived while an answer was relayed
        self.paused = False  # the backend socket is not read until the client drains
        self.eof_pending = False  # the client half-closed while an answer was relayed
        # the command in flight starts the open transaction on its node first: the bytes of the BEGIN's answer
        # read so far (None: no BEGIN in flight)
        self.joining: bytes | None = None
        # The plan of a SELECT this path decided and declined, for the session's coroutine
        # (proxy.execution.preroute)
        self.declined: Declined | None = None
        self.verbatim: VerbatimRelay | None = None  # the relay of the answers that pass unchanged, restarted for each
        self.decrypting: DecryptingRelay | None = None  # an encrypted SELECT's relay, restarted for each

    # -- client side --------------------------------------------------------------------------------------

    def take(self, data: bytes) -> bool:
        """Handle `data` here (True), or leave it to the session's coroutine (False, and disarm so that
        everything after it goes there too, in order)."""
        if self.relay is not None:
            self.pending.append(data)
            return True
        if not self.armed:
            return False
        n = len(data) - 4
        if n < 1 or n >= _MAX_FRAME or data[0] | (data[1] << 8) | (data[2] << 16) != n or data[3] != 0:
            self.armed = False  # not exactly one whole command packet
            return False
        if n > self.session.wire.frames.max_payload:
            self.armed = False  # bigger than the session's max_allowed_packet: the session's reader answers 1153
            return False
        try:
            target = fast_forward(self.session, data)
        except Exception:  # a bug must not cost the connection (uvloop closes it): the slow path answers
            self.session.log.exception("fast_path_failed")
            target = None
        if target is None:
            self.armed = False
            return False
        if isinstance(target, Forward):  # (the usual one first: its check is one pointer comparison)
            self._start(target, data[4])
        elif isinstance(target, MultiForward):
            self._start_multi(target, data[4])
        elif isinstance(target, EndForward):
            self._start_end(target, data[4])
        else:
            self._ended()  # Answered
        return True

    def _start(self, target: Forward, command: int) -> None:
        self.declined = None
        conn = target.conn
        tap = conn.tap
        assert tap is not None
        STATS.taken += 1
        session = self.session
        session.begin_command(command)
        transport = tap.transport
        self.conn, self.tap, self.backend_transport = conn, tap, transport
        conn.sent_at = session.command_started  # (the slow-query log's time per data source)
        data = target.data
        cursor = command == _STMT_EXECUTE and len(data) > 9 and data[9] != 0  # (the answer ends at the columns)
        db = session.database
        renaming = db.renaming if db is not None else None
        error_rewriter, column_rewriter = target.error_rewriter, target.column_rewriter
        if renaming is not None:  # a pass-through database of another physical name: shown by its logical one
            error_rewriter, column_rewriter = error_rewriter or renaming.error, renaming.column
        # (a sharded database's node: target.column_rewriter shows its definitions in logical names)
        if session.deprecate_eof == BACKEND_DEPRECATE_EOF:  # (relay_for's VerbatimRelay: kept, restarted)
            verbatim = self.verbatim
            if verbatim is None:
                verbatim = self.verbatim = VerbatimRelay(deprecate_eof=BACKEND_DEPRECATE_EOF)
            verbatim.restart(error_rewriter, cursor, column_rewriter)
            self.relay = verbatim
        else:
            self.relay = relay_for(backend_deprecate_eof=BACKEND_DEPRECATE_EOF,
                                   client_deprecate_eof=session.deprecate_eof, error_rewriter=error_rewriter,
                                   cursor=cursor, column_rewriter=column_rewriter)
        if target.decrypt is not None:  # an encrypted SELECT rewritten: its rows decrypted (proxy.execution.encrypted)
            decrypting = self.decrypting
            if decrypting is None:
                decrypting = DecryptingRelay(session, target.decrypt, self.relay, binary=target.binary)
                self.decrypting = decrypting
            else:
                decrypting.restart(session, target.decrypt, self.relay, binary=target.binary)
            self.relay = decrypting
        self.keep_for_next = target.keep_for_next
        self.joining = b"" if target.joins else None
        tap.relay = self
        conn.busy = True
        transport.write(target.data)

    def _start_multi(self, target: MultiForward, command: int) -> None:
        """A multi-node SELECT (proxy.execution.multipath): its answer is written through the session's wire, as
        the slow path writes it, from sequence id 1."""
        self.declined = None
        session = self.session
        db = session.database
        assert db is not None
        session.wire.seq = 1
        session.begin_command(command)
        session.route = "multi"
        answer = MultiAnswer(session, db, target, self._multi_done)
        self.relay = answer
        answer.start()

    def _start_end(self, target: EndForward, command: int) -> None:
        """A COMMIT or ROLLBACK (proxy.execution.fastcommit): its OK or ERR goes through the session's wire."""
        self.declined = None
        STATS.taken += 1
        session = self.session
        session.wire.seq = 1
        session.begin_command(command)
        session.info = session.sql = target.sql
        session.stmt_kind = TRANSACTION
        fan = CommitFan(session, target.verb, target.work, self._multi_done)
        self.relay = fan
        fan.start()

    def _multi_done(self, answer: MultiAnswer | CommitFan) -> None:
        if self.relay is answer:
            self.relay = None
            self._ended()

    def client_drained(self) -> None:
        if self.paused:
            self.paused = False
            if self.backend_transport is not None:
                self.backend_transport.resume_reading()

    # -- backend side -------------------------------------------------------------------------------------

    def backend_data(self, data: bytes) -> None:
        relay = self.relay
        if relay is None or isinstance(relay, _SELF_READ):  # pragma: no cover - the tap is cleared with it
            return
        if self.joining is not None:
            data = self._joined(data)
            if not data:
                return
        try:
            out = relay.feed(data)
        except MalformedPacket as exc:  # the backend's answer makes no sense: the connection is unusable
            self.backend_failed(exc)
            return
        except Exception as exc:  # a bug: this statement fails, the session and the server go on
            self.session.log.exception("fast_path_failed")
            self.backend_failed(exc)
            return
        transport = self.transport
        if out and not transport.is_closing():
            transport.write(out)
        if relay.done:
            self._finish()
        elif not self.paused and self.client.writing_paused:
            # the client reads slowly: stop reading the backend until its transport says it drained (only a
            # pause the transport itself made is sure to end with resume_writing: a threshold of our own
            # below a TLS transport's high-water mark never would)
            self.paused = True
            self.backend_transport.pause_reading()

    def _joined(self, data: bytes) -> bytes:
        """The BEGIN sent ahead of the command (`Forward.joins`): once its answer is whole, an OK means the node
        joined the session's transaction (as `txn.join` would have recorded) and what follows is the command's
        answer; an ERR ends the command with it, and the connection, on which the command may have run
        outside the transaction, is dropped."""
        assert self.joining is not None and self.conn is not None
        buf = self.joining + data
        if len(buf) < 4 or len(buf) < 4 + (n := buf[0] | (buf[1] << 8) | (buf[2] << 16)):
            self.joining = buf
            return b""
        self.joining = None
        answer = buf[4:4 + n]
        name = self.conn.name
        if answer[:1] == b"\x00":
            self.session.txn.joined.append(name)
            return buf[4 + n:]
        if answer[:1] == b"\xff":
            try:
                err = ERRPacket.decode(answer)
            except MalformedPacket:
                err = ERRPacket(ErrorCode.MALFORMED_PACKET, "Malformed communication packet", "HY000")
            sql = self.session.txn.begin_sql
            self.backend_failed(BackendError(name, f"{sql!r} failed: {err.message}", errno=err.errno))
        else:
            self.backend_failed(MalformedPacket("no OK after BEGIN"))
        return b""

    def backend_lost(self) -> None:
        """The backend connection broke mid-answer: the client hears 2013, as from the slow path."""
        if self.conn is not None:
            self.backend_failed(BackendError(self.conn.name, "lost connection to MySQL server during query"))

    def backend_failed(self, exc: BaseException) -> None:
        """End the command with `exc`'s ERR (proxy.execution.errors.error_packet, as the coroutine path would
        answer it); the connection is dropped (the session borrows another next time)."""
        conn = self.conn
        if conn is None or self.relay is None or isinstance(self.relay, _SELF_READ):
            return
        conn.broken = True
        err = error_packet(exc)
        self.session.last_errno = err.errno
        if not self.transport.is_closing():
            self.transport.write(encode_packet(err.encode(self.session.capabilities), 1)[0])
        self.session.log.warning("backend_error", data_source=conn.name, error=err.message)
        self._finish(lost=True)

    def _finish(self, *, lost: bool = False) -> None:
        relay, conn, tap = self.relay, self.conn, self.tap
        assert relay is not None and not isinstance(relay, _SELF_READ) and conn is not None \
            and tap is not None
        self.relay = self.conn = self.tap = self.backend_transport = None
        self.joining = None
        tap.relay = None
        if self.paused:
            self.paused = False
        session = self.session
        if lost:
            session.drop_broken()
        else:
            summary = relay.summary
            status = summary.status
            conn.busy = False
            conn.status = status
            conn.raw.server_status = status
            session.update_status(status)
            session.row_count = -1 if summary.error is not None or summary.result_sets else summary.affected_rows
            session.rows_sent = relay.rows
            session.errored = summary.error is not None
            if summary.error is not None:
                session.last_errno = summary.error.errno
            if summary.error is not None or summary.warnings:  # (a statement with tables recorded them already)
                ran_on(session, (conn.name,))
            if self.keep_for_next and summary.error is None:
                conn.keep_for_next = True  # as Session._after_pass_through does for writes
        self._ended()

    def _ended(self) -> None:
        """The command is answered: what the client sent meanwhile is taken now."""
        self.session.end_command()
        pending, self.pending = self.pending, []
        for data in pending:
            self.client.data_received(data)
        if self.eof_pending and self.relay is None:
            self.eof_pending = False
            asyncio.StreamReaderProtocol.eof_received(self.client)

    def abort(self) -> asyncio.Future[None] | None:
        """The session ends: stop relaying (the connection, still busy, is closed by its release). A COMMIT or
        ROLLBACK fanned out is read to its end all the same: the future the session awaits first (else None)."""
        self.armed = False
        pending = None
        if isinstance(self.relay, MultiAnswer):
            self.relay.abort()
        elif isinstance(self.relay, CommitFan):
            pending = self.relay.abort()
        if self.tap is not None:
            self.tap.relay = None
        if self.paused and self.backend_transport is not None:
            self.backend_transport.resume_reading()
        self.relay = self.conn = self.tap = self.backend_transport = None
        self.joining = None
        self.pending = []
        return pending


class Forward(NamedTuple):
    """What the fast path sends where, and how the answer comes back."""

    conn: BackendConnection
    data: bytes  # the framed command for the backend
    error_rewriter: Callable[[bytes], bytes] | None  # sharded: backend errors in the client's logical names
    # a write passed through: its connection is kept for what the client may ask next (LAST_INSERT_ID() ...)
    keep_for_next: bool
    joins: bool = False  # `data` starts with the BEGIN that makes the node join the open transaction
    # sharded: column definitions in logical names (proxy.execution.logic_columns)
    column_rewriter: Callable[[bytes], bytes] | None = None
    # an encrypted SELECT rewritten: the encryptor of each result column to decrypt (proxy.execution.encrypted)
    decrypt: tuple[Any, ...] | None = None
    binary: bool = False  # `decrypt`: the answer's rows are binary (an executed prepared statement)


def fast_forward(session: Session, packet: bytes) -> Forward | MultiForward | EndForward | Answered | None:
    """Where to send this command, when the session's slow path would do nothing but relay it to a connection
    the session already holds (idle, on a plain data source: read/write splitting groups choose per
    statement), with no statement timeout to arm and no sql-show to log:

    * pass-through: a COM_STMT_EXECUTE of a statement prepared on that connection, or a `plain_statement`;
    * sharded: a `plain_statement` SELECT, as text or as an executed prepared statement, that the kernel routes to a
      single node (the plan comes from its cache), when the connection already has the actual statement
      prepared; in a transaction that has not joined that node yet, after the BEGIN that joins it, in the same
      write (`fastlocal.join_frame`); and a BEGIN that starts nothing yet (`fastlocal.local_begin`), a COMMIT or
      ROLLBACK of a LOCAL transaction (proxy.execution.fastcommit), as text or executed prepared statements."""
    db = session.database
    if db is None or session.server.statement_timeout > 0:
        return None
    source = db.pass_through_source
    if source is None:
        return _sharded(session, db, packet)
    if not source.fast_relay:
        return None
    renaming = db.renaming
    if renaming is not None and packet[4] == _QUERY:
        text = packet[5:].decode("utf-8", errors="surrogateescape")
        if (renaming.logical.lower() in text.lower() or renaming.rows_for(text)
                or text.lstrip()[:7].upper() in ("PREPARE", "EXECUTE")):
            return None  # a name to translate, or rows that print names (proxy.backends.rename): the coroutine does
    conn = session.backends.get(source.name)
    if conn is None or conn.broken or conn.busy or conn.tap is None:
        return None
    command = packet[4]
    if command == _STMT_EXECUTE:
        if len(packet) < 9:
            return None
        stmt = session.statements.get(struct.unpack_from("<I", packet, 5)[0])
        if stmt is not None and stmt.encrypted is not None and stmt.database is db:
            return _encrypted_execute(session, db, conn, stmt, packet)
        if stmt is None or stmt.backend is not conn or not stmt.backend_id or stmt.database is not db:
            return None
        stmt.remember_types(packet[4:])
        label = stmt.kind or statement_kind(stmt.sql)
        stmt.kind = label
        session.stmt_kind, session.route = label, "passthrough"
        session.sql = stmt.sql
        return Forward(conn, packet[:5] + struct.pack("<I", stmt.backend_id) + packet[9:], None, False)
    if command == _QUERY:
        if len(packet) > 4096:
            return None
        sql = packet[5:].decode("utf-8", errors="surrogateescape")
        kind = plain_statement(sql)
        if kind is None:
            return None
        decrypt = None
        # an !ENCRYPT table: a SELECT rewritten here (proxy.execution.encrypted); a kept rewrite answers first
        encrypted = kept_encrypted_select(session, db, sql) if kind is SELECT else None
        if encrypted is not None or encrypted_statement(db, sql):
            if encrypted is None:
                encrypted = fast_encrypted_select(session, db, sql) if kind is SELECT else None
            if encrypted is None:
                return None
            rewritten, decrypt = encrypted
            if rewritten != sql:
                packet = _query_packet(rewritten)
        session.info = sql[:100]
        session.sql = sql
        session.stmt_kind, session.route = kind, "passthrough"
        return Forward(conn, packet, None, kind is WRITE, decrypt=decrypt)
    return None


def _encrypted_execute(session: Session, db: LogicalDatabase, conn: BackendConnection, stmt: ClientStatement,
                       packet: bytes) -> Forward | None:
    """A prepared statement on an encrypted table (proxy.execution.encrypted.PreparedEncrypted) on a pass-through
    database: executed as its rewrite's statement on the connection, the client's execute re-addressed (or, when a
    parameter is encrypted, made anew with the parameters mapped and encrypted: `mapped_execute`), a SELECT's binary
    rows decrypted as they pass, a write's connection kept for what the client asks next (LAST_INSERT_ID() ...);
    None (the session's coroutine) for a cursor, long data, a rewrite that no longer holds, a connection that does
    not hold the rewrite prepared, parameters it cannot read or encrypt."""
    kept = stmt.encrypted
    if len(packet) < 10 or packet[9] != 0 or stmt.long_data or not fast_encrypted_execute(session, db, kept):
        return None
    prepared = conn.statements.get(kept.sql)
    if prepared is None:
        return None
    backend_id = prepared.ok.statement_id
    if kept.params is None:
        stmt.remember_types(packet[4:])
        types = stmt.types or ()
        layout = stmt.layout  # (its type block, written in once for the executes that bind no types)
        if types and (layout is None or layout.types is not types):
            layout = stmt.layout = execute_layout(types)
        framed = retarget_execute(packet, backend_id, stmt.num_params, types, layout)
    else:
        try:
            values, types = execute_params(packet, stmt.num_params, stmt.types, None)
            payload = mapped_execute(kept, backend_id, values, types)
        except Exception:  # a malformed execute, a value an encryptor refuses: the coroutine answers it
            return None
        stmt.types = types
        framed = encode_packet(payload, 0)[0] if len(payload) < _MAX_FRAME else None
    if framed is None:
        return None
    session.info = stmt.sql[:100]
    session.sql = stmt.sql
    if kept.select:
        session.stmt_kind, session.route = SELECT, "passthrough"
        return Forward(conn, framed, None, False, decrypt=kept.decrypt, binary=True)
    label = stmt.kind or statement_kind(stmt.sql)
    stmt.kind = label
    session.stmt_kind, session.route = label, "passthrough"
    return Forward(conn, framed, None, True)


def _sharded(session: Session, db: LogicalDatabase, packet: bytes
             ) -> Forward | MultiForward | EndForward | Answered | None:
    if session.server.sql_show or db.kernel is None or session.txn.text_mode or session.txn.table_locks \
            or db.rules.mask is not None or db.rules.shadow is not None:
        return None  # (a sql_mode that reads text or values otherwise, table locks, !MASK or !SHADOW: the coroutine)
    command = packet[4]
    params: Sequence[object] | None = None
    retarget: Callable[[int], bytes | None] | None = None  # the client's execute, for a backend statement id
    logical: str | None = None  # an encrypted SELECT: the client's text (`sql` is its rewrite)
    decrypt: tuple[Any, ...] | None = None
    binary = False  # `decrypt`: binary rows (an executed prepared statement)
    if command == _STMT_EXECUTE:
        if len(packet) < 10 or packet[9] != 0:  # a cursor: the slow path materializes it
            return None
        stmt = session.statements.get(struct.unpack_from("<I", packet, 5)[0])
        if stmt is None or stmt.backend is not None or stmt.long_data or stmt.cursor_rows is not None \
                or stmt.database is not db:  # (prepared before a USE: it runs in its own database)
            return None
        rewrite = stmt.encrypted  # a SELECT on an !ENCRYPT table: its rewrite runs (proxy.execution.encrypted)
        if stmt.fast is None:  # worked out at the first execute
            stmt.fast = (not stmt.metadata_statement and not stmt.session_functions
                         and len(stmt.sql) < OFF_LOOP_TEXT and plain_statement(stmt.sql) is SELECT
                         and (plain_statement(rewrite.sql) is SELECT and not reads_diagnostics(rewrite.sql)
                              if rewrite is not None else not encrypted_statement(db, stmt.sql)))
        if not stmt.fast:
            # a prepared BEGIN or COMMIT (sysbench --db-ps-mode=auto prepares them) is the text one's
            # (prepared._execute_sharded)
            return local_transaction(session, db, stmt.sql, command) \
                if 5 <= len(stmt.sql) <= 8 and not stmt.num_params else None
        if rewrite is not None:
            if not fast_encrypted_execute(session, db, rewrite):  # (another rule or sql_mode since: the coroutine's)
                return None
            logical, decrypt, binary = stmt.sql, rewrite.decrypt, True
        layout = stmt.layout  # the values of integer parameters read at known offsets
        values = layout.values(packet) if layout is not None and layout.types is stmt.types else None
        if values is None:
            try:  # protocol.retarget reads the other common executes without the full decoder
                values, stmt.types = execute_params(packet, stmt.num_params, stmt.types, stmt.long_data)
            except MalformedPacket:
                return None
            if layout is not None and layout.types == stmt.types:
                stmt.types = layout.types  # a client that binds its types at every execute binds the same ones
            else:
                layout = stmt.layout = execute_layout(stmt.types)
        num_params, types, kept = stmt.num_params, stmt.types or (), layout
        if rewrite is not None and rewrite.params is not None:  # parameters bound to encrypted columns
            try:
                values, bound, block = physical_binding(rewrite, values, types)
            except Exception:  # a value an encryptor refuses: the coroutine answers it
                return None
            retarget = partial(_mapped_execute, values, bound, block)
        else:

            def retarget(statement_id: int) -> bytes | None:  # the client's parameter bytes, re-addressed
                return retarget_execute(packet, statement_id, num_params, types, kept)

        sql = stmt.sql if rewrite is None else rewrite.sql
        params = values
        kernel = db.kernel
        known = stmt.point
        if known is None or known[0] != kernel.generation:
            found = prepared_point(kernel, sql)
            known = stmt.point = None if found is None else (kernel.generation, *found)
        if known is None:  # not compiled yet
            point = route_point(kernel, sql, params)
        elif known[1] is None:  # compiled, not to a point plan: the kernel routes it
            point = None
        else:  # the statement's point plan, kept with it
            plan, shape = known[1], known[2]
            assert shape is not None
            node = plan.single(shape, values)
            point = None if node is None else (plan.kind, *node)
    elif command == _QUERY:
        if len(packet) > 4096:
            return None
        sql = packet[5:].decode("utf-8", errors="surrogateescape")
        if db.config.encrypt is not None:  # an !ENCRYPT table: a SELECT rewritten here (proxy.execution.encrypted)
            # (a kept rewrite answers first, one dict lookup; its rewritten text is checked below)
            encrypted = kept_encrypted_select(session, db, sql)
            if encrypted is None and encrypted_statement(db, sql):
                if plain_statement(sql) is not SELECT or reads_diagnostics(sql):
                    return None
                encrypted = fast_encrypted_select(session, db, sql)
                if encrypted is None:
                    return None
            if encrypted is not None:
                logical = sql
                sql, decrypt = encrypted
                if sql != logical:
                    packet = _query_packet(sql)
        text_kind = plain_statement(sql)
        if text_kind is TRANSACTION:
            return local_transaction(session, db, sql, command)
        if text_kind is not SELECT or reads_diagnostics(sql):  # (SELECT @@warning_count: proxy.execution.diagnostics)
            return None
        kernel = db.kernel
        point = route_point(kernel, sql, params)  # a cached routing.point plan, no RoutedStatement built
    else:
        return None
    if point is not None:
        kind, ds, unit_sql = point
        if kind is not _SELECT:
            return None
        unit: ExecutionUnit | None = None  # its parameters are the statement's
        renamer = _lazy_renamer(db, sql, params)
        tables = True
    else:
        try:  # (a plain SELECT: no hints, no FOUND_ROWS(); federation is the coroutine's, see preroute)
            plan = decide(kernel, sql, params, NO_FEDERATION)
        except Exception:  # a bug must not cost the connection: the slow path decides again
            return None
        fast = session.wire.fast
        if logical is not None:  # (the coroutine decides the client's text, not this rewrite)
            if not isinstance(plan, Run) or len(plan.routed.execution_units) > 1:
                return None
        elif isinstance(fast, FastPath):  # if this path declines, the session's coroutine takes this plan
            fast.declined = declined(kernel, sql, params, NO_FEDERATION, plan)
        if not isinstance(plan, Run):  # a refusal, federation ...: the session's coroutine carries it out
            return None
        routed = plan.routed
        units = routed.execution_units
        if len(units) > 1:  # answered here too when proxy.execution.multipath takes it
            multi = multi_forward(session, db, routed, sql, params, retarget)
            if multi is not None:
                session.info = sql[:100]
                session.sql = sql
                session.stmt_kind = SELECT
                if routed.logic_tables:
                    ran_on(session, [u.data_source for u in units])
            return multi
        if plan.strategy is not _RELAY or routed.kind is not _SELECT:  # INTO @v: every connection; a dual
            return None  # read runs several steps (proxy.execution.dualread)
        unit = units[0]
        ds, unit_sql = unit.data_source, unit.sql
        renamer = error_renamer(db, routed)
        tables = bool(routed.logic_tables)
    forward = _forward_single(session, db, packet, sql, params, retarget, ds, unit_sql, unit, renamer,
                              logical or sql, decrypt, binary)
    if forward is not None and tables:
        ran_on(session, (ds,))  # a statement with tables replaces the session's diagnostics
    return forward


def _forward_single(session: Session, db: LogicalDatabase, packet: bytes, sql: str, params: Sequence[object] | None,
                    retarget: Callable[[int], bytes | None] | None, ds: str, unit_sql: str, unit: ExecutionUnit | None,
                    renamer: Callable[[bytes], bytes], shown: str, decrypt: tuple[Any, ...] | None = None,
                    binary: bool = False) -> Forward | None:
    """`_sharded`'s last step, a statement routed to one node: the command for that node's connection (the client's
    packet as it came, its execute re-addressed, or the unit's own text or execute), behind a BEGIN when the
    node must join the open transaction; None when the connection cannot take it now (the slow path will).
    `shown`: the client's text (`sql`, or the text an encrypted SELECT's rewrite `sql` came from, whose answer's
    columns `decrypt` decrypts; `binary`: in binary rows)."""
    if not db.sources[ds].fast_relay:
        return None
    txn = session.txn
    join = b""
    if txn.active and ds not in txn.joined:
        join = join_frame(session, ds)  # BEGIN and the statement in one write
        if not join:
            return None
    conn = session.backends.get(ds)
    if conn is None or conn.broken or conn.busy or conn.tap is None:
        return None
    framed: bytes | None = None
    if params is None:
        if unit is not None and unit.params:
            return None
        if unit_sql == sql:  # the actual table is named as the logic one: the client's packet as it came
            framed = packet
        data = b"" if framed is not None else \
            b"\x03" + unit_sql.encode("utf-8", errors="surrogateescape")  # COM_QUERY (codec.query_payload)
    else:
        prepared = conn.statements.get(unit_sql)
        if prepared is None:
            return None
        if retarget is not None and (unit is None or unit.params == params):
            framed = retarget(prepared.ok.statement_id)
        data = b"" if framed is not None else \
            execute_payload(prepared.ok.statement_id, unit or ExecutionUnit(ds, unit_sql, tuple(params)))
    session.info = shown[:100]
    session.sql = shown
    session.stmt_kind, session.route = SELECT, "single"
    session.found_rows_value, session.found_rows_source = None, ds  # FOUND_ROWS(): that node's
    command_frame = framed or encode_packet(data, 0)[0]
    return Forward(conn, join + command_frame if join else command_frame, renamer, False, bool(join),
                   relayed_columns(db), decrypt, binary)


def _mapped_execute(values: tuple[object, ...], types: tuple[ParamType, ...], block: bytes,
                    statement_id: int) -> bytes | None:
    """The framed execute of a sharded encrypted SELECT's rewrite (proxy.execution.encrypted.physical_binding: its
    parameters mapped and encrypted, bound with the types the session's coroutine binds them with)."""
    payload = encode_execute(statement_id, values, types, block)
    return encode_packet(payload, 0)[0] if len(payload) < _MAX_FRAME else None


def _query_packet(sql: str) -> bytes:
    """A COM_QUERY of `sql` framed with sequence id 0 (`encode_packet`'s, for a text the fast path takes whole)."""
    payload = b"\x03" + sql.encode("utf-8", errors="surrogateescape")
    return len(payload).to_bytes(3, "little") + b"\x00" + payload


def _lazy_renamer(db: LogicalDatabase, sql: str, params: Sequence[object] | None) -> Callable[[bytes], bytes]:
    """`error_renamer` of the statement's route, routed again only if an ERR comes (the kernel is pure)."""

    def rename(payload: bytes) -> bytes:
        assert db.kernel is not None
        plan = decide(db.kernel, sql, params, NO_FEDERATION)
        return error_renamer(db, plan.routed)(payload) if isinstance(plan, Run) else payload

    return rename


__all__ = ["ANSWERED", "STATS", "Answered", "ClientProtocol", "EndForward", "FastPath", "FastPathStats", "Forward",
           "fast_forward", "plain_statement", "statement_kind"]
