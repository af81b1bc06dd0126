"""LIMIT/OFFSET after merging, lazy pulling, and the async driver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from merge.pipeline import merge_rows
from merge.sources import heap_merge
from merge.spec import MergeSpec, OrderItem
from tests.merge.support import CountingIterator, cols, expect, node, run

ASC = (OrderItem(0),)

# (case, spec, streams, expected)
CASES = [
    ("limit no order", MergeSpec(1, limit=3), [node(5, 6), node(1, 2)], expect(5, 6, 1)),
    ("offset no order", MergeSpec(1, offset=3), [node(5, 6), node(1, 2)], expect(2)),
    ("offset and limit no order", MergeSpec(1, offset=1, limit=2), [node(5), node(1, 2)], expect(1, 2)),
    ("limit ordered", MergeSpec(1, order_by=ASC, limit=3), [node(1, 4, 6), node(2, 3, 5)], expect(1, 2, 3)),
    ("offset+limit ordered (nodes got LIMIT 0,o+n)", MergeSpec(1, order_by=ASC, offset=2, limit=2),
     [node(1, 4, 6, 7), node(2, 3, 5, 8)], expect(3, 4)),
    ("offset past end", MergeSpec(1, order_by=ASC, offset=10, limit=2), [node(1), node(2)], []),
    ("limit zero", MergeSpec(1, limit=0), [node(1), node(2)], []),
    ("limit larger than rows", MergeSpec(1, order_by=ASC, limit=10), [node(1), node(2)], expect(1, 2)),
    ("offset drops the only row", MergeSpec(1, offset=1), [node(1)], []),
]


@pytest.mark.parametrize(("spec", "streams", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pagination(spec: MergeSpec, streams: list, expected: list) -> None:
    assert run(streams, spec, cols("int")) == expected


@pytest.mark.parametrize(
    ("limit", "max_pulls"),
    [(0, 0), (1, 2), (3, 2), (5, 3)],
    ids=["limit 0 pulls nothing", "limit 1", "limit 3", "limit 5"],
)
def test_order_by_limit_stops_pulling(limit: int, max_pulls: int) -> None:
    # Interleaved streams 0,3,6.. / 1,4,7.. / 2,5,8..: emitting n rows needs ~n/3+1 rows from each.
    streams = [CountingIterator(node(*range(s, 300, 3))) for s in range(3)]
    out = run(streams, MergeSpec(1, order_by=ASC, limit=limit), cols("int"))
    assert out == expect(*range(limit))
    assert max(s.pulled for s in streams) <= max_pulls
    assert sum(s.pulled for s in streams) <= limit + 3


def test_iterator_limit_pulls_only_first_stream() -> None:
    streams = [CountingIterator(node(*range(10))) for _ in range(3)]
    assert run(streams, MergeSpec(1, limit=2), cols("int")) == expect(0, 1)
    assert [s.pulled for s in streams] == [2, 0, 0]


def test_heap_merge_holds_one_row_per_stream() -> None:
    streams = [CountingIterator(node(*range(s, 30, 3))) for s in range(3)]
    merged = heap_merge(streams, key=lambda row: int(row[0]))  # type: ignore[arg-type]
    first = next(merged)
    assert first == (b"0",)
    assert [s.pulled for s in streams] == [1, 1, 1]
    next(merged)
    assert [s.pulled for s in streams] == [2, 1, 1]


class AsyncNode:
    """An async node stream that records pulls (and whether it was read past what was needed)."""

    def __init__(self, rows: Sequence[tuple[bytes | None, ...]]) -> None:
        self._rows = list(rows)
        self.pulled = 0

    def __aiter__(self) -> AsyncIterator[tuple[bytes | None, ...]]:
        return self

    async def __anext__(self) -> tuple[bytes | None, ...]:
        if self.pulled >= len(self._rows):
            raise StopAsyncIteration
        self.pulled += 1
        return self._rows[self.pulled - 1]


async def test_async_order_by_limit() -> None:
    streams = [AsyncNode(node(*range(s, 60, 3))) for s in range(3)]
    spec = MergeSpec(1, order_by=ASC, offset=1, limit=4)
    out = [row async for row in merge_rows(streams, spec, cols("int"))]
    assert out == [(b"1",), (b"2",), (b"3",), (b"4",)]
    assert max(s.pulled for s in streams) <= 3


async def test_async_group_by_memory() -> None:
    from merge.spec import AggregateItem, AggregateKind

    spec = MergeSpec(2, group_by=(0,), aggregates=(AggregateItem(AggregateKind.SUM, 1),))
    streams = [AsyncNode(node((2, 1), (1, 2))), AsyncNode(node((1, 3)))]
    out = [row async for row in merge_rows(streams, spec, cols("int", "dec:s:0"))]
    assert out == [(b"1", b"5"), (b"2", b"1")]


async def test_async_backpressure_consumer_controls_pace() -> None:
    streams = [AsyncNode(node(*range(s, 60, 2))) for s in range(2)]
    gen = merge_rows(streams, MergeSpec(1, order_by=ASC), cols("int"))
    assert await anext(gen) == (b"0",)
    assert [s.pulled for s in streams] == [1, 1]
    assert await anext(gen) == (b"1",)
    assert [s.pulled for s in streams] == [2, 1]
    await gen.aclose()


async def test_async_aggregate_one_row_from_four_nodes() -> None:
    from merge.spec import AggregateItem, AggregateKind

    spec = MergeSpec(2, aggregates=(AggregateItem(AggregateKind.COUNT, 0), AggregateItem(AggregateKind.MAX, 1)))
    streams = [AsyncNode(node((n, n * 10))) for n in range(4)]
    out = [row async for row in merge_rows(streams, spec, cols("bigint", "int"))]
    assert out == [(b"6", b"30")]
