"""What XA costs: cross-shard write transactions under LOCAL and under XA, in one run, on one proxy.

    python bench/xa_transfer.py                      # 4 clients, 2 rounds x 10 s per mode
    python bench/xa_transfer.py --time 5 --threads 1 4 --durable

Setup (all on this machine): two sandbox MariaDB servers, `account` sharded by `id % 2` over them, and ONE
proxy subprocess (`python -m proxy --log-level WARNING serve --conf DIR --port P`) whose XA decision log is
in DIR (a real disk: every cross-shard XA COMMIT fsyncs it). Each client runs, for `--time` seconds:

    BEGIN; UPDATE account SET balance = balance - x WHERE id = <even: ds_0>;
           UPDATE account SET balance = balance + x WHERE id = <odd: ds_1>; COMMIT

The mode changes between runs with `ALTER TRANSACTION RULE (DEFAULT='LOCAL' | 'XA')` (the next transaction
of every session); runs alternate LOCAL, XA, LOCAL, XA, ... (`--rounds`), and the table reports each mode's
median round. Measured: transactions per second, latency of the whole transaction and of its COMMIT alone
(p50/p95/p99, ms), and the proxy's CPU time per transaction (/proc/<pid>/stat). At the end the total of
all balances is checked (it must not change). `--single` adds the same runs on one data source (both
accounts on ds_0): XA there commits in one phase (XA END + XA COMMIT ONE PHASE, no log write).

`--durable`: the servers run with innodb_flush_log_at_trx_commit=1 (they fsync their redo log at every
commit, as production servers do); the sandbox default is 2 (no fsync), which makes the proxy's own fsync
look relatively more expensive than it is next to durable servers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from proxy.sandbox import start_servers  # noqa: E402
from tests.integration.harness import free_port, write_conf  # noqa: E402

RULES = """\
- !SHARDING
  tables:
    account:
      actualDataNodes: ds_${0..1}.account
      databaseStrategy:
        standard: {shardingColumn: id, shardingAlgorithmName: db_mod}
  shardingAlgorithms:
    db_mod: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""
ACCOUNTS = 2000  # rows per data source: enough that clients rarely wait for each other's locks


@dataclass
class Run:
    mode: str
    threads: int
    single: bool
    seconds: float
    tx: int = 0
    errors: int = 0
    tx_ms: list[float] = field(default_factory=list)
    commit_ms: list[float] = field(default_factory=list)
    cpu_us_per_tx: float = 0.0

    @property
    def tps(self) -> float:
        return self.tx / self.seconds if self.seconds else 0.0


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def connect(port: int) -> pymysql.connections.Connection[Any]:
    return pymysql.connect(host="127.0.0.1", port=port, user="root", password="root", database="bank",
                           autocommit=True, read_timeout=60)


