"""Reading several units' results at once for a merge: one reader per unit, streaming on a connection of
its own or buffered in memory.

A unit's data source is served by the session's own connection to it; when a SELECT has several units on
one data source and their results must be open at once, the extra units borrow pooled connections for
the duration of the statement (outside transactions), or are read one after another into memory (inside
a transaction, where only the session's connection sees its uncommitted rows).

Why its own module: the executor decides how a statement is answered; this is how the rows of many units
are pulled, with backpressure, and how every connection a reader borrowed goes back afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Generator, Sequence
from typing import TYPE_CHECKING, Any

from merge import MergeError
from protocol.errors import ServerError
from protocol.packets import ColumnDefinition41, ERRPacket, OKPacket
from protocol.results import ResultEnd, ResultHeader
from protocol.rowframes import RowFrames
from proxy.backends.backend import BackendConnection
from proxy.backends.codec import StatementCodec, StatementFailed
from proxy.execution import budget as memory_budget
from proxy.execution.units import UnitFailed
from routing.plan import ExecutionUnit, RoutedStatement

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session

class _RowSource:
    """What every reader offers a merge or a relay. `frame_batches` is each reader's own; the payload and
    decoded-row views are derived from it here, once."""

    codec: StatementCodec

    def frame_batches(self) -> AsyncIterator[RowFrames]:
        raise NotImplementedError

    async def payloads(self) -> AsyncIterator[bytes]:
        async for frames in self.frame_batches():
            for payload in frames.payloads():
                yield payload

    async def rows(
        self, columns: Sequence[ColumnDefinition41], count: int | None = None
    ) -> AsyncIterator[tuple[bytes | None, ...]]:
        decode = self.codec.decode_row
        async for payload in self.payloads():
            yield decode(payload, columns, count)


class _UnitStream(_RowSource):
    """One unit's result: header first (column definitions), then its rows, pulled lazily as runs of row
    frames in the batches the backend's reads deliver (the relay awaits per chunk, not per row)."""

    def __init__(self, conn: BackendConnection, unit: ExecutionUnit, codec: StatementCodec, *, borrowed: bool) -> None:
        self.conn = conn
        self.unit = unit
        self.codec = codec
        self.borrowed = borrowed
        self._batches: AsyncIterator[list[object]] = _no_batches()
        self._pending: list[object] = []  # events of a read batch not consumed yet
        self.columns: tuple[ColumnDefinition41, ...] = ()
        self.started = False
        self.finished = False
        self.status = 0
        self.warnings = 0

    async def _next_batch(self) -> list[object] | None:
        if self._pending:
            batch, self._pending = self._pending, []
            return batch
        return await anext(self._batches, None)

    async def start(self) -> None:
        """Read up to the column definitions (or the OK/ERR of a statement without a result set)."""
        self.started = True
        try:
            payload = await self.codec.command(self.conn, self.unit)
        except StatementFailed as exc:
            self.finished = True
            raise UnitFailed(self.unit.data_source, exc.err) from exc
        self._batches = self.conn.event_batches(payload, row_frames=True)
        while (batch := await self._next_batch()) is not None:
            for i, ev in enumerate(batch):
                if isinstance(ev, ResultHeader):
                    self.columns = ev.columns
                    self._pending = batch[i + 1 :]
                    return
                if isinstance(ev, ERRPacket):
                    self.finished = True
                    raise UnitFailed(self.unit.data_source, ev)
                if isinstance(ev, OKPacket):
                    self.finished = True
                    self.status = int(ev.status)
                    return
        self.finished = True

    async def frame_batches(self) -> AsyncIterator[RowFrames]:  # type: ignore[override]
        if self.finished:
            return
        while (batch := await self._next_batch()) is not None:
            for ev in batch:
                if isinstance(ev, RowFrames):
                    yield ev
                elif isinstance(ev, ResultEnd):
                    self.status, self.warnings = ev.status, ev.warnings
                elif isinstance(ev, ERRPacket):
                    self.finished = True
                    raise UnitFailed(self.unit.data_source, ev)
        self.finished = True

    async def drain(self) -> None:
        if not self.started:
            self.finished = True
            return
        if not self.finished:
            with contextlib.suppress(UnitFailed):
                async for _ in self.frame_batches():
                    pass


