"""Reading a backend's answer to a command, synchronously over a byte buffer.

Two readers share one grammar (OK | ERR | column count, column definitions, [EOF], rows, EOF/OK, repeated
while MORE_RESULTS_EXISTS):

* `ResultRelay` is the hot path for single-node routes: it copies frames to the client's framing without
  decoding rows, only renumbering sequence ids and converting EOF/OK framing when client and backend
  negotiated DEPRECATE_EOF differently. No object per row.
* `ResultParser` yields typed events for results the proxy must look into (merging, metadata rewrites).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from protocol.constants import MAX_PAYLOAD, ServerStatus
from protocol.framing import FrameDecoder
from protocol.packets import ColumnDefinition41, ERRPacket, OKPacket
from protocol.rowframes import RowFrames, scan_rows
from protocol.wire import MalformedPacket, Reader

# plain ints: flag enums cost an object per operation on the per-statement path
_MORE_RESULTS = int(ServerStatus.MORE_RESULTS_EXISTS)
_CURSOR_EXISTS = int(ServerStatus.CURSOR_EXISTS)

_HDR = struct.Struct("<HH")


class _Phase(enum.Enum):
    FIRST = 0  # expecting OK / ERR / LOCAL INFILE / column count
    COLUMNS = 1
    COLUMNS_EOF = 2  # classic framing: the EOF after the column definitions
    ROWS = 3
    DONE = 4


@dataclass(slots=True)
class ResultSummary:
    """What the proxy needs to remember about a finished response."""

    status: int = ServerStatus.AUTOCOMMIT
    affected_rows: int = 0
    last_insert_id: int = 0
    warnings: int = 0
    error: ERRPacket | None = None
    result_sets: int = 0
    info: bytes = b""
    next_seq: int = 0  # the client-side sequence id after the relayed answer
    # LOAD DATA LOCAL INFILE: the server's request for the client's file (0xFB and its name), relayed; the answer
    # goes on after the client's file content
    local_infile: bytes | None = None


def _frame(payload: bytes | memoryview, seq: int) -> bytes:
    n = len(payload)
    return bytes((n & 0xFF, (n >> 8) & 0xFF, n >> 16, seq & 0xFF)) + payload


class ResultRelay:
    """Converts a backend's response frames into the client's framing, frame by frame.

    `feed(data)` returns the bytes to send to the client now; `done` turns True after the last packet of
    the last result set. `backend_deprecate_eof` / `client_deprecate_eof` are the two sides' negotiated
    DEPRECATE_EOF capability. `first_seq` is the client-side sequence id of the first response frame.
    """

    __slots__ = (
        "_backend_eof",
        "_buf",
        "_client_eof",
        "_columns_left",
        "_continuation",
        "_cursor",
        "_more",
        "_phase",
        "_rewrite_column",
        "_rewrite_error",
        "_rewrite_row",
        "_seq",
        "_seq_after",
        "done",
        "rows",
        "summary",
    )

    def __init__(
        self, *, backend_deprecate_eof: bool, client_deprecate_eof: bool, first_seq: int = 1, rows_only: bool = False,
        more_results: bool = False, error_rewriter: Callable[[bytes], bytes] | None = None, cursor: bool = False,
        column_rewriter: Callable[[bytes], bytes] | None = None, row_rewriter: Callable[[bytes], bytes] | None = None,
    ) -> None:
        """`rows_only`: the answer has no header (COM_STMT_FETCH: rows, then EOF). `more_results`: the
        client's query has more statements after this one (the proxy splits multi-statement queries), so
        the answer's last packet must say MORE_RESULTS_EXISTS. `cursor`: the command asked for a cursor
        (COM_STMT_EXECUTE with cursor flags): CURSOR_EXISTS after the column definitions ends the answer; in any
        other answer it is a stored procedure's own open cursor, and more results may follow."""
        self._more = more_results
        self._cursor = cursor
        # e.g. a pass-through database's physical name back to its logical one (proxy.backends.rename); rows
        # only for the statements whose rows are the server's messages (never in packets of 16 MB or more)
        self._rewrite_column = column_rewriter
        self._rewrite_row = row_rewriter
        self._rewrite_error = error_rewriter  # e.g. actual table names back to logic names
        self._buf = bytearray()
        self._backend_eof = backend_deprecate_eof
        self._client_eof = client_deprecate_eof
        self._phase = _Phase.ROWS if rows_only else _Phase.FIRST
        self._columns_left = 0
        self._continuation = False
        self._seq = first_seq
        self._seq_after = first_seq
        self.done = False
        self.summary = ResultSummary()
        self.rows = 0

    @property
    def next_seq(self) -> int:
        return self._seq

    def feed(self, data: bytes) -> bytes:
        buf = self._buf
        buf += data
        out = bytearray()
        pos = 0
        end = len(buf)
        seq = self._seq
        try:
            while end - pos >= 4 and not self.done:
                if self._phase is _Phase.ROWS and not self._continuation and self._rewrite_row is None:
                    # hot loop: a run of complete row frames is copied in one piece, sequence ids
                    # patched in place in our own buffer (no object per row)
                    run_start = pos
                    rows = 0
                    while end - pos >= 4:
                        length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
                        if end - pos < 4 + length or length == MAX_PAYLOAD:
                            break
                        first = buf[pos + 4] if length else 0
                        if first == 0xFF or (first == 0xFE and length < 9):
                            break
                        buf[pos + 3] = seq
                        pos += 4 + length
                        seq = (seq + 1) & 0xFF
                        rows += 1
                    if rows:
                        out += buf[run_start:pos]
                        self.rows += rows
                    if end - pos < 4:
                        break
                length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
                if end - pos < 4 + length:
                    break
                start = pos + 4
                stop = start + length
                pos = stop
                if self._continuation or length == MAX_PAYLOAD:
                    # part of a packet of 16 MB or more: always data (a row or a column definition)
                    if not self._continuation:
                        self._count_packet()
                    self._continuation = length == MAX_PAYLOAD
                    out += bytes((length & 0xFF, (length >> 8) & 0xFF, length >> 16, seq))
                    out += buf[start:stop]
                    seq = (seq + 1) & 0xFF
                    continue
                phase = self._phase
                if phase is _Phase.ROWS:
                    first = buf[start] if length else 0
                    if first == 0xFE and length < 9:
                        out += self._end_of_rows(bytes(buf[start:stop]), seq)
                        seq = self._seq_after
                        continue
                    if first == 0xFF:
                        payload = self._error(bytes(buf[start:stop]))
                        out += _frame(payload, seq)
                        seq = (seq + 1) & 0xFF
                        continue
                    self.rows += 1
                    if self._rewrite_row is not None:
                        out += _frame(self._rewrite_row(bytes(buf[start:stop])), seq)
                    else:
                        out += bytes((length & 0xFF, (length >> 8) & 0xFF, length >> 16, seq))
                        out += buf[start:stop]
                    seq = (seq + 1) & 0xFF
                    continue
                payload = bytes(buf[start:stop])
                converted, seq = self._other(phase, payload, seq)
                out += converted
        finally:
            del buf[:pos]
            self._seq = seq
            self.summary.next_seq = seq
        return bytes(out)

    # -- non-row packets: few per result, so clarity over speed --------------------------------------------

    def _count_packet(self) -> None:
        if self._phase is _Phase.COLUMNS:
            self._columns_left -= 1
            if self._columns_left == 0:
                self._phase = _Phase.ROWS if self._backend_eof else _Phase.COLUMNS_EOF
        elif self._phase is _Phase.ROWS:
            self.rows += 1

    def _error(self, payload: bytes) -> bytes:
        """Record the backend's ERR; returns the payload to send (rewritten by `error_rewriter`)."""
        if self._rewrite_error is not None:
            payload = self._rewrite_error(payload)
        try:
            self.summary.error = ERRPacket.decode(payload)
        except MalformedPacket:
            self.summary.error = ERRPacket(2027, "Malformed packet", "HY000")
        self._phase = _Phase.DONE
        self.done = True
        return payload

    def _other(self, phase: _Phase, payload: bytes, seq: int) -> tuple[bytes, int]:
        if phase is _Phase.FIRST:
            head = payload[0] if payload else 0
            if head == 0xFF:
                payload = self._error(payload)
                return _frame(payload, seq), (seq + 1) & 0xFF
            if head == 0x00:
                ok = OKPacket.decode(payload)
                self._finish(ok.status, ok.warnings, ok)
                if self.done and self._more:
                    payload = replace(ok, status=ok.status | ServerStatus.MORE_RESULTS_EXISTS).encode()
                return _frame(payload, seq), (seq + 1) & 0xFF
            if head == 0xFB:
                self.summary.local_infile = payload
                self._phase = _Phase.DONE
                self.done = True
                return _frame(payload, seq), (seq + 1) & 0xFF
            count = head if head < 0xFB else (Reader(payload).lenenc_int() or 0)
            self._columns_left = count
            self.summary.result_sets += 1
            self._phase = _Phase.COLUMNS
            return _frame(payload, seq), (seq + 1) & 0xFF
        if phase is _Phase.COLUMNS:
            self._columns_left -= 1
            out = _frame(payload if self._rewrite_column is None else self._rewrite_column(payload), seq)
            seq = (seq + 1) & 0xFF
            if self._columns_left == 0:
                if self._backend_eof:
                    self._phase = _Phase.ROWS
                    if not self._client_eof:  # client wants the EOF the backend did not send
                        # the status of this result is not known yet: the last one's, less the previous
                        # result's MORE_RESULTS_EXISTS (a stale one would say more follow after the last)
                        status = int(self.summary.status) & ~ServerStatus.MORE_RESULTS_EXISTS & 0xFFFF
                        out += _frame(struct.pack("<BHH", 0xFE, 0, status), seq)
                        seq = (seq + 1) & 0xFF
                else:
                    self._phase = _Phase.COLUMNS_EOF
            return out, seq
        if phase is _Phase.COLUMNS_EOF:
            self._phase = _Phase.ROWS
            warnings, status = _HDR.unpack_from(payload, 1) if len(payload) >= 5 else (0, 0)
            if status & _CURSOR_EXISTS and self._cursor:
                # COM_STMT_EXECUTE opened a cursor: the answer ends here, rows come with COM_STMT_FETCH
                self._finish(status, warnings, None)
                if self._client_eof:
                    return _frame(b"\xfe\x00\x00" + _HDR.pack(status & 0xFFFF, warnings), seq), (seq + 1) & 0xFF
                return _frame(payload, seq), (seq + 1) & 0xFF
            if self._client_eof:
                return b"", seq  # the client does not expect this EOF
            return _frame(payload, seq), (seq + 1) & 0xFF
        raise MalformedPacket(f"unexpected packet after the end of the result ({phase.name})")

    def _end_of_rows(self, payload: bytes, seq: int) -> bytes:
        if self._backend_eof:
            ok = OKPacket.decode(payload)
            status, warnings = int(ok.status), ok.warnings
        else:
            warnings, status = _HDR.unpack_from(payload, 1) if len(payload) >= 5 else (0, 0)
            ok = None
        self._finish(status, warnings, ok)
        if self.done and self._more:
            status |= _MORE_RESULTS
            if ok is not None:
                payload = replace(ok, status=ServerStatus(status)).encode()
            else:
                payload = b"\xfe" + _HDR.pack(warnings, status & 0xFFFF)
        if self._client_eof == self._backend_eof:
            out = _frame(payload, seq)
        elif self._client_eof:
            out = _frame(b"\xfe\x00\x00" + _HDR.pack(status & 0xFFFF, warnings), seq)
        else:
            out = _frame(b"\xfe" + _HDR.pack(warnings, status & 0xFFFF), seq)
        self._seq_after = (seq + 1) & 0xFF
        return out

    def _finish(self, status: int, warnings: int, ok: OKPacket | None) -> None:
        s = self.summary
        s.status = status
        s.warnings = warnings
        if ok is not None and ok.header == 0:
            s.affected_rows += ok.affected_rows
            s.last_insert_id = ok.last_insert_id or s.last_insert_id
            s.info = ok.info
        if status & _MORE_RESULTS:
            self._phase = _Phase.FIRST
        else:
            self._phase = _Phase.DONE
            self.done = True