def run_once(port: int, pid: int, mode: str, threads: int, seconds: float, single: bool) -> Run:
    with connect(port) as admin, admin.cursor() as cur:
        cur.execute(f"ALTER TRANSACTION RULE (DEFAULT='{mode}', TYPE(NAME='Narayana'))")
    result = Run(mode, threads, single, seconds)
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)
    stop = threading.Event()

    def client(n: int) -> None:
        rng = random.Random(n)
        conn = connect(port)
        cur = conn.cursor()
        cur.execute("SET innodb_lock_wait_timeout = 5")
        tx_ms: list[float] = []
        commit_ms: list[float] = []
        errors = 0
        start.wait()
        while not stop.is_set():
            a = 2 * rng.randrange(ACCOUNTS)
            b = 2 * rng.randrange(ACCOUNTS) + (0 if single else 1)
            if a == b:
                continue
            amount = rng.randint(1, 9)
            t0 = time.perf_counter()
            try:
                cur.execute("BEGIN")
                cur.execute(f"UPDATE account SET balance = balance - {amount} WHERE id = {a}")
                cur.execute(f"UPDATE account SET balance = balance + {amount} WHERE id = {b}")
                t1 = time.perf_counter()
                cur.execute("COMMIT")
                t2 = time.perf_counter()
            except pymysql.MySQLError:
                errors += 1
                with contextlib.suppress(pymysql.MySQLError):
                    cur.execute("ROLLBACK")
                continue
            tx_ms.append((t2 - t0) * 1000)
            commit_ms.append((t2 - t1) * 1000)
        conn.close()
        with lock:
            result.tx += len(tx_ms)
            result.errors += errors
            result.tx_ms.extend(tx_ms)
            result.commit_ms.extend(commit_ms)

    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    result.seconds = time.perf_counter() - t0
    result.cpu_us_per_tx = (cpu_seconds(pid) - cpu0) / max(1, result.tx) * 1e6
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time", type=float, default=10, help="seconds per run (default 10)")
    ap.add_argument("--threads", type=int, nargs="+", default=[4], help="client threads (default 4)")
    ap.add_argument("--rounds", type=int, default=2, help="runs per mode and thread count (default 2)")
    ap.add_argument("--single", action="store_true", help="also run single-data-source transactions")
    ap.add_argument("--durable", action="store_true", help="servers fsync at every commit (flush_log_at_trx_commit=1)")
    ap.add_argument("--workdir", type=Path, default=None, help="configuration, XA log, proxy log (default: a temp dir)")
    args = ap.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="xa-bench-", dir=os.environ.get("TMPDIR", "/var/tmp")))
    workdir.mkdir(parents=True, exist_ok=True)
    extra = ("--innodb-flush-log-at-trx-commit=1",) if args.durable else ()
    servers = start_servers(2, extra_args=extra)
    proc: subprocess.Popen[bytes] | None = None
    try:
        for i, server in enumerate(servers):
            server.execute(f"CREATE DATABASE bank_{i}")
            server.execute(f"CREATE TABLE bank_{i}.account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)")
            ids = [2 * k + i for k in range(ACCOUNTS)]
            server.execute(f"INSERT INTO bank_{i}.account VALUES " + ", ".join(f"({n}, 1000)" for n in ids))
        conf = write_conf(workdir / "conf", {"bank": {"ds_0": (servers[0], "bank_0"), "ds_1": (servers[1], "bank_1")}},
                          rules_yaml={"bank": RULES}, transaction={"defaultType": "LOCAL", "providerType": "Narayana"})
        port = free_port()
        with (workdir / "proxy.log").open("ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "proxy", "--log-level", "WARNING", "serve", "--conf",
                                     str(conf), "--port", str(port)], cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                connect(port).close()
                break
            except pymysql.MySQLError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the proxy did not start; see {workdir / 'proxy.log'}") from None
                time.sleep(0.1)
        print(f"# {os.cpu_count()} CPUs, servers flush_log_at_trx_commit={'1' if args.durable else '2'}, "
              f"XA log in {conf / 'xa-log'}, {args.time:g} s per run, {args.rounds} rounds per mode (median shown)")
        layouts = [False, True] if args.single else [False]
        table: list[Run] = []
        for single in layouts:
            for threads in args.threads:
                runs: dict[str, list[Run]] = {"LOCAL": [], "XA": []}
                for _ in range(args.rounds):
                    for mode in ("LOCAL", "XA"):
                        r = run_once(port, proc.pid, mode, threads, args.time, single)
                        runs[mode].append(r)
                        print(f"  {'1 data source' if single else '2 data sources'} {mode:5} {threads} threads: "
                              f"{r.tps:7.0f} TPS, commit p50 {pct(r.commit_ms, 0.5):.2f} ms, errors {r.errors}",
                              flush=True)
                for mode in ("LOCAL", "XA"):
                    table.append(sorted(runs[mode], key=lambda r: r.tps)[len(runs[mode]) // 2])
        print()
        print("| layout | mode | threads | TPS | tx p50 / p95 / p99 ms | COMMIT p50 / p95 / p99 ms "
              "| proxy CPU per tx | errors |")
        print("|---|---|---|---|---|---|---|---|")
        base: dict[tuple[bool, int], float] = {}
        for r in table:
            key = (r.single, r.threads)
            if r.mode == "LOCAL":
                base[key] = r.tps
            rel = f" ({r.tps / base[key]:.2f}x)" if r.mode == "XA" and base.get(key) else ""
            layout = "1 data source" if r.single else "2 data sources"
            print(f"| {layout} | {r.mode} | {r.threads} | {r.tps:,.0f}{rel} | "
                  f"{pct(r.tx_ms, .5):.2f} / {pct(r.tx_ms, .95):.2f} / {pct(r.tx_ms, .99):.2f} | "
                  f"{pct(r.commit_ms, .5):.2f} / {pct(r.commit_ms, .95):.2f} / {pct(r.commit_ms, .99):.2f} | "
                  f"{r.cpu_us_per_tx:.0f} us | {r.errors} |")
        total = sum(int(row[0]) for i, server in enumerate(servers)
                    for row in server.execute(f"SELECT SUM(balance) FROM bank_{i}.account"))
        expected = 2 * ACCOUNTS * 1000
        print(f"\ntotal of all balances: {total:,} (expected {expected:,}): {'ok' if total == expected else 'CHANGED'}")
        return 0 if total == expected else 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
        for server in servers:
            server.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