class _BufferedUnit(_RowSource):
    """A unit whose rows were read into memory before the merge started: used when a data source has
    more units than `max-connections-size-per-query` allows to stream at once (or inside a transaction,
    where only the session's own connection may run them). Bounded by the merge row budget."""

    def __init__(self, unit: ExecutionUnit, codec: StatementCodec) -> None:
        self.unit = unit
        self.codec = codec
        self.borrowed = False
        self.columns: tuple[ColumnDefinition41, ...] = ()
        self.started = True
        self.finished = True
        self.status = 0
        self.warnings = 0
        self._frames: list[RowFrames] = []

    async def load(self, conn: BackendConnection, budget: int) -> None:
        stream = _UnitStream(conn, self.unit, self.codec, borrowed=False)
        await stream.start()
        held = 0
        memory = memory_budget.current()  # what is read ahead is held until the statement ends
        async for frames in stream.frame_batches():
            if memory is not None:
                try:
                    memory.charge(len(frames.data) + 64, f"the rows of data source {self.unit.data_source} read ahead")
                except ServerError:
                    await stream.drain()
                    raise
            self._frames.append(frames)
            held += frames.rows
            if held > budget:
                await stream.drain()
                raise MergeError(
                    f"more than {budget} rows of data source {self.unit.data_source} had to be held in memory "
                    f"because it has more route units than max-connections-size-per-query connections; raise "
                    f"props.max-connections-size-per-query or props.proxy-merge-memory-rows"
                )
        self.columns, self.status, self.warnings = stream.columns, stream.status, stream.warnings

    async def start(self) -> None:
        return None

    async def frame_batches(self) -> AsyncIterator[RowFrames]:  # type: ignore[override]
        held, self._frames = self._frames, []
        for frames in held:
            yield frames

    async def drain(self) -> None:
        self._frames = []


class _Suspend:
    """What a `_FedStream` awaits while its unit's next bytes have not arrived. Only the driver of
    proxy.execution.multipath steps a coroutine that awaits it (no asyncio task could: it is no future); the
    driver steps the coroutine again when the socket callbacks bring that unit more."""

    __slots__ = ()

    def __await__(self) -> Generator[_Suspend, None, None]:
        yield self


SUSPEND = _Suspend()


class _FedStream(_RowSource):
    """One unit's result as a `_UnitStream` offers it (header first, then runs of row frames, then its status and
    warnings), read by the backend socket's callbacks instead of by awaiting the socket (the synchronous
    multi-node SELECT, proxy.execution.multipath, subclasses it with the socket side). What the
    callbacks have parsed waits in `runs`; a consumer that needs more awaits `SUSPEND`."""

    def __init__(self, conn: BackendConnection, unit: ExecutionUnit, codec: StatementCodec) -> None:
        self.conn = conn
        self.unit = unit
        self.codec = codec
        self.borrowed = False
        self.columns: tuple[ColumnDefinition41, ...] = ()
        self.started = True
        self.finished = False  # the consumer has seen the end
        self.status = 0
        self.warnings = 0
        self.headed = False  # the header (or the whole answer, when it has no result set) has arrived
        self.ended = False  # the answer's last byte has arrived (or the connection is lost)
        self.failure: BaseException | None = None  # UnitFailed (an ERR), BackendError (lost), MalformedPacket
        self.runs: deque[RowFrames] = deque()
        self.end = (0, 0)  # the result's status and warnings, taken by the consumer when it reaches the end

    def took(self, size: int) -> None:
        """The consumer took a run of `size` bytes (the socket side may read on)."""

    async def start(self) -> None:
        return None  # its command was sent, and its header is read, by the socket side

    async def frame_batches(self) -> AsyncIterator[RowFrames]:  # type: ignore[override]
        if self.finished:
            return
        runs = self.runs
        while True:
            while runs:
                frames = runs.popleft()
                self.took(len(frames.data))
                yield frames
            if self.ended:
                self.finished = True
                if self.failure is not None:
                    raise self.failure
                self.status, self.warnings = self.end
                return
            await SUSPEND

    async def drain(self) -> None:
        self.finished = True


_Reader = _UnitStream | _BufferedUnit | _FedStream


