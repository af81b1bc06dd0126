"""The synchronous core of `merge.raw`: sort keys read out of runs of row frames, and a k-way merge of runs.

Why its own module: the per-row work of an ORDER BY merge (find the next frame, compute its key, one heap
step, copy the frame) is plain loops over bytes and ints with no I/O, which mypyc compiles (pyproject.toml);
the async side that awaits the nodes' next runs stays in `merge.raw` (mypyc does not compile async
generators). `FrameMerger` is sans-IO: it says which stream it needs next, the caller reads and feeds it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from merge import coltypes as t
from merge.errors import MergeError, RowBudget
from merge.keys import Row, equality_key, order_key, value_key, weight_index
from merge.spec import ColumnMeta, OrderItem
from merge.weights import WeightDecoder
from protocol.cext import load_c
from protocol.rowframes import MAX, frame_end, frames_of, payload_at
from protocol.rowscan import binary_cut, binary_prefix, lenenc_in_binary, text_cut, text_prefix

__all__ = ["DONE", "FULL", "FrameKey", "FrameMerger", "frame_equality_key", "frame_key"]

Decode = Callable[[bytes, int], Row]  # (payload, leading columns to decode) -> the row's values as text
FrameKey = Callable[[bytes, int, int], Any]  # (run, frame start, frame end) -> the row's sort key

C: Any = load_c("merge._cframes")  # the per-row steps below in C, when built (protocol.cext)

_LOW, _HIGH = float("-inf"), float("inf")  # NULL's place next to numbers: first ASC, last DESC
FULL = -1  # `FrameMerger.merge`: the output holds what was asked for
DONE = -2  # `FrameMerger.merge`: every row is out (or OFFSET + LIMIT rows are)


def frame_key(items: Sequence[OrderItem], columns: Sequence[ColumnMeta], decode: Decode | None,
              weights: Mapping[int, int] | None = None) -> FrameKey:
    """The sort key of the row framed at run[a:b]. `decode` None: text-protocol rows, read in place; else
    binary-protocol rows, read in place too when the key's columns are length-encoded strings.

    One integer or DECIMAL sort column of text rows keys by its value alone (NULL as -inf ASC, +inf DESC:
    the same order as `order_key`'s (0,) < (1, v) and (1, -v) < (2,), without a tuple per row); every
    other case is `order_key` over the decoded leading columns (a text key's hidden weight column included:
    `weights`, as in `merge.pipeline`)."""
    width = 1 + max(max(o.index, weight_index(o.index, columns, weights) or 0) for o in items)
    row_key = order_key(items, columns, weights or {})
    only = items[0] if len(items) == 1 else None
    wi = weight_index(only.index, columns, weights) if only is not None and not only.descending else None
    if decode is not None:
        if only is not None and columns[only.index].type_code in _BINARY_INTEGER_SIZE:
            return _binary_integer_key(only.index, only.descending, columns, width, decode)
        general = _row_key_of_frames(row_key, columns, width, decode)
        if only is not None and wi is not None and only.index < wi \
                and all(lenenc_in_binary(c.type_code) for c in columns[:width]):
            return _weighted_binary_order_key(only.index, wi, len(columns), WeightDecoder(True), general, C)
        return general
    if only is not None and wi is not None:
        decoder = WeightDecoder(True)
        general = _weighted_text_key(only.index, wi, width, decoder.order, b"", b":", row_key)
        return _weighted_order_key(only.index, wi, decoder, general, C) if only.index < wi else general
    if only is not None and columns[only.index].type_code in (t.INTEGER_TYPES | t.DECIMAL_TYPES):
        vk = value_key(columns[only.index])
        index = only.index
        null = _HIGH if only.descending else _LOW
        sign = -1 if only.descending else 1

        def numeric(run: bytes, a: int, b: int) -> Any:
            if b - a - 4 >= MAX:
                v = text_prefix(payload_at(run, a, b), width)[index]
            else:
                v = text_prefix(run, width, a + 4, b)[index]
            return null if v is None else vk(v) * sign

        if C is not None and columns[index].type_code in t.INTEGER_TYPES:  # the same key, in one C call
            return partial(C.text_int_key, index, only.descending, null, numeric)
        if index == 0 and not only.descending:

            def first_ascending(run: bytes, a: int, b: int) -> Any:  # the common case, in one step
                n = run[a + 4]
                if n < 0xFB and b - a - 4 < MAX and a + 5 + n <= b:
                    return vk(run[a + 5:a + 5 + n])
                return numeric(run, a, b)  # NULL, a long value or row, or a row that ends early (malformed)

            return first_ascending
        return numeric
    return _row_key_of_frames(row_key, columns, width, None)


def _row_key_of_frames(row_key: Callable[[Row], Any], columns: Sequence[ColumnMeta], width: int,
                       decode: Decode | None) -> FrameKey:
    """`row_key` of the leading `width` values of the row framed at run[a:b]: text rows read in place, binary
    rows in place when those columns are length-encoded strings, else through `decode`."""
    if decode is None:

        def prefix(run: bytes, a: int, b: int) -> Any:
            if b - a - 4 >= MAX:
                return row_key(text_prefix(payload_at(run, a, b), width))
            return row_key(text_prefix(run, width, a + 4, b))

        return prefix
    if all(lenenc_in_binary(c.type_code) for c in columns[:width]):
        return _binary_in_place(row_key, len(columns), width)
    dec: Decode = decode

    def decoded(run: bytes, a: int, b: int) -> Any:
        if b - a - 4 >= MAX:
            return row_key(dec(payload_at(run, a, b), width))
        return row_key(dec(run[a + 4:b], width))

    return decoded


def _weighted_text_key(index: int, wi: int, width: int, convert: Callable[[bytes], bytes], null: Any, tag: bytes,
                       row_key: Callable[[Row], Any]) -> FrameKey:
    """One text column of text rows keyed by its weights in one step, as `merge.keys`' one-column weighted keys
    (the usual `ORDER BY c` / `DISTINCT c` range): `null` for NULL, else `tag` + `convert` of the
    weights (their order or equality form), or + the value itself for a binary string. Rows of 16 MB and more
    go through `row_key`, which keys them the same way."""

    def key(run: bytes, a: int, b: int) -> Any:
        if b - a - 4 >= MAX:
            return row_key(text_prefix(payload_at(run, a, b), width))
        row = text_prefix(run, width, a + 4, b)
        v = row[index]
        if v is None:
            return null
        w = row[wi]
        k = v if w is None else convert(w)
        return tag + k if tag else k

    return key


def _weighted_order_key(index: int, wi: int, decoder: WeightDecoder, general: FrameKey, c: Any) -> FrameKey:
    """`_weighted_text_key`'s order key in one pass over the row's length bytes: no values cut out, the weights
    keyed in place (`WeightDecoder.order_at`); rows it does not read so simply (long values, a NULL weight,
    a frame of 16 MB) go to `general`, which keys them the same way (the key is computed for every row merged).
    `c`: merge._cframes, whose `text_order_key` does the same in one C call (None: this Python)."""
    if c is not None:
        return partial(c.text_order_key, index, wi, decoder, general)
    order_at = decoder.order_at

    def key(run: bytes, a: int, b: int) -> Any:
        if b - a - 4 >= MAX:
            return general(run, a, b)
        pos = a + 4
        i = 0
        while i < wi:
            if pos >= b:  # the row ends early: `general` says it is malformed
                return general(run, a, b)
            first = run[pos]
            if first < 0xFB:
                pos += 1 + first
            elif first == 0xFB:
                if i == index:
                    return b""
                pos += 1
            else:
                return general(run, a, b)
            i += 1
        if pos >= b:
            return general(run, a, b)
        first = run[pos]  # `_short_value_at`, inlined (no call per row)
        if first < 0xFB:
            ws = pos + 1
            we = ws + first
        elif first == 0xFC and pos + 3 <= b:
            ws = pos + 3
            we = ws + (run[pos + 1] | (run[pos + 2] << 8))
        else:
            return general(run, a, b)
        return general(run, a, b) if we > b else order_at(run, ws, we)

    return key


def _short_value_at(run: bytes, pos: int, end: int) -> tuple[int, int]:
    """(start, stop) of the length-encoded value at run[pos] when its length takes one or three bytes and it ends
    by `end`; (-1, -1) otherwise (NULL, a longer length, a malformed row: the caller's general key decides)."""
    first = run[pos]
    if first < 0xFB:
        start, stop = pos + 1, pos + 1 + first
    elif first == 0xFC and pos + 3 <= end:
        start = pos + 3
        stop = start + (run[pos + 1] | (run[pos + 2] << 8))
    else:
        return -1, -1
    return (start, stop) if stop <= end else (-1, -1)


def _weighted_binary_order_key(index: int, wi: int, columns: int, decoder: WeightDecoder, general: FrameKey,
                               c: Any) -> FrameKey:
    """`_weighted_order_key` of binary-protocol rows (prepared statements) whose leading columns are
    length-encoded strings: NULLs read from the row's bitmap, the weights keyed in place; anything else (a
    NULL weight, long values, a frame of 16 MB) goes to `general`, which keys it the same way. `c`: as there."""
    if c is not None:
        return partial(c.binary_order_key, index, wi, columns, decoder, general)
    order_at = decoder.order_at
    values = 5 + (columns + 9) // 8  # frame header, 0x00, the NULL bitmap

    def key(run: bytes, a: int, b: int) -> Any:
        if b - a - 4 >= MAX or a + values > b or run[a + 4] != 0:
            return general(run, a, b)
        bitmap = a + 5
        pos = a + values
        i = 0
        while i < wi:
            bit = i + 2
            if run[bitmap + (bit >> 3)] & (1 << (bit & 7)):
                if i == index:
                    return b""
            else:
                first = run[pos] if pos < b else 0xFF  # a row that ends early: `general` says so
                if first >= 0xFB:
                    return general(run, a, b)
                pos += 1 + first
            i += 1
        bit = wi + 2
        if run[bitmap + (bit >> 3)] & (1 << (bit & 7)) or pos >= b:
            return general(run, a, b)
        ws, we = _short_value_at(run, pos, b)
        return general(run, a, b) if ws < 0 else order_at(run, ws, we)

    return key


# integer types and their sizes in a binary row (INT24 is sent in four bytes, YEAR in two)
_BINARY_INTEGER_SIZE = {1: 1, 2: 2, 9: 4, 3: 4, 8: 8, 13: 2}


def _binary_integer_key(index: int, descending: bool, columns: Sequence[ColumnMeta], width: int,
                        decode: Decode) -> FrameKey:
    """One integer sort column of binary-protocol rows (a prepared ``ORDER BY order_id``), keyed as the text
    rows' numeric key is (the value, negated DESC; NULL -inf ASC, +inf DESC), read in place: the columns before
    it are stepped over by their sizes, the value read from its bytes (no decoding of the row to text, which would
    dominate a prepared scatter's merge). Rows it does not read so simply go through `decode`."""
    col = columns[index]
    size = _BINARY_INTEGER_SIZE[col.type_code]
    signed = not col.flags & t.UNSIGNED_FLAG
    null = _HIGH if descending else _LOW
    sign = -1 if descending else 1
    sizes = [_BINARY_SIZE.get(c.type_code, -2) for c in columns[:index]]
    values = 5 + (len(columns) + 9) // 8  # frame header, 0x00, the NULL bitmap
    vk = value_key(col)

    def general(run: bytes, a: int, b: int) -> Any:
        row = decode(payload_at(run, a, b) if b - a - 4 >= MAX else run[a + 4:b], width)
        v = row[index]
        return null if v is None else vk(v) * sign

    def key(run: bytes, a: int, b: int) -> Any:
        if b - a - 4 >= MAX or run[a + 4] != 0:
            return general(run, a, b)
        bitmap = a + 5
        p = _step_binary(run, bitmap, a + values, b, sizes, index)
        if p < 0:
            return general(run, a, b)
        bit = index + 2
        if run[bitmap + (bit >> 3)] & (1 << (bit & 7)):
            return null
        if p + size > b:
            return general(run, a, b)  # malformed: the decoder says so
        return int.from_bytes(run[p:p + size], "little", signed=signed) * sign

    return key


def _binary_in_place(row_key: Callable[[Row], Any], columns: int, width: int) -> FrameKey:
    """A key over binary rows whose leading `width` columns are length-encoded strings: their values are
    the text protocol's, read in place (`protocol.rowscan.binary_prefix`) instead of decoded."""

    def key(run: bytes, a: int, b: int) -> Any:
        if b - a - 4 >= MAX:
            return row_key(binary_prefix(payload_at(run, a, b), columns, width))
        return row_key(binary_prefix(run, columns, width, a + 4, b))

    return key


def frame_equality_key(indexes: Sequence[int], columns: Sequence[ColumnMeta], decode: Decode | None,
                       weights: Mapping[int, int] | None = None) -> FrameKey:
    """The DISTINCT key of the row framed at run[a:b] (`merge.keys.equality_key` of `indexes`, the nodes'
    weights for text), read as `frame_key` reads sort keys."""
    width = 1 + max((max(i, weight_index(i, columns, weights) or 0) for i in indexes), default=0)
    row_key = equality_key(indexes, columns, weights or {})
    if decode is None and len(indexes) == 1 and (wi := weight_index(indexes[0], columns, weights)) is not None:
        return _weighted_text_key(indexes[0], wi, width, WeightDecoder(False).equal, None, b"", row_key)
    return _row_key_of_frames(row_key, columns, width, decode)


def _unordered() -> MergeError:
    return MergeError(
        "a data node returned rows in an order the merge does not reproduce (text sort keys of a collation the "
        "proxy does not know); the query cannot be merged correctly"
    )


def _append_cut(out: bytearray, run: bytes, a: int, b: int, cut: int) -> None:
    """The text row framed at run[a:b], its first `cut` columns only, framed again (sequence id 0: the relay
    renumbers)."""
    if b - a - 4 >= MAX:
        payload = payload_at(run, a, b)
        out += frames_of([payload[:text_cut(payload, cut)]]).data
        return
    stop = text_cut(run, cut, a + 4, b)
    n = stop - a - 4
    out += bytes((n & 0xFF, (n >> 8) & 0xFF, n >> 16, 0))
    out += run[a + 4:stop]


def _append_binary_cut(out: bytearray, run: bytes, a: int, b: int, types: list[int], cut: int) -> None:
    """As `_append_cut`, for a binary-protocol row (its NULL bitmap cut too: `protocol.rowscan.binary_cut`)."""
    if b - a - 4 >= MAX:
        out += frames_of([binary_cut(payload_at(run, a, b), types, cut)]).data
        return
    payload = binary_cut(run, types, cut, a + 4, b)
    if len(payload) >= MAX:
        out += frames_of([payload]).data
        return
    n = len(payload)
    out += bytes((n & 0xFF, (n >> 8) & 0xFF, n >> 16, 0))
    out += payload


Cutter = Callable[[bytearray, bytes, int, int], None]  # (out, run, frame start, frame end): append the cut row


def _cutter(cut: int, types: list[int] | None, c: Any) -> Cutter:
    """How `FrameMerger` appends a row cut after its first `cut` columns: `_append_cut` / `_append_binary_cut`,
    for the usual rows in one pass over their length bytes (the cut runs for every row of a prepared
    ORDER BY merge); rows of other shapes go to those, which also say what is malformed.
    `c`: merge._cframes, whose `text_cut` / `binary_cut` do the same in one C call (None: this Python)."""
    if c is not None:
        if types is None:
            return partial(c.text_cut, cut, lambda out, run, a, b: _append_cut(out, run, a, b, cut))
        kept = bytes(_BINARY_SIZE.get(t, -2) + 3 for t in types[:cut])
        every = list(types)
        return partial(c.binary_cut, kept, cut, len(types),
                       lambda out, run, a, b: _append_binary_cut(out, run, a, b, every, cut))
    if types is None:
        if cut != 1:
            return lambda out, run, a, b: _append_cut(out, run, a, b, cut)

        def first_column(out: bytearray, run: bytes, a: int, b: int) -> None:
            n = run[a + 4] if b - a - 4 < MAX else 0xFF
            if n < 0xFB and a + 5 + n <= b:
                n += 1
            elif n == 0xFB:
                n = 1
            else:
                _append_cut(out, run, a, b, cut)
                return
            out += bytes((n, 0, 0, 0))
            out += run[a + 4:a + 4 + n]

        return first_column
    all_types = types
    sizes = [_BINARY_SIZE.get(t, -2) for t in types[:cut]]
    bitmap_in, bitmap_out = (len(types) + 9) // 8, (cut + 9) // 8
    used = cut + 2 - 8 * (bitmap_out - 1)  # bits of the last bitmap byte that belong to kept columns
    mask = (1 << used) - 1 if used < 8 else 0

    def binary(out: bytearray, run: bytes, a: int, b: int) -> None:
        if b - a - 4 >= MAX or run[a + 4] != 0:
            _append_binary_cut(out, run, a, b, all_types, cut)
            return
        bitmap = a + 5
        values = bitmap + bitmap_in
        p = _step_binary(run, bitmap, values, b, sizes, cut)
        n = 1 + bitmap_out + p - values
        if p < 0 or p > b or n >= MAX:
            _append_binary_cut(out, run, a, b, all_types, cut)
            return
        out += bytes((n & 0xFF, (n >> 8) & 0xFF, n >> 16, 0))
        if mask:
            out += run[a + 4:bitmap + bitmap_out - 1]
            out.append(run[bitmap + bitmap_out - 1] & mask)
        else:
            out += run[a + 4:bitmap + bitmap_out]
        out += run[values:p]

    return binary


def _step_binary(run: bytes, bitmap: int, p: int, end: int, sizes: list[int], n: int) -> int:
    """Where the values of a binary row's first `n` columns end, from their first at run[p] (`bitmap`: where the
    row's NULL bitmap starts; `sizes`: `_BINARY_SIZE` of each column); -1 at a value it does not step over
    simply (a length of 251 bytes or more, a row that ends early): the caller's general reader decides."""
    for i in range(n):
        bit = i + 2
        if run[bitmap + (bit >> 3)] & (1 << (bit & 7)):
            continue
        size = sizes[i]
        if size >= 0:
            p += size
        elif size == -3:
            continue
        elif p < end and (size == -1 or run[p] < 0xFB):
            p += 1 + run[p]
        else:
            return -1
    return p


# binary-protocol value sizes by column type for `_cutter`: fixed, -1 one length byte (temporals), -3 none
# (the NULL type); -2 (any other) a length-encoded string (protocol.rowscan.binary_cut's table)
_BINARY_SIZE = {1: 1, 2: 2, 13: 2, 3: 4, 9: 4, 4: 4, 8: 8, 5: 8, 7: -1, 10: -1, 11: -1, 12: -1, 6: -3}


def next_frame(run: bytes, a: int) -> int:
    """Where the packet framed from run[a] ends."""
    length = run[a] | (run[a + 1] << 8) | (run[a + 2] << 16)
    return a + 4 + length if length != MAX else frame_end(run, a)


class FrameMerger:
    """A k-way merge of the streams' runs of row frames by `key`, ties in stream order (the heap entries are
    (key, stream, frame start, frame end), and streams are unique), skipping `skip` rows and stopping after
    `left` rows (-1: all). Feed every stream once (`feed`, None when it has no rows), then `merge`.

    `cut` >= 0: rows go out with their first `cut` columns only (hidden derived and weight columns dropped);
    `binary_types`: the rows are binary-protocol rows of columns of these types (their NULL bitmap is cut
    too). `check`: keys come from the nodes' collation weights, so a stream out of that order would be
    merged silently wrong: an error instead (as `merge.sources.OrderByMerger`). `distinct`: SELECT DISTINCT,
    a row goes on (to OFFSET, LIMIT and the output) only the first time its key is seen, as
    `merge.filters.DistinctFilter` after the pipeline's merge; each key kept is charged to `budget`.

    `tied`: rows with equal DISTINCT keys have equal sort keys (the caller checked every sort column is a
    DISTINCT column keyed by its collation weights or as an integer), so duplicates are neighbours in merge
    order: a row whose sort key differs from the previous row's starts a new tie group and goes on without a
    DISTINCT key; only rows of one tie group are compared by DISTINCT keys, and the keys kept are those of the
    current group (`SELECT DISTINCT c ... ORDER BY c` needs no second key per row)."""

    def __init__(self, key: FrameKey, streams: int, skip: int, left: int, *, cut: int = -1,
                 check: bool = False, distinct: FrameKey | None = None, budget: RowBudget | None = None,
                 binary_types: list[int] | None = None, tied: bool = False) -> None:
        self.key = key
        self.cutter: Cutter | None = None if cut < 0 else _cutter(cut, binary_types, C)
        self.check = check
        self.distinct = distinct
        self.tied = tied and distinct is not None
        self.group: tuple[Any, bytes, int, int] | None = None  # `tied`: the tie group's key and first row
        self.seen: set[Any] = set()
        self.budget = budget if budget is not None else RowBudget(1 << 62)
        self.runs: list[bytes] = [b""] * streams
        self.heap: list[tuple[Any, int, int, int]] = []
        self.skip = skip
        self.left = left
        self.rows = 0  # rows copied to the output since `take_rows`
        self.waiting = -1  # the stream whose run `merge` used up (its entry is still the heap's top)
        self.started = False
        # merge._cframes.merge_loop: `merge`'s loop in C for a merge with no DISTINCT or a `tied` one (None: the
        # loop below)
        self.c_loop: Any = C.merge_loop if C is not None and (distinct is None or self.tied) else None

    def feed(self, s: int, run: bytes | None) -> None:
        """Stream `s`'s next run (non-empty), or None: it has no more rows."""
        heap = self.heap
        if self.waiting == s:
            self.waiting = -1
            if run is None:
                heapq.heappop(heap)
            else:
                self.runs[s] = run
                b = next_frame(run, 0)
                k = self.key(run, 0, b)
                if self.check and k < heap[0][0]:
                    raise _unordered()
                heapq.heapreplace(heap, (k, s, 0, b))
        elif run is not None:
            self.runs[s] = run
            b = next_frame(run, 0)
            heap.append((self.key(run, 0, b), s, 0, b))

    def _first(self, k: Any, seen: set[Any]) -> bool:
        if k in seen:
            return False
        self.budget.charge_item("DISTINCT rows", k)
        seen.add(k)
        return True

    def _first_of_group(self, k: Any, run: bytes, a: int, b: int) -> bool:
        """`tied`: whether the row at run[a:b] with sort key `k` is the first of its DISTINCT key."""
        group, seen = self.group, self.seen
        if group is None or group[0] != k:  # a new tie group: its first row is new
            if seen:
                self.budget.release(len(seen))
                seen.clear()
            self.group = (k, run, a, b)
            return True
        distinct = self.distinct
        assert distinct is not None
        if not seen:  # the group's second row: its first row's DISTINCT key is needed now
            self._first(distinct(group[1], group[2], group[3]), seen)
        return self._first(distinct(run, a, b), seen)

    def take_rows(self) -> int:
        rows = self.rows
        self.rows = 0
        return rows

    def merge(self, out: bytearray, out_bytes: int) -> int:
        """Copy rows to `out` in order: returns the stream whose next run is needed (feed it, then call
        again), FULL once `out` holds `out_bytes`, or DONE."""
        heap = self.heap
        if not self.started:
            self.started = True
            heapq.heapify(heap)
            if self.left == 0:
                heap.clear()
        if self.c_loop is not None:  # the same steps (tests/merge/test_cframes.py)
            step: int = self.c_loop(self, out, out_bytes, frame_end, _unordered)
            return step
        runs = self.runs
        key = self.key
        heapreplace = heapq.heapreplace
        skip, left, rows = self.skip, self.left, self.rows  # locals in the loop, written back on return
        check = self.check
        distinct, seen = self.distinct, self.seen
        tied = self.tied
        cutter = self.cutter
        try:
            while heap:
                if len(out) >= out_bytes:
                    return FULL
                top = heap[0]
                s: int = top[1]
                a: int = top[2]
                b: int = top[3]
                run = runs[s]
                if distinct is not None and not (
                        self._first_of_group(top[0], run, a, b) if tied else self._first(distinct(run, a, b), seen)):
                    pass  # a duplicate: neither skipped by OFFSET nor sent
                elif skip:
                    skip -= 1
                else:
                    if cutter is None:
                        out += run[a:b]
                    else:
                        cutter(out, run, a, b)
                    rows += 1
                    if left > 0:
                        left -= 1
                        if left == 0:
                            heap.clear()
                            return DONE
                if b < len(run):
                    length = run[b] | (run[b + 1] << 8) | (run[b + 2] << 16)
                    c = b + 4 + length if length != MAX else frame_end(run, b)
                    k = key(run, b, c)
                    if check and k < top[0]:
                        raise _unordered()
                    heapreplace(heap, (k, s, b, c))
                    continue
                self.waiting = s
                return s
            return DONE
        finally:
            self.skip, self.left, self.rows = skip, left, rows
