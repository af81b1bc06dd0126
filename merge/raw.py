"""ORDER BY merges on raw row frames: decode only the sort key columns, relay each row as it came.

Why: a plain ``ORDER BY`` over several nodes (no grouping, aggregates, HAVING; DISTINCT only drops rows) changes no
row, it only interleaves them. The general pipeline (`merge.pipeline.merge_rows`) decodes every column of every row,
pulls rows one by one through stacked async generators and encodes each row again for the client, several Python
steps per row (bench/RESULTS.md has the figures). Here each node's rows arrive as the runs of frames its socket
reads deliver (`protocol.rowframes.RowFrames`), a row's key is read straight out of the run (its leading columns up
to the last sort column, or for one numeric sort column that value alone), and the frame the node sent is copied to
the output run as it is: whoever sends the output renumbers its sequence ids. Ordering is `merge.keys.order_key`'s,
ties in stream order, as in `merge.sources.OrderByMerger`, so the answer is the general pipeline's, row for row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import NamedTuple

from merge import coltypes as t
from merge.errors import MemoryMeter, RowBudget
from merge.frames import DONE, FULL, Decode, FrameKey, FrameMerger, frame_equality_key, frame_key
from merge.keys import weight_index
from merge.pipeline import DEFAULT_MEMORY_ROW_BUDGET, SLICE_SECONDS
from merge.spec import ColumnMeta, MergeSpec
from protocol.rowframes import RowFrames

__all__ = ["frame_key", "raw_mergeable", "raw_order_merge", "raw_order_merge_whole"]

OUT_BYTES = 1 << 17  # an output run is handed on once it holds this much


def raw_mergeable(spec: MergeSpec, node_columns: int) -> bool:
    """True when `spec` only interleaves rows by ORDER BY (then drops DISTINCT duplicates, then paginates):
    rows go out as the nodes sent them, or cut after the visible columns (hidden ORDER BY and weight
    columns)."""
    if not spec.order_by or (
        spec.group_by or spec.aggregates or spec.having_sql or spec.with_ties
        or spec.found_rows is not None or spec.computed or spec.rollup
    ):
        return False
    return spec.visible_columns <= node_columns


def _keys_tie(spec: MergeSpec, columns: Sequence[ColumnMeta], weights: dict[int, int]) -> bool:
    """Whether rows DISTINCT deems equal have equal sort keys: every sort column is a visible (so DISTINCT)
    column whose key is a function of what DISTINCT compares: its collation weights (text), or an integer.
    (A hidden sort column, or a key approximating a collation, could order duplicates apart.)"""
    return all(
        o.index < spec.visible_columns
        and (weight_index(o.index, columns, weights) is not None or columns[o.index].type_code in t.INTEGER_TYPES)
        for o in spec.order_by
    )


class _Plan(NamedTuple):
    """What a merge of one spec over one node header needs beyond its rows: its keys, which do not change."""

    spec: MergeSpec
    columns: Sequence[ColumnMeta]
    decode: Decode | None
    key: FrameKey
    distinct: FrameKey | None
    cut: int
    check: bool
    tied: bool
    binary_types: list[int] | None


# The keys of a spec over a header, kept while the same spec, column list and decoder come back (the
# kernel keeps a spec with nothing of the values in it; the proxy keeps a header's column list and decoder). The
# entry holds all three, so their ids cannot be reused while it lives. Keys read rows and keep no row state
# (a WeightDecoder learns the collation of the column's weights, the same for every row of it).
_PLANS: dict[tuple[int, int, int], _Plan] = {}
_PLANS_LIMIT = 1024


def _plan(spec: MergeSpec, columns: Sequence[ColumnMeta], decode: Decode | None) -> _Plan:
    ident = (id(spec), id(columns), id(decode))
    plan = _PLANS.get(ident)
    if plan is not None and plan.spec is spec and plan.columns is columns and plan.decode is decode:
        return plan
    weights = dict(spec.weights)
    distinct = frame_equality_key(range(spec.visible_columns), columns, decode, weights) if spec.distinct else None
    plan = _Plan(spec, columns, decode, frame_key(spec.order_by, columns, decode, weights), distinct,
                 spec.visible_columns if spec.visible_columns < len(columns) else -1,
                 any(weight_index(o.index, columns, weights) is not None for o in spec.order_by),
                 distinct is not None and _keys_tie(spec, columns, weights),
                 None if decode is None else [c.type_code for c in columns])
    if len(_PLANS) >= _PLANS_LIMIT:
        _PLANS.clear()
    _PLANS[ident] = plan
    return plan


async def _next_run(it: AsyncIterator[RowFrames]) -> bytes | None:
    async for frames in it:
        if frames.rows:
            return bytes(frames.data)
    return None


def _merger(spec: MergeSpec, columns: Sequence[ColumnMeta], decode: Decode | None, streams: int, left: int,
            memory_row_budget: int, meter: MemoryMeter | None = None) -> FrameMerger:
    plan = _plan(spec, columns, decode)
    return FrameMerger(plan.key, streams, spec.offset, left, cut=plan.cut, check=plan.check,
                       distinct=plan.distinct, budget=RowBudget(memory_row_budget, meter),
                       binary_types=plan.binary_types, tied=plan.tied)


async def raw_order_merge(
    batches: Sequence[AsyncIterator[RowFrames]], spec: MergeSpec, columns: Sequence[ColumnMeta],
    decode: Decode | None = None, out_bytes: int = OUT_BYTES, memory_row_budget: int = DEFAULT_MEMORY_ROW_BUDGET,
    meter: MemoryMeter | None = None,
) -> AsyncIterator[RowFrames]:
    """The merged rows of `raw_mergeable` spec, as runs of the nodes' own frames (sequence ids not yet the
    client's) of about `out_bytes`; stops reading once OFFSET + LIMIT rows are out (the caller drains or
    closes the node streams). `decode`: the binary protocol's row decoder (to text values) for binary rows;
    None for text rows. DISTINCT keeps
    the keys it has seen within `memory_row_budget` (MergeMemoryError past it, as the pipeline)."""
    left = -1 if spec.limit is None else spec.limit  # rows still to send; -1 = all
    if left == 0:
        return
    merger = _merger(spec, columns, decode, len(batches), left, memory_row_budget, meter)
    for s, it in enumerate(batches):
        merger.feed(s, await _next_run(it))
    out = bytearray()
    clock = time.perf_counter
    until = clock() + SLICE_SECONDS
    while (step := merger.merge(out, out_bytes)) != DONE:
        if step == FULL:
            yield RowFrames(out, merger.take_rows())
            out = bytearray()
        else:
            merger.feed(step, await _next_run(batches[step]))
        if clock() >= until:  # runs already received merge without a wait: let the loop run (merge.pipeline)
            await asyncio.sleep(0)
            until = clock() + SLICE_SECONDS
    if merger.rows:
        yield RowFrames(out, merger.take_rows())


def raw_order_merge_whole(
    runs: Sequence[Sequence[RowFrames]], spec: MergeSpec, columns: Sequence[ColumnMeta],
    decode: Decode | None = None, memory_row_budget: int = DEFAULT_MEMORY_ROW_BUDGET,
    meter: MemoryMeter | None = None,
) -> tuple[RowFrames, list[bool]]:
    """`raw_order_merge` of nodes whose rows are all at hand (`runs`: each node's runs, in order), in one call
    and one output run (the usual scatter or range answer arrives whole before it is merged, so async
    generators per node would cost more than the merge itself); and per node, whether its rows were read to their end
    (the async merge's node streams that reach their end, where a LIMIT stops it before)."""
    out = bytearray()
    left = -1 if spec.limit is None else spec.limit
    if left == 0:
        return RowFrames(out, 0), [False] * len(runs)
    merger = _merger(spec, columns, decode, len(runs), left, memory_row_budget, meter)
    at = [0] * len(runs)

    def next_run(s: int) -> bytes | None:
        node = runs[s]
        i = at[s]
        while i < len(node):
            frames = node[i]
            i += 1
            if frames.rows:
                at[s] = i
                data = frames.data
                return data if type(data) is bytes else bytes(data)
        at[s] = i
        ended[s] = True
        return None

    ended = [False] * len(runs)
    for s in range(len(runs)):
        merger.feed(s, next_run(s))
    while (step := merger.merge(out, _UNBOUNDED)) != DONE:
        merger.feed(step, next_run(step))
    return RowFrames(out, merger.take_rows()), ended


_UNBOUNDED = 1 << 62  # `FrameMerger.merge`'s out_bytes when one run takes the whole answer
