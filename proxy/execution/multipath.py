"""The synchronous multi-node SELECT: a SELECT routed to one unit on each of several data sources, answered
inside the socket callbacks (issue 15).

Why: the fast path (proxy.execution.fastpath) answers a single-node SELECT inside `data_received`; a SELECT on
several nodes went through the session's coroutine, where the proxy's own work per statement (the command's
dispatch and classification, the route again, a task per unit, an async generator and a StreamReader per
backend answer, the header wait) cost four to six times a point select (bench/RESULTS.md). Here the fast path
routes the statement as before and, when `multi_forward` allows it, writes every unit's command at once to the
connections the session holds; each backend socket's bytes are parsed in its callback (`_Leg`, a
`readers._FedStream`); the answer itself is the slow path's own code (`executor._answer_merged`: header, rows
relayed, raw-merged or merged, the end, FOUND_ROWS()), run as a coroutine that this module steps by hand: it
goes on when a unit's next bytes arrive, not through the event loop. What it awaits besides that (the client
draining, KILL QUERY of the other units after a failure) is awaited as asyncio would, on the future's callback.

What it does not take goes to the session's coroutine unchanged (`multi_forward` is an allow-list). Failures
end as in `executor.execute_plan`: the first unit that fails before its header fails the statement, the others
are stopped by KILL QUERY until their answers end; a failure after the header is met where the answer reaches
that unit's rows; the client's ERR names the data source.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from merge import MergeError
from protocol.constants import ErrorCode
from protocol.framing import encode_packet
from protocol.packets import ERRPacket, OKPacket
from protocol.results import ResultEnd, ResultHeader, ResultParser
from protocol.rowframes import RowFrames, frames_of
from protocol.wire import MalformedPacket
from proxy.backends.backend import BACKEND_DEPRECATE_EOF, BackendConnection, BackendError
from proxy.backends.codec import BINARY, TEXT, StatementCodec, execute_payload, query_payload
from proxy.execution import txn
from proxy.execution.executor import _answer_merged, answer_unit_failure
from proxy.execution.readers import SUSPEND, _FedStream, kill_until_done
from proxy.execution.units import UnitFailed
from proxy.frontend.cork import corked
from proxy.frontend.wire import ClientGone
from routing.plan import RoutedStatement, StatementKind

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.backends.tap import BackendTap
    from proxy.execution.context import SessionContext as Session

__all__ = ["LEG_BUFFER_LIMIT", "MULTI_STATS", "MultiAnswer", "MultiForward", "multi_forward"]

# bytes of a unit's rows kept while the answer is busy elsewhere (another unit's rows, a slow client) before its
# socket stops being read: what a StreamReader's limit did for the slow path
LEG_BUFFER_LIMIT = 1 << 18
DRAIN_SECONDS = 10.0  # after an early end (a merged LIMIT): what `readers._finish_readers` gives the rest


class MultiStats:
    """Counts for tests and benchmarks (an instance: see fastpath.FastPathStats)."""

    __slots__ = ("enabled", "taken")

    def __init__(self) -> None:
        self.taken = 0  # multi-node SELECTs answered by this path in this process
        self.enabled = True  # tests turn it off to compare with the slow path's answer


MULTI_STATS = MultiStats()


class MultiForward(NamedTuple):
    """A multi-node SELECT this path answers: the route, the codec, and per unit its connection and framed command."""

    routed: RoutedStatement
    codec: StatementCodec
    sends: list[tuple[BackendConnection, bytes]]


def multi_forward(session: Session, db: LogicalDatabase, routed: RoutedStatement, sql: str,
                  params: Sequence[object] | None) -> MultiForward | None:
    """What `executor.execute_plan` would answer by `_select` over `_merge_readers` (one unit per data source,
    each on the connection the session holds) with nothing else to do first, sent as the slow path sends it;
    None for anything else. The caller (fastpath._sharded) has checked the command: a plain SELECT, no
    statement timeout, no sql-show, no cursor."""
    units = routed.execution_units
    if not MULTI_STATS.enabled or len(units) < 2 or routed.kind is not StatementKind.SELECT \
            or routed.result_table_renames or routed.generated_keys or routed.into_variables \
            or routed.dual_read is not None or routed.dual_repair is not None or routed.upsert is not None \
            or routed.stepwise is not None:
        return None
    if "FOUND_ROWS" in sql.upper():  # SELECT FOUND_ROWS() may be routed by the session's state (routed.routing_hints)
        return None
    state = session.txn
    if state.active and (state.xa is not None or state.lost):
        return None
    codec: StatementCodec = TEXT if params is None else BINARY
    sends: list[tuple[BackendConnection, bytes]] = []
    seen: set[str] = set()
    for unit in units:
        ds = unit.data_source
        if ds in seen or not db.sources[ds].fast_relay:  # two units on one data source: borrowed connections
            return None
        seen.add(ds)
        if state.active and ds not in state.joined:  # joining (BEGIN) is the slow path's
            return None
        conn = session.backends.get(ds)
        if conn is None or conn.broken or conn.busy or conn.tap is None:
            return None
        if params is None:
            if unit.params:
                return None
            payload = query_payload(unit)
        else:
            prepared = conn.statements.get(unit.sql)
            if prepared is None:  # prepared on this connection by the slow path first
                return None
            payload = execute_payload(prepared.ok.statement_id, unit)
        sends.append((conn, encode_packet(payload, 0)[0]))
    return MultiForward(routed, codec, sends)


class _Leg(_FedStream):
    """One unit's answer, read in its backend socket's callback (the tap's relay while it runs), parsed as
    `BackendConnection.event_batches` parses it, with the same effects on the connection."""

    def __init__(self, answer: MultiAnswer, conn: BackendConnection, unit: Any, codec: StatementCodec) -> None:
        super().__init__(conn, unit, codec)
        self.answer = answer
        tap = conn.tap
        assert tap is not None
        self.tap: BackendTap = tap
        self.parser = ResultParser(backend_deprecate_eof=BACKEND_DEPRECATE_EOF, row_frames=True)
        self.queued = 0  # bytes in `runs`
        self.paused = False  # the socket is not read until the consumer takes some of `runs`
        self.discarding = False  # rows are read and dropped (the answer needs no more of them)
        self._ended: asyncio.Future[None] | None = None

    def backend_data(self, data: bytes) -> None:
        conn = self.conn
        try:
            for ev in self.parser.feed(data):
                if type(ev) is RowFrames:
                    if not self.discarding:
                        self.runs.append(ev)
                        self.queued += len(ev.data)
                elif isinstance(ev, ResultEnd):
                    conn.status = ev.status
                    self.end = (ev.status, ev.warnings)
                elif isinstance(ev, ResultHeader):
                    self.columns = ev.columns
                    self.headed = True
                elif isinstance(ev, OKPacket):  # no result set: what _UnitStream.start makes of it
                    conn.status = int(ev.status)
                    if not self.headed:
                        self.headed = self.finished = True
                        self.status = conn.status
                elif isinstance(ev, ERRPacket):
                    self.failure = UnitFailed(self.unit.data_source, ev)
                elif isinstance(ev, bytes) and not self.discarding:  # (a row ResultParser did not keep framed)
                    self.runs.append(frames_of([ev]))
                    self.queued += len(ev) + 4
        except MalformedPacket as exc:  # the backend's answer makes no sense: the connection is unusable
            self.failure = exc
            conn.broken = True
            self._end_of_answer()
        except Exception as exc:  # a bug: this statement fails, the session and the server go on
            self.answer.session.log.exception("multi_path_failed")
            self.failure = exc
            conn.broken = True
            self._end_of_answer()
        else:
            if self.parser.done:
                conn.busy = False
                conn.raw.server_status = conn.status
                self._end_of_answer()
            elif self.queued > LEG_BUFFER_LIMIT and not self.paused:
                self.paused = True
                self.tap.transport.pause_reading()
        self.answer.wake()

    def backend_lost(self) -> None:
        """The connection broke (the tap marked it broken): what `BackendConnection._read` raises."""
        if self.ended:
            return
        self.failure = BackendError(self.conn.name, "lost connection to MySQL server during query")
        self._end_of_answer()
        self.answer.wake()

    def took(self, size: int) -> None:
        self.queued -= size
        if self.paused and self.queued <= LEG_BUFFER_LIMIT // 2:
            self._resume()

    def discard(self) -> None:
        """The answer needs nothing more from this unit: what is left is read and dropped."""
        self.discarding = True
        self.runs.clear()
        self.queued = 0
        self._resume()

    def _resume(self) -> None:
        if self.paused:
            self.paused = False
            with contextlib.suppress(Exception):  # a transport closed meanwhile
                self.tap.transport.resume_reading()

    def detach(self) -> None:
        """Whatever comes next on the socket is no longer this answer's."""
        if self.tap.relay is self:
            self.tap.relay = None
        self._resume()

    def _end_of_answer(self) -> None:
        self.ended = True
        self.detach()
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)

    def ended_future(self) -> asyncio.Future[None]:
        """Resolved when the answer has ended (for `readers.kill_until_done`)."""
        if self._ended is None:
            self._ended = asyncio.get_running_loop().create_future()
            if self.ended:
                self._ended.set_result(None)
        return self._ended


