"""Prepared point-select throughput: the proxy next to MariaDB itself, in the same run.

    python bench/prepared_point_select.py [--time 10] [--threads 1 4] [--rounds 1] [--table-size 10000]

One sandbox MariaDB server holds three copies of sysbench's ``sbtest1``:

* ``sbtest``      - read directly (the baseline), and through the proxy's pass-through logical database
                    ``sbtest_pass``;
* ``sbtest_ds_0`` / ``sbtest_ds_1`` - the two data sources of the proxy's sharded logical database ``sbtest``
                    (``bench/sysbench/conf/``: ``id % 2``, one actual table per data source), loaded from the
                    first copy on the server (``INSERT ... SELECT ... WHERE id % 2 = i``).

The proxy runs as a subprocess (``python -m proxy serve``). For each thread count, sysbench
``oltp_point_select --db-ps-mode=auto`` (``SELECT c FROM sbtest1 WHERE id=?`` as a server-side prepared
statement: COM_STMT_EXECUTE per query) runs for ``--time`` seconds against each target in turn: direct,
pass-through, sharded (repeated ``--rounds`` times, alternating, so drift hits all three alike). Printed:
QPS per run and the proxy's QPS as a fraction of direct QPS from the same round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "sysbench"))

from harness import (
    connection_args,
    free_port,
    git_revision,
    machine,
    proxy_process,
    render_sbtest_conf,
    run_sysbench,
    write_passthrough_conf,
)

from proxy.sandbox import MariaDBServer

SHARDED_PHYSICAL = ("sbtest_ds_0", "sbtest_ds_1")


def load(server: MariaDBServer, table_size: int, direct_port: int) -> None:
    server.execute("CREATE DATABASE sbtest")
    prep = run_sysbench(["oltp_point_select", *connection_args(direct_port, "sbtest", server.password),
                         "--tables=1", f"--table-size={table_size}", "--auto_inc=off", "prepare"])
    if not prep.ok:
        raise SystemExit(f"sysbench prepare failed:\n{prep.output}")
    for i, db in enumerate(SHARDED_PHYSICAL):
        server.execute(f"CREATE DATABASE {db}")
        server.execute(f"CREATE TABLE {db}.sbtest1 LIKE sbtest.sbtest1")
        server.execute(f"INSERT INTO {db}.sbtest1 SELECT * FROM sbtest.sbtest1 WHERE id % 2 = {i}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time", type=int, default=10)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--table-size", type=int, default=10000)
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="prepared-point-select-"))
    print(f"machine: {machine()}\ntree: {git_revision()}\nworkdir: {work}", flush=True)
    server = MariaDBServer.start(extra_args=("--max-connections=500",))
    try:
        load(server, args.table_size, server.port)
        conf = work / "conf"
        render_sbtest_conf(conf, [server, server], SHARDED_PHYSICAL)
        write_passthrough_conf(conf, server, "sbtest", name="sbtest_pass")
        port = free_port()
        targets = {
            "direct": (server.port, "sbtest", server.password),
            "proxy pass-through": (port, "sbtest_pass", "root"),
            "proxy sharded (2 ds)": (port, "sbtest", "root"),
        }
        results: dict[tuple[int, str], list[float]] = {}
        failures: list[str] = []
        with proxy_process(conf, port, work / "proxy.log"):
            for threads in args.threads:
                for rnd in range(args.rounds):
                    for name, (p, db, password) in targets.items():
                        res = run_sysbench(["oltp_point_select", *connection_args(p, db, password), "--tables=1",
                                            f"--table-size={args.table_size}", "--db-ps-mode=auto",
                                            f"--time={args.time}", f"--threads={threads}", "run"],
                                           timeout=args.time + 120)
                        if not res.ok or res.ignored_errors:
                            failures.append(f"{name}, {threads} threads: {res.fatal or res.output[-2000:]}")
                        results.setdefault((threads, name), []).append(res.qps)
                        print(f"round {rnd + 1}, {threads} thread(s), {name:22s}: {res.qps:10.1f} QPS  "
                              f"(avg latency {res.latency_avg_ms} ms, p95 {res.latency_p95_ms} ms, "
                              f"errors {res.ignored_errors})", flush=True)
        print("\n| threads | target | QPS (median of rounds) | vs direct |")
        print("|---|---|---|---|")
        for threads in args.threads:
            direct = statistics.median(results[(threads, "direct")])
            for name in targets:
                qps = statistics.median(results[(threads, name)])
                print(f"| {threads} | {name} | {qps:,.0f} | {qps / direct:.2f} |")
        for f in failures:
            print("FAILED:", f)
        print(f"\ncommand (per target): sysbench oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 "
              f"--mysql-port=P --mysql-user=root --mysql-password=root --mysql-db=DB --tables=1 "
              f"--table-size={args.table_size} --db-ps-mode=auto --time={args.time} --threads=N run")
        return 1 if failures else 0
    finally:
        server.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
