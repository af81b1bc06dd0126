"""Catch-up from the source data sources' binary logs (the `mysql-replication` package reads them): every row
event on a source node's table since the job started is applied to the row's new node, so that writes which
did not come through this proxy (another proxy process, a batch job on the backend) reach the copies too.

Writes through the proxy reach both copies already (the window's dual writes, `proxy.migration.gate`);
applying their events again changes nothing: an event's row replaces a copy only when its `versionColumn`
is higher (without one an existing copy is kept, as the window's reads keep the new node's row), and a delete
deletes. Only data sources with `log_bin=ON` and `binlog_format=ROW` are tailed; a source without a binary
log is reported as such (SHOW MIGRATION STATUS `replication_lag`).

The log is read without blocking, from the saved file and position to its end, in a worker thread; the
position (and the GTID position, for operators) is saved with the job, so a restarted proxy resumes there.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import itertools
import time
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from protocol.binary import value_to_sql_literal
from routing.dualread import quote_ident
from routing.model import DataNode, TableRule
from routing.route import precise_group, route_table

log = structlog.get_logger("shardproxy.migration")

_SERVER_IDS = itertools.count(4_000_000_000 - 4096)  # replication client ids, away from the servers' own


class Job(Protocol):
    """What catching up reads of proxy.migration.job.Job (which imports this module)."""

    state: Any
    db: Any

    def conn(self, ds: str) -> Any: ...
    async def run(self, conn: Any, sql: str) -> Any: ...
    def rule(self) -> Any: ...
    def columns(self, rule: Any) -> Any: ...
    def key_column(self, rule: Any) -> Any: ...
    def old_nodes(self, rule: Any) -> Any: ...


def literal(value: Any) -> str:
    if isinstance(value, datetime.datetime | bytes | str | int | float | decimal.Decimal) or value is None:
        return value_to_sql_literal(value)
    return value_to_sql_literal(str(value))  # date, time, timedelta, sets: their text


async def start_positions(job: Job, sources: Sequence[str]) -> None:
    """Where each source data source's binary log is now (before the copy reads anything)."""
    for ds in sources:
        async with job.conn(ds) as conn:
            flags = await job.run(conn, "SELECT @@log_bin, @@binlog_format, @@gtid_binlog_pos")
            on, fmt, gtid = (v.decode() if isinstance(v, bytes) else str(v) for v in flags[0])
            if on != "1" or fmt.upper() != "ROW":
                job.state.binlog[ds] = []
                continue
            status = await job.run(conn, "SHOW MASTER STATUS")
            job.state.binlog[ds] = [status[0][0].decode(), int(status[0][1])]
            job.state.gtid[ds] = gtid


async def master_positions(job: Job) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for ds, pos in job.state.binlog.items():
        if pos:
            async with job.conn(ds) as conn:
                status = await job.run(conn, "SHOW MASTER STATUS")
                out[ds] = (status[0][0].decode(), int(status[0][1]))
    return out


def _read(settings: dict[str, Any], schema: str, tables: list[str], file: str, pos: int
          ) -> tuple[list[tuple[str, str, list[dict[str, Any]]]], str, int]:
    """One non-blocking read from (file, pos) to the end of the log (runs in a worker thread). The classic
    file/position dump (`is_mariadb=False`): the package's MariaDB mode always starts from a GTID state and,
    without one, from the first log; MariaDB serves both."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings=settings, server_id=next(_SERVER_IDS), blocking=False, resume_stream=True,
        log_file=file, log_pos=pos, is_mariadb=False, only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[schema], only_tables=tables, enable_logging=False)
    events: list[tuple[str, str, list[dict[str, Any]]]] = []
    try:
        for ev in stream:
            if str(ev.schema) != schema:  # the package's schema filter lets other schemas' same-named tables by
                continue
            kind = "delete" if isinstance(ev, DeleteRowsEvent) else "upsert"
            for row in ev.rows:
                values = row.get("after_values") if "after_values" in row else row.get("values")
                events.append((kind, str(ev.table), [values]))
        return events, stream.log_file or file, int(stream.log_pos or pos)
    finally:
        stream.close()


def _ordered(values: dict[str, Any], columns: Sequence[str]) -> list[Any]:
    """An event's row in table column order (names, or UNKNOWN_COL<i> without binlog_row_metadata=FULL)."""
    lower = {k.lower(): v for k, v in values.items()}
    out = []
    for i, c in enumerate(columns):
        if c.lower() in lower:
            out.append(lower[c.lower()])
        else:
            out.append(lower.get(f"unknown_col{i}"))
    return out


async def catch_up(job: Job) -> int:
    """Apply every row event since the saved positions; the number of events applied."""
    rule = job.rule()
    columns = job.columns(rule)
    key = job.key_column(rule)
    applied = 0
    for ds, pos in list(job.state.binlog.items()):
        if not pos:
            continue
        source = job.db.sources[ds]
        config = source.config  # type: ignore[union-attr]
        nodes = {n.table.lower(): n for n in job.old_nodes(rule) if n.data_source == ds}
        if not nodes:
            continue
        settings = {"host": config.host, "port": config.port, "user": config.username, "password": config.password}
        events, file, end = await asyncio.to_thread(_read, settings, config.database, list(nodes), pos[0], pos[1])
        for kind, table, rows in events:
            node = nodes.get(table.lower())
            if node is None:
                continue
            for values in rows:  # counted when it concerns a row that moves (not one already at home)
                applied += await _apply(job, rule, node, key, columns, kind, _ordered(values, columns))
        job.state.binlog[ds] = [file, end]
        if events:
            async with job.conn(ds) as conn:
                gtid = await job.run(conn, "SELECT @@gtid_binlog_pos")
                job.state.gtid[ds] = gtid[0][0].decode() if gtid and gtid[0][0] else ""
    job.state.applied += applied
    job.state.caught_up_at = time.time()
    return applied


async def _apply(job: Job, rule: TableRule, node: DataNode, key: str, columns: Sequence[str], kind: str,
                 row: list[Any]) -> int:
    index = {c.lower(): i for i, c in enumerate(columns)}
    values = {c: row[index[c]] for c in rule.sharding_columns if c in index}
    homes = route_table(rule, [precise_group(values)])
    if len(homes) != 1 or homes[0] == node:
        return 0  # a row at home (a copy arriving on a node that is also a source, a new row): nothing to move
    home = homes[0]
    async with job.conn(home.data_source) as conn:
        if kind == "delete":
            await job.run(conn, f"DELETE FROM {quote_ident(home.table)} WHERE {quote_ident(key)} = "
                                f"{literal(row[index[key.lower()]])}")
        else:
            await job.run(conn, job.upsert_sql(rule, home, columns, [[literal(v) for v in row]]))
    return 1
