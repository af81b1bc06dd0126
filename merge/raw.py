"""ORDER BY merges on raw row frames: decode only the sort key columns, relay each row as it came.

Why: a plain ``ORDER BY`` over several nodes (no grouping, aggregates, HAVING, DISTINCT, derived or weight
columns) changes no row, it only interleaves them. The general pipeline (`merge.pipeline.merge_rows`) decodes
every column of every row, pulls rows one by one through stacked async generators and encodes each row again
for the client (about 8 us per row; bench/RESULTS.md). Here each node's rows arrive as the runs of frames its
socket reads deliver (`protocol.rowframes.RowFrames`), a row's key is read straight out of the run (its
leading columns up to the last sort column, or for one numeric sort column that value alone), and the frame
the node sent is copied to the output run as it is: whoever sends the output renumbers its sequence ids.
Ordering is `merge.keys.order_key`'s, ties in stream order, as in `merge.sources.OrderByMerger`, so the answer
is the general pipeline's, row for row.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from merge import coltypes as t
from merge.keys import Row, order_key, value_key
from merge.spec import ColumnMeta, MergeSpec, OrderItem
from protocol.rowframes import MAX, RowFrames, frame_end, payload_at
from protocol.rowscan import text_prefix

__all__ = ["frame_key", "raw_mergeable", "raw_order_merge"]

Decode = Callable[[bytes, int], Row]  # (payload, leading columns to decode) -> the row's values as text
FrameKey = Callable[[bytes, int, int], Any]  # (run, frame start, frame end) -> the row's sort key

OUT_BYTES = 1 << 17  # an output run is handed on once it holds this much
_LOW, _HIGH = float("-inf"), float("inf")  # NULL's place next to numbers: first ASC, last DESC


def raw_mergeable(spec: MergeSpec, node_columns: int) -> bool:
    """True when `spec` only interleaves rows by ORDER BY (then paginates): rows go out as the nodes sent them."""
    return bool(spec.order_by) and not (
        spec.group_by or spec.aggregates or spec.distinct or spec.having_sql or spec.weights or spec.with_ties
        or spec.found_rows is not None or spec.visible_columns != node_columns or spec.computed or spec.rollup
    )


def frame_key(items: Sequence[OrderItem], columns: Sequence[ColumnMeta], decode: Decode | None) -> FrameKey:
    """The sort key of the row framed at run[a:b]. `decode` None: text-protocol rows, read in place.

    One integer or DECIMAL sort column of text rows keys by its value alone (NULL as -inf ASC, +inf DESC:
    the same order as `order_key`'s (0,) < (1, v) and (1, -v) < (2,), without a tuple per row); every
    other case is `order_key` over the decoded leading columns."""
    width = max(o.index for o in items) + 1
    row_key = order_key(items, columns, {})

    def joined(run: bytes, a: int, b: int) -> Any:  # a row of 16 MB or more: its frames joined first
        payload = payload_at(run, a, b)
        return row_key(decode(payload, width) if decode is not None else text_prefix(payload, width))

    if decode is not None:

        def decoded(run: bytes, a: int, b: int) -> Any:
            if b - a - 4 >= MAX:
                return joined(run, a, b)
            return row_key(decode(run[a + 4:b], width))

        return decoded
    only = items[0] if len(items) == 1 else None
    if only is not None and columns[only.index].type_code in (t.INTEGER_TYPES | t.DECIMAL_TYPES):
        vk = value_key(columns[only.index])
        index = only.index
        null = _HIGH if only.descending else _LOW
        sign = -1 if only.descending else 1

        def numeric(run: bytes, a: int, b: int) -> Any:
            if b - a - 4 >= MAX:
                v = text_prefix(payload_at(run, a, b), width)[index]
            else:
                pos = a + 4
                n = run[pos]
                if index == 0 and n < 0xFB:
                    return vk(run[pos + 1:pos + 1 + n]) * sign
                v = text_prefix(run, width, pos, b)[index]
            return null if v is None else vk(v) * sign

        return numeric

    def prefix(run: bytes, a: int, b: int) -> Any:
        if b - a - 4 >= MAX:
            return joined(run, a, b)
        return row_key(text_prefix(run, width, a + 4, b))

    return prefix


def _next_frame(run: bytes, a: int) -> int:
    length = run[a] | (run[a + 1] << 8) | (run[a + 2] << 16)
    return a + 4 + length if length != MAX else frame_end(run, a)


async def _next_run(it: AsyncIterator[RowFrames]) -> bytes | None:
    async for frames in it:
        if frames.rows:
            return frames.data  # type: ignore[return-value]
    return None


async def raw_order_merge(
    batches: Sequence[AsyncIterator[RowFrames]], spec: MergeSpec, columns: Sequence[ColumnMeta],
    decode: Decode | None = None, out_bytes: int = OUT_BYTES,
) -> AsyncIterator[RowFrames]:
    """The merged rows of `raw_mergeable` spec, as runs of the nodes' own frames (sequence ids not yet the
    client's) of about `out_bytes`; stops reading once OFFSET + LIMIT rows are out (the caller drains or
    closes the node streams). `decode`: the binary protocol's row decoder; None for text rows."""
    key = frame_key(spec.order_by, columns, decode)
    skip = spec.offset
    left = -1 if spec.limit is None else spec.limit  # rows still to send; -1 = all
    if left == 0:
        return
    runs: list[bytes] = [b""] * len(batches)
    heap: list[tuple[Any, int, int, int]] = []  # (key, stream, frame start, frame end): ties by stream
    for s, it in enumerate(batches):
        run = await _next_run(it)
        if run is not None:
            runs[s] = run
            b = _next_frame(run, 0)
            heap.append((key(run, 0, b), s, 0, b))
    heapq.heapify(heap)
    out = bytearray()
    rows = 0
    heapreplace, heappop = heapq.heapreplace, heapq.heappop
    while heap:
        _, s, a, b = heap[0]
        run = runs[s]
        if skip:
            skip -= 1
        else:
            out += run[a:b]
            rows += 1
            if left > 0:
                left -= 1
                if left == 0:
                    break
            if len(out) >= out_bytes:
                yield RowFrames(out, rows)
                out = bytearray()
                rows = 0
        if b < len(run):
            c = _next_frame(run, b)
            heapreplace(heap, (key(run, b, c), s, b, c))
            continue
        nxt = await _next_run(batches[s])
        if nxt is None:
            heappop(heap)
        else:
            runs[s] = nxt
            c = _next_frame(nxt, 0)
            heapreplace(heap, (key(nxt, 0, c), s, 0, c))
    if rows:
        yield RowFrames(out, rows)
