"""sysbench oltp_read_write against shardproxy over a 2-data-source sharded `sbtest`, then a placement check.

    python bench/sysbench/run.py [--tables 2] [--table-size 10000] [--time 30] [--threads 4] [--ps-mode auto]

1. starts two sandbox MariaDB servers (`proxy.sandbox.start_servers`), database `sbtest_ds_i` on server i;
2. renders `bench/sysbench/conf/` (sbtest1..8 sharded by ``id % 2``, one actual table per data source) with
   their addresses and starts the proxy as a subprocess (`python -m proxy serve --conf DIR --port P`);
3. ``sysbench oltp_read_write ... --auto_inc=off prepare`` through the proxy (CREATE TABLE, bulk
   multi-row INSERTs, CREATE INDEX). ``--auto_inc=off``: sysbench then sends the ids itself (1..N); with
   AUTO_INCREMENT each backend would number its own rows and ids would collide across data sources;
4. ``sysbench oltp_read_write --db-ps-mode=auto --time=T --threads=N run`` through the proxy: every
   statement (BEGIN and COMMIT included) is a server-side prepared statement;
5. reads every actual table on the backends directly: each row's id must map to the data source holding
   it, no id twice, every table complete (DELETE + INSERT of the same id keep the row count).

Exit status 0 only if prepare and run succeed with zero errors (ignored ones included) and the check holds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (
    connection_args,
    free_port,
    git_revision,
    machine,
    proxy_process,
    render_sbtest_conf,
    run_sysbench,
)

from proxy.sandbox import MariaDBServer, start_servers

PHYSICAL = ("sbtest_ds_0", "sbtest_ds_1")


def check_placement(servers: list[MariaDBServer], tables: int, table_size: int) -> list[str]:
    """Problems found on the backends (empty: every row sits where `id % 2` demands)."""
    problems: list[str] = []
    for t in range(1, tables + 1):
        seen: dict[int, int] = {}
        for ds, (server, db) in enumerate(zip(servers, PHYSICAL, strict=True)):
            rows = server.execute(f"SELECT id FROM sbtest{t}", db)
            wrong = [int(r[0]) for r in rows if int(r[0]) % 2 != ds]
            if wrong:
                problems.append(f"sbtest{t} on ds_{ds}: {len(wrong)} rows whose id % 2 != {ds}, e.g. {wrong[:5]}")
            for (id_,) in rows:
                seen[int(id_)] = seen.get(int(id_), 0) + 1
        dups = [i for i, n in seen.items() if n > 1]
        if dups:
            problems.append(f"sbtest{t}: {len(dups)} ids on both data sources, e.g. {dups[:5]}")
        missing = sorted(set(range(1, table_size + 1)) - set(seen))
        if missing:
            problems.append(f"sbtest{t}: {len(missing)} ids of 1..{table_size} missing, e.g. {missing[:5]}")
        extra = sorted(set(seen) - set(range(1, table_size + 1)))
        if extra:
            problems.append(f"sbtest{t}: {len(extra)} ids outside 1..{table_size}, e.g. {extra[:5]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=2, choices=range(1, 9))
    ap.add_argument("--table-size", type=int, default=10000)
    ap.add_argument("--time", type=int, default=30)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--ps-mode", default="auto", choices=("auto", "disable"))
    ap.add_argument("--workdir", type=Path, default=None, help="keep the config and the proxy log here")
    args = ap.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="sysbench-shardproxy-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}\ntree: {git_revision()}\nworkdir: {work}", flush=True)
    servers = start_servers(2)
    try:
        for server, db in zip(servers, PHYSICAL, strict=True):
            server.execute(f"CREATE DATABASE {db}")
        conf = render_sbtest_conf(work / "conf", servers, PHYSICAL)
        port = free_port()
        log = work / "proxy.log"
        with proxy_process(conf, port, log):
            common = ["oltp_read_write", *connection_args(port, "sbtest"), f"--tables={args.tables}",
                      f"--table-size={args.table_size}", "--auto_inc=off"]
            started = time.monotonic()
            prep = run_sysbench([*common, "prepare"])
            print(f"\n$ {prep.shell()}\n{prep.output.strip()}\n(prepare: {time.monotonic() - started:.1f} s)",
                  flush=True)
            if not prep.ok:
                print("PREPARE FAILED", file=sys.stderr)
                return 1
            problems = check_placement(servers, args.tables, args.table_size)
            print(f"placement after prepare: {'OK' if not problems else problems}", flush=True)
            run = run_sysbench([*common, f"--db-ps-mode={args.ps_mode}", f"--time={args.time}",
                                f"--threads={args.threads}", "--report-interval=10", "run"],
                               timeout=args.time + 300)
            print(f"\n$ {run.shell()}\n{run.output.strip()}", flush=True)
            time.sleep(1)  # let the sessions sysbench closed finish
            before_stop = log.read_text()
        proxy_problems = [ln for ln in before_stop.splitlines() if "error" in ln.lower() or "exception" in ln.lower()]
        at_shutdown = log.read_text()[len(before_stop):].count("Traceback")
        problems = check_placement(servers, args.tables, args.table_size)
        print("\n--- summary ---")
        print(f"sysbench run: exit {run.returncode}, transactions {run.transactions} ({run.tps:.2f}/s), "
              f"queries {run.queries} ({run.qps:.2f}/s), ignored errors {run.ignored_errors}, "
              f"reconnects {run.reconnects}, latency avg {run.latency_avg_ms} ms / p95 {run.latency_p95_ms} ms")
        for line in run.fatal:
            print(f"sysbench: {line}")
        print(f"proxy log lines mentioning errors (while serving): {len(proxy_problems)}; tracebacks logged "
              f"while the proxy was being stopped (SIGTERM): {at_shutdown}")
        for line in proxy_problems[:10]:
            print(f"  {line}")
        print(f"placement after run: {'OK, every row on ds_(id % 2), tables complete' if not problems else ''}")
        for p in problems:
            print(f"  {p}")
        ok = run.ok and run.ignored_errors == 0 and run.reconnects == 0 and not problems and run.transactions > 0
        print("RESULT:", "PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        for server in servers:
            server.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
