"""GROUP BY (stream and memory) and DISTINCT merges."""

from __future__ import annotations

import pytest

from merge.errors import MergeError, MergeMemoryError
from merge.spec import AggregateItem, AggregateKind, MergeSpec, OrderItem
from tests.merge.support import CountingIterator, cols, expect, node, run

K = AggregateKind
COUNT1 = (AggregateItem(K.COUNT, 1),)
A, D = False, True

# SELECT g, COUNT(*) FROM t GROUP BY g [ORDER BY ...]: columns (g, count)
# (case, group column kind, spec, node streams, expected)
CASES = [
    ("stream ci groups merge", "ci", MergeSpec(2, group_by=(0,), aggregates=COUNT1, groups_sorted=True),
     [node(("a", 1), ("c", 2)), node(("A", 5), ("b", 1))], expect(("a", 6), ("b", 1), ("c", 2))),
    ("stream bin keeps case apart", "bin", MergeSpec(2, group_by=(0,), aggregates=COUNT1, groups_sorted=True),
     [node(("A", 5), ("a", 1)), node(("B", 1), ("a", 2))], expect(("A", 5), ("B", 1), ("a", 3))),
    ("stream order by group desc", "int",
     MergeSpec(2, order_by=(OrderItem(0, D),), group_by=(0,), aggregates=COUNT1, groups_sorted=True),
     [node((3, 1), (1, 1)), node((2, 4), (1, 2))], expect((3, 1), (2, 4), (1, 3))),
    ("stream null group first", "int", MergeSpec(2, group_by=(0,), aggregates=COUNT1, groups_sorted=True),
     [node((None, 1), (2, 1)), node((None, 2), (1, 1))], expect((None, 3), (1, 1), (2, 1))),
    ("stream numeric order", "int", MergeSpec(2, group_by=(0,), aggregates=COUNT1, groups_sorted=True),
     [node((9, 1), (10, 1)), node((10, 1), (100, 1))], expect((9, 1), (10, 2), (100, 1))),
    ("memory sorts by group key", "int", MergeSpec(2, group_by=(0,), aggregates=COUNT1),
     [node((3, 1), (1, 1)), node((2, 4), (3, 2))], expect((1, 1), (2, 4), (3, 3))),
    ("memory ci", "ci", MergeSpec(2, group_by=(0,), aggregates=COUNT1),
     [node(("b", 1), ("A", 1)), node(("a", 4), ("B", 2))], expect(("A", 5), ("b", 3))),
    ("memory order by aggregate desc", "int",
     MergeSpec(2, order_by=(OrderItem(1, D),), group_by=(0,), aggregates=COUNT1),
     [node((1, 1), (2, 5)), node((3, 4), (1, 9))], expect((1, 10), (2, 5), (3, 4))),
    ("groups_sorted but order by aggregate falls back to memory", "int",
     MergeSpec(2, order_by=(OrderItem(1, A),), group_by=(0,), aggregates=COUNT1, groups_sorted=True),
     [node((1, 1), (2, 5)), node((1, 9), (3, 4))], expect((3, 4), (2, 5), (1, 10))),
    ("memory ties in order keep group order", "int",
     MergeSpec(2, order_by=(OrderItem(1, A),), group_by=(0,), aggregates=COUNT1),
     [node((2, 1), (1, 1))], expect((2, 1), (1, 1))),
    ("stream limit offset", "int",
     MergeSpec(2, group_by=(0,), aggregates=COUNT1, groups_sorted=True, offset=1, limit=1),
     [node((1, 1), (2, 1), (3, 1)), node((2, 1))], expect((2, 2))),
    ("memory limit", "int", MergeSpec(2, group_by=(0,), aggregates=COUNT1, limit=2),
     [node((3, 1), (1, 1)), node((2, 4))], expect((1, 1), (2, 4))),
    ("having on merged count", "int",
     MergeSpec(2, group_by=(0,), aggregates=COUNT1, groups_sorted=True, having_sql="c1 > 2"),
     [node((1, 1), (2, 2)), node((1, 1), (2, 1))], expect((2, 3))),
]