def _by_source(units: Sequence[ExecutionUnit]) -> dict[str, list[ExecutionUnit]]:
    groups: dict[str, list[ExecutionUnit]] = {}
    for unit in units:
        groups.setdefault(unit.data_source, []).append(unit)
    return groups


async def _open_merge_readers(session: Session, routed: RoutedStatement, codec: StatementCodec,
                              conns: dict[str, BackendConnection]) -> list[_Reader]:
    """Readers for a merge, which needs every unit's stream open at once. Per data source: up to
    `max-connections-size-per-query` units stream (the session's connection plus borrowed ones); the
    rest are read into memory first, on the session's connection, before its own unit starts."""
    limit = max(1, session.server.max_connections_per_query)
    if session.txn.active:
        limit = 1  # uncommitted rows are visible on the session's connection only
    budget = session.server.merge_memory_rows
    readers: dict[int, _Reader] = {}
    index = {id(u): i for i, u in enumerate(routed.execution_units)}

    async def prepare(ds: str, units: list[ExecutionUnit]) -> None:
        conn = conns[ds]
        # extra connections only if free now: waiting for one while holding `conn` could deadlock
        streams: list[tuple[ExecutionUnit, BackendConnection]] = []
        for unit in units[1:limit]:
            extra = await session.try_extra_backend(ds, like=conn)
            if extra is None:
                break
            streams.append((unit, extra))
            readers[index[id(unit)]] = _UnitStream(extra, unit, codec, borrowed=True)  # returned on failure too
        readers[index[id(units[0])]] = _UnitStream(conn, units[0], codec, borrowed=False)
        for unit in units[1 + len(streams):]:
            reader = _BufferedUnit(unit, codec)
            readers[index[id(unit)]] = reader
            await reader.load(conn, budget)

    results = await asyncio.gather(
        *(prepare(ds, us) for ds, us in _by_source(routed.execution_units).items()), return_exceptions=True
    )
    ordered = [readers[i] for i in sorted(readers)]
    failure = next((r for r in results if isinstance(r, BaseException)), None)
    if failure is not None:
        await _finish_readers(session, ordered)
        raise failure
    return ordered


async def kill_until_done(conn: BackendConnection, task: asyncio.Future[Any], *, every: float = 0.25,
                          attempts: int = 20) -> None:
    """KILL QUERY the unit running on `conn` until `task` (the one reading its answer) ends. A KILL that
    lands before the server has started the statement finds nothing to stop (MariaDB clears it when the
    next command starts), and the statement then runs to its end: the kill is sent again until the answer
    ends. A KILL landing after the answer ended stops nothing either."""
    for _ in range(attempts):
        await conn.source.kill_query(conn.thread_id)
        done, _pending = await asyncio.wait({task}, timeout=every)
        if done:
            return
    await asyncio.wait({task})


async def _finish_readers(session: Session, readers: Sequence[_Reader], *, failed: bool = True) -> None:
    """Leave every connection clean after a failure, an early end or a timeout: after a failure, KILL
    QUERY what still runs; drain what is left (after an early end, e.g. a merged LIMIT, that is at most
    the rows each node's rewritten LIMIT allows); return borrowed connections; drop what cannot be
    cleaned."""
    running = [r for r in readers if isinstance(r, _UnitStream) and r.started and not r.finished]
    if failed:
        for r in running:
            draining = asyncio.ensure_future(r.drain())
            await kill_until_done(r.conn, draining)
            if draining.exception() is not None:
                r.conn.broken = True
        running = []

    # one after another under one deadline, not a task and a timer per reader: what is left after
    # an early end (a merged LIMIT) is mostly read already; a reader not drained by then is dropped
    deadline = asyncio.get_running_loop().time() + 10
    for r in running:
        try:
            async with asyncio.timeout_at(deadline):
                await r.drain()
        except Exception:
            r.conn.broken = True
    for reader in readers:
        if isinstance(reader, _UnitStream) and reader.borrowed:
            session.return_extra_backend(reader.conn, broken=reader.started and not reader.finished)
    session.drop_broken()


async def _no_batches() -> AsyncIterator[list[object]]:
    return
    yield


__all__ = [
    "SUSPEND", "_BufferedUnit", "_FedStream", "_Reader", "_UnitStream", "_by_source", "_finish_readers", "_no_batches",
    "_open_merge_readers", "kill_until_done",
]
