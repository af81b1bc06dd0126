# ruff: noqa: E501  (table-driven)
"""SELECT ... INTO (issue 13, item 8): the clause is found by tokens; over several nodes it is removed from
the units (the proxy assigns the variables), on one node it stays; INTO OUTFILE/DUMPFILE over several
nodes is refused."""

from __future__ import annotations

import pytest

from routing.errors import RoutingError
from routing.into import find_into
from routing.kernel import ShardingKernel
from routing.parse import tokenize


@pytest.mark.parametrize(
    ("sql", "kind", "variables", "trailing", "clause"),
    [
        ("SELECT a INTO @v FROM t", "variables", ("@v",), False, "INTO @v"),
        ("SELECT a, b FROM t WHERE x = 1 INTO @v, @`w x`", "variables", ("@v", "@`w x`"), True, "INTO @v, @`w x`"),
        ("SELECT 1 INTO @'q'", "variables", ("@'q'",), False, "INTO @'q'"),
        ("SELECT a FROM t INTO OUTFILE '/tmp/f' FIELDS TERMINATED BY ',' FOR UPDATE", "outfile", (), True,
         "INTO OUTFILE '/tmp/f' FIELDS TERMINATED BY ','"),
        ("SELECT a INTO DUMPFILE '/tmp/f' FROM t", "dumpfile", (), False, "INTO DUMPFILE '/tmp/f'"),
        ("SELECT a INTO x FROM t", "other", (), False, "INTO"),
    ],
)
def test_find_into(sql: str, kind: str, variables: tuple[str, ...], trailing: bool, clause: str) -> None:
    into = find_into(tokenize(sql))
    assert into is not None
    assert (into.kind, into.variables, into.trailing, sql[into.start:into.end]) == (kind, variables, trailing, clause)


@pytest.mark.parametrize("sql", ["INSERT INTO t (a) VALUES (1)", "SELECT (SELECT 1 INTO @v)", "SELECT 'into' FROM t"])
def test_find_into_ignores_other_intos(sql: str) -> None:
    assert find_into(tokenize(sql)) is None


def test_one_node_keeps_the_clause(kernel: ShardingKernel) -> None:
    routed = kernel.route("SELECT status INTO @s FROM t_order WHERE user_id = 1 AND order_id = 2")
    assert routed.into_variables == ("@s",) and routed.write
    assert [(u.data_source, u.sql) for u in routed.execution_units] == [
        ("ds_1", "SELECT status INTO @s FROM t_order_0 WHERE user_id = 1 AND order_id = 2")]


def test_several_nodes_run_the_select_without_it(kernel: ShardingKernel) -> None:
    routed = kernel.route("SELECT COUNT(*), MAX(order_id) FROM t_order WHERE user_id = 1 INTO @n, @m")
    assert routed.into_variables == ("@n", "@m") and routed.into_trailing
    assert [u.sql for u in routed.execution_units] == [
        "SELECT COUNT(*), MAX(order_id) FROM t_order_0 WHERE user_id = 1 ",
        "SELECT COUNT(*), MAX(order_id) FROM t_order_1 WHERE user_id = 1 ",
    ]
    assert routed.merge_spec is not None


def test_quoted_variable_names_are_part_of_the_plan(kernel: ShardingKernel) -> None:
    assert kernel.route("SELECT 1 INTO @'a'").into_variables == ("@'a'",)
    assert kernel.route("SELECT 1 INTO @'b'").into_variables == ("@'b'",)  # same shape, other variable


def test_outfile_over_several_nodes_is_refused(kernel: ShardingKernel) -> None:
    single = kernel.route("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2 INTO OUTFILE '/tmp/f'")
    assert single.execution_units[0].sql == "SELECT * FROM t_order_0 WHERE user_id = 1 AND order_id = 2 INTO OUTFILE '/tmp/f'"
    with pytest.raises(RoutingError, match="INTO OUTFILE on sharded table"):
        kernel.route("SELECT * FROM t_order INTO OUTFILE '/tmp/f'")
    with pytest.raises(RoutingError, match="INTO DUMPFILE on sharded table"):
        kernel.route("SELECT status INTO DUMPFILE '/tmp/f' FROM t_order WHERE user_id = 1")
