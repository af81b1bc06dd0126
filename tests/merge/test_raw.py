"""merge.raw: an ORDER BY-only merge over raw row frames sends exactly what the general pipeline sends
(same rows, same order, ties in stream order, OFFSET/LIMIT), whatever the runs the nodes' reads deliver, and
whether keys are read in place (text rows) or through a row decoder (the binary protocol's path)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from merge.pipeline import merge_rows_sync
from merge.raw import raw_mergeable, raw_order_merge
from merge.spec import ColumnMeta, MergeSpec, OrderItem
from protocol.packets import decode_text_row, encode_text_row
from protocol.rowframes import RowFrames, frames_of, renumber, row_payloads
from tests.merge.support import cols, node

Row = tuple[bytes | None, ...]
ASC0, DESC0 = (OrderItem(0),), (OrderItem(0, True),)
BIG = b"x" * (0xFFFFFF + 10)  # a row of more than 16 MB: continuation frames

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
    (cols("int", "ci"), MergeSpec(2, DESC0), [node((None, "n"), (None, "o")), node((None, "m"))]),  # NULLs only
    (cols("ci", "int"), MergeSpec(2, (OrderItem(1),)),  # one numeric key that is not the first column
     [node(("a", None), ("b", -5), ("c", 7)), node(("d", None), ("e", 0)), node(("f", 9))]),
    (cols("ci", "int"), MergeSpec(2, (OrderItem(1, True),)),
     [node(("a", 7), ("b", -5), ("c", None)), node(("d", 8), ("e", None))]),
    (cols("dec", "int"), MergeSpec(2, ASC0), [node(("1.50", 1), ("10.00", 2)), node(("9.99", 3))]),
    (cols("dec", "int"), MergeSpec(2, DESC0), [node(("10.00", 1), ("-1.50", 2), (None, 0)), node(("9.99", 3))]),
    (cols("uint", "int"), MergeSpec(2, ASC0), [node((18446744073709551615, 1)), node((0, 2), (2**63, 3))]),
    (cols("ci", "int"), MergeSpec(2, ASC0), [node(("a", 1), ("B", 2)), node(("b", 3), ("C", 4))]),
    (cols("ci", "int"), MergeSpec(2, DESC0), [node(("c", 1), ("B", 2), (None, 0)), node(("b", 3), ("A", 4))]),
    (cols("bin", "int"), MergeSpec(2, ASC0), [node(("a", 1), ("b", 2)), node(("B", 3), ("a ", 4))]),
    (cols("cs", "uca1400"), MergeSpec(2, (OrderItem(1), OrderItem(0))),
     [node(("é", "e"), ("a", "É")), node(("b", "e"), ("z", "f"))]),
    (cols("double"), MergeSpec(1, DESC0), [node(1.5, -2, -3e10), node(7, 0)]),
    (cols("datetime", "time"), MergeSpec(2, (OrderItem(1), OrderItem(0, True))),
     [node(("2024-01-01 00:00:00", "-10:00:00"), ("2023-01-01 00:00:00", "100:00:00")),
      node(("2025-01-01 00:00:00", "-10:00:00"), (None, "1:00:00"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0), [node((1, "a" * 300), (3, "c" * 70000)), node((2, "b" * 251))]),
    (cols("bigint", "binary"), MergeSpec(2, ASC0), [node((1, "a"), (3, BIG), (5, "e")), node((2, BIG), (4, "d"))]),
    (cols("ci", "bigint"), MergeSpec(2, DESC0), [node((BIG, 1), ("a", 2)), node(("b", 3))]),  # key of > 16 MB
    ([ColumnMeta("c0", 3)], MergeSpec(1, ASC0), [node(*range(0, 600, 2)), node(*range(1, 600, 2))]),  # > a batch
    ([ColumnMeta("c0", 3)], MergeSpec(1, ASC0), [node(), node(), node()]),  # empty shards only
]


async def _runs(payloads: list[bytes], size: int) -> AsyncIterator[RowFrames]:
    for i in range(0, len(payloads), size):
        yield frames_of(payloads[i:i + size])


async def _raw(columns: Sequence[ColumnMeta], spec: MergeSpec, streams: list[list[Row]], size: int,
               decoded: bool) -> list[Row]:
    width = len(columns)
    batches = [_runs([encode_text_row(r) for r in s], size) for s in streams]
    out = bytearray()
    rows = 0
    seq = 5
    async for run in raw_order_merge(batches, spec, columns, decode_text_row if decoded else None, out_bytes=64):
        data = bytearray(run.data)
        seq = renumber(data, seq)
        rows += run.rows
        out += data
    payloads = row_payloads(out)
    assert len(payloads) == rows
    return [decode_text_row(p, width) for p in payloads]


@pytest.mark.parametrize(("columns", "spec", "streams"), CASES)
@pytest.mark.parametrize("size", [1, 2, 1000])
@pytest.mark.parametrize("decoded", [False, True], ids=["in-place", "decoded"])
def test_raw_merge_sends_what_the_pipeline_sends(columns: list[ColumnMeta], spec: MergeSpec,
                                                 streams: list[list[Row]], size: int, decoded: bool) -> None:
    assert raw_mergeable(spec, len(columns))
    expected = list(merge_rows_sync(streams, spec, columns))
    assert _raw_sync(columns, spec, streams, size, decoded) == expected


def _raw_sync(columns: Sequence[ColumnMeta], spec: MergeSpec, streams: list[list[Row]], size: int,
              decoded: bool) -> list[Row]:
    return asyncio.run(_raw(columns, spec, streams, size, decoded))


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
