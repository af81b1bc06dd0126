"""Backend data sources: aiomysql pools for connecting and pooling, raw frames for commands.

aiomysql opens, authenticates and pools the connections; the proxy then speaks the protocol itself over
the connection's stream (`protocol.results`), because the relay path must move frames without decoding
rows and aiomysql's cursor API decodes every row into Python objects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiomysql
import pymysql
import structlog

from protocol import text
from protocol.binary import ComStmtClose, ComStmtPrepare, PrepareResponse, StmtPrepareOK
from protocol.constants import Capability
from protocol.errors import ServerError
from protocol.framing import encode_packet
from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket, OKPacket
from protocol.results import ResultEnd, ResultHeader, ResultParser, ResultSummary
from protocol.verbatim import relay_for
from proxy.backends.pool import ConnectionPool, Holder, Lease, PoolClosed, PoolTimeout
from proxy.backends.tap import install_tap
from proxy.config.model import DataSourceConfig

log = structlog.get_logger("shardproxy.backend")

READ_CHUNK = 1 << 18


CLIENT_BUFFER_LIMIT = 1 << 18  # bytes queued for a client before the relay waits for it to read
MAX_STATEMENTS_PER_CONNECTION = 256
ADMIN_TIMEOUT = 5.0  # seconds for the admin connection's connect and each of its statements (KILL QUERY ...)
POOL_TIMEOUT_ERRNO = 1040  # ER_CON_COUNT_ERROR: no backend connection could be had in time


class BackendError(ServerError):
    """A backend failed in a way the client must hear about (unreachable, connection lost): 2013 unless told.

    Its text is "data source X: ..." (clients and tests read it). `message` is that text, kept one with
    str(exc): proxy.execution.atomic adds what became of the statement to `args` after the fact."""

    errno = 2013  # CR_SERVER_LOST
    sqlstate = "HY000"

    def __init__(self, data_source: str, message: str, *, errno: int = 2013, sqlstate: str = "HY000") -> None:
        self.data_source = data_source
        super().__init__(f"data source {data_source}: {message}", errno=errno, sqlstate=sqlstate)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    @message.setter
    def message(self, value: str) -> None:
        self.args = (value,)

    def to_err(self) -> ERRPacket:
        return ERRPacket(self.errno, str(self), self.sqlstate)


CLEAN_STATE: tuple[str, bool, tuple[str, ...]] = ("utf8mb4", True, ())


# A backend connection speaks to us with the classic EOF framing: PyMySQL never asks for DEPRECATE_EOF.
BACKEND_DEPRECATE_EOF = False
# LOCAL_FILES: a client's LOAD DATA LOCAL INFILE is relayed (the proxy never reads a file of its own: the file
# request goes to the client, which refuses what it did not ask for)
_BASE_FLAGS = (Capability.MULTI_STATEMENTS | Capability.MULTI_RESULTS | Capability.PS_MULTI_RESULTS
               | Capability.LOCAL_FILES)


class BackendConnection:
    """One borrowed backend connection; commands go over its raw stream."""

    def __init__(self, source: DataSource, raw: aiomysql.Connection, found_rows: bool) -> None:
        self.source = source
        self.raw = raw
        self.found_rows = found_rows
        self.broken = False
        self.status = 2  # SERVER_STATUS_AUTOCOMMIT: the pools open connections in autocommit mode
        self.charset: str = "utf8mb4"
        # COM_SET_OPTION outlives COM_RESET_CONNECTION: remember it so the pool can undo it
        self.multi_statements = True
        self.busy = False  # a command is on the wire and its answer not fully read
        self.relayed = False  # part of the current command's answer was written to the client
        self.relayed_rows = 0  # rows of the last answer `relay` copied to the client (query digests)
        # when the last command was sent and its answer last read (the slow-query log's time per data source)
        self.sent_at = 0.0
        self.read_at = 0.0
        # statements prepared on this connection, by SQL text (COM_RESET_CONNECTION forgets them all)
        self.statements: dict[str, PrepareResponse] = {}
        # session SET statements applied on this connection (part of its state, with charset and
        # multi_statements): a borrower whose state differs resets and re-applies
        self.session_sets: tuple[str, ...] = ()
        # the last statement left per-connection results a client may ask for next (LAST_INSERT_ID(),
        # ROW_COUNT(), FOUND_ROWS()): the connection is not lent to another session until the next command
        self.keep_for_next = False
        # the xid of the XA branch this connection has started and not yet committed or rolled back
        # (proxy.execution.txn): such a connection is never reset or pooled, only closed (MariaDB leaves a connection
        # reset with a branch open in a state that fails later statements)
        self.xa: str | None = None
        # answers to fast-path commands are read by this, in the socket's callback (proxy.execution.fastpath)
        self.tap = install_tap(raw._writer.transport if raw._writer is not None else None, self)
        # where the pool (proxy.backends.pool) has it, and who owns it: changed by the pool only
        self.lease = Lease.LENT
        self.owner: object | None = None
        self.created_at = time.monotonic()
        self.idle_since = self.created_at
        # the server's limit on packets it reads on this connection: max_allowed_packet when it was opened (a
        # COM_RESET_CONNECTION changes the variable, not the limit); None until a session read it
        self.packet_limit: int | None = None

    def __repr__(self) -> str:
        return f"<BackendConnection {self.name} thread {self.raw.server_thread_id[0]} {self.lease.value}>"

    def close(self) -> None:
        """Close the socket now (the pool calls this for a connection it will not reuse)."""
        self.broken = True
        self.raw.close()

    async def reset_state(self) -> None:
        """COM_RESET_CONNECTION: rolls back, drops temporary tables and user variables, resets SET state;
        then the pool's defaults again (multi-statements on, utf8mb4). Marks the connection broken when
        the server refuses."""
        self.statements.clear()
        answer = await self.simple_command(b"\x1f")
        if answer[-1][:1] == b"\xff":
            self.broken = True
            return
        if not self.multi_statements:  # the next borrower may want 'a; b' (the pool opened it with the flag)
            answer = await self.simple_command(b"\x1b\x00\x00")
            if answer[-1][:1] == b"\xff":
                self.broken = True
                return
        if self.charset != "utf8mb4":
            await self.execute("SET NAMES utf8mb4")
            self.charset = "utf8mb4"
        self.session_sets = ()
        self.status = 2
        self.raw.server_status = 2
        self.keep_for_next = False

    @property
    def state(self) -> tuple[str, bool, tuple[str, ...]]:
        return (self.charset, self.multi_statements, self.session_sets)

    @property
    def clean(self) -> bool:
        return self.state == CLEAN_STATE

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def thread_id(self) -> int:
        return int(self.raw.server_thread_id[0])

    def _send(self, payload: bytes) -> None:
        writer = self.raw._writer
        if writer is None:
            self.broken = True
            raise BackendError(self.name, "connection is closed")
        if len(payload) < 0xFFFFFF:
            n = len(payload)
            writer.transport.write(bytes((n & 0xFF, (n >> 8) & 0xFF, n >> 16, 0)) + payload)
        else:
            writer.write(encode_packet(payload, 0)[0])
        self.busy = True
        self.relayed = False
        self.sent_at = time.monotonic()

    async def _read(self) -> bytes:
        reader = self.raw._reader
        try:
            data = await reader.read(READ_CHUNK)
        except (ConnectionError, OSError) as exc:
            self.broken = True
            raise BackendError(self.name, f"lost connection to MySQL server during query ({exc})") from exc
        if not data:
            self.broken = True
            raise BackendError(self.name, "lost connection to MySQL server during query")
        self.read_at = time.monotonic()
        return data

    async def relay(
        self, payload: bytes, client: asyncio.StreamWriter, *, first_seq: int, client_deprecate_eof: bool,
        rows_only: bool = False, more_results: bool = False,
        error_rewriter: Callable[[bytes], bytes] | None = None, column_rewriter: Callable[[bytes], bytes] | None = None,
        row_rewriter: Callable[[bytes], bytes] | None = None, send: bool = True,
    ) -> ResultSummary:
        """Send a command and copy its response to the client as it arrives (with backpressure). `send=False`: the
        rest of an answer, after the client's file of a LOAD DATA LOCAL INFILE (`send_frame`)."""
        relay = relay_for(
            backend_deprecate_eof=BACKEND_DEPRECATE_EOF, client_deprecate_eof=client_deprecate_eof,
            first_seq=first_seq, rows_only=rows_only, more_results=more_results, error_rewriter=error_rewriter,
            cursor=payload[:1] == b"\x17" and len(payload) > 5 and payload[5] != 0,  # COM_STMT_EXECUTE, cursor flags
            column_rewriter=column_rewriter, row_rewriter=row_rewriter,
        )
        if send:
            self._send(payload)
        transport = client.transport
        try:
            while not relay.done:
                out = relay.feed(await self._read())
                if out:
                    self.relayed = True
                    transport.write(out)
                    if transport.get_write_buffer_size() > CLIENT_BUFFER_LIMIT:
                        await client.drain()  # the client reads slowly: stop reading the backend
        except asyncio.CancelledError:
            self.broken = True
            raise
        self.busy = False
        self.relayed_rows = relay.rows
        self.status = relay.summary.status
        self.raw.server_status = relay.summary.status
        return relay.summary

    def send_frame(self, payload: bytes, seq: int) -> None:
        """One packet of a client's file (LOAD DATA LOCAL INFILE), with the sequence id it comes with."""
        writer = self.raw._writer
        if writer is None:
            self.broken = True
            raise BackendError(self.name, "connection is closed")
        writer.write(encode_packet(payload, seq)[0])
        self.busy = True

    async def event_batches(self, payload: bytes, *, row_frames: bool = False) -> AsyncIterator[list[object]]:
        """Send a command and yield its decoded events (ResultHeader, row payloads, OK/ERR, ResultEnd), one
        list per read from the backend: consumers that relay rows await once per chunk, not per row.
        `row_frames`: rows as `protocol.rowframes.RowFrames` runs, still framed."""
        parser = ResultParser(backend_deprecate_eof=BACKEND_DEPRECATE_EOF, row_frames=row_frames)
        self._send(payload)
        try:
            while not parser.done:
                batch = list(parser.feed(await self._read()))
                for event in batch:
                    if isinstance(event, OKPacket | ResultEnd):  # a result set's end carries IN_TRANS too
                        self.status = int(event.status)
                if batch:
                    yield batch
        except BaseException:
            if not parser.done:
                self.broken = True
            raise
        self.busy = False
        self.raw.server_status = self.status

    async def events(self, payload: bytes) -> AsyncIterator[object]:
        """`event_batches`, one event at a time (for answers the proxy reads itself)."""
        async for batch in self.event_batches(payload):
            for event in batch:
                yield event

    async def simple_command(self, payload: bytes) -> list[bytes]:
        """Commands answered by packets that end at the first EOF, OK or ERR: COM_FIELD_LIST,
        COM_SET_OPTION, COM_RESET_CONNECTION, COM_PING."""
        from protocol.framing import FrameDecoder

        frames = FrameDecoder()
        out: list[bytes] = []
        if payload[:1] == b"\x1b" and len(payload) >= 3:  # COM_SET_OPTION
            self.multi_statements = payload[1:3] == b"\x00\x00"
        self._send(payload)
        try:
            while True:
                frames.feed(await self._read())
                for _f, _l, p in frames.packets():
                    out.append(p)
                    if p and (p[0] in (0x00, 0xFF) or (p[0] == 0xFE and len(p) < 9)):
                        self.busy = False
                        return out
        except BaseException:
            self.broken = True
            raise

    async def prepare(self, sql: str) -> PrepareResponse | ERRPacket:
        """COM_STMT_PREPARE: the whole answer (the backend uses the classic EOF framing)."""
        from protocol.framing import FrameDecoder

        frames = FrameDecoder()
        self._send(ComStmtPrepare(sql.encode("utf-8", errors="surrogateescape")).encode())
        payloads: list[bytes] = []
        expected: int | None = None
        try:
            while expected is None or len(payloads) < expected:
                frames.feed(await self._read())
                for _f, _l, p in frames.packets():
                    payloads.append(p)
                    if expected is None:
                        if p[:1] == b"\xff":
                            self.busy = False
                            return ERRPacket.decode(p)
                        expected = 1 + StmtPrepareOK.decode(p).following_packets(BACKEND_DEPRECATE_EOF)
        except BaseException:
            self.broken = True
            raise
        self.busy = False
        return PrepareResponse.decode(payloads, BACKEND_DEPRECATE_EOF)

    async def prepared(self, sql: str) -> PrepareResponse | ERRPacket:
        """The statement prepared on this connection, preparing it on first use (bounded cache)."""
        known = self.statements.get(sql)
        if known is not None:
            return known
        answer = await self.prepare(sql)
        if isinstance(answer, PrepareResponse):
            if len(self.statements) >= MAX_STATEMENTS_PER_CONNECTION:
                old_sql = next(iter(self.statements))
                old = self.statements.pop(old_sql)
                self.send_only(ComStmtClose(old.ok.statement_id).encode())
            self.statements[sql] = answer
        return answer

    def send_only(self, payload: bytes) -> None:
        """Commands the server does not answer (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA)."""
        self._send(payload)
        self.busy = False

    async def pipeline(self, statements: list[str]) -> list[OKPacket | ERRPacket]:
        """Send several statements answered by one OK or ERR each (XA START/END/PREPARE/COMMIT, SET) without
        waiting in between, then read the answers: one round trip. A statement after a failed one still
        runs (the server reads them in order); the caller sees every answer."""
        self.send_pipeline(statements)
        return await self.read_pipeline(statements)

    def send_pipeline(self, statements: list[str]) -> None:
        """The sending half of `pipeline` (the answers are read by `read_pipeline`; until then the
        connection is busy: given back unread, it is closed)."""
        writer = self.raw._writer
        if writer is None:
            self.broken = True
            raise BackendError(self.name, "connection is closed")
        writer.transport.write(b"".join(encode_packet(ComQuery(text.encode(sql)).encode(), 0)[0]
                                        for sql in statements))
        self.busy = True
        self.relayed = False
        self.sent_at = time.monotonic()

    async def read_pipeline(self, statements: list[str]) -> list[OKPacket | ERRPacket]:
        from protocol.framing import FrameDecoder

        frames = FrameDecoder()
        answers: list[OKPacket | ERRPacket] = []
        try:
            while len(answers) < len(statements):
                frames.feed(await self._read())
                for _f, _l, p in frames.packets():
                    answers.append(self.statement_answer(p, statements[len(answers)]))
        except BaseException:
            self.broken = True
            raise
        self.busy = False
        self.raw.server_status = self.status
        return answers

    async def run_after(self, prefix: list[str], payload: bytes) -> tuple[list[OKPacket | ERRPacket], list[object]]:
        """`prefix` (statements answered by one OK or ERR each: BEGIN, SAVEPOINT) and then one command, sent in one
        write: one round trip. Their answers, and every event of the command's answer (read whole: meant for writes,
        whose answer is an OK or an ERR). A statement after a failed one still runs (the server reads them in
        order): the caller decides what a failed prefix means."""
        writer = self.raw._writer
        if writer is None:
            self.broken = True
            raise BackendError(self.name, "connection is closed")
        writer.transport.write(b"".join(encode_packet(ComQuery(text.encode(sql)).encode(), 0)[0] for sql in prefix)
                               + encode_packet(payload, 0)[0])
        self.busy = True
        self.relayed = False
        self.sent_at = time.monotonic()
        from protocol.framing import FrameDecoder

        frames = FrameDecoder()
        answers: list[OKPacket | ERRPacket] = []
        events: list[object] = []
        parser = ResultParser(backend_deprecate_eof=BACKEND_DEPRECATE_EOF)
        try:
            while len(answers) < len(prefix):
                frames.feed(await self._read())
                while len(answers) < len(prefix) and (p := frames.next_payload()) is not None:
                    answers.append(self.statement_answer(p, prefix[len(answers)]))
            rest = frames.take_buffered()
            if rest:
                events.extend(parser.feed(rest))
            while not parser.done:
                events.extend(parser.feed(await self._read()))
        except BaseException:
            self.broken = True
            raise
        for event in events:
            if isinstance(event, OKPacket | ResultEnd):
                self.status = int(event.status)
        self.busy = False
        self.raw.server_status = self.status
        return answers, events

    def statement_answer(self, payload: bytes, sql: str) -> OKPacket | ERRPacket:
        """One answer of `read_pipeline` (also proxy.execution.fastcommit's, read in the socket's callback): an ERR,
        or an OK whose status becomes the connection's; BackendError for anything else."""
        if payload[:1] == b"\xff":
            return ERRPacket.decode(payload)
        if payload[:1] == b"\x00":
            ok = OKPacket.decode(payload)
            self.status = int(ok.status)
            return ok
        raise BackendError(self.name, f"unexpected answer to {sql!r}")

    async def execute(self, sql: str) -> OKPacket | ERRPacket | list[tuple[bytes | None, ...]]:
        """Run one statement to completion; rows come back as raw text values."""
        from protocol.packets import decode_text_row

        rows: list[tuple[bytes | None, ...]] = []
        result: OKPacket | ERRPacket | None = None
        ncols = 0
        async for ev in self.events(ComQuery(text.encode(sql)).encode()):
            if isinstance(ev, ResultHeader):
                ncols = len(ev.columns)
            elif isinstance(ev, bytes):
                rows.append(decode_text_row(ev, ncols))
            elif isinstance(ev, OKPacket | ERRPacket):
                result = ev
        if isinstance(result, ERRPacket):
            return result
        return rows if ncols else (result or OKPacket())

    async def answer(
        self, sql: str
    ) -> tuple[tuple[ColumnDefinition41, ...], list[tuple[bytes | None, ...]]] | ERRPacket:
        """Run one statement to completion: its column definitions (none for an OK) and text rows, or its ERR."""
        from protocol.packets import decode_text_row

        columns: tuple[ColumnDefinition41, ...] = ()
        rows: list[tuple[bytes | None, ...]] = []
        error: ERRPacket | None = None
        async for ev in self.events(ComQuery(text.encode(sql)).encode()):
            if isinstance(ev, ResultHeader):
                columns = ev.columns
            elif isinstance(ev, bytes):
                rows.append(decode_text_row(ev, len(columns)))
            elif isinstance(ev, ERRPacket):
                error = ev
        return error if error is not None else (columns, rows)


