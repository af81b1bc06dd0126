"""`shardproxy serve --conf DIR` and `shardproxy demo`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from proxy.backend import BackendError
from proxy.config import ProxyConfig, load_config
from proxy.logs import configure
from proxy.xalog import LogUnavailable
from routing.errors import ConfigError

log = structlog.get_logger("shardproxy")


def _install_loop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: ProxyConfig, host: str, port: int, *, ready: asyncio.Event | None = None,
                stop: asyncio.Event | None = None, worker: int = 0, workers: int = 1,
                started: Callable[[Any], None] | None = None) -> None:
    """Run the proxy until SIGTERM/SIGINT (or `stop` is set); closes sessions and drains pools.
    `started` is given the ProxyServer once it listens (tests inspect its pools)."""
    from proxy.server import ProxyServer

    server = ProxyServer(config, worker=worker, workers=workers)
    if started is not None:
        started(server)
    await server.start_backends()
    addrs = await server.listen(host, port, reuse_port=workers > 1)
    log.info("accepting_connections", address=[f"{h}:{p}" for h, p in addrs], version=server.server_version,
             databases=list(server.databases_by_name))
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        log.info("shutting_down", sessions=len(server.sessions))
        await server.close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
                loop.remove_signal_handler(sig)


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.conf)
    except ConfigError as exc:
        print(f"shardproxy: configuration error: {exc}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        log.warning("config_warning", detail=warning)
    port = args.port if args.port is not None else config.port
    workers = max(1, int(args.workers))
    index = int(args.worker_index)
    children = [_spawn_worker(args, k, workers) for k in range(1, workers)] if index == 0 else []
    _install_loop()
    try:
        asyncio.run(serve(config, args.host, port, worker=index, workers=workers))
    except (BackendError, LogUnavailable) as exc:
        print(f"shardproxy: cannot start: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:
        print(f"shardproxy: cannot listen on {args.host}:{port}: {exc.strerror}", file=sys.stderr)
        return 4
    finally:
        for child in children:
            child.terminate()
        for child in children:
            child.wait(timeout=15)
    return 0


def _spawn_worker(args: argparse.Namespace, worker: int, workers: int) -> subprocess.Popen[bytes]:
    """Another process serving the same port (SO_REUSEPORT): the kernel spreads new connections."""
    cmd = [sys.executable, "-m", "proxy", "--log-level", args.log_level, "serve", "--conf", str(args.conf),
           "--host", args.host, "--worker-index", str(worker), "--workers", str(workers)]
    if args.port is not None:
        cmd += ["--port", str(args.port)]
    return subprocess.Popen(cmd)


def _cmd_demo(args: argparse.Namespace) -> int:
    from proxy.demo import run_demo

    _install_loop()
    return run_demo(host=args.host, port=args.port, conf_dir=args.conf)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shardproxy", description="MySQL wire-protocol sharding proxy")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    parser.add_argument("--log-json", action="store_true", help="log one JSON object per line")
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="serve the logical databases configured in --conf")
    p_serve.add_argument("--conf", type=Path, default=Path("conf"), help="configuration directory (default conf)")
    p_serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p_serve.add_argument("--port", type=int, default=None,
                         help="port (default: props.proxy-default-port, else 3307)")
    p_serve.add_argument("--workers", type=int, default=1,
                         help="processes serving the port together (SO_REUSEPORT; default 1)")
    p_serve.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    p_serve.set_defaults(func=_cmd_serve)
    p_demo = sub.add_parser("demo", help="start throwaway local MariaDB shards and serve a demo config")
    p_demo.add_argument("--host", default="127.0.0.1")
    p_demo.add_argument("--port", type=int, default=3307)
    p_demo.add_argument("--conf", type=Path, default=None,
                        help="configuration to demo (default: the repository's conf/)")
    p_demo.set_defaults(func=_cmd_demo)
    args = parser.parse_args(argv)
    configure(args.log_level, json=args.log_json)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
