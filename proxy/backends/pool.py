"""The owner of a data source's backend connections: one state machine, every transition synchronous.

A connection is always in exactly one `Lease` state and, when taken, has exactly one owner (a session, or
the proxy itself for start-up and admin work). Sessions never put a connection anywhere: they `release`
it, which is a plain function call that decides on the spot whether the connection goes to the first
waiter, back to the idle list, to a pool-owned reset, or is closed. There is no "release later": between
a session giving a connection up and the next owner getting it, no other task can run, so no connection
is ever reachable from two sessions (the crosstalk and 'conn not in _used' failures of the aiomysql pool
this replaces came from exactly such a window).

Waits are bounded by the data source's `connectionTimeoutMilliseconds` and end in `PoolTimeout`, which
names the data source and the pool's size. A connection handed to a waiter is assigned to it before its
task wakes up, so a waiter that is cancelled or times out meanwhile gives it straight back.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import structlog

log = structlog.get_logger("shardproxy.pool")


class Lease(enum.Enum):
    OPENING = "opening"  # not a connection yet: a reserved slot whose connection is being opened
    IDLE = "idle"  # in the pool, owned by nobody
    HELD = "held"  # owned by a session between and during its commands; its holder may give it up
    LENT = "lent"  # owned by a session (or the proxy) for one statement or one piece of work
    RESETTING = "resetting"  # owned by the pool while its session state is cleared
    CLOSED = "closed"


class Pooled(Protocol):
    """What the pool needs of a connection."""

    lease: Lease
    owner: object | None
    broken: bool
    busy: bool
    found_rows: bool
    created_at: float
    idle_since: float

    def close(self) -> None: ...

    async def reset_state(self) -> None: ...


class Holder(Protocol):
    """A session holding a connection between its commands; it may give an idle one back (synchronously)."""

    def give_up(self, conn: Any) -> bool: ...


C = TypeVar("C", bound=Pooled)


class PoolTimeout(Exception):
    """No connection became free within the data source's connectionTimeoutMilliseconds."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PoolClosed(Exception):
    """The data source is shutting down."""


class PoolInvariantError(AssertionError):
    """A caller broke the ownership rules (released what it does not own): a bug, reported loudly."""


class _Slot:
    """Handed to a waiter instead of a connection: room in the pool was reserved for it to open one."""


SLOT = _Slot()


@dataclass(eq=False)
class _Waiter:
    future: asyncio.Future[Any]
    owner: object
    holder: Holder | None
    found_rows: bool


@dataclass
class PoolStats:
    size: int
    idle: int
    in_use: int
    opening: int
    resetting: int
    waiting: int
    max_size: int


