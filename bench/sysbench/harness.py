"""Shared pieces of the sysbench benchmarks: sandbox servers, the proxy as a subprocess, sysbench itself.

The proxy runs as its own process (`python -m proxy serve --conf DIR --port P`), exactly as deployed, so
sysbench, the proxy and the servers each have their own interpreter / process. Nothing here is used by
the test suite: sysbench is installed for benchmark runs only (`apt-get install -y sysbench`).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONF_TEMPLATE = Path(__file__).resolve().parent / "conf"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from proxy.sandbox import MariaDBServer  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def render_sbtest_conf(conf: Path, servers: Sequence[MariaDBServer], physical: Sequence[str]) -> Path:
    """Copy `bench/sysbench/conf/` to `conf`, pointing ds_i's url at servers[i] / physical[i]."""
    conf.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONF_TEMPLATE / "global.yaml", conf / "global.yaml")
    text = (CONF_TEMPLATE / "database-sbtest.yaml").read_text()
    for i, (server, db) in enumerate(zip(servers, physical, strict=True)):
        text, n = re.subn(rf"(?m)^(\s*url:\s*)jdbc:mysql://127\.0\.0\.1:3306/sbtest_ds_{i}\?useSSL=false$",
                          lambda m, s=server, d=db: m.group(1) + s.jdbc_url(d), text)
        if n != 1:
            raise RuntimeError(f"conf template: no url line for ds_{i}")
    (conf / "database-sbtest.yaml").write_text(text)
    return conf


def write_passthrough_conf(conf: Path, server: MariaDBServer, physical: str, name: str = "sbtest") -> Path:
    conf.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONF_TEMPLATE / "global.yaml", conf / "global.yaml")
    (conf / f"database-{name}.yaml").write_text(
        f"databaseName: {name}\ndataSources:\n  ds_0:\n    url: {server.jdbc_url(physical)}\n"
        f"    username: {server.user}\n    password: {server.password}\n    maxPoolSize: 64\n    minPoolSize: 1\n"
    )
    return conf


def wait_listening(proc: subprocess.Popen[bytes], port: int, what: str, *, timeout: float = 20,
                   log: Path | None = None) -> None:
    """Until something accepts connections on 127.0.0.1:port; RuntimeError if `proc` exits first (with the
    tail of its `log`) or nothing listens within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = f":\n{log.read_text()[-3000:]}" if log is not None else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}{tail}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start listening within {timeout:.0f} s") from None
            time.sleep(0.1)


@contextmanager
def proxy_process(conf: Path, port: int, log: Path, extra: Sequence[str] = ()) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m proxy serve` on 127.0.0.1:port until the block ends; its output goes to `log`.

    `extra` are further `serve` options (e.g. ``["--workers", "2"]``).
    """
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--log-level", "WARNING", "serve", "--conf", str(conf), "--port",
             str(port), *extra],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        wait_listening(proc, port, "proxy", timeout=60, log=log)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sysbench_binary() -> str:
    path = shutil.which("sysbench")
    if path is None:
        raise SystemExit("sysbench is not installed: apt-get install -y sysbench")
    return path


def connection_args(port: int, database: str, password: str = "root") -> list[str]:
    return ["--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}", "--mysql-user=root",
            f"--mysql-password={password}", f"--mysql-db={database}"]


@dataclass
class SysbenchResult:
    command: list[str]
    returncode: int
    output: str
    transactions: int = 0
    tps: float = 0.0
    queries: int = 0
    qps: float = 0.0
    ignored_errors: int = 0
    reconnects: int = 0
    latency_avg_ms: float = 0.0
    latency_p95_ms: float = 0.0
    fatal: list[str] = field(default_factory=list)
    interval_qps: list[float] = field(default_factory=list)
    """QPS of each `--report-interval` line (empty without --report-interval)."""
    interval_errors: float = 0.0
    """Sum of the intervals' err/s (errors sysbench ignored and retried)."""
    ignored_by_code: dict[str, int] = field(default_factory=dict)
    """`CODE message` -> count, from the `Ignoring error` lines sysbench prints at --verbosity=5."""

    @property
    def median_qps(self) -> float:
        """Median of the per-interval QPS (the summary's QPS if there were no interval reports)."""
        return statistics.median(self.interval_qps) if self.interval_qps else self.qps

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.fatal

    def shell(self) -> str:
        return " ".join(self.command)


_NUM = r"([\d.]+)"
_IGNORING = re.compile(r"Ignoring error (\d+) ([^,\n]*)")
_INTERVAL = re.compile(r"(?m)^\[ *[\d.]+s \] thds: \d+ tps: [\d.]+ qps: ([\d.]+) .* err/s: ([\d.]+)")


def run_sysbench(args: Sequence[str], *, timeout: float = 600) -> SysbenchResult:
    command = [sysbench_binary(), *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    result = SysbenchResult(command, proc.returncode, out)

    def grab(pattern: str) -> re.Match[str] | None:
        return re.search(pattern, out)

    if m := grab(rf"transactions:\s+(\d+)\s+\({_NUM} per sec"):
        result.transactions, result.tps = int(m.group(1)), float(m.group(2))
    if m := grab(rf"queries:\s+(\d+)\s+\({_NUM} per sec"):
        result.queries, result.qps = int(m.group(1)), float(m.group(2))
    if m := grab(r"ignored errors:\s+(\d+)"):
        result.ignored_errors = int(m.group(1))
    if m := grab(r"reconnects:\s+(\d+)"):
        result.reconnects = int(m.group(1))
    if m := grab(rf"avg:\s+{_NUM}"):
        result.latency_avg_ms = float(m.group(1))
    if m := grab(rf"95th percentile:\s+{_NUM}"):
        result.latency_p95_ms = float(m.group(1))
    for m in _INTERVAL.finditer(out):
        result.interval_qps.append(float(m.group(1)))
        result.interval_errors += float(m.group(2))
    for m in _IGNORING.finditer(out):  # printed with --verbosity=5
        key = f"{m.group(1)} {m.group(2).strip()}"
        result.ignored_by_code[key] = result.ignored_by_code.get(key, 0) + 1
    result.fatal = [ln for ln in out.splitlines()
                    if "FATAL" in ln or ("error" in ln.lower() and "ignored" not in ln and "Ignoring error" not in ln)]
    return result


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (from /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                pass
    return out


def cpu_seconds(pid: int, *, tree: bool = True) -> float:
    """utime + stime of `pid` (and, with `tree`, of its live descendants: `--workers` processes)."""
    total = 0
    for p in process_tree(pid) if tree else [pid]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    version = subprocess.run([sysbench_binary(), "--version"], capture_output=True, text=True, check=False).stdout
    return (f"{os.cpu_count()} cores ({cpu}), {int(mem) // 1024} MB RAM, Linux {platform.release()}, "
            f"Python {platform.python_version()}, {version.strip()}")


def git_revision() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                           text=True, check=False).stdout.strip()
    return head + (" + uncommitted edits" if dirty else "")
