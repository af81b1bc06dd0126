"""Backend data sources: aiomysql pools for connecting and pooling, raw frames for commands.

aiomysql opens, authenticates and pools the connections; the proxy then speaks the protocol itself over
the connection's stream (`protocol.results`), because the relay path must move frames without decoding
rows and aiomysql's cursor API decodes every row into Python objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import aiomysql
import pymysql
import structlog

from protocol.binary import ComStmtClose, ComStmtPrepare, PrepareResponse, StmtPrepareOK
from protocol.constants import Capability, Collation
from protocol.framing import encode_packet
from protocol.packets import ComQuery, ERRPacket, OKPacket
from protocol.results import ResultEnd, ResultHeader, ResultParser, ResultSummary
from protocol.verbatim import relay_for
from proxy.config import DataSourceConfig

if TYPE_CHECKING:
    from proxy.fastpath import FastPath

log = structlog.get_logger("shardproxy.backend")

READ_CHUNK = 1 << 18
CLIENT_BUFFER_LIMIT = 1 << 18  # bytes queued for a client before the relay waits for it to read
MAX_STATEMENTS_PER_CONNECTION = 256


class BackendError(Exception):
    """A backend failed in a way the client must hear about (unreachable, connection lost)."""

    def __init__(self, data_source: str, message: str, *, errno: int = 2013, sqlstate: str = "HY000") -> None:
        super().__init__(f"data source {data_source}: {message}")
        self.data_source = data_source
        self.errno = errno
        self.sqlstate = sqlstate

    def to_err(self) -> ERRPacket:
        return ERRPacket(self.errno, str(self), self.sqlstate)


CLEAN_STATE: tuple[str, bool, tuple[str, ...]] = ("utf8mb4", True, ())


class Holder(Protocol):
    """A session holding a connection between its commands; it may give an idle one back for another."""

    def give_up(self, conn: BackendConnection) -> bool: ...


# A backend connection speaks to us with the classic EOF framing: PyMySQL never asks for DEPRECATE_EOF.
BACKEND_DEPRECATE_EOF = False
_BASE_FLAGS = Capability.MULTI_STATEMENTS | Capability.MULTI_RESULTS | Capability.PS_MULTI_RESULTS


class BackendTap(asyncio.Protocol):
    """Sits in front of a backend socket's own protocol (aiomysql's StreamReaderProtocol): while a
    proxy.fastpath command is answered the bytes go to the fast path, otherwise everything goes through
    unchanged."""

    __slots__ = ("conn", "inner", "relay", "transport")

    def __init__(self, inner: Any, conn: BackendConnection, transport: Any) -> None:
        self.inner = inner
        self.transport = transport
        self.conn = conn  # marked broken when its socket closes
        self.relay: FastPath | None = None  # the session's fast path while it relays an answer from here

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # pragma: no cover - installed later
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        relay = self.relay
        if relay is not None:
            relay.backend_data(data)
        else:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        self._lost()
        result: bool | None = self.inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()
        self.inner.connection_lost(exc)

    def _lost(self) -> None:
        # killed, timed out or restarted between commands: the session's next command borrows another
        # connection instead of failing on this one
        self.conn.broken = True
        relay = self.relay
        if relay is not None:
            relay.backend_lost()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def install_tap(transport: asyncio.BaseTransport | None, conn: BackendConnection) -> BackendTap | None:
    """Put a BackendTap in front of a backend connection's protocol (None when the transport cannot)."""
    if transport is None or not hasattr(transport, "set_protocol"):
        return None
    inner = transport.get_protocol()
    if isinstance(inner, BackendTap):
        inner.conn, inner.transport = conn, transport
        return inner
    tap = BackendTap(inner, conn, transport)
    transport.set_protocol(tap)
    return tap


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
        # statements prepared on this connection, by SQL text (COM_RESET_CONNECTION forgets them all)
        self.statements: dict[str, PrepareResponse] = {}
        # session SET statements applied on this connection (part of its state, with charset and
        # multi_statements): a borrower whose state differs resets and re-applies
        self.session_sets: tuple[str, ...] = ()
        # the last statement left per-connection results a client may ask for next (LAST_INSERT_ID(),
        # ROW_COUNT(), FOUND_ROWS()): the connection is not lent to another session until the next command
        self.keep_for_next = False
        # answers to fast-path commands are read by this, in the socket's callback (proxy.fastpath)
        self.tap = install_tap(raw._writer.transport if raw._writer is not None else None, self)

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
        return data

    async def relay(
        self, payload: bytes, client: asyncio.StreamWriter, *, first_seq: int, client_deprecate_eof: bool,
        rows_only: bool = False, more_results: bool = False,
        error_rewriter: Callable[[bytes], bytes] | None = None,
    ) -> ResultSummary:
        """Send a command and copy its response to the client as it arrives (with backpressure)."""
        relay = relay_for(
            backend_deprecate_eof=BACKEND_DEPRECATE_EOF, client_deprecate_eof=client_deprecate_eof,
            first_seq=first_seq, rows_only=rows_only, more_results=more_results, error_rewriter=error_rewriter,
        )
        self._send(payload)
        transport = client.transport
        try:
            while not relay.done:
                out = relay.feed(await self._read())
                if out:
                    transport.write(out)
                    if transport.get_write_buffer_size() > CLIENT_BUFFER_LIMIT:
                        await client.drain()  # the client reads slowly: stop reading the backend
        except asyncio.CancelledError:
            self.broken = True
            raise
        self.busy = False
        self.status = relay.summary.status
        self.raw.server_status = relay.summary.status
        return relay.summary

    async def event_batches(self, payload: bytes) -> AsyncIterator[list[object]]:
        """Send a command and yield its decoded events (ResultHeader, row payloads, OK/ERR, ResultEnd), one
        list per read from the backend: consumers that relay rows await once per chunk, not per row."""
        parser = ResultParser(backend_deprecate_eof=BACKEND_DEPRECATE_EOF)
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

    async def execute(self, sql: str) -> OKPacket | ERRPacket | list[tuple[bytes | None, ...]]:
        """Run one statement to completion; rows come back as raw text values."""
        from protocol.packets import decode_text_row

        rows: list[tuple[bytes | None, ...]] = []
        result: OKPacket | ERRPacket | None = None
        ncols = 0
        async for ev in self.events(ComQuery(sql.encode()).encode()):
            if isinstance(ev, ResultHeader):
                ncols = len(ev.columns)
            elif isinstance(ev, bytes):
                rows.append(decode_text_row(ev, ncols))
            elif isinstance(ev, OKPacket | ERRPacket):
                result = ev
        if isinstance(result, ERRPacket):
            return result
        return rows if ncols else (result or OKPacket())


