"""A session's side of read/write splitting: which of its connections a statement uses (replica or
primary), read-after-write bookkeeping, relaying a read with retry on another member.

Why apart from proxy.backends.readwrite: the group (members, health, balancing) is a data source shared by all
sessions; this is per session and works on the session's connections (named by proxy.execution.context's
Protocol, never the Session class).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from protocol.constants import ErrorCode, ServerStatus
from protocol.results import ResultSummary
from proxy.backends.backend import POOL_TIMEOUT_ERRNO, BackendConnection, BackendError, DataSource
from proxy.backends.readwrite import Access, ReadWriteGroup, ReplicaState, classify_access
from proxy.execution.lock_text import parse_lock
from proxy.execution.state import GroupSessionState

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session

def in_transaction(session: Session) -> bool:
    db = session.database
    if db is not None and db.kernel is not None:
        return session.txn.active
    return bool(session.status & ServerStatus.IN_TRANS) or not session.status & ServerStatus.AUTOCOMMIT


def _stale(conn: BackendConnection) -> bool:
    """The server closed this idle connection (shut down, killed, wait_timeout): seen without a round trip."""
    reader = conn.raw._reader
    if reader is None:
        return True
    return bool(reader.at_eof() or reader.exception() or getattr(reader, "eof_received", False))


async def group_backend(
    session: Session, group: ReadWriteGroup, *, read: bool, record_write: bool
) -> BackendConnection | None:
    """The session's replica connection for a read that may use one, else None (the caller then uses the
    session's primary connection). Records writes for the group's `readAfterWrite` mode."""
    state = session.read_state.setdefault(group.name, GroupSessionState())
    in_txn = in_transaction(session)
    if not in_txn:
        state.txn_wrote = False
        state.fixed_replica = None
    if not read:
        if record_write:
            state.wrote = state.txn_wrote = state.gtid_pending = True
            state.caught_up.clear()
        return None
    if session.txn.table_locks or state.locked:  # LOCK TABLES holds on the primary only: reads are taken there
        return None
    config = group.group_config
    if in_txn and (state.txn_wrote or config.transactional_read_query_strategy == "PRIMARY"):
        return None
    if config.read_after_write == "SESSION" and state.wrote:
        return None
    fixed = in_txn and config.transactional_read_query_strategy == "FIXED"
    tried: list[str] = []
    while (replica := group.pick_replica(tried, state.fixed_replica if fixed else None)) is not None:
        conn = await _replica_connection(session, group, replica)
        if conn is None:
            tried.append(replica.name)
            continue
        if config.read_after_write == "GTID" and not await _caught_up(session, group, state, replica, conn):
            return None
        if fixed:
            state.fixed_replica = replica.name
        return conn
    return None


async def _replica_connection(
    session: Session, group: ReadWriteGroup, replica: ReplicaState
) -> BackendConnection | None:
    conn = session.read_backends.get(replica.name)
    if conn is not None and (conn.broken or _stale(conn)):
        del session.read_backends[replica.name]
        conn.broken = True
        session.give_back(conn)
        conn = None
    if conn is not None:
        session.in_use.add(conn)
        return conn
    try:
        conn = await session.acquire_from(replica.source)
    except BackendError as exc:
        if exc.errno == ErrorCode.QUERY_INTERRUPTED:
            raise  # KILL QUERY while waiting for the replica's pool: the statement ends, the replica is fine
        if exc.errno != POOL_TIMEOUT_ERRNO:  # a busy replica is not a dead one
            group.mark_down(replica.name, str(exc))
        return None
    session.in_use.add(conn)
    try:
        await session._prepare_connection(conn, join_transaction=False)
    except BackendError as exc:
        conn.broken = True
        session.give_back(conn)
        if exc.errno == ErrorCode.QUERY_INTERRUPTED:
            raise  # KILL QUERY: the statement ends, the replica is fine
        group.mark_down(replica.name, str(exc))
        return None
    session.read_backends[replica.name] = conn
    return conn


async def _caught_up(
    session: Session, group: ReadWriteGroup, state: GroupSessionState, replica: ReplicaState,
    conn: BackendConnection,
) -> bool:
    """GTID mode: has this replica applied the session's last write? Asked once per replica and position;
    the position is read from the primary lazily, at the first read after writes (after their commit)."""
    if state.gtid_pending:
        primary = await session.backend(group.name, record_write=False)
        rows = await primary.execute(group.gtid_position_sql)
        if not isinstance(rows, list) or not rows:
            return False
        state.gtid = (rows[0][0] or b"").decode()
        state.gtid_pending = False
        state.caught_up.clear()
    if not state.gtid or replica.name in state.caught_up:
        return True
    answer = await conn.execute(group.gtid_wait_sql(state.gtid))
    if isinstance(answer, list) and answer and answer[0][0] == b"0":
        state.caught_up.add(replica.name)
        return True
    group.log.info("replica_not_caught_up", data_source=replica.name, gtid=state.gtid, waited=group.gtid_wait,
                   conn=session.id, answer=str(answer))
    return False


async def _relay_primary(session: Session, group: ReadWriteGroup, payload: bytes, *, record_write: bool
                         ) -> ResultSummary:
    conn = await session.backend(group.name, record_write=record_write)
    return await session.relay_on(conn, payload)


class TrackingWriter:
    """The client's writer, remembering whether anything was sent (a failed read can then be retried)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.written = False

    def write(self, data: bytes) -> None:
        self.written = True
        self.writer.write(data)

    @property
    def transport(self) -> TrackingWriter:
        return self  # the relay writes to the transport directly; this one records that it did

    def get_write_buffer_size(self) -> int:
        return int(self.writer.transport.get_write_buffer_size())

    async def drain(self) -> None:
        await self.writer.drain()


