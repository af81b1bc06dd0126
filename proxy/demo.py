"""`shardproxy demo`: a working proxy in one command, on throwaway local MariaDB servers.

The shipped `conf/` is served as it is, except that its data sources are moved onto two local MariaDB
servers started for the demo, plus a third one replicating from the first (GTID replication):
`sharding_db`, the ShardingSphere example (t_order / t_order_item sharded 2 databases x 2 tables,
t_address broadcast), `demo_db`, passed through untouched to one database, and `readwrite_db`, a primary
and its replica behind read/write splitting. Everything is removed again on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pymysql
import structlog

from proxy.backends.readwrite import parse_groups
from proxy.config import load_config
from proxy.config.load import load_yaml_file
from proxy.config.sections import parse_data_source_url
from proxy.sandbox import MariaDBServer, SandboxError, setup_replication, start_servers

log = structlog.get_logger("shardproxy.demo")

SHARDING_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS t_order (order_id BIGINT NOT NULL, user_id INT NOT NULL, "
    "status VARCHAR(45) NULL, PRIMARY KEY (order_id))",
    "CREATE TABLE IF NOT EXISTS t_order_item (order_item_id BIGINT NOT NULL, order_id BIGINT NOT NULL, "
    "user_id INT NOT NULL, status VARCHAR(45) NULL, PRIMARY KEY (order_item_id))",
    "CREATE TABLE IF NOT EXISTS t_address (address_id BIGINT NOT NULL, address_name VARCHAR(100) NOT NULL, "
    "PRIMARY KEY (address_id))",
    "INSERT IGNORE INTO t_address (address_id, address_name) VALUES (1, 'Beijing'), (2, 'Shanghai')",
    "INSERT IGNORE INTO t_order (order_id, user_id, status) VALUES (1, 1, 'INIT'), (2, 1, 'PAID'), (3, 2, 'INIT'), "
    "(4, 2, 'SHIPPED')",
    "INSERT IGNORE INTO t_order_item (order_item_id, order_id, user_id, status) VALUES (1, 1, 1, 'INIT'), "
    "(2, 2, 1, 'PAID'), (3, 3, 2, 'INIT'), (4, 4, 2, 'SHIPPED')",
]

READWRITE_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS t_user (user_id INT PRIMARY KEY, user_name VARCHAR(50) NOT NULL)",
    "INSERT IGNORE INTO t_user VALUES (1, 'alice'), (2, 'bob')",
]

PASSTHROUGH_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS t_user (user_id INT PRIMARY KEY, user_name VARCHAR(50) NOT NULL)",
    "INSERT IGNORE INTO t_user VALUES (1, 'alice'), (2, 'bob')",
]


def bundled_conf_dir() -> Path | None:
    """The repository's `conf/` (the demo's configuration), when running from a checkout."""
    for candidate in (Path.cwd() / "conf", Path(__file__).resolve().parent.parent / "conf"):
        if (candidate / "database-sharding.yaml").exists():
            return candidate
    return None


def _placement(path: Path, doc: dict[str, Any], servers: list[MariaDBServer],
               replicas: Mapping[int, MariaDBServer]) -> dict[str, MariaDBServer]:
    """Data source -> server: the k-th data source on servers[k % n]; a read data source of a read/write
    splitting group on the replica of its write data source's server (that server itself without one)."""
    names = list(doc.get("dataSources") or {})
    placed = {name: servers[k % len(servers)] for k, name in enumerate(names)}
    rules = [r for r in doc.get("rules") or [] if isinstance(r, dict)]
    for group in parse_groups(rules, names, str(path), lambda _warning: None):
        primary = placed[group.write]
        replica = replicas.get(servers.index(primary))
        for read in group.reads:
            placed[read] = replica or primary
    return placed


