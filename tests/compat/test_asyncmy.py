"""asyncmy (Cython protocol) through the proxy on a sharded logical database."""

from __future__ import annotations

import asyncmy

from tests.compat.conftest import CompatEnv
from tests.compat.scenario import AsyncDBAPIClient, run_async

CLIENT_NAME = "asyncmy"


async def test_asyncmy_scenario(compat: CompatEnv) -> None:
    d = compat.dsn(CLIENT_NAME)
    conn = await asyncmy.connect(host=d["host"], port=d["port"], user=d["user"], password=d["password"],
                                 database=d["database"], autocommit=False)
    try:
        await run_async(compat, CLIENT_NAME, AsyncDBAPIClient(conn))
        await conn.ping(reconnect=False)
    finally:
        await conn.ensure_closed()


async def test_asyncmy_pool(compat: CompatEnv) -> None:
    d = compat.dsn(CLIENT_NAME)
    pool = await asyncmy.create_pool(host=d["host"], port=d["port"], user=d["user"], password=d["password"],
                                     db=d["database"], minsize=1, maxsize=2, autocommit=True)
    try:
        for _ in range(3):
            async with pool.acquire() as conn, conn.cursor() as cur:
                await cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id IN (10, 11)")
                assert (await cur.fetchone())[0] == 4
    finally:
        pool.close()
        await pool.wait_closed()
