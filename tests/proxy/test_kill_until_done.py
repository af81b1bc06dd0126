"""KILL QUERY of a unit is sent again until its answer ends: a KILL that lands before the server starts the
statement stops nothing, and the statement would run to its end (proxy.execution.readers.kill_until_done)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from proxy.execution.readers import kill_until_done


@pytest.mark.parametrize(("missed", "kills"), [(0, 1), (1, 2), (3, 4)])
def test_the_kill_is_sent_again_until_the_answer_ends(missed: int, kills: int) -> None:
    async def run() -> None:
        ended = asyncio.get_running_loop().create_future()
        sent: list[int] = []

        async def kill_query(thread_id: int) -> None:
            sent.append(thread_id)
            if len(sent) > missed:  # the first `missed` kills land before the statement started
                ended.set_result(None)

        conn = SimpleNamespace(thread_id=7, source=SimpleNamespace(kill_query=kill_query))
        await kill_until_done(conn, ended, every=0.01)  # type: ignore[arg-type]
        assert sent == [7] * kills

    asyncio.run(run())


def test_an_answer_that_never_ends_is_waited_for_after_the_last_attempt() -> None:
    async def run() -> None:
        sent: list[int] = []

        async def kill_query(thread_id: int) -> None:
            sent.append(thread_id)

        reading = asyncio.ensure_future(asyncio.sleep(0.2))
        conn = SimpleNamespace(thread_id=3, source=SimpleNamespace(kill_query=kill_query))
        await kill_until_done(conn, reading, every=0.01, attempts=3)  # type: ignore[arg-type]
        assert reading.done() and sent == [3, 3, 3]

    asyncio.run(run())
