"""`shardproxy demo`: a working proxy in one command, on throwaway local MariaDB servers.

Two MariaDB servers act as the data sources `ds_0` and `ds_1`. The proxy serves two logical
databases: `sharding_db`, the ShardingSphere example (t_order / t_order_item sharded 2 databases x 2
tables, t_address broadcast), and `demo_db`, passed through untouched to one database. Everything is
removed again on Ctrl-C.
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

from proxy.config import load_config
from proxy.sandbox import MariaDBServer, SandboxError, start_servers

log = structlog.get_logger("shardproxy.demo")

GLOBAL_YAML = """\
# Users the proxy accepts (ShardingSphere-Proxy 5.x format).
authority:
  users:
    - user: root@%
      password: root
      admin: true
    - user: demo@%
      password: demo
props:
  sql-show: false
"""

SHARDING_RULES = """\
rules:
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order_${0..1}
      tableStrategy:
        standard:
          shardingColumn: order_id
          shardingAlgorithmName: t_order_inline
      keyGenerateStrategy:
        column: order_id
        keyGeneratorName: snowflake
    t_order_item:
      actualDataNodes: ds_${0..1}.t_order_item_${0..1}
      tableStrategy:
        standard:
          shardingColumn: order_id
          shardingAlgorithmName: t_order_item_inline
      keyGenerateStrategy:
        column: order_item_id
        keyGeneratorName: snowflake
  bindingTables:
    - t_order,t_order_item
  defaultDatabaseStrategy:
    standard:
      shardingColumn: user_id
      shardingAlgorithmName: database_inline
  defaultTableStrategy:
    none:
  shardingAlgorithms:
    database_inline:
      type: INLINE
      props:
        algorithm-expression: ds_${user_id % 2}
    t_order_inline:
      type: INLINE
      props:
        algorithm-expression: t_order_${order_id % 2}
    t_order_item_inline:
      type: INLINE
      props:
        algorithm-expression: t_order_item_${order_id % 2}
  keyGenerators:
    snowflake:
      type: SNOWFLAKE
- !BROADCAST
  tables:
    - t_address
"""

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


def write_demo_conf(conf: Path, servers: list[MariaDBServer]) -> None:
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "global.yaml").write_text(GLOBAL_YAML)
    sources = "".join(
        f"  ds_{i}:\n    url: jdbc:mysql://{s.host}:{s.port}/demo_ds_{i}?useSSL=false\n"
        f"    username: {s.user}\n    password: {s.password}\n    maxPoolSize: 50\n    minPoolSize: 1\n"
        for i, s in enumerate(servers)
    )
    (conf / "database-sharding.yaml").write_text(f"databaseName: sharding_db\ndataSources:\n{sources}{SHARDING_RULES}")
    s0 = servers[0]
    (conf / "database-demo.yaml").write_text(
        f"databaseName: demo_db\ndataSources:\n  ds_0:\n    url: jdbc:mysql://{s0.host}:{s0.port}/demo_db\n"
        f"    username: {s0.user}\n    password: {s0.password}\n"
    )


def _load_schema(host: str, port: int) -> None:
    for database, statements in (("sharding_db", SHARDING_SCHEMA), ("demo_db", PASSTHROUGH_SCHEMA)):
        conn = pymysql.connect(host=host, port=port, user="root", password="root", database=database)
        try:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
            conn.commit()
        finally:
            conn.close()


def run_demo(host: str = "127.0.0.1", port: int = 3307) -> int:
    from proxy.cli import serve

    print("shardproxy demo: starting two throwaway MariaDB servers ...", file=sys.stderr, flush=True)
    try:
        servers = start_servers(2)
    except SandboxError as exc:
        print(f"shardproxy demo: cannot start MariaDB: {exc}\n"
              "Install it with: sudo apt-get install -y mariadb-server", file=sys.stderr)
        return 3
    conf = Path(tempfile.mkdtemp(prefix="shardproxy-demo-conf-"))
    try:
        for i, server in enumerate(servers):
            server.execute(f"CREATE DATABASE demo_ds_{i}")
        servers[0].execute("CREATE DATABASE demo_db")
        write_demo_conf(conf, servers)
        config = load_config(conf)

        async def main() -> None:
            ready = asyncio.Event()
            task = asyncio.create_task(serve(config, host, port, ready=ready))
            await ready.wait()
            await asyncio.to_thread(_load_schema, host, port)
            print(
                f"\nshardproxy demo is ready. Connect with:\n"
                f"  mysql -h{host} -P{port} -uroot -proot sharding_db\n"
                f"Logical databases: sharding_db (t_order, t_order_item sharded over ds_0/ds_1; t_address "
                f"broadcast), demo_db (pass-through).\nConfiguration: {conf}\nPress Ctrl-C to stop.\n",
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
