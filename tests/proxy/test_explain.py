"""proxy.execution.explain without servers: which texts are EXPLAIN of a statement, and XA."""

from __future__ import annotations

import pytest

from proxy.execution.explain import split_explain, xa_refusal
from proxy.execution.explain_text import _behind


@pytest.mark.parametrize(("sql", "parts"), [
    ("EXPLAIN SELECT 1", ("", "EXPLAIN", "SELECT 1")),
    ("explain format=json select 1", ("", "explain format=json", "select 1")),
    ("DESCRIBE SELECT * FROM t", ("", "DESCRIBE", "SELECT * FROM t")),
    ("DESC EXTENDED UPDATE t SET a = 1", ("", "DESC EXTENDED", "UPDATE t SET a = 1")),
    ("EXPLAIN PARTITIONS (SELECT 1)", ("", "EXPLAIN PARTITIONS", "(SELECT 1)")),
    ("ANALYZE FORMAT=JSON SELECT 1", ("", "ANALYZE FORMAT=JSON", "SELECT 1")),
    ("/* SHARDINGSPHERE_HINT: WRITE_ROUTE_ONLY=true */ EXPLAIN SELECT 1",
     ("/* SHARDINGSPHERE_HINT: WRITE_ROUTE_ONLY=true */", "EXPLAIN", "SELECT 1")),
    ("EXPLAIN FOR CONNECTION 5", ("", "EXPLAIN FOR CONNECTION", "5")),
    ("EXPLAIN t_order", None),  # DESCRIBE of a table
    ("DESC select_log", None),
    ("DESCRIBE t_order status", None),
    ("ANALYZE TABLE t_order", None),
    ("SELECT 1", None),
])
def test_split_explain(sql: str, parts: tuple[str, str, str] | None) -> None:
    assert split_explain(sql) == parts


def test_analyze_runs_only_reads() -> None:
    from proxy.execution.explain_text import check_explain
    from routing.errors import RoutingError

    for sql in ("ANALYZE DELETE FROM t", "ANALYZE UPDATE t SET a = 1", "EXPLAIN ANALYZE INSERT INTO t VALUES (1)",
                "ANALYZE WITH c AS (SELECT 1) DELETE FROM t", "EXPLAIN FOR CONNECTION 3"):
        parts = split_explain(sql)
        assert parts is not None
        with pytest.raises(RoutingError):
            check_explain(parts[1], parts[2])


def test_explain_words_go_after_a_units_leading_comments() -> None:
    assert _behind("EXPLAIN", "SELECT 1") == "EXPLAIN SELECT 1"
    assert _behind("EXPLAIN", "/* c */ SELECT 1") == "/* c */ EXPLAIN SELECT 1"


@pytest.mark.parametrize("sql", ["XA START 'a'", "xa end 'a'", "XA RECOVER", "/* c */ XA COMMIT 'a'"])
def test_xa_refusal(sql: str) -> None:
    refusal = xa_refusal(sql)
    assert refusal is not None and refusal.errno == 1235
    assert "the client's own xid" in refusal.message and "ALTER TRANSACTION RULE (DEFAULT='XA')" in refusal.message


@pytest.mark.parametrize("sql", ["SELECT 'XA START'", "XAVIER", "SELECT xa FROM t"])
def test_no_xa_refusal(sql: str) -> None:
    assert xa_refusal(sql) is None
