# ruff: noqa: E501  (table-driven: one case per line)
"""WITH ROLLUP after the merge (merge.rollup): groups, then their super-aggregate rows, then the grand total."""

from __future__ import annotations

import pytest

from merge.spec import AggregateItem, AggregateKind, MergeSpec
from tests.merge.support import cols, expect, node, run

K = AggregateKind

# (case, group columns, node streams (rows ordered by the group columns), expected rows); columns: a, b, COUNT
CASES = [
    ("one column", (0,), [node((1, 0, 2), (2, 0, 1)), node((1, 0, 3))], expect((1, 0, 5), (2, 0, 1), (None, 0, 6))),
    ("two columns", (0, 1), [node((1, 1, 1), (1, 2, 1), (2, 1, 1)), node((1, 2, 5))], expect((1, 1, 1), (1, 2, 6), (1, None, 7), (2, 1, 1), (2, None, 1), (None, None, 8))),
    ("no rows, no row", (0, 1), [node(), node()], []),
    ("a NULL group key is its own group", (0,), [node((None, 0, 2)), node((None, 0, 1), (3, 0, 1))], expect((None, 0, 3), (3, 0, 1), (None, 0, 4))),
]


@pytest.mark.parametrize(("group_by", "streams", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rollup(group_by: tuple[int, ...], streams: list, expected: list) -> None:
    spec = MergeSpec(visible_columns=3, group_by=group_by, aggregates=(AggregateItem(K.COUNT, 2),), groups_sorted=True, rollup=True)
    assert run(streams, spec, cols("int", "int", "bigint")) == expected


def test_rollup_rows_are_paginated_after_the_merge() -> None:
    spec = MergeSpec(visible_columns=3, group_by=(0,), aggregates=(AggregateItem(K.COUNT, 2),), groups_sorted=True, rollup=True, offset=1, limit=5)
    assert run([node((1, 0, 1), (2, 0, 1)), node((3, 0, 1))], spec, cols("int", "int", "bigint")) == expect((2, 0, 1), (3, 0, 1), (None, 0, 3))
