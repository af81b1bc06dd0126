"""proxy.execution.preroute: the coroutine takes the fast path's route only for the very statement it routed."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.execution.preroute import matches, prerouted
from routing.kernel import ShardingKernel
from tests.routing.conftest import METADATA, build_rules

SQL = "SELECT * FROM t_order WHERE user_id BETWEEN ? AND ?"

# (sql, params asked, matches the route kept for SQL with [1, 2])
CASES: list[tuple[str, list[Any] | None, bool]] = [
    (SQL, [1, 2], True),
    (SQL, (1, 2), True),  # a tuple of the same values
    (SQL, [1, 3], False),
    (SQL, [1, 2.0], False),  # equal but another type: the algorithm may see it differently
    (SQL, [True, 2], False),
    (SQL, [1], False),
    (SQL, [1, 2, 3], False),
    (SQL, None, False),
    (SQL + " ", [1, 2], False),
    ("SELECT * FROM t_order WHERE user_id BETWEEN 1 AND 2", None, False),
]


@pytest.mark.parametrize(("sql", "params", "expected"), CASES)
def test_matches_only_the_same_statement(sql: str, params: list[Any] | None, expected: bool) -> None:
    kernel = ShardingKernel(build_rules(), METADATA)
    kept = prerouted(kernel, SQL, [1, 2], kernel.route(SQL, [1, 2]))
    assert matches(kept, kernel, sql, params) is expected


def test_text_statement_and_staleness() -> None:
    kernel = ShardingKernel(build_rules(), METADATA)
    text = "SELECT * FROM t_order WHERE user_id BETWEEN 1 AND 2"
    kept = prerouted(kernel, text, None, kernel.route(text))
    assert matches(kept, kernel, text, None)
    assert not matches(kept, kernel, text, [])
    assert not matches(kept, ShardingKernel(build_rules(), METADATA), text, None)  # another kernel
    assert not matches(None, kernel, text, None)
    kernel.invalidate()  # rules or metadata changed since: route again
    assert not matches(kept, kernel, text, None)
