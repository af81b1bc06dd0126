"""What writes across nodes cost (issue 17, proxy.stepwise), next to the single-node writes they replace.

Two sandbox MariaDB servers, the shipped layout (`t_order` / `t_order_item`, databases by ``user_id % 2``,
tables by ``order_id % 2``), the proxy in this process (tests.integration.harness), one client session:

* ``save() pinned``: ``UPDATE t_order SET status = ? WHERE order_id = ? AND user_id = ?`` (one node; the
  baseline);
* ``save() Django``: ``UPDATE t_order SET user_id = ?, status = ? WHERE order_id = ?`` with the row's own
  user_id (stepwise: locking SELECT on every node, UPDATE by key, the new image read back; no move);
* ``move``: ``UPDATE t_order SET user_id = user_id + 1 WHERE order_id = ?`` (the row moves data source);
* ``ORDER BY LIMIT 10``: ``UPDATE t_order SET status = ? ORDER BY order_id LIMIT 10`` over 4 nodes;
* ``INSERT ... SELECT``: ``--rows`` rows from ``t_order_item`` into ``t_order`` (rows/s).

    python3 bench/stepwise_writes.py [--seconds 5] [--rows 20000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from proxy.sandbox import start_servers  # noqa: E402
from tests.integration.harness import start_proxy, write_conf  # noqa: E402
from tests.integration.sharding_fixtures import SHARDING_DDL, shipped_rules_yaml  # noqa: E402


def timed(cur: object, label: str, seconds: float, make: object) -> None:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sql, args = make(n)  # type: ignore[operator]
        cur.execute(sql, args)  # type: ignore[attr-defined]
        n += 1
    elapsed = time.perf_counter() - start
    print(f"{label:<22} {n / elapsed:8.0f} statements/s   {1000 * elapsed / n:7.2f} ms each")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rows", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        servers = start_servers(2)
        try:
            physical = ("bench_ds_0", "bench_ds_1")
            for server, db in zip(servers, physical, strict=True):
                server.execute(f"CREATE DATABASE {db}")
            conf = write_conf(Path(tmp) / "conf", {"sharding_db": {
                f"ds_{i}": (servers[i], physical[i]) for i in range(2)}},
                rules_yaml={"sharding_db": shipped_rules_yaml()})
            proxy = start_proxy(conf)
            try:
                conn = proxy.connect("sharding_db")
                with conn.cursor() as cur:
                    for ddl in SHARDING_DDL:
                        cur.execute(ddl)
                    users = 100
                    for start in range(0, 1000, 500):
                        cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES " + ", ".join(
                            f"({i}, {i % users}, 'init')" for i in range(start + 1, start + 501)))
                    for start in range(0, args.rows, 1000):
                        cur.execute("INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES "
                                    + ", ".join(f"({i}, {i % 1000 + 1}, {(i % 1000 + 1) % users}, 'item')"
                                                for i in range(start + 1, start + 1001)))
                    timed(cur, "save() pinned", args.seconds, lambda n: (
                        "UPDATE t_order SET status = %s WHERE order_id = %s AND user_id = %s",
                        (f"s{n}", n % 1000 + 1, (n % 1000 + 1) % users)))
                    timed(cur, "save() Django", args.seconds, lambda n: (
                        "UPDATE t_order SET user_id = %s, status = %s WHERE order_id = %s",
                        ((n % 1000 + 1) % users, f"d{n}", n % 1000 + 1)))
                    timed(cur, "move", args.seconds, lambda n: (
                        "UPDATE t_order SET user_id = user_id + 1 WHERE order_id = %s", (n % 1000 + 1,)))
                    timed(cur, "ORDER BY LIMIT 10", args.seconds, lambda n: (
                        "UPDATE t_order SET status = %s ORDER BY order_id LIMIT 10", (f"l{n}",)))
                    start = time.perf_counter()
                    count = cur.execute("INSERT INTO t_order (order_id, user_id, status) SELECT order_item_id + "
                                        "100000, user_id, status FROM t_order_item")
                    elapsed = time.perf_counter() - start
                    print(f"{'INSERT ... SELECT':<22} {count / elapsed:8.0f} rows/s         ({count} rows, "
                          f"{elapsed:.2f} s)")
                conn.close()
            finally:
                proxy.stop()
        finally:
            for server in servers:
                server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
