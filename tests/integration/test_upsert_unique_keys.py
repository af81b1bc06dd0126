"""Issue 13, item 11: upserts on a unique key that does not contain the sharding columns.

t_order's PRIMARY KEY (order_id) lacks the database sharding column user_id: a row with order_id 1 may sit
on either data source. `INSERT ... ON DUPLICATE KEY UPDATE`, `REPLACE` and `INSERT IGNORE` with an existing
order_id and another user_id must act on the existing row, wherever it is, as MariaDB does on one table:
never a second row with the same key. Each case runs through the proxy and on the unsharded oracle
database holding the same rows (text protocol and prepared), comparing every answer (affected rows,
warnings, LAST_INSERT_ID, errors) and the table afterwards; the actual tables are checked for duplicates.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pymysql
import pytest

from tests.integration.differential_session import MODES, Pair, pair, seed
from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv

pytestmark = pytest.mark.integration

ORDERS = [(1, 1, "a"), (2, 2, "b"), (3, 1, "c")]
ORDER_COLS = "order_id, user_id, status"
ITEMS = [(1, 1, 1, "a"), (2, 2, 2, "b")]
ITEM_COLS = "order_item_id, order_id, user_id, status"


@pytest.fixture
def env(sharded_env: ShardedEnv) -> ShardedEnv:
    seed(sharded_env, "t_order", ORDER_COLS, ORDERS)
    seed(sharded_env, "t_order_item", ITEM_COLS, ITEMS)
    return sharded_env


def same_tables(env: ShardedEnv, p: Pair) -> None:
    p.same("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")
    p.same("SELECT order_item_id, order_id, user_id, status FROM t_order_item ORDER BY order_item_id")
    for table, key in (("t_order", "order_id"), ("t_order_item", "order_item_id")):
        keys = Counter(k for rows in env.actual_rows(table, columns=key).values() for (k,) in rows)
        assert all(n == 1 for n in keys.values()), f"{table}: duplicate {key}s {keys}"


@pytest.mark.parametrize("mode", MODES)
def test_on_duplicate_key_update_finds_the_row_on_another_node(env: ShardedEnv, mode: str) -> None:
    upsert = f"INSERT INTO t_order ({ORDER_COLS}) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE status = VALUES(status)"
    with pair(env, mode) as p:
        assert p.same(upsert, (1, 2, "x")).affected == 2  # order 1 is user 1's, on ds_1: updated there
        assert p.same(upsert, (1, 2, "x")).affected == 0  # unchanged
        assert p.same(upsert, (10, 3, "n")).affected == 1  # new
        p.same("SELECT LAST_INSERT_ID()")
        same_tables(env, p)
        # the whole row is the existing one's: user_id stays 1
        assert env.where_is("t_order", "order_id", 1) == [("ds_1", "t_order_1")]
        p.same(f"INSERT INTO t_order ({ORDER_COLS}) VALUES (2, 1, 'y') ON DUPLICATE KEY UPDATE status = "
               "CONCAT(status, VALUES(status), user_id)")
        p.same("INSERT INTO t_order SET order_id = 3, user_id = 4, status = 's' ON DUPLICATE KEY UPDATE status = 'set'")
        # the idiom that makes the existing row's key LAST_INSERT_ID()
        out = p.same(f"INSERT INTO t_order ({ORDER_COLS}) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE "
                     "order_id = LAST_INSERT_ID(order_id), status = 'lid'", (3, 2, "q"))
        assert out.last_id == 3
        p.same("SELECT LAST_INSERT_ID()")
        p.same("INSERT IGNORE INTO t_order (order_id, user_id, status) VALUES (3, 2, 'q') "
               "ON DUPLICATE KEY UPDATE status = 'ignore+update'")
        same_tables(env, p)


@pytest.mark.parametrize("mode", MODES)
def test_multi_row_upserts_whose_rows_conflict_with_each_other(env: ShardedEnv, mode: str) -> None:
    with pair(env, mode) as p:
        # rows 3 and 4 share order_id 11 but go to different data sources; row 2 meets an existing row there
        out = p.same(f"INSERT INTO t_order ({ORDER_COLS}) VALUES (1, 2, 'y'), (2, 1, 'z'), (11, 4, 'n'), (11, 5, 'm') "
                     "ON DUPLICATE KEY UPDATE status = VALUES(status)")
        assert out.affected == 7
        same_tables(env, p)
        out = p.same(f"REPLACE INTO t_order ({ORDER_COLS}) VALUES (%s, %s, %s), (%s, %s, %s), (%s, %s, %s)",
                     (20, 1, "p", 20, 2, "q", 1, 3, "r"))
        assert out.affected == 5
        same_tables(env, p)
        out = p.same(f"INSERT IGNORE INTO t_order ({ORDER_COLS}) VALUES (30, 2, 'i'), (30, 1, 'j'), (2, 2, 'k')")
        assert (out.affected, out.warnings) == (1, 2)
        same_tables(env, p)


@pytest.mark.parametrize("mode", MODES)
def test_replace_and_ignore_with_an_existing_key_of_another_user(env: ShardedEnv, mode: str) -> None:
    with pair(env, mode) as p:
        assert p.same(f"REPLACE INTO t_order ({ORDER_COLS}) VALUES (%s, %s, %s)", (2, 1, "r")).affected == 2
        assert env.where_is("t_order", "order_id", 2) == [("ds_1", "t_order_0")]  # moved with its new user
        out = p.same(f"INSERT IGNORE INTO t_order ({ORDER_COLS}) VALUES (%s, %s, %s)", (3, 2, "i"))
        assert (out.affected, out.warnings) == (0, 1)
        p.same("REPLACE INTO t_order SET order_id = 3, user_id = 2, status = 'set'")
        same_tables(env, p)


@pytest.mark.parametrize("mode", MODES)
def test_a_key_without_any_sharding_column(env: ShardedEnv, mode: str) -> None:
    """t_order_item's PRIMARY KEY (order_item_id) lacks both sharding columns: any of the four nodes."""
    with pair(env, mode) as p:
        p.same(f"INSERT INTO t_order_item ({ITEM_COLS}) VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE status = 'dup'",
               (1, 2, 2, "x"))
        p.same(f"INSERT INTO t_order_item ({ITEM_COLS}) VALUES (2, 3, 1, 'x'), (3, 4, 2, 'y'), (3, 5, 1, 'z') "
               "ON DUPLICATE KEY UPDATE status = CONCAT(status, '+', VALUES(status))")
        p.same(f"REPLACE INTO t_order_item ({ITEM_COLS}) VALUES (1, 7, 3, 'r')")
        p.same(f"INSERT IGNORE INTO t_order_item ({ITEM_COLS}) VALUES (2, 8, 8, 'i'), (9, 9, 9, 'j')")
        same_tables(env, p)


