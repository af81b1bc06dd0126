"""What the stress tests share: running many client threads for a bounded time, and the checks after the
load that no client got stuck, no backend connection leaked and nothing internal went wrong.

Why a module of its own: `test_stress.py` (a fixed mix) and `test_stress_generated.py` (a seeded mix of
every statement class) assert the same end state, and a leak check that drifts between the two would let
one of them pass on what the other catches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from tests.integration.harness import RunningProxy


@dataclass
class LoadResult:
    failures: list[str] = field(default_factory=list)
    stuck: list[int] = field(default_factory=list)
    statements: int = 0
    logs: list[dict[str, Any]] = field(default_factory=list)

    def internal(self) -> list[dict[str, Any]]:
        """Log events that mean the proxy itself went wrong (errors, internal errors)."""
        return [e for e in self.logs if e.get("log_level") in ("error", "critical", "exception")
                or "internal" in str(e.get("event", ""))]


def run_load(clients: Sequence[Any], seconds: float, *, step: Callable[[Any], None] | None = None,
             join_seconds: float = 60.0, ident: Callable[[Any], int] = lambda c: int(c.c)) -> LoadResult:
    """Every client runs `step(client)` (default `client.step()`) in a thread of its own until `seconds`
    have passed; a client's first exception ends its run and is recorded. Logs are captured meanwhile
    (call the end-state checks while still inside `capture()` when they may log)."""
    result = LoadResult()
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    act = step or (lambda c: c.step())

    def run(client: Any) -> None:
        n = 0
        try:
            while time.monotonic() < deadline:
                act(client)
                n += 1
        except Exception as exc:
            with lock:
                result.failures.append(f"client {ident(client)} after {n} statements: {type(exc).__name__}: {exc}")
        with lock:
            result.statements += n

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + join_seconds)
    result.stuck = [ident(c) for c, t in zip(clients, threads, strict=True) if t.is_alive()]
    return result


def capture() -> Any:
    """structlog's capture, as a context manager whose list the caller hands to `LoadResult.logs`."""
    return structlog.testing.capture_logs()


def fresh_client_check(proxy: RunningProxy, database: str, probe: str) -> tuple[float, list[Any]]:
    """(seconds a fresh client took to answer `probe`, sessions still busy in a command after up to 5 s)."""
    started = time.monotonic()
    fresh = proxy.connect(database, read_timeout=5)
    busy: list[Any] = []
    try:
        with fresh.cursor() as cur:
            cur.execute(probe)
            cur.fetchall()
        seconds = time.monotonic() - started
        for _ in range(50):
            with fresh.cursor() as cur:
                cur.execute("SHOW PROCESSLIST")
                busy = [r for r in cur.fetchall() if r[4] not in ("Sleep",) and r[7] != "SHOW PROCESSLIST"]
            if not busy:
                break
            time.sleep(0.1)
    finally:
        fresh.close()
    return seconds, busy


def pool_report(proxy: RunningProxy) -> dict[str, Any]:
    """data source name -> its pool's stats, after the pool's own invariant check (on the proxy's loop); a
    read/write splitting group (no pool of its own) counts as its members."""
    def collect() -> dict[str, Any]:
        out = {}
        for (_db, _name), source in proxy.server.sources.items():
            members = [source.primary, *(r.source for r in source.replicas)] if hasattr(source, "replicas") \
                else [source]
            for member in members:
                member.pool.check()
                out[member.name] = member.pool.stats()
        return out

    return dict(proxy.call(collect))


def known_threads(proxy: RunningProxy) -> dict[int, str]:
    """Server thread id -> data source name of every backend connection the proxy owns: pooled ones and
    each data source's admin connection (for KILL QUERY)."""
    def collect() -> dict[int, str]:
        out: dict[int, str] = {}
        for (_db, _name), source in proxy.server.sources.items():
            members = [source.primary, *(r.source for r in source.replicas)] if hasattr(source, "replicas") \
                else [source]
            for member in members:
                for conn in member.pool.connections():
                    out[int(conn.thread_id)] = member.name
                admin = getattr(member, "_admin", None)
                if admin is not None:
                    out[int(admin.thread_id)] = f"{member.name} (admin)"
        return out

    return dict(proxy.call(collect))


def unknown_backend_threads(server: Any, dbs: Iterable[str], proxies: Sequence[RunningProxy],
                            seconds: float = 5.0) -> list[tuple[Any, ...]]:
    """Connections on `server` to the databases `dbs` that no proxy owns any more (leaked: closed by the
    proxy's books, alive on the server), after giving closed sockets `seconds` to be noticed."""
    names = list(dbs)
    marks = ", ".join(["%s"] * len(names))
    unknown: list[tuple[Any, ...]] = []
    for _ in range(int(seconds / 0.2)):
        known: dict[int, str] = {}
        for proxy in proxies:
            known.update(known_threads(proxy))
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT ID, COMMAND, TIME, STATE, LEFT(INFO, 80) FROM information_schema.PROCESSLIST "
                        f"WHERE DB IN ({marks}) AND ID <> CONNECTION_ID()", names)
            unknown = [tuple(r) for r in cur.fetchall() if int(r[0]) not in known]
        if not unknown:
            break
        time.sleep(0.2)
    return unknown


def _pools_quiet(pools: dict[str, Any]) -> bool:
    return all(st.in_use == 0 and st.resetting == 0 and st.opening == 0 and st.waiting == 0
               for st in pools.values())


def wait_pools_quiet(proxy: RunningProxy, seconds: float = 5.0) -> dict[str, Any]:
    """The pools once every connection is back (idle, nobody waiting), or as they are after `seconds`."""
    pools = pool_report(proxy)
    for _ in range(int(seconds / 0.1)):
        if _pools_quiet(pools):
            break
        time.sleep(0.1)
        pools = pool_report(proxy)
    return pools


def assert_pools_quiet(pools: dict[str, Any]) -> None:
    assert _pools_quiet(pools), pools


def backend_connections(server: Any, dbs: Iterable[str], xa_prefix: str = "") -> tuple[int, int, int]:
    """(connections to the databases `dbs`, of them in an InnoDB transaction, XA branches prepared and
    not resolved whose xid starts with `xa_prefix`), counted on the server itself."""
    names = list(dbs)
    marks = ", ".join(["%s"] * len(names))
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB IN ({marks}) "
                    "AND ID <> CONNECTION_ID()", names)
        total = int(cur.fetchone()[0])
        cur.execute(f"SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p "
                    f"ON p.ID = t.trx_mysql_thread_id WHERE p.DB IN ({marks})", names)
        in_trx = int(cur.fetchone()[0])
        cur.execute("XA RECOVER")
        prepared = sum(1 for r in cur.fetchall() if bytes(r[3]).decode("latin-1").startswith(xa_prefix))
    return total, in_trx, prepared


__all__ = ["LoadResult", "assert_pools_quiet", "backend_connections", "capture", "fresh_client_check",
           "known_threads", "pool_report", "run_load", "unknown_backend_threads", "wait_pools_quiet"]