@pytest.mark.parametrize(("kind", "spec", "streams", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_group_by(kind: str, spec: MergeSpec, streams: list, expected: list) -> None:
    assert run(streams, spec, cols(kind, "bigint")) == expected


def test_multi_column_group_with_aggregates_and_derived_avg() -> None:
    # SELECT a, b, SUM(x), AVG(x) FROM t GROUP BY a, b  (+ derived SUM(x), COUNT(x) for AVG)
    columns = cols("ci", "int", "dec:s:0", "dec:avg:4", "dec:as:0", "bigint")
    aggs = (AggregateItem(K.SUM, 2), AggregateItem(K.AVG, 3, sum_index=4, count_index=5))
    spec = MergeSpec(4, group_by=(0, 1), aggregates=aggs, groups_sorted=True)
    streams = [
        node(("a", 1, 10, "10.0000", 10, 1), ("a", 2, 3, "1.5000", 3, 2)),
        node(("A", 1, 5, "2.5000", 5, 2), ("b", 1, None, None, None, 0)),
    ]
    assert run(streams, spec, columns) == expect(("a", 1, 15, "5.0000"), ("a", 2, 3, "1.5000"), ("b", 1, None, None))


def test_count_distinct_per_group_rows() -> None:
    # SELECT g, COUNT(DISTINCT x) FROM t GROUP BY g: nodes return one row per (g, x), x in column 2.
    columns = cols("int", "bigint", "ci")
    spec = MergeSpec(2, group_by=(0,), aggregates=(AggregateItem(K.COUNT_DISTINCT, 1, distinct_index=2),),
                     groups_sorted=True)
    streams = [node((1, 1, "a"), (1, 1, "b"), (2, 1, "z")), node((1, 1, "A"), (1, 1, "c"))]
    assert run(streams, spec, columns) == expect((1, 3), (2, 1))


def test_stream_group_limit_stops_pulling() -> None:
    spec = MergeSpec(2, group_by=(0,), aggregates=COUNT1, groups_sorted=True, limit=1)
    streams = [CountingIterator(node(*[(i, 1) for i in range(100)])) for _ in range(3)]
    assert run(streams, spec, cols("int", "bigint")) == expect((0, 3))
    # group 0 is complete once group 1 shows up: each stream gave at most its first two rows
    assert all(s.pulled <= 2 for s in streams)


def test_memory_budget_exceeded() -> None:
    spec = MergeSpec(2, group_by=(0,), aggregates=COUNT1)
    with pytest.raises(MergeMemoryError) as info:
        run([node(*[(i, 1) for i in range(10)])], spec, cols("int", "bigint"), memory_row_budget=5)
    assert info.value.errno == 1038
    assert info.value.sqlstate == "HY001"
    assert "proxy-merge-memory-rows" in info.value.message
    assert isinstance(info.value, MergeError)


def test_memory_budget_fits_exactly() -> None:
    spec = MergeSpec(2, group_by=(0,), aggregates=COUNT1, order_by=(OrderItem(1, D),))
    out = run([node(*[(i, i) for i in range(5)])], spec, cols("int", "bigint"), memory_row_budget=5)
    assert [r[0] for r in out] == ["4", "3", "2", "1", "0"]


# DISTINCT: (case, kinds, spec, streams, expected)
DISTINCT_CASES = [
    ("distinct no order keeps first seen", ["int"], MergeSpec(1, distinct=True),
     [node(3, 1, 3), node(1, 2)], expect(3, 1, 2)),
    ("distinct ci", ["ci"], MergeSpec(1, distinct=True), [node("a", "b"), node("A", "B", "c")], expect("a", "b", "c")),
    ("distinct bin", ["bin"], MergeSpec(1, distinct=True), [node("a"), node("A", "a")], expect("a", "A")),
    ("distinct nulls", ["int"], MergeSpec(1, distinct=True), [node(None, 1), node(None)], expect(None, 1)),
    ("distinct ordered", ["int"], MergeSpec(1, distinct=True, order_by=(OrderItem(0),)),
     [node(1, 3, 5), node(1, 2, 3)], expect(1, 2, 3, 5)),
    ("distinct multi column", ["int", "ci"], MergeSpec(2, distinct=True),
     [node((1, "x"), (1, "y")), node((1, "X"), (2, "x"))], expect((1, "x"), (1, "y"), (2, "x"))),
    ("distinct ignores derived column", ["int", "int"], MergeSpec(1, distinct=True, order_by=(OrderItem(1),)),
     [node((7, 1), (8, 3)), node((7, 2))], expect(7, 8)),
    ("distinct limit offset", ["int"], MergeSpec(1, distinct=True, order_by=(OrderItem(0),), offset=1, limit=2),
     [node(1, 1, 2, 4), node(1, 3, 4)], expect(2, 3)),
]


@pytest.mark.parametrize(("kinds", "spec", "streams", "expected"), [c[1:] for c in DISTINCT_CASES],
                         ids=[c[0] for c in DISTINCT_CASES])
def test_distinct(kinds: list[str], spec: MergeSpec, streams: list, expected: list) -> None:
    assert run(streams, spec, cols(*kinds)) == expected


def test_distinct_budget() -> None:
    with pytest.raises(MergeMemoryError):
        run([node(*range(10))], MergeSpec(1, distinct=True), cols("int"), memory_row_budget=3)


def test_count_distinct_budget_released_per_finished_group() -> None:
    # 4 groups x 3 distinct values = 12 values overall, but a stream merge holds one group at a time.
    columns = cols("int", "bigint", "int")
    spec = MergeSpec(2, group_by=(0,), aggregates=(AggregateItem(K.COUNT_DISTINCT, 1, distinct_index=2),),
                     groups_sorted=True)
    stream = node(*[(g, 1, v) for g in range(4) for v in range(3)])
    assert run([stream], spec, columns, memory_row_budget=3) == expect(*[(g, 3) for g in range(4)])
    with pytest.raises(MergeMemoryError):
        run([stream], spec, columns, memory_row_budget=2)
