# ruff: noqa: E501  (table-driven: one case per line)
"""COUNT(DISTINCT a, b) and AVG(DISTINCT x) merged from node rows grouped by the distinct arguments."""

from __future__ import annotations

import pytest

from merge.errors import MergeMemoryError
from merge.spec import AggregateItem, AggregateKind, MergeSpec
from tests.merge.support import cols, expect, node, run

K = AggregateKind

# (case, column kinds, aggregate, node streams, expected row)
CASES = [
    ("count distinct tuples across nodes", ["bigint", "int", "ci"], AggregateItem(K.COUNT_DISTINCT, 0, distinct_index=1, distinct_more=(2,)), [node((0, 1, "a"), (0, 1, "b")), node((0, 1, "A"), (0, 2, "a"))], expect((3, 1, "a"))),
    ("a NULL in the tuple does not count", ["bigint", "int", "ci"], AggregateItem(K.COUNT_DISTINCT, 0, distinct_index=1, distinct_more=(2,)), [node((0, 1, None), (0, None, "b"))], expect((0, 1, None))),
    ("no rows: 0", ["bigint", "int", "ci"], AggregateItem(K.COUNT_DISTINCT, 0, distinct_index=1, distinct_more=(2,)), [node(), node()], expect((0, None, None))),
    ("avg distinct decimal", ["dec:a:6", "dec:x:2"], AggregateItem(K.AVG_DISTINCT, 0, distinct_index=1), [node((0, "1.00"), (0, "2.00")), node((0, "2.00"), (0, "4.00"))], expect(("2.333333", "1.00"))),
    ("avg distinct int column is decimal", ["dec:a:4", "int"], AggregateItem(K.AVG_DISTINCT, 0, distinct_index=1), [node((0, 1), (0, 2)), node((0, 2))], expect(("1.5000", 1))),
    ("avg distinct double", ["double", "double"], AggregateItem(K.AVG_DISTINCT, 0, distinct_index=1), [node((0, "0.5")), node((0, "0.5"), (0, "1"))], expect(("0.75", "0.5"))),
    ("avg distinct no values: NULL", ["dec:a:6", "dec:x:2"], AggregateItem(K.AVG_DISTINCT, 0, distinct_index=1), [node((0, None))], expect((None, None))),
]


@pytest.mark.parametrize(("kinds", "aggregate", "streams", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_distinct_aggregates(kinds: list[str], aggregate: AggregateItem, streams: list, expected: list) -> None:
    spec = MergeSpec(visible_columns=len(kinds), aggregates=(aggregate,))
    assert run(streams, spec, cols(*kinds)) == expected


def test_distinct_values_are_charged_to_the_row_budget() -> None:
    spec = MergeSpec(visible_columns=3, aggregates=(AggregateItem(K.COUNT_DISTINCT, 0, distinct_index=1, distinct_more=(2,)),))
    with pytest.raises(MergeMemoryError):
        run([node(*((0, i, "x") for i in range(10)))], spec, cols("bigint", "int", "ci"), memory_row_budget=5)
