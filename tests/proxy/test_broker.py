"""The connection broker end to end without servers: real `DataSource`s and their pools (proxy.backends),
and the session's side of it (proxy.session.connections.SessionConnections, the mixin `Session` uses),
over in-memory fake connections.

A fake connection stands for one backend socket: it has the attributes the broker reads and answers
every command with OK; it knows nothing of MySQL. Under test is ownership: after every step of randomized
interleavings of several sessions taking, borrowing, lending, breaking and giving back connections, each
connection is reachable from at most one session, that session is the one the pool says owns it, and the
pool's own invariants hold. Integration tests cover the same paths against real MariaDB.
"""

from __future__ import annotations

import asyncio
import random
import time
from types import SimpleNamespace
from typing import Any

import pytest
import structlog

from protocol.packets import OKPacket
from proxy.backends.backend import CLEAN_STATE, POOL_TIMEOUT_ERRNO, BackendError, DataSource
from proxy.backends.pool import Lease
from proxy.config.model import DataSourceConfig
from proxy.execution.state import StatementRegistry, TransactionState
from proxy.session.connections import SessionConnections


class FakeConnection:
    """One backend socket, in memory: every command is answered OK after one loop turn."""

    def __init__(self, source: DataSource, found_rows: bool) -> None:
        self.source = source
        self.found_rows = found_rows
        self.broken = False
        self.closed = False
        self.busy = False
        self.relayed = False
        self.status = 2  # autocommit
        self.charset = "utf8mb4"
        self.names = "utf8mb4"
        self.multi_statements = True
        self.session_sets: tuple[str, ...] = ()
        self.keep_for_next = False
        self.xa: str | None = None
        self.statements: dict[str, Any] = {}
        self.lease = Lease.LENT
        self.owner: object | None = None
        self.created_at = self.idle_since = time.monotonic()
        self.packet_limit: int | None = None  # (its execute answers OK: no limit is read)
        self.sent: list[str] = []

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def state(self) -> tuple[str, bool, tuple[str, ...]]:
        return (self.charset, self.multi_statements, self.session_sets)

    @property
    def clean(self) -> bool:
        return self.state == CLEAN_STATE

    def close(self) -> None:
        self.broken = self.closed = True

    async def reset_state(self) -> None:
        await asyncio.sleep(0)
        self.charset, self.multi_statements, self.session_sets, self.status = "utf8mb4", True, (), 2

    async def execute(self, sql: str) -> OKPacket:
        assert not self.closed, "a closed connection was used"
        self.sent.append(sql)
        await asyncio.sleep(0)
        return OKPacket()

    async def simple_command(self, payload: bytes) -> list[bytes]:
        await asyncio.sleep(0)
        return [OKPacket().encode()]


class FakeSource(DataSource):
    """A real DataSource (its pool, acquire/release rules) whose connections are FakeConnections."""

    opened = 0

    async def _open(self, found_rows: bool) -> Any:
        await asyncio.sleep(0)
        FakeSource.opened += 1
        return FakeConnection(self, found_rows)


class BrokerSession(SessionConnections):
    """A session reduced to what holding connections needs (Session sets the same attributes)."""

    def __init__(self, name: str, database: Any) -> None:
        self.name = name
        self.backends: dict[str, Any] = {}
        self.read_backends: dict[str, Any] = {}
        self.borrowed: set[Any] = set()
        self.renewed: set[str] = set()
        self.in_use: set[Any] = set()
        self.connecting: list[str] = []
        self.query_killed = False
        self._kill_waits: list[Any] = []
        self.database = database
        self.txn = TransactionState()
        self.statements = StatementRegistry()
        self.charset = "utf8mb4"
        self.names = "utf8mb4"
        self.multi_statements = True
        self.sticky = False
        self.busy = False
        self.log = structlog.get_logger("test.broker")

    def __repr__(self) -> str:
        return f"<session {self.name}>"

    @property
    def found_rows(self) -> bool:  # type: ignore[override]
        return False

    def begin(self) -> None:
        self.busy = True
        for conn in self.backends.values():
            conn.keep_for_next = False
        self.in_use.clear()

    def end(self) -> None:
        self.busy = False
        self._lend_idle()

    def close(self) -> None:
        for conn in [*self.backends.values(), *self.read_backends.values(), *self.borrowed]:
            self.give_back(conn)
        self.backends, self.read_backends, self.borrowed = {}, {}, set()