async def relay_read(session: Session, group: ReadWriteGroup, payload: bytes) -> ResultSummary:
    """Relay a read; when a replica connection dies before any byte reached the client, the replica goes
    out of rotation and the read is retried on another member (the client sees no error)."""
    for _attempt in range(len(group.replicas) + 1):
        conn = await group_backend(session, group, read=True, record_write=False)
        if conn is None:
            return await _relay_primary(session, group, payload, record_write=False)
        tracker = TrackingWriter(session.writer)
        session.route = "replica"
        try:
            return await session.relay_on(conn, payload, writer=tracker, replica=True)
        except BackendError as exc:
            if tracker.written:
                raise
            drop_replica(session, group, conn, exc)
    return await _relay_primary(session, group, payload, record_write=False)


def drop_replica(session: Session, group: ReadWriteGroup, conn: BackendConnection, exc: BackendError) -> None:
    """A replica connection failed before any byte of its answer reached the client: it is closed, the replica
    leaves the rotation, and the caller tries another member."""
    session.read_backends.pop(conn.name, None)
    conn.broken = True
    session.give_back(conn)
    group.mark_down(conn.name, str(exc))


async def relay_pass_through(session: Session, source: DataSource, payload: bytes, sql: str) -> None:
    """The pass-through path: a read/write splitting group classifies the text; a plain data source
    relays as before."""
    session.route = "passthrough"
    if not isinstance(source, ReadWriteGroup):
        await session.relay(source.name, payload)
        return
    access = classify_access(sql)
    if access is Access.READ:
        await relay_read(session, source, payload)
        return
    # SET statements are remembered (for replica and re-borrowed connections) by Session._after_pass_through
    await _relay_primary(session, source, payload, record_write=access is Access.WRITE)
    if not session.errored:
        _follow_locks(session.read_state.setdefault(source.name, GroupSessionState()), sql)


def _follow_locks(state: GroupSessionState, sql: str) -> None:
    """Whether the session now holds LOCK TABLES on the group's primary: LOCK TABLES takes them, UNLOCK TABLES and
    BEGIN / START TRANSACTION (MariaDB's implicit UNLOCK) release them."""
    lock = parse_lock(sql)
    if lock is not None and lock.error is None:
        state.locked = not lock.unlock
    elif state.locked and _BEGINS.match(sql):
        state.locked = False


_BEGINS = re.compile(r"^\s*(?:BEGIN\b|START\s+TRANSACTION\b)", re.I)


__all__ = ["TrackingWriter", "drop_replica", "group_backend", "in_transaction", "relay_pass_through", "relay_read"]
