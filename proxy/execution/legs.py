"""One multi-node SELECT's units answered in the backend sockets' callbacks (proxy.execution.multipath): a unit's
answer parsed from the bytes its connection hands over (`Leg`), and the units of one data source written back to back
on the session's connection to it (`Chain`), with the same effects on the connection as
`BackendConnection.event_batches`. Also the framed pieces of the answer the callbacks write (`framed_head`) and a
unit's rows decoded for a merge (`node_rows`).

Why its own module: the answer (multipath.MultiAnswer) decides what to write and when; this reads the backends. A
chain knows of its answer only `AnswerLike` (no import back).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from protocol.framing import encode_packet
from protocol.packets import ColumnDefinition41, ERRPacket, OKPacket, column_count_payload
from protocol.results import ResultEnd, ResultHeader, ResultParser, whole_result
from protocol.rowframes import RowFrames, frames_of
from protocol.wire import MalformedPacket
from proxy.backends.backend import BACKEND_DEPRECATE_EOF, BackendConnection, BackendError
from proxy.backends.codec import StatementCodec
from proxy.execution.executor import _logic_columns
from proxy.execution.memo import IdentityMemo
from proxy.execution.readers import _FedStream
from proxy.execution.units import UnitFailed

if TYPE_CHECKING:
    from proxy.backends.runtime import ColumnSchema
    from proxy.backends.tap import BackendTap

__all__ = ["LEG_BUFFER_LIMIT", "AnswerLike", "Chain", "Leg", "framed_head", "node_rows"]

# bytes of a unit's rows kept while the answer is busy elsewhere (another unit's rows, a slow client) before its
# socket stops being read: what a StreamReader's limit did for the slow path
LEG_BUFFER_LIMIT = 1 << 18


class AnswerLike(Protocol):
    """What a chain asks of the answer it serves."""

    session: Any  # its `log` reports a bug met while parsing

    def wake(self) -> None:
        """Bytes arrived (or a connection was lost): the answer looks at its units again."""


class Leg(_FedStream):
    """One unit's answer, parsed from the bytes its connection's `Chain` hands over (in the backend socket's
    callback), as `BackendConnection.event_batches` parses it, with the same effects on the connection."""

    def __init__(self, chain: Chain, unit: Any, codec: StatementCodec) -> None:
        super().__init__(chain.conn, unit, codec)
        self.chain = chain
        self.parser: ResultParser | None = None  # made when `whole_result` does not take the answer
        self.queued = 0  # bytes in `runs`
        self.discarding = False  # rows are read and dropped (the answer needs no more of them)
        self.command: bytes | None = None  # the framed command (None: its statement is to be prepared first)
        self.fresh = True  # nothing of the answer has been read yet

    def feed(self, data: bytes) -> bytes | None:
        """Parse `data`: None while this answer goes on; once it has ended, the bytes that came after it (the next
        pipelined answer's, b"" when none). A malformed answer (or a bug) ends it with the connection broken."""
        conn = self.conn
        if self.fresh:
            self.fresh = False
            if not BACKEND_DEPRECATE_EOF and (whole := whole_result(data)) is not None:
                # the whole answer in one read, under a header seen lately (the usual unit of a range or a
                # scatter): what the parser's events below would do, from one walk of its rows
                header, frames, status, warnings, end = whole
                self.columns = header.columns
                self.headed = True
                if frames is not None and not self.discarding:
                    self.runs.append(frames)
                    self.queued += len(frames.data)
                conn.status = status
                self.end = (status, warnings)
                self.ended = True
                return data[end:]
        parser = self.parser
        if parser is None:
            parser = self.parser = ResultParser(backend_deprecate_eof=BACKEND_DEPRECATE_EOF, row_frames=True)
        try:
            for ev in parser.feed(data):
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
        except Exception as exc:  # a bug: this statement fails, the session and the server go on
            self.chain.answer.session.log.exception("multi_path_failed")
            self.failure = exc
        else:
            if not parser.done:
                return None
            self.ended = True
            return parser.take_rest()
        conn.broken = True
        self.ended = True
        return b""

    def took(self, size: int) -> None:
        self.queued -= size
        self.chain.took()

    def discard(self) -> None:
        """The answer needs nothing more from this unit: what is left is read and dropped."""
        self.discarding = True
        self.runs.clear()
        self.queued = 0


# The framed column count and definitions of a multi-node answer (from sequence id 1), by the node header
# the parser hands out again (`protocol.results`), for the renames and schema they were made for
_HEADS: IdentityMemo[tuple[dict[str, str], ColumnSchema, int, bytes]] = IdentityMemo(1024)


def framed_head(node_columns: tuple[ColumnDefinition41, ...], renames: dict[str, str], schema: ColumnSchema,
                visible: int) -> bytes:
    """`executor._send_header`'s packets before the EOF, framed from sequence id 1, for the logic form of the
    first `visible` node columns (made once per header, renames and schema: `_logic_columns`, then framed)."""
    known = _HEADS.get(node_columns)
    if known is not None and known[0] is renames and known[1] is schema and known[2] == visible:
        return known[3]
    payloads = _logic_columns(node_columns[:visible], renames, schema)[1]
    parts: list[bytes] = []
    seq = 1
    for payload in (column_count_payload(visible), *payloads):
        frame, seq = encode_packet(payload, seq)
        parts.append(frame)
    head = b"".join(parts)
    return _HEADS.put(node_columns, (renames, schema, visible, head))[3]


def node_rows(runs: Sequence[RowFrames], codec: StatementCodec, columns: tuple[ColumnDefinition41, ...],
              count: int | None, finished: list[bool], index: int) -> Iterator[tuple[bytes | None, ...]]:
    """A unit's rows decoded (its leading `count` columns), as `readers._RowSource.rows` yields them; marks
    `finished[index]` once they have all been read (where that reader would have taken its end)."""
    decode = codec.decode_row
    for frames in runs:
        for payload in frames.payloads():
            yield decode(payload, columns, count)
    finished[index] = True


class Chain:
    """The units of one data source on the session's connection to it, their commands written back to back (one
    unit: as before pipelining). The socket's bytes (the tap's relay while it runs) go to the first unit whose answer
    has not ended; the bytes after one answer's end are the next unit's. The connection is idle again once the last
    answer has ended; a lost connection or a malformed answer ends every answer still due on it."""

    __slots__ = ("_ended", "answer", "at", "conn", "legs", "pausable", "paused", "tap")

    def __init__(self, answer: AnswerLike, conn: BackendConnection) -> None:
        self.answer = answer
        self.conn = conn
        tap = conn.tap
        assert tap is not None
        self.tap: BackendTap = tap
        self.legs: list[Leg] = []
        self.at = 0  # the leg being answered
        self.pausable = True  # the socket may stop being read while a leg's rows wait (see `_pipelinable`)
        self.paused = False  # the socket is not read until the consumer takes some of the current leg's runs
        self._ended: asyncio.Future[None] | None = None

    @property
    def ended(self) -> bool:
        """Every answer due on the connection has arrived (or the connection is lost)."""
        return self.at >= len(self.legs)

    def send(self, data: bytes) -> None:
        conn = self.conn
        self.tap.relay = self
        conn.busy = True
        conn.relayed = False
        self.tap.transport.write(data)

    def backend_data(self, data: bytes) -> None:
        legs, conn = self.legs, self.conn
        while self.at < len(legs):
            leg = legs[self.at]
            rest = leg.feed(data)
            if rest is None:
                if self.pausable and not self.paused and leg.queued > LEG_BUFFER_LIMIT:
                    self.paused = True
                    self.tap.transport.pause_reading()
                break
            self.at += 1
            if conn.broken:  # nothing after a malformed answer can be read
                self._fail_rest(leg.failure or BackendError(conn.name, "lost connection to MySQL server during query"))
                break
            if self.at == len(legs):
                if rest:  # bytes nobody asked for: what follows cannot be trusted
                    conn.broken = True
                else:
                    conn.busy = False
                    conn.raw.server_status = conn.status
                self._end()
                break
            if not rest:
                break
            data = rest
        self.answer.wake()

    def backend_lost(self) -> None:
        """The connection broke (the tap marked it broken): what `BackendConnection._read` raises, for every answer
        still due on it."""
        if self.ended:
            return
        self._fail_rest(BackendError(self.conn.name, "lost connection to MySQL server during query"))
        self.answer.wake()

    def _fail_rest(self, failure: BaseException) -> None:
        for leg in self.legs[self.at:]:
            if leg.failure is None:
                leg.failure = failure
            leg.ended = True
        self.at = len(self.legs)
        self._end()

    def took(self) -> None:
        if self.paused and (self.ended or self.legs[self.at].queued <= LEG_BUFFER_LIMIT // 2):
            self._resume()

    def discard(self) -> None:
        """The answer needs nothing more from these units: what is left is read and dropped."""
        for leg in self.legs:
            leg.discard()
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

    def _end(self) -> None:
        self.detach()
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)

    def ended_future(self) -> asyncio.Future[None]:
        """Resolved when every answer due on the connection has ended (for `readers.kill_until_done`)."""
        if self._ended is None:
            self._ended = asyncio.get_running_loop().create_future()
            if self.ended:
                self._ended.set_result(None)
        return self._ended
