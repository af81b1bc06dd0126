"""Condition extraction and DNF evaluation (widen, never narrow)."""

from __future__ import annotations

import pytest
from sqlglot import exp

from routing.conditions import Constraint, evaluate, extract, project
from routing.parse import parse_statement, scan_shape
from routing.route import statement_values as statement_values_for_tests


def groups(where: str) -> list[dict[str, Constraint]] | None:
    shape = scan_shape(f"SELECT * FROM t WHERE {where}")
    ast = parse_statement(shape)
    assert ast is not None
    slots = {start: k for k, (start, _, _) in enumerate(shape.spans)}

    def resolve(column: exp.Column) -> list[tuple[int, str]]:
        return [(0, column.name.lower())]

    cond = extract(ast.args["where"].this, resolve, slots.get)
    projected = project(cond, {(0, "a"): "a"})
    return evaluate(projected, statement_values_for_tests(shape, None))


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("a = 1", [{"a": (1,)}]),
        ("a IN (1, 2) AND a IN (2, 3)", [{"a": (2,)}]),
        ("a = 1 OR a = 2", [{"a": (1, 2)}]),  # one group listing both values (issue 35)
        ("a = 1 OR a = 2 OR a = 1.0 OR a = 3", [{"a": (1, 2, 3)}]),
        ("a = 1 OR b = 2", None),
        ("b = 2", None),
        ("a = 1 AND b = 2", [{"a": (1,)}]),
        ("NOT a = 1", None),
        ("a + 1 = 2", None),
        ("a = 1 AND a = 2", []),
        ("(a = 1 OR a = 3) AND a > 2", [{"a": (3,)}]),
    ],
)
def test_evaluate(where: str, expected: list[dict[str, tuple[int, ...]]] | None) -> None:
    result = groups(where)
    if expected is None:
        assert result is None
        return
    assert result is not None
    assert [{k: v.values for k, v in g.items()} for g in result] == expected


def test_ranges() -> None:
    result = groups("a BETWEEN 1 AND 5 AND a < 4")
    assert result is not None
    con = result[0]["a"]
    assert (con.lower, con.upper, con.upper_inclusive) == (1, 4, False)
