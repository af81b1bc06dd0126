"""COMMIT and ROLLBACK of a LOCAL transaction on a sharded database, answered in the socket callbacks.

Why: the fast path (proxy.execution.fastpath) answers a transaction's BEGIN and its statements inside
`data_received`; its COMMIT went through the session's coroutine, whose own work (the command read from a
StreamReader, its classification, a task woken per backend answer) would weigh as much as BEGIN, the joins and
COMMIT themselves in a sharded `oltp_read_only` transaction (bench/RESULTS.md). Here the statement is written to every
joined data source in one callback, each answer (one OK or ERR packet) is read in its socket's callback, and once
all have answered (or their connections are lost) the end is the session coroutine's own:
`txn_end.local_outcomes` and `txn_end.local_ended` (the same outcome, the same error naming each data source).

`fast_end` is an allow-list: XA, autocommit=0, a transaction with a lost part, upsert locks to release, a
connection that is not idle on a plain data source: all go to the session's coroutine unchanged. As there, a client
leaving meanwhile does not stop the fan-out half-way (`session.ending_transaction`; `abort` returns the future the
session's close waits on before it gives the connections back).
"""

from __future__ import annotations

import asyncio
import select
from typing import TYPE_CHECKING

from protocol.framing import encode_packet
from proxy.backends.backend import BackendConnection, BackendError
from proxy.execution.errors import answer_error
from proxy.execution.txn_end import end_warnings, local_ended, local_outcomes, warned_by

if TYPE_CHECKING:
    from collections.abc import Callable

    from protocol.packets import ERRPacket, OKPacket
    from proxy.backends.runtime import LogicalDatabase
    from proxy.backends.tap import BackendTap
    from proxy.execution.context import SessionContext as Session

__all__ = ["FAN_STATS", "CommitFan", "fast_end"]

_FRAMES = {verb: encode_packet(b"\x03" + verb.encode(), 0)[0] for verb in ("COMMIT", "ROLLBACK")}


def fast_end(session: Session, db: LogicalDatabase, verb: str) -> list[tuple[str, BackendConnection]] | None:
    """The joined data sources and their connections, when `end_transaction(session, verb)` would do nothing but
    send `verb` to each of them (a LOCAL transaction, every part of it there, nothing else to release); None
    otherwise."""
    txn = session.txn
    if txn.xa is not None or session.server.tm.xa or not txn.autocommit or txn.lost or txn.upsert_locks:
        return None
    for held in session.backends.values():
        if held.broken:  # found broken since the last statement: `_drop_lost` reports it
            return None
    work: list[tuple[str, BackendConnection]] = []
    fds: list[int] = []
    for name in txn.joined:
        conn = session.backends.get(name)
        source = db.sources.get(name)
        if conn is None or conn.busy or conn.tap is None or source is None or not source.fast_relay:
            return None
        work.append((name, conn))
        sock = conn.tap.transport.get_extra_info("socket")
        if sock is None:
            return None
        fds.append(sock.fileno())
    # an idle connection with something to read has a server that closed it (or said something unasked) since: the
    # loop may not have handled that yet when the client's COMMIT comes in the same turn; a turn later, in the
    # coroutine, `_drop_lost` sees the part lost and nothing is committed (instead of ds_0 committed, ds_1 unknown)
    if fds and select.select(fds, (), (), 0)[0]:
        return None
    return work


