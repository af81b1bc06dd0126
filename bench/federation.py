"""What federation costs: statements answered on one MariaDB over copies of their tables (issue 17).

Same setup as `scatter_memory.py` (two sandbox MariaDB servers, `sharding_db` with `t_order` over 2 data
sources x 2 tables, N rows bulk-loaded into the actual tables, the proxy as a SUBPROCESS so its RSS is
measured alone), then runs federated statements through the proxy and reports time, rows copied per
second and the proxy's peak RSS (sampled every 50 ms) next to a statement the merge answers natively:

* full copy: a scalar subquery over the whole table (one shared copy of N rows: half of them read on the
  host server itself with ``INSERT ... SELECT``, half streamed from the other server in batches);
* pushed down: the same with ``user_id = 7`` on both levels (one data source read, N/100 rows);
* a window function over two users, its rows relayed to the client;
* native: ``SELECT COUNT(*) ... WHERE amount > 500`` (the merge, no copy) as the reference.

    python bench/federation.py [--rows 200000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from scatter_memory import (  # noqa: E402
    DDL,
    PHYSICAL,
    RULES,
    RssSampler,
    cpu_seconds,
    free_port,
    load,
    machine,
    read_all,
    status_kb,
)

from proxy.sandbox import MariaDBServer, start_servers  # noqa: E402

sys.path.insert(0, str(REPO / "bench" / "sysbench"))
from harness import proxy_process  # noqa: E402

QUERIES = (
    ("federated full copy", "SELECT COUNT(*) FROM t_order o WHERE o.amount > (SELECT AVG(amount) FROM t_order)"),
    ("federated pushed down", "SELECT COUNT(*) FROM t_order o WHERE o.user_id = 7 AND o.amount > "
                              "(SELECT AVG(p.amount) FROM t_order p WHERE p.user_id = 7)"),
    ("federated window", "SELECT order_id, ROW_NUMBER() OVER (ORDER BY amount, order_id) FROM t_order "
                         "WHERE user_id IN (1, 2)"),
    ("native merge (reference)", "SELECT COUNT(*) FROM t_order WHERE amount > 500"),
)


def write_conf(conf: Path, servers: list[MariaDBServer], max_rows: int) -> None:
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "global.yaml").write_text(
        "authority:\n  users:\n    - user: root@%\n      password: root\n      admin: true\nprops:\n"
        f"  sql-show: false\n  proxy-federation-max-rows: {max_rows}\n"
    )
    sources = "".join(
        f"  ds_{i}:\n    url: {s.jdbc_url(PHYSICAL[i])}\n    username: {s.user}\n    password: {s.password}\n"
        f"    maxPoolSize: 10\n    minPoolSize: 1\n"
        for i, s in enumerate(servers)
    )
    (conf / "database-sharding.yaml").write_text(f"databaseName: sharding_db\ndataSources:\n{sources}{RULES}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows in t_order (default 200000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per statement (the best is reported)")
    args = parser.parse_args(argv)
    n: int = args.rows
    print(f"machine: {machine()}", flush=True)
    servers = start_servers(2)
    try:
        print(f"MariaDB {servers[0].execute('SELECT VERSION()')[0][0]} x2 started", flush=True)
        for server, physical in zip(servers, PHYSICAL, strict=True):
            server.execute(f"CREATE DATABASE {physical}")
        with tempfile.TemporaryDirectory(prefix="shardproxy-bench-") as tmp:
            conf = Path(tmp) / "conf"
            write_conf(conf, servers, max(n, 1000) * 2)
            port = free_port()
            with proxy_process(conf, port, Path(tmp) / "proxy.log") as proc:
                def connect() -> pymysql.connections.Connection:  # type: ignore[type-arg]
                    return pymysql.connect(host="127.0.0.1", port=port, user="root", password="root",
                                           database="sharding_db", autocommit=True)

                with connect() as conn, conn.cursor() as cur:
                    cur.execute(DDL)
                print(f"loaded {n} rows in {load(servers, n):.1f} s", flush=True)
                print("| statement                  | rows out |  best s | copied rows/s | base MB | peak MB | "
                      "proxy CPU s |")
                print("|----------------------------|----------|---------|---------------|---------|---------|"
                      "-------------|")
                copied = {"federated full copy": n, "federated pushed down": n // 100,
                          "federated window": 2 * n // 100}
                for label, sql in QUERIES:
                    with connect() as conn:
                        read_all(conn, "SELECT 1")
                        time.sleep(0.3)
                        base = status_kb(proc.pid, "VmRSS") / 1024
                        best, rows_out = float("inf"), 0
                        cpu0 = cpu_seconds(proc.pid)
                        with RssSampler(proc.pid) as sampler:
                            for _ in range(args.repeat):
                                t0 = time.perf_counter()
                                rows_out = read_all(conn, sql)
                                best = min(best, time.perf_counter() - t0)
                        cpu = (cpu_seconds(proc.pid) - cpu0) / args.repeat
                    rate = f"{copied[label] / best:13,.0f}" if label in copied else "            -"
                    print(f"| {label:<26} | {rows_out:>8} | {best:7.3f} | {rate} | {base:7.1f} | "
                          f"{sampler.peak_kb / 1024:7.1f} | {cpu:11.2f} |", flush=True)
                for label, sql in QUERIES:
                    print(f"  {label}: {sql}")
    finally:
        for server in servers:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
