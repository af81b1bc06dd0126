
"""Plan cache: repeated shapes never reach sqlglot's parser; bounded; invalidated on demand."""

from __future__ import annotations

import pytest
import sqlglot

from routing.kernel import ShardingKernel
from tests.routing.conftest import METADATA, build_rules


def _forbid_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("sqlglot parser called for a cached shape")

    monkeypatch.setattr(sqlglot, "parse", fail)
    monkeypatch.setattr(sqlglot, "parse_one", fail)
    monkeypatch.setattr(sqlglot.Parser, "parse", fail)


@pytest.mark.parametrize(
    ("first", "second", "second_sql"),
    [
        (
            "SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2",
            "SELECT * FROM t_order WHERE user_id = 2 AND order_id = 5",
            "SELECT * FROM t_order_1 WHERE user_id = 2 AND order_id = 5",
        ),
        (
            "SELECT * FROM t_order WHERE user_id = 'a1' AND order_id IN (1, 2)",
            "SELECT * FROM t_order WHERE user_id = '2' AND order_id IN (3, 5)",
            "SELECT * FROM t_order_1 WHERE user_id = '2' AND order_id IN (3, 5)",
        ),
        (
            "INSERT INTO t_order (user_id, order_id) VALUES (1, 1)",
            "INSERT INTO t_order (user_id, order_id) VALUES (2, 3)",
            "INSERT INTO t_order_1 (user_id, order_id) VALUES (2, 3)",
        ),
    ],
)
def test_repeat_shape_skips_parser(
    kernel: ShardingKernel, monkeypatch: pytest.MonkeyPatch, first: str, second: str, second_sql: str
) -> None:
    try:
        kernel.route(first)
    except Exception:
        pass  # the first call may fail in the algorithm ('a1'); the plan is cached before execution
    _forbid_parsing(monkeypatch)
    routed = kernel.route(second)
    assert [u.sql for u in routed.execution_units] == [second_sql]
    assert kernel.cache.hits >= 1


def test_prepared_statement_reuses_plan(kernel: ShardingKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "SELECT * FROM t_order WHERE user_id = ? AND order_id = ?"
    kernel.route(sql, [1, 1])
    _forbid_parsing(monkeypatch)
    routed = kernel.route(sql, [2, 3])
    assert [(u.data_source, u.sql, u.params) for u in routed.execution_units] == [
        ("ds_0", "SELECT * FROM t_order_1 WHERE user_id = ? AND order_id = ?", (2, 3))
    ]


def test_ordinal_order_by_is_pinned(kernel: ShardingKernel) -> None:
    a = kernel.route("SELECT status, amount FROM t_order ORDER BY 1")
    b = kernel.route("SELECT status, amount FROM t_order ORDER BY 2")
    assert a.merge_spec is not None and b.merge_spec is not None
    assert (a.merge_spec.order_by[0].index, b.merge_spec.order_by[0].index) == (0, 1)


def test_bounded_and_invalidated() -> None:
    kernel = ShardingKernel(build_rules(), METADATA, plan_cache_size=2)
    for sql in ("SELECT 1", "SELECT * FROM t_user", "SELECT * FROM t_address"):
        kernel.route(sql)
    assert len(kernel.cache) == 2
    kernel.invalidate()
    assert len(kernel.cache) == 0


def test_prepared_text_is_scanned_once(kernel: ShardingKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    import routing.kernel

    sql = "SELECT * FROM t_order WHERE user_id = ? AND order_id = ?"
    kernel.route(sql, [1, 1])
    scans: list[str] = []
    import routing.parse

    real = routing.kernel.scan_shape
    monkeypatch.setattr(routing.kernel, "scan_shape", lambda text: scans.append(text) or real(text))
    monkeypatch.setattr(routing.parse, "scan_shape", lambda text: scans.append(text) or real(text))
    routed = kernel.route(sql, [2, 3])
    assert [(u.data_source, u.params) for u in routed.execution_units] == [("ds_0", (2, 3))]
    assert scans == []
    # text: scanned every time, except the same text right again (the fast path's route_point, then route) and
    # a text that differs only in its trailing integer (routing.parse.TextShapes)
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3")
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3")
    assert len(scans) == 1
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 4")
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3")
    assert len(scans) == 1
    kernel.route("SELECT * FROM t_order WHERE user_id = 3 AND order_id = 3")
    assert len(scans) == 2
    kernel.invalidate()  # plans and prepared texts' shapes go; what TextShapes knows is syntax, and stays
    kernel.route(sql, [2, 3])
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3")
    assert len(scans) == 3
