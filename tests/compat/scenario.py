"""The scenario every client runs against its own sharded logical database (see conftest.py): create the
example tables through the proxy, CRUD over all four actual tables, a cross-shard transaction that rolls
back and one that commits (checked on the backends), and a metadata listing in logical names only.

Clients are wrapped in a tiny synchronous (`SyncClient`) or asynchronous (`AsyncClient`) interface, so the
statements and the checks are the same for every driver; the drivers' own start-up traffic happens on
connect, their own transaction calls (`begin`, `commit`, `rollback`) are the driver's API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from tests.compat.conftest import SPREAD, T_ADDRESS_DDL, T_ORDER_DDL, T_ORDER_ITEM_DDL, CompatEnv

Row = tuple[Any, ...]
INSERT = "INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)"
SETUP = ("DROP TABLE IF EXISTS t_order", "DROP TABLE IF EXISTS t_order_item", "DROP TABLE IF EXISTS t_address",
         T_ORDER_DDL, T_ORDER_ITEM_DDL, T_ADDRESS_DDL)
# names of actual tables and physical databases that a logical listing must never show
FORBIDDEN = ("t_order_0", "t_order_1", "t_order_item_0", "t_order_item_1", "cpt_")
LOGIC_TABLES = ["t_address", "t_order", "t_order_item"]
T_ORDER_COLUMNS = ["order_id", "user_id", "status"]


class SyncClient(Protocol):
    def rows(self, sql: str, args: Sequence[Any] | None = None) -> list[Row]: ...
    def run(self, sql: str, args: Sequence[Any] | None = None) -> int: ...
    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...


class AsyncClient(Protocol):
    async def rows(self, sql: str, args: Sequence[Any] | None = None) -> list[Row]: ...
    async def run(self, sql: str, args: Sequence[Any] | None = None) -> int: ...
    async def begin(self) -> None: ...
    async def commit(self) -> None: ...
    async def rollback(self) -> None: ...


def assert_logical(rows: object) -> None:
    """No actual table or physical database name anywhere in an answer."""
    text = repr(rows)
    for name in FORBIDDEN:
        assert name not in text, f"{name!r} leaked into a logical answer: {text[:500]}"


def text(value: object) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


def check_startup(env: CompatEnv, client: str, version: Row, identity: Row) -> None:
    """`SELECT VERSION(), @@version_comment` and `SELECT DATABASE(), USER(), CONNECTION_ID()`."""
    assert "MariaDB" in text(version[0]) or text(version[0])[0].isdigit()
    assert [text(identity[0]), text(identity[1]).split("@")[0]] == [env.database(client), "root"]
    assert int(identity[2]) > 0


def check_crud_rows(env: CompatEnv, client: str, ordered: list[Row]) -> None:
    assert [(int(r[0]), int(r[1]), text(r[2])) for r in ordered] == [
        (o, u, "new") for u, o in sorted(SPREAD, key=lambda p: p[1])
    ]
    env.assert_spread(client)


def check_metadata(tables: list[Row], full_tables: list[Row], columns: list[Row], index: list[Row],
                   create: list[Row], schema_tables: list[Row]) -> None:
    for answer in (tables, full_tables, columns, index, create, schema_tables):
        assert_logical(answer)
    assert sorted(text(r[0]) for r in tables) == LOGIC_TABLES
    assert sorted((text(r[0]), text(r[1])) for r in full_tables) == [(t, "BASE TABLE") for t in LOGIC_TABLES]
    assert [text(r[0]) for r in columns] == T_ORDER_COLUMNS
    assert {(text(r[0]), text(r[2]), text(r[4])) for r in index} == {
        ("t_order", "PRIMARY", "order_id"), ("t_order", "idx_user", "user_id")}
    assert text(create[0][0]) == "t_order" and "CREATE TABLE `t_order`" in text(create[0][1])
    assert sorted(text(r[0]) for r in schema_tables) == LOGIC_TABLES


METADATA_QUERIES = (
    "SHOW TABLES",
    "SHOW FULL TABLES",
    "SHOW COLUMNS FROM t_order",
    "SHOW INDEX FROM t_order",
    "SHOW CREATE TABLE t_order",
    "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
)


def run_sync(env: CompatEnv, client: str, c: SyncClient) -> None:
    """The whole scenario on one connection whose driver is NOT in autocommit mode: every statement runs
    inside the driver's transaction, ended by its own commit()/rollback()."""
    version = c.rows("SELECT VERSION(), @@version_comment")[0]
    identity = c.rows("SELECT DATABASE(), USER(), CONNECTION_ID()")[0]
    check_startup(env, client, version, identity)
    for sql in SETUP:
        c.run(sql)
    c.commit()

    # CRUD
    for user_id, order_id in SPREAD:
        assert c.run(INSERT, (order_id, user_id, "new")) == 1
    c.commit()
    check_crud_rows(env, client, c.rows("SELECT order_id, user_id, status FROM t_order ORDER BY order_id"))
    assert c.rows("SELECT status FROM t_order WHERE order_id = %s AND user_id = %s", (102, 11)) == [("new",)]
    assert c.run("UPDATE t_order SET status = %s WHERE user_id = %s", ("paid", 10)) == 2
    assert c.run("UPDATE t_order SET status = 'sent' WHERE order_id IN (101, 103)") == 2
    c.commit()
    assert env.all_backend_rows(client) == [(100, 10, "paid"), (101, 10, "sent"), (102, 11, "new"),
                                            (103, 11, "sent")]
    assert [(text(s), int(n)) for s, n in c.rows(
        "SELECT status, COUNT(*) FROM t_order GROUP BY status ORDER BY status")] == [
        ("new", 1), ("paid", 1), ("sent", 2)]
    assert c.run("DELETE FROM t_order WHERE order_id = %s AND user_id = %s", (100, 10)) == 1
    assert c.run("DELETE FROM t_order") == 3
    c.commit()
    assert env.all_backend_rows(client) == []

    # a cross-shard transaction that rolls back, then one that commits
    c.begin()
    for user_id, order_id in SPREAD:
        c.run(INSERT, (order_id, user_id, "tx"))
    assert int(c.rows("SELECT COUNT(*) FROM t_order")[0][0]) == 4  # its own uncommitted rows
    c.rollback()
    assert env.all_backend_rows(client) == []
    c.begin()
    for user_id, order_id in SPREAD:
        c.run(INSERT, (order_id, user_id, "new"))
    c.commit()
    env.assert_spread(client)

    # metadata listing
    c.run("INSERT INTO t_address (address_id, address_name) VALUES (1, 'a')")
    c.commit()
    check_metadata(*(c.rows(sql) for sql in METADATA_QUERIES))
    c.commit()