@pytest.mark.parametrize("mode", MODES)
def test_inside_a_transaction(env: ShardedEnv, mode: str) -> None:
    with pair(env, mode) as p:
        p.same("BEGIN")
        p.same(f"INSERT INTO t_order ({ORDER_COLS}) VALUES (1, 2, 'tx'), (1, 4, 'tx2') "
               "ON DUPLICATE KEY UPDATE status = VALUES(status)")
        p.same("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")
        p.same("ROLLBACK")
        same_tables(env, p)
        p.same("BEGIN")
        p.same(f"REPLACE INTO t_order ({ORDER_COLS}) VALUES (1, 2, 'tx')")
        p.same("COMMIT")
        same_tables(env, p)
        # a statement that fails half-way (row 2 is too long) leaves nothing of itself, in a transaction too
        p.same("BEGIN")
        bad = f"INSERT INTO t_order ({ORDER_COLS}) VALUES (3, 2, 'ok'), (2, 1, '{'x' * 50}') ON DUPLICATE KEY UPDATE " \
              "status = VALUES(status)"
        assert p.same(bad).kind == "error"
        p.same("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")
        p.same("COMMIT")
        same_tables(env, p)


def test_refusals_name_the_table_and_the_key(env: ShardedEnv) -> None:
    r = env.refusal("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 2, 'a') "
                    "ON DUPLICATE KEY UPDATE user_id = 2")
    assert r.errno == 1235 and "user_id" in r.message and "t_order" in r.message, r
    r = env.refusal("INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES (1, 1, 1, 'a') "
                    "ON DUPLICATE KEY UPDATE order_item_id = 5")
    assert r.errno == 1235 and "order_item_id" in r.message and "PRIMARY" in r.message, r
    r = env.refusal("REPLACE INTO t_order_item (order_item_id, order_id, user_id, status) VALUES "
                    "(1 + 1, 1, 1, 'a')")
    assert r.errno == 1235 and "order_item_id" in r.message and "literal" in r.message, r
    assert env.actual_rows("t_order_item", columns="order_item_id, status") == {
        ("ds_0", "t_order_item_0"): [(2, "b")], ("ds_0", "t_order_item_1"): [], ("ds_1", "t_order_item_0"): [],
        ("ds_1", "t_order_item_1"): [(1, "a")]}