# the character sets the admin connection speaks (aiomysql's handshake) and goes back to after `admin_answer`
_ADMIN_NAMES = "utf8mb4"


class DataSource:
    """One configured data source: its connection pool (proxy.backends.pool, the single owner of its connections)
    and an admin connection outside the pool for KILL QUERY and metadata."""

    fast_relay = True  # pass-through commands may be relayed by proxy.execution.fastpath (not a read/write group)

    def __init__(self, config: DataSourceConfig) -> None:
        self.config = config
        self.name = config.name
        self.pool: ConnectionPool[BackendConnection] = ConnectionPool(
            config.name, self._open, max_size=max(1, config.max_pool_size),
            acquire_timeout=config.connect_timeout if config.connect_timeout > 0 else 30.0,
            idle_timeout=max(0.0, config.idle_timeout), max_lifetime=max(0.0, config.max_lifetime),
        )
        self._admin: BackendConnection | None = None
        self._admin_lock = asyncio.Lock()
        self.ssl = config.ssl_context()  # TLS toward the server when the URL asks for it (useSSL / sslMode)

    async def _open(self, found_rows: bool) -> BackendConnection:
        c = self.config
        flags = int(_BASE_FLAGS | (Capability.FOUND_ROWS if found_rows else 0))
        try:
            raw = await asyncio.wait_for(
                aiomysql.connect(
                    host=c.host, port=c.port, user=c.username, password=c.password, db=c.database,
                    charset="utf8mb4", autocommit=True, client_flag=flags, connect_timeout=c.connect_timeout,
                    ssl=self.ssl,
                ),
                timeout=c.connect_timeout if c.connect_timeout > 0 else None,  # the handshake too
            )
        except pymysql.err.OperationalError as exc:
            errno, msg = (*exc.args, "")[:2]
            raise BackendError(self.name, f"cannot connect to {c.describe()}: {msg}", errno=int(errno or 2003)) from exc
        except TimeoutError as exc:  # the TCP connection opened, or hung, and no handshake came in time
            raise BackendError(
                self.name,
                f"cannot connect to {c.describe()}: no handshake within {c.connect_timeout * 1000:.0f} ms "
                "(connectionTimeoutMilliseconds): is this a MySQL or MariaDB server, and is it answering?",
                errno=2013,
            ) from exc
        except OSError as exc:
            raise BackendError(self.name, f"cannot connect to {c.describe()}: {exc}", errno=2003) from exc
        return BackendConnection(self, raw, found_rows)

    async def start(self) -> None:
        """Open minPoolSize connections (at least one: an unreachable data source stops the start)."""
        want = min(max(1, self.config.min_pool_size), self.pool.max_size)
        conns = [await self._open(False) for _ in range(want)]
        self.pool.prefill(conns)

    @property
    def waiters(self) -> int:
        return self.pool.waiting

    async def acquire(self, owner: object, *, found_rows: bool = False, holder: Holder | None = None
                      ) -> BackendConnection:
        """A connection owned by `owner` (HELD through `holder`, which may give it up between its
        commands; else LENT), waiting at most connectionTimeoutMilliseconds."""
        try:
            conn = await self.pool.acquire(owner, found_rows=found_rows, holder=holder)
        except PoolTimeout as exc:
            raise BackendError(self.name, exc.message, errno=POOL_TIMEOUT_ERRNO, sqlstate="HY000") from exc
        except PoolClosed as exc:
            raise BackendError(self.name, "the proxy is shutting down", errno=1053, sqlstate="08S01") from exc
        assert conn is not None
        conn.keep_for_next = False
        return conn

    async def try_acquire(self, owner: object, *, found_rows: bool = False, holder: Holder | None = None
                          ) -> BackendConnection | None:
        """Like `acquire`, but None instead of waiting when nothing is free now."""
        try:
            conn = await self.pool.acquire(owner, found_rows=found_rows, holder=holder, wait=False)
        except PoolClosed as exc:
            raise BackendError(self.name, "the proxy is shutting down", errno=1053, sqlstate="08S01") from exc
        if conn is not None:
            conn.keep_for_next = False
        return conn

    def release(self, conn: BackendConnection, *, owner: object, reset: bool = True) -> None:
        """`owner` gives a connection back, synchronously. With `reset`, the pool clears its session state
        before anyone else gets it; without, it keeps its state (recorded in `conn.state`) and the next
        borrower resets it only if its own state differs. A connection in a transaction, or whose state is
        unknown, is never passed on as it is."""
        if conn.xa is not None:  # an XA branch may still be open on it: closing ends it, a reset would not
            conn.broken = True
        if not reset and (conn.status & 1 or not conn.status & 2):  # IN_TRANS, or autocommit off
            reset = True
        self.pool.release(conn, owner=owner, reset=reset)

    async def reset(self, conn: BackendConnection) -> None:
        """Clear a borrowed connection's session state (before applying another session's)."""
        await conn.reset_state()
        if conn.broken:
            raise BackendError(self.name, "could not reset a pooled connection")

    async def admin_execute(self, sql: str) -> OKPacket | ERRPacket | list[tuple[bytes | None, ...]] | None:
        """Run a statement over the data source's own admin connection, outside the pool: KILL QUERY and
        metadata reloads must work even when every pooled connection is taken (possibly by the very
        session that needs them). None when the data source cannot be reached."""
        return await self._on_admin(lambda admin: admin.execute(sql))

    async def admin_answer(
        self, sql: str, names: str = _ADMIN_NAMES
    ) -> tuple[tuple[ColumnDefinition41, ...], list[tuple[bytes | None, ...]]] | ERRPacket | None:
        """`sql`'s column definitions and text rows (or its ERR) over the admin connection, in the character sets
        `SET NAMES <names>` gives (a session's: proxy.backends.charset), set for this statement only: what the proxy
        reads of the server for a session's answer without waiting for a pooled connection (SHOW PROCESSLIST must
        answer when every one is taken). None when the data source cannot be reached."""

        async def run(admin: BackendConnection) -> Any:
            if names != _ADMIN_NAMES:
                changed = await admin.execute(f"SET NAMES {names}")
                if isinstance(changed, ERRPacket):
                    return changed
            try:
                return await admin.answer(sql)
            finally:
                if names != _ADMIN_NAMES:
                    back = await admin.execute(f"SET NAMES {_ADMIN_NAMES}")
                    if isinstance(back, ERRPacket):
                        admin.broken = True  # (reopened, in utf8mb4, at the next use)

        return await self._on_admin(run)

    async def _on_admin(self, work: Callable[[BackendConnection], Awaitable[Any]]) -> Any:
        """`work` on the admin connection (opened, or opened again once when it broke), one at a time; None when the
        data source cannot be reached."""
        async with self._admin_lock:
            for _attempt in (1, 2):
                admin = self._admin
                if admin is None or admin.broken:
                    c = self.config
                    wait = min(c.connect_timeout, ADMIN_TIMEOUT)
                    try:
                        raw = await asyncio.wait_for(aiomysql.connect(
                            host=c.host, port=c.port, user=c.username, password=c.password, db=c.database,
                            autocommit=True, connect_timeout=wait, charset="utf8mb4", ssl=self.ssl),
                            timeout=wait + 1)
                    except (pymysql.err.OperationalError, OSError, TimeoutError) as exc:
                        log.warning("admin_connection_failed", data_source=self.name, error=str(exc))
                        return None
                    admin = self._admin = BackendConnection(self, raw, False)
                try:
                    return await asyncio.wait_for(work(admin), timeout=ADMIN_TIMEOUT)
                except (BackendError, TimeoutError):
                    admin.broken = True
                    admin.raw.close()
        return None

    async def kill_query(self, thread_id: int) -> None:
        """KILL QUERY over the admin connection (a full pool cannot block it)."""
        await self.admin_execute(f"KILL QUERY {int(thread_id)}")

    async def close(self) -> None:
        if self._admin is not None:
            self._admin.raw.close()
            self._admin = None
        await self.pool.close()

    def stats(self) -> dict[str, int]:
        st = self.pool.stats()
        return {"size": st.size, "free": st.idle, "used": st.size - st.idle, "waiting": st.waiting}