@dataclass(eq=False)
class ConnectionPool(Generic[C]):
    """`max_size` connections at most, whatever their CLIENT_FOUND_ROWS flag (a pool per flag would
    double the connections a data source sees)."""

    name: str
    opener: Callable[[bool], Awaitable[C]]
    max_size: int
    acquire_timeout: float
    idle_timeout: float = 0.0  # seconds; 0: idle connections are kept
    max_lifetime: float = 0.0  # seconds; 0: no limit
    reset_timeout: float = 5.0
    _idle: deque[C] = field(default_factory=deque)
    _owned: dict[C, object] = field(default_factory=dict)  # HELD and LENT connections -> owner
    _resetting: set[C] = field(default_factory=set)
    _opening: int = 0
    _waiters: deque[_Waiter] = field(default_factory=deque)
    holders: dict[C, Holder] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    closed: bool = False

    # -- what is where ------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Connections that exist or are being opened: never above max_size."""
        return len(self._idle) + len(self._owned) + len(self._resetting) + self._opening

    @property
    def waiting(self) -> int:
        waiters = self._waiters
        if not waiters:  # the usual case, asked after every command (Session._lend_idle): no generator
            return 0
        return sum(1 for w in waiters if not w.future.done())

    def stats(self) -> PoolStats:
        return PoolStats(self.size, len(self._idle), len(self._owned), self._opening, len(self._resetting),
                         self.waiting, self.max_size)

    def owner_of(self, conn: C) -> object | None:
        return self._owned.get(conn)

    def owned_by(self, owner: object) -> list[C]:
        return [c for c, o in self._owned.items() if o is owner]

    def connections(self) -> Iterator[C]:
        yield from self._idle
        yield from self._owned
        yield from self._resetting

    def check(self) -> None:
        """The invariants, for tests: every connection is in one place, in the state that place means."""
        seen: set[int] = set()
        for conn in self._idle:
            assert id(conn) not in seen, "a connection is idle twice"
            seen.add(id(conn))
            assert conn.lease is Lease.IDLE and conn.owner is None, (conn.lease, conn.owner)
        for conn, owner in self._owned.items():
            assert id(conn) not in seen, "an owned connection is also idle"
            seen.add(id(conn))
            assert conn.lease in (Lease.HELD, Lease.LENT) and conn.owner is owner, (conn.lease, conn.owner)
            assert (conn in self.holders) == (conn.lease is Lease.HELD), "holder registry out of step"
        for conn in self._resetting:
            assert id(conn) not in seen, "a resetting connection is also elsewhere"
            seen.add(id(conn))
            assert conn.lease is Lease.RESETTING and conn.owner is None
        for conn in self.holders:
            assert conn in self._owned, "a holder holds a connection the pool does not know as owned"
        assert self.size <= self.max_size, (self.size, self.max_size)
        assert self._opening >= 0
        if self._idle:
            assert not any(not w.future.done() and w.found_rows == c.found_rows
                           for w in self._waiters for c in self._idle), "a waiter waits next to an idle connection"

    # -- taking ---------------------------------------------------------------------------------------------

    def _assign(self, conn: C, owner: object, holder: Holder | None) -> C:
        conn.owner = owner
        conn.lease = Lease.HELD if holder is not None else Lease.LENT
        self._owned[conn] = owner
        if holder is not None:
            self.holders[conn] = holder
        return conn

    def _expired(self, conn: C, now: float) -> bool:
        if conn.broken:
            return True
        if self.max_lifetime > 0 and now - conn.created_at > self.max_lifetime:
            return True
        return self.idle_timeout > 0 and conn.lease is Lease.IDLE and now - conn.idle_since > self.idle_timeout

    def _take_idle(self, found_rows: bool) -> C | None:
        now = time.monotonic()
        for conn in list(self._idle):
            if self._expired(conn, now):
                self._idle.remove(conn)
                self._close(conn)
                continue
            if conn.found_rows == found_rows:
                self._idle.remove(conn)
                return conn
        return None

    def _reclaim(self, found_rows: bool) -> C | None:
        """An idle connection a session holds between its commands, taken back (the holder decides)."""
        for conn, holder in list(self.holders.items()):
            if conn.found_rows == found_rows and holder.give_up(conn):
                self._unassign(conn)
                return conn
        return None

    def _make_room(self, found_rows: bool) -> bool:
        """Full, with idle connections of the other CLIENT_FOUND_ROWS flag: close one for a new one."""
        for conn in list(self._idle):
            if conn.found_rows != found_rows:
                self._idle.remove(conn)
                self._close(conn)
                return True
        return False

    def try_take(self, owner: object, *, found_rows: bool = False, holder: Holder | None = None) -> C | _Slot | None:
        """The synchronous part of `acquire`: a connection now, a reserved slot to open one, or None."""
        if self.closed:
            raise PoolClosed(self.name)
        if not any(not w.future.done() for w in self._waiters):  # queue fairly behind earlier waiters
            conn = self._take_idle(found_rows)
            if conn is not None:
                return self._assign(conn, owner, holder)
            if self.size < self.max_size or self._make_room(found_rows):
                self._opening += 1
                return SLOT
        conn = self._reclaim(found_rows)
        if conn is not None:
            return self._assign(conn, owner, holder)
        return None

    async def acquire(
        self, owner: object, *, found_rows: bool = False, holder: Holder | None = None, wait: bool = True,
        timeout: float | None = None,
    ) -> C | None:
        """A connection owned by `owner` (HELD, and reclaimable through `holder`, when one is given; else
        LENT). Without `wait`, None instead of waiting. A wait ends in PoolTimeout after `timeout`
        (default: the data source's connectionTimeoutMilliseconds)."""
        got = self.try_take(owner, found_rows=found_rows, holder=holder)
        if got is None:
            if not wait:
                return None
            got = await self._wait(owner, found_rows, holder, self.acquire_timeout if timeout is None else timeout)
        if isinstance(got, _Slot):
            return await self._open(owner, found_rows, holder)
        return got

    async def _wait(self, owner: object, found_rows: bool, holder: Holder | None, timeout: float) -> C | _Slot:
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future(), owner, holder, found_rows)
        self._waiters.append(waiter)
        try:
            await asyncio.wait((waiter.future,), timeout=timeout)
        except BaseException:
            self._abandon(waiter)
            raise
        if waiter.future.done():
            result: C | _Slot = waiter.future.result()
            return result
        self._abandon(waiter)
        stats = self.stats()
        raise PoolTimeout(
            f"no connection of data source {self.name} became free within {int(timeout * 1000)} ms "
            f"(maxPoolSize {self.max_size}: {stats.in_use} in use, {stats.waiting + 1} waiting); raise the data "
            f"source's maxPoolSize or connectionTimeoutMilliseconds, or shorten the transactions holding them"
        )

    def _abandon(self, waiter: _Waiter) -> None:
        """A waiter gives up (timeout, cancellation): what it was handed meanwhile goes back at once."""
        with_suppress_remove(self._waiters, waiter)
        fut = waiter.future
        if not fut.done():
            fut.cancel()
            return
        if fut.cancelled():
            return
        got = fut.result()
        if isinstance(got, _Slot):
            self._opening -= 1
            self._hand_slot()
        else:
            self.release(got, owner=waiter.owner)

    async def _open(self, owner: object, found_rows: bool, holder: Holder | None) -> C:
        """Open a connection into a reserved slot (counted in `_opening` until it is owned)."""
        try:
            conn = await self.opener(found_rows)
        except BaseException:
            self._opening -= 1
            self._hand_slot()
            raise
        self._opening -= 1
        conn.lease = Lease.LENT
        conn.owner = None
        if self.closed:
            conn.close()
            conn.lease = Lease.CLOSED
            raise PoolClosed(self.name)
        return self._assign(conn, owner, holder)

    # -- giving back ------------------------------------------------------------------------------------

    def _unassign(self, conn: C) -> None:
        self._owned.pop(conn, None)
        self.holders.pop(conn, None)
        conn.owner = None

    def release(self, conn: C, *, owner: object, reset: bool = False) -> None:
        """`owner` gives `conn` back. A connection with an answer still on its way, broken or past its
        lifetime is closed; with `reset`, it is cleaned by the pool before anyone else gets it; else it
        goes to the first waiter or the idle list as it is (its next owner fits it to its own state)."""
        if self._owned.get(conn) is not owner or conn.owner is not owner:
            raise PoolInvariantError(
                f"data source {self.name}: a connection released by {owner!r} is owned by {conn.owner!r} "
                f"({conn.lease.value})"
            )
        self._unassign(conn)
        if conn.busy:
            conn.broken = True  # an answer is still on its way: nobody can use this connection safely
        if self.closed or self._expired(conn, time.monotonic()):
            self._close(conn)
            return
        if reset:
            conn.lease = Lease.RESETTING
            self._resetting.add(conn)
            task = asyncio.get_running_loop().create_task(self._reset(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._available(conn)

    def hand_over(self, conn: C, *, owner: object, to: object, holder: Holder | None = None) -> None:
        """`owner` passes `conn` to `to` directly (a session's held connection lent to one of its own
        statements and back, a read/write group's member to the group): one synchronous step."""
        if self._owned.get(conn) is not owner:
            raise PoolInvariantError(f"data source {self.name}: hand-over by {owner!r} of a connection it does not own")
        self._unassign(conn)
        self._assign(conn, to, holder)

    def discard(self, conn: C, *, owner: object) -> None:
        """`owner` gives up a connection whose state is unknown: closed, never pooled."""
        conn.broken = True
        self.release(conn, owner=owner)

    async def _reset(self, conn: C) -> None:
        try:
            await asyncio.wait_for(conn.reset_state(), timeout=self.reset_timeout)
        except BaseException as exc:
            conn.broken = True
            if not isinstance(exc, Exception):
                self._resetting.discard(conn)
                self._close(conn)
                raise
        self._resetting.discard(conn)
        if conn.broken or self.closed:
            self._close(conn)
        else:
            self._available(conn)

    def _available(self, conn: C) -> None:
        while self._waiters:
            waiter = self._waiters[0]
            if waiter.future.done():
                self._waiters.popleft()
                continue
            if waiter.found_rows != conn.found_rows:
                break
            self._waiters.popleft()
            self._assign(conn, waiter.owner, waiter.holder)
            waiter.future.set_result(conn)
            return
        if self._waiters and any(not w.future.done() for w in self._waiters):
            # the first waiter wants the other CLIENT_FOUND_ROWS flag: this connection makes room for it
            self._close(conn)
            return
        conn.lease = Lease.IDLE
        conn.owner = None
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def _close(self, conn: C) -> None:
        conn.lease = Lease.CLOSED
        conn.owner = None
        try:
            conn.close()
        except Exception:
            log.debug("close_failed", data_source=self.name)
        self._hand_slot()

    def _hand_slot(self) -> None:
        """Room freed up: the first waiter opens a connection of its own in it."""
        while self._waiters and self.size < self.max_size and not self.closed:
            waiter = self._waiters.popleft()
            if waiter.future.done():
                continue
            self._opening += 1
            waiter.future.set_result(SLOT)
            return

    # -- life cycle -------------------------------------------------------------------------------------

    def prefill(self, conns: list[C]) -> None:
        """Connections opened at start-up (minPoolSize) go idle."""
        for conn in conns:
            if self.size >= self.max_size:
                conn.close()
                continue
            conn.lease, conn.owner, conn.idle_since = Lease.IDLE, None, time.monotonic()
            self._idle.append(conn)

    async def close(self) -> None:
        """Close everything: idle connections now, resets when they finish, owned ones too (the sessions
        are gone by the time the data sources close), and waiters get PoolClosed."""
        self.closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.future.done():
                waiter.future.set_exception(PoolClosed(self.name))
        while self._idle:
            self._close(self._idle.popleft())
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=self.reset_timeout + 1)
        for conn in list(self._owned):
            self._unassign(conn)
            self._close(conn)


def with_suppress_remove(queue: deque[Any], item: object) -> None:
    try:
        queue.remove(item)
    except ValueError:
        pass


__all__ = ["SLOT", "ConnectionPool", "Holder", "Lease", "PoolClosed", "PoolInvariantError", "PoolStats",
           "PoolTimeout", "Pooled"]
