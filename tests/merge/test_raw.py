"""merge.raw: an ORDER BY-only merge over raw row payloads sends exactly what the general pipeline sends
(same rows, same order, ties in stream order, OFFSET/LIMIT), whatever the batches the nodes' reads deliver."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from merge.pipeline import merge_rows_sync
from merge.raw import raw_mergeable, raw_order_merge
from merge.spec import ColumnMeta, MergeSpec, OrderItem
from protocol.packets import decode_text_row, encode_text_row
from tests.merge.support import cols, node

Row = tuple[bytes | None, ...]
ASC0, DESC0 = (OrderItem(0),), (OrderItem(0, True),)

# (columns, spec, node streams)
CASES: list[tuple[list[ColumnMeta], MergeSpec, list[list[Row]]]] = [
    (cols("bigint", "ci"), MergeSpec(2, ASC0), [node((1, "a"), (4, "d")), node((2, "b"), (3, "c")), node()]),
    (cols("bigint", "ci"), MergeSpec(2, DESC0), [node((4, "a"), (1, "d")), node((3, "b"), (2, "c"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0, limit=3), [node((1, "a"), (4, "d")), node((2, "b"), (3, "c"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0, offset=1, limit=2), [node((1, "a"), (4, "d")), node((2, "b"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0, offset=9), [node((1, "a")), node((2, "b"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0, limit=0), [node((1, "a")), node((2, "b"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0), [node((1, "x"), (1, "y")), node((1, "z"), (2, "w"))]),  # ties
    (cols("int", "bigint"), MergeSpec(2, (OrderItem(1), OrderItem(0, True))),
     [node((3, 1), (1, 1), (2, 5)), node((2, 1), (9, 4))]),
    (cols("int", "ci"), MergeSpec(2, ASC0), [node((None, "n"), (1, "a")), node((None, "m"), (0, "z"))]),  # NULLs
    (cols("int", "ci"), MergeSpec(2, DESC0), [node((1, "a"), (None, "n")), node((0, "z"), (None, "m"))]),
    (cols("dec", "int"), MergeSpec(2, ASC0), [node(("1.50", 1), ("10.00", 2)), node(("9.99", 3))]),
    (cols("ci", "int"), MergeSpec(2, ASC0), [node(("a", 1), ("B", 2)), node(("b", 3), ("C", 4))]),
    (cols("double"), MergeSpec(1, DESC0), [node(1.5, -2, -3e10), node(7, 0)]),
    ([ColumnMeta("c0", 3)], MergeSpec(1, ASC0), [node(*range(0, 600, 2)), node(*range(1, 600, 2))]),  # > a batch
]


async def _batches(payloads: list[bytes], size: int) -> AsyncIterator[list[bytes]]:
    for i in range(0, len(payloads), size):
        yield payloads[i:i + size]
    if not payloads:
        yield []


async def _raw(columns: Sequence[ColumnMeta], spec: MergeSpec, streams: list[list[Row]], size: int) -> list[Row]:
    width = len(columns)
    batches = [_batches([encode_text_row(r) for r in s], size) for s in streams]
    out: list[Row] = []
    async for chunk in raw_order_merge(batches, spec, columns, decode_text_row, out_batch=7):
        out.extend(decode_text_row(p, width) for p in chunk)
    return out


@pytest.mark.parametrize(("columns", "spec", "streams"), CASES)
@pytest.mark.parametrize("size", [1, 2, 1000])
def test_raw_merge_sends_what_the_pipeline_sends(columns: list[ColumnMeta], spec: MergeSpec,
                                                 streams: list[list[Row]], size: int) -> None:
    assert raw_mergeable(spec, len(columns))
    expected = list(merge_rows_sync(streams, spec, columns))
    assert asyncio.run(_raw(columns, spec, streams, size)) == expected


@pytest.mark.parametrize(("spec", "mergeable"), [
    (MergeSpec(2, ASC0), True),
    (MergeSpec(2), False),  # nothing to order: concatenation
    (MergeSpec(1, ASC0), False),  # a derived column is dropped
    (MergeSpec(2, ASC0, group_by=(0,)), False),
    (MergeSpec(2, ASC0, distinct=True), False),
    (MergeSpec(2, ASC0, having_sql="c > 1"), False),
    (MergeSpec(2, ASC0, weights=((1, 1),)), False),
    (MergeSpec(2, ASC0, limit=1, with_ties=True), False),
    (MergeSpec(2, ASC0, found_rows="count"), False),
])
def test_raw_mergeable(spec: MergeSpec, mergeable: bool) -> None:
    assert raw_mergeable(spec, 2) is mergeable