# --- decoding reader ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultHeader:
    columns: tuple[ColumnDefinition41, ...]


@dataclass(frozen=True)
class ResultEnd:
    status: int
    warnings: int


_NOTHING = object()  # `ResultParser._event`: the packet makes no event of its own

# The first byte of an answer that is not a column count: OK, LOCAL INFILE, EOF, ERR.
_NOT_COLUMN_COUNT = frozenset((0x00, 0xFB, 0xFE, 0xFF))
# Recent result set headers as the backends sent them, newest first: one list for backends that end the column
# definitions with an EOF packet, one for those that do not (DEPRECATE_EOF), since where a header ends depends on it.
_HEADERS: dict[bool, list[tuple[bytes, ResultHeader]]] = {False: [], True: []}
_HEADERS_KEPT = 16


def _known_header(buf: bytearray, backend_eof: bool) -> tuple[bytes, ResultHeader] | None:
    """A recent header whose bytes (column count, column definitions, their EOF) `buf` starts with: the same
    bytes parse to the same header, so it is used as parsed (a scatter would otherwise parse the same header
    packets of every node, statement after statement)."""
    headers = _HEADERS[backend_eof]
    for i, known in enumerate(headers):
        if buf.startswith(known[0]):
            if i:
                del headers[i]
                headers.insert(0, known)
            return known
    return None


