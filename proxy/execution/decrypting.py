"""An encrypted SELECT's answer with its cipher columns decrypted: relayed as it comes (`DecryptingRelay`, the socket
callbacks' fast path) or held whole (`decrypted_binary_answer`, the session's coroutine), the same bytes either way.

Why its own module: proxy.execution.encrypted decides what an encrypted statement runs as; this only turns the
answer of what ran into the client's (which columns to decrypt is the rewrite's `decrypt`, an encryptor per result
column). A row keeps its bytes around the cells it changes, and its sequence id; a value that is not its encryptor's
ciphertext answers one lone ERR naming the column, from either path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from protocol.binary import binary_cell_spans, binary_cell_widths, binary_null_bitmap_size
from protocol.cellswap import swap_cells
from protocol.constants import ErrorCode
from protocol.errors import ServerError
from protocol.framing import encode_packet
from protocol.packets import ColumnDefinition41, ERRPacket, encode_text_row
from protocol.results import ResultSummary
from protocol.wire import Reader, lenenc_str
from routing.encrypt.algorithms import Encryptor, bytes_decryptor

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session

__all__ = ["DecryptingRelay", "decrypted_binary_answer", "error_payload"]

log = structlog.get_logger("shardproxy.encrypt")


def error_payload(session: Session, message: str) -> bytes:
    """The ERR (1105, HY000) that answers an encrypted statement's answer that cannot be given."""
    return ERRPacket(ErrorCode.UNKNOWN_ERROR, message, "HY000").encode(session.capabilities)


#: each decrypt tuple (a rewrite's, kept by the rewrite caches) -> its encryptors' decryptions of bytes
_DECODERS: dict[tuple[Encryptor | None, ...], tuple[Callable[[bytes], bytes] | None, ...]] = {}
_DECODERS_MAX = 256


def _decoders(decrypt: tuple[Encryptor | None, ...]) -> tuple[Callable[[bytes], bytes] | None, ...]:
    known = _DECODERS.get(decrypt)
    if known is None:
        if len(_DECODERS) >= _DECODERS_MAX:
            _DECODERS.clear()
        known = _DECODERS[decrypt] = tuple(None if e is None else bytes_decryptor(e) for e in decrypt)
    return known


def _changed(count: int, expected: int) -> str:
    return (
        f"the result has {count} columns where the encrypt rewrite expected {expected} "
        "(did the table change?); run the statement again"
    )


