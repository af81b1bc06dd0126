"""Reading a large scatter result through the proxy keeps the proxy's memory flat.

Starts two sandbox MariaDB servers, a sharded `sharding_db` (2 data sources x 2 tables, `t_order` by
``user_id % 2`` / ``order_id % 2``), runs the proxy as a SUBPROCESS (`python -m proxy serve`) so its RSS is
measured alone, bulk-loads N rows straight into the four actual tables (``INSERT ... SELECT`` from the
SEQUENCE engine's ``seq_1_to_N``), then reads through the proxy with an unbuffered PyMySQL `SSCursor`:

* ``SELECT * FROM t_order``                          (concatenation: raw row payloads relayed)
* ``SELECT * FROM t_order ORDER BY order_id``        (streaming k-way merge)
* ``SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id``   (stream group-by merge, 100 groups)

while a thread samples the proxy's VmRSS every 50 ms from ``/proc/<pid>/status`` (VmHWM is reset before
each query through ``/proc/<pid>/clear_refs`` and read after it). A direct read of one backend table gives
a rows/s reference for the client itself.

    python bench/scatter_memory.py [--rows 1000000] [--client mariadb] [--rounds 3] [--queries concat order-by-merge]

``--client mariadb`` reads with the MariaDB command-line client (``mariadb --quick --batch``: mysql_use_result,
rows counted from its output pipe) instead of PyMySQL, whose per-row cost in Python caps a read at a few
hundred thousand rows/s, below what the proxy relays. ``--client raw`` sends the query on a socket PyMySQL logged
in and counts the answer's row frames without decoding them (`read_raw`), so that the client's own per-row work
(the mariadb client prints every value) is out of the measure. The proxy's CPU per row (utime+stime during the
query / rows) is the figure that a loaded machine moves least.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pymysql.cursors

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from proxy.sandbox import MariaDBServer, start_servers  # noqa: E402

sys.path.insert(0, str(REPO / "bench" / "sysbench"))
from harness import proxy_process  # noqa: E402

PHYSICAL = ("bench_ds_0", "bench_ds_1")
USERS = 100

RULES = """rules:
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order_${0..1}
      databaseStrategy:
        standard:
          shardingColumn: user_id
          shardingAlgorithmName: database_inline
      tableStrategy:
        standard:
          shardingColumn: order_id
          shardingAlgorithmName: t_order_inline
  shardingAlgorithms:
    database_inline:
      type: INLINE
      props:
        algorithm-expression: ds_${user_id % 2}
    t_order_inline:
      type: INLINE
      props:
        algorithm-expression: t_order_${order_id % 2}
"""

DDL = """CREATE TABLE t_order (
    order_id BIGINT NOT NULL PRIMARY KEY,
    user_id INT NOT NULL,
    status VARCHAR(45) NOT NULL,
    amount DECIMAL(10,2) NULL,
    created DATETIME NULL,
    note VARCHAR(100) NULL
) ENGINE=InnoDB"""

# Row k (1..N): order_id = k, user_id = (k >> 1) % USERS, so the four nodes get a quarter each.
ROWS = """INSERT INTO {table}
SELECT seq, (seq >> 1) % {users}, ELT(1 + seq % 3, 'paid', 'pending', 'shipped'),
       (seq % 100000) / 100, '2024-01-01' + INTERVAL (seq % 500000) MINUTE,
       IF(seq % 10 = 0, NULL, CONCAT('note ', seq))