@dataclass
class _PoolKey:
    found_rows: bool


class DataSource:
    """One configured data source: a pool per CLIENT_FOUND_ROWS setting (created on first need)."""

    fast_relay = True  # pass-through commands may be relayed by proxy.fastpath (not a read/write group)

    def __init__(self, config: DataSourceConfig) -> None:
        self.config = config
        self.name = config.name
        self._pools: dict[bool, aiomysql.Pool] = {}
        self._lock = asyncio.Lock()
        self._admin: BackendConnection | None = None
        self._admin_lock = asyncio.Lock()
        # sessions holding connections between commands, so an exhausted pool can take back an idle one
        self.holders: dict[BackendConnection, Holder] = {}
        self.waiters = 0
        # our wrapper per pooled aiomysql connection, so its state (charset, SETs, prepared statements)
        # is known when it is borrowed again
        self._known: dict[int, BackendConnection] = {}

    async def _pool(self, found_rows: bool) -> aiomysql.Pool:
        pool = self._pools.get(found_rows)
        if pool is not None:
            return pool
        async with self._lock:
            pool = self._pools.get(found_rows)
            if pool is None:
                pool = await self._create_pool(found_rows)
                self._pools[found_rows] = pool
        return pool

    async def _create_pool(self, found_rows: bool) -> aiomysql.Pool:
        c = self.config
        flags = int(_BASE_FLAGS | (Capability.FOUND_ROWS if found_rows else 0))
        try:
            return await asyncio.wait_for(
                aiomysql.create_pool(
                    minsize=c.min_pool_size if not found_rows else min(1, c.min_pool_size),
                    maxsize=c.max_pool_size,
                    host=c.host,
                    port=c.port,
                    user=c.username,
                    password=c.password,
                    db=c.database,
                    charset="utf8mb4",
                    autocommit=True,
                    client_flag=flags,
                    connect_timeout=c.connect_timeout,
                    pool_recycle=int(c.max_lifetime) if c.max_lifetime > 0 else -1,
                ),
                timeout=c.connect_timeout + 5,
            )
        except pymysql.err.OperationalError as exc:
            errno, msg = (*exc.args, "")[:2]
            raise BackendError(self.name, f"cannot connect to {c.describe()}: {msg}", errno=int(errno or 2003)) from exc
        except (OSError, TimeoutError) as exc:
            raise BackendError(self.name, f"cannot connect to {c.describe()}: {exc}", errno=2003) from exc

    async def start(self) -> None:
        await self._pool(False)

    def exhausted(self, found_rows: bool) -> bool:
        pool = self._pools.get(found_rows)
        return pool is not None and pool.freesize == 0 and pool.size >= pool.maxsize

    def _reclaim(self, found_rows: bool) -> BackendConnection | None:
        """Take an idle connection back from a session that holds it between commands (synchronous: no
        other task runs between the check and the hand-over)."""
        for conn, holder in list(self.holders.items()):
            if conn.found_rows == found_rows and holder.give_up(conn):
                self.holders.pop(conn, None)
                return conn
        return None

    async def try_acquire(self, *, found_rows: bool = False, holder: Holder | None = None) -> BackendConnection | None:
        """Like `acquire`, but None instead of waiting when the pool is exhausted and nothing is idle."""
        await self._pool(found_rows)
        if self.exhausted(found_rows):
            conn = self._reclaim(found_rows)
            if conn is not None and holder is not None:
                self.holders[conn] = holder
            return conn
        return await self.acquire(found_rows=found_rows, holder=holder)

    async def acquire(self, *, found_rows: bool = False, holder: Holder | None = None) -> BackendConnection:
        """A connection from the pool; when the pool is exhausted, an idle one taken back from another
        session, else the next one returned. `holder` registers the borrower as able to give the
        connection back between its commands."""
        pool = await self._pool(found_rows)
        if self.exhausted(found_rows):
            conn = self._reclaim(found_rows)
            if conn is not None:
                if holder is not None:
                    self.holders[conn] = holder
                return conn
        self.waiters += 1
        try:
            raw = await pool.acquire()
        except pymysql.err.OperationalError as exc:
            errno, msg = (*exc.args, "")[:2]
            raise BackendError(self.name, f"cannot connect: {msg}", errno=int(errno or 2003)) from exc
        except OSError as exc:
            raise BackendError(self.name, f"cannot connect: {exc}", errno=2003) from exc
        finally:
            self.waiters -= 1
        conn = self._known.get(id(raw))
        if conn is None or conn.raw is not raw:
            conn = BackendConnection(self, raw, found_rows)
            self._known[id(raw)] = conn
        conn.broken = False
        conn.keep_for_next = False
        if holder is not None:
            self.holders[conn] = holder
        return conn

    async def release(self, conn: BackendConnection, *, reset: bool = True) -> None:
        """Return a connection. With `reset`, its session state is cleared first; without, it keeps its
        state (recorded in `conn.state`) and the next borrower resets it only if its own state differs."""
        self.holders.pop(conn, None)
        if conn.busy:
            conn.broken = True  # an answer is still on its way: the connection cannot be reused safely
        pool = self._pools.get(conn.found_rows)
        if pool is None:
            conn.raw.close()
            return
        if not conn.broken and reset:
            try:
                await asyncio.wait_for(self._reset(conn), timeout=5)
            except (BackendError, TimeoutError, OSError):
                conn.broken = True
        if conn.broken:
            conn.raw.close()
            self._known.pop(id(conn.raw), None)
        await pool.release(conn.raw)

    async def _reset(self, conn: BackendConnection) -> None:
        # COM_RESET_CONNECTION rolls back, drops temporary tables and user variables, resets SET state.
        conn.statements.clear()
        answer = await conn.simple_command(b"\x1f")
        if answer[-1][:1] == b"\xff":
            conn.broken = True
            return
        if not conn.multi_statements:  # the next borrower may want 'a; b' (the pool opened it with the flag)
            answer = await conn.simple_command(b"\x1b\x00\x00")
            if answer[-1][:1] == b"\xff":
                conn.broken = True
                return
        if conn.charset != "utf8mb4":
            await conn.execute("SET NAMES utf8mb4")
            conn.charset = "utf8mb4"
        conn.session_sets = ()
        conn.status = 2
        conn.raw.server_status = 2

    async def reset(self, conn: BackendConnection) -> None:
        """Clear a borrowed connection's session state (before applying another session's)."""
        await self._reset(conn)
        if conn.broken:
            raise BackendError(self.name, "could not reset a pooled connection")

    async def admin_execute(self, sql: str) -> OKPacket | ERRPacket | list[tuple[bytes | None, ...]] | None:
        """Run a statement over the data source's own admin connection, outside the pool: KILL QUERY and
        metadata reloads must work even when every pooled connection is taken (possibly by the very
        session that needs them). None when the data source cannot be reached."""
        async with self._admin_lock:
            for _attempt in (1, 2):
                admin = self._admin
                if admin is None or admin.broken:
                    c = self.config
                    try:
                        raw = await aiomysql.connect(host=c.host, port=c.port, user=c.username, password=c.password,
                                                     db=c.database, autocommit=True, connect_timeout=c.connect_timeout,
                                                     charset="utf8mb4")
                    except (pymysql.err.OperationalError, OSError) as exc:
                        log.warning("admin_connection_failed", data_source=self.name, error=str(exc))
                        return None
                    admin = self._admin = BackendConnection(self, raw, False)
                try:
                    return await asyncio.wait_for(admin.execute(sql), timeout=10)
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
        for pool in self._pools.values():
            pool.close()
        for pool in self._pools.values():
            try:
                await asyncio.wait_for(pool.wait_closed(), timeout=5)
            except TimeoutError:
                pool.terminate()
        self._pools.clear()

    def stats(self) -> dict[str, int]:
        size = sum(p.size for p in self._pools.values())
        free = sum(p.freesize for p in self._pools.values())
        return {"size": size, "free": free, "used": size - free}


def charset_for_collation(collation_id: int) -> str:
    """The character set a client's handshake collation id belongs to (for SET NAMES on backends)."""
    if collation_id in (Collation.UTF8MB4_GENERAL_CI, Collation.UTF8MB4_BIN, 255) or 224 <= collation_id <= 247:
        return "utf8mb4"
    if collation_id in (33, 83) or 192 <= collation_id <= 215:
        return "utf8mb3"
    return {8: "latin1", 47: "latin1", 48: "latin1", 5: "latin1", 63: "binary", 28: "gbk", 87: "gbk",
            24: "gb2312", 11: "ascii", 65: "ascii", 1: "big5", 84: "big5", 95: "cp932", 97: "eucjpms",
            13: "sjis", 88: "sjis", 12: "ujis", 91: "ujis", 35: "ucs2", 54: "utf16", 60: "utf32",
            9: "latin2", 57: "cp1256", 51: "cp1251", 7: "koi8r", 22: "koi8u", 19: "euckr", 36: "cp866",
            }.get(collation_id, "utf8mb4")
