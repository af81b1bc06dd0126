"""`GET /healthz` and `GET /readyz` on the metrics port: liveness and readiness for orchestrators.

Liveness is the process answering at all. Readiness is what a load balancer needs before sending clients:
the configuration is loaded (the endpoint only listens once the data sources opened), no drain is under way,
and every logical database reaches each of its data sources now. Reaching is checked with `SELECT 1` on each
data source's admin connection, outside the pools, so a probe never takes a connection a client waits for;
the answer is kept for a second, so that probes from several orchestrators cost one round.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.ops.view import OpsServer as ProxyServer

PROBE_TIMEOUT = 2.0  # seconds a data source may take to answer before it counts as unreachable
CACHE_SECONDS = 1.0


@dataclass
class Readiness:
    ready: bool
    draining: bool
    # logical database -> data source -> "ok" or why not
    databases: dict[str, dict[str, str]] = field(default_factory=dict)
    checked_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "draining": self.draining, "databases": self.databases}


class ReadinessProbe:
    """One per server; concurrent requests share the check under way."""

    def __init__(self, server: ProxyServer) -> None:
        self.server = server
        self._last: Readiness | None = None
        self._running: asyncio.Task[Readiness] | None = None

    async def check(self) -> Readiness:
        if self.server.draining:
            return Readiness(False, True)
        last = self._last
        if last is not None and time.monotonic() - last.checked_at < CACHE_SECONDS:
            return last
        if self._running is None or self._running.done():
            self._running = asyncio.get_running_loop().create_task(self._check())
        # shielded: a client hanging up must not cancel a probe that other requests wait on
        result = await asyncio.shield(self._running)
        self._last = result
        return result

    async def _check(self) -> Readiness:
        server = self.server
        probes: dict[tuple[str, str], asyncio.Task[str]] = {}
        for db_name, db in server.databases_by_name.items():
            for ds_name, source in db.sources.items():
                probes[(db_name, ds_name)] = asyncio.ensure_future(_reach(source))
        if probes:
            # not cancelled past the timeout: a statement cut short on the admin connection would leave its
            # answer for the next user (KILL QUERY) to read; it finishes in the background
            await asyncio.wait(probes.values(), timeout=PROBE_TIMEOUT)
        databases: dict[str, dict[str, str]] = {name: {} for name in server.databases_by_name}
        ready = True
        for (db_name, ds_name), task in probes.items():
            state = task.result() if task.done() else f"no answer within {PROBE_TIMEOUT:g} s"
            databases.setdefault(db_name, {})[ds_name] = state
            ready = ready and state == "ok"
        return Readiness(ready and not server.draining, server.draining, databases, time.monotonic())


async def _reach(source: Any) -> str:
    from protocol.packets import ERRPacket

    try:
        answer = await source.admin_execute("SELECT 1")
    except Exception as exc:  # a probe must answer, whatever the data source does
        return f"error: {exc}"
    if answer is None:
        return "unreachable"
    if isinstance(answer, ERRPacket):
        return f"error {answer.errno}: {answer.message}"
    return "ok"


async def healthz(server: ProxyServer) -> tuple[int, str, bytes]:
    return 200, "text/plain; charset=utf-8", b"ok\n"


async def readyz(server: ProxyServer) -> tuple[int, str, bytes]:
    result = await server.readiness.check()
    body = json.dumps(result.to_json(), indent=1).encode() + b"\n"
    return (200 if result.ready else 503), "application/json", body


__all__ = ["Readiness", "ReadinessProbe", "healthz", "readyz"]
