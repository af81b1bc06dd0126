"""Relaying an answer whose bytes the client can take unchanged.

When client and backend negotiated the same EOF framing and the answer's sequence ids already are the
client's (a command the client sent with id 0, forwarded as is), `ResultRelay`'s copying and renumbering
is work for nothing: the bytes read from the backend are the bytes to write. `VerbatimRelay` only reads
frame headers, the first byte of each row, and the few control packets (first packet, EOF/OK/ERR), to know
where the answer ends and what status it ends with. Rows are skipped by length, across reads, without
being buffered; only an incomplete control packet is kept until its rest arrives.

Same interface as `ResultRelay` (`feed`, `done`, `summary`, `rows`, `next_seq`); `relay_for` picks one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from protocol.cext import load_c
from protocol.constants import MAX_PAYLOAD, ServerStatus
from protocol.packets import ERRPacket, OKPacket
from protocol.results import ResultRelay, ResultSummary
from protocol.wire import MalformedPacket, Reader

_MORE_RESULTS = int(ServerStatus.MORE_RESULTS_EXISTS)
_CURSOR_EXISTS = int(ServerStatus.CURSOR_EXISTS)
_HDR = struct.Struct("<HH")

# phases (plain ints: this runs once per frame; protocol/_crowframes.c numbers them alike)
_FIRST, _COLUMNS, _COLUMNS_EOF, _ROWS, _DONE = range(5)

# `feed`'s loop over the frames that need no Python object, in C when built (protocol.cext); the loop
# below stays the definition and takes every other frame
C: Any = load_c("protocol._crowframes")


_HEADS_KEPT = 16  # answers' heads a relay remembers (one per statement and node the session runs lately)


class VerbatimRelay:
    """Finds the end of an answer in the classic (EOF) framing, or in the DEPRECATE_EOF framing when
    `deprecate_eof`, and passes every byte through."""

    __slots__ = ("_c", "_columns_left", "_continuation", "_cursor", "_deprecate_eof", "_err_payload", "_memo",
                 "_memo_for", "_phase", "_rewrite_column", "_rewrite_error", "_seq", "_skip", "_spans", "_tail", "done",
                 "rows", "summary")

    def __init__(self, *, deprecate_eof: bool = False, error_rewriter: Callable[[bytes], bytes] | None = None,
                 c: Any = C, cursor: bool = False, column_rewriter: Callable[[bytes], bytes] | None = None) -> None:
        """`cursor`: the command asked for a cursor (COM_STMT_EXECUTE with cursor flags), whose answer ends at
        the column definitions when the server says CURSOR_EXISTS. Any other answer ends where MORE_RESULTS_EXISTS
        says: a stored procedure with a cursor of its own open leaves CURSOR_EXISTS in the status of the result
        sets it sends, and more of them follow."""
        self._c = c  # protocol._crowframes, or None: the Python loop alone (tests compare both)
        self._deprecate_eof = deprecate_eof
        # recent answers' heads (column count, definitions, their EOF) as they came and as they were sent, with
        # where the last frame starts: the same statement's next answer (from the same node) starts with the same
        # bytes, sent as before; most recent first
        self._memo: list[tuple[bytes, bytes, int]] = []
        self._memo_for: Callable[[bytes], bytes] | None = None
        self.restart(error_rewriter, cursor, column_rewriter)

    def restart(self, error_rewriter: Callable[[bytes], bytes] | None = None, cursor: bool = False,
                column_rewriter: Callable[[bytes], bytes] | None = None) -> None:
        """Ready for the next answer, as a new relay of the same framing is (the fast path keeps one per session
        instead of making one per command)."""
        self._cursor = cursor
        # e.g. actual table names back to logic names (a sharded single-node answer). With one, an incomplete
        # control packet is held back instead of passed on, so that an ERR can be replaced whole
        self._rewrite_error = error_rewriter
        # column definitions in other names (a pass-through database of another physical name, a sharded node's
        # actual table): each definition is held until whole and replaced; rows still pass as they are, through
        # the C scan, which a ResultRelay would have decoded frame by frame
        self._rewrite_column = column_rewriter
        if column_rewriter != self._memo_for:  # (a bound method is a new object at each access)
            self._memo, self._memo_for = [], column_rewriter
        self._spans: list[tuple[int, int, bytes]] = []  # (start, end, new frame) in the current feed's buffer
        self._err_payload: bytes | None = None
        self._phase = _FIRST
        self._columns_left = 0
        self._continuation = False  # the current frame continues a packet of 16 MB or more
        self._skip = 0  # bytes of the current frame still to come (rows and column definitions)
        self._tail = b""  # the start of a control packet whose rest has not arrived
        self._seq = 1
        self.done = False
        self.rows = 0
        self.summary = ResultSummary()

    @property
    def next_seq(self) -> int:
        return self._seq

    def feed(self, data: bytes) -> bytes:
        """`data` itself (everything read belongs to the answer); `done` turns True at its end."""
        if self.done:
            raise MalformedPacket("data after the end of the answer")
        skip = self._skip
        if skip:
            if skip >= len(data):
                self._skip = skip - len(data)
                return data
            self._skip = 0
            buf = data
            pos = skip
        elif self._tail:
            buf = self._tail + data
            self._tail = b""
            pos = 0
        else:
            buf = data
            pos = 0
        end = len(buf)
        phase = self._phase
        header = -1  # where the last frame header read starts (its sequence id gives next_seq)
        rows = 0
        c = self._c
        rewrite_column = self._rewrite_column
        # the head of the answer may be remembered (`_memo`) when this feed starts it
        fresh = rewrite_column is not None and phase == _FIRST and not self.summary.result_sets and not self._cursor
        hit = None
        if fresh:
            for known in self._memo:
                if buf.startswith(known[0]):
                    hit = known
                    break
        if hit is not None:
            raw, new, last = hit
            self._spans.append((0, len(raw), new))
            self.summary.result_sets += 1
            pos, phase, header, fresh = len(raw), _ROWS, last, False
            self._columns_left = 0
        elif rewrite_column is not None and phase in (_FIRST, _COLUMNS):
            c = None  # the definitions are walked here (the C scan would pass them on); rows are the C scan's again
        while c is not None and not self._continuation:
            scan = c.verbatim_scan(buf, pos, phase, self._columns_left, self._deprecate_eof)
            if rewrite_column is not None and scan[5]:
                break  # it walked into another result set, whose definitions are to be rewritten: walked here
            pos, phase, self._columns_left, scanned, at, sets, status, warnings = scan
            rows += scanned
            header = at if at >= 0 else header
            if sets:
                self.summary.result_sets += sets
            if status >= 0:  # what `_end` keeps of the last end packet walked
                s = self.summary
                s.status = status
                s.warnings = warnings
                if phase == _DONE:
                    if status & _MORE_RESULTS and not self._cursor:
                        phase = _FIRST  # the C step ends at CURSOR_EXISTS; more results follow
                        continue
                    self.done = True
            break
        while phase != _DONE and end - pos >= 4:
            length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
            if phase == _ROWS and length != MAX_PAYLOAD and not self._continuation:
                if length == 0:  # not a row any server sends; skipped as one
                    header = pos
                    rows += 1
                    pos += 4
                    continue
                if end - pos < 5:
                    break
                first = buf[pos + 4]
                if first == 0xFF or (first == 0xFE and length < 9):
                    if end - pos < 4 + length:
                        break
                    header = pos
                    if first == 0xFE and length == 5 and not self._deprecate_eof:  # the classic EOF
                        warnings, status = _HDR.unpack_from(buf, pos + 5)
                        phase = self._end(status, warnings)
                    else:
                        phase = self._end_of_rows(bytes(buf[pos + 4 : pos + 4 + length]))
                    pos += 4 + length
                    if phase == _DONE:
                        break
                    continue
                header = pos
                rows += 1
                pos += 4 + length
                continue
            if self._continuation or length == MAX_PAYLOAD:
                # part of a packet of 16 MB or more: always data (a row or a column definition)
                phase, rows = self._large_packet_part(length, phase, rows)
                header = pos
                pos += 4 + length
                continue
            if phase == _COLUMNS:
                if rewrite_column is not None:
                    if end - pos < 4 + length:
                        break  # held back until whole
                    payload = bytes(buf[pos + 4 : pos + 4 + length])
                    new = rewrite_column(payload)
                    if new != payload:
                        self._spans.append((pos, pos + 4 + length,
                                            len(new).to_bytes(3, "little") + buf[pos + 3 : pos + 4] + new))
                header = pos
                pos += 4 + length
                self._columns_left -= 1
                if self._columns_left == 0:
                    phase = _ROWS if self._deprecate_eof else _COLUMNS_EOF
                    if fresh and self._deprecate_eof:
                        fresh = False  # (the first result set's head only)
                        self._remember_head(buf, pos, header)
                continue
            if end - pos < 4 + length:
                break
            header = pos
            if phase == _FIRST and length == 1 and 0 < buf[pos + 4] < 0xFB:  # a result set's column count
                self._columns_left = buf[pos + 4]
                self.summary.result_sets += 1
                phase = _COLUMNS
                pos += 5
                continue
            if phase == _COLUMNS_EOF and length == 5 and buf[pos + 4] == 0xFE:
                warnings, status = _HDR.unpack_from(buf, pos + 5)
                pos += 9
                if status & _CURSOR_EXISTS and self._cursor:
                    phase = self._end(status, warnings)
                    break
                phase = _ROWS
                if fresh:
                    fresh = False  # (the first result set's head only)
                    self._remember_head(buf, pos, header)
                continue
            payload = bytes(buf[pos + 4 : pos + 4 + length])
            pos += 4 + length
            phase = self._first(payload) if phase == _FIRST else self._columns_eof(payload, phase)
            if phase == _DONE:
                break
        self._phase = phase
        self.rows += rows
        if header >= 0:
            self._seq = self.summary.next_seq = (buf[header + 3] + 1) & 0xFF
        if phase == _DONE:
            if pos < end:
                raise MalformedPacket("data after the end of the answer")
        elif pos > end:
            self._skip = pos - end
        elif pos < end:
            self._tail = bytes(buf[pos:])
        if self._rewrite_error is None and rewrite_column is None:
            return data
        out = self._held_back(buf, pos, end, phase, header)
        spans = self._spans
        if not spans:
            return out
        self._spans = []
        parts: list[bytes] = []
        at = 0
        for start, stop, frame in spans:  # (all before the cut: only whole definitions are replaced)
            parts.append(bytes(out[at:start]))
            parts.append(frame)
            at = stop
        parts.append(bytes(out[at:]))
        return b"".join(parts)

    def _remember_head(self, buf: bytes, end: int, last: int) -> None:
        """`_memo`: the answer's head, `buf[:end]` (whole in this feed, from its first byte), as it is sent."""
        raw = bytes(buf[:end])
        parts: list[bytes] = []
        at = 0
        for start, stop, frame in self._spans:
            if stop > end:
                return
            parts.append(raw[at:start])
            parts.append(frame)
            at = stop
        parts.append(raw[at:])
        memo = self._memo
        memo.insert(0, (raw, b"".join(parts), last))
        if len(memo) > _HEADS_KEPT:
            memo.pop()

    def _large_packet_part(self, length: int, phase: int, rows: int) -> tuple[int, int]:
        """`feed`'s step over one part of a packet of 16 MB or more (always data: a row or a column
        definition): the phase and row count after it."""
        if not self._continuation:
            if phase == _COLUMNS:
                self._columns_left -= 1
            else:
                rows += 1
        self._continuation = length == MAX_PAYLOAD
        if phase == _COLUMNS and self._columns_left == 0 and not self._continuation:
            phase = _ROWS if self._deprecate_eof else _COLUMNS_EOF
        return phase, rows

    def _held_back(self, buf: bytes, pos: int, end: int, phase: int, header: int) -> bytes:
        """What `feed` passes on when an ERR may be rewritten: held back, the tail (passed on with the next read,
        which it then starts); replaced, a rewritten ERR."""
        cut = pos if phase != _DONE and pos < end else end
        err = self._err_payload
        if err is not None and phase == _DONE:
            self._err_payload = None
            return bytes(buf[:header]) + len(err).to_bytes(3, "little") + buf[header + 3:header + 4] + err
        return buf if cut == end else bytes(buf[:cut])

    def _first(self, payload: bytes) -> int:
        head = payload[0] if payload else 0
        if head == 0xFF:
            return self._error(payload)
        if head == 0x00:
            ok = OKPacket.decode(payload)
            s = self.summary
            s.affected_rows += ok.affected_rows
            s.last_insert_id = ok.last_insert_id or s.last_insert_id
            s.info = ok.info
            return self._end(int(ok.status), ok.warnings)
        if head == 0xFB:  # LOAD DATA LOCAL INFILE: the server asks for the client's file; the answer goes on after it
            self.summary.local_infile = payload
            self.done = True
            return _DONE
        count = head if head < 0xFB else (Reader(payload).lenenc_int() or 0)
        self._columns_left = count
        self.summary.result_sets += 1
        return _COLUMNS if count else (_ROWS if self._deprecate_eof else _COLUMNS_EOF)

    def _columns_eof(self, payload: bytes, phase: int) -> int:
        if phase != _COLUMNS_EOF:
            raise MalformedPacket("unexpected packet after the end of the result")
        warnings, status = _HDR.unpack_from(payload, 1) if len(payload) >= 5 else (0, 0)
        if status & _CURSOR_EXISTS and self._cursor:
            # COM_STMT_EXECUTE opened a cursor: the answer ends here, rows come with COM_STMT_FETCH
            return self._end(status, warnings)
        return _ROWS

    def _end_of_rows(self, payload: bytes) -> int:
        if payload[0] == 0xFF:
            return self._error(payload)
        if self._deprecate_eof:
            ok = OKPacket.decode(payload)
            return self._end(int(ok.status), ok.warnings)
        warnings, status = _HDR.unpack_from(payload, 1) if len(payload) >= 5 else (0, 0)
        return self._end(status, warnings)

    def _error(self, payload: bytes) -> int:
        if self._rewrite_error is not None:
            rewritten = self._rewrite_error(payload)
            if rewritten != payload:
                self._err_payload = payload = rewritten
        try:
            self.summary.error = ERRPacket.decode(payload)
        except MalformedPacket:
            self.summary.error = ERRPacket(2027, "Malformed packet", "HY000")
        self.done = True
        return _DONE

    def _end(self, status: int, warnings: int) -> int:
        s = self.summary
        s.status = status
        s.warnings = warnings
        if status & _MORE_RESULTS and not (self._cursor and status & _CURSOR_EXISTS):
            return _FIRST
        self.done = True
        return _DONE