def _remember_header(raw: bytes, header: ResultHeader, backend_eof: bool) -> None:
    headers = _HEADERS[backend_eof]
    if len(raw) > 4096 or any(known[0] == raw for known in headers):  # (a header that came in several reads)
        return
    headers.insert(0, (raw, header))
    del headers[_HEADERS_KEPT:]


def _short_eof(payload: bytes) -> tuple[int, int]:
    """(warnings, status) of an EOF packet shorter than its five bytes, read as `Reader` reads it."""
    r = Reader(payload, 1)
    return r.u16(), r.u16()


def whole_result(data: bytes) -> tuple[ResultHeader, RowFrames | None, int, int, int] | None:
    """`data`, the first bytes of an answer from a backend that ends column definitions with an EOF packet, when they
    hold one whole result set whose header is a recent one's (`_known_header`): (header, its rows as the backend
    framed them or None when it has none, the end's status and warnings, where the bytes after the end start).
    None for anything else (a header not seen lately, an answer that goes on in later reads, an ERR or an odd end,
    more results): `ResultParser` reads those, and reads these the same way (tests/protocol/test_results.py), in
    several generator steps and copies where this takes one row walk in C (every unit of a multi-node SELECT comes
    this way: proxy.execution.multipath)."""
    if len(data) < 5 or data[4] in _NOT_COLUMN_COUNT:
        return None
    known = _known_header(data, False)  # type: ignore[arg-type]  # (bytes have startswith too)
    if known is None:
        return None
    start = len(known[0])
    stop, rows, ended = scan_rows(data, start)  # type: ignore[arg-type]
    if not ended or len(data) < stop + 9 or data[stop] != 5 or data[stop + 1] or data[stop + 2] \
            or data[stop + 4] != 0xFE:
        return None  # not whole yet, or it ends with an ERR, an OK or an EOF of another length
    warnings, status = _HDR.unpack_from(data, stop + 5)
    if status & _MORE_RESULTS:
        return None
    return known[1], RowFrames(data[start:stop], rows) if rows else None, status, warnings, stop + 9