def write_demo_conf(src: Path, dst: Path, servers: list[MariaDBServer],
                    replicas: Mapping[int, MariaDBServer] | None = None) -> None:
    """Copy `src` to `dst`, pointing the k-th data source of every logical database at servers[k % n] and
    creating its database and user there, so the shipped configuration runs unchanged otherwise.
    `replicas`: server index -> a server replicating from it, for the read data sources of read/write
    splitting groups (databases and users reach it by replication, so nothing is created on it)."""
    replicas = replicas or {}
    dst.mkdir(parents=True, exist_ok=True)
    if (src / "global.yaml").exists():
        shutil.copy(src / "global.yaml", dst / "global.yaml")
    for path in sorted(src.glob("database-*.yaml")):
        text = path.read_text(encoding="utf-8")
        doc = load_yaml_file(path)
        placed = _placement(path, doc, servers, replicas)
        for name, ds in (doc.get("dataSources") or {}).items():
            server = placed[name]
            url = str(ds.get("url") or ds.get("jdbcUrl"))
            _host, _port, database, _user, _pw = parse_data_source_url(url, str(path), f"dataSources.{name}.url")
            authority = url.split("//", 1)[1].split("/", 1)[0]
            target = authority.rsplit("@", 1)[0] + "@" if "@" in authority else ""
            text = text.replace(url, url.replace(authority, f"{target}{server.host}:{server.port}", 1), 1)
            if server not in servers:
                continue  # a replica: its primary's databases and users arrive by replication
            server.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
            user = str(ds.get("username") or "root")
            password = "" if ds.get("password") is None else str(ds.get("password"))
            if user == "root":
                if password != server.password:
                    conn = server.connect()
                    try:
                        with conn.cursor() as cur:
                            for h in ("127.0.0.1", "localhost", "%"):
                                cur.execute("ALTER USER IF EXISTS 'root'@%s IDENTIFIED BY %s", (h, password))
                    finally:
                        conn.close()
                    server.password = password
                    for k, replica in replicas.items():  # ALTER USER replicates
                        if servers[k] is server:
                            replica.password = password
            else:
                quoted = pymysql.converters.escape_string(password)
                server.execute(f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{quoted}'")
                server.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%'")
        (dst / path.name).write_text(text, encoding="utf-8")


def _first_user(conf: Path) -> tuple[str, str]:
    config = load_config(conf)
    user = config.users[0]
    return user.user, user.password


def load_schema(host: str, port: int, user: str, password: str, databases: list[str]) -> None:
    for database, statements in (("sharding_db", SHARDING_SCHEMA), ("demo_db", PASSTHROUGH_SCHEMA),
                                 ("readwrite_db", READWRITE_SCHEMA)):
        if database not in databases:
            continue
        # (bounded: a proxy stopped meanwhile by a signal must not leave this thread waiting for ever)
        conn = pymysql.connect(host=host, port=port, user=user, password=password, database=database,
                               connect_timeout=10, read_timeout=60, write_timeout=60)
        try:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
            conn.commit()
        finally:
            conn.close()


def _load_in_thread(loop: asyncio.AbstractEventLoop, done: asyncio.Future[None], *args: Any) -> None:
    """`load_schema(*args)`, its outcome handed to `done` on `loop` (if the loop still runs)."""
    outcome: BaseException | None = None
    try:
        load_schema(*args)
    except BaseException as exc:  # (handed to the waiting coroutine)
        outcome = exc

    def settle() -> None:
        if not done.done():
            if outcome is None:
                done.set_result(None)
            else:
                done.set_exception(outcome)

    with contextlib.suppress(RuntimeError):  # the loop is closed: the demo is over
        loop.call_soon_threadsafe(settle)


def _wait_for_replica(primary: MariaDBServer, replica: MariaDBServer, timeout: float = 30) -> None:
    """Until the replica applied what the primary has now (databases, users), so the proxy finds them."""
    position = primary.execute("SELECT @@gtid_binlog_pos")[0][0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # the root password may be changing under us by replication: try it as it was and as it is
            if replica.execute("SELECT MASTER_GTID_WAIT(%s, 1)", args=(position,))[0][0] == 0:
                return
        except pymysql.err.OperationalError:
            replica.password = primary.password if replica.password != primary.password else "root"
        time.sleep(0.1)
    raise SandboxError(f"the demo replica did not reach GTID {position} within {timeout:.0f}s")


def run_demo(host: str = "127.0.0.1", port: int = 3307, conf_dir: Path | None = None) -> int:

    src = conf_dir or bundled_conf_dir()
    if src is None:
        print("shardproxy demo: no configuration found: run it from the repository or pass --conf conf",
              file=sys.stderr)
        return 2

    busy = _port_busy(host, port)
    if busy is not None:
        print(f"shardproxy demo: cannot listen on {host}:{port}: {busy} (choose another with --port)",
              file=sys.stderr)
        return 4
    # SIGHUP (the terminal closed) and SIGTERM stop the demo like Ctrl-C: the servers and their temporary
    # directories are removed on the way out, whatever phase it is in
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGHUP, signal.SIGTERM)}
    print("shardproxy demo: starting three throwaway MariaDB servers (the third replicates from the first) ...",
          file=sys.stderr, flush=True)
    servers: list[MariaDBServer] = []
    try:
        return _run(src, host, port, servers)
    except KeyboardInterrupt:
        return 0
    finally:
        def cleanup() -> None:
            for server in servers:
                server.cleanup()

        # no signal may cut the clean-up short
        for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        t = threading.Thread(target=cleanup)
        t.start()
        t.join(60)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _port_busy(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on now (None when it can): checked before any server starts."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _run(src: Path, host: str, port: int, servers: list[MariaDBServer]) -> int:
    """Start the servers (into `servers`, which the caller cleans up), write the demo configuration, serve."""
    from proxy.serve import serve

    try:
        servers.extend(start_servers(3, binlog=True))
        setup_replication(servers[0], servers[2])
    except SandboxError as exc:
        print(f"shardproxy demo: cannot start MariaDB: {exc}\n"
              "Install it with: sudo apt-get install -y mariadb-server", file=sys.stderr)
        return 3
    conf = Path(tempfile.mkdtemp(prefix="shardproxy-demo-conf-"))
    try:
        write_demo_conf(src, conf, servers[:2], replicas={0: servers[2]})
        _wait_for_replica(servers[0], servers[2])
        config = load_config(conf)
        user, password = _first_user(conf)

        async def main() -> None:
            ready = asyncio.Event()
            stop = asyncio.Event()  # set by serve's signal handlers
            task = asyncio.create_task(serve(config, host, port, ready=ready, stop=stop))
            waiter = asyncio.create_task(ready.wait())
            await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                waiter.cancel()
                await task  # it failed before listening (the port was taken meanwhile ...): raise that
                return
            # a signal (SIGHUP, SIGTERM, Ctrl-C) while the schema loads stops the proxy (serve's own handlers, or
            # the demo's KeyboardInterrupt before serve has them): that ends the demo, whatever the loading then
            # meets. The loader is a daemon thread: nothing waits for it on the way out (asyncio.to_thread's
            # executor is joined at exit, and a connection the stopped proxy never answered kept it waiting)
            loop = asyncio.get_running_loop()
            loaded: asyncio.Future[None] = loop.create_future()
            threading.Thread(target=_load_in_thread, args=(loop, loaded, host, port, user, password,
                                                           list(config.databases)),
                             name="demo-schema", daemon=True).start()
            await asyncio.wait((task, loaded), return_when=asyncio.FIRST_COMPLETED)
            if task.done() or stop.is_set():  # (the loader may see the proxy's sessions close before it ends)
                if loaded.done() and not loaded.cancelled():
                    loaded.exception()  # (retrieved: not logged as never retrieved)
                await task
                return
            await loaded
            print(
                f"\nshardproxy demo is ready. Connect with:\n"
                f"  mysql -h{host} -P{port} -u{user} -p{password} sharding_db\n"
                f"Read/write splitting: in readwrite_db, SELECT @@server_id answers from the replica "
                f"({servers[2].server_id}), writes go to the primary ({servers[0].server_id}).\n"
                f"Logical databases: {', '.join(config.databases)} (from {src}; data sources moved to local "
                f"throwaway MariaDB servers).\nConfiguration in use: {conf}\nPress Ctrl-C to stop.\n",
                file=sys.stderr,
                flush=True,
            )
            await task

        asyncio.run(main())
        return 0
    except OSError as exc:
        print(f"shardproxy demo: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 4
    finally:
        shutil.rmtree(conf, ignore_errors=True)