def test_row_alias_syntax_fails_as_on_mariadb(env: ShardedEnv) -> None:
    with pair(env, "text") as p:
        out = p.same("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 2, 'n') AS new "
                     "ON DUPLICATE KEY UPDATE status = new.status")
        assert out.errno == 1064  # MariaDB has no row alias (MySQL 8.0.19 has)


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO t_order (order_id, user_id, status) VALUES (777, {u}, 'x') "
        "ON DUPLICATE KEY UPDATE status = CONCAT(status, 'y')",
        "REPLACE INTO t_order (order_id, user_id, status) VALUES (777, {u}, 'x')",
        "INSERT IGNORE INTO t_order (order_id, user_id, status) VALUES (777, {u}, 'x')",
    ],
    ids=["on-duplicate-key-update", "replace", "ignore"],
)
def test_concurrent_upserts_of_one_key_leave_one_row(env: ShardedEnv, statement: str) -> None:
    """Sessions upserting the same order_id with users on both data sources at once: one row, always."""
    sessions = 8
    errors: list[Any] = []
    barrier = threading.Barrier(sessions)

    def worker(u: int) -> None:
        try:
            with env.connect() as conn, conn.cursor() as cur:
                barrier.wait(timeout=30)
                for _ in range(3):
                    cur.execute(statement.format(u=u))
        except pymysql.MySQLError as exc:  # a deadlock victim may retry; nothing else is expected
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(u,)) for u in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not [e for e in errors if e.args[0] != 1213], errors
    assert len(env.where_is("t_order", "order_id", 777)) == 1
    if statement.startswith("INSERT INTO"):
        (status,) = env.run("SELECT status FROM t_order WHERE order_id = 777")[2][0]
        assert status == "x" + "y" * (sessions * 3 - 1 - len(errors))


@pytest.fixture
def accounts(sharded_env: ShardedEnv) -> Any:
    """extra_db.t_acct (sharded by acct_id) given, through the proxy, a PRIMARY KEY (acct_id), which holds the
    sharding column, and a UNIQUE KEY (user_id), which does not; the oracle's t_acct the same."""
    env, db, oracle = sharded_env, "extra_db", sharded_env.servers[0]
    env.clean("t_acct", db=db)
    ddl = ("ALTER TABLE t_acct ADD COLUMN n VARCHAR(10) NULL, ADD PRIMARY KEY (acct_id), "
           "ADD UNIQUE KEY uk_user (user_id)")
    oracle.execute("CREATE TABLE IF NOT EXISTS t_acct (acct_id INT NOT NULL, user_id INT NOT NULL)", ORACLE_DB)
    oracle.execute("DELETE FROM t_acct", ORACLE_DB)
    env.run(ddl, db)
    oracle.execute(ddl, ORACLE_DB)
    try:
        yield env
    finally:
        env.clean("t_acct", db=db)
        env.run("ALTER TABLE t_acct DROP COLUMN n, DROP PRIMARY KEY, DROP KEY uk_user", db)
        oracle.execute("DROP TABLE t_acct", ORACLE_DB)


