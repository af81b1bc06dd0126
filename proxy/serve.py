"""Running one proxy server until it is told to stop.

Why its own module: `shardproxy serve` (proxy.cli), `shardproxy demo` (proxy.demo), and the test harness
all need this; the CLI also starts the demo, so they live below both.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from typing import Any

import structlog

from proxy.cluster import hooks as cluster
from proxy.config.model import ProxyConfig
from proxy.server import ProxyServer

log = structlog.get_logger("shardproxy")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # SIGHUP: the terminal went away


async def serve(config: ProxyConfig, host: str, port: int, *, ready: asyncio.Event | None = None,
                stop: asyncio.Event | None = None, worker: int = 0, workers: int = 1,
                started: Callable[[Any], None] | None = None) -> None:
    """Run the proxy until SIGTERM/SIGINT (or `stop` is set); closes sessions and drains pools.
    `started` is given the ProxyServer once it listens (tests inspect its pools)."""
    config, node = await cluster.join(config)  # cluster hook: the registry's configuration in Cluster mode
    server = ProxyServer(config, worker=worker, workers=workers)
    cluster.bind(node, server)  # cluster hook: cluster-unique connection ids
    if started is not None:
        started(server)
    try:
        await server.start_backends()
        addrs = await server.listen(host, port, reuse_port=workers > 1)
        await cluster.start(node, addrs, server.server_version)  # cluster hook: SHOW COMPUTE NODES, the watch
    except BaseException:
        await cluster.leave(node)
        raise
    log.info("accepting_connections", address=[f"{h}:{p}" for h, p in addrs], version=server.server_version,
             databases=list(server.databases_by_name))
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        log.info("shutting_down", sessions=len(server.sessions))
        await cluster.leave(node)  # cluster hook
        await server.close()
        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
                loop.remove_signal_handler(sig)


__all__ = ["STOP_SIGNALS", "serve"]
