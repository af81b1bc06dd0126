# ruff: noqa: E501  (table-driven: one case per line)
"""Issue 17, writes across nodes (proxy.stepwise): UPDATE / DELETE ... ORDER BY ... LIMIT over several nodes,
UPDATE of a sharding column (rows that stay, rows that move), INSERT ... SELECT into a sharded table.

Each case runs through the proxy and on the unsharded oracle database holding the same rows (text protocol
and prepared), comparing the answers (affected rows, LAST_INSERT_ID, warnings, errors) and the tables
afterwards; moved rows are looked for on the backends themselves (one copy, on the node their values
route to). The fault cases make one node fail in the middle of a statement (a trigger that raises on one
actual table) and check that nothing of the statement is left, on any node.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from tests.integration.differential_session import MODES, Pair, pair, seed
from tests.integration.sharding_fixtures import ShardedEnv

pytestmark = pytest.mark.integration

ORDER_COLS = "order_id, user_id, status"
ORDERS = [(1, 1, "a"), (2, 2, "b"), (3, 1, "c"), (4, 2, "a"), (5, 3, "b"), (6, 4, "c"), (7, 5, "a"), (8, 6, "b")]
ITEM_COLS = "order_item_id, order_id, user_id, status"
ITEMS = [(11, 1, 1, "i"), (12, 2, 2, "j"), (13, 3, 1, "k"), (14, 4, 2, None), (15, 5, 3, "m")]


@pytest.fixture
def env(sharded_env: ShardedEnv) -> ShardedEnv:
    seed(sharded_env, "t_order", ORDER_COLS, ORDERS)
    seed(sharded_env, "t_order_item", ITEM_COLS, ITEMS)
    return sharded_env


def placed_once(env: ShardedEnv) -> None:
    """Every t_order row exactly once, on the actual table its user_id / order_id route to."""
    rows = env.actual_rows("t_order", columns="order_id, user_id")
    keys = Counter(k for found in rows.values() for (k, _u) in found)
    assert all(n == 1 for n in keys.values()), f"duplicate order_ids {keys}"
    for (ds, table), found in rows.items():
        for order_id, user_id in found:
            assert (ds, table) == (f"ds_{user_id % 2}", f"t_order_{order_id % 2}"), (order_id, user_id, ds, table)


def same_tables(env: ShardedEnv, p: Pair) -> None:
    p.same("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")
    p.same("SELECT order_item_id, order_id, user_id, status FROM t_order_item ORDER BY order_item_id")
    placed_once(env)


STEPS: list[tuple[str, tuple[Any, ...]]] = [
    # ORDER BY ... LIMIT over several nodes: the rows of the merged order, not LIMIT rows per node
    ("UPDATE t_order SET status = 'top' ORDER BY order_id DESC LIMIT 3", ()),
    ("UPDATE t_order SET status = CONCAT(status, '!') WHERE status > %s ORDER BY status, order_id LIMIT %s", ("a", 4)),
    ("UPDATE t_order o SET o.status = 'b' WHERE o.status = 'b' ORDER BY o.order_id LIMIT 5", ()),  # matched but unchanged
    ("DELETE FROM t_order WHERE status <> %s ORDER BY user_id DESC, order_id LIMIT 2", ("zzz",)),
    ("DELETE FROM t_order WHERE status = 'nothing' ORDER BY order_id LIMIT 2", ()),
    ("DELETE FROM t_order WHERE status = 'a' LIMIT 10", ()),  # LIMIT above the matches: deterministic without ORDER BY
    ("UPDATE t_order SET status = 'x' WHERE status >= 'zz' LIMIT 1", ()),  # no row
    ("/* app: orders */ UPDATE t_order SET status = 'c' ORDER BY order_id LIMIT 2", ()),  # a leading comment rides along
    # a sharding column assigned: same value (Django's save()), same node, another node
    ("UPDATE t_order SET user_id = 1, status = 'saved' WHERE order_id = 1", ()),
    ("UPDATE t_order SET user_id = %s, status = %s WHERE order_id = %s", (2, "same", 2)),
    ("UPDATE t_order SET user_id = 3 WHERE order_id = 3", ()),  # 1 -> 3: another row of ds_1
    ("UPDATE t_order SET user_id = 2, status = 'moved' WHERE order_id = 5", ()),  # ds_1 -> ds_0
    ("UPDATE t_order SET user_id = user_id + 1 WHERE order_id IN (6, 7, 8)", ()),  # every row moves
    ("UPDATE t_order SET user_id = %s WHERE user_id = %s ORDER BY order_id LIMIT 1", (9, 2)),
    ("UPDATE t_order SET user_id = 2 WHERE order_id = 999", ()),  # no row
    # INSERT ... SELECT into a sharded table: each row where its values route it
    ("INSERT INTO t_order (order_id, user_id, status) SELECT order_item_id + 100, user_id, status FROM t_order_item", ()),
    ("INSERT INTO t_order (order_id, user_id, status) SELECT order_item_id + 200, order_id, status FROM t_order_item WHERE status IS NOT NULL ORDER BY order_item_id LIMIT %s", (2,)),
    ("INSERT INTO t_order SELECT order_item_id + 300, user_id + 1, CONCAT(status, 'x') FROM t_order_item", ()),  # no column list
    ("INSERT IGNORE INTO t_order (order_id, user_id, status) SELECT order_id, user_id + 1, 'dup' FROM t_order_item", ()),  # duplicates ignored
    ("INSERT INTO t_order (order_id, user_id, status) SELECT order_id, user_id, 'dup' FROM t_order_item", ()),  # 1062: nothing inserted
    ("INSERT INTO t_order (order_id, user_id, status) SELECT order_item_id + 400, user_id, status FROM t_order_item WHERE 1 = 0", ()),
    ("INSERT INTO t_order (order_id, user_id) SELECT order_item_id + 500, user_id, status FROM t_order_item", ()),  # 1136
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("sql", "params"), STEPS)
def test_same_as_one_database(env: ShardedEnv, mode: str, sql: str, params: tuple[Any, ...]) -> None:
    with pair(env, mode) as p:
        p.same(sql, params)
        same_tables(env, p)


@pytest.mark.parametrize("mode", MODES)
def test_inside_a_transaction(env: ShardedEnv, mode: str) -> None:
    with pair(env, mode) as p:
        p.same("BEGIN")
        p.same("UPDATE t_order SET status = 'txn' ORDER BY order_id LIMIT 3")
        p.same("UPDATE t_order SET user_id = 8 WHERE order_id = 1")
        p.same("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")
        p.same("INSERT INTO t_order (order_id, user_id, status) SELECT order_item_id, user_id, 'copy' FROM t_order_item")
        p.same("INSERT INTO t_order (order_id, user_id, status) SELECT order_id, user_id, 'dup' FROM t_order_item")  # 1062
        p.same("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")  # the failed statement left nothing
        p.same("ROLLBACK")
        same_tables(env, p)
        p.same("BEGIN")
        p.same("DELETE FROM t_order ORDER BY order_id DESC LIMIT 2")
        p.same("UPDATE t_order SET user_id = 7 WHERE order_id = 2")
        p.same("COMMIT")
        same_tables(env, p)


def test_generated_keys(env: ShardedEnv) -> None:
    """INSERT ... SELECT without the key column: keys generated as for a plain INSERT, each row placed by
    its key."""
    with env.connect() as conn, conn.cursor() as cur:
        assert cur.execute("INSERT INTO t_order (user_id, status) SELECT user_id, status FROM t_order_item") == len(ITEMS)
        cur.execute("SELECT COUNT(*), COUNT(DISTINCT order_id) FROM t_order")
        assert cur.fetchone() == (len(ORDERS) + len(ITEMS),) * 2
    placed_once(env)


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("UPDATE t_order SET order_id = order_id + 1, user_id = 3 WHERE status = 'a'", "assigns key column(s) order_id"),
        ("INSERT INTO t_order (order_id, user_id, status) SELECT order_id, user_id, status FROM t_order_item ON DUPLICATE KEY UPDATE status = 'x'", "INSERT ... SELECT"),
        ("UPDATE t_order SET status = 'x' WHERE order_id IN (SELECT order_id FROM t_order_item) LIMIT 1", "subquery"),
    ],
)
def test_refused(env: ShardedEnv, sql: str, fragment: str) -> None:
    refusal = env.refusal(sql)
    assert fragment in refusal.message and refusal.errno == 1235
    with pair(env, "text") as p:
        same_tables(env, p)


@pytest.fixture
def failing_node(env: ShardedEnv) -> Any:
    """Triggers on ds_0's actual tables that refuse rows with status 'boom': one node fails mid-statement."""
    trigger = ("CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW BEGIN IF NEW.status = 'boom' "
               "THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom'; END IF; END")
    names = [(f"{table}_boom_{event.lower()}", table, event) for table in ("t_order_0", "t_order_1")
             for event in ("INSERT", "UPDATE")]
    for name, table, event in names:
        env.backend("ds_0", trigger.format(name=name, event=event, table=table))
    yield env
    for name, _table, _event in names:
        env.backend("ds_0", f"DROP TRIGGER IF EXISTS {name}")


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO t_order (order_id, user_id, status) SELECT order_item_id + 100, user_id, IF(order_item_id = 14, 'boom', status) FROM t_order_item",
        "UPDATE t_order SET status = IF(order_id = 4, 'boom', 'ok') ORDER BY order_id LIMIT 6",
        "UPDATE t_order SET user_id = 4, status = IF(order_id = 3, 'boom', 'ok') WHERE order_id IN (1, 3)",  # the move to ds_0 fails
    ],
)
def test_a_failing_node_leaves_nothing_written(failing_node: ShardedEnv, sql: str, explicit: bool) -> None:
    env = failing_node
    before = env.actual_rows("t_order")
    with env.connect() as conn, conn.cursor() as cur:
        if explicit:
            cur.execute("BEGIN")
            cur.execute("UPDATE t_order SET status = 'kept' WHERE order_id = 2 AND user_id = 2")
        with pytest.raises(Exception, match="boom"):
            cur.execute(sql)
        if explicit:
            cur.execute("SELECT status FROM t_order WHERE order_id = 2")
            assert cur.fetchall() == (("kept",),)  # the transaction's earlier work survives the failed statement
            cur.execute("ROLLBACK")
    assert env.actual_rows("t_order") == before


