"""ORDER BY merges on raw row payloads: decode only the sort key columns, relay each row as it came.

Why: a plain ``ORDER BY`` over several nodes (no grouping, aggregates, HAVING, DISTINCT, derived or weight
columns) changes no row, it only interleaves them. The general pipeline (`merge.pipeline.merge_rows`) decodes
every column of every row, pulls rows one by one through stacked async generators and encodes each row again
for the client (about 8 us per row; bench/RESULTS.md). Here each node's rows arrive in the batches its socket
reads deliver, a row's key is computed from its leading columns up to the last sort column only, and the
payload the node sent is what the client gets. Ordering is `merge.keys.order_key`'s, ties in stream order,
as in `merge.sources.OrderByMerger`, so the answer is the general pipeline's, row for row.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from merge.keys import Row, order_key
from merge.spec import ColumnMeta, MergeSpec

__all__ = ["raw_mergeable", "raw_order_merge"]

Decode = Callable[[bytes, int], Row]  # (payload, leading columns to decode) -> the row's text values


def raw_mergeable(spec: MergeSpec, node_columns: int) -> bool:
    """True when `spec` only interleaves rows by ORDER BY (then paginates): rows go out as the nodes sent them."""
    return bool(spec.order_by) and not (
        spec.group_by or spec.aggregates or spec.distinct or spec.having_sql or spec.weights or spec.with_ties
        or spec.found_rows is not None or spec.visible_columns != node_columns or spec.computed or spec.rollup
    )


async def raw_order_merge(
    batches: Sequence[AsyncIterator[list[bytes]]], spec: MergeSpec, columns: Sequence[ColumnMeta], decode: Decode,
    out_batch: int = 256,
) -> AsyncIterator[list[bytes]]:
    """The merged row payloads of `raw_mergeable` spec, in lists of up to `out_batch`; stops reading once
    OFFSET + LIMIT rows are out (the caller drains or closes the node streams)."""
    width = max(o.index for o in spec.order_by) + 1
    row_key = order_key(spec.order_by, columns, {})

    def key(payload: bytes) -> Any:
        return row_key(decode(payload, width))

    skip = spec.offset
    left = spec.limit  # rows still to send; None = all
    if left is not None and left <= 0:
        return
    bufs: list[list[bytes]] = [[] for _ in batches]
    pos = [0] * len(batches)
    heap: list[tuple[Any, int, bytes]] = []
    for s, it in enumerate(batches):
        batch = await anext(it, None)
        while batch is not None and not batch:
            batch = await anext(it, None)
        if batch is not None:
            bufs[s] = batch
            heap.append((key(batch[0]), s, batch[0]))
    heapq.heapify(heap)
    out: list[bytes] = []
    heapreplace, heappop = heapq.heapreplace, heapq.heappop
    while heap:
        _, s, payload = heap[0]
        if skip:
            skip -= 1
        else:
            out.append(payload)
            if left is not None:
                left -= 1
                if left == 0:
                    break
            if len(out) >= out_batch:
                yield out
                out = []
        i = pos[s] + 1
        buf = bufs[s]
        if i < len(buf):
            pos[s] = i
            nxt = buf[i]
            heapreplace(heap, (key(nxt), s, nxt))
            continue
        batch = await anext(batches[s], None)
        while batch is not None and not batch:
            batch = await anext(batches[s], None)
        if batch is None:
            heappop(heap)
        else:
            bufs[s], pos[s] = batch, 0
            heapreplace(heap, (key(batch[0]), s, batch[0]))
    if out:
        yield out
