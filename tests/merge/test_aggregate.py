"""Aggregates merged across nodes (no GROUP BY: one output row per query)."""

from __future__ import annotations

import pytest

from merge.spec import AggregateItem, AggregateKind, MergeSpec
from tests.merge.support import cols, expect, node, run

K = AggregateKind


def agg(kind: AggregateKind, index: int = 0, **kw: object) -> AggregateItem:
    return AggregateItem(kind, index, **kw)  # type: ignore[arg-type]


AVG = agg(K.AVG, 0, sum_index=1, count_index=2)

# (case, column kinds, aggregates, visible columns, node streams, expected single row)
CASES = [
    ("count", ["bigint"], [agg(K.COUNT)], 1, [node(3), node(0), node(5)], expect(8)),
    ("count no rows anywhere", ["bigint"], [agg(K.COUNT)], 1, [node(), node()], expect(0)),
    ("sum int", ["dec:s:0"], [agg(K.SUM)], 1, [node(10), node(-3), node(None)], expect(7)),
    ("sum all null", ["dec:s:0"], [agg(K.SUM)], 1, [node(None), node(None)], expect(None)),
    ("sum no rows anywhere", ["dec:s:0"], [agg(K.SUM)], 1, [node()], expect(None)),
    ("sum decimal keeps scale", ["dec:s:2"], [agg(K.SUM)], 1, [node("1.25"), node("2.10"), node("-3.35")],
     expect("0.00")),
    ("sum huge decimal exact", ["dec:s:2"], [agg(K.SUM)], 1,
     [node("99999999999999999999999999999999999.99"), node("0.01")], expect("100000000000000000000000000000000000.00")),
    ("sum double", ["double"], [agg(K.SUM)], 1, [node("0.1"), node("0.2")], expect("0.30000000000000004")),
    ("sum double exponent", ["double"], [agg(K.SUM)], 1, [node("1e20"), node("1e20")], expect("2e20")),
    ("sum double fixed scale", ["double:s:3"], [agg(K.SUM)], 1, [node("1.5"), node("2.25")], expect("3.750")),
    ("min int numeric", ["int"], [agg(K.MIN)], 1, [node(10), node(9), node(None)], expect(9)),
    ("max int numeric", ["int"], [agg(K.MAX)], 1, [node(9), node(10)], expect(10)),
    ("max unsigned bigint", ["uint"], [agg(K.MAX)], 1, [node("18446744073709551615"), node("1")],
     expect("18446744073709551615")),
    ("min ci keeps node bytes", ["ci"], [agg(K.MIN)], 1, [node("b"), node("A"), node("a")], expect("A")),
    ("max bin", ["bin"], [agg(K.MAX)], 1, [node("Z"), node("a")], expect("a")),
    ("max double", ["double"], [agg(K.MAX)], 1, [node("1e20"), node("9.5e19")], expect("1e20")),
    ("min all null", ["int"], [agg(K.MIN)], 1, [node(None), node(None)], expect(None)),
    ("max datetime", ["datetime"], [agg(K.MAX)], 1, [node("2020-01-01 00:00:00"), node("2021-01-01 00:00:00")],
     expect("2021-01-01 00:00:00")),
    ("avg int scale 4", ["dec:a:4", "dec:s:0", "bigint"], [AVG], 1,
     [node(("3.3333", 10, 3)), node(("1.6667", 5, 3))], expect("2.5000")),
    ("avg rounds half up", ["dec:a:2", "dec:s:0", "bigint"], [AVG], 1, [node(("0.20", 1, 5)), node((None, None, 3))],
     expect("0.13")),
    ("avg negative half up", ["dec:a:2", "dec:s:0", "bigint"], [AVG], 1, [node(("x", -1, 8))], expect("-0.13")),
    ("avg decimal source", ["dec:a:6", "dec:s:2", "bigint"], [AVG], 1, [node(("x", "1.00", 2)), node(("x", "1.00", 1))],
     expect("0.666667")),
    ("avg count zero is null", ["dec:a:4", "dec:s:0", "bigint"], [AVG], 1,
     [node((None, None, 0)), node((None, None, 0))], expect(None)),
    ("avg double", ["double:a", "double:s", "bigint"], [AVG], 1, [node(("x", "1.5", 1)), node(("x", "2", 2))],
     expect("1.1666666666666667")),
    ("avg no rows anywhere", ["dec:a:4", "dec:s:0", "bigint"], [AVG], 1, [node()], expect(None)),
    ("count distinct ci", ["bigint", "ci"], [agg(K.COUNT_DISTINCT, 0, distinct_index=1)], 1,
     [node((1, "a"), (1, "b")), node((1, "A"), (1, "c"), (0, None))], expect(3)),
    ("count distinct bin", ["bigint", "bin"], [agg(K.COUNT_DISTINCT, 0, distinct_index=1)], 1,
     [node((1, "a"), (1, "b")), node((1, "A"), (1, "b"))], expect(3)),
    ("count distinct numeric", ["bigint", "dec"], [agg(K.COUNT_DISTINCT, 0, distinct_index=1)], 1,
     [node((1, "1.00")), node((1, "1.0"), (1, "2.00"))], expect(2)),
    ("count distinct empty", ["bigint", "int"], [agg(K.COUNT_DISTINCT, 0, distinct_index=1)], 1,
     [node((0, None)), node()], expect(0)),
    ("sum distinct", ["dec:s:0", "int"], [agg(K.SUM_DISTINCT, 0, distinct_index=1)], 1,
     [node((1, 1), (2, 2)), node((2, 2), (3, 3))], expect(6)),
    ("sum distinct empty", ["dec:s:0", "int"], [agg(K.SUM_DISTINCT, 0, distinct_index=1)], 1,
     [node((None, None))], expect(None)),
    ("group_concat", ["ci"], [agg(K.GROUP_CONCAT)], 1, [node("a,b"), node(None), node("c")], expect("a,b,c")),
    ("group_concat separator", ["ci"], [agg(K.GROUP_CONCAT, separator="; ")], 1, [node("a"), node("b")],
     expect("a; b")),
    ("group_concat all null", ["ci"], [agg(K.GROUP_CONCAT)], 1, [node(None), node(None)], expect(None)),
    ("bit_xor", ["uint"], [agg(K.BIT_XOR)], 1, [node(5), node(3)], expect(6)),
    ("bit_or", ["uint"], [agg(K.BIT_OR)], 1, [node(5), node(3)], expect(7)),
    ("bit_and identity", ["uint"], [agg(K.BIT_AND)], 1, [node("18446744073709551615"), node(6)], expect(6)),
    ("bit_and no rows", ["uint"], [agg(K.BIT_AND)], 1, [node()], expect("18446744073709551615")),
    ("several aggregates four nodes", ["bigint", "int", "int"], [agg(K.COUNT, 0), agg(K.MAX, 1), agg(K.MIN, 2)], 3,
     [node((2, 7, 1)), node((0, None, None)), node((5, 9, -4)), node((1, 3, 3))], expect((8, 9, -4))),
]


@pytest.mark.parametrize(("kinds", "aggregates", "visible", "streams", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_aggregate_without_group_by(kinds: list[str], aggregates: list[AggregateItem], visible: int,
                                    streams: list, expected: list) -> None:
    spec = MergeSpec(visible_columns=visible, aggregates=tuple(aggregates))
    assert run(streams, spec, cols(*kinds)) == expected


def test_aggregate_plain_column_takes_first_row() -> None:
    # SELECT name, COUNT(*) FROM t (no GROUP BY, ONLY_FULL_GROUP_BY off): some row's name.
    spec = MergeSpec(visible_columns=2, aggregates=(agg(K.COUNT, 1),))
    assert run([node(("x", 2)), node(("y", 3))], spec, cols("ci", "bigint")) == expect(("x", 5))