def test_concurrent_limited_writers_take_turns(env: ShardedEnv) -> None:
    """Three sessions each delete the two lowest orders at once: each deletes two (the rows the others
    left), and the six lowest are gone, as on one server where the row locks make them take turns."""
    results: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def worker() -> None:
        try:
            with env.connect() as conn, conn.cursor() as cur:
                barrier.wait()
                results.append(cur.execute("DELETE FROM t_order ORDER BY order_id LIMIT 2"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == [2, 2, 2]
    _columns, rows = env.query("SELECT order_id FROM t_order ORDER BY order_id")
    assert [r[0] for r in rows] == [7, 8]
    placed_once(env)


GENERATED_SEED = 17
GENERATED_STATEMENTS = 60


@pytest.mark.parametrize("mode", MODES)
def test_generated_writes_leave_the_oracle_rows(env: ShardedEnv, mode: str) -> None:
    """Seeded random writes across nodes (differential_write_generator), one after the other on the same
    rows: each answer is the oracle's, and so are both tables after it, every row on its own node."""
    from tests.integration.differential_write_generator import WriteGenerator

    generator = WriteGenerator(GENERATED_SEED + MODES.index(mode))
    with pair(env, mode) as p:
        for _ in range(GENERATED_STATEMENTS):
            p.same(generator.statement())
            same_tables(env, p)
            items = env.actual_rows("t_order_item", columns="order_item_id, order_id, user_id")
            for (ds, table), found in items.items():
                assert all((ds, table) == (f"ds_{u % 2}", f"t_order_item_{o % 2}") for _i, o, u in found)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sql", [
    "UPDATE t_order SET user_id = 5 - user_id WHERE order_id IN (3, 4, 5, 6, 7, 8)",  # order 8 (user 6): ds_-1
    "UPDATE t_order SET user_id = 5 - user_id WHERE status IS NOT NULL ORDER BY order_id DESC LIMIT 6",
])  # fmt: skip
def test_a_moved_row_the_rule_cannot_place_refuses_the_whole_write(env: ShardedEnv, sql: str, mode: str) -> None:
    """Some rows move where the rule routes them, one has no data source: the statement is refused (1235,
    naming the value and the data source) and nothing of it stays written, on any node."""
    before = {k: v for k, v in env.actual_rows("t_order").items()}
    with pair(env, mode) as p:
        got = p.proxy.run(sql)
    assert got.kind == "error" and got.errno == 1235 and "ds_-1" in got.message, got
    assert env.actual_rows("t_order") == before