def make_sources(names: list[str], size: int, timeout: float = 0.05) -> dict[str, FakeSource]:
    return {n: FakeSource(DataSourceConfig(n, "127.0.0.1", 1, "db", "u", "p", min_pool_size=1, max_pool_size=size,
                                           connect_timeout=timeout)) for n in names}


def check(sources: dict[str, FakeSource], sessions: list[BrokerSession]) -> None:
    """The ownership invariant, at one instant."""
    where: dict[int, str] = {}
    for s in sessions:
        held = [*s.backends.values(), *s.read_backends.values(), *s.borrowed]
        for conn in held:
            assert id(conn) not in where, f"{conn} reachable from {where.get(id(conn))} and {s}"
            where[id(conn)] = repr(s)
            assert not conn.closed, f"{s} holds a closed connection"
            assert conn.source.pool.owner_of(conn) is s, (conn.source.pool.owner_of(conn), s)
        for name, conn in s.backends.items():
            assert conn.name == name
    for source in sources.values():
        source.pool.check()
        for conn in source.pool.connections():
            owner = source.pool.owner_of(conn)
            if isinstance(owner, BrokerSession) and id(conn) not in where:
                # in flight: handed to the session's wait before its task woke up, or being prepared
                # (character set, SET state) before the session files it under its data source
                assert conn.name in owner.connecting or conn in owner.in_use, (
                    f"the pool says {owner} owns a connection it does not know of")


async def _session_life(s: BrokerSession, rng: random.Random, names: list[str], steps: int,
                        everyone: list[BrokerSession], sources: dict[str, FakeSource]) -> dict[str, int]:
    outcome = {"timeouts": 0, "commands": 0}
    try:
        for _ in range(steps):
            s.begin()
            try:
                wanted = rng.sample(names, rng.randint(1, len(names)))
                conns = await s.backends_for(wanted)
                check(sources, everyone)
                assert set(conns) == set(wanted)
                if rng.random() < 0.3:  # a second unit on one data source: an extra connection, if free
                    extra = await s.try_extra_backend(rng.choice(wanted))
                    check(sources, everyone)
                    if extra is not None:
                        await asyncio.sleep(0)
                        s.return_extra_backend(extra, broken=rng.random() < 0.2)
                if rng.random() < 0.1:  # a connection dies mid-statement
                    next(iter(conns.values())).broken = True
                    s.drop_broken()
                if rng.random() < 0.1:
                    s.sticky = not s.sticky  # temporary tables, locks: nothing of ours may be lent
                if rng.random() < 0.2:
                    for conn in conns.values():
                        conn.keep_for_next = True  # LAST_INSERT_ID() may come next
                await asyncio.sleep(0)
                outcome["commands"] += 1
            except BackendError as exc:
                assert exc.errno == POOL_TIMEOUT_ERRNO, exc
                outcome["timeouts"] += 1
            finally:
                s.end()
                check(sources, everyone)
            for _ in range(rng.randint(0, 3)):
                await asyncio.sleep(0)
    finally:
        s.close()
    return outcome


@pytest.mark.parametrize("seed", range(12))
def test_random_interleavings_keep_every_connection_with_one_session(seed: int) -> None:
    rng = random.Random(seed)
    names = ["ds_0", "ds_1", "ds_2"][: rng.randint(1, 3)]

    async def run() -> list[dict[str, int]]:
        sources = make_sources(names, size=rng.randint(1, 3))
        for source in sources.values():
            await source.start()
        db = SimpleNamespace(sources=sources, kernel=None)
        sessions = [BrokerSession(f"s{i}", db) for i in range(rng.randint(2, 6))]
        results = await asyncio.gather(*(
            _session_life(s, random.Random(rng.random()), names, 25, sessions, sources) for s in sessions))
        check(sources, sessions)
        for source in sources.values():
            assert all(not isinstance(source.pool.owner_of(c), BrokerSession) for c in source.pool.connections())
            await source.close()
        return results

    results = asyncio.run(run())
    assert sum(r["commands"] for r in results) > 0


