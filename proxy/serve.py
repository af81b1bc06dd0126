"""Running one proxy server until it is told to stop.

Why its own module: `shardproxy serve` (proxy.cli), `shardproxy demo` (proxy.demo), and the test harness
all need this; the CLI also starts the demo, so they live below both.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from proxy.cluster import hooks as cluster
from proxy.config.model import ProxyConfig
from proxy.ops.drain import drain as run_drain
from proxy.ops.reload import Reloader
from proxy.server import ProxyServer

log = structlog.get_logger("shardproxy")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # SIGHUP: the terminal went away (the demo)
DRAIN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def serve(config: ProxyConfig, host: str, port: int, *, ready: asyncio.Event | None = None,
                stop: asyncio.Event | None = None, worker: int = 0, workers: int = 1,
                started: Callable[[Any], None] | None = None, conf_dir: Path | None = None, drain: bool = False,
                on_signal: Callable[[int], None] | None = None) -> None:
    """Run the proxy until a signal (or `stop` is set); closes sessions and drains pools.
    `started` is given the ProxyServer once it listens (tests inspect its pools).

    By default SIGTERM, SIGINT and SIGHUP stop it at once (the demo: SIGHUP is its terminal closing). With
    `drain`, SIGTERM and SIGINT drain first (proxy.ops.drain; a second one ends the grace period); with
    `conf_dir`, SIGHUP reloads the configuration from it (proxy.ops.reload). `on_signal` sees each signal
    first (`serve --workers`: the first process passes them on to the others)."""
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
    draining = asyncio.Event()  # the first drain signal
    cut = asyncio.Event()  # the second one, or `stop`: the grace period ends
    reloader = Reloader(server, conf_dir) if conf_dir is not None else None

    def on_stop_signal(sig: int) -> None:
        if on_signal is not None:
            on_signal(sig)
        if reloader is not None and sig == signal.SIGHUP:
            reloader.request()
        elif drain and sig in DRAIN_SIGNALS:
            (cut if draining.is_set() else draining).set()
        else:
            stop.set()

    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(sig, on_stop_signal, sig)
    if ready is not None:
        ready.set()
    try:
        stopped, drained = loop.create_task(stop.wait()), loop.create_task(draining.wait())
        await asyncio.wait((stopped, drained), return_when=asyncio.FIRST_COMPLETED)
        if draining.is_set() and not stop.is_set():
            stopped.add_done_callback(lambda _t: cut.set())
            await run_drain(server, server.config.prop_float("proxy-shutdown-grace-seconds"), cut)
        stopped.cancel()
        drained.cancel()
    finally:
        log.info("shutting_down", sessions=len(server.sessions))
        await cluster.leave(node)  # cluster hook
        if reloader is not None:
            await reloader.wait()
        await server.close()
        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
                loop.remove_signal_handler(sig)


__all__ = ["DRAIN_SIGNALS", "STOP_SIGNALS", "serve"]