FROM seq_1_to_{rows}"""
"""All N rows into one table (`bench/suite.py`'s single-node relay uses it as is)."""
LOAD = ROWS + " WHERE seq % 2 = {t} AND ((seq >> 1) % {users}) % 2 = {ds}"

QUERIES = (
    ("concat", "SELECT * FROM t_order"),
    ("order-by merge", "SELECT * FROM t_order ORDER BY order_id"),
    ("group-by merge", "SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id"),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


class RssSampler:
    """Samples VmRSS of `pid` every `interval` seconds on a thread; `peak_kb` is the largest seen."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kb = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, status_kb(self.pid, "VmRSS"))
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, status_kb(self.pid, "VmRSS"))


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (fields 14 and 15 of /proc/PID/stat, after the parenthesised name)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reset_hwm(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0, `echo 5 > /proc/PID/clear_refs`)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


@dataclass
class Measure:
    label: str
    sql: str
    rows: int
    seconds: float
    baseline_mb: float | None = None
    peak_mb: float | None = None
    hwm_mb: float | None = None
    cpu_s: float | None = None

    def line(self) -> str:
        def mb(v: float | None) -> str:
            return f"{v:8.1f}" if v is not None else "       -"

        per_row = f"{1e6 * self.cpu_s / self.rows:6.2f}" if self.cpu_s is not None and self.rows else "     -"
        return (f"| {self.label:<26} | {self.rows:>9} | {self.seconds:7.2f} | {self.rows / self.seconds:>9,.0f} "
                f"| {mb(self.baseline_mb)} | {mb(self.peak_mb)} | {mb(self.hwm_mb)} | {mb(self.cpu_s)}    "
                f"| {per_row}     |")


HEADER = (
    "| query                      |      rows |       s |    rows/s | base MB  | peak MB  | HWM MB   | proxy CPU s "
    "| CPU us/row |\n"
    "|----------------------------|-----------|---------|-----------|----------|----------|----------|-------------"
    "|------------|"
)


def read_all(conn: pymysql.connections.Connection, sql: str) -> int:  # type: ignore[type-arg]
    n = 0
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(sql)
        while batch := cur.fetchmany(5000):
            n += len(batch)
    return n


def read_mariadb(port: int, db: str, password: str, sql: str) -> int:
    """`sql` read by `mariadb --quick --batch` into a pipe; the rows it printed (one line each)."""
    client = shutil.which("mariadb") or shutil.which("mysql")
    if client is None:
        raise SystemExit("--client mariadb needs the MariaDB command-line client (apt-get install mariadb-client)")
    cmd = [client, "--protocol=TCP", "-h127.0.0.1", f"-P{port}", "-uroot", f"-p{password}", "--quick", "--batch",
           "--skip-column-names", db, "-e", sql]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    rows = 0
    while chunk := proc.stdout.read(1 << 20):
        rows += chunk.count(b"\n")
    if proc.wait():
        raise RuntimeError(f"{client} failed: {proc.stderr.read().decode(errors='replace') if proc.stderr else ''}")
    return rows


def read_raw(port: int, db: str, password: str, sql: str) -> int:
    """`sql` sent as one COM_QUERY on a connection PyMySQL logged in, its answer read off the socket in 1 MB reads and
    its rows counted by their frames (`protocol.rowframes.scan_rows`, in C when built), nothing decoded: a client that
    costs next to nothing a row, so that what is measured is what the proxy (or the server) delivers."""
    from protocol.rowframes import scan_rows

    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password=password, database=db)
    try:
        sock = conn._sock
        assert sock is not None
        payload = b"\x03" + sql.encode()
        sock.sendall(len(payload).to_bytes(3, "little") + b"\x00" + payload)
        buf = bytearray()

        def packet() -> bytes:  # the next whole packet of the header (small)
            while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:3], "little"):
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("the server closed the connection")
                buf.extend(chunk)
            n = int.from_bytes(buf[:3], "little")
            body = bytes(buf[4:4 + n])
            del buf[:4 + n]
            return body

        first = packet()
        if first[0] == 0xFF:
            raise RuntimeError(f"error: {first[3:].decode(errors='replace')}")
        columns = first[0]  # (fewer than 251 columns here)
        for _ in range(columns):
            packet()
        if buf[4:5] == b"\xfe" and int.from_bytes(buf[:3], "little") < 9:
            packet()  # the EOF after the column definitions (PyMySQL does not ask for CLIENT_DEPRECATE_EOF)
        rows = 0
        while True:
            stop, n, ended = scan_rows(buf, 0)
            rows += n
            if ended:
                if buf[4] == 0xFF:
                    raise RuntimeError(f"error after {rows} rows: {bytes(buf[7:]).decode(errors='replace')}")
                return rows
            del buf[:stop]
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the server closed the connection")
            buf.extend(chunk)
    finally:
        conn.close()


def write_conf(conf: Path, servers: list[MariaDBServer]) -> None:
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "global.yaml").write_text(
        "authority:\n  users:\n    - user: root@%\n      password: root\n      admin: true\nprops:\n"
        "  sql-show: false\n"
    )
    sources = "".join(
        f"  ds_{i}:\n    url: {s.jdbc_url(PHYSICAL[i])}\n    username: {s.user}\n    password: {s.password}\n"
        f"    maxPoolSize: 10\n    minPoolSize: 1\n"
        for i, s in enumerate(servers)
    )
    (conf / "database-sharding.yaml").write_text(f"databaseName: sharding_db\ndataSources:\n{sources}{RULES}")


def load(servers: list[MariaDBServer], rows: int) -> float:
    start = time.perf_counter()

    def one(ds: int, server: MariaDBServer) -> None:
        conn = server.connect(PHYSICAL[ds])
        try:
            with conn.cursor() as cur:
                for t in (0, 1):
                    cur.execute(LOAD.format(table=f"t_order_{t}", users=USERS, rows=rows, t=t, ds=ds))
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate(servers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - start


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    return (f"{os.cpu_count()} cores ({cpu}), {int(mem) // 1024} MB RAM, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in t_order (default 1000000)")
    parser.add_argument("--client", choices=("pymysql", "mariadb", "raw"), default="pymysql")
    parser.add_argument("--rounds", type=int, default=1, help="reads of each query (each measured)")
    parser.add_argument("--queries", nargs="+", choices=[q[0].replace(" ", "-") for q in QUERIES],
                        default=[q[0].replace(" ", "-") for q in QUERIES])
    args = parser.parse_args(argv)
    n: int = args.rows
    queries = [q for q in QUERIES if q[0].replace(" ", "-") in args.queries]

    spec = importlib.util.find_spec("protocol.rowframes")
    build = "mypyc-compiled" if spec and spec.origin and spec.origin.endswith(".so") else "pure Python"
    print(f"machine: {machine()}\nbuild: {build} (pyproject.toml [tool.shardproxy] mypyc)", flush=True)
    servers = start_servers(2)
    try:
        print(f"MariaDB {servers[0].execute('SELECT VERSION()')[0][0]} x2 started", flush=True)
        for server, physical in zip(servers, PHYSICAL, strict=True):
            server.execute(f"CREATE DATABASE {physical}")
        with tempfile.TemporaryDirectory(prefix="shardproxy-bench-") as tmp:
            conf = Path(tmp) / "conf"
            write_conf(conf, servers)
            port = free_port()
            with proxy_process(conf, port, Path(tmp) / "proxy.log") as proc:
                def connect() -> pymysql.connections.Connection:  # type: ignore[type-arg]
                    return pymysql.connect(host="127.0.0.1", port=port, user="root", password="root",
                                           database="sharding_db", autocommit=True)

                with connect() as conn, conn.cursor() as cur:
                    cur.execute(DDL)
                print(f"loading {n} rows into 2 x 2 actual tables ...", flush=True)
                print(f"loaded in {load(servers, n):.1f} s", flush=True)
                with connect() as conn, conn.cursor() as cur:
                    cur.execute("SELECT COUNT(*) FROM t_order")
                    total = cur.fetchone()[0]  # type: ignore[index]
                assert total == n, f"loaded {total} rows, expected {n}"

                results: list[Measure] = []
                for label, sql in queries * args.rounds:
                    with connect() as conn:
                        read_all(conn, "SELECT 1")  # session and backend connections opened before the baseline
                        time.sleep(0.5)
                        baseline = status_kb(proc.pid, "VmRSS") / 1024
                        hwm_ok = reset_hwm(proc.pid)
                        cpu0 = cpu_seconds(proc.pid)
                        with RssSampler(proc.pid) as sampler:
                            t0 = time.perf_counter()
                            if args.client == "mariadb":
                                rows = read_mariadb(port, "sharding_db", "root", sql)
                            elif args.client == "raw":
                                rows = read_raw(port, "sharding_db", "root", sql)
                            else:
                                rows = read_all(conn, sql)
                            seconds = time.perf_counter() - t0
                        hwm = status_kb(proc.pid, "VmHWM") / 1024 if hwm_ok else None
                        cpu = cpu_seconds(proc.pid) - cpu0
                    results.append(Measure(f"proxy {label}", sql, rows, seconds, baseline, sampler.peak_kb / 1024,
                                           hwm, cpu))
                    print(results[-1].line(), flush=True)

                direct = "SELECT * FROM t_order_0"
                for _ in range(args.rounds):
                    t0 = time.perf_counter()
                    if args.client == "mariadb":
                        rows = read_mariadb(servers[0].port, PHYSICAL[0], servers[0].password, direct)
                    elif args.client == "raw":
                        rows = read_raw(servers[0].port, PHYSICAL[0], servers[0].password, direct)
                    else:
                        conn = servers[0].connect(PHYSICAL[0])
                        try:
                            rows = read_all(conn, direct)
                        finally:
                            conn.close()
                    results.append(Measure("direct ds_0.t_order_0", direct, rows, time.perf_counter() - t0))
                proxy_start_hwm = status_kb(proc.pid, "VmHWM") / 1024

        print()
        print(f"rows loaded: {n}; client: {args.client}; proxy VmHWM at the end (since the last reset): "
              f"{proxy_start_hwm:.1f} MB")
        print(HEADER)
        for m in results:
            print(m.line())
        for m in results:
            print(f"  {m.label}: {m.sql}")
    finally:
        for server in servers:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
