"""Issue 13, item 8: `SELECT ... INTO @v` on a sharded database assigns the variables for the session.

Differential: the same statements through the proxy and on the unsharded oracle database holding the same
rows, text protocol and prepared. The variables must read back the same (value and type) whichever node
answered the SELECT and whichever connection later reads them, no row must leave them unchanged with
warning 1329, several rows must fail with 1172 (after assigning the first row, as MariaDB does).
"""

from __future__ import annotations

import pytest

from tests.integration.differential_session import MODES, pair, seed
from tests.integration.sharding_fixtures import ShardedEnv

pytestmark = pytest.mark.integration

ORDERS = [(1, 1, "a"), (2, 2, "B"), (3, 1, "c"), (4, 2, "d"), (5, 3, None)]


@pytest.fixture
def orders(sharded_env: ShardedEnv) -> ShardedEnv:
    seed(sharded_env, "t_order", "order_id, user_id, status", ORDERS)
    return sharded_env


@pytest.mark.parametrize("mode", MODES)
def test_select_into_one_node_then_read_anywhere(orders: ShardedEnv, mode: str) -> None:
    with pair(orders, mode) as p:
        # ds_1 answers (user 1); before the fix `SELECT @v` read ds_0's connection: NULL
        assert p.same("SELECT order_id INTO @v FROM t_order WHERE user_id = %s AND order_id = %s", (1, 3)).affected == 1
        assert p.same("SELECT @v").rows == ((("int", 3),),)
        p.same("SELECT @v + 1, @v = 3")
        # the variable reaches every data source: a statement on ds_0 and one on every node use it
        p.same("SELECT status FROM t_order WHERE user_id = 2 AND order_id = @v + 1")
        p.same("SELECT order_id FROM t_order WHERE order_id = @v")
        # without a table (the first data source answers): the value reaches ds_1's connection too
        p.same("SELECT 42 INTO @k")
        p.same("SELECT order_id, status FROM t_order WHERE user_id = 1 AND order_id = @k - 39")


@pytest.mark.parametrize("mode", MODES)
def test_select_into_several_variables_over_several_nodes(orders: ShardedEnv, mode: str) -> None:
    with pair(orders, mode) as p:
        p.same("SELECT status, user_id INTO @s, @u FROM t_order WHERE order_id = %s", (2,))
        p.same("SELECT @s, @u, @s = 'b', COLLATION(@s), @u * 2")
        p.same("SELECT COUNT(*), MAX(order_id), SUM(user_id) INTO @n, @m, @t FROM t_order")
        p.same("SELECT @n, @m, @t, @t / 2")
        p.same("SELECT order_id, status FROM t_order WHERE user_id = 3 INTO @o, @st")  # INTO at the end
        p.same("SELECT @o, @st")
        p.same("SELECT AVG(order_id) INTO @avg FROM t_order")
        p.same("SELECT @avg, @avg + 0")


@pytest.mark.parametrize("mode", MODES)
def test_select_into_without_rows_keeps_the_variables(orders: ShardedEnv, mode: str) -> None:
    with pair(orders, mode) as p:
        p.same("SET @z = 'kept'")
        out = p.same("SELECT order_id INTO @z FROM t_order WHERE order_id = %s", (999,))
        assert out.affected == 0 and out.warnings == 1
        p.same("SHOW WARNINGS")
        assert p.same("SELECT @z").rows == ((("str", "kept"),),)


@pytest.mark.parametrize("mode", MODES)
def test_select_into_with_several_rows_fails_as_mariadb(orders: ShardedEnv, mode: str) -> None:
    with pair(orders, mode) as p:
        p.same("SET @m = 0")
        assert p.same("SELECT order_id INTO @m FROM t_order WHERE user_id = 1 ORDER BY order_id").errno == 1172
        assert p.same("SELECT @m").rows == ((("int", 1),),)  # the first row was assigned
        assert p.same("SELECT order_id, status INTO @x FROM t_order WHERE order_id = 1").errno == 1222
        p.same("SELECT @x")


@pytest.mark.parametrize("mode", MODES)
def test_select_into_types(orders: ShardedEnv, mode: str) -> None:
    with pair(orders, mode) as p:
        p.same("SELECT order_id / 3, CAST(order_id AS DOUBLE) / 3, CAST(order_id AS DATE), status, NULL, "
               "CAST(status AS BINARY) INTO @d, @f, @dt, @s, @n, @b FROM t_order WHERE user_id = 2 AND order_id = 2")
        p.same("SELECT @d, @f, @dt, @s, @n, @b, COLLATION(@dt), COLLATION(@s), COLLATION(@b), @d * 3, @f * 3")


def test_select_into_outfile_over_several_nodes_is_refused(orders: ShardedEnv) -> None:
    refusal = orders.refusal("SELECT * FROM t_order INTO OUTFILE '/tmp/shardproxy-never-written'")
    assert refusal.errno == 1235 and "OUTFILE" in refusal.message and "t_order" in refusal.message, refusal


def test_select_into_is_never_relayed_by_the_fast_path(orders: ShardedEnv) -> None:
    """A one-node SELECT ... INTO on a connection the session holds idle (what the fast path relays) must
    still reach the session's other connections."""
    from proxy.execution.fastpath import STATS

    with orders.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t_order")  # holds a connection to each data source
        taken = STATS.taken
        cur.execute("SELECT status FROM t_order WHERE user_id = 2 AND order_id = 2")  # ds_0
        assert STATS.taken == taken + 1  # (the fast path serves this session's one-node SELECTs)
        cur.execute("SELECT order_id INTO/* no space */@v FROM t_order WHERE user_id = 2 AND order_id = 2")
        cur.execute("SELECT order_id, status FROM t_order WHERE user_id = 1 AND order_id = @v + 1")
        assert cur.fetchall() == ((3, "c"),)
