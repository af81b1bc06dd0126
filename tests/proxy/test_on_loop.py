"""Which statement texts are decided on the event loop, and which in a worker thread (proxy.execution.routed)."""

from __future__ import annotations

import pytest

from proxy.execution.decide import OFF_LOOP_TEXT
from proxy.execution.routed import on_loop

LONG = " AND order_id IN (" + ", ".join(str(i) for i in range(OFF_LOOP_TEXT // 4)) + ")"


@pytest.mark.parametrize(("sql", "loop"), [
    ("SELECT 1", True),
    ("SELECT * FROM t_order WHERE user_id = 1" + LONG, False),
    ("UPDATE t_order SET status = 'x' WHERE user_id = 1" + LONG, False),
    ("INSERT INTO t_order (order_id) VALUES (1)" + LONG, True),  # key generators stay on the loop
    ("/* a comment */ INSERT INTO t_order (order_id) VALUES (1)" + LONG, True),
    ("-- a comment\nREPLACE INTO t_order (order_id) VALUES (1)" + LONG, True),
    ("  insert into t_order (order_id) values (1)" + LONG, True),
])
def test_on_loop(sql: str, loop: bool) -> None:
    assert on_loop(sql) is loop
