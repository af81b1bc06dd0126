"""aiomysql through the proxy on a sharded logical database (autocommit off, as the driver defaults)."""

from __future__ import annotations

import aiomysql

from tests.compat.conftest import CompatEnv
from tests.compat.scenario import AsyncDBAPIClient, run_async

CLIENT_NAME = "aiomysql"


async def test_aiomysql_scenario(compat: CompatEnv) -> None:
    d = compat.dsn(CLIENT_NAME)
    conn = await aiomysql.connect(host=d["host"], port=d["port"], user=d["user"], password=d["password"],
                                  db=d["database"], autocommit=False)
    try:
        assert conn.get_autocommit() is False
        await run_async(compat, CLIENT_NAME, AsyncDBAPIClient(conn))
        await conn.ping(reconnect=False)
    finally:
        conn.close()


async def test_aiomysql_pool(compat: CompatEnv) -> None:
    """A pool of two: connections come back (with ROLLBACK on release) and are reused."""
    d = compat.dsn(CLIENT_NAME)
    pool = await aiomysql.create_pool(host=d["host"], port=d["port"], user=d["user"], password=d["password"],
                                      db=d["database"], minsize=1, maxsize=2, autocommit=True)
    try:
        for _ in range(3):
            async with pool.acquire() as conn, conn.cursor() as cur:
                await cur.execute("SELECT COUNT(*) FROM t_order")
                assert (await cur.fetchone())[0] == 4
    finally:
        pool.close()
        await pool.wait_closed()
