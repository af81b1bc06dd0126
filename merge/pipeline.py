"""Plans a merge from a `MergeSpec` and drives it over async (proxy) or sync (tests, tools) streams.

Plan = one source (how node streams combine) + push stages (how merged rows are transformed):

* no GROUP BY / aggregates: ORDER BY -> k-way `OrderByMerger`, else `IteratorMerger`.
* aggregates without GROUP BY: concatenate, fold everything into exactly one row.
* GROUP BY, stream: when `groups_sorted` and ORDER BY is empty or names exactly the group columns, the
  nodes' rows are ordered by the group columns — by ORDER BY's directions if given, else ascending (the
  kernel adds ``ORDER BY <group cols>``) — so a k-way merge brings each group's rows together.
* GROUP BY, memory: any other case; groups held in a dict, then sorted by ORDER BY, or by the group
  columns ascending when there is no ORDER BY (MariaDB's implicit GROUP BY order).
* then HAVING, DISTINCT (streaming, first occurrence wins), a final sort if the order is not already
  produced, pagination, and trimming to the visible columns.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from merge.aggregate import GroupAccumulator, MergeStats
from merge.aggregators import make_aggregator
from merge.coltypes import STRING_TYPES
from merge.compute import ExpressionCompiler, compute_stage
from merge.errors import MemoryMeter, MergeError, RowBudget
from merge.filters import DistinctFilter, SortStage
from merge.grouping import GroupByMemoryMerger, GroupByStreamMerger
from merge.having import HavingFilter
from merge.keys import Row, equality_key, order_key, weight_index
from merge.paginate import CountingPaginator, Paginator, paginator
from merge.rollup import RollupMerger
from merge.sources import IteratorMerger, OrderByMerger, Source
from merge.spec import ColumnMeta, MergeSpec, OrderItem
from merge.stages import PAUSE, Stage, finish_through, push_through

OutRow = tuple[bytes | None, ...]
DEFAULT_MEMORY_ROW_BUDGET = 1_000_000


@dataclass
class MergePlan:
    """One merge's source, stages, paginator and output width (single use: holds merge state)."""

    source: Source
    stages: list[Stage]
    paginator: Paginator | CountingPaginator
    visible_columns: int

    def output(self, row: Row) -> OutRow:
        return tuple(row[: self.visible_columns]) if len(row) > self.visible_columns else tuple(row)


def _weighted(items: Sequence[OrderItem], columns: Sequence[ColumnMeta], weights: dict[int, int]) -> bool:
    return any(weight_index(o.index, columns, weights) is not None for o in items)


def decoded_width(spec: MergeSpec, columns: Sequence[ColumnMeta]) -> int:
    """How many leading columns of each node row the merge reads: every column but the trailing weight
    columns of keys that turned out not to be text (a numeric ORDER BY key's weight is NULL and never
    looked at, so it is not decoded either)."""
    if not spec.weights:
        return len(columns)
    weight_columns = {w for _, w in spec.weights}
    used = [w for v, w in spec.weights if columns[v].type_code in STRING_TYPES]
    plain = [i for i in range(len(columns)) if i not in weight_columns]
    return 1 + max(plain + used, default=-1)


def _validate(spec: MergeSpec, columns: Sequence[ColumnMeta]) -> None:
    width = len(columns)
    indexes = [o.index for o in spec.order_by] + list(spec.group_by)
    indexes += [i for pair in spec.weights for i in pair]
    for agg in spec.aggregates:
        indexes += [i for i in (agg.index, agg.sum_index, agg.count_index, agg.distinct_index) if i is not None]
    bad = [i for i in indexes if not 0 <= i < width]
    if bad or not 0 <= spec.visible_columns <= width:
        raise MergeError(
            f"merge spec refers to columns {bad or [spec.visible_columns]} but the nodes return {width} columns"
        )


