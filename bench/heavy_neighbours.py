"""The other sessions' latency while one session runs a heavy statement (issue 35): p50 / p99 / max of their answers.

Why: a heavy statement's CPU work on the proxy's event loop (routing a long text, merging or sorting many rows,
federation's copies, encoding a big result) delays every other session of the process. Two neighbour sessions
alternate a point select and a statement the proxy answers alone (`SHOW DIST VARIABLE WHERE NAME = sql_show`), 10 ms
apart, while a third runs the heavy statement `--repeat` times; the neighbours' answer times (send to last byte) are
collected over the heavy statements' run only, per kind: the proxy's own answer measures the event loop alone, the
point select adds the data source's (whose CPU the heavy statement's node queries share on a small machine).
`--tree DIR` (repeatable) runs the proxy of another checkout against the same servers (before / after tables, same run).

    python bench/heavy_neighbours.py --rows 500000 [--tree /tmp/before --tree .] [--only "IN list"]

Layout: bench/scatter_memory.py's t_order (2 data sources x 2 tables, `--rows` rows over the four nodes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH / "sysbench"))
sys.path.insert(0, str(BENCH))

import scatter_memory as sm  # noqa: E402
from harness import REPO, free_port  # noqa: E402
from statement_cpu import proxy_in  # noqa: E402

from proxy.sandbox import start_servers  # noqa: E402

IN_LIST = 200_000


def heavy_statements(rows: int) -> dict[str, str]:
    ids = ", ".join(str(i) for i in range(1, IN_LIST + 1))
    users = ", ".join(str(u) for u in range(20))
    in_list = f"SELECT COUNT(*), SUM(order_id) FROM t_order WHERE order_id IN ({ids})"
    all_sent = "SELECT order_id, amount FROM t_order ORDER BY amount, order_id"
    in_memory = "SELECT order_id, COUNT(*) AS c FROM t_order GROUP BY order_id ORDER BY c, order_id LIMIT 5"
    federated = (
        "SELECT COUNT(*) FROM t_order a JOIN t_order b ON b.order_id = a.order_id + 1 "
        f"WHERE a.user_id IN ({users}) AND b.user_id IN ({users})"
    )
    return {
        "IN list of 200,000 ids (1.5 MB text)": in_list,
        f"ORDER BY over {rows:,} rows, all sent (k-way merge, encoding)": all_sent,
        f"GROUP BY order_id ORDER BY COUNT(*) over {rows:,} rows (in-memory merge and sort)": in_memory,
        f"federated self-join, 2 x {rows // 5:,} rows copied (user_id IN 20 of 100 users)": federated,
    }


def _connect(port: int):  # type: ignore[no-untyped-def]
    import pymysql

    return pymysql.connect(
        host="127.0.0.1",
        port=port,
        user="root",
        password="root",
        database="sharding_db",
        autocommit=True,
        read_timeout=600,
    )


NEIGHBOUR_STATEMENTS = (
    "SHOW DIST VARIABLE WHERE NAME = sql_show",
    "SELECT status FROM t_order WHERE user_id = 3 AND order_id = 7",
)


def neighbours_during(port: int, sql: str, repeat: int) -> tuple[list[list[float]], float]:
    """The neighbours' answer times (ms) per NEIGHBOUR_STATEMENTS while `sql` runs `repeat` times; the heavy
    statements' own time (s)."""
    stop = threading.Event()
    window: list[float] = []
    latencies: list[tuple[int, float, float]] = []  # (statement, sent at, ms)

    def neighbour(k: int) -> None:
        conn = _connect(port)
        try:
            with conn.cursor() as cur:
                n = k
                while not stop.is_set():
                    sent = time.perf_counter()
                    cur.execute(NEIGHBOUR_STATEMENTS[n % 2])
                    cur.fetchall()
                    latencies.append((n % 2, sent, (time.perf_counter() - sent) * 1000))
                    n += 1
                    time.sleep(0.01)
        finally:
            conn.close()

    threads = [threading.Thread(target=neighbour, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    conn = _connect(port)
    try:
        with conn.cursor() as cur:
            window.append(time.perf_counter())
            for _ in range(repeat):
                cur.execute(sql)
                cur.fetchall()
            window.append(time.perf_counter())
    finally:
        conn.close()
        stop.set()
        for t in threads:
            t.join(60)
    during = [[ms for k, sent, ms in latencies if k == kind and window[0] <= sent <= window[1]] for kind in (0, 1)]
    return during, (window[1] - window[0]) / repeat


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=2, help="heavy statements per measurement")
    ap.add_argument("--tree", type=Path, action="append", help="a checkout whose proxy to run (default: this one)")
    ap.add_argument("--only", action="append", help="heavy statements whose name starts with this (repeatable)")
    args = ap.parse_args()
    trees = [t.resolve() for t in (args.tree or [REPO])]
    heavy = heavy_statements(args.rows)
    if args.only:
        heavy = {k: v for k, v in heavy.items() if any(k.startswith(o) for o in args.only)}
    servers = start_servers(2)
    try:
        for server, physical in zip(servers, sm.PHYSICAL, strict=True):
            server.execute(f"CREATE DATABASE {physical}")
            for t in (0, 1):
                server.execute(sm.DDL.replace("CREATE TABLE t_order", f"CREATE TABLE t_order_{t}"), physical)
        print(f"loaded {args.rows:,} rows in {sm.load(list(servers), args.rows):.1f} s", flush=True)
        with tempfile.TemporaryDirectory(prefix="shardproxy-neighbours-") as tmp:
            conf = Path(tmp) / "conf"
            sm.write_conf(conf, list(servers))
            print(
                "\n| heavy statement | proxy | its time s | answers | proxy's own answer p50 / p99 / max ms | "
                "point select p50 / p99 / max ms |"
            )
            print("|---|---|---|---|---|---|")
            for name, sql in heavy.items():
                for tree in trees:
                    port = free_port()
                    with proxy_in(tree, conf, port, Path(tmp) / "proxy.log"):
                        during, spent = neighbours_during(port, sql, args.repeat)
                    cells = " | ".join(
                        f"{statistics.median(ms):.1f} / {percentile(ms, 0.99):.1f} / {max(ms):.1f}" for ms in during
                    )
                    print(f"| {name} | {tree.name} | {spent:.2f} | {sum(map(len, during))} | {cells} |", flush=True)
    finally:
        for server in servers:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