class MultiAnswer:
    """One multi-node SELECT answered by the socket callbacks: the units' commands are written, then `_answer`
    is stepped by hand (`_step`) each time a unit brings bytes it waited for, and by the future's callback when
    it awaits one. `on_done` is called once when the statement is answered and every unit's answer has ended."""

    def __init__(self, session: Session, db: LogicalDatabase, target: MultiForward,
                 on_done: Callable[[MultiAnswer], None]) -> None:
        self.session = session
        self.db = db
        self.routed = target.routed
        self.codec = target.codec
        self.on_done = on_done
        units = target.routed.execution_units
        self.legs = [_Leg(self, conn, unit, target.codec) for (conn, _), unit in zip(target.sends, units, strict=True)]
        self._sends = target.sends
        self._coro: Coroutine[Any, Any, None] | None = None
        self._waiting = False  # the coroutine waits for a unit's bytes (not for a future)
        self._running = False
        self._again = False  # woken while it ran: step again
        self.aborted = False

    def start(self) -> None:
        MULTI_STATS.taken += 1
        session = self.session
        for leg, (conn, data) in zip(self.legs, self._sends, strict=True):
            session.in_use.add(conn)
            leg.tap.relay = leg
            conn.busy = True
            conn.relayed = False
            leg.tap.transport.write(data)
        self._coro = self._answer()
        self._step()

    def wake(self) -> None:
        """A unit brought bytes (or ended): the coroutine goes on if it waited for that."""
        if self._running:
            self._again = True
        elif self._waiting:
            self._step()

    def _step(self, _future: object = None) -> None:
        while True:
            coro = self._coro
            if coro is None or self._running:
                return
            self._running = True
            self._waiting = self._again = False
            try:
                got = coro.send(None)
            except BaseException as exc:  # StopIteration: answered (anything else escaped `_answer`'s handlers)
                self._coro = None
                self._running = False
                if not isinstance(exc, StopIteration):
                    self.session.log.error("multi_path_failed", error=repr(exc))
                if not self.aborted:
                    self.on_done(self)
                return
            self._running = False
            if got is SUSPEND:
                self._waiting = True
                if self._again:
                    continue
                return
            if got is None:  # a bare yield (asyncio.sleep(0)): go on at the loop's next turn
                asyncio.get_running_loop().call_soon(self._step)
                return
            got._asyncio_future_blocking = False  # type: ignore[attr-defined]  # as asyncio.Task does
            got.add_done_callback(self._step)  # type: ignore[attr-defined]
            return

    async def _answer(self) -> None:
        """`executor.execute_plan`'s `_select` from `_start_all` on, and the ERR of its failures (Session._dispatch's
        for a lost connection or a malformed answer)."""
        session, legs = self.session, self.legs
        try:
            answered = False
            try:
                await self._headers()
                with corked(session.wire):
                    await _answer_merged(session, self.routed, legs, self.codec)
                answered = True
            finally:
                if not self.aborted and not all(leg.ended for leg in legs):
                    # KILL QUERY (after a failure) or the rest read and dropped: real tasks and timers
                    await asyncio.ensure_future(self._finish(failed=not answered))
                session.drop_broken()
        except UnitFailed as exc:
            answer_unit_failure(session, self.db, self.routed, exc)
        except MergeError as exc:
            session.error(exc.errno, exc.message, exc.sqlstate)
        except BackendError as exc:
            session.log.warning("backend_error", data_source=exc.data_source, error=str(exc))
            session.error(exc.errno, txn.note_failure(session, exc), exc.sqlstate)
        except MalformedPacket as exc:
            session.error(ErrorCode.MALFORMED_PACKET, f"Malformed communication packet: {exc}", "HY000")
        except ClientGone:
            session.wire.writer.transport.close()  # the session's read sees the client gone and ends it
        except Exception as exc:  # a bug must cost one statement, not the session
            session.log.exception("command_failed")
            session.drop_broken()
            session.error(ErrorCode.UNKNOWN_ERROR, f"shardproxy internal error: {type(exc).__name__}: {exc}", "HY000")

    async def _headers(self) -> None:
        """`executor._start_all`: every unit's header, or the first failure before one (raised; the others are
        stopped by `_finish`)."""
        legs = self.legs
        while True:
            waiting = False
            for leg in legs:
                if not leg.headed:
                    if leg.failure is not None:
                        leg.finished = True
                        raise leg.failure
                    waiting = True
            if not waiting:
                return
            await SUSPEND

    async def _finish(self, *, failed: bool) -> None:
        """`readers._finish_readers` for the units whose answers have not ended: after a failure, KILL QUERY each
        until its answer ends; after an early end (a merged LIMIT), their rest read and dropped, for at most
        DRAIN_SECONDS, after which a connection still answering is dropped."""
        running = [leg for leg in self.legs if not leg.ended]
        for leg in running:
            leg.discard()
        if failed:
            await asyncio.gather(*(kill_until_done(leg.conn, leg.ended_future()) for leg in running))
            return
        await asyncio.wait([leg.ended_future() for leg in running], timeout=DRAIN_SECONDS)
        for leg in running:
            if not leg.ended:
                leg.conn.broken = True
                leg.detach()

    def abort(self) -> None:
        """The session ends: stop (its connections, still busy, are closed by their release)."""
        self.aborted = True
        for leg in self.legs:
            leg.detach()
        coro, self._coro = self._coro, None
        if coro is not None:
            with contextlib.suppress(BaseException):
                coro.close()