async def run_async(env: CompatEnv, client: str, c: AsyncClient) -> None:
    """`run_sync` for asyncio drivers."""
    version = (await c.rows("SELECT VERSION(), @@version_comment"))[0]
    identity = (await c.rows("SELECT DATABASE(), USER(), CONNECTION_ID()"))[0]
    check_startup(env, client, version, identity)
    for sql in SETUP:
        await c.run(sql)
    await c.commit()

    for user_id, order_id in SPREAD:
        assert await c.run(INSERT, (order_id, user_id, "new")) == 1
    await c.commit()
    check_crud_rows(env, client, await c.rows("SELECT order_id, user_id, status FROM t_order ORDER BY order_id"))
    assert await c.rows("SELECT status FROM t_order WHERE order_id = %s AND user_id = %s", (102, 11)) == [("new",)]
    assert await c.run("UPDATE t_order SET status = %s WHERE user_id = %s", ("paid", 10)) == 2
    assert await c.run("UPDATE t_order SET status = 'sent' WHERE order_id IN (101, 103)") == 2
    await c.commit()
    assert env.all_backend_rows(client) == [(100, 10, "paid"), (101, 10, "sent"), (102, 11, "new"),
                                            (103, 11, "sent")]
    assert [(text(s), int(n)) for s, n in await c.rows(
        "SELECT status, COUNT(*) FROM t_order GROUP BY status ORDER BY status")] == [
        ("new", 1), ("paid", 1), ("sent", 2)]
    assert await c.run("DELETE FROM t_order WHERE order_id = %s AND user_id = %s", (100, 10)) == 1
    assert await c.run("DELETE FROM t_order") == 3
    await c.commit()
    assert env.all_backend_rows(client) == []

    await c.begin()
    for user_id, order_id in SPREAD:
        await c.run(INSERT, (order_id, user_id, "tx"))
    assert int((await c.rows("SELECT COUNT(*) FROM t_order"))[0][0]) == 4
    await c.rollback()
    assert env.all_backend_rows(client) == []
    await c.begin()
    for user_id, order_id in SPREAD:
        await c.run(INSERT, (order_id, user_id, "new"))
    await c.commit()
    env.assert_spread(client)

    await c.run("INSERT INTO t_address (address_id, address_name) VALUES (1, 'a')")
    await c.commit()
    check_metadata(*[await c.rows(sql) for sql in METADATA_QUERIES])
    await c.commit()


class DBAPIClient:
    """A PEP 249 connection (PyMySQL, mysqlclient, mysql-connector-python) as a `SyncClient`."""

    def __init__(self, conn: Any, cursor_kw: dict[str, Any] | None = None) -> None:
        self.conn = conn
        self.cursor_kw = cursor_kw or {}

    def rows(self, sql: str, args: Sequence[Any] | None = None) -> list[Row]:
        cur = self.conn.cursor(**self.cursor_kw)
        try:
            cur.execute(sql, tuple(args) if args is not None else None)
            return [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()

    def run(self, sql: str, args: Sequence[Any] | None = None) -> int:
        cur = self.conn.cursor(**self.cursor_kw)
        try:
            cur.execute(sql, tuple(args) if args is not None else None)
            return int(cur.rowcount)
        finally:
            cur.close()

    def begin(self) -> None:
        if hasattr(self.conn, "begin"):
            self.conn.begin()
        elif hasattr(self.conn, "start_transaction"):
            self.conn.start_transaction()
        else:
            self.run("START TRANSACTION")

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()


class AsyncDBAPIClient:
    """An aiomysql or asyncmy connection as an `AsyncClient`."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def rows(self, sql: str, args: Sequence[Any] | None = None) -> list[Row]:
        async with self.conn.cursor() as cur:
            await cur.execute(sql, tuple(args) if args is not None else None)
            return [tuple(r) for r in await cur.fetchall()]

    async def run(self, sql: str, args: Sequence[Any] | None = None) -> int:
        async with self.conn.cursor() as cur:
            await cur.execute(sql, tuple(args) if args is not None else None)
            return int(cur.rowcount)

    async def begin(self) -> None:
        await self.conn.begin()

    async def commit(self) -> None:
        await self.conn.commit()

    async def rollback(self) -> None:
        await self.conn.rollback()
