"""Executing a federation plan (routing.federation): copy the tables' rows to one MariaDB, answer there.

For a SELECT the kernel refuses because it spans data nodes in a way the merge cannot combine:

1. every copied occurrence gets a TEMPORARY table on the host data source's connection of the session,
   created from SHOW CREATE TABLE of one actual node of its logic table (same columns, types, charsets
   and collations; keys kept as plain indexes, so rows of different shards never collide);
2. its read (the kernel routes it; pushed-down conditions on the sharding column read one node only) is
   run on each data node: on the host itself as ``INSERT INTO scratch SELECT ...`` (rows never leave the
   server), on other data sources streamed in bounded batches into multi-row INSERTs on the host (the
   reader waits while the host writes: backpressure, never a whole table in proxy memory);
3. the user's statement, with only its table references spliced to the scratch tables, runs on the host
   in the client's protocol (text or prepared) and its answer is relayed as is;
4. the scratch tables are always dropped.

Inside a transaction every read goes through the session's own backend connections, so the statement
sees the transaction's own uncommitted rows. Rows copied per statement are bounded by
``props.proxy-federation-max-rows`` (default: ``proxy-merge-memory-rows``); past it the statement fails
with a clear error. ``props.proxy-federation-enabled: false`` keeps the kernel's refusals.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import structlog

from protocol.constants import ColumnType
from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket, OKPacket, decode_text_row
from protocol.results import ResultHeader
from proxy.backends.backend import BackendConnection
from proxy.backends.charset import charset_for_collation
from proxy.backends.codec import StatementCodec, StatementFailed
from proxy.execution import budget as memory_budget
from proxy.execution.decide import federation_enabled, federation_plan
from proxy.execution.errors import answer_error
from proxy.execution.plans import Federated, FederatedExplain
from proxy.execution.units import access
from routing.errors import RoutingError
from routing.federation import (
    SCRATCH_PREFIX,
    FederationPlan,
    ScratchRead,
    preview_rows,
    scratch_names,
)
from routing.plan import ExecutionUnit, RoutedStatement, StatementKind

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

log = structlog.get_logger("shardproxy.federation")

READ = access(StatementKind.SELECT, False)  # every connection of a federated statement: it is a plain read

_BATCH_ROWS = 1000
_BATCH_BYTES = 1 << 20
_NUMERIC = frozenset({
    ColumnType.DECIMAL, ColumnType.NEWDECIMAL, ColumnType.TINY, ColumnType.SHORT, ColumnType.LONG,
    ColumnType.LONGLONG, ColumnType.INT24, ColumnType.FLOAT, ColumnType.DOUBLE, ColumnType.YEAR,
})
_TEMPORAL = frozenset({
    ColumnType.DATE, ColumnType.NEWDATE, ColumnType.TIME, ColumnType.TIME2, ColumnType.DATETIME,
    ColumnType.DATETIME2, ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2,
})


class FederationError(RoutingError):
    """A federated statement that cannot complete (a backend's error while copying: its errno)."""

    errno = 1235
    sqlstate = "42000"


class FederationLimitError(FederationError):
    """More rows to copy than props.proxy-federation-max-rows allows (as the merge's memory bound)."""

    errno = 1038  # ER_OUT_OF_SORTMEMORY, as merge.errors.MergeMemoryError
    sqlstate = "HY001"


def enabled(session: Session) -> bool:
    return federation_enabled(session.server.config.props)


def max_rows(session: Session) -> int:
    props = session.server.config.props
    try:
        return int(props.get("proxy-federation-max-rows", session.server.merge_memory_rows))
    except (TypeError, ValueError):
        return session.server.merge_memory_rows


async def federate(session: Session, db: LogicalDatabase, sql: str, decided: Federated,
                   params: Sequence[object] | None, codec: StatementCodec) -> None:
    """Answer a refused SELECT by the federation plan the decision made for it (proxy.execution.decide)."""
    (log.info if session.server.sql_show else log.debug)(
        "federated", conn=session.id, sql=sql, tables=list(decided.plan.tables), refusal=str(decided.refusal))
    await run_plan(session, db, decided, params, codec)


PREVIEW_COLUMNS = ["data_source_name", "actual_sql"]
EXPLAIN_COLUMNS = ["federation_step", "data_source_name", "actual_sql"]


def preview(session: Session, db: LogicalDatabase, sql: str) -> list[tuple[str, str]] | None:
    """PREVIEW rows of a statement the kernel refused, when federation answers it (else None)."""
    if not enabled(session):
        return None
    assert db.kernel is not None
    plan = federation_plan(db.kernel, sql)
    if plan is None:
        return None
    return [(ds, f"/* federation {step} */ {text}") for step, ds, text in preview_rows(plan, db.kernel)]


def answer_explain(session: Session, decided: FederatedExplain) -> None:
    """EXPLAIN of a federated statement: its federation steps (copies, then the answer on the host)
    instead of a backend plan, which would need the copies made first."""
    session.rows(list(EXPLAIN_COLUMNS), list(decided.steps))


async def run_plan(session: Session, db: LogicalDatabase, decided: Federated, params: Sequence[object] | None,
                   codec: StatementCodec) -> None:
    plan, routes = decided.plan, decided.reads
    # every data source the copies read, taken at once in sorted order (as any statement's): holding the
    # host while waiting for another pool could wait for ever on a session holding that pool and waiting
    # for the host's
    host = None
    sources = _plan_sources(db, plan, routes)
    for ds in sources:
        # the host too: a federated statement is a plain read (`plan_for` takes no locking read, no hint), and reads
        # where any other read of the session would (a read/write splitting group's replica when its rules allow;
        # the scratch tables are TEMPORARY, which a read-only replica takes), whichever way the statement is run
        conn = await session.backend(ds, **READ)
        host = conn if ds == plan.host else host
    assert host is not None
    names = scratch_names(plan)
    created: list[str] = []
    budget = [max_rows(session)]
    session.route = "federated"
    shared = reopens_temporary(_server_version(host))
    try:
        for read in plan.reads:
            if shared and read.same_as is not None:
                names[read.slot] = names[read.same_as]  # the same rows: one copy, opened twice
                continue
            await _fill(session, db, plan, read, names, host, routes.get(read.slot), created, budget)
        unit = ExecutionUnit(plan.host, plan.render(names), tuple(params) if params is not None else None)
        if session.server.sql_show:
            log.info("actual_sql", conn=session.id, data_source=plan.host, sql=unit.sql, federated=True)
        try:
            payload = await codec.command(host, unit)
        except StatementFailed as exc:
            answer_error(session, exc, rename=lambda message: _logical(message, names, plan))
            return
        await session.relay_on(host, payload, _renamer(names, plan))
    finally:
        if created:
            await _drop(session, host, created)


def _plan_sources(db: LogicalDatabase, plan: FederationPlan, routes: Mapping[int, RoutedStatement]) -> list[str]:
    """The host and every data source a copy reads its rows or its definition from (sorted)."""
    sources = {plan.host}
    for read in plan.reads:
        if read.same_as is not None:
            continue
        sources.add(_definition_source(db, plan, read.table)[0])
        sources |= {unit.data_source for unit in routes[read.slot].execution_units}
    return sorted(sources)


def _definition_source(db: LogicalDatabase, plan: FederationPlan, table: str) -> tuple[str, str]:
    """(data source, actual table) whose SHOW CREATE TABLE defines the copy of `table`."""
    assert db.kernel is not None
    rules = db.kernel.rules
    rule = rules.sharding.table(table) if rules.sharding is not None else None
    if rule is not None:
        return rule.data_nodes[0].data_source, rule.data_nodes[0].table
    return db.kernel.metadata.single_table_data_source(table) or plan.host, table


async def _drop(session: Session, host: BackendConnection, created: list[str]) -> None:
    """Scratch tables never outlive the statement: dropped, or their connection is closed with them."""
    if not host.broken and not host.busy:
        try:
            answer = await host.execute("DROP TEMPORARY TABLE IF EXISTS " + ", ".join(f"`{n}`" for n in created))
        except Exception as exc:  # the connection failed: it is dropped below, the tables with it
            host.broken = True
            log.warning("federation_drop_failed", conn=session.id, error=str(exc))
        else:
            if isinstance(answer, ERRPacket):
                host.broken = True
                log.warning("federation_drop_failed", conn=session.id, error=answer.message)
    else:
        host.broken = True
    session.drop_broken()


def _server_version(conn: BackendConnection) -> str:
    try:
        return str(conn.raw.get_server_info() or "")
    except Exception:
        return ""


def reopens_temporary(version: str) -> bool:
    """MariaDB 10.2+ opens a TEMPORARY table several times in one statement; MySQL answers 1137
    (ER_CANT_REOPEN_TABLE), so there every occurrence gets a copy of its own."""
    m = re.search(r"(\d+)\.(\d+)\.\d+-MariaDB", version)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (10, 2)


def _logical(message: str, names: dict[int, str], plan: FederationPlan) -> str:
    by_name = {names[r.slot]: r.table for r in plan.reads}
    return re.sub(rf"{SCRATCH_PREFIX}\d+", lambda m: by_name.get(m.group(0), m.group(0)), message)


def _renamer(names: dict[int, str], plan: FederationPlan):  # type: ignore[no-untyped-def]
    def rename(payload: bytes) -> bytes:
        try:
            err = ERRPacket.decode(payload)
        except Exception:
            return payload
        from dataclasses import replace

        message = _logical(err.message, names, plan)
        return payload if message == err.message else replace(err, message=message).encode()

    return rename


async def _fill(session: Session, db: LogicalDatabase, plan: FederationPlan, read: ScratchRead,
                names: dict[int, str], host: BackendConnection, routed: RoutedStatement | None,
                created: list[str], budget: list[int]) -> None:
    name = names[read.slot]
    if read.same_as is not None:
        source = names[read.same_as]
        await _must(host, plan.host, f"CREATE TEMPORARY TABLE `{name}` LIKE `{source}`")
        created.append(name)
        await _must(host, plan.host, f"INSERT INTO `{name}` SELECT * FROM `{source}`")
        return
    await _must(host, plan.host, await _scratch_ddl(session, db, plan, read.table, name, host))
    created.append(name)
    from routing.interpolate import interpolate

    assert routed is not None
    for unit in routed.execution_units:
        sql = interpolate(unit.sql, unit.params, session.txn.mode_flags) if unit.params else unit.sql
        if unit.data_source == plan.host:
            answer = await _must(host, plan.host, f"INSERT INTO `{name}` {sql}")
            budget[0] -= answer.affected_rows
            _check_budget(session, budget, read)
        else:
            conn = await session.backend(unit.data_source, **READ)
            await _stream(session, conn, unit.data_source, sql, host, plan.host, name, budget, read)


def _check_budget(session: Session, budget: list[int], read: ScratchRead) -> None:
    if budget[0] < 0:
        raise FederationLimitError(
            f"this statement is answered by federation (the proxy copies the rows it reads to one data source), "
            f"and it would copy more than props.proxy-federation-max-rows ({max_rows(session)}) rows (at table "
            f"{read.table}); add conditions on the tables' own columns that the proxy can push down, or raise "
            "props.proxy-federation-max-rows"
        )


async def _must(conn: BackendConnection, ds: str, sql: str) -> OKPacket:
    answer = await conn.execute(sql)
    if isinstance(answer, ERRPacket):
        raise FederationError(f"federation on data source {ds} failed: {answer.message}", errno=answer.errno,
                              sqlstate=answer.sqlstate)
    return answer if isinstance(answer, OKPacket) else OKPacket()


_CREATE = re.compile(r"^\s*CREATE\s+TABLE\s+(`(?:[^`]|``)+`|\S+)", re.I)


async def _scratch_ddl(session: Session, db: LogicalDatabase, plan: FederationPlan, table: str, name: str,
                       host: BackendConnection) -> str:
    """CREATE TEMPORARY TABLE for a scratch copy of `table`, from SHOW CREATE TABLE of one actual node."""
    ds, actual = _definition_source(db, plan, table)
    conn = host if ds == plan.host else await session.backend(ds, **READ)
    answer = await conn.execute(f"SHOW CREATE TABLE `{actual}`")
    if not isinstance(answer, list) or not answer or answer[0][1] is None:
        message = answer.message if isinstance(answer, ERRPacket) else "no answer"
        raise FederationError(f"federation could not read the definition of {table} ({ds}.{actual}): {message}")
    return scratch_ddl(answer[0][1].decode("utf-8", "surrogateescape"), name)


def scratch_ddl(create: str, name: str) -> str:
    """SHOW CREATE TABLE text -> CREATE TEMPORARY TABLE `name`: columns as they are. The PRIMARY KEY stays
    (the copy is clustered and scanned in key order, as one unsharded table would be; shards repeating a
    primary key make the copy fail with 1062 rather than answer wrongly); UNIQUE keys become plain keys;
    AUTO_INCREMENT, foreign keys, partitioning and system versioning are dropped (a copy holds given rows,
    nothing else)."""
    head = _CREATE.match(create)
    if head is None:
        raise FederationError(f"federation cannot read this table definition: {create[:80]}")
    body = create[head.end():]
    cut = re.search(r"\n\s*(?:/\*!\d+\s*)?PARTITION\s+BY\b", body, re.I)
    if cut is not None:
        body = body[:cut.start()]
    body = re.sub(r"\s+WITH\s+SYSTEM\s+VERSIONING\b", "", body, flags=re.I)
    lines = body.split("\n")
    kept: list[str] = []
    for line in lines:
        stripped = line.strip()
        upper = stripped.upper()
        if "FOREIGN KEY" in upper or upper.startswith("PERIOD FOR"):
            continue
        line = re.sub(r"^(\s*)UNIQUE KEY\b", r"\1KEY", line)
        line = re.sub(r"\bAUTO_INCREMENT\b(?!\s*=)", "", line) if stripped.startswith("`") else line
        line = re.sub(r"\bAUTO_INCREMENT=\d+\s*", "", line)
        if stripped.startswith("`"):  # a generated column becomes a plain one: the copy is given its values
            line = re.sub(r"\s+(?:GENERATED\s+ALWAYS\s+)?AS\s+\(.*\)\s*(?:VIRTUAL|PERSISTENT|STORED)\b", "", line,
                          flags=re.I)
        kept.append(line)
    # a dropped last definition may leave a trailing comma before the closing parenthesis
    for i in range(len(kept) - 1, 0, -1):
        if kept[i].lstrip().startswith(")"):
            j = i - 1
            while j > 0 and not kept[j].strip():
                j -= 1
            kept[j] = kept[j].rstrip().rstrip(",")
            break
    return f"CREATE TEMPORARY TABLE `{name}`" + "\n".join(kept)


def literal(value: bytes | None, column: ColumnDefinition41) -> str:
    """A text-protocol value as an ASCII SQL literal that stores the same value in a column of the same
    definition: numbers as they are, temporal values quoted, strings as hex in their character set."""
    if value is None:
        return "NULL"
    kind = column.type
    if kind in _NUMERIC:
        return value.decode("ascii")
    if kind in _TEMPORAL:
        return "'" + value.decode("ascii") + "'"
    if kind == ColumnType.BIT or column.character_set == 63:
        return "X'" + value.hex() + "'" if value else "''"
    charset = charset_for_collation(column.character_set)
    return f"_{charset} X'{value.hex()}'" if value else f"_{charset}''"


async def _stream(session: Session, conn: BackendConnection, ds: str, sql: str, host: BackendConnection,
                  host_ds: str, name: str, budget: list[int], read: ScratchRead) -> None:
    """Stream one unit's rows from `conn` into the scratch table on `host`, in bounded batches."""
    columns: tuple[ColumnDefinition41, ...] = ()
    parts: list[str] = []
    size = 0
    prefix = f"INSERT INTO `{name}` VALUES "
    failed = True
    memory = memory_budget.current()
    held = 0  # bytes of the batch being built, charged to the statement's budget: its rows and their INSERT's text
    what = f"the federation copy of {read.table}"
    events = conn.event_batches(ComQuery(sql.encode("utf-8", "surrogateescape")).encode())
    try:
        async for batch in events:
            for ev in batch:
                if isinstance(ev, ResultHeader):
                    columns = ev.columns  # by name: a node's column order may differ from the copy's
                    listed = ", ".join("`" + (c.org_name or c.name).replace("`", "``") + "`" for c in columns)
                    prefix = f"INSERT INTO `{name}` ({listed}) VALUES "
                elif isinstance(ev, bytes):
                    row = decode_text_row(ev, len(columns))
                    text = "(" + ", ".join(literal(v, c) for v, c in zip(row, columns, strict=True)) + ")"
                    if memory is not None:
                        memory.charge(2 * len(text) + 106, what)
                        held += 2 * len(text) + 106
                    parts.append(text)
                    size += len(text)
                    budget[0] -= 1
                    _check_budget(session, budget, read)
                elif isinstance(ev, ERRPacket):
                    raise FederationError(f"federation read of {read.table} on data source {ds} failed: "
                                          f"{ev.message}", errno=ev.errno, sqlstate=ev.sqlstate)
            if len(parts) >= _BATCH_ROWS or size >= _BATCH_BYTES:
                await _must(host, host_ds, prefix + ", ".join(parts))
                parts, size = [], 0
                if memory is not None:
                    memory.release(held)
                    held = 0
        if parts:
            await _must(host, host_ds, prefix + ", ".join(parts))
        failed = False
    finally:
        if memory is not None:
            memory.release(held)
        if failed and conn.busy:
            await conn.source.kill_query(conn.thread_id)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_drain(events), timeout=10)
            if conn.busy:
                conn.broken = True
            session.drop_broken()


async def _drain(events) -> None:  # type: ignore[no-untyped-def]
    async for _ in events:
        pass