class ResultParser:
    """Decodes one backend response into events: OKPacket, ERRPacket, ResultHeader, row payloads (bytes),
    ResultEnd. Rows stay raw payloads so a caller decodes only what it needs."""

    def __init__(self, *, backend_deprecate_eof: bool, row_frames: bool = False) -> None:
        """`row_frames`: rows come as `protocol.rowframes.RowFrames` runs (one per read, still framed), not
        as one payload each: relays and raw merges never need rows cut out of the read buffer."""
        self._frames = FrameDecoder()
        self._backend_eof = backend_deprecate_eof
        self._phase = _Phase.FIRST
        self._columns: list[ColumnDefinition41] = []
        self._columns_left = 0
        self._row_frames = row_frames
        self._header_bytes: bytearray | None = None  # the header's frames so far, to remember it (`_feed_frames`)
        self.done = False

    def feed(self, data: bytes) -> Iterator[object]:
        self._frames.feed(data)
        if self._row_frames:
            yield from self._feed_frames()
            return
        rows = _Phase.ROWS
        for _first, _last, payload in self._frames.packets():
            # a row (what `_packet` yields as is in the ROWS phase), without a generator step per packet
            if self._phase is rows and (not payload or payload[0] < 0xFE or (payload[0] == 0xFE and len(payload) >= 9)):
                yield payload
                continue
            event = self._event(payload)
            if event is not _NOTHING:
                yield event
            if self.done:
                return

    def take_rest(self) -> bytes:
        """The bytes fed after the end of this answer (once `done`), removed: on a connection that was sent several
        commands back to back, the start of the next command's answer. (`feed` stops at the end of its answer and
        keeps what follows; with `row_frames` the answer's last packet is always whole, never a 16 MB part.)"""
        return self._frames.take_buffered()

    def _feed_frames(self) -> Iterator[object]:
        frames = self._frames
        buf = frames._buf
        if self._phase is _Phase.FIRST and len(buf) > 4 and buf[4] not in _NOT_COLUMN_COUNT:
            known = _known_header(buf, self._backend_eof)
            if known is not None:  # the same header bytes as a recent answer's: the same header
                del buf[:len(known[0])]
                self._phase = _Phase.ROWS
                yield known[1]
            else:
                self._header_bytes = bytearray()
        while not self.done:
            if self._phase is _Phase.ROWS:
                stop, rows, ended = scan_rows(buf, 0)
                if rows:
                    with memoryview(buf) as view:
                        data = bytes(view[:stop])
                    del buf[:stop]
                    yield RowFrames(data, rows)
                if not ended:
                    return  # an incomplete frame (or 16 MB row): wait for more bytes
            # one packet that is not a row (header, column definitions, the end, an ERR), then look again
            head = self._header_bytes
            if head is None:
                payload = frames.next_payload()
                if payload is None:
                    return
                event = self._event(payload)
            else:
                end = 4 + (buf[0] | (buf[1] << 8) | (buf[2] << 16)) if len(buf) >= 4 else 0
                if end and end - 4 < MAX_PAYLOAD and len(buf) >= end:
                    head += buf[:end]  # the frame as it came, sequence id included
                else:
                    end = 0
                payload = frames.next_payload()
                if payload is None:
                    return
                if not end:  # a payload of 16 MB or more in the header: not remembered
                    self._header_bytes = head = None
                event = self._event(payload)
                if type(event) is ResultHeader:
                    if head is not None:
                        _remember_header(bytes(head), event, self._backend_eof)
                    self._header_bytes = None
                elif event is not _NOTHING:
                    self._header_bytes = None
            if event is not _NOTHING:
                yield event

    def _event(self, payload: bytes) -> object:
        """What one packet of the answer is: its event, or _NOTHING (a column definition before the last)."""
        phase = self._phase
        head = payload[0] if payload else 0
        if phase is _Phase.ROWS:
            if head == 0xFE and len(payload) < 9:
                if self._backend_eof:
                    ok = OKPacket.decode(payload)
                    status, warnings = int(ok.status), ok.warnings
                else:
                    warnings, status = _HDR.unpack_from(payload, 1) if len(payload) >= 5 else _short_eof(payload)
                self._end(status)
                return ResultEnd(status, warnings)
            if head == 0xFF:
                self.done = True
                return ERRPacket.decode(payload)
            return payload
        if phase is _Phase.FIRST:
            if head == 0xFF:
                self.done = True
                return ERRPacket.decode(payload)
            if head == 0x00:
                ok = OKPacket.decode(payload)
                self._end(int(ok.status))
                return ok
            if head == 0xFB:
                raise MalformedPacket("LOAD DATA LOCAL INFILE is not supported through the proxy")
            self._columns_left = Reader(payload).lenenc_int() or 0
            self._columns = []
            self._phase = _Phase.COLUMNS
            return _NOTHING
        if phase is _Phase.COLUMNS:
            self._columns.append(ColumnDefinition41.decode(payload))
            self._columns_left -= 1
            if self._columns_left == 0:
                self._phase = _Phase.ROWS if self._backend_eof else _Phase.COLUMNS_EOF
                if self._backend_eof:
                    return ResultHeader(tuple(self._columns))
            return _NOTHING
        if phase is _Phase.COLUMNS_EOF:
            self._phase = _Phase.ROWS
            return ResultHeader(tuple(self._columns))
        raise MalformedPacket("packet after the end of the result")

    def _end(self, status: int) -> None:
        if status & _MORE_RESULTS:
            self._phase = _Phase.FIRST
        else:
            self._phase = _Phase.DONE
            self.done = True
