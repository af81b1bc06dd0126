"""HAVING evaluated over merged rows."""

from __future__ import annotations

import pytest

from merge.errors import MergeError
from merge.having import HavingCompiler, to_number
from merge.spec import AggregateItem, AggregateKind, ColumnMeta, MergeSpec
from tests.merge.support import cols, expect, node, run

# Output columns: g (ci), cnt = COUNT(*), SUM(x) (decimal), avg_price (double), note (ci, nullable)
COLUMNS = cols("ci:g", "bigint:cnt", "dec:SUM(x):0", "double:avg_price", "ci:note")
ROW = (b"Apple", b"4", b"10", b"2.5", None)

# (case, having_sql, expected truth for ROW)
CASES = [
    ("alias compare", "cnt > 3", True),
    ("alias compare false", "cnt >= 5", False),
    ("aggregate text matches column name", "SUM(x) = 10", True),
    ("aggregate text case/space insensitive", "sum( x ) = 10", True),
    ("and or", "cnt > 10 OR (cnt = 4 AND avg_price < 3)", True),
    ("not", "NOT cnt = 4", False),
    ("xor", "cnt = 4 XOR avg_price = 2.5", False),
    ("arithmetic", "cnt * 2 + 1 = 9", True),
    ("division decimal", "SUM(x) / cnt = 2.5", True),
    ("division by zero is null", "cnt / 0 IS NULL", True),
    ("div and mod", "cnt DIV 3 = 1 AND cnt MOD 3 = 1", True),
    ("unary minus", "-cnt < -3", True),
    ("float literal", "avg_price > 2.4e0", True),
    ("null comparison is unknown", "note = 'x'", False),
    ("not of unknown is unknown", "NOT (note = 'x')", False),
    ("is null", "note IS NULL", True),
    ("is not null", "note IS NOT NULL", False),
    ("null safe equal", "note <=> NULL", True),
    ("string ci equal", "g = 'apple'", True),
    ("string ci trailing space", "g = 'APPLE  '", True),
    ("string ci order", "g < 'banana'", True),
    ("in list", "cnt IN (1, 4)", True),
    ("in list null unknown", "cnt IN (1, NULL)", False),
    ("not in with match", "cnt NOT IN (4)", False),
    ("between", "cnt BETWEEN 2 AND 4", True),
    ("like ci", "g LIKE 'ap%'", True),
    ("like underscore", "g LIKE 'Appl_'", True),
    ("like no match", "g LIKE 'b%'", False),
    ("number vs string numeric", "cnt = '4'", True),
    ("true literal", "TRUE", True),
    ("qualified column", "t.cnt = 4", True),
    ("or with unknown and true", "note = 'x' OR cnt = 4", True),
]


@pytest.mark.parametrize(("sql", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_having_expression(sql: str, expected: bool) -> None:
    predicate = HavingCompiler(COLUMNS).compile(sql)
    value = predicate(ROW)
    assert (value is not None and to_number(value) != 0) is expected


@pytest.mark.parametrize(
    "sql",
    ["MAX(y) > 1", "unknown_col = 1", "cnt >", "ABS(cnt) = 4"],
    ids=["aggregate not selected", "unknown column", "syntax error", "unsupported function"],
)
def test_having_rejects(sql: str) -> None:
    with pytest.raises(MergeError):
        HavingCompiler(COLUMNS).compile(sql)


def test_having_filters_merged_groups_before_limit() -> None:
    columns = [ColumnMeta("g", 3), ColumnMeta("COUNT(*)", 8, 63)]
    spec = MergeSpec(2, group_by=(0,), aggregates=(AggregateItem(AggregateKind.COUNT, 1),), groups_sorted=True,
                     having_sql="count(*) >= 2", limit=2)
    streams = [node((1, 1), (2, 1), (3, 2), (4, 1)), node((2, 1), (4, 1), (5, 1))]
    assert run(streams, spec, columns) == expect((2, 2), (3, 2))


def test_having_with_derived_aggregate_column() -> None:
    # SELECT g FROM t GROUP BY g HAVING SUM(x) > 5: the kernel adds SUM(x) as derived column 1.
    columns = cols("int:g", "dec:SUM(x):0")
    spec = MergeSpec(1, group_by=(0,), aggregates=(AggregateItem(AggregateKind.SUM, 1),), having_sql="SUM(x) > 5")
    assert run([node((1, 3), (2, 9)), node((1, 3))], spec, columns) == expect(1, 2)
    assert run([node((1, 3), (2, 1)), node((1, 2))], spec, columns) == []
