"""`GET /status` (an HTML page) and `GET /status.json` (the same data) on the metrics port.

What an operator looks at first: the logical databases with their rules and data sources (replicas with
health and lag, pools with connections in use, idle and waiting), the sessions and what they run, the top
query digests, the XA branches in doubt and the resharding jobs. Every number is taken from the code that
answers the SQL statement showing the same thing (SHOW STORAGE UNITS, SHOW PROCESSLIST, SHOW TRANSACTION IN
DOUBT, SHOW MIGRATION STATUS, SHOW SHARDING TABLE RULES), so that the page and the SQL never disagree.

The page is rendered here, carries no external asset (a proxy's host often has no internet), and refreshes
itself: a small inline script fetches the page's body again every few seconds (a `<noscript>` meta refresh
does it without scripts).
"""

from __future__ import annotations

import asyncio
import html
import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from proxy.ops.view import OpsServer as ProxyServer

log = structlog.get_logger("shardproxy.status")

REFRESH_SECONDS = 3
SLOW_PART_SECONDS = 2.0  # XA RECOVER on an unreachable server must not hold the page
TOP_DIGESTS = 10

# The query digests (issue 37, item 1) are another module's: it registers a function giving the top digests
# as dicts (sorted by total time); until then the page says there are none to show.
DigestProvider = Callable[["ProxyServer", int], Sequence[dict[str, Any]]]
_digest_provider: DigestProvider | None = None


def set_digest_provider(provider: DigestProvider | None) -> None:
    """Where the status page takes its top digests from (None: the section says digests are not counted)."""
    global _digest_provider
    _digest_provider = provider


# --- the data ------------------------------------------------------------------------------------------------


async def snapshot(server: ProxyServer) -> dict[str, Any]:
    """Everything the page shows, as JSON-able data."""
    in_doubt, migrations = await asyncio.gather(_slow(_in_doubt(server)), _slow(_migrations(server)))
    return {
        "version": server.server_version,
        "uptime_seconds": round(time.monotonic() - server.started_monotonic, 1),
        "draining": server.draining,
        "databases": [_database(name, db) for name, db in sorted(server.databases_by_name.items())],
        "sessions": _sessions(server),
        "digests": _digests(server),
        "xa_in_doubt": in_doubt,
        "migrations": migrations,
    }


async def _slow(work: Any) -> Any:
    """A part that asks the data sources: past SLOW_PART_SECONDS the page says so instead of waiting (the
    work is not cancelled: a statement cut short on an admin connection would leave its answer behind)."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait((task,), timeout=SLOW_PART_SECONDS)
    if not done:
        return {"error": f"no answer within {SLOW_PART_SECONDS:g} s"}
    try:
        return task.result()
    except Exception as exc:
        log.warning("status_part_failed", error=str(exc))
        return {"error": str(exc)}


def _database(name: str, db: Any) -> dict[str, Any]:
    from proxy.backends.readwrite import ReadWriteGroup, storage_unit_rows
    from proxy.session.admin import STORAGE_UNIT_COLUMNS, storage_units
    from routing.admin import TABLE_RULE_COLUMNS, table_rule_rows

    rules: list[dict[str, Any]] = []
    for row in table_rule_rows(db.rules):
        r = dict(zip(TABLE_RULE_COLUMNS, row, strict=True))
        table = db.rules.sharding.tables[str(r["table"]).lower()] if db.rules.sharding is not None else None
        rules.append(
            {
                "table": r["table"],
                "type": "sharding",
                "data_sources": r["actual_data_sources"],
                "nodes": len(table.data_nodes) if table is not None else 0,
                "sharding": ", ".join(c for c in (r["database_sharding_column"], r["table_sharding_column"]) if c),
                "resharding": bool(r["old_database_strategy_type"] or r["old_table_strategy_type"]),
            }
        )
    for table in sorted(db.rules.broadcast.tables):
        rules.append(
            {
                "table": table,
                "type": "broadcast",
                "data_sources": ", ".join(db.rules.data_sources),
                "nodes": len(db.rules.data_sources),
                "sharding": "",
                "resharding": False,
            }
        )
    waiters: dict[str, int] = {}
    roles: dict[str, str] = {}
    for ds_name, source in db.sources.items():
        members = storage_unit_rows(source) if isinstance(source, ReadWriteGroup) else [(ds_name, source, None)]
        for i, (member, member_source, _status) in enumerate(members):
            waiters[member] = int(member_source.waiters)
            roles[member] = (
                ds_name
                if not isinstance(source, ReadWriteGroup)
                else (f"{ds_name}: primary" if i == 0 else f"{ds_name}: replica")
            )
    units = []
    for row in storage_units(db):
        u = dict(zip(STORAGE_UNIT_COLUMNS, row, strict=True))
        units.append(
            {
                "name": u["name"],
                "group": roles.get(str(u["name"]), ""),
                "address": f"{u['host']}:{u['port']}/{u['db']}",
                "status": u["status"],
                "status_detail": u["status_detail"],
                "lag_seconds": u["replication_lag_seconds"],
                "in_use": u["connections_in_use"],
                "idle": u["connections_idle"],
                "waiters": waiters.get(str(u["name"]), 0),
                "max": u["max_pool_size"],
            }
        )
    return {
        "name": name,
        "mode": "pass-through" if db.kernel is None else "sharding",
        "rules": rules,
        "data_sources": units,
    }


def _sessions(server: ProxyServer) -> list[dict[str, Any]]:
    """This proxy's sessions, as SHOW PROCESSLIST lists them (proxy.session.processlist)."""
    now = time.monotonic()
    return [
        {
            "id": s.id,
            "user": s.user,
            "host": s.client_host,
            "db": s.database.name if s.database else None,
            "command": s.command,
            "time": int(now - s.command_started),
            "info": s.info,
        }
        for s in sorted(server.sessions.values(), key=lambda x: x.id)
    ]


