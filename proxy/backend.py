"""Backend data sources: aiomysql pools for connecting and pooling, raw frames for commands.

aiomysql opens, authenticates and pools the connections; the proxy then speaks the protocol itself over
the connection's stream (`protocol.results`), because the relay path must move frames without decoding
rows and aiomysql's cursor API decodes every row into Python objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiomysql
import pymysql
import structlog

from protocol.binary import ComStmtClose, ComStmtPrepare, PrepareResponse, StmtPrepareOK
from protocol.constants import Capability, Collation
from protocol.framing import encode_packet
from protocol.packets import ComQuery, ERRPacket, OKPacket
from protocol.results import ResultHeader, ResultParser, ResultRelay, ResultSummary
from proxy.config import DataSourceConfig

log = structlog.get_logger("shardproxy.backend")

READ_CHUNK = 1 << 18
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


# A backend connection speaks to us with the classic EOF framing: PyMySQL never asks for DEPRECATE_EOF.
BACKEND_DEPRECATE_EOF = False
_BASE_FLAGS = Capability.MULTI_STATEMENTS | Capability.MULTI_RESULTS | Capability.PS_MULTI_RESULTS


class BackendConnection:
    """One borrowed backend connection; commands go over its raw stream."""

    def __init__(self, source: DataSource, raw: aiomysql.Connection, found_rows: bool) -> None:
        self.source = source
        self.raw = raw
        self.found_rows = found_rows
        self.broken = False
        self.status = 0
        self.charset: str = "utf8mb4"
        # COM_SET_OPTION outlives COM_RESET_CONNECTION: remember it so the pool can undo it
        self.multi_statements = True
        self.busy = False  # a command is on the wire and its answer not fully read
        # statements prepared on this connection, by SQL text (COM_RESET_CONNECTION forgets them all)
        self.statements: dict[str, PrepareResponse] = {}

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
        data, _ = encode_packet(payload, 0)
        writer.write(data)
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
    ) -> ResultSummary:
        """Send a command and copy its response to the client as it arrives (with backpressure)."""
        relay = ResultRelay(
            backend_deprecate_eof=BACKEND_DEPRECATE_EOF, client_deprecate_eof=client_deprecate_eof,
            first_seq=first_seq, rows_only=rows_only, more_results=more_results,
        )
        self._send(payload)
        try:
            while not relay.done:
                out = relay.feed(await self._read())
                if out:
                    client.write(out)
                    await client.drain()
        except asyncio.CancelledError:
            self.broken = True
            raise
        self.busy = False
        self.status = relay.summary.status
        self.raw.server_status = relay.summary.status
        return relay.summary

    async def events(self, payload: bytes) -> AsyncIterator[object]:
        """Send a command and yield decoded events (ResultHeader, row payloads, OK/ERR, ResultEnd)."""
        parser = ResultParser(backend_deprecate_eof=BACKEND_DEPRECATE_EOF)
        self._send(payload)
        try:
            while not parser.done:
                for event in parser.feed(await self._read()):
                    if isinstance(event, OKPacket):
                        self.status = int(event.status)
                    yield event
        except BaseException:
            if not parser.done:
                self.broken = True
            raise
        self.busy = False
        self.raw.server_status = self.status

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

    def __init__(self, config: DataSourceConfig) -> None:
        self.config = config
        self.name = config.name
        self._pools: dict[bool, aiomysql.Pool] = {}
        self._lock = asyncio.Lock()
        self._admin: BackendConnection | None = None
        self._admin_lock = asyncio.Lock()

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

    async def acquire(self, *, found_rows: bool = False) -> BackendConnection:
        pool = await self._pool(found_rows)
        try:
            raw = await pool.acquire()
        except pymysql.err.OperationalError as exc:
            errno, msg = (*exc.args, "")[:2]
            raise BackendError(self.name, f"cannot connect: {msg}", errno=int(errno or 2003)) from exc
        except OSError as exc:
            raise BackendError(self.name, f"cannot connect: {exc}", errno=2003) from exc
        return BackendConnection(self, raw, found_rows)

    async def release(self, conn: BackendConnection, *, reset: bool = True) -> None:
        """Return a connection; session state is cleared first so no client's settings leak to another."""
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
        conn.raw.server_status = 2

    async def kill_query(self, thread_id: int) -> None:
        """KILL QUERY over a connection of its own (outside the pool, so a full pool cannot block it)."""
        async with self._admin_lock:
            for _attempt in (1, 2):
                admin = self._admin
                if admin is None or admin.broken:
                    c = self.config
                    try:
                        raw = await aiomysql.connect(host=c.host, port=c.port, user=c.username, password=c.password,
                                                     db=c.database, autocommit=True, connect_timeout=c.connect_timeout)
                    except (pymysql.err.OperationalError, OSError) as exc:
                        log.warning("kill_query_failed", data_source=self.name, error=str(exc))
                        return
                    admin = self._admin = BackendConnection(self, raw, False)
                try:
                    await asyncio.wait_for(admin.execute(f"KILL QUERY {int(thread_id)}"), timeout=5)
                    return
                except (BackendError, TimeoutError):
                    admin.broken = True
                    admin.raw.close()

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
