"""The synchronous multi-node SELECT: a SELECT routed to one unit on each of several data sources, answered
inside the socket callbacks.

Why: the fast path (proxy.execution.fastpath) answers a single-node SELECT inside `data_received`; a SELECT on
several nodes went through the session's coroutine, where the proxy's own work per statement (the command's
dispatch and classification, the route again, a task per unit, an async generator and a StreamReader per
backend answer, the header wait) would cost several times a point select (bench/RESULTS.md). Here the fast path
routes the statement as before and, when `multi_forward` allows it, writes every unit's command at once to the
connections the session holds; each backend socket's bytes are parsed in its callback (`legs.Leg`, a
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
from merge.aggregate import MergeStats
from merge.pipeline import decoded_width, merge_rows_sync
from merge.raw import raw_mergeable, raw_order_merge_whole
from protocol.constants import Capability, ErrorCode
from protocol.framing import encode_packet
from protocol.packets import ERRPacket
from protocol.rowframes import RowFrames, renumber
from proxy.backends.backend import BackendConnection, BackendError
from proxy.backends.codec import BINARY, TEXT, StatementCodec, execute_payload, query_payload
from proxy.backends.runtime import NO_COLUMN_SCHEMA
from proxy.execution.errors import answer_error, error_packet
from proxy.execution.executor import (
    _answer_merged,
    _decoder,
    _logic_columns,
    _metas,
    _needs_merge,
    _send_end,
    _send_header,
)
from proxy.execution.legs import LEG_BUFFER_LIMIT, Chain, Leg, framed_head, node_rows
from proxy.execution.memo import IdentityMemo
from proxy.execution.readers import SUSPEND, kill_until_done
from proxy.execution.units import UnitFailed, _renames
from proxy.frontend.cork import corked
from proxy.frontend.wire import ClientGone
from routing.plan import RoutedStatement, StatementKind

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

__all__ = ["LEG_BUFFER_LIMIT", "MULTI_STATS", "PIPELINE_ROWS", "PIPELINE_UNITS", "WHOLE_BYTES", "MultiAnswer",
           "MultiForward", "multi_forward"]

DRAIN_SECONDS = 10.0  # after an early end (a merged LIMIT): what `readers._finish_readers` gives the rest
# several units on one data source are pipelined on the session's connection to it (`legs.Chain`) only when the answer
# reads them in their order there (concatenated rows), or when each node returns at most this many rows (a merge
# needs every unit's head row at once: a connection's earlier units are then held whole, see `_pipelinable`)
PIPELINE_ROWS = 1000
PIPELINE_UNITS = 64  # units written back to back on one connection at most
_DEPRECATE_EOF = int(Capability.DEPRECATE_EOF)
# An answer waits for every unit's whole answer, to be written in one step (`MultiAnswer._whole`), while
# the units' rows that have arrived stay under this many bytes (the cork's limit: past it the answer streams)
WHOLE_BYTES = 1 << 16


class MultiStats:
    """Counts for tests and benchmarks (an instance: see fastpath.FastPathStats)."""

    __slots__ = ("enabled", "taken", "whole", "whole_enabled")

    def __init__(self) -> None:
        self.taken = 0  # multi-node SELECTs answered by this path in this process
        self.whole = 0  # of those, answered in one step once every unit had arrived (`MultiAnswer._whole`)
        self.enabled = True  # tests turn it off to compare with the slow path's answer
        self.whole_enabled = True  # tests turn it off to compare `_whole` with the coroutine's answer


MULTI_STATS = MultiStats()


class MultiForward(NamedTuple):
    """A multi-node SELECT this path answers: the route, the codec, and per unit (in the route's order) its
    connection and framed command (None: a prepared unit whose statement that connection has not prepared yet,
    prepared first by `MultiAnswer`)."""

    routed: RoutedStatement
    codec: StatementCodec
    sends: list[tuple[BackendConnection, bytes | None]]


def multi_forward(session: Session, db: LogicalDatabase, routed: RoutedStatement, sql: str,
                  params: Sequence[object] | None,
                  retarget: Callable[[int], bytes | None] | None = None) -> MultiForward | None:
    """What `executor.execute_plan` would answer by `_select` with nothing else to do first, each data source's
    units on the connection the session holds to it, sent as the slow path sends them; None for anything else. The
    caller (fastpath._sharded) has checked the command: a plain SELECT, no statement timeout, no sql-show, no
    cursor. Several units on one data source are written back to back on that connection (the slow path borrows
    a connection per unit, or reads them one after another), only where `_pipelinable` says it is safe.
    `retarget`: the client's COM_STMT_EXECUTE re-addressed to a backend statement id (protocol.retarget), for the
    units whose parameters are the statement's own, in order (no execute encoded anew for each unit)."""
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
    sends: list[tuple[BackendConnection, bytes | None]] = []
    held: dict[str, tuple[BackendConnection, int]] = {}  # data source -> its connection, its units so far
    for unit in units:
        ds = unit.data_source
        known = held.get(ds)
        if known is None:
            if not db.sources[ds].fast_relay:
                return None
            if state.active and ds not in state.joined:  # joining (BEGIN) is the slow path's
                return None
            conn = session.backends.get(ds)
            if conn is None or conn.broken or conn.busy or conn.tap is None:
                return None
            held[ds] = (conn, 1)
        else:
            conn = known[0]
            if known[1] >= PIPELINE_UNITS:
                return None
            held[ds] = (conn, known[1] + 1)
        payload: bytes | None
        if params is None:
            if unit.params:
                return None
            payload = _query_frame(unit) if routed.reused else encode_packet(query_payload(unit), 0)[0]
        else:
            prepared = conn.statements.get(unit.sql)  # else prepared on this connection first (MultiAnswer._prepare)
            if prepared is None:
                payload = None
            else:
                framed = retarget(prepared.ok.statement_id) if retarget is not None and unit.params == params else None
                payload = framed or encode_packet(execute_payload(prepared.ok.statement_id, unit), 0)[0]
        sends.append((conn, payload))
    if len(held) < len(units) and not _pipelinable(session, routed):
        return None
    return MultiForward(routed, codec, sends)


# A unit's framed COM_QUERY, kept for the units of routes the kernel hands out again (a scatter SELECT's
# text routes the same way every time: `RoutedStatement.reused`); only units of short SQL (a bound on what it holds)
_QUERY_FRAMES: IdentityMemo[bytes] = IdentityMemo(1024)
_QUERY_FRAME_SQL = 2048


def _query_frame(unit: Any) -> bytes:
    frame = _QUERY_FRAMES.get(unit)
    if frame is not None:
        return frame
    frame = encode_packet(query_payload(unit), 0)[0]
    return frame if len(unit.sql) > _QUERY_FRAME_SQL else _QUERY_FRAMES.put(unit, frame)


def _pipelinable(session: Session, routed: RoutedStatement) -> bool:
    """May a data source's units be written back to back on one connection? MySQL answers them one after another, in
    the order written, so a later unit's rows can be read only once every earlier unit's answer there has been read
    whole. Safe (no reader waits for bytes stuck behind rows nobody reads) when:

    * the rows are concatenated (no merge spec): the answer relays unit after unit by data source
      (`executor._select_concatenated`'s order, `MultiAnswer.readers`), which is each connection's order; the unit
      being relayed is always the one its connection is answering, so its socket is paused and resumed as usual;
    * or every node returns at most `PIPELINE_ROWS` rows by its own rewritten statement (`MergeSpec.node_rows`: a
      LIMIT the nodes keep, an aggregate without GROUP BY), and no more than the merge may hold
      (`proxy-merge-memory-rows`): a merge needs every unit's head row at once, so a connection's earlier units are
      read whole into memory, never paused (`legs.Chain.pausable`), as the slow path reads units it has no connection
      for (`readers._BufferedUnit`).

    Anything else (a merge over unbounded rows: ORDER BY without LIMIT, GROUP BY the nodes cannot cut, WITH TIES)
    is left to the slow path's borrowed connections."""
    spec = routed.merge_spec
    if spec is None:
        return True
    rows = spec.node_rows
    return rows is not None and rows <= min(PIPELINE_ROWS, session.server.merge_memory_rows)


class MultiAnswer:
    """One multi-node SELECT answered by the socket callbacks: the units' commands are written (per connection,
    back to back, in one write), then `_answer` is stepped by hand (`_step`) each time a unit brings bytes it waited
    for, and by the future's callback when it awaits one. `on_done` is called once when the statement is answered
    and every unit's answer has ended."""

    def __init__(self, session: Session, db: LogicalDatabase, target: MultiForward,
                 on_done: Callable[[MultiAnswer], None]) -> None:
        self.session = session
        self.db = db
        self.routed = target.routed
        self.codec = target.codec
        self.on_done = on_done
        units = target.routed.execution_units
        chains: dict[int, Chain] = {}  # by the connection (one per data source)
        self.legs: list[Leg] = []  # in the route's order
        for (conn, command), unit in zip(target.sends, units, strict=True):
            chain = chains.get(id(conn))
            if chain is None:
                chain = chains[id(conn)] = Chain(self, conn)
            leg = Leg(chain, unit, target.codec)
            leg.command = command
            chain.legs.append(leg)
            self.legs.append(leg)
        self.chains = list(chains.values())  # in the order of their data sources' first units
        if target.routed.merge_spec is None:
            # concatenated: relayed by data source, unit after unit, as executor._select_concatenated does (the
            # order of each connection's answers); the answer starts once each data source's first unit has its
            # header, as that function's `_start_all(firsts)`
            self.readers = [leg for chain in self.chains for leg in chain.legs]
            self.head_legs = [chain.legs[0] for chain in self.chains]
        else:
            # merged: every unit's header first (executor._start_all); a connection's earlier units are held whole,
            # within MergeSpec.node_rows (`_pipelinable`), for its later units' rows to arrive
            self.readers = self.head_legs = self.legs
            for chain in self.chains:
                chain.pausable = len(chain.legs) == 1
        self.sent = False  # the units' commands are written
        self._coro: Coroutine[Any, Any, None] | None = None
        self._waiting = False  # the coroutine waits for a unit's bytes (not for a future)
        self._running = False
        self._again = False  # woken while it ran: step again
        self._deferred = False  # the units' answers are awaited whole before anything is written (`_wake_deferred`)
        self._writing = False  # `_whole` has started writing the answer
        self.aborted = False

    def start(self) -> None:
        MULTI_STATS.taken += 1
        session = self.session
        for chain in self.chains:
            session.in_use.add(chain.conn)
        for leg in self.legs:
            if leg.command is None:
                break
        else:
            self._send()
            if MULTI_STATS.whole_enabled:
                self._deferred = True  # `wake` answers in one step once every unit has arrived, or starts `_answer`
                return
        self._begin()

    def _begin(self) -> None:
        """Answer by the coroutine (`_answer`), from what the units have brought so far."""
        self._deferred = False
        self._coro = self._answer()
        self._step()

    def _send(self) -> None:
        for chain in self.chains:
            legs = chain.legs
            chain.send((legs[0].command or b"") if len(legs) == 1 else b"".join(leg.command or b"" for leg in legs))
        self.sent = True

    async def _prepare(self) -> None:
        """COM_STMT_PREPARE of the units' statements their connections have not prepared yet, once per connection,
        as `codec.BinaryCodec.command` does before a unit's first execute (a refusal fails the statement as there:
        nothing has run); then every unit's COM_STMT_EXECUTE, from the statements as prepared now."""
        legs = self.legs
        for _ in range(4):  # a prepare may close the connection's oldest statement (MAX_STATEMENTS_PER_CONNECTION)
            missing = [leg for leg in legs if leg.unit.sql not in leg.conn.statements]
            if not missing:
                break
            for leg in missing:
                answer = await leg.conn.prepared(leg.unit.sql)
                if isinstance(answer, ERRPacket):
                    raise UnitFailed(leg.unit.data_source, answer)
        for leg in legs:
            prepared = leg.conn.statements.get(leg.unit.sql)
            if prepared is None:
                raise BackendError(leg.conn.name, "the statement's units could not all stay prepared on the connection",
                                   errno=ErrorCode.UNKNOWN_ERROR)
            leg.command = encode_packet(execute_payload(prepared.ok.statement_id, leg.unit), 0)[0]

    def wake(self) -> None:
        """A unit brought bytes (or ended): the coroutine goes on if it waited for that."""
        if self._deferred:
            self._wake_deferred()
        elif self._running:
            self._again = True
        elif self._waiting:
            self._step()

    def _wake_deferred(self) -> None:
        """Before the answer has started: once every unit's answer has ended, it is written in one step
        (`_whole`); a failure, rows past WHOLE_BYTES, or an answer `_whole` does not take start the coroutine,
        which goes on from what the units have brought (nothing of it was taken)."""
        queued = 0
        ended = True
        for leg in self.legs:
            if leg.failure is not None:
                self._begin()
                return
            queued += leg.queued
            if not leg.ended:
                ended = False
        if ended:
            self._deferred = False
            session = self.session
            try:
                done = self._whole()
            except Exception as exc:  # a bug
                session.log.exception("multi_path_failed")
                done = self._writing  # the answer had started: it ends with the error
                if done:
                    err = error_packet(exc)
                    session.error(err.errno, err.message, err.sqlstate)
                # else nothing was written: the coroutine answers (and names the bug, if it meets it too)
            if done:
                self.session.drop_broken()
                self.on_done(self)
                self._release()
            else:
                self._begin()
        elif queued > WHOLE_BYTES:
            self._begin()

    def _whole(self) -> bool:
        """Every unit's answer is here: `executor._answer_merged`'s answer for the units' result sets (concatenated,
        merged on their row frames by `merge.raw`, or merged on decoded rows by `merge.pipeline`), worked out whole,
        then written at once, with no coroutine, generator or task per unit (they would cost more than the
        answer's own work for the short answers of ranges and scatters). False (nothing written, nothing taken)
        for anything else: a unit without a result set, a merge's error (the coroutine answers it)."""
        readers = self.readers
        for leg in readers:
            if not leg.columns:
                return False
        session = self.session
        routed = self.routed
        spec = routed.merge_spec
        node_columns = readers[0].columns
        ncols = len(node_columns)
        visible = spec.visible_columns if spec is not None else ncols
        schema = session.database.column_schema if session.database else NO_COLUMN_SCHEMA
        renames = _renames(routed)
        runs: Sequence[RowFrames] | None = None  # the rows as the nodes framed them
        rows: list[bytes] = []  # else the merged rows' payloads
        finished: list[bool] | None = None  # per reader, whether the merge read its rows to their end
        found: int | None = None  # FOUND_ROWS() when not the rows sent
        adjustment = 0  # the merge's own warnings
        if spec is None or not _needs_merge(spec, ncols):
            runs = [frames for leg in readers for frames in leg.runs]
        elif raw_mergeable(spec, ncols):
            decode = None if self.codec is TEXT else _decoder(self.codec, node_columns)
            try:
                merged, finished = raw_order_merge_whole([leg.runs for leg in readers], spec, _metas(node_columns),
                                                         decode, session.server.merge_memory_rows)
            except MergeError:
                return False
            runs = (merged,)
        else:
            metas = _metas(node_columns)
            width = decoded_width(spec, metas)
            finished = [False] * len(readers)
            stats = MergeStats()
            encode = self.codec.encode_row
            columns = _logic_columns(node_columns[:visible], renames, schema)[0]
            try:
                for row in merge_rows_sync([node_rows(leg.runs, self.codec, node_columns,
                                                       width if width < ncols else None, finished, i)
                                            for i, leg in enumerate(readers)],
                                           spec, metas, memory_row_budget=session.server.merge_memory_rows,
                                           warnings=stats):
                    rows.append(encode(row, columns))
            except MergeError:
                return False
            adjustment = stats.adjustment
            if spec.found_rows is not None:
                found = stats.found_rows
        MULTI_STATS.whole += 1  # (before the client can have the answer)
        self._writing = True
        wire = session.wire
        if wire.writer.transport.is_closing():  # the client left: the session's read sees it and ends the session
            return True
        status = warnings = sent = 0
        with corked(wire):
            if wire.seq == 1:  # (the answer's first packet: `FastPath._start_multi`)
                wire.writer.write(framed_head(node_columns, renames, schema, visible))
                wire.seq = (visible + 2) & 0xFF
                if not int(session.capabilities) & _DEPRECATE_EOF:
                    wire.send(b"\xfe\x00\x00" + (session.status & 0xFFFF).to_bytes(2, "little"))  # EOFPacket(0, status)
            else:
                _send_header(session, *_logic_columns(node_columns[:visible], renames, schema))
            if runs is None:
                wire.send_many(rows)
                sent = len(rows)
            else:
                write = wire.writer.write
                for run in runs:
                    data = run.data
                    buf = data if isinstance(data, bytearray) else bytearray(data)
                    wire.seq = renumber(buf, wire.seq)
                    sent += run.rows
                    write(buf)
            for i, leg in enumerate(readers):
                leg.runs.clear()
                leg.queued = 0
                if finished is None or finished[i]:  # as the coroutine's readers that reach their end
                    leg.finished = True
                    leg.status, leg.warnings = leg.end
                    status = leg.status
                    warnings += leg.warnings
                else:
                    status = 0
            _send_end(session, status, max(0, warnings + adjustment))
        session.found_rows_value, session.found_rows_source = sent if found is None else found, None
        session.rows_sent += sent
        session.row_count = -1  # ROW_COUNT() after a result set
        return True

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
                self._release()
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
        session = self.session
        try:
            answered = False
            try:
                if not self.sent:
                    await self._prepare()
                    self._send()
                await self._headers()
                with corked(session.wire):
                    await _answer_merged(session, self.routed, self.readers, self.codec)
                answered = True
            finally:
                if self.sent and not self.aborted and not self._all_ended():
                    # KILL QUERY (after a failure) or the rest read and dropped: real tasks and timers
                    await asyncio.ensure_future(self._finish(failed=not answered))
                session.drop_broken()
        except ClientGone:
            session.wire.writer.transport.close()  # the session's read sees the client gone and ends it
        except Exception as exc:  # a unit's ERR, a merge's limit, a lost backend, a bug: as the coroutine path's
            answer_error(session, exc, db=self.db, routed=self.routed)

    def _all_ended(self) -> bool:
        for chain in self.chains:
            if not chain.ended:
                return False
        return True

    async def _headers(self) -> None:
        """`executor._start_all`: the header of every unit the answer starts with (`head_legs`), or the first failure
        before one (raised; the others are stopped by `_finish`). Once the command was killed (KILL QUERY through the
        proxy: `session.query_killed`), any unit's failure is raised at once: the KILL stopped the command running on
        each connection, often after MariaDB had sent the header of a sorted result, and a unit pipelined behind it
        starts only then; waiting for its header would let it run to its end before the statement ends (the slow
        path's units, each on its own connection, were all killed at once)."""
        legs = self.head_legs
        session = self.session
        while True:
            waiting = False
            for leg in legs:
                if leg.failure is not None and (not leg.headed or session.query_killed):
                    leg.finished = True
                    raise leg.failure
                if not leg.headed:
                    waiting = True
            if not waiting:
                return
            await SUSPEND

    async def _finish(self, *, failed: bool) -> None:
        """`readers._finish_readers` for the connections whose answers have not all ended: after a failure, KILL QUERY
        each until its last answer ends (a KILL stops the command running; the next one written behind it then
        starts, and is killed in turn: every answer due is read before the connection is used again); after an
        early end (a merged LIMIT), their rest read and dropped, for at most DRAIN_SECONDS, after which a
        connection still answering is dropped."""
        running = [chain for chain in self.chains if not chain.ended]
        for chain in running:
            chain.discard()
        if failed:
            await asyncio.gather(*(kill_until_done(chain.conn, chain.ended_future()) for chain in running))
            return
        await asyncio.wait([chain.ended_future() for chain in running], timeout=DRAIN_SECONDS)
        for chain in running:
            if not chain.ended:
                chain.conn.broken = True
                chain.detach()

    def abort(self) -> None:
        """The session ends: stop (its connections, still busy, are closed by their release)."""
        self.aborted = True
        self._deferred = False
        for chain in self.chains:
            chain.detach()
        coro, self._coro = self._coro, None
        if coro is not None:
            with contextlib.suppress(BaseException):
                coro.close()
        self._release()

    def _release(self) -> None:
        """The answer is over: drop the references that make cycles of it (a chain's legs and each leg's chain, the
        answer's legs and each chain's answer), so that reference counting frees it at once (a multi-node SELECT leaves
        nothing for the garbage collector's passes to find)."""
        for chain in self.chains:
            chain.legs = []
        self.chains = []
        self.legs = self.readers = self.head_legs = []