def _digests(server: ProxyServer) -> list[dict[str, Any]] | None:
    if _digest_provider is None:
        return None
    try:
        return [dict(d) for d in _digest_provider(server, TOP_DIGESTS)]
    except Exception as exc:
        log.warning("status_digests_failed", error=str(exc))
        return None


async def _in_doubt(server: ProxyServer) -> list[dict[str, Any]]:
    """SHOW TRANSACTION IN DOUBT's rows (XA RECOVER on the sharded databases' servers)."""
    from proxy.backends.xa import IN_DOUBT_COLUMNS

    return [dict(zip(IN_DOUBT_COLUMNS, row, strict=True)) for row in await server.tm.in_doubt_rows()]


async def _migrations(server: ProxyServer) -> list[dict[str, Any]]:
    """SHOW MIGRATION STATUS of every job this proxy knows, with its progress."""
    from proxy.session.distsql import migration

    out = []
    for job in list(migration._jobs(server).values()):
        row = dict(zip(migration.STATUS_COLUMNS, migration._status(job), strict=True))
        total, scanned = int(row["rows_total"] or 0), int(row["rows_scanned"] or 0)
        row["database"] = job.db.name
        row["percent"] = (
            100.0
            if row["phase"] not in ("copying",) and not total
            else (round(min(100.0, 100.0 * scanned / total), 1) if total else 0.0)
        )
        out.append(row)
    return out


# --- the page ------------------------------------------------------------------------------------------------


async def json_page(server: ProxyServer) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(await snapshot(server), indent=1, default=str).encode() + b"\n"


async def page(server: ProxyServer) -> tuple[int, str, bytes]:
    return 200, "text/html; charset=utf-8", render(await snapshot(server)).encode()


async def main_part(server: ProxyServer) -> tuple[int, str, bytes]:
    """The page's `<main>` alone: what its script fetches to refresh it."""
    return 200, "text/html; charset=utf-8", render_body(await snapshot(server)).encode()


def _e(value: Any) -> str:
    return "" if value is None else html.escape(str(value))


def _table(
    kind: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[dict[str, Any]],
    key: str,
    empty: str,
    cell: Callable[[str, dict[str, Any]], str] | None = None,
) -> str:
    """A table whose rows carry `data-<kind>="<key value>"` and cells `data-k="<column>"` (what tests read)."""
    if not rows:
        return f'<p class="empty" data-empty="{kind}">{_e(empty)}</p>'
    head = "".join(f"<th>{_e(title)}</th>" for _k, title in columns)
    body = []
    for row in rows:
        cells = "".join(f'<td data-k="{k}">{cell(k, row) if cell else _e(row.get(k))}</td>' for k, _t in columns)
        body.append(f'<tr data-{kind}="{_e(row.get(key))}">{cells}</tr>')
    return f'<table class="{kind}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _unit_cell(k: str, row: dict[str, Any]) -> str:
    if k == "status":
        state = str(row.get("status") or "")
        detail = f" ({_e(row['status_detail'])})" if row.get("status_detail") else ""
        return f'<span class="{"ok" if state == "enabled" else "bad"}">{_e(state)}</span>{detail}'
    return _e(row.get(k))


def _migration_cell(k: str, row: dict[str, Any]) -> str:
    if k == "percent":
        pct = float(row.get("percent") or 0.0)
        return (
            f'<div class="bar" role="progressbar" aria-valuenow="{pct:g}" aria-valuemin="0" '
            f'aria-valuemax="100"><div style="width:{pct:g}%"></div></div> {pct:g}%'
        )
    return _e(row.get(k))


