# ruff: noqa: E501  (table-driven: one case per line)
"""Select items computed from merged aggregates (merge.compute): MariaDB's decimal division, rounding,
NULL rules, overflow, formatting by the node column's type and scale. Expected values are MariaDB 10.11's."""

from __future__ import annotations

from decimal import Decimal

import pytest

from merge.compute import decimal_div, unsupported
from merge.errors import MergeError
from merge.spec import AggregateItem, AggregateKind, MergeSpec
from tests.merge.support import cols, expect, node, run

K = AggregateKind
D = Decimal


# (x, y, div_precision_increment, quotient as MariaDB computes it before printing)
@pytest.mark.parametrize(("x", "y", "increment", "quotient"), [
    (1, 3, 4, "0.333333333"),  # SELECT 1/3*1e9: one word of fraction
    (1, D("3.00000000"), 4, "0.333333333333333333"),  # divisor scale 8: its word and 3 more digits -> 2 words
    (D("1.000000"), 3, 4, "0.333333333333333333"),  # dividend scale 6: 6 + 4 > 9
    (D("1.00000"), 3, 4, "0.333333333"),  # dividend scale 5: 5 + 4 = 9
    (D("1.00000"), D("3.00000"), 4, "0.333333333333333333"),
    (D("1.0000000000"), D("3.0000000000"), 4, "0.333333333333333333333333333333333333"),
    (2, 3, 0, "0"),  # whole words: 0 digits
    (2, 3, 9, "0.666666666"),
    (7, 0, 4, None),  # division by zero: NULL
    (-7, 2, 4, "-3.500000000"),
])
def test_decimal_division_matches_mariadb(x: int | Decimal, y: int | Decimal, increment: int, quotient: str | None) -> None:
    got = decimal_div(x, y, increment)
    assert (None if got is None else str(got)) == quotient


# (case, column kinds, aggregates, computed items, node streams, expected row); the last column is @@div_precision_increment
CASES = [
    ("count + 1", ["bigint", "bigint", "int"], [AggregateItem(K.COUNT, 1)], [(0, "__c1 + 1")], [node((0, 3, 4)), node((0, 5, 4))], expect((9, 8, 4))),
    ("count + 1 over no rows", ["bigint", "bigint", "int"], [AggregateItem(K.COUNT, 1)], [(0, "__c1 + 1")], [node(), node()], expect((1, 0, None))),
    ("ifnull(sum, 0) all null", ["dec:s:2", "dec:x:2", "int"], [AggregateItem(K.SUM, 1)], [(0, "IFNULL(__c1, 0)")], [node((None, None, 4))], expect(("0.00", None, 4))),
    ("sum / count rounds when printed", ["dec:s:6", "dec:x:2", "bigint", "int"], [AggregateItem(K.SUM, 1), AggregateItem(K.COUNT, 2)], [(0, "__c1 / __c2")], [node(("0", "1.00", 1, 4)), node(("0", "1.00", 2, 4))], expect(("0.666667", "2.00", 3, 4))),
    ("(2/3)*3 keeps the word-truncated quotient", ["dec:s:4", "dec:x:0", "bigint", "int"], [AggregateItem(K.SUM, 1), AggregateItem(K.COUNT, 2)], [(0, "__c1 / __c2 * 3")], [node(("0", "2", 3, 4))], expect(("2.0000", "2", 3, 4))),
    ("round(avg, 2)", ["dec:s:2", "dec:x:2", "bigint", "int"], [AggregateItem(K.SUM, 1), AggregateItem(K.COUNT, 2)], [(0, "ROUND((__c1 / __c2), 2)")], [node(("0", "10.00", 2, 4)), node(("0", "0.05", 1, 4))], expect(("3.35", "10.05", 3, 4))),
    ("round half up away from zero", ["dec:s:1", "dec:x:2", "int"], [AggregateItem(K.SUM, 1)], [(0, "ROUND(__c1, 1)")], [node(("0", "-0.25", 4))], expect(("-0.3", "-0.25", 4))),
    ("double round is rint", ["double:s:0", "double", "int"], [AggregateItem(K.SUM, 1)], [(0, "ROUND(__c1)")], [node(("0", "2.5", 4))], expect(("2", "2.5", 4))),
    ("max - min", ["dec:s:2", "dec:a:2", "dec:b:2", "int"], [AggregateItem(K.MAX, 1), AggregateItem(K.MIN, 2)], [(0, "__c1 - __c2")], [node(("0", "9.50", "1.25", 4)), node(("0", "3.00", "-1.00", 4))], expect(("10.50", "9.50", "-1.00", 4))),
    ("if over a count is text", ["ci", "bigint", "int"], [AggregateItem(K.COUNT, 1)], [(0, "IF(__c1 > 2, 'many', 'few')")], [node(("x", 2, 4)), node(("x", 1, 4))], expect(("many", 3, 4))),
    ("case and comparisons", ["bigint", "bigint", "int"], [AggregateItem(K.COUNT, 1)], [(0, "CASE WHEN __c1 BETWEEN 2 AND 3 THEN 1 ELSE 0 END")], [node((0, 2, 4)), node((0, 1, 4))], expect((1, 3, 4))),
    ("div and mod", ["bigint", "bigint", "int"], [AggregateItem(K.COUNT, 1)], [(0, "__c1 DIV 2 + __c1 MOD 2")], [node((0, 7, 4))], expect((4, 7, 4))),
    ("division by zero is null", ["dec:s:4", "bigint", "int"], [AggregateItem(K.COUNT, 1)], [(0, "1 / __c1")], [node((0, 0, 4))], expect((None, 0, 4))),
    ("div_precision_increment 9", ["dec:s:9", "bigint", "int"], [AggregateItem(K.COUNT, 1)], [(0, "2 / __c1")], [node((0, 3, 9))], expect(("0.666666666", 3, 9))),
]


@pytest.mark.parametrize(("kinds", "aggregates", "computed", "streams", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_computed_items(kinds: list[str], aggregates: list[AggregateItem], computed: list[tuple[int, str]], streams: list, expected: list) -> None:
    width = len(kinds)
    spec = MergeSpec(visible_columns=width, aggregates=tuple(aggregates), computed=tuple(computed), increment_index=width - 1)
    assert run(streams, spec, cols(*kinds)) == expected


def test_integer_overflow_is_error_1690() -> None:
    spec = MergeSpec(visible_columns=2, aggregates=(AggregateItem(K.COUNT, 1),), computed=((0, "__c1 * 9223372036854775807"),))
    with pytest.raises(MergeError) as info:
        run([node((0, 2))], spec, cols("bigint", "bigint"))
    assert info.value.errno == 1690


@pytest.mark.parametrize(("sql", "construct"), [
    ("IFNULL(__c1, 0) + ROUND(__c2 / __c3, 2)", None),
    ("CONCAT(__c1, 'x')", "CONCAT(__c1, 'x')"),
    ("ROUND(__c1, __c2)", "ROUND(__c1, __c2)"),
    ("SQRT(__c1)", "SQRT(__c1)"),
])
def test_unsupported_names_the_construct(sql: str, construct: str | None) -> None:
    assert unsupported(sql) == construct