@pytest.mark.parametrize("mode", MODES)
def test_unique_keys_are_loaded_again_after_ddl(accounts: ShardedEnv, mode: str) -> None:
    """Keys added by DDL through the proxy are checked from the next statement on (metadata reloaded); with
    two keys, MariaDB's key order decides which row ON DUPLICATE KEY UPDATE updates."""
    env = accounts
    with pair(env, mode, "extra_db") as p:
        p.same("INSERT INTO t_acct (acct_id, user_id, n) VALUES (1, 5, 'a'), (2, 6, 'b')")  # ds_1, ds_0
        # user 5 is acct 1's, on ds_1; acct 4 routes to ds_0
        assert p.same("INSERT INTO t_acct (acct_id, user_id, n) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE "
                      "n = VALUES(n)", (4, 5, "u")).affected == 2
        assert p.same("INSERT IGNORE INTO t_acct (acct_id, user_id, n) VALUES (%s, %s, %s)", (6, 5, "i")).affected == 0
        # acct 3 (ds_1) is new, user 6 is acct 2's on ds_0; then acct 2 and user 5: two rows, two nodes
        p.same("INSERT INTO t_acct (acct_id, user_id, n) VALUES (3, 6, 'x') ON DUPLICATE KEY UPDATE n = 'upd'")
        p.same("INSERT INTO t_acct (acct_id, user_id, n) VALUES (3, 7, 'y')")
        # conflicts on PRIMARY (acct 3, at home) and on uk_user (user 6 is acct 2's): PRIMARY is checked first
        p.same("INSERT INTO t_acct (acct_id, user_id, n) VALUES (3, 6, 'z') ON DUPLICATE KEY UPDATE n = 'first'")
        p.same("SELECT acct_id, user_id, n FROM t_acct ORDER BY acct_id")
        assert p.same("REPLACE INTO t_acct (acct_id, user_id, n) VALUES (2, 5, 'r')").affected == 3  # two rows go
        p.same("SELECT acct_id, user_id, n FROM t_acct ORDER BY acct_id")
    assert len(env.where_is("t_acct", "user_id", 5, "extra_db")) == 1


@pytest.fixture
def users(sharded_env: ShardedEnv) -> Any:
    """extra_db.t_user (sharded by user_id) given a UNIQUE KEY (name): text, compared under its collation."""
    env, db, oracle = sharded_env, "extra_db", sharded_env.servers[0]
    env.clean("t_user", db=db)
    ddl = "ALTER TABLE t_user ADD UNIQUE KEY uk_name (name)"
    oracle.execute("CREATE TABLE IF NOT EXISTS t_user (user_id INT NOT NULL, name VARCHAR(10))", ORACLE_DB)
    oracle.execute("DELETE FROM t_user", ORACLE_DB)
    env.run(ddl, db)
    oracle.execute(ddl, ORACLE_DB)
    try:
        yield env
    finally:
        env.clean("t_user", db=db)
        env.run("ALTER TABLE t_user DROP KEY uk_name", db)
        oracle.execute("DROP TABLE t_user", ORACLE_DB)


@pytest.mark.parametrize("mode", MODES)
def test_a_text_key_compares_under_its_collation(users: ShardedEnv, mode: str) -> None:
    """'ann' = 'ANN ' under a case-insensitive PAD SPACE collation: the same key value on two nodes, in the
    lookups and in the locks (the collation's weight strings name them)."""
    env = users
    with pair(env, mode, "extra_db") as p:
        p.same("INSERT INTO t_user (user_id, name) VALUES (1, 'ann'), (2, 'Zoe')")
        p.same("INSERT INTO t_user (user_id, name) VALUES (%s, %s) ON DUPLICATE KEY UPDATE name = name", (4, "ANN "))
        p.same("INSERT INTO t_user (user_id, name) VALUES (%s, %s) ON DUPLICATE KEY UPDATE user_id = user_id",
               (5, "zOE"))
        # a row that would move to another data node: refused (not atomic across data sources)
        moved = p.proxy.run("INSERT INTO t_user (user_id, name) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
                            "user_id = VALUES(user_id)", (4, "ANN "))
        assert moved.errno == 1235 and "user_id" in moved.message, moved
        p.same("INSERT IGNORE INTO t_user (user_id, name) VALUES (%s, %s)", (4, "ANN "))
        p.same("REPLACE INTO t_user (user_id, name) VALUES (%s, %s)", (6, "zoe"))
        # two rows of one statement, one key value under the collation, two data sources
        out = p.same("REPLACE INTO t_user (user_id, name) VALUES (%s, %s), (%s, %s)", (8, "bob", 9, "BOB"))
        assert out.affected == 3
        p.same("INSERT IGNORE INTO t_user (user_id, name) VALUES (10, 'Émile'), (11, 'emile'), (12, 'Ann')")
        p.same("SELECT user_id, name FROM t_user ORDER BY user_id")