class _Undecryptable(Exception):
    """The cell of column `index` is not its encryptor's ciphertext."""

    def __init__(self, index: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.index = index


def _undecryptable(name: str, decrypt: tuple[Encryptor | None, ...], exc: _Undecryptable) -> str:
    encryptor = decrypt[exc.index]
    assert encryptor is not None
    log.warning("decrypt_failed", column=name, error=str(exc))
    return (
        f"the value of column {name} cannot be decrypted by its encryptor ({encryptor.type}): it was not written by "
        "it (another key, or plaintext)"
    )


def _decrypted_binary_row(
    payload: bytes, widths: tuple[int, ...], decoders: tuple[Callable[[bytes], bytes] | None, ...]
) -> bytes:
    """A binary row (cells laid out by `widths`) with the cells of the columns that have a decoder decrypted in
    place, the bytes around them as they came; _Undecryptable for a value its encryptor did not write,
    MalformedPacket for a row that does not hold its cells."""
    spans = binary_cell_spans(payload, widths)
    out: list[bytes] = []
    done = 0
    for i, decoder in enumerate(decoders):
        span = spans[i]
        if decoder is None or span is None:
            continue
        start, stop = span
        first = payload[start]
        if widths[i] == -2 and first < 0xFB:
            value = payload[start + 1 : stop]
        else:
            value = Reader(payload[start:stop]).lenenc_str() or b""
        try:
            plain = decoder(value)
        except Exception as exc:  # not this encryptor's ciphertext (wrong key, plaintext left in place)
            raise _Undecryptable(i, exc) from exc
        out.append(payload[done:start])
        out.append(lenenc_str(plain))
        done = stop
    if not out:
        return payload
    out.append(payload[done:])
    return b"".join(out)


def decrypted_binary_answer(
    session: Session, packets: list[bytes], decrypt: tuple[Encryptor | None, ...]
) -> list[bytes]:
    """A captured answer in binary rows (an executed prepared statement's) with its encrypted columns decrypted:
    what `DecryptingRelay` makes of it on the fast path, a lone ERR for a value its encryptor did not write."""
    if not packets or packets[0][:1] in (b"\x00", b"\xff", b"\xfe"):
        return packets  # OK, ERR: no result set
    count = Reader(packets[0]).lenenc_int() or 0
    start = 1 + count + (0 if session.deprecate_eof else 1)
    rows = packets[start:-1]
    if any(r[:1] == b"\xff" for r in rows):  # an error in the middle of the rows: as it came
        return packets
    if len(decrypt) != count:
        return [error_payload(session, _changed(count, len(decrypt)))]
    columns = [ColumnDefinition41.decode(p) for p in packets[1 : 1 + count]]
    widths = binary_cell_widths(columns)
    decoders = _decoders(decrypt)
    out = list(packets[:start])
    for payload in rows:
        try:
            out.append(_decrypted_binary_row(payload, widths, decoders))
        except _Undecryptable as exc:
            return [error_payload(session, _undecryptable(columns[exc.index].name, decrypt, exc))]
    out.extend(packets[-1:])
    return out


class _Head(NamedTuple):
    """An answer's head as it came, walked: its column definitions' payloads (and the cell layout, for binary rows)."""

    raw: bytes
    columns: list[bytes]
    count: int
    widths: tuple[int, ...] | None  # binary rows: protocol.binary.binary_cell_widths of the definitions
    # `_whole`'s lane (protocol.cellswap): the one decrypted column's index (-1: none or several; the walk), and for
    # binary rows where its cell starts when every cell before it has a fixed width and the `nulls`-byte NULL
    # bitmap is all zero (-1: text rows)
    single: int = -1
    fixed: int = -1
    nulls: int = 0


def _single(
    decrypt: tuple[Encryptor | None, ...], count: int, widths: tuple[int, ...] | None
) -> tuple[int, int, int]:
    """`_Head.single`, `.fixed` and `.nulls` of an answer of `count` columns decrypted by `decrypt` (binary rows:
    its cells' `widths`); single is -1 where `DecryptingRelay._whole` does not apply: the walk answers."""
    found = [i for i, e in enumerate(decrypt) if e is not None]
    if len(found) != 1 or count != len(decrypt):
        return -1, -1, 0
    i = found[0]
    if widths is None:
        return i, -1, 0
    nulls = binary_null_bitmap_size(len(widths))
    before = widths[:i]
    if not all(w >= 0 for w in before):
        return -1, -1, 0
    return i, 1 + nulls + sum(before), nulls


#: (decrypt tuple, EOF after the definitions, binary rows) -> the latest heads of answers decrypted by it
_HEADS: dict[tuple[object, bool, bool], list[_Head]] = {}
_HEADS_MAX = 256
_HEADS_PER_KEY = 4


#: answer bytes held back, at most, so that a value that cannot be decrypted ends the answer with only an ERR
_HOLD_LIMIT = 1 << 16


class DecryptingRelay:
    """The fast path's relay of an encrypted SELECT's answer: the relay the fast path would use (`inner`: framing,
    the summary, names) followed by a walk of its output frames that decrypts the named columns of each text row, in
    place of the captured answer of `run_encrypted`. A row keeps its sequence id (only its length changes).

    The answer is held until it ends (up to `_HOLD_LIMIT` bytes), so that a value its encryptor cannot decrypt
    answers the same lone ERR as the coroutine's path; past that, such a value raises (the fast path ends the
    command with an ERR after the rows sent)."""

    __slots__ = (
        "_binary",
        "_capabilities",
        "_columns",
        "_count",
        "_decoders",
        "_decrypt",
        "_eof",
        "_failure",
        "_head_key",
        "_held",
        "_inner",
        "_pending",
        "_phase",
        "_widths",
        "done",
        "rows",
        "summary",
    )

    def __init__(
        self, session: Session, decrypt: tuple[Encryptor | None, ...], inner: Any, *, binary: bool = False
    ) -> None:
        self._decrypt: tuple[Encryptor | None, ...] | None = None
        self._binary = self._eof = False
        self.restart(session, decrypt, inner, binary=binary)

    def restart(
        self, session: Session, decrypt: tuple[Encryptor | None, ...], inner: Any, *, binary: bool = False
    ) -> None:
        """Ready for the next answer: one relay per session serves each of its encrypted SELECTs in turn (what
        depends on the statement alone is worked out again only for another one)."""
        eof = not session.deprecate_eof  # an EOF after the column definitions
        if decrypt is not self._decrypt or binary is not self._binary or eof is not self._eof:
            self._decrypt = decrypt
            self._decoders = _decoders(decrypt)
            self._binary = binary  # an executed prepared statement's answer: binary rows
            self._eof = eof
            self._head_key = (decrypt, eof, binary)
        self._widths: tuple[int, ...] | None = None
        self._capabilities = session.capabilities
        self._inner = inner
        self._columns: list[bytes] = []
        self._count = 0
        self._phase = 0  # 0: the column count, 1: definitions, 2: their EOF, 3: rows, 4: the rest as it is
        self._pending = b""
        self._failure: str | None = None
        self._held: list[bytes] | None = []
        self.done = False
        self.rows = 0
        self.summary: ResultSummary = inner.summary  # (the inner relay's, read by the fast path at the end)

    def feed(self, data: bytes) -> bytes:
        inner = self._inner
        framed = inner.feed(data)
        self.rows = inner.rows
        if inner.done and self._phase == 0 and not self._pending and self._held == []:
            whole = self._whole(framed)  # the usual answer: all of it in one read, its head known
            if whole is not None:
                self.done = True
                self._held = None
                return whole
        out = self._walk(framed)
        if self._failure is not None:  # what was held and what comes is dropped: the answer is the ERR
            self._held = []
            if not inner.done:
                return b""
            self.done = True
            err = ERRPacket(ErrorCode.UNKNOWN_ERROR, self._failure, "HY000")
            inner.summary.error = err
            inner.summary.result_sets = 0
            return encode_packet(err.encode(self._capabilities), 1)[0]
        held = self._held
        if inner.done:
            self.done = True
            if held:
                held.append(out)
                out = b"".join(held)
            self._held = None
            return out
        if held is not None:
            held.append(out)
            if sum(map(len, held)) <= _HOLD_LIMIT:
                return b""
            self._held = None
            out = b"".join(held)
        return out

    def _whole(self, buf: bytes) -> bytes | None:
        """A whole answer whose head is known and whose one decrypted column's value is found without walking the
        rest of each row: each row's value replaced, the bytes around it as they came. None for anything else
        (another head, a NULL, a value that does not decrypt, a frame that does not fit): `_walk` answers it from
        the start, as if this had not looked."""
        heads = _HEADS.get(self._head_key)
        if heads is None:
            return None
        for head in heads:
            if buf.startswith(head.raw):
                break
        else:
            return None
        i = head.single
        if i < 0:
            return None
        decoder = self._decoders[i]
        assert decoder is not None
        rest = swap_cells(buf, len(head.raw), head.fixed, head.nulls, i, decoder)
        return None if rest is None else head.raw + rest

    def _walk(self, data: bytes) -> bytes:
        """`data` (the client's frames, maybe the start of one more) with each row's encrypted values decrypted."""
        buf = self._pending + data if self._pending else data
        if self._phase == 4:
            self._pending = b""
            return buf
        out = []
        pos, end = 0, len(buf)
        fresh = self._phase == 0  # the answer's head starts this buffer: known, or to be remembered
        if fresh:
            for head in _HEADS.get(self._head_key, ()):
                if buf.startswith(head.raw):
                    pos, fresh = len(head.raw), False
                    self._count, self._columns, self._phase = head.count, head.columns, 3
                    self._widths = head.widths
                    out.append(head.raw)
                    break
        while end - pos >= 4:
            length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
            if end - pos < 4 + length:
                break
            stop = pos + 4 + length
            phase = self._phase
            first = buf[pos + 4] if length else 0
            if length == 0xFFFFFF:  # a packet of 16 MB or more: not decrypted here
                self._fail("a row of 16 MB or more in an encrypted SELECT's answer; select fewer columns")
                phase = self._phase = 4
            if phase == 3:
                if (first == 0xFE and length < 9) or first == 0xFF:
                    self._phase = 4
                    out.append(buf[pos:])
                    pos = end
                    break
                payload = self._row(buf[pos + 4 : stop])
                n = len(payload)
                out.append(bytes((n & 0xFF, (n >> 8) & 0xFF, n >> 16, buf[pos + 3])) + payload)
                pos = stop
                continue
            if phase == 0:
                if first in (0x00, 0xFF, 0xFB):  # OK, ERR, LOCAL INFILE: no result set
                    self._phase = 4
                    out.append(buf[pos:])
                    pos = end
                    break
                self._count = Reader(buf[pos + 4 : stop]).lenenc_int() or 0
                self._phase = 1
            elif phase == 1:
                self._columns.append(buf[pos + 4 : stop])
                if len(self._columns) == self._count:
                    self._phase = 2 if self._eof else 3
            elif phase == 2:
                self._phase = 3
            out.append(buf[pos:stop])
            pos = stop
            if fresh and self._phase == 3:
                self._remember(buf[:pos])
                fresh = False
        self._pending = buf[pos:]
        return b"".join(out)

    def _remember(self, raw: bytes) -> None:
        """Keep the answer's head (column count, definitions, their EOF) as it came: the same statement's next
        answer starts with the same bytes, and its walk starts at the rows."""
        if self._binary and self._widths is None:
            self._widths = binary_cell_widths([ColumnDefinition41.decode(c) for c in self._columns])
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        heads = _HEADS.setdefault(self._head_key, [])
        lane = _single(self._decrypt, self._count, self._widths)
        heads.insert(0, _Head(raw, self._columns, self._count, self._widths, *lane))
        del heads[_HEADS_PER_KEY:]

    def _row(self, payload: bytes) -> bytes:
        if self._failure is not None:
            return payload
        if self._binary:
            return self._binary_row(payload)
        decrypt = self._decrypt
        n = len(decrypt)
        if self._count != n:
            return self._fail(_changed(self._count, n))
        # the row's values read in place: a value is a length-encoded string or 0xFB (NULL)
        values: list[bytes | None] = []
        pos, end = 0, len(payload)
        try:
            for _ in range(n):
                first = payload[pos]
                if first < 0xFB:
                    start, pos = pos + 1, pos + 1 + first
                elif first == 0xFB:
                    values.append(None)
                    pos += 1
                    continue
                else:
                    width = 2 if first == 0xFC else 3 if first == 0xFD else 8 if first == 0xFE else -1
                    if width < 0:
                        raise IndexError
                    start = pos + 1 + width
                    pos = start + int.from_bytes(payload[pos + 1 : start], "little")
                if pos > end:
                    raise IndexError
                values.append(payload[start:pos])
        except IndexError:  # fewer values than the rewrite expected
            pos = -1
        if pos != end:
            return self._fail(_changed(self._count, n))
        for i, decoder in enumerate(self._decoders):
            value = values[i]
            if decoder is None or value is None:
                continue
            try:
                values[i] = decoder(value)
            except Exception as exc:  # not this encryptor's ciphertext (wrong key, plaintext left in place)
                encryptor = decrypt[i]
                assert encryptor is not None
                name = ColumnDefinition41.decode(self._columns[i]).name
                log.warning("decrypt_failed", column=name, error=str(exc))
                return self._fail(
                    f"the value of column {name} cannot be decrypted by its encryptor ({encryptor.type}): it was "
                    "not written by it (another key, or plaintext)"
                )
        return encode_text_row(values)

    def _binary_row(self, payload: bytes) -> bytes:
        """A binary row with its encrypted cells decrypted in place: the bytes around them as they came."""
        decrypt = self._decrypt
        if self._count != len(decrypt):
            return self._fail(_changed(self._count, len(decrypt)))
        widths = self._widths
        if widths is None:
            widths = self._widths = binary_cell_widths([ColumnDefinition41.decode(c) for c in self._columns])
        try:
            return _decrypted_binary_row(payload, widths, self._decoders)
        except _Undecryptable as exc:
            return self._fail(_undecryptable(ColumnDefinition41.decode(self._columns[exc.index]).name, decrypt, exc))

    def _fail(self, message: str) -> bytes:
        if self._held is None:  # part of the answer is sent already: the fast path ends it with this ERR
            raise ServerError(message, errno=ErrorCode.UNKNOWN_ERROR, sqlstate="HY000")
        self._failure = message
        return b""
