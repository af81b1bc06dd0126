"""Prometheus metrics: what the proxy does, served over HTTP when `proxy-metrics-port` is set.

Counting happens on the statement path, so it is plain integer arithmetic on dicts and lists (a few
hundred nanoseconds per statement, fast path included); the prometheus_client objects are built only when
someone scrapes, by a collector that also reads the pools, the replicas and the plan caches as they are
then. The endpoint is a small asyncio HTTP server on the proxy's own loop: no thread, no lock.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog

if TYPE_CHECKING:
    from proxy.backends.backend import DataSource
    from proxy.backends.runtime import LogicalDatabase

log = structlog.get_logger("shardproxy.metrics")


class ProxyServer(Protocol):
    """What the collector reads of the server (proxy.server.ProxyServer, which owns this endpoint)."""

    sessions: Mapping[int, object]
    sources: Mapping[tuple[str, str], DataSource]
    databases_by_name: Mapping[str, LogicalDatabase]
    started_monotonic: float
    stats: StatementStats

# seconds: from a fast-path point select (~100 us) to a slow scatter query
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class StatementStats:
    """Counts per (statement kind, route type), latency histograms per kind, errors per errno."""

    __slots__ = ("buckets", "counts", "errors", "sums")

    def __init__(self) -> None:
        self.counts: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.buckets: dict[str, list[int]] = {}
        self.sums: defaultdict[str, float] = defaultdict(float)
        self.errors: defaultdict[int, int] = defaultdict(int)

    def observe(self, kind: str, route: str, seconds: float, errno: int) -> None:
        self.counts[(kind, route)] += 1
        hist = self.buckets.get(kind)
        if hist is None:
            hist = self.buckets[kind] = [0] * (len(BUCKETS) + 1)
        hist[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sums[kind] += seconds
        if errno:
            self.errors[errno] += 1


def collector(server: ProxyServer) -> Any:
    """A prometheus_client collector over the server's live state."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    class _Collector:
        def collect(self) -> Iterator[Any]:
            stats = server.stats
            statements = CounterMetricFamily("shardproxy_statements", "Statements answered, by kind and route type",
                                             labels=["kind", "route"])
            for (kind, route), n in sorted(stats.counts.items()):
                statements.add_metric([kind, route], n)
            yield statements
            latency = HistogramMetricFamily("shardproxy_statement_duration_seconds",
                                            "Time from a command's arrival to the end of its answer", labels=["kind"])
            for kind, hist in sorted(stats.buckets.items()):
                cumulative, running = [], 0
                for bound, n in zip((*map(str, BUCKETS), "+Inf"), hist, strict=True):
                    running += n
                    cumulative.append((bound, running))
                latency.add_metric([kind], cumulative, sum_value=stats.sums[kind])
            yield latency
            errors = CounterMetricFamily("shardproxy_errors", "ERR packets sent to clients, by errno", labels=["errno"])
            for errno, n in sorted(stats.errors.items()):
                errors.add_metric([str(errno)], n)
            yield errors
            yield GaugeMetricFamily("shardproxy_client_sessions", "Client connections", value=len(server.sessions))
            conns = GaugeMetricFamily("shardproxy_backend_connections", "Backend connections by pool state",
                                      labels=["database", "data_source", "state"])
            waiters = GaugeMetricFamily("shardproxy_backend_pool_waiters", "Sessions waiting for a connection",
                                        labels=["database", "data_source"])
            limit = GaugeMetricFamily("shardproxy_backend_pool_max", "maxPoolSize", labels=["database", "data_source"])
            for (db, name), source in sorted(server.sources.items()):
                pool = getattr(source, "pool", None)
                if pool is None:
                    continue
                st = pool.stats()
                for state, n in (("in_use", st.in_use), ("idle", st.idle), ("opening", st.opening),
                                 ("resetting", st.resetting)):
                    conns.add_metric([db, name, state], n)
                waiters.add_metric([db, name], st.waiting)
                limit.add_metric([db, name], st.max_size)
            yield conns
            yield waiters
            yield limit
            up = GaugeMetricFamily("shardproxy_replica_usable", "1 when a replica is in the read rotation",
                                   labels=["database", "group", "replica"])
            lag = GaugeMetricFamily("shardproxy_replica_lag_seconds", "Seconds_Behind_Master at the last probe",
                                    labels=["database", "group", "replica"])
            hits = CounterMetricFamily("shardproxy_plan_cache_hits", "Routing plans found in the plan cache",
                                       labels=["database"])
            misses = CounterMetricFamily("shardproxy_plan_cache_misses", "Routing plans made anew",
                                         labels=["database"])
            for db_name, db in sorted(server.databases_by_name.items()):
                for group in db.sources.values():
                    for r in getattr(group, "replicas", ()):
                        up.add_metric([db_name, group.name, r.name], 1.0 if r.usable(group.max_lag) else 0.0)
                        if r.lag is not None:
                            lag.add_metric([db_name, group.name, r.name], float(r.lag))
                cache = getattr(db.kernel, "_cache", None) if db.kernel is not None else None
                if cache is not None:
                    hits.add_metric([db_name], cache.hits)
                    misses.add_metric([db_name], cache.misses)
            yield up
            yield lag
            yield hits
            yield misses
            yield GaugeMetricFamily("shardproxy_uptime_seconds", "Seconds since start",
                                    value=time.monotonic() - server.started_monotonic)
            digests = getattr(server, "digests", None)
            if digests is not None:  # issue 37: the top query digests (proxy.observe.export)
                from proxy.observe.export import digest_families

                yield from digest_families(digests)

    return _Collector()


# an HTTP route: an awaitable giving (status, content type, body)
Route = Callable[[], Awaitable[tuple[int, str, bytes]]]
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error",
            503: "Service Unavailable"}


class MetricsEndpoint:
    """The metrics port: `GET /metrics` in the Prometheus text format, the routes the server adds
    (proxy.ops.routes: /healthz, /readyz, /status ...), 404 for any other path; on the proxy's loop."""

    def __init__(self, server: ProxyServer, routes: Mapping[str, Route] | None = None) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector(server))
        self.routes: dict[str, Route] = {"/metrics": self._metrics, **(routes or {})}
        self._server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, host, port)
        addr = self._server.sockets[0].getsockname()
        log.info("metrics_listening", address=f"{addr[0]}:{addr[1]}")
        return str(addr[0]), int(addr[1])

    async def _metrics(self) -> tuple[int, str, bytes]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
            method, _, rest = request.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0].decode("latin-1")
            route = self.routes.get(path)
            if method not in (b"GET", b"HEAD"):
                status, ctype, body = 405, "text/plain; charset=utf-8", b"only GET and HEAD\n"
            elif route is None:
                status, ctype = 404, "text/plain; charset=utf-8"
                body = f"no {path} here: {', '.join(sorted(self.routes))}\n".encode()
            else:
                try:
                    status, ctype, body = await route()
                except Exception:  # a bug in a page must not cost the endpoint
                    log.exception("http_route_failed", path=path)
                    status, ctype, body = 500, "text/plain; charset=utf-8", b"internal error (see the log)\n"
            writer.write(f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                         f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
                         .encode() + (body if method == b"GET" else b""))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=2)


__all__ = ["BUCKETS", "MetricsEndpoint", "StatementStats", "collector"]
