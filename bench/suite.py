"""The benchmark suite of issue 8: shardproxy next to MariaDB itself, measured in the same run.

    python bench/suite.py [--time 10] [--quick] [--rounds 1] [--rows 1000000] [--profile] [--workers N]

Setup (all on this box): two sandbox MariaDB servers A and B (`proxy.sandbox`), one proxy subprocess
(`python -m proxy serve --conf DIR --port P`) serving four logical databases:

* ``sbtest_pass``  pass-through to A.sbtest (sysbench's tables, loaded directly with `sysbench prepare`);
* ``sbtest``       sbtest1..N sharded by ``id % 2`` over A.sbtest_ds_0 and B.sbtest_ds_1 (`bench/sysbench/conf/`:
                   INLINE ``ds_${id % 2}`` with ``allow-range-query-with-inline-sharding: true``, so sysbench's
                   ``id BETWEEN ? AND ?`` ranges go to both data sources);
* ``sharding_db``  `bench/scatter_memory.py`'s t_order: 2 data sources x 2 tables (4 nodes), --rows rows;
* ``stream_pass``  pass-through to A.bench_stream.t_stream, --rows rows in one table.

1. sysbench ``oltp_point_select``, ``oltp_read_only``, ``oltp_write_only``, ``oltp_read_write`` with
   ``--db-ps-mode=auto`` (server-side prepared statements) and ``--db-ps-mode=disable`` (text protocol), at
   each --threads count: for every cell, direct (A.sbtest), pass-through, sharded, one after the other
   (--rounds times). QPS is the median of sysbench's 1-second interval reports; the ratio divides the proxy's
   by the direct run's of the same round; p95 is sysbench's. Proxy CPU per query: utime+stime from
   /proc/<proxy pid>/stat (and its worker processes) before and after the run, divided by sysbench's query
   count. A run with errors (exit status, FATAL, ignored errors, reconnects) is flagged in the table (``!``)
   and its output is printed after the table.
   For ``oltp_point_select`` two reference relays run in the same round, between direct and pass-through:
   ``bench/byte_relay.py`` (Python + uvloop, forwards bytes, knows nothing of MySQL) and, when installed,
   HAProxy in TCP mode (C, one thread). They show what the two extra loopback hops and one more process cost
   on this box whatever the proxy does: the ceiling under which the proxy's own work is measured.
2. scatter ``SELECT order_id, user_id, status, amount FROM t_order ORDER BY order_id LIMIT 10`` over the
   4 nodes (`bench/sysbench/scatter_order_limit.lua`), and for scale the same query directly on one node.
3. streaming: ``SELECT * FROM t_stream`` (single node, pass-through), ``SELECT * FROM t_order``
   (scatter concatenation) and ``... ORDER BY order_id`` (scatter merge), read with the MariaDB C client
   (``mariadb --quick --batch``: unbuffered, rows written to a pipe and counted), plus the single-node table
   read directly; rows/s, the proxy's CPU and its peak RSS (VmRSS sampled every 50 ms and VmHWM, reset
   before each query).
4. with --profile: one more prepared point-select run (pass-through, highest thread count) under
   ``py-spy record -f raw``, aggregated by function (self and inclusive share of the samples).

--quick: 2-second runs, the highest thread count only, 200,000 rows: a ~1-minute smoke test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH / "sysbench"))
sys.path.insert(0, str(BENCH))

import scatter_memory as sm  # noqa: E402
from harness import (  # noqa: E402
    REPO,
    SysbenchResult,
    connection_args,
    cpu_seconds,
    free_port,
    git_revision,
    machine,
    proxy_process,
    render_sbtest_conf,
    run_sysbench,
    wait_listening,
    write_passthrough_conf,
)

from proxy.sandbox import MariaDBServer, start_servers  # noqa: E402

WORKLOADS = ("oltp_point_select", "oltp_read_only", "oltp_write_only", "oltp_read_write")
PS_MODES = {"auto": "prepared", "disable": "text"}
SHARDED_PHYSICAL = ("sbtest_ds_0", "sbtest_ds_1")
SCATTER_LUA = BENCH / "sysbench" / "scatter_order_limit.lua"
LOCK_WAIT_TIMEOUT = 2
SCATTER_SQL = "SELECT order_id, user_id, status, amount FROM t_order ORDER BY order_id LIMIT 10"


@dataclass
class Run:
    """One sysbench run against one target."""

    target: str  # direct | pass | sharded | scatter-direct | scatter-proxy
    qps: float  # median of the 1-second intervals
    summary_qps: float
    queries: int
    p95_ms: float
    cpu_us_per_query: float | None
    errors: list[str]
    output_tail: str

    @classmethod
    def of(cls, target: str, res: SysbenchResult, cpu_s: float | None) -> Run:
        errors: list[str] = []
        if res.returncode != 0:
            errors.append(f"exit status {res.returncode}")
        if res.ignored_errors:
            codes = "; ".join(k[:60] for k in res.ignored_by_code)
            errors.append(f"{res.ignored_errors} ignored errors" + (f" (codes seen: {codes})" if codes else ""))
        if res.reconnects:
            errors.append(f"{res.reconnects} reconnects")
        errors += res.fatal[:5]
        if res.queries == 0 and not errors:
            errors.append("no queries")
        per_query = cpu_s * 1e6 / res.queries if cpu_s is not None and res.queries else None
        return cls(target, res.median_qps, res.qps, res.queries, res.latency_p95_ms, per_query, errors,
                   "\n".join(res.output.strip().splitlines()[-40:]))


@dataclass
class Cell:
    workload: str
    ps_mode: str
    threads: int
    runs: dict[str, list[Run]] = field(default_factory=dict)

    def med(self, target: str, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.runs.get(target, []) if getattr(r, attr) is not None]
        return statistics.median(values) if values else None

    def ratio(self, target: str, base: str = "direct") -> float | None:
        """Median over rounds of `target`'s QPS / `base`'s QPS of the same round (on a box whose QPS moves by
        a third from one run to the next, a ratio is only worth the median of several rounds')."""
        pairs = zip(self.runs.get(base, []), self.runs.get(target, []), strict=False)
        ratios = [p.qps / d.qps for d, p in pairs if d.qps]
        return statistics.median(ratios) if ratios else None

    def flagged(self, target: str) -> bool:
        return any(r.errors for r in self.runs.get(target, []))


@dataclass
class Stream:
    label: str
    sql: str
    rows: int
    seconds: float
    cpu_s: float | None = None
    baseline_mb: float | None = None
    peak_mb: float | None = None
    hwm_mb: float | None = None
    error: str = ""

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


# ------------------------------------------------------------------------------------------------ setup


def sysbench_common(workload: str, port: int, db: str, password: str, tables: int, table_size: int) -> list[str]:
    return [workload, *connection_args(port, db, password), f"--tables={tables}", f"--table-size={table_size}",
            "--auto_inc=off"]


def load_sbtest(a: MariaDBServer, b: MariaDBServer, tables: int, table_size: int) -> None:
    """A.sbtest: the full tables; A.sbtest_ds_0 / B.sbtest_ds_1: the even / odd ids of the same tables."""
    for server, db in ((a, "sbtest"), (a, SHARDED_PHYSICAL[0]), (b, SHARDED_PHYSICAL[1])):
        server.execute(f"CREATE DATABASE {db}")
        prep = run_sysbench([*sysbench_common("oltp_read_write", server.port, db, server.password, tables,
                                              table_size), "prepare"])
        if not prep.ok:
            raise SystemExit(f"sysbench prepare on {db} failed:\n{prep.output}")
    for i, (server, db) in enumerate(((a, SHARDED_PHYSICAL[0]), (b, SHARDED_PHYSICAL[1]))):
        for t in range(1, tables + 1):
            server.execute(f"DELETE FROM sbtest{t} WHERE id % 2 != {i}", db)


def load_streams(a: MariaDBServer, servers: Sequence[MariaDBServer], rows: int) -> None:
    """sharding_db's four t_order nodes (scatter_memory's load) and A.bench_stream.t_stream, `rows` each."""
    for server, physical in zip(servers, sm.PHYSICAL, strict=True):
        server.execute(f"CREATE DATABASE {physical}")
        for t in (0, 1):
            server.execute(sm.DDL.replace("CREATE TABLE t_order", f"CREATE TABLE t_order_{t}"), physical)
    a.execute("CREATE DATABASE bench_stream")
    a.execute(sm.DDL.replace("CREATE TABLE t_order", "CREATE TABLE t_stream"), "bench_stream")
    done: list[BaseException] = []

    def stream_table() -> None:
        try:
            a.execute(sm.ROWS.format(table="t_stream", users=sm.USERS, rows=rows), "bench_stream")
        except BaseException as exc:  # re-raised below
            done.append(exc)

    th = threading.Thread(target=stream_table)
    th.start()
    sm.load(list(servers), rows)
    th.join()
    if done:
        raise done[0]


def write_conf(conf: Path, a: MariaDBServer, b: MariaDBServer) -> Path:
    sm.write_conf(conf, [a, b])  # sharding_db
    render_sbtest_conf(conf, [a, b], SHARDED_PHYSICAL)  # sbtest (and the template's global.yaml)
    write_passthrough_conf(conf, a, "sbtest", name="sbtest_pass")
    write_passthrough_conf(conf, a, "bench_stream", name="stream_pass")
    return conf


# ------------------------------------------------------------------------------------------------ reference relays

REFERENCE_RELAYS = {"byte-relay": "byte relay (Python)", "haproxy": "HAProxy TCP (C)"}


@contextlib.contextmanager
def reference_relays(server_port: int, work: Path) -> Iterator[dict[str, tuple[int, int]]]:
    """{name: (port, pid)} of the reference relays in front of the server (HAProxy only when installed)."""
    procs: list[subprocess.Popen[bytes]] = []
    out: dict[str, tuple[int, int]] = {}
    try:
        port = free_port()
        proc = subprocess.Popen([sys.executable, str(BENCH / "byte_relay.py"), "--listen", str(port), "--to",
                                 f"127.0.0.1:{server_port}"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        procs.append(proc)
        wait_listening(proc, port, "byte_relay.py")
        out["byte-relay"] = (port, proc.pid)
        haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
        if haproxy:
            port = free_port()
            cfg = work / "haproxy.cfg"
            cfg.write_text("global\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 1h\n"
                           f"  timeout server 1h\nlisten m\n  bind 127.0.0.1:{port}\n"
                           f"  server s 127.0.0.1:{server_port}\n")
            proc = subprocess.Popen([haproxy, "-f", str(cfg), "-db"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT)
            procs.append(proc)
            wait_listening(proc, port, "haproxy")
            out["haproxy"] = (port, proc.pid)
        yield out
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)


# ------------------------------------------------------------------------------------------------ runs


def sysbench_run(args: list[str], seconds: int, threads: int, proxy_pid: int | None,
                 target: str) -> Run:
    before = cpu_seconds(proxy_pid) if proxy_pid else None
    res = run_sysbench([*args, f"--time={seconds}", f"--threads={threads}", "--report-interval=1", "--verbosity=5",
                        "run"],
                       timeout=seconds + 120)
    cpu = cpu_seconds(proxy_pid) - before if proxy_pid and before is not None else None
    return Run.of(target, res, cpu)


def describe(run: Run) -> str:
    cpu = f", proxy CPU {run.cpu_us_per_query:.0f} us/query" if run.cpu_us_per_query is not None else ""
    err = f"  !! {'; '.join(run.errors)}" if run.errors else ""
    return (f"{run.target:>8}: {run.qps:>9,.0f} QPS (median 1 s; summary {run.summary_qps:,.0f}), "
            f"p95 {run.p95_ms} ms{cpu}{err}")


def mariadb_client() -> str:
    path = shutil.which("mariadb") or shutil.which("mysql")
    if path is None:
        raise SystemExit("the MariaDB command-line client is needed for the streaming runs")
    return path


def stream(label: str, port: int, db: str, password: str, sql: str, proxy_pid: int | None) -> Stream:
    """Read `sql` with `mariadb --quick` (mysql_use_result: row by row) into a pipe, counting rows."""
    cmd = [mariadb_client(), "--protocol=TCP", "-h127.0.0.1", f"-P{port}", "-uroot", f"-p{password}", "--quick",
           "--batch", "--skip-column-names", db, "-e", sql]
    baseline = hwm_ok = None
    if proxy_pid:
        # a fresh session's first statement opens backend connections: keep that out of the measurement
        subprocess.run([*cmd[:-1], "SELECT 1"], capture_output=True, check=False)
        time.sleep(0.3)
        baseline = sm.status_kb(proxy_pid, "VmRSS") / 1024
        hwm_ok = sm.reset_hwm(proxy_pid)
    cpu0 = cpu_seconds(proxy_pid) if proxy_pid else 0.0
    sampler = sm.RssSampler(proxy_pid) if proxy_pid else None
    if sampler:
        sampler.__enter__()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    rows = 0
    while chunk := proc.stdout.read(1 << 20):
        rows += chunk.count(b"\n")
    rc = proc.wait()
    seconds = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    result = Stream(label, sql, rows, seconds, error=err if rc else "")
    if sampler and proxy_pid:
        sampler.__exit__(None, None, None)
        result.cpu_s = cpu_seconds(proxy_pid) - cpu0
        result.baseline_mb = baseline
        result.peak_mb = sampler.peak_kb / 1024
        result.hwm_mb = sm.status_kb(proxy_pid, "VmHWM") / 1024 if hwm_ok else None
    return result


# ------------------------------------------------------------------------------------------------ profile


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def frame_key(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `func (file.py)`: one entry per function, not per line."""
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    file = m.group("file")
    parts = Path(file).parts
    short = "/".join(parts[-2:]) if len(parts) > 1 else file
    return f"{m.group('func')} ({short})"


def aggregate_raw(raw: str) -> tuple[int, Counter[str], Counter[str]]:
    """py-spy `-f raw` (collapsed stacks `a;b;c N`) -> total samples, self and inclusive samples by function."""
    total = 0
    self_: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame_key(f) for f in stack.split(";") if f and not f.startswith("process ")
                  and not f.startswith("thread ")]
        if not frames:
            continue
        total += n
        self_[frames[-1]] += n
        for key in set(frames):
            incl[key] += n
    return total, self_, incl


def profile_point_select(port: int, proxy_pid: int, seconds: int, threads: int, tables: int, table_size: int,
                         out: Path, rate: int = 250, db: str = "sbtest_pass", ps_mode: str = "auto",
                         workload: str = "oltp_point_select") -> str:
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        return "py-spy is not installed (pip install py-spy): no profile"
    spy = subprocess.Popen([pyspy, "record", "-p", str(proxy_pid), "-f", "raw", "-o", str(out), "-r", str(rate),
                            "-d", str(seconds + 1), "--nonblocking"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(1.0)
    if workload == "scatter":  # the scatter ORDER BY ... LIMIT 10 over 4 nodes (text protocol)
        db, ps_mode = "sharding_db", "disable"
        run = sysbench_run([str(SCATTER_LUA), *connection_args(port, db, "root"), "--table=t_order"],
                           seconds, threads, proxy_pid, db)
    else:
        run = sysbench_run([*sysbench_common(workload, port, db, "root", tables, table_size),
                            f"--db-ps-mode={ps_mode}"], seconds, threads, proxy_pid, db)
    spy_out = spy.communicate(timeout=120)[0].decode(errors="replace")
    if not out.exists():
        return f"py-spy wrote no profile:\n{spy_out[-2000:]}"
    total, self_, incl = aggregate_raw(out.read_text())
    if not total:
        return f"py-spy recorded no samples:\n{spy_out[-2000:]}"
    busy = total / (rate * (seconds + 1))
    lines = [f"py-spy record -p PID -f raw -r {rate} --nonblocking -d {seconds + 1}, during sysbench "
             f"{workload} --db-ps-mode={ps_mode} --threads={threads} through {db}: {describe(run)}",
             f"{total} samples of the proxy's threads while not idle (~{busy:.0%} of the wall time; samples in the "
             "event loop's poll are idle and not recorded); raw stacks: " + str(out),
             "", "| function | self % | inclusive % |", "|---|---|---|"]
    for key, n in self_.most_common(25):
        lines.append(f"| `{key}` | {100 * n / total:.1f} | {100 * incl[key] / total:.1f} |")
    lines += ["", "inclusive, top 25 (callers included):", "", "| function | inclusive % | self % |", "|---|---|---|"]
    for key, n in incl.most_common(25):
        lines.append(f"| `{key}` | {100 * n / total:.1f} | {100 * self_[key] / total:.1f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ report


def fmt(v: float | None, spec: str = ",.0f") -> str:
    return "-" if v is None else format(v, spec)


def table(cells: list[Cell]) -> str:
    head = ("| workload | protocol | thr | direct QPS | direct p95 ms | pass-through QPS | x direct | p95 ms "
            "| CPU us/q | sharded QPS | x direct | p95 ms | CPU us/q | sharded x pass-through |")
    lines = [head, "|" + "---|" * 14]
    for c in cells:
        row = [c.workload, PS_MODES[c.ps_mode], str(c.threads),
               fmt(c.med("direct", "qps")) + (" !" if c.flagged("direct") else ""),
               fmt(c.med("direct", "p95_ms"), ".2f")]
        for target in ("pass", "sharded"):
            row += [fmt(c.med(target, "qps")) + (" !" if c.flagged(target) else ""), fmt(c.ratio(target), ".2f"),
                    fmt(c.med(target, "p95_ms"), ".2f"), fmt(c.med(target, "cpu_us_per_query"), ".0f")]
        row.append(fmt(c.ratio("sharded", "pass"), ".2f"))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def relay_table(cells: list[Cell]) -> str:
    """Point select: direct, the reference relays and the pass-through proxy side by side."""
    names = [r for r in REFERENCE_RELAYS if any(r in c.runs for c in cells)]
    if not names:
        return ""
    head = "| protocol | thr | direct QPS | " + " | ".join(
        f"{REFERENCE_RELAYS[r]} QPS | x direct | CPU us/q" for r in names) + \
        " | pass-through QPS | x direct | x byte relay | CPU us/q |"
    lines = [head, "|" + "---|" * (3 + 3 * len(names) + 4)]
    for c in cells:
        if c.workload != "oltp_point_select":
            continue
        row = [PS_MODES[c.ps_mode], str(c.threads), fmt(c.med("direct", "qps"))]
        for r in names:
            row += [fmt(c.med(r, "qps")), fmt(c.ratio(r), ".2f"), fmt(c.med(r, "cpu_us_per_query"), ".0f")]
        pairs = zip(c.runs.get("byte-relay", []), c.runs.get("pass", []), strict=False)
        vs_relay = [p.qps / r.qps for r, p in pairs if r.qps]
        row += [fmt(c.med("pass", "qps")), fmt(c.ratio("pass"), ".2f"),
                fmt(statistics.median(vs_relay) if vs_relay else None, ".2f"),
                fmt(c.med("pass", "cpu_us_per_query"), ".0f")]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def stream_table(streams: list[Stream]) -> str:
    lines = ["| query | rows | s | rows/s | proxy CPU s | CPU us/row | base RSS MB | peak RSS MB | VmHWM MB |",
             "|" + "---|" * 9]
    for s in streams:
        per_row = s.cpu_s * 1e6 / s.rows if s.cpu_s is not None and s.rows else None
        err = f" ! {s.error[:80]}" if s.error else ""
        lines.append(f"| {s.label}{err} | {s.rows:,} | {s.seconds:.2f} | {s.rows_per_s:,.0f} | {fmt(s.cpu_s, '.2f')} "
                     f"| {fmt(per_row, '.2f')} | {fmt(s.baseline_mb, '.1f')} | {fmt(s.peak_mb, '.1f')} "
                     f"| {fmt(s.hwm_mb, '.1f')} |")
    return "\n".join(lines)


def targets(cells: list[Cell], streams: list[Stream], threads: Sequence[int]) -> str:
    top = max(threads)

    def cell(workload: str, mode: str, thr: int) -> Cell | None:
        return next((c for c in cells if (c.workload, c.ps_mode, c.threads) == (workload, mode, thr)), None)

    out = ["| target | measured | |", "|---|---|---|"]

    def row(name: str, value: float | None, text: str, ok: bool | None) -> None:
        verdict = "n/a" if ok is None else ("met" if ok else "MISSED")
        out.append(f"| {name} | {text if value is not None else '-'} | {verdict} |")

    c = cell("oltp_point_select", "auto", 4) or cell("oltp_point_select", "auto", top)
    r = c.ratio("pass") if c else None
    row(f"prepared point select, {c.threads if c else 4} threads, pass-through >= 0.5 x direct", r,
        f"{r:.2f} x" if r is not None else "", None if r is None else r >= 0.5)
    relay = c.ratio("byte-relay") if c else None
    if relay is not None:
        row("(reference, not a target: the byte relay, same rounds)", relay, f"{relay:.2f} x", None)
    cpu = c.med("pass", "cpu_us_per_query") if c else None
    row(f"proxy CPU <= 60 us per prepared point select (pass-through, {c.threads if c else 4} threads)", cpu,
        f"{cpu:.0f} us" if cpu is not None else "", None if cpu is None else cpu <= 60)
    for thr in sorted(threads):
        t = cell("oltp_point_select", "disable", thr)
        r = t.ratio("pass") if t else None
        row(f"text point select, {thr} thread(s), pass-through >= 0.4 x direct", r,
            f"{r:.2f} x" if r is not None else "", None if r is None else r >= 0.4)
    # the sharded / pass-through ratios (the other targets: the scatter and streaming tables, scatter_memory.py)
    for mode in PS_MODES:
        t = cell("oltp_point_select", mode, 4)
        r = t.ratio("sharded", "pass") if t else None
        row(f"{PS_MODES[mode]} sharded point select, 4 threads, >= 0.9 x pass-through (median of the rounds)", r,
            f"{r:.2f} x" if r is not None else "", None if r is None else r >= 0.9)
        cpu = t.med("sharded", "cpu_us_per_query") if t else None
        row(f"... proxy CPU <= 50 us per sharded {PS_MODES[mode]} point select", cpu,
            f"{cpu:.0f} us" if cpu is not None else "", None if cpu is None else cpu <= 50)
        t = cell("oltp_read_only", mode, 4)
        r = t.ratio("sharded", "pass") if t else None
        row(f"{PS_MODES[mode]} oltp_read_only, 4 threads, sharded >= 0.5 x pass-through (median of the rounds)", r,
            f"{r:.2f} x" if r is not None else "", None if r is None else r >= 0.5)
        t = cell("oltp_point_select", mode, 4)
        r = t.ratio("pass", "byte-relay") if t else None
        row(f"{PS_MODES[mode]} point select, 4 threads, pass-through >= 0.8 x the byte relay", r,
            f"{r:.2f} x" if r is not None else "", None if r is None else r >= 0.8)
    relay = next((s for s in streams if s.label.startswith("proxy single-node")), None)
    if relay:
        ok = relay.rows_per_s >= 1_000_000 and relay.peak_mb is not None and relay.peak_mb < 150
        row("streaming relay >= 1,000,000 rows/s, peak proxy RSS < 150 MB", relay.rows_per_s,
            f"{relay.rows_per_s:,.0f} rows/s, peak RSS {fmt(relay.peak_mb, '.1f')} MB", ok)
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ main


def serve_options() -> str:
    return subprocess.run([sys.executable, "-m", "proxy", "serve", "--help"], cwd=REPO, capture_output=True,
                          text=True, check=False).stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time", type=int, default=10, help="seconds per sysbench run (default 10)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--rounds", type=int, default=1, help="direct/pass-through/sharded repetitions per cell")
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    ap.add_argument("--tables", type=int, default=1, choices=range(1, 9))
    ap.add_argument("--table-size", type=int, default=10000)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the streaming tables")
    ap.add_argument("--quick", action="store_true", help="2 s runs, highest thread count, 200,000 rows")
    ap.add_argument("--profile", action="store_true", help="py-spy profile of the prepared point select")
    ap.add_argument("--profile-db", default="sbtest_pass", choices=("sbtest_pass", "sbtest"),
                    help="the logical database --profile runs the point select on (sbtest: the sharded one)")
    ap.add_argument("--profile-ps-mode", default="auto", choices=("auto", "disable"))
    ap.add_argument("--profile-workload", default="oltp_point_select", choices=(*WORKLOADS, "scatter"),
                    help="the workload --profile runs (scatter: the ORDER BY ... LIMIT 10 over 4 nodes)")
    ap.add_argument("--no-scatter", action="store_true", help="skip the scatter and streaming runs")
    ap.add_argument("--workers", type=int, default=None, help="pass --workers N to `proxy serve` (if it has it)")
    ap.add_argument("--no-sysbench", action="store_true", help="streaming and scatter only")
    ap.add_argument("--workdir", type=Path, default=None, help="keep configs, logs and results.json here")
    args = ap.parse_args(argv)
    if args.quick:
        args.time, args.threads, args.rows = min(args.time, 2), [max(args.threads)], min(args.rows, 200_000)
    extra: list[str] = []
    if args.workers is not None:
        if "--workers" not in serve_options():
            raise SystemExit("`python -m proxy serve` has no --workers option in this tree")
        extra = ["--workers", str(args.workers)]

    work = args.workdir or Path(tempfile.mkdtemp(prefix="shardproxy-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"machine: {machine()}\ntree: {git_revision()}\nworkdir: {work}", flush=True)
    print("command: python bench/suite.py " + " ".join(sys.argv[1:] if argv is None else argv), flush=True)
    servers = start_servers(2)
    a, b = servers
    try:
        version = a.execute("SELECT VERSION()")[0][0]
        for s in servers:
            # the streaming tables should be read from memory, not from the page cache
            s.execute("SET GLOBAL innodb_buffer_pool_size = 268435456")
            # A deadlock that spans the two data sources is invisible to each InnoDB: it ends in a lock wait
            # timeout (1205, ignored and retried by sysbench). 50 s (the default) would stall a 10 s run.
            s.execute(f"SET GLOBAL innodb_lock_wait_timeout = {LOCK_WAIT_TIMEOUT}")
        print(f"MariaDB {version} x2 (A: {a.port}, B: {b.port})", flush=True)
        load_sbtest(a, b, args.tables, args.table_size)
        t0 = time.monotonic()
        load_streams(a, servers, args.rows)
        print(f"loaded sbtest ({args.tables} x {args.table_size} rows) and {args.rows:,} streaming rows x2 "
              f"({time.monotonic() - t0:.1f} s)", flush=True)
        conf = write_conf(work / "conf", a, b)
        port = free_port()
        cells: list[Cell] = []
        streams: list[Stream] = []
        scatter: list[Run] = []
        profile = ""
        with proxy_process(conf, port, work / "proxy.log", extra) as proc, \
                reference_relays(a.port, work) as relays:
            pid = proc.pid
            print(f"proxy pid {pid} on port {port}{' ' + ' '.join(extra) if extra else ''}", flush=True)
            targets_ = {
                "direct": (a.port, "sbtest", a.password, None),
                "pass": (port, "sbtest_pass", "root", pid),
                "sharded": (port, "sbtest", "root", pid),
            }
            if not args.no_sysbench:
                for workload in args.workloads:
                    for mode in PS_MODES:
                        for threads in args.threads:
                            c = Cell(workload, mode, threads)
                            cells.append(c)
                            print(f"\n{workload} {PS_MODES[mode]} {threads} thread(s)", flush=True)
                            order = dict(targets_)
                            if workload == "oltp_point_select":  # the reference relays, after direct
                                order = {"direct": targets_["direct"],
                                         **{r: (rp, "sbtest", a.password, rpid) for r, (rp, rpid) in relays.items()},
                                         **{k: v for k, v in targets_.items() if k != "direct"}}
                            for i in range(args.rounds):
                                # every other round in the reverse order: a box whose pace drifts during a
                                # round favours neither of two targets compared
                                for name, (p, db, password, ppid) in (reversed(order.items()) if i % 2 else
                                                                      order.items()):
                                    run = sysbench_run([*sysbench_common(workload, p, db, password, args.tables,
                                                                         args.table_size), f"--db-ps-mode={mode}"],
                                                       args.time, threads, ppid, name)
                                    c.runs.setdefault(name, []).append(run)
                                    print("  " + describe(run), flush=True)

            print("\nscatter ORDER BY ... LIMIT 10 over 4 nodes", flush=True)
            for threads in [] if args.no_scatter else args.threads:
                for name, (p, db, password, ppid, tbl) in {
                    "1 node directly": (a.port, sm.PHYSICAL[0], a.password, None, "t_order_0"),
                    "proxy, 4 nodes": (port, "sharding_db", "root", pid, "t_order"),
                }.items():
                    run = sysbench_run([str(SCATTER_LUA), *connection_args(p, db, password), f"--table={tbl}"],
                                       args.time, threads, ppid, f"{name}, {threads} thr")
                    scatter.append(run)
                    print("  " + describe(run), flush=True)

            print("\nstreaming", flush=True)
            for label, p, db, password, ppid, sql in () if args.no_scatter else (
                ("direct single node (A.bench_stream)", a.port, "bench_stream", a.password, None,
                 "SELECT * FROM t_stream"),
                ("proxy single-node relay (pass-through)", port, "stream_pass", "root", pid, "SELECT * FROM t_stream"),
                ("proxy scatter concatenation (4 nodes)", port, "sharding_db", "root", pid, "SELECT * FROM t_order"),
                ("proxy scatter ORDER BY merge (4 nodes)", port, "sharding_db", "root", pid,
                 "SELECT * FROM t_order ORDER BY order_id"),
            ):
                s = stream(label, p, db, password, sql, ppid)
                streams.append(s)
                print(f"  {label}: {s.rows:,} rows in {s.seconds:.2f} s = {s.rows_per_s:,.0f} rows/s, peak RSS "
                      f"{fmt(s.peak_mb, '.1f')} MB{' ERROR ' + s.error if s.error else ''}", flush=True)

            if args.profile:
                print("\nprofiling ...", flush=True)
                profile = profile_point_select(port, pid, max(args.time, 10), max(args.threads), args.tables,
                                               args.table_size, work / f"pyspy-{args.profile_workload}.raw",
                                               db=args.profile_db, ps_mode=args.profile_ps_mode,
                                               workload=args.profile_workload)
            time.sleep(0.5)
        log_text = (work / "proxy.log").read_text(errors="replace")
        log_errors = [ln for ln in log_text.splitlines() if "error" in ln.lower() or "Traceback" in ln]

        print(f"\n## results ({git_revision()}, {time.monotonic() - started:.0f} s)\n")
        if cells:
            print(f"sysbench: --tables={args.tables} --table-size={args.table_size} --time={args.time} "
                  f"--report-interval=1, {args.rounds} round(s); QPS = median of 1-second intervals "
                  "(median over rounds); x direct = proxy / direct of the same round; ! = run with errors\n")
            print(table(cells))
            relays_ = relay_table(cells)
            if relays_:
                print("\npoint select through the reference relays (no MySQL awareness), same rounds:\n")
                print(relays_)
        print("\nscatter `" + SCATTER_SQL + "` (text protocol, sysbench lua):\n")
        print("| run | QPS | p95 ms | proxy CPU us/q |\n|---|---|---|---|")
        for r in scatter:
            print(f"| {r.target}{' !' if r.errors else ''} | {r.qps:,.0f} | {r.p95_ms:.2f} "
                  f"| {fmt(r.cpu_us_per_query, '.0f')} |")
        print(f"\nstreaming, client `mariadb --quick --batch` into a pipe ({args.rows:,} rows per table):\n")
        print(stream_table(streams))
        print("\ntargets (issues 8 and 15):\n")
        print(targets(cells, streams, args.threads))
        flagged = [(c, r) for c in cells for runs in c.runs.values() for r in runs if r.errors]
        flagged += [(None, r) for r in scatter if r.errors]
        if flagged:
            print("\nruns with errors:")
            for c, r in flagged:
                where = f"{c.workload} {PS_MODES[c.ps_mode]} {c.threads} thr " if c else ""
                print(f"\n--- {where}{r.target}: {'; '.join(r.errors)}\n{r.output_tail}")
        print(f"\nproxy log: {len(log_errors)} lines mentioning errors ({work / 'proxy.log'})")
        for ln in log_errors[:10]:
            print("  " + ln[:300])
        if profile:
            print("\n## profile\n")
            print(profile)
        (work / "results.json").write_text(json.dumps({
            "cells": [asdict(c) for c in cells], "scatter": [asdict(r) for r in scatter],
            "streams": [asdict(s) for s in streams], "mariadb": version, "machine": machine(),
            "tree": git_revision(), "args": {k: str(v) for k, v in vars(args).items()},
        }, indent=1))
        return 1 if flagged or any(s.error for s in streams) else 0
    finally:
        for server in servers:
            server.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
