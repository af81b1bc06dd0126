"""proxy.backends.pool: the ownership state machine, driven by randomized concurrent schedules.

The connections here are stand-ins with the attributes the pool reads (the pool never does I/O on a
connection except `reset_state`, and opening goes through the `opener` it is given); what is under test
is the bookkeeping: after every step of every schedule each connection is in exactly one place, owned by
at most one owner, and no owner ever holds a connection another owner holds.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from proxy.backends.pool import ConnectionPool, Lease, PoolClosed, PoolInvariantError, PoolTimeout


class FakeConn:
    _ids = 0

    def __init__(self, found_rows: bool) -> None:
        FakeConn._ids += 1
        self.id = FakeConn._ids
        self.lease = Lease.LENT
        self.owner: object | None = None
        self.broken = False
        self.busy = False
        self.found_rows = found_rows
        self.created_at = 0.0
        self.idle_since = 0.0
        self.closed = False
        self.reset_delay = 0.0

    def close(self) -> None:
        self.closed = True

    async def reset_state(self) -> None:
        await asyncio.sleep(self.reset_delay)


class Owner:
    """A session: holds connections (some reclaimable between its 'commands')."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.held: list[FakeConn] = []
        self.busy = False

    def give_up(self, conn: Any) -> bool:
        if self.busy or conn not in self.held:
            return False
        self.held.remove(conn)
        return True

    def __repr__(self) -> str:
        return f"owner{self.n}"


def make_pool(size: int, *, timeout: float = 0.5, open_delay: float = 0.0, fail_rate: float = 0.0,
              rng: random.Random | None = None) -> ConnectionPool[FakeConn]:
    rng = rng or random.Random(0)

    async def opener(found_rows: bool) -> FakeConn:
        await asyncio.sleep(open_delay * rng.random())
        if rng.random() < fail_rate:
            raise OSError("cannot connect")
        return FakeConn(found_rows)

    return ConnectionPool("ds_test", opener, max_size=size, acquire_timeout=timeout)


def check_all(pool: ConnectionPool[FakeConn], owners: list[Owner]) -> None:
    pool.check()
    seen: dict[int, Owner] = {}
    for o in owners:
        for c in o.held:
            assert c.id not in seen, f"conn {c.id} held by {seen[c.id]} and {o}"
            seen[c.id] = o
            assert c.owner is o, (c.owner, o)
            assert not c.closed
    for c in pool.connections():
        if c.lease is Lease.IDLE:
            assert c.id not in seen