def render_body(data: dict[str, Any]) -> str:
    """The page's `<main>`: also what the page's script fetches to refresh itself."""
    parts = [
        f'<p class="summary">shardproxy {_e(data["version"])} · up <span id="uptime">'
        f'{_e(data["uptime_seconds"])}</span> s · <span id="session-count">{len(data["sessions"])}</span> '
        f'sessions · <span id="running-count">'
        f"{sum(1 for s in data['sessions'] if s['command'] not in ('Sleep', 'Connect'))}</span> running"
        + (' · <strong class="bad" id="draining">draining</strong>' if data["draining"] else "")
        + "</p>"
    ]
    parts.append("<h2>Logical databases</h2>")
    for db in data["databases"]:
        parts.append(
            f'<section class="database" data-database="{_e(db["name"])}"><h3>{_e(db["name"])} '
            f"<small>{_e(db['mode'])}</small></h3>"
        )
        parts.append(
            "<h4>Rules</h4>"
            + _table(
                "rule",
                [
                    ("table", "table"),
                    ("type", "type"),
                    ("data_sources", "data sources"),
                    ("nodes", "data nodes"),
                    ("sharding", "sharding columns"),
                    ("resharding", "resharding window"),
                ],
                db["rules"],
                "table",
                "no rules: statements pass through",
            )
        )
        parts.append(
            "<h4>Data sources, replicas and pools</h4>"
            + _table(
                "unit",
                [
                    ("name", "name"),
                    ("group", "role"),
                    ("address", "address"),
                    ("status", "health"),
                    ("lag_seconds", "lag (s)"),
                    ("in_use", "in use"),
                    ("idle", "idle"),
                    ("waiters", "waiting"),
                    ("max", "max"),
                ],
                db["data_sources"],
                "name",
                "none",
                _unit_cell,
            )
        )
        parts.append("</section>")
    parts.append(
        "<h2>Sessions</h2>"
        + _table(
            "session",
            [
                ("id", "id"),
                ("user", "user"),
                ("host", "host"),
                ("db", "db"),
                ("command", "command"),
                ("time", "time (s)"),
                ("info", "statement"),
            ],
            data["sessions"],
            "id",
            "no sessions",
        )
    )
    parts.append("<h2>Top query digests</h2>")
    digests = data["digests"]
    if digests is None:
        parts.append('<p class="empty" data-empty="digest">query digests are not counted by this proxy</p>')
    else:
        columns = list(dict.fromkeys(k for d in digests for k in d))
        parts.append(
            _table(
                "digest",
                [(c, c.replace("_", " ")) for c in columns],
                digests,
                columns[0] if columns else "",
                "no statements yet",
            )
        )
    parts.append("<h2>XA transactions in doubt</h2>")
    parts.append(
        _part(
            "xa",
            data["xa_in_doubt"],
            [
                ("xid", "xid"),
                ("gtrid", "gtrid"),
                ("data_source", "data source"),
                ("server", "server"),
                ("state", "state"),
                ("decision", "decision"),
                ("detail", "detail"),
            ],
            "xid",
            "none",
            None,
        )
    )
    parts.append("<h2>Resharding jobs</h2>")
    parts.append(
        _part(
            "migration",
            data["migrations"],
            [
                ("id", "job"),
                ("database", "database"),
                ("table", "table"),
                ("phase", "phase"),
                ("percent", "progress"),
                ("rows_scanned", "rows scanned"),
                ("rows_total", "rows"),
                ("rows_per_second", "rows/s"),
                ("eta_seconds", "ETA (s)"),
                ("replication_lag", "behind"),
                ("error", "error"),
            ],
            "id",
            "none",
            _migration_cell,
        )
    )
    return "".join(parts)


def _part(
    kind: str,
    rows: Any,
    columns: Sequence[tuple[str, str]],
    key: str,
    empty: str,
    cell: Callable[[str, dict[str, Any]], str] | None,
) -> str:
    if isinstance(rows, dict) and "error" in rows:
        return f'<p class="bad" data-error="{kind}">{_e(rows["error"])}</p>'
    return _table(kind, columns, rows, key, empty, cell)


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em;border-bottom:1px solid #ccc}h3{margin:.8em 0 .3em}
h4{margin:.6em 0 .2em;font-size:.95em;color:#555}small{color:#777;font-weight:normal}
table{border-collapse:collapse;margin:.2em 0}th,td{border:1px solid #ddd;padding:2px 8px;text-align:left}
th{background:#f4f4f4}.ok{color:#1a7f37}.bad{color:#c62828}.empty{color:#777}
.bar{display:inline-block;width:120px;height:10px;border:1px solid #999;vertical-align:middle}
.bar div{height:100%;background:#1a7f37}
"""

_SCRIPT = """
(function(){
  var every = %d * 1000;
  function refresh(){
    fetch('/status/main', {cache: 'no-store'}).then(function(r){
      if (!r.ok) { throw new Error('status ' + r.status); }
      return r.text();
    }).then(function(text){
      document.getElementById('main').innerHTML = text;
      document.getElementById('stale').textContent = '';
    }).catch(function(){
      document.getElementById('stale').textContent = ' (the proxy does not answer: showing the last data)';
    }).then(function(){ setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
"""


def render(data: dict[str, Any]) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>shardproxy status</title>'
        f'<noscript><meta http-equiv="refresh" content="{REFRESH_SECONDS}"></noscript>'
        '<link rel="icon" href="data:,">'
        f'<style>{_STYLE}</style></head><body><h1>shardproxy status<span id="stale" class="bad"></span></h1>'
        f'<main id="main">{render_body(data)}</main>'
        f"<script>{_SCRIPT % REFRESH_SECONDS}</script></body></html>"
    )


__all__ = ["json_page", "main_part", "page", "render", "set_digest_provider", "snapshot"]
