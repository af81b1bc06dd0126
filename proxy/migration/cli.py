"""`shardproxy migrate start|status|check|commit|rollback`: the migration statements for operators who script
them. The command talks to the running proxy (the address and an admin user from `--conf`, or given) and
shows a progress bar while it waits; exit status 0 when the step succeeded, 1 when a check found mismatches
or the job failed, 3 when the proxy cannot be reached or refuses."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

ACTIONS = ("start", "status", "check", "commit", "rollback")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("migrate", help="run a resharding migration through a running proxy (MIGRATE TABLE ...)")
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("--conf", type=Path, default=Path("conf"), help="the proxy's configuration directory")
    p.add_argument("--database", required=True, help="logical database")
    p.add_argument("--table", required=True, help="logic table (its rule must have a resharding window)")
    p.add_argument("--job", default=None, help="job id (default: the table's latest job)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default: props.proxy-default-port of --conf")
    p.add_argument("--user", default=None, help="default: the first admin user of --conf")
    p.add_argument("--password", default=None)
    p.add_argument("--wait", action="store_true", help="start/status: wait until the copy is ready")
    p.set_defaults(func=run)


def _login(args: argparse.Namespace) -> tuple[int, str, str]:
    port, user, password = args.port, args.user, args.password
    if port is None or user is None:
        from proxy.config import load_config

        config = load_config(args.conf)
        port = port if port is not None else config.port
        admin = next((u for u in config.users if u.admin), None)
        if user is None and admin is not None:
            user, password = admin.user, password if password is not None else admin.password
    return int(port), user or "root", password or ""


def bar(status: dict[str, Any], width: int = 30) -> str:
    total = max(int(status["rows_total"]), 1)
    done = min(int(status["rows_scanned"]), total)
    filled = int(width * done / total)
    return (f"[{'#' * filled}{'.' * (width - filled)}] {100 * done // total:3d}% {done}/{total} rows, "
            f"{status['rows_copied']} copied, {status['rows_per_second']} rows/s, ETA {status['eta_seconds']} s, "
            f"{status['phase']}")


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    import pymysql

    port, user, password = _login(args)
    try:
        conn = pymysql.connect(host=args.host, port=port, user=user, password=password, database=args.database,
                               autocommit=True, cursorclass=pymysql.cursors.DictCursor)
    except pymysql.err.OperationalError as exc:
        print(f"shardproxy migrate: no proxy at {args.host}:{port}: {exc}", file=sys.stderr)
        return 3
    try:
        with conn.cursor() as cur:
            return _step(cur, args, out)
    except pymysql.err.MySQLError as exc:
        print(f"shardproxy migrate {args.action}: {exc.args[-1] if exc.args else exc}", file=sys.stderr)
        return 3
    finally:
        conn.close()


def _job(cur: Any, args: argparse.Namespace) -> str:
    if args.job:
        return str(args.job)
    cur.execute("SHOW MIGRATION LIST")
    jobs = [r for r in cur.fetchall() if r["database"] == args.database and r["tables"] == args.table]
    if not jobs:
        raise SystemExit(f"shardproxy migrate: no migration of {args.database}.{args.table}; run migrate start")
    return str(jobs[-1]["id"])


def _status(cur: Any, job: str) -> dict[str, Any]:
    cur.execute(f"SHOW MIGRATION STATUS '{job}'")
    return dict(cur.fetchone())


def _step(cur: Any, args: argparse.Namespace, out: TextIO) -> int:
    if args.action == "start":
        cur.execute(f"MIGRATE TABLE `{args.table}` FROM `{args.database}`")
        job = str(cur.fetchone()["id"])
        print(f"migration {job} started", file=out)
    else:
        job = _job(cur, args)
    if args.action in ("start", "status"):
        status = _status(cur, job)
        while args.wait and status["phase"] == "copying":
            print("\r" + bar(status), end="", file=out, flush=True)
            time.sleep(0.5)
            status = _status(cur, job)
        print(("\r" if args.wait else "") + bar(status), file=out)
        if status.get("error"):
            print(f"error: {status['error']}", file=out)
        return 1 if status["phase"] == "failed" else 0
    if args.action == "check":
        cur.execute(f"CHECK MIGRATION '{job}'")
        cur.execute(f"SHOW MIGRATION CHECK STATUS '{job}'")
        rows = cur.fetchall()
        for r in rows:
            verdict = "ok" if r["result"] == "true" else "MISMATCH"
            print(f"{r['source_data_node']} -> {r['target_data_node']}: {r['source_rows']}/{r['target_rows']} rows, "
                  f"crc32 {r['source_checksum']}/{r['target_checksum']}: {verdict}"
                  + (f" ({r['mismatched_keys']})" if r["mismatched_keys"] else ""), file=out)
        return 0 if all(r["result"] == "true" for r in rows) else 1
    if args.action == "commit":
        cur.execute(f"COMMIT MIGRATION '{job}'")
        status = _status(cur, job)
        print(f"migration {job} committed: writes paused {status['commit_pause_ms']} ms, "
              f"{status['rows_deleted']} old copies deleted", file=out)
        return 0
    cur.execute(f"ROLLBACK MIGRATION '{job}'")
    print(f"migration {job} rolled back: {_status(cur, job)['rows_deleted']} copies deleted", file=out)
    return 0