def plan_merge(
    stream_count: int,
    spec: MergeSpec,
    columns: Sequence[ColumnMeta],
    *,
    memory_row_budget: int = DEFAULT_MEMORY_ROW_BUDGET,
    warnings: MergeStats | None = None,
    meter: MemoryMeter | None = None,
) -> MergePlan:
    """Build the source and stages executing `spec` over `stream_count` node streams."""
    _validate(spec, columns)
    budget = RowBudget(memory_row_budget, meter)
    stages: list[Stage] = []
    source: Source
    final_order: tuple[OrderItem, ...] = ()  # order a final SortStage must establish

    weights = dict(spec.weights)
    if spec.group_by or spec.aggregates:
        acc = GroupAccumulator([make_aggregator(a, columns, budget, weights, warnings) for a in spec.aggregates])
        group_set = set(spec.group_by)
        group_asc = tuple(OrderItem(i) for i in spec.group_by)
        if spec.rollup and spec.group_by:
            merge_key = order_key(group_asc, columns, weights)
            source = OrderByMerger(stream_count, merge_key, check_sorted=_weighted(group_asc, columns, weights))
            levels = [equality_key(spec.group_by[: i + 1], columns, weights) for i in range(len(spec.group_by))]
            stages.append(RollupMerger(spec.group_by, levels, acc))
        elif not spec.group_by:
            source = IteratorMerger(stream_count)
            stages.append(GroupByStreamMerger(lambda row: (), acc, len(columns), always_one_row=True))
        elif spec.groups_sorted and (not spec.order_by or {o.index for o in spec.order_by} == group_set):
            merge_order = spec.order_by or group_asc
            merge_key = order_key(merge_order, columns, weights)
            source = OrderByMerger(stream_count, merge_key, check_sorted=_weighted(merge_order, columns, weights))
            # Text group keys: the nodes sort by max_sort_length-truncated keys, so different groups that
            # tie on the truncated key may interleave; such runs are grouped in memory.
            weighted = any(weight_index(i, columns, weights) is not None for i in spec.group_by)
            stages.append(GroupByStreamMerger(equality_key(spec.group_by, columns, weights), acc, len(columns),
                                              run_key=merge_key if weighted else None, budget=budget))
        else:
            source = IteratorMerger(stream_count)
            stages.append(GroupByMemoryMerger(equality_key(spec.group_by, columns, weights), acc, budget))
            final_order = spec.order_by or group_asc
    elif spec.order_by:
        source = OrderByMerger(stream_count, order_key(spec.order_by, columns, weights),
                               check_sorted=_weighted(spec.order_by, columns, weights))
    else:
        source = IteratorMerger(stream_count)

    if spec.computed:
        stages.append(compute_stage(spec.computed, columns, spec.increment_index))
    if spec.having_sql:
        compiler = ExpressionCompiler(columns, spec.having_bindings, spec.increment_index, spec.having_weights, weights)
        stages.append(HavingFilter(spec.having_sql, columns, compiler=compiler))
    if spec.distinct:
        stages.append(DistinctFilter(equality_key(range(spec.visible_columns), columns, weights), budget))
    if final_order:
        stages.append(SortStage(order_key(final_order, columns, weights), budget))
    ties_key = None
    if spec.with_ties and spec.limit is not None:
        ties_key = order_key(final_order or spec.order_by, columns, weights)
    page = paginator(spec.offset, spec.limit, ties_key, count_all=spec.found_rows == "count")
    return MergePlan(source, stages, page, spec.visible_columns)


def _emit(plan: MergePlan, rows: Iterable[Row]) -> Iterator[OutRow]:
    paginator = plan.paginator
    for row in rows:
        if row is PAUSE:
            yield PAUSE
            continue
        if paginator.done:
            return
        if paginator.admit(row):
            yield plan.output(row)


# The async merge lets the event loop run (asyncio.sleep(0)) once it has worked this long without awaiting anything:
# node rows already received are merged without a wait, and a merge of a million rows would otherwise hold the loop
# (every other session of the process) for seconds. Checked every `_CHECK_EVERY` rows.
SLICE_SECONDS = 0.02


class _RunningMerges:
    """The cyclic garbage collector's full passes scan every tracked object: beside a merge holding millions of
    them (groups, sort runs), one pass stops every session for 100 ms or more. At each slice a running merge
    freezes what is tracked (gc.freeze: later passes skip it); when no merge runs any more it is unfrozen, so
    cycles are collected again."""

    running = 0

    def done(self) -> None:
        self.running -= 1
        if self.running <= 0:
            self.running = 0
            gc.unfreeze()


_MERGES = _RunningMerges()


async def _slice_done() -> None:
    """The end of a slice of merge work: what the merge built so far is frozen, and the event loop runs."""
    gc.freeze()
    await asyncio.sleep(0)
_CHECK_EVERY = 64


def merge_rows_sync(
    streams: Sequence[Iterable[Row]],
    spec: MergeSpec,
    columns: Sequence[ColumnMeta],
    *,
    memory_row_budget: int = DEFAULT_MEMORY_ROW_BUDGET,
    warnings: MergeStats | None = None,
    meter: MemoryMeter | None = None,
) -> Iterator[OutRow]:
    """Synchronous twin of `merge_rows` over iterables of node rows (same plan, same semantics)."""
    plan = plan_merge(len(streams), spec, columns, memory_row_budget=memory_row_budget, warnings=warnings,
                      meter=meter)
    iterators = [iter(s) for s in streams]
    source, stages, paginator, output = plan.source, plan.stages, plan.paginator, plan.output
    counts = _NodeCounts(len(streams), spec.found_rows_index) if spec.found_rows == "window" else None
    if counts is not None:
        iterators = [counts.watch(i, it) for i, it in enumerate(iterators)]
    exhausted = False
    while not paginator.done:
        stream = source.need()
        if stream is not None:
            source.feed(stream, next(iterators[stream], None))
            continue
        row = source.next_row()
        if row is None:
            exhausted = True
            break
        if not stages:
            if paginator.admit(row):
                yield output(row)
            continue
        yield from _emit(plan, push_through(stages, row))
    if exhausted:
        for out in _emit(plan, finish_through(stages)):
            if out is not PAUSE:
                yield out
    if counts is not None:
        for stream in counts.unseen():
            counts.see(stream, next(iterators[stream], None))
    _found_rows(spec, paginator, counts, warnings)