class _Answer:
    """One data source's answer to the statement, read by its socket's tap (a `BackendRelay`): the first packet,
    as `BackendConnection.read_pipeline` reads it."""

    __slots__ = ("buf", "conn", "done", "fan", "result", "tap")

    def __init__(self, fan: CommitFan, conn: BackendConnection, tap: BackendTap) -> None:
        self.fan = fan
        self.conn = conn
        self.tap = tap
        self.buf = b""
        self.done = False
        self.result: list[OKPacket | ERRPacket] | Exception | None = None

    def backend_data(self, data: bytes) -> None:
        buf = self.buf + data
        if len(buf) < 4 or len(buf) < 4 + (n := buf[0] | (buf[1] << 8) | (buf[2] << 16)):
            self.buf = buf
            return
        conn = self.conn
        payload, rest = buf[4:4 + n], buf[4 + n:]
        try:
            self.result = [conn.statement_answer(payload, self.fan.verb)]
        except Exception as exc:
            conn.broken = True
            self.result = exc
        if rest:  # bytes nobody asked for: what follows on this connection cannot be trusted
            conn.broken = True
        if not conn.broken:
            conn.busy = False
            conn.raw.server_status = conn.status
        self._end()

    def backend_lost(self) -> None:
        if not self.done:
            self.result = BackendError(self.conn.name, "lost connection to MySQL server during query")
            self._end()

    def _end(self) -> None:
        self.done = True
        self.buf = b""
        if self.tap.relay is self:
            self.tap.relay = None
        self.fan.answered()


class FanStats:
    """Counts for tests and benchmarks (an instance: see fastpath.FastPathStats)."""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        self.taken = 0  # COMMITs and ROLLBACKs answered by this path in this process


FAN_STATS = FanStats()


class CommitFan:
    """One COMMIT or ROLLBACK answered by the socket callbacks: `start` writes it to every joined connection;
    `on_done` is called once every one has answered and the client has the answer."""

    def __init__(self, session: Session, verb: str, work: list[tuple[str, BackendConnection]],
                 on_done: Callable[[CommitFan], None]) -> None:
        self.session = session
        self.verb = verb
        self.work = work
        self.on_done = on_done
        self.answers: list[_Answer] = []
        self.concluded = False
        self.aborted = False
        self._done: asyncio.Future[None] | None = None

    def start(self) -> None:
        FAN_STATS.taken += 1
        session = self.session
        session.commit_note = ""
        session.ending_transaction = True  # a client leaving now does not stop the fan-out half-way
        frame = _FRAMES[self.verb]
        for _name, conn in self.work:
            tap = conn.tap
            assert tap is not None
            answer = _Answer(self, conn, tap)
            self.answers.append(answer)
            tap.relay = answer
            conn.busy = True
            conn.relayed = False
            session.in_use.add(conn)
        for answer in self.answers:
            try:
                answer.tap.transport.write(frame)
            except Exception as exc:  # a transport closed meanwhile: that data source's answer is the failure
                answer.conn.broken = True
                answer.result = exc
                answer.done = True
                answer.tap.relay = None
        self.answered()

    def answered(self) -> None:
        if self.concluded:
            return
        for answer in self.answers:
            if not answer.done:
                return
        self.concluded = True
        session = self.session
        names = [name for name, _conn in self.work]
        conns = dict(self.work)
        results = {name: answer.result for name, answer in zip(names, self.answers, strict=True)
                   if answer.result is not None}
        try:
            warnings = end_warnings(results)
            warned_by(session, results)
            ended, failed = local_outcomes(self.verb, names, conns, results)
            failure = local_ended(session, self.verb, self.verb, self.verb, "", ended, failed, {}, [])
        finally:
            session.ending_transaction = False
        if not self.aborted:
            if failure is not None:
                answer_error(session, failure)
            else:
                note, session.commit_note = session.commit_note, ""
                session.ok(info=note.encode() if note else b"", warnings=warnings)
        if self._done is not None and not self._done.done():
            self._done.set_result(None)
        if not self.aborted:
            self.on_done(self)
        self.answers = []  # (each answer's `fan` made a cycle: freed now, not by the garbage collector)

    def abort(self) -> asyncio.Future[None] | None:
        """The session ends (the client left): the answers still due are read all the same, as the session's
        coroutine finishes a fan-out it started; the future the session's close awaits before it gives the
        connections back (None: nothing is due)."""
        self.aborted = True
        if self.concluded:
            return None
        if self._done is None:
            self._done = asyncio.get_running_loop().create_future()
        return self._done