@pytest.mark.parametrize("seed", range(20))
def test_random_schedules_keep_one_owner_per_connection(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.randint(1, 4)
    pool = make_pool(size, timeout=rng.choice([0.005, 0.02, 0.05]), open_delay=0.003,
                     fail_rate=rng.choice([0.0, 0.1]), rng=rng)
    owners = [Owner(i) for i in range(rng.randint(2, 10))]
    stats = {"timeouts": 0, "acquired": 0, "open_failed": 0, "cancelled": 0}

    async def session(o: Owner) -> None:
        for _ in range(20):
            o.busy = True
            need = rng.randint(1, 2)
            try:
                for _ in range(need):
                    hold = rng.random() < 0.7
                    try:
                        if rng.random() < 0.3:
                            conn = await pool.acquire(o, found_rows=rng.random() < 0.2,
                                                      holder=o if hold else None, wait=False)
                            if conn is None:
                                continue
                        else:
                            conn = await pool.acquire(o, found_rows=rng.random() < 0.2, holder=o if hold else None)
                    except PoolTimeout:
                        stats["timeouts"] += 1
                        continue
                    except OSError:
                        stats["open_failed"] += 1
                        continue
                    assert conn is not None
                    stats["acquired"] += 1
                    o.held.append(conn)
                    check_all(pool, owners)
                    if rng.random() < 0.2:
                        conn.busy = True  # an answer in flight when it goes back: must be closed
                await asyncio.sleep(rng.random() * 0.004)
            finally:
                o.busy = False
            # give back some (reset or not), keep others idle for reclaiming
            for conn in list(o.held):
                if rng.random() < 0.6:
                    o.held.remove(conn)
                    if rng.random() < 0.1:
                        conn.broken = True
                    conn.reset_delay = rng.random() * 0.003
                    pool.release(conn, owner=o, reset=rng.random() < 0.5)
                    check_all(pool, owners)
                else:
                    conn.busy = False
            await asyncio.sleep(rng.random() * 0.002)
        for conn in list(o.held):
            o.held.remove(conn)
            conn.busy = False
            pool.release(conn, owner=o)

    async def canceller(tasks: list[asyncio.Task[None]]) -> None:
        """Cancel sessions at random moments: mid-wait, mid-open."""
        for _ in range(3):
            await asyncio.sleep(rng.random() * 0.05)
            victim = rng.choice(tasks)
            if not victim.done():
                victim.cancel()
                stats["cancelled"] += 1

    async def main() -> None:
        tasks = [asyncio.create_task(session(o)) for o in owners]
        await asyncio.gather(canceller(tasks), *tasks, return_exceptions=True)
        # what a cancelled session still held goes back, as Session.close does
        for o in owners:
            for conn in list(o.held):
                o.held.remove(conn)
                conn.busy = False
                pool.release(conn, owner=o)
        for _ in range(100):
            if not pool.stats().resetting:
                break
            await asyncio.sleep(0.005)
        check_all(pool, owners)
        st = pool.stats()
        assert st.in_use == 0 and st.opening == 0 and st.waiting == 0 and st.resetting == 0, st
        assert st.size <= size
        await pool.close()
        assert all(c.lease is Lease.CLOSED for c in pool.connections()) or not list(pool.connections())

    asyncio.run(main())
    assert stats["acquired"] > 0


def test_release_by_a_non_owner_is_refused() -> None:
    async def main() -> None:
        pool = make_pool(2)
        a, b = Owner(1), Owner(2)
        conn = await pool.acquire(a)
        assert conn is not None
        with pytest.raises(PoolInvariantError):
            pool.release(conn, owner=b)
        pool.release(conn, owner=a)
        with pytest.raises(PoolInvariantError):
            pool.release(conn, owner=a)  # twice
        pool.check()

    asyncio.run(main())


def test_a_wait_ends_after_the_timeout_naming_the_pool() -> None:
    async def main() -> None:
        pool = make_pool(1, timeout=0.05)
        a, b = Owner(1), Owner(2)
        conn = await pool.acquire(a)
        with pytest.raises(PoolTimeout) as info:
            await pool.acquire(b)
        assert "ds_test" in info.value.message and "maxPoolSize 1" in info.value.message
        assert "50 ms" in info.value.message
        pool.check()
        assert pool.stats().waiting == 0
        assert conn is not None
        pool.release(conn, owner=a)

    asyncio.run(main())


def test_a_released_connection_goes_to_the_first_waiter_before_anyone_else() -> None:
    async def main() -> None:
        pool = make_pool(1)
        a, b, c = Owner(1), Owner(2), Owner(3)
        conn = await pool.acquire(a)
        assert conn is not None
        waiting = asyncio.create_task(pool.acquire(b))
        await asyncio.sleep(0)
        pool.release(conn, owner=a)
        # handed over synchronously: b owns it before its task even runs, so c cannot take it
        assert conn.owner is b and conn.lease is Lease.LENT
        assert await pool.acquire(c, wait=False) is None
        assert await waiting is conn
        pool.check()

    asyncio.run(main())


def test_a_cancelled_waiter_hands_back_what_it_was_given() -> None:
    async def main() -> None:
        pool = make_pool(1)
        a, b = Owner(1), Owner(2)
        conn = await pool.acquire(a)
        assert conn is not None
        waiting = asyncio.create_task(pool.acquire(b))
        await asyncio.sleep(0)
        pool.release(conn, owner=a)  # handed to b ...
        waiting.cancel()  # ... which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert conn.lease is Lease.IDLE and conn.owner is None
        pool.check()

    asyncio.run(main())


def test_idle_connections_held_by_a_session_are_reclaimed_only_when_it_lets_go() -> None:
    async def main() -> None:
        pool = make_pool(1, timeout=0.05)
        a, b = Owner(1), Owner(2)
        conn = await pool.acquire(a, holder=a)
        assert conn is not None
        a.held.append(conn)
        a.busy = True  # mid-command: not given up
        with pytest.raises(PoolTimeout):
            await pool.acquire(b)
        a.busy = False
        got = await pool.acquire(b)
        assert got is conn and conn.owner is b and not a.held
        pool.check()

    asyncio.run(main())


def test_busy_or_broken_connections_are_closed_never_pooled() -> None:
    async def main() -> None:
        pool = make_pool(2)
        a = Owner(1)
        c1 = await pool.acquire(a)
        c2 = await pool.acquire(a)
        assert c1 is not None and c2 is not None
        c1.busy = True
        c2.broken = True
        pool.release(c1, owner=a)
        pool.release(c2, owner=a)
        assert c1.closed and c2.closed and pool.stats().size == 0
        pool.check()

    asyncio.run(main())


def test_closing_fails_waiters() -> None:
    async def main() -> None:
        pool = make_pool(1)
        a, b = Owner(1), Owner(2)
        conn = await pool.acquire(a)
        waiting = asyncio.create_task(pool.acquire(b))
        await asyncio.sleep(0)
        await pool.close()
        with pytest.raises(PoolClosed):
            await waiting
        assert conn is not None and conn.closed

    asyncio.run(main())
