"""Instructions the proxy process executes per statement, counted by valgrind's callgrind.

Why: on a shared 2-core machine the proxy's CPU time per statement (`statement_cpu.py`) moves by 20-40 % from run
to run with whatever else runs; callgrind counts the instructions executed in the proxy process (user space: the
interpreter, uvloop, libc; not the kernel's socket work), which are the same from run to run for the same code and
statements. A change to one path shows in that path's row, and sharded next to pass-through in one run says how
much more the sharded path does. Instructions are not time (a cache miss costs more than an add), so QPS still comes
from `suite.py`; this tells which way a change moved the work, and by how much, without noise.

    python bench/statement_instructions.py [--count 200] [--tree /tmp/before --tree .] [--only point ...]

Each tree's proxy runs under `valgrind --tool=callgrind --instr-atstart=no` against the same two sandbox servers
(bench/suite.py's `sbtest` and `sharding_db` layouts; `sbtest_pass` for pass-through, `sbtest_enc` its twin whose `c`
is encrypted, `sbtest_encs` the sharded twin of `sbtest` whose `c` is encrypted: statement_cpu.py); for each
statement class, after a warm-up, counting is switched on with `callgrind_control`, `--count` statements are sent
from one client, counting is switched off and the counts dumped. (A command to callgrind is taken up only when the
proxy runs, so a second connection pings the proxy until each one returns: the pings are counted too, a few per
class.)
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH / "sysbench"))
sys.path.insert(0, str(BENCH))

import statement_cpu as sc  # noqa: E402
from harness import REPO, free_port, wait_listening  # noqa: E402

# a select by the value of `c` on the pass-through twins, plain and encrypted
SELECT_BY_C = (("sbtest_pass", "select by c, pass-through"), ("sbtest_enc", "select by c, pass-through, encrypted c"))
# (logical database, protocol, statement class of statement_cpu.STATEMENTS, or "transaction")
CLASSES: list[tuple[str, str, str]] = [
    *[(db, proto, "point select") for proto in ("text", "prepared") for db in ("sbtest", "sbtest_pass", "sbtest_enc",
                                                                                 "sbtest_encs")],
    *[("sbtest", proto, name) for proto in ("text", "prepared") for name in sc.STATEMENTS
      if name != "point select" and name not in sc.DATABASES],
    *[("sbtest_pass", "text", name) for name in ("range (concatenated)", "range ORDER BY c")],
    *[(db, proto, name) for proto in ("text", "prepared") for db, name in SELECT_BY_C],
    ("sbtest", "text", "transaction"),
    ("sbtest_pass", "text", "transaction"),
    ("sbtest", "prepared", "transaction"),
    ("sbtest_pass", "prepared", "transaction"),
]


def transaction_runner(port: int, db: str, proto: str = "text") -> Callable[[random.Random], None]:
    """BEGIN, a point select on each data source (ids even and odd), COMMIT: what a transaction that touches both
    costs beyond its statements (joining each data source, the COMMIT on both). Prepared: all four statements
    prepared and executed, as sysbench --db-ps-mode=auto sends them."""
    import pymysql

    if proto == "prepared":
        run = sc.prepared_runner(port, db)

        def prepared(rng: random.Random) -> None:
            run("BEGIN", ())
            for parity in (0, 1):
                run("SELECT c FROM sbtest1 WHERE id=%s", (2 * rng.randint(1, 4000) + parity,))
            run("COMMIT", ())

        return prepared
    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="root", database=db, autocommit=True)
    cur = conn.cursor()

    def one(rng: random.Random) -> None:
        cur.execute("BEGIN")
        for parity in (0, 1):
            cur.execute("SELECT c FROM sbtest1 WHERE id=%s", (2 * rng.randint(1, 4000) + parity,))
            cur.fetchall()
        cur.execute("COMMIT")

    return one


def runner(port: int, db: str, proto: str, name: str, size: int) -> Callable[[random.Random], None]:
    if name == "transaction":
        return transaction_runner(port, db, proto)
    sql = sc.STATEMENTS[name]
    if "c=%s" in sql:
        sc.load_c_values(port)
    run = (sc.text_runner if proto == "text" else sc.prepared_runner)(port, "sharding_db" if "t_order" in sql else db)
    return lambda rng: run(sql, sc.arguments(sql, rng, size))


def measure(tree: Path, conf: Path, work: Path, classes: list[tuple[str, str, str]], count: int,
            size: int) -> dict[tuple[str, str, str], float]:
    import pymysql

    port = free_port()
    out = work / f"callgrind.{tree.name}.%p"
    log = work / f"proxy-{tree.name}.log"
    with log.open("wb") as logf:
        proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                                 sys.executable, "-m", "proxy", "--log-level", "WARNING", "serve", "--conf", str(conf),
                                 "--port", str(port)], cwd=tree, stdout=logf, stderr=subprocess.STDOUT)
    results: dict[tuple[str, str, str], float] = {}
    try:
        wait_listening(proc, port, "proxy", timeout=600, log=log)
        poker = pymysql.connect(host="127.0.0.1", port=port, user="root", password="root", autocommit=True)

        def control(arg: str) -> None:
            p = subprocess.Popen(["callgrind_control", arg, str(proc.pid)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            while p.poll() is None:
                poker.ping(reconnect=False)
                time.sleep(0.05)

        for cls in classes:
            rng = random.Random(7)
            one = runner(port, *cls, size)
            for _ in range(max(20, count // 4)):
                one(rng)
            control("--instr=on")
            for _ in range(count):
                one(rng)
            control("--instr=off")
            known = set(work.glob(f"callgrind.{tree.name}.*"))
            control("--dump=" + re.sub(r"[^A-Za-z0-9_]", "_", ":".join(cls)))
            while not (new := set(work.glob(f"callgrind.{tree.name}.*")) - known):
                poker.ping(reconnect=False)
                time.sleep(0.1)
            time.sleep(0.5)  # written whole
            totals = [int(line.split()[1]) for line in new.pop().read_text().splitlines()
                      if line.startswith("totals:")]
            results[cls] = (totals[0] if totals else 0) / count
            print(f"  {tree.name}: {':'.join(cls)} {results[cls] / 1000:,.1f} k instructions", flush=True)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200, help="statements per class")
    ap.add_argument("--tree", type=Path, action="append", help="a checkout whose proxy to run (default: this one)")
    ap.add_argument("--only", nargs="+", default=[], help="classes whose name contains one of these words")
    ap.add_argument("--table-size", type=int, default=10000)
    ap.add_argument("--keep", action="store_true",
                    help="keep the work folder (the callgrind dumps, for callgrind_annotate) instead of removing it")
    args = ap.parse_args()
    trees = [t.resolve() for t in (args.tree or [REPO])]
    classes = [c for c in CLASSES if not args.only or any(w in ":".join(c) for w in args.only)]
    work = Path(tempfile.mkdtemp(prefix="shardproxy-instr-"))
    try:
        with sc.bench_layout(work, args.table_size, 1000) as conf:
            results = {tree: measure(tree, conf, work, classes, args.count, args.table_size) for tree in trees}
    finally:
        if args.keep:
            print(f"callgrind dumps kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    head = " | ".join(f"{t.name} k instr." for t in trees)
    change = " | change" if len(trees) == 2 else ""
    rule = "---|" * (len(trees) + bool(change))
    print(f"\n| database | protocol | statement | {head}{change} |\n|---|---|---|{rule}")
    for cls in classes:
        cells = [f"{results[t][cls] / 1000:,.1f}" for t in trees]
        if change:
            before, after = (results[t][cls] for t in trees)
            cells.append(f"{(after - before) / before * 100:+.0f} %" if before else "")
        print(f"| {' | '.join(cls)} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
