"""`mariadb-dump` of a logical database through the proxy must restore, into one plain MariaDB, to the rows the
proxy serves (issue 34). Starts `shardproxy demo` (the repository's conf/: a sharded, a pass-through and a
read/write-split database over throwaway MariaDB servers), dumps each database named on the command line
through it, restores the dump into a throwaway MariaDB and compares every table's rows with what the proxy
answers. When the dump itself fails, the statements mariadb-dump sends are replayed one by one (no database
selected first, then the database) and each one the proxy refuses is printed, so that the whole list of what
stands in the way shows at once, not only the first.

  python3 tests/mtr/dump_check.py [sharding_db demo_db]

Exit code 0 when every database restored to the same rows.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from proxy.sandbox import MariaDBServer  # noqa: E402

USER, PASSWORD = "root", "root"  # conf/global.yaml's

# what mariadb-dump 10.11 sends before it selects the database (its general log), then per table
_BEFORE_USE = (
    "/*!40100 SET @@SQL_MODE='' */",
    "/*!40103 SET TIME_ZONE='+00:00' */",
    "/*M!100100 SET @@MAX_STATEMENT_TIME=0.000000 */",
    "/*M!100100 SET WAIT_TIMEOUT=DEFAULT */",
    "set optimizer_switch='semijoin=off'",
    "SELECT LOGFILE_GROUP_NAME, FILE_NAME, TOTAL_EXTENTS, INITIAL_SIZE, ENGINE, EXTRA FROM INFORMATION_SCHEMA.FILES"
    " WHERE FILE_TYPE = 'UNDO LOG' AND FILE_NAME IS NOT NULL AND LOGFILE_GROUP_NAME IS NOT NULL GROUP BY"
    " LOGFILE_GROUP_NAME, FILE_NAME, ENGINE, TOTAL_EXTENTS, INITIAL_SIZE ORDER BY LOGFILE_GROUP_NAME",
    "set optimizer_switch=default",
)
_PER_TABLE = (
    "SELECT engine, table_type FROM INFORMATION_SCHEMA.TABLES WHERE table_schema = DATABASE() AND table_name = '{t}'",
    "SET SQL_QUOTE_SHOW_CREATE=1",
    "SET SESSION character_set_results = 'binary'",
    "show create table `{t}`",
    "SET SESSION character_set_results = 'utf8mb4'",
    "select column_name, extra, generation_expression, data_type from information_schema.columns"
    " where table_schema=database() and table_name='{t}' order by ordinal_position",
    "SELECT /*!40001 SQL_NO_CACHE */ * FROM `{t}`",
    "select @@collation_database",
    "SELECT TRIGGER_NAME FROM INFORMATION_SCHEMA.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = DATABASE()"
    " AND EVENT_OBJECT_TABLE = '{t}'",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_demo(port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "demo", "--port", str(port)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"demo exited with {proc.returncode}: {log.read_text()[-2000:]}")
        if "Press Ctrl-C" in log.read_text(errors="replace"):
            return proc
        time.sleep(0.5)
    stop(proc)
    raise RuntimeError("demo did not start within 180 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C for the demo (it removes its servers), then SIGKILL if it does not end; by its own process group."""
    for sig, wait in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)


def rows(conn: pymysql.connections.Connection, table: str) -> list[tuple[object, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{table}`")
        return sorted(cur.fetchall(), key=repr)


def replay(port: int, database: str) -> list[str]:
    """Each statement of mariadb-dump's sequence that the proxy refuses, with its error."""
    failures: list[str] = []
    conn = pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, autocommit=True)

    def run(sql: str) -> list[tuple[object, ...]]:
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        except pymysql.MySQLError as exc:
            failures.append(f"{sql[:120]}  ->  {exc.args}")
            return []

    with conn:
        for sql in _BEFORE_USE:
            run(sql)
        conn.select_db(database)
        tables = [str(r[0]) for r in run("SHOW FULL TABLES")]
        run("LOCK TABLES " + ",".join(f"`{t}` READ /*!32311 LOCAL */" for t in tables))
        for t in tables:
            for sql in _PER_TABLE:
                run(sql.format(t=t))
        run("UNLOCK TABLES")
    return failures


def check(port: int, database: str, work: Path, target: MariaDBServer) -> bool:
    dump = work / f"{database}.sql"
    with dump.open("wb") as out:
        done = subprocess.run(
            ["mariadb-dump", "-h127.0.0.1", f"-P{port}", f"-u{USER}", f"-p{PASSWORD}", database],
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=300,
        )
    if done.returncode != 0:
        print(f"{database}: mariadb-dump failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")
        for line in replay(port, database):
            print(f"    refused: {line}")
        return False
    restored = f"restored_{database}"
    target.execute(f"CREATE DATABASE `{restored}`")
    with dump.open("rb") as src:
        load = subprocess.run(
            ["mariadb", "-h127.0.0.1", f"-P{target.port}", f"-u{target.user}", f"-p{target.password}", restored],
            stdin=src,
            stderr=subprocess.PIPE,
            timeout=300,
        )
    if load.returncode != 0:
        print(f"{database}: the dump does not load: {load.stderr.decode(errors='replace').strip()}")
        return False
    proxy = pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database=database)
    plain = target.connect(restored)
    same = True
    with proxy, plain, proxy.cursor() as cur:
        cur.execute("SHOW TABLES")
        for (table,) in cur.fetchall():
            a, b = rows(proxy, table), rows(plain, table)
            verdict = "same rows" if a == b else "DIFFERENT rows"
            same &= a == b
            print(f"{database}.{table}: {len(a)} rows through the proxy, {len(b)} restored: {verdict}")
    return same


def main(argv: Sequence[str]) -> int:
    databases = list(argv) or ["sharding_db", "demo_db"]
    work = Path(tempfile.mkdtemp(prefix="shardproxy-dump-check-"))
    port = free_port()
    demo = start_demo(port, work / "demo.log")
    target: MariaDBServer | None = None
    try:
        target = MariaDBServer.start(base_dir=work / "target")
        results = [check(port, db, work, target) for db in databases]
    finally:
        stop(demo)
        if target is not None:
            target.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print("all restored to the same rows" if all(results) else "NOT every database restored to the same rows")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
