"""The session's side of the connection broker: the backend connections a session holds, borrows for one
statement, lends back between commands and gives back to the pools (proxy.backends.pool owns the leases).

Why its own module: holding connections is one job with its own invariants (a session never waits for a
pool while it holds an idle connection another session may need; connections are taken in sorted data
source order; nothing with the session's state on it is lent), apart from answering commands. `Session`
inherits these methods; the execution room reaches them through proxy.execution.context.SessionContext.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from protocol import text
from protocol.constants import ErrorCode, ServerStatus, SetOption
from protocol.packets import ComSetOption, ERRPacket, OKPacket
from proxy.backends.backend import BackendConnection, BackendError, DataSource
from proxy.backends.charset import changes_names, client_charset
from proxy.backends.readwrite import ReadWriteGroup
from proxy.execution import txn
from proxy.execution.replicas import group_backend

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.state import StatementRegistry, TransactionState


def interrupted(data_source: str) -> BackendError:
    return BackendError(data_source, "Query execution was interrupted (KILL QUERY while waiting for a connection)",
                        errno=ErrorCode.QUERY_INTERRUPTED, sqlstate="70100")


class SessionConnections:
    """Mixin of `Session`: the connections it holds (`backends`, `read_backends`), borrows (`borrowed`)
    and is waiting for (`connecting`)."""

    # set by Session.__init__
    backends: dict[str, BackendConnection]
    read_backends: dict[str, BackendConnection]
    borrowed: set[BackendConnection]
    renewed: set[str]
    in_use: set[BackendConnection]
    connecting: list[str]
    query_killed: bool  # KILL QUERY reached the current command
    _kill_waits: list[asyncio.Future[None]]
    database: LogicalDatabase | None
    txn: TransactionState
    statements: StatementRegistry
    charset: str
    names: str
    multi_statements: bool
    sticky: bool
    busy: bool
    log: Any
    wire: Any  # proxy.frontend.wire.ClientPackets: its decoder's limit is the session's max_allowed_packet
    server: Any

    if TYPE_CHECKING:  # provided by Session; declared for the type checker only
        @property
        def found_rows(self) -> bool: ...

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

    def give_back_idle(self) -> None:
        """Before any wait (for a pool, or on a server: a named lock another session holds): the held
        connections this command has not used and that hold nothing of ours (no joined transaction,
        nothing sticky) go back to their pools, so that no set of sessions can wait for each other's idle
        connections (hold-and-wait). The command's connections are taken in one order (sorted data source
        names, see `backends_for`), so the ones it keeps cannot form a cycle; and a session waiting on a
        server while it keeps idle connections of other data sources could starve the session it waits
        for (the one holding the lock may need exactly those pools)."""
        for held in (self.backends, self.read_backends):
            for name, conn in list(held.items()):
                if conn not in self.in_use and self._lendable(conn):
                    del held[name]
                    self.give_back(conn, reset=False)

    async def acquire_from(self, source: DataSource, *, hold: bool = True) -> BackendConnection:
        """A connection of `source` for this session: now if one is free, else after giving back what
        the session holds idle, waiting at most the data source's connectionTimeoutMilliseconds, or until
        a KILL QUERY of the command (`interrupt`)."""
        holder = self if hold else None
        self.connecting.append(source.name)
        try:
            conn = await source.try_acquire(self, found_rows=self.found_rows, holder=holder)
            if conn is None:
                self.give_back_idle()
                conn = await self._interruptible(source, source.acquire(self, found_rows=self.found_rows,
                                                                        holder=holder))
            try:
                await self.renew_for_session(conn)  # (still `connecting`: the session knows the connection)
            except BaseException:
                self.give_back(conn)
                raise
            while conn.packet_limit is not None and conn.packet_limit < self.wire.frames.max_payload:
                # opened while max_allowed_packet was smaller: its server would refuse what this session may send
                # (closed, so the pool opens a new one in its place when no other idle one fits)
                conn.broken = True
                self.give_back(conn)
                conn = await self._interruptible(source, source.acquire(self, found_rows=self.found_rows,
                                                                        holder=holder))
                try:
                    if conn.idle_since == conn.created_at:
                        await self._read_packet_limit(conn)
                    else:
                        await conn.reset_state()
                except BaseException:
                    self.give_back(conn)
                    raise
        finally:
            self.connecting.remove(source.name)
        if self.query_killed:  # killed while the connection was being opened: it goes back unused
            self.give_back(conn, reset=False)
            raise interrupted(source.name)
        return conn

    async def renew_for_session(self, conn: BackendConnection) -> None:
        """A new client session sees the server's current global variables, as a new connection to MariaDB does
        (sql_mode, max_allowed_packet, ...): a pooled connection still has the values of when it was opened, or of
        its last reset, however long ago, so the first one a session takes from each data source is reset
        (COM_RESET_CONNECTION takes the globals again) before the session's own state is applied (`_fit`). One
        that was opened for this very request already has them."""
        name = conn.source.name
        if name in self.renewed:
            if conn.idle_since == conn.created_at:
                await self._read_packet_limit(conn)
            return
        first = not self.renewed
        self.renewed.add(name)
        if conn.idle_since != conn.created_at:  # (else never in the pool: opened just now, with the globals)
            await conn.reset_state()
            if conn.broken:
                raise BackendError(name, "COM_RESET_CONNECTION failed on a pooled connection")
        await self._fit_packet_limit(conn, first)

    async def _fit_packet_limit(self, conn: BackendConnection, first: bool) -> None:
        """The session reads packets up to the server's limit of now, as a new connection to MariaDB does (a bigger
        one answers 1153 and ends the session): the globals as they were when the client connected, whatever later
        `SET GLOBAL`s say; with several data sources, the smallest of theirs."""
        limit = await self._read_packet_limit(conn, record=conn.idle_since == conn.created_at)
        if limit is not None:
            current = self.server.max_packet if first else self.wire.frames.max_payload
            self.wire.frames.max_payload = min(current, limit)

    @staticmethod
    async def _read_packet_limit(conn: BackendConnection, *, record: bool = True) -> int | None:
        """The connection's packet limit: max_allowed_packet, or net_buffer_length when that is bigger (the size its
        read buffer starts at), of its session (after a reset: the current globals); recorded as the connection's
        own when it was opened just now."""
        res = await conn.execute("SELECT @@max_allowed_packet, @@net_buffer_length")
        if not isinstance(res, list) or not res or None in res[0]:
            return None
        limit = max(int(v or 0) for v in res[0])
        if record:
            conn.packet_limit = limit
        return limit

    async def _interruptible(self, source: DataSource, acquiring: Any) -> BackendConnection:
        """Wait for a pool, or end the wait with ERR 1317 when the command is killed meanwhile: a KILL QUERY
        finds nothing running on a backend while its target waits for a connection, and without this the
        statement would run to its end once it got one (`KILL QUERY` of a session queued on a full pool)."""
        if self.query_killed:
            acquiring.close()
            raise interrupted(source.name)
        waiting = asyncio.ensure_future(acquiring)
        killed = asyncio.get_running_loop().create_future()
        self._kill_waits.append(killed)
        try:
            await asyncio.wait((waiting, killed), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            waiting.cancel()
            raise
        finally:
            self._kill_waits.remove(killed)
            killed.cancel()
        if not waiting.done():
            waiting.cancel()  # the pool gives back whatever it handed to the abandoned wait
            with contextlib.suppress(BaseException):
                await waiting
            raise interrupted(source.name)
        conn: BackendConnection = waiting.result()
        return conn

    def interrupt(self) -> None:
        """KILL QUERY of this session's current command: a wait for a pool ends with ERR 1317 (what runs
        on the backends is killed by the server's KILL QUERY on them)."""
        if not self.busy:
            return  # between commands: KILL QUERY has nothing to stop, the next statement runs
        self.query_killed = True
        for killed in self._kill_waits:
            if not killed.done():
                killed.set_result(None)

    async def backends_for(self, data_sources: list[str], **access: bool) -> dict[str, BackendConnection]:
        """The session's connections to several data sources for one statement, taken in sorted order. A
        KILL QUERY that lands while they are taken ends the statement before it sends anything (the server's
        KILL found none of them running)."""
        conns = {name: await self.backend(name, **access) for name in sorted(set(data_sources))}
        if self.query_killed:
            raise interrupted(min(conns) if conns else "")
        return conns

    async def backend(self, data_source: str, *, read: bool = False, record_write: bool = True) -> BackendConnection:
        """The session's connection to a data source, borrowed on first use and kept.

        For a read/write splitting group, a `read` that may use a replica gets the session's connection to
        the replica the load balancer picks (see proxy.backends.readwrite); everything else gets the primary, and a
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
                if self.query_killed:  # KILL QUERY during the BEGIN: nothing of the statement ran yet
                    raise interrupted(data_source)
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

    def _lendable(self, conn: BackendConnection) -> bool:
        """May this held connection serve another session between our commands? Only when nothing of
        ours lives on it beyond the state `_fit` can re-create: no transaction, no statement results a
        client may ask for next, no prepared statements, no temporary tables or locks (`sticky`).

        In an open transaction, a connection the transaction has not joined holds nothing of it (joining
        starts the transaction there; replica connections never join, their reads run in autocommit): it
        is lent like any other. Kept, it made hold-and-wait cycles: session A in a transaction holds its
        joined ds_0 and waits for ds_1, while session B, in a transaction that has not touched ds_1 yet,
        holds an idle ds_1 and waits for ds_0; or B holds the replica connections of its reads before
        BEGIN while a federated statement holds ds_0 and waits for that replica."""
        status = conn.status
        return not (
            conn.broken
            or conn.busy
            or conn.keep_for_next
            or self.sticky
            or status & ServerStatus.IN_TRANS
            or not status & ServerStatus.AUTOCOMMIT
            or (self.txn.active and conn.name in self.txn.joined)
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
        wanted = (self.names, self.multi_statements, tuple(self.txn.session_sets))
        if conn.state == wanted:
            return
        if not conn.clean:
            await conn.source.reset(conn)
        if self.names != conn.charset:
            await self._must(conn, f"SET NAMES {self.names}")
            conn.charset = self.names
        if not self.multi_statements:
            # match the client's setting so 'a; b' fails as it would on a server
            await conn.simple_command(ComSetOption(SetOption.MULTI_STATEMENTS_OFF).encode())
        for sql in self.txn.session_sets:
            await self._must(conn, sql)
        conn.session_sets = tuple(self.txn.session_sets)
        if any(changes_names(sql) for sql in conn.session_sets):
            # a SET that changed other variables too, replayed: the session's character sets are the later ones
            await self._must(conn, f"SET NAMES {self.names}")

    def set_names(self, names: str) -> None:
        """The session's character sets and collation are now what `SET NAMES {names}` gives (see
        proxy.backends.charset): re-created on every connection it borrows from now on."""
        self.names = names
        self.charset = client_charset(names)

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
            await self.renew_for_session(conn)
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
        if self.query_killed:  # KILL QUERY meanwhile: it saw this connection nowhere (not yet the session's)
            raise interrupted(conn.name)
        if join_transaction and self.txn.active:
            await txn.join(self, conn)

    async def _must(self, conn: BackendConnection, sql: str) -> int:
        """Run `sql` on `conn`, raising its ERR; the warnings its answer counts (a SET's, for its OK)."""
        res = await conn.execute(sql)  # SET values may hold bytes that are not UTF-8
        if isinstance(res, ERRPacket):
            raise BackendError(conn.name, f"{text.shown(sql)!r} failed: {res.message}", errno=res.errno,
                               sqlstate=res.sqlstate)
        return res.warnings if isinstance(res, OKPacket) else 0


__all__ = ["SessionConnections", "interrupted"]
