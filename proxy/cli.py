"""`shardproxy serve --conf DIR` and `shardproxy demo`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import structlog

from proxy.backends.backend import BackendError
from proxy.backends.xalog import LogUnavailable
from proxy.cluster.etcd import RegistryUnavailable
from proxy.config import load_config
from proxy.logs import configure
from proxy.serve import serve
from proxy.version import version
from routing.errors import ConfigError

log = structlog.get_logger("shardproxy")


def _install_loop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())



def _config_error(exc: ConfigError, *, json_logs: bool) -> None:
    """A configuration error, for a person (one line) or, under --log-json, also for a log collector."""
    print(f"shardproxy: configuration error: {exc}", file=sys.stderr)
    if json_logs:
        log.error("configuration_error", error=str(exc))


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.conf)
    except ConfigError as exc:
        _config_error(exc, json_logs=args.log_json)
        return 2
    for warning in config.warnings:
        log.warning("config_warning", detail=warning)
    port = args.port if args.port is not None else config.port
    workers = max(1, int(args.workers))
    index = int(args.worker_index)
    children = [_spawn_worker(args, k, workers) for k in range(1, workers)] if index == 0 else []

    def pass_on(sig: int) -> None:
        """The first process's signals go to the other workers too: they drain and reload with it."""
        for child in children:
            with contextlib.suppress(OSError):
                child.send_signal(sig)

    _install_loop()
    try:
        asyncio.run(serve(config, args.host, port, worker=index, workers=workers, conf_dir=args.conf, drain=True,
                          on_signal=pass_on))
    except ConfigError as exc:  # found once the server builds what the configuration names (TLS files ...)
        _config_error(exc, json_logs=args.log_json)
        return 2
    except (BackendError, LogUnavailable, RegistryUnavailable) as exc:
        print(f"shardproxy: cannot start: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:
        print(f"shardproxy: cannot listen on {args.host}:{port}: {exc.strerror}", file=sys.stderr)
        return 4
    finally:
        for child in children:
            child.terminate()
        grace = config.prop_float("proxy-shutdown-grace-seconds")
        for child in children:
            try:
                child.wait(timeout=grace + 15)  # its drain, then its stop
            except subprocess.TimeoutExpired:
                child.kill()
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


def _cmd_demo_schema(args: argparse.Namespace) -> int:
    """The tables `shardproxy demo` creates, created through an already running proxy: what the compose stack
    runs once the proxy is up."""
    import time

    import pymysql

    from proxy.demo import load_schema

    deadline = time.monotonic() + args.wait
    while True:
        try:
            conn = pymysql.connect(host=args.host, port=args.port, user=args.user, password=args.password)
            with conn.cursor() as cur:
                cur.execute("SHOW DATABASES")
                databases = [str(r[0]) for r in cur.fetchall()]
            conn.close()
            break
        except pymysql.err.OperationalError as exc:
            if time.monotonic() > deadline:
                print(f"shardproxy demo-schema: no proxy at {args.host}:{args.port}: {exc}", file=sys.stderr)
                return 3
            time.sleep(1)
    load_schema(args.host, args.port, args.user, args.password, databases)
    print(f"shardproxy demo-schema: demo tables created in {', '.join(databases)}", file=sys.stderr)
    return 0


def _accept_global_options_after_commands(parser: argparse.ArgumentParser) -> None:
    """`shardproxy serve --log-json` as well as `shardproxy --log-json serve`: every command (and sub-command)
    takes the global options too; given there, they win (SUPPRESS: absent, they leave the global value)."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for command in dict.fromkeys(action.choices.values()):
            command.add_argument("--log-level", default=argparse.SUPPRESS, help="as before the command")
            command.add_argument("--log-json", action="store_true", default=argparse.SUPPRESS,
                                 help="as before the command")
            _accept_global_options_after_commands(command)


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    parser = argparse.ArgumentParser(
        prog="shardproxy", description="MySQL wire-protocol sharding proxy",
        epilog="Environment: SHARDPROXY_CONF, SHARDPROXY_HOST, SHARDPROXY_PORT, SHARDPROXY_LOG_LEVEL and "
               "SHARDPROXY_LOG_JSON (1/true) give the defaults of --conf, --host, --port, --log-level, --log-json.")
    parser.add_argument("--log-level", default=env.get("SHARDPROXY_LOG_LEVEL", "INFO"),
                        help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    parser.add_argument("--log-json", action="store_true",
                        default=env.get("SHARDPROXY_LOG_JSON", "").strip().lower() in ("1", "true", "yes", "on"),
                        help="log one JSON object per line")
    parser.add_argument("--version", action="version", version=f"shardproxy {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="serve the logical databases configured in --conf")
    p_serve.add_argument("--conf", type=Path, default=Path(env.get("SHARDPROXY_CONF", "conf")),
                         help="configuration directory (default conf)")
    p_serve.add_argument("--host", default=env.get("SHARDPROXY_HOST", "127.0.0.1"),
                         help="address to listen on (default 127.0.0.1)")
    env_port = env.get("SHARDPROXY_PORT")
    p_serve.add_argument("--port", type=int, default=int(env_port) if env_port else None,
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
    p_schema = sub.add_parser("demo-schema", help="create the demo's tables through a running proxy (docker compose)")
    p_schema.add_argument("--host", default="127.0.0.1")
    p_schema.add_argument("--port", type=int, default=3307)
    p_schema.add_argument("--user", default="root")
    p_schema.add_argument("--password", default="root")
    p_schema.add_argument("--wait", type=float, default=60, help="seconds to wait for the proxy (default 60)")
    p_schema.set_defaults(func=_cmd_demo_schema)
    from proxy.migration.cli import add_parser as add_migrate

    add_migrate(sub)  # shardproxy migrate start|status|check|commit|rollback (proxy.migration.cli)
    _accept_global_options_after_commands(parser)
    args = parser.parse_args(argv)
    configure(args.log_level, json=args.log_json)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