def relay_for(
    *, backend_deprecate_eof: bool, client_deprecate_eof: bool, first_seq: int = 1, rows_only: bool = False,
    more_results: bool = False, error_rewriter: Callable[[bytes], bytes] | None = None, cursor: bool = False,
    column_rewriter: Callable[[bytes], bytes] | None = None, row_rewriter: Callable[[bytes], bytes] | None = None,
) -> ResultRelay | VerbatimRelay:
    """A `VerbatimRelay` when the answer needs no change (same framing, sequence ids from 1; an ERR may be
    rewritten), else a `ResultRelay`."""
    if backend_deprecate_eof == client_deprecate_eof and first_seq == 1 and not rows_only and not more_results \
            and row_rewriter is None:
        return VerbatimRelay(deprecate_eof=backend_deprecate_eof, error_rewriter=error_rewriter, cursor=cursor,
                             column_rewriter=column_rewriter)
    return ResultRelay(backend_deprecate_eof=backend_deprecate_eof, client_deprecate_eof=client_deprecate_eof,
                       first_seq=first_seq, rows_only=rows_only, more_results=more_results,
                       error_rewriter=error_rewriter, cursor=cursor, column_rewriter=column_rewriter,
                       row_rewriter=row_rewriter)


__all__ = ["VerbatimRelay", "relay_for"]