@pytest.mark.parametrize(
    ("sql", "errno"),
    [
        ("INSERT INTO t_order (order_id, user_id, status) SELECT order_item_id + 100, user_id, status FROM t_order_item", 1038),
        ("DELETE FROM t_order ORDER BY order_id LIMIT 5", 1105),  # the merge's own bound: one connection per data source in a transaction
    ],
)
def test_selected_rows_stay_within_the_merge_memory_bound(env: ShardedEnv, sql: str, errno: int) -> None:
    """The rows a stepwise write selects first are held within props.proxy-merge-memory-rows: past it the
    statement fails naming the property, and writes nothing."""
    server = env.proxy.server
    before = env.proxy.call(lambda: server.merge_memory_rows)
    env.proxy.call(lambda: setattr(server, "merge_memory_rows", 3))
    try:
        refusal = env.refusal(sql)
    finally:
        env.proxy.call(lambda: setattr(server, "merge_memory_rows", before))
    assert refusal.errno == errno and "proxy-merge-memory-rows" in refusal.message, refusal
    with pair(env, "text") as p:
        same_tables(env, p)


@pytest.mark.parametrize(
    ("sql", "ds"),
    [
        ("INSERT INTO t_order (order_id, user_id, status) SELECT order_item_id + 100, user_id, IF(order_item_id = 13, 'slow', status) FROM t_order_item", "ds_1"),
        ("UPDATE t_order SET user_id = 2, status = IF(order_id = 3, 'slow', 'moved') WHERE order_id IN (1, 3, 5)", "ds_0"),  # ds_1's rows move to ds_0
    ],
)
def test_a_lost_backend_connection_leaves_nothing_written(env: ShardedEnv, sql: str, ds: str) -> None:
    """The connection of the data source that gets the 'slow' row is killed in the middle of the statement
    (a trigger holds that row): the client gets an error, and the statement's part on the other data source
    is rolled back."""
    server = env.server(ds)
    db = env.physical["sharding_db"][ds]
    server.execute(f"CREATE TRIGGER {db}.t_order_1_slow BEFORE INSERT ON {db}.t_order_1 FOR EACH ROW "
                   "BEGIN IF NEW.status = 'slow' THEN SET @x = SLEEP(5); END IF; END")
    before = env.actual_rows("t_order")
    errors: list[BaseException] = []

    def client() -> None:
        try:
            with env.connect() as conn, conn.cursor() as cur:
                cur.execute(sql)
        except BaseException as exc:  # expected: the statement fails
            errors.append(exc)

    thread = threading.Thread(target=client)
    try:
        thread.start()
        deadline = time.monotonic() + 10
        victim = None
        while victim is None and time.monotonic() < deadline:  # the trigger's statement shows while it sleeps
            rows = server.execute("SELECT id FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SET @x = SLEEP%'")
            victim = rows[0][0] if rows else None
            time.sleep(0.05)
        assert victim is not None, f"the statement never reached {ds}: {errors}"
        server.execute(f"KILL CONNECTION {victim}")
        thread.join(30)
    finally:
        server.execute(f"DROP TRIGGER IF EXISTS {db}.t_order_1_slow")
    assert errors, f"the statement succeeded although {ds}'s connection was killed"
    assert env.actual_rows("t_order") == before