def test_an_idle_held_connection_goes_to_a_session_that_waits_for_it() -> None:
    async def run() -> None:
        sources = make_sources(["ds_0"], size=1, timeout=1.0)
        await sources["ds_0"].start()
        db = SimpleNamespace(sources=sources, kernel=None)
        a, b = BrokerSession("a", db), BrokerSession("b", db)
        a.begin()
        conn = await a.backend("ds_0")
        a.end()  # between a's commands it still holds it ...
        assert a.backends == {"ds_0": conn}
        b.begin()
        got = await b.backend("ds_0")  # ... and gives it up to b, which would otherwise wait
        check(sources, [a, b])
        assert got is conn and a.backends == {} and b.backends == {"ds_0": conn}
        b.end()
        b.close()
        await sources["ds_0"].close()

    asyncio.run(run())


@pytest.mark.parametrize(("setup", "why"), [
    (lambda s, c: (setattr(s.txn, "begin_sql", "BEGIN"), s.txn.joined.append(c.name)), "an open transaction"),
    (lambda s, c: setattr(s.txn, "autocommit", False) or s.txn.joined.append(c.name), "autocommit=0, joined"),
    (lambda s, c: setattr(s, "sticky", True), "sticky session state"),
    (lambda s, c: setattr(c, "keep_for_next", True), "results the client may ask for next"),
    (lambda s, c: setattr(c, "status", 3), "IN_TRANS on the connection"),
    (lambda s, c: setattr(c, "xa", "xid"), "an XA branch"),
])  # fmt: skip
def test_a_connection_with_the_sessions_state_on_it_is_never_lent(setup: Any, why: str) -> None:
    async def run() -> None:
        sources = make_sources(["ds_0"], size=1, timeout=0.05)
        await sources["ds_0"].start()
        db = SimpleNamespace(sources=sources, kernel=None)
        a, b = BrokerSession("a", db), BrokerSession("b", db)
        a.begin()
        conn = await a.backend("ds_0")
        setup(a, conn)
        a.end()
        b.begin()
        with pytest.raises(BackendError) as failed:
            await b.backend("ds_0")
        assert failed.value.errno == POOL_TIMEOUT_ERRNO, why
        b.end()
        check(sources, [a, b])
        assert a.backends == {"ds_0": conn}, why
        conn.xa, conn.status, a.txn = None, 2, TransactionState()
        a.close()
        b.close()
        await sources["ds_0"].close()

    asyncio.run(run())


def test_an_open_transaction_lends_a_connection_it_has_not_joined() -> None:
    """Held from before BEGIN and not used since, the connection holds nothing of the transaction (joining
    starts it there): kept, it let transactions deadlock on the pools (tests/integration/
    test_stress_generated.py)."""
    async def run() -> None:
        sources = make_sources(["ds_0"], size=1, timeout=0.05)
        await sources["ds_0"].start()
        db = SimpleNamespace(sources=sources, kernel=None)
        a, b = BrokerSession("a", db), BrokerSession("b", db)
        a.begin()
        await a.backend("ds_0")
        a.txn.begin_sql = "BEGIN"  # BEGIN after it, nothing since
        a.end()
        b.begin()
        await b.backend("ds_0")
        b.end()
        check(sources, [a, b])
        assert a.backends == {} and "ds_0" in b.backends
        a.txn = TransactionState()
        a.close()
        b.close()
        await sources["ds_0"].close()

    asyncio.run(run())


def test_a_waiting_session_first_gives_back_the_idle_connections_it_holds() -> None:
    """Hold-and-wait: a waits for ds_1 while holding an idle ds_0 connection b needs; a lets it go first."""

    async def run() -> None:
        sources = make_sources(["ds_0", "ds_1"], size=1, timeout=1.0)
        for source in sources.values():
            await source.start()
        db = SimpleNamespace(sources=sources, kernel=None)
        a, b = BrokerSession("a", db), BrokerSession("b", db)
        a.begin()
        await a.backend("ds_0")
        a.end()
        a.begin()
        b.begin()
        await b.backend("ds_1")  # b holds ds_1 for its command
        waiting = asyncio.ensure_future(a.backend("ds_1"))  # a waits for ds_1: gives back its idle ds_0 first
        await asyncio.sleep(0.01)
        assert a.backends == {}
        got = await b.backend("ds_0")  # b gets ds_0 without waiting for a
        check(sources, [a, b])
        b.end()
        b.close()
        await waiting
        check(sources, [a, b])
        assert got.name == "ds_0"
        a.end()
        a.close()
        for source in sources.values():
            await source.close()

    asyncio.run(run())
