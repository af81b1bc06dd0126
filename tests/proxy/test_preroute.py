"""proxy.execution.preroute: the coroutine takes the fast path's plan only for the very statement it decided."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.execution.decide import NO_FEDERATION, PLAIN, SessionView, decide
from proxy.execution.plans import Refused, Run
from proxy.execution.preroute import declined, matches, take
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
    kept = declined(kernel, SQL, [1, 2], PLAIN, decide(kernel, SQL, [1, 2]))
    assert matches(kept, kernel, sql, params, PLAIN) is expected


def test_text_statement_and_staleness() -> None:
    kernel = ShardingKernel(build_rules(), METADATA)
    text = "SELECT * FROM t_order WHERE user_id BETWEEN 1 AND 2"
    kept = declined(kernel, text, None, PLAIN, decide(kernel, text, None))
    assert matches(kept, kernel, text, None, PLAIN)
    assert not matches(kept, kernel, text, [], PLAIN)
    assert not matches(kept, ShardingKernel(build_rules(), METADATA), text, None, PLAIN)  # another kernel
    assert not matches(None, kernel, text, None, PLAIN)
    kernel.invalidate()  # rules or metadata changed since: route again
    assert not matches(kept, kernel, text, None, PLAIN)


def test_a_session_view_that_decides_alike() -> None:
    """`decide.same_decision`: a route does not depend on the federation flag, a refusal does; the node that knows
    FOUND_ROWS() matters to SELECT FOUND_ROWS() only."""
    kernel = ShardingKernel(build_rules(), METADATA)
    text = "SELECT * FROM t_order WHERE user_id BETWEEN 1 AND 2"
    kept = declined(kernel, text, None, NO_FEDERATION, decide(kernel, text, None, NO_FEDERATION))
    assert matches(kept, kernel, text, None, PLAIN)
    assert matches(kept, kernel, text, None, SessionView(found_rows_source="ds_0"))
    found = "SELECT FOUND_ROWS()"
    kept = declined(kernel, found, None, NO_FEDERATION, decide(kernel, found, None, NO_FEDERATION))
    assert matches(kept, kernel, found, None, PLAIN)
    assert not matches(kept, kernel, found, None, SessionView(found_rows_source="ds_0"))
    join = "SELECT o.status FROM t_order o JOIN t_order_item i ON o.status = i.status"
    refused = decide(kernel, join, None, NO_FEDERATION)
    kept = declined(kernel, join, None, NO_FEDERATION, refused)
    assert matches(kept, kernel, join, None, NO_FEDERATION)
    assert not matches(kept, kernel, join, None, PLAIN)  # federation may answer it: decided again


class _Fast:
    declined = None


def test_take_empties_the_field() -> None:
    kernel = ShardingKernel(build_rules(), METADATA)
    text = "SELECT * FROM t_order WHERE user_id BETWEEN 1 AND 2"
    plan = decide(kernel, text, None)
    fast = _Fast()
    fast.declined = declined(kernel, text, None, PLAIN, plan)  # type: ignore[assignment]
    assert take(fast, kernel, text, None, PLAIN) is plan
    assert fast.declined is None
    fast.declined = declined(kernel, text, None, PLAIN, plan)  # type: ignore[assignment]
    assert take(fast, kernel, text + " ", None, PLAIN) is None  # another statement: decided anew
    assert fast.declined is None
    assert take(None, kernel, text, None, PLAIN) is None  # no fast path


def test_a_plan_decided_in_another_sql_mode_is_not_taken() -> None:
    """Issue 34: a text reads otherwise under ANSI_QUOTES / NO_BACKSLASH_ESCAPES: a plan decided in one sql_mode is
    never the plan of the same text in another (`decide.same_decision` compares the views' modes)."""
    kernel = ShardingKernel(build_rules(), METADATA)
    text = 'SELECT "user_id", COUNT(*) AS "n" FROM t_order GROUP BY "user_id" ORDER BY "n" DESC'
    ansi = SessionView(federation=False, mode=32768)
    kept = declined(kernel, text, None, NO_FEDERATION, decide(kernel, text, None, NO_FEDERATION))
    assert not matches(kept, kernel, text, None, ansi)
    plan = decide(kernel, text, None, ansi)
    assert isinstance(plan, Run) and "COUNT(*) AS `n`" in plan.routed.execution_units[0].sql
    assert matches(declined(kernel, text, None, ansi, plan), kernel, text, None, ansi)
    backslash = "SELECT * FROM t_order WHERE user_id = 1 AND status = 'a\\'"
    assert isinstance(decide(kernel, backslash, None, NO_FEDERATION), Refused)
    nbe = decide(kernel, backslash, None, SessionView(federation=False, mode=512))
    assert isinstance(nbe, Run) and {u.data_source for u in nbe.routed.execution_units} == {"ds_1"}