async def merge_rows(
    streams: Sequence[AsyncIterator[Sequence[bytes | None]]],
    spec: MergeSpec,
    columns: Sequence[ColumnMeta],
    *,
    memory_row_budget: int = DEFAULT_MEMORY_ROW_BUDGET,
    warnings: MergeStats | None = None,
    meter: MemoryMeter | None = None,
) -> AsyncGenerator[OutRow, None]:
    """Merge the node result streams into what one unsharded server would return for the query.

    Rows are pulled lazily: a stream is read only when the merge cannot proceed without its next row
    (at most one buffered row per stream for ORDER BY), and only as fast as the consumer takes output.
    Once ``offset + limit`` rows are out the generator returns without reading further; the streams
    are NOT closed or drained here — the caller owns them and must cancel/close/drain what is left
    (e.g. ``aclose()`` the node generators or discard the rest of each node's result set).

    Raises `MergeError` (errno/sqlstate attached) for an inconsistent spec, an unsupported HAVING, or
    `MergeMemoryError` when groups/sort/DISTINCT state exceeds `memory_row_budget` rows.
    """
    _MERGES.running += 1
    try:
        plan = plan_merge(len(streams), spec, columns, memory_row_budget=memory_row_budget, warnings=warnings,
                          meter=meter)
        source, stages, paginator, output = plan.source, plan.stages, plan.paginator, plan.output
        counts = _NodeCounts(len(streams), spec.found_rows_index) if spec.found_rows == "window" else None
        if counts is not None:
            streams = [counts.watch_async(i, it) for i, it in enumerate(streams)]
        exhausted = False
        clock = time.perf_counter
        until = clock() + SLICE_SECONDS
        count = 0
        while not paginator.done:
            stream = source.need()
            if stream is not None:
                source.feed(stream, await anext(streams[stream], None))
                continue
            row = source.next_row()
            if row is None:
                exhausted = True
                break
            count += 1
            if count % _CHECK_EVERY == 0 and clock() >= until:
                await _slice_done()
                until = clock() + SLICE_SECONDS
            if not stages:
                if paginator.admit(row):
                    yield output(row)
                continue
            for out in _emit(plan, push_through(stages, row)):
                yield out
        if exhausted:
            for out in _emit(plan, finish_through(stages)):
                count += 1
                if (out is PAUSE or count % _CHECK_EVERY == 0) and clock() >= until:
                    await _slice_done()
                    until = clock() + SLICE_SECONDS
                if out is not PAUSE:
                    yield out
            for stage in stages:
                if isinstance(stage, SortStage) and stage.spent:
                    await _free_in_slices(stage.spent)
        if counts is not None:
            for stream in counts.unseen():
                counts.see(stream, await anext(streams[stream], None))
        _found_rows(spec, paginator, counts, warnings)

    finally:
        _MERGES.done()

async def _free_in_slices(runs: list[list[Any]]) -> None:
    """Empty `runs` a slice at a time, letting the event loop run between slices (see SLICE_SECONDS)."""
    clock = time.perf_counter
    until = clock() + SLICE_SECONDS
    while runs:
        run = runs[-1]
        del run[-8192:]
        if not run:
            runs.pop()
        if clock() >= until:
            await _slice_done()
            until = clock() + SLICE_SECONDS


class _NodeCounts:
    """SQL_CALC_FOUND_ROWS over plain rows: the first row of each node carries COUNT(*) OVER (), the
    node's rows without LIMIT (a node that returns no row has none)."""

    __slots__ = ("_counts", "_index")

    def __init__(self, streams: int, index: int | None) -> None:
        self._counts: list[int | None] = [None] * streams
        self._index = index

    def see(self, stream: int, row: Row | None) -> None:
        if self._counts[stream] is None:
            value = row[self._index] if row is not None and self._index is not None else None
            self._counts[stream] = int(value) if value is not None else 0

    def watch(self, stream: int, rows: Iterator[Row]) -> Iterator[Row]:
        for row in rows:
            self.see(stream, row)
            yield row
        self.see(stream, None)

    async def watch_async(self, stream: int, rows: AsyncIterator[Sequence[bytes | None]]
                          ) -> AsyncIterator[Sequence[bytes | None]]:
        async for row in rows:
            self.see(stream, row)
            yield row
        self.see(stream, None)

    def unseen(self) -> list[int]:
        return [i for i, c in enumerate(self._counts) if c is None]

    @property
    def total(self) -> int:
        return sum(c or 0 for c in self._counts)


def _found_rows(
    spec: MergeSpec, paginator: Paginator | CountingPaginator, counts: _NodeCounts | None, stats: MergeStats | None
) -> None:
    if stats is None or spec.found_rows is None:
        return
    stats.found_rows = counts.total if counts is not None else paginator.seen
