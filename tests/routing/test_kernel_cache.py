
"""Plan cache: repeated shapes never reach sqlglot's parser; bounded; invalidated on demand."""

from __future__ import annotations

import pytest
import sqlglot

from routing.kernel import ShardingKernel
from routing.plan import SessionHints
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
    # text: scanned once per skeleton (routing.parse.TextShapes): a text that differs from one seen before only
    # in its integer literals is not scanned again
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3")
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3")
    assert len(scans) == 1
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 4")
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3")
    kernel.route("SELECT * FROM t_order WHERE user_id = 31 AND order_id = 3")
    assert len(scans) == 1
    kernel.route("SELECT * FROM t_order WHERE user_id = 3 AND order_id = 3.0")
    assert len(scans) == 2
    kernel.invalidate()  # plans and prepared texts' shapes go; what TextShapes knows is syntax, and stays
    kernel.route(sql, [2, 3])
    kernel.route("SELECT * FROM t_order WHERE user_id = 2 AND order_id = 3")
    assert len(scans) == 3


# --- whole routes of multi-node SELECTs no value decides -------------------------------------------------------


def test_scatter_route_is_kept_by_text(kernel: ShardingKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "SELECT order_id, status FROM t_order ORDER BY order_id LIMIT 10"
    first = kernel.route(sql)
    assert len(first.execution_units) == 4
    assert first.reused  # the object kept is the one handed out: the proxy keeps what it derives with it
    monkeypatch.setattr(ShardingKernel, "_shape", lambda *a: pytest.fail("routed again"))
    assert kernel.route(sql) is first
    monkeypatch.undo()
    other = kernel.route(sql.replace("10", "20"))  # another text: its own route
    assert other is not first and other.merge_spec is not None and other.merge_spec.limit == 20
    kernel.invalidate()  # rules or metadata changed
    again = kernel.route(sql)
    assert again is not first and again == first


def test_scatter_route_keys_on_typed_parameters(kernel: ShardingKernel) -> None:
    """1, 1.0 and True are equal keys to a dict, but go to the nodes as different types: each has its own route."""
    sql = "SELECT order_id, status FROM t_order WHERE status <> ? ORDER BY order_id LIMIT ?"
    one = kernel.route(sql, ["a", 1])
    assert kernel.route(sql, ["a", 1]) is one
    for params in (["a", 2], ["b", 1], ["a", 1.0], ["a", True], [b"a", 1]):
        routed = kernel.route(sql, params)
        assert routed is not one
        status, count = routed.execution_units[0].params or ()
        assert (type(status), status, type(count), count) == (type(params[0]), params[0], type(params[1]), params[1])


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t_order WHERE user_id IN (1, 2, 3) ORDER BY order_id LIMIT 5",  # values pick the nodes
    "SELECT * FROM t_order WHERE order_id > 3 ORDER BY order_id LIMIT 5",  # a range asks the algorithm
    "SELECT * FROM t_order WHERE user_id = 1",  # one data source, two tables: a sharding value
    "/* a comment */ SELECT * FROM t_order ORDER BY order_id LIMIT 5",  # comments may carry hints
    "SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2",  # one node
])
def test_routes_some_value_decides_are_not_kept(kernel: ShardingKernel, sql: str) -> None:
    first = kernel.route(sql)
    assert kernel.route(sql) is not first
    assert not first.reused


def test_hinted_route_neither_kept_nor_served_from_the_cache(kernel: ShardingKernel) -> None:
    sql = "SELECT id FROM t_hint ORDER BY id LIMIT 5"
    plain = kernel.route(sql)
    assert kernel.route(sql) is plain  # no hint: every node, kept
    hinted = kernel.route(sql, None, SessionHints({"t_hint": (1,)}, {"t_hint": (0,)}))
    assert [u.data_source for u in hinted.execution_units] == ["ds_1"] and hinted is not plain
    assert kernel.route(sql, None, SessionHints({"t_hint": (1,)}, {"t_hint": (0,)})) is not hinted
    assert kernel.route(sql) is plain
