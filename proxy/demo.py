"""`shardproxy demo`: a working proxy in one command, on throwaway local MariaDB servers.

The shipped `conf/` is served as it is, except that its data sources are moved onto two local MariaDB
servers started for the demo: `sharding_db`, the ShardingSphere example (t_order / t_order_item sharded
2 databases x 2 tables, t_address broadcast), and `demo_db`, passed through untouched to one database.
Everything is removed again on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import pymysql
import structlog

from proxy.config import load_config, load_yaml_file, parse_data_source_url
from proxy.sandbox import MariaDBServer, SandboxError, start_servers

log = structlog.get_logger("shardproxy.demo")

SHARDING_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS t_order (order_id BIGINT NOT NULL, user_id INT NOT NULL, "
    "status VARCHAR(45) NULL, PRIMARY KEY (order_id))",
    "CREATE TABLE IF NOT EXISTS t_order_item (order_item_id BIGINT NOT NULL, order_id BIGINT NOT NULL, "
    "user_id INT NOT NULL, status VARCHAR(45) NULL, PRIMARY KEY (order_item_id))",
    "CREATE TABLE IF NOT EXISTS t_address (address_id BIGINT NOT NULL, address_name VARCHAR(100) NOT NULL, "
    "PRIMARY KEY (address_id))",
    "INSERT INTO t_address (address_id, address_name) VALUES (1, 'Beijing'), (2, 'Shanghai')",
    "INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'INIT'), (2, 1, 'PAID'), (3, 2, 'INIT'), "
    "(4, 2, 'SHIPPED')",
    "INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES (1, 1, 1, 'INIT'), "
    "(2, 2, 1, 'PAID'), (3, 3, 2, 'INIT'), (4, 4, 2, 'SHIPPED')",
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


def write_demo_conf(src: Path, dst: Path, servers: list[MariaDBServer]) -> None:
    """Copy `src` to `dst`, pointing the k-th data source of every logical database at servers[k % n] and
    creating its database and user there, so the shipped configuration runs unchanged otherwise."""
    dst.mkdir(parents=True, exist_ok=True)
    if (src / "global.yaml").exists():
        shutil.copy(src / "global.yaml", dst / "global.yaml")
    for path in sorted(src.glob("database-*.yaml")):
        text = path.read_text(encoding="utf-8")
        doc = load_yaml_file(path)
        for k, (name, ds) in enumerate((doc.get("dataSources") or {}).items()):
            server = servers[k % len(servers)]
            url = str(ds.get("url") or ds.get("jdbcUrl"))
            _host, _port, database, _user, _pw = parse_data_source_url(url, str(path), f"dataSources.{name}.url")
            authority = url.split("//", 1)[1].split("/", 1)[0]
            target = authority.rsplit("@", 1)[0] + "@" if "@" in authority else ""
            text = text.replace(url, url.replace(authority, f"{target}{server.host}:{server.port}", 1), 1)
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
            else:
                quoted = pymysql.converters.escape_string(password)
                server.execute(f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{quoted}'")
                server.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%'")
        (dst / path.name).write_text(text, encoding="utf-8")


def _first_user(conf: Path) -> tuple[str, str]:
    config = load_config(conf)
    user = config.users[0]
    return user.user, user.password


def _load_schema(host: str, port: int, user: str, password: str, databases: list[str]) -> None:
    for database, statements in (("sharding_db", SHARDING_SCHEMA), ("demo_db", PASSTHROUGH_SCHEMA)):
        if database not in databases:
            continue
        conn = pymysql.connect(host=host, port=port, user=user, password=password, database=database)
        try:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
            conn.commit()
        finally:
            conn.close()


def run_demo(host: str = "127.0.0.1", port: int = 3307, conf_dir: Path | None = None) -> int:
    from proxy.cli import serve

    src = conf_dir or bundled_conf_dir()
    if src is None:
        print("shardproxy demo: no configuration found: run it from the repository or pass --conf conf",
              file=sys.stderr)
        return 2

    print("shardproxy demo: starting two throwaway MariaDB servers ...", file=sys.stderr, flush=True)
    try:
        servers = start_servers(2)
    except SandboxError as exc:
        print(f"shardproxy demo: cannot start MariaDB: {exc}\n"
              "Install it with: sudo apt-get install -y mariadb-server", file=sys.stderr)
        return 3
    conf = Path(tempfile.mkdtemp(prefix="shardproxy-demo-conf-"))
    try:
        write_demo_conf(src, conf, servers)
        config = load_config(conf)
        user, password = _first_user(conf)

        async def main() -> None:
            ready = asyncio.Event()
            task = asyncio.create_task(serve(config, host, port, ready=ready))
            await ready.wait()
            await asyncio.to_thread(_load_schema, host, port, user, password, list(config.databases))
            print(
                f"\nshardproxy demo is ready. Connect with:\n"
                f"  mysql -h{host} -P{port} -u{user} -p{password} sharding_db\n"
                f"Logical databases: {', '.join(config.databases)} (from {src}; data sources moved to local "
                f"throwaway MariaDB servers).\nConfiguration in use: {conf}\nPress Ctrl-C to stop.\n",
                file=sys.stderr,
                flush=True,
            )
            await task

        asyncio.run(main())
        return 0
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"shardproxy demo: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 4
    finally:
        def cleanup() -> None:
            for server in servers:
                server.cleanup()

        t = threading.Thread(target=cleanup)
        t.start()
        t.join(60)
        shutil.rmtree(conf, ignore_errors=True)
