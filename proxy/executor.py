"""Executing a routed statement: run its units on their data sources, then answer the client.

* one unit: the backend's answer is relayed frame by frame (no row decoding);
* several units, rows simply concatenated: column definitions once, then every unit's raw row payloads;
* several units needing a merge (ORDER BY, GROUP BY, aggregates, DISTINCT, LIMIT): rows are decoded and
  streamed through `merge.merge_rows`, which pulls from each unit only as it needs;
* writes and DDL: units run concurrently per data source (sequentially within one), affected rows summed.

A unit's data source is served by the session's own connection to it; when a SELECT has several units
on one data source and their results must be open at once, the extra units borrow pooled connections
for the duration of the statement (outside transactions), or are read one after another into memory
(inside a transaction, where only the session's connection sees its uncommitted rows).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from merge import ColumnMeta, MergeError, MergeSpec, merge_rows
from protocol.constants import Capability, ErrorCode, ServerStatus
from protocol.framing import encode_packet
from protocol.packets import (
    ColumnDefinition41,
    ComFieldList,
    ComQuery,
    EOFPacket,
    ERRPacket,
    OKPacket,
    column_count_payload,
    decode_text_row,
    encode_text_row,
    end_of_result,
)
from protocol.results import ResultEnd, ResultHeader
from proxy.backend import BackendConnection, BackendError
from routing.plan import ExecutionUnit, RoutedStatement, StatementKind

if TYPE_CHECKING:
    from proxy.runtime import LogicalDatabase
    from proxy.session import Session

log = structlog.get_logger("shardproxy.executor")


class UnitFailed(Exception):
    """A unit's backend answered with ERR; carries it to the client with the data source named."""

    def __init__(self, data_source: str, err: ERRPacket) -> None:
        super().__init__(err.message)
        self.data_source = data_source
        self.err = err


def _encode(sql: str) -> bytes:
    return ComQuery(sql.encode("utf-8", errors="surrogateescape")).encode()


async def execute_routed(session: Session, db: LogicalDatabase, sql: str) -> None:
    assert db.kernel is not None
    routed = db.kernel.route(sql, None, session.hints())
    if session.server.sql_show:
        log.info("logic_sql", conn=session.id, sql=sql)
        for unit in routed.execution_units:
            log.info("actual_sql", conn=session.id, data_source=unit.data_source, sql=unit.sql)
    await execute_plan(session, db, routed)


async def execute_plan(session: Session, db: LogicalDatabase, routed: RoutedStatement) -> None:
    units = routed.execution_units
    try:
        if len(units) == 1 and not routed.result_table_renames and not routed.generated_keys:
            unit = units[0]
            await session.relay(unit.data_source, _encode(unit.sql))
        elif routed.kind is StatementKind.SELECT or routed.result_table_renames:
            await _select(session, routed)
        else:
            await _write(session, routed)
    except UnitFailed as exc:
        err = exc.err
        prefix = "" if len(units) == 1 else f"[{exc.data_source}] "
        session.error(err.errno, prefix + err.message, err.sqlstate)
    except MergeError as exc:
        session.error(getattr(exc, "errno", ErrorCode.UNKNOWN_ERROR), str(exc), getattr(exc, "sqlstate", "HY000"))
    if routed.kind is StatementKind.DDL:
        await db.reload_metadata()


# --- writes -----------------------------------------------------------------------------------------------


async def _run_unit_to_ok(conn: BackendConnection, unit: ExecutionUnit) -> OKPacket:
    result: OKPacket | None = None
    async for ev in conn.events(_encode(unit.sql)):
        if isinstance(ev, ERRPacket):
            raise UnitFailed(unit.data_source, ev)
        if isinstance(ev, OKPacket):
            result = ev if result is None else replace(
                ev, affected_rows=result.affected_rows + ev.affected_rows,
                last_insert_id=result.last_insert_id or ev.last_insert_id,
            )
    return result or OKPacket()


async def _write(session: Session, routed: RoutedStatement) -> None:
    by_source: dict[str, list[ExecutionUnit]] = {}
    for unit in routed.execution_units:
        by_source.setdefault(unit.data_source, []).append(unit)

    async def run_source(name: str, units: list[ExecutionUnit]) -> list[OKPacket]:
        conn = await session.backend(name)
        return [await _run_unit_to_ok(conn, u) for u in units]

    tasks = [asyncio.create_task(run_source(n, us)) for n, us in by_source.items()]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        first = failures[0]
        done = [n for n, r in zip(by_source, results, strict=True) if not isinstance(r, BaseException)]
        if done and len(by_source) > 1:
            log.warning("partial_write", conn=session.id, succeeded=done, error=str(first))
        if isinstance(first, UnitFailed):
            raise first
        raise first
    oks = [ok for r in results if not isinstance(r, BaseException) for ok in r]
    affected = sum(ok.affected_rows for ok in oks)
    warnings = sum(ok.warnings for ok in oks)
    last_id = 0
    if routed.generated_keys and isinstance(routed.generated_keys[0], int):
        last_id = routed.generated_keys[0]
    else:
        last_id = next((ok.last_insert_id for ok in oks if ok.last_insert_id), 0)
    session.update_status(oks[-1].status if oks else session.status)
    info = oks[0].info if len(oks) == 1 else b""
    session.wire.send(
        OKPacket(affected, last_id, ServerStatus(session.status), min(warnings, 0xFFFF), info).encode(
            session.capabilities
        )
    )


# --- reads ------------------------------------------------------------------------------------------------


class _UnitStream:
    """One unit's result: header first (column definitions), then row payloads, pulled lazily."""

    def __init__(self, conn: BackendConnection, unit: ExecutionUnit, *, borrowed: bool) -> None:
        self.conn = conn
        self.unit = unit
        self.borrowed = borrowed
        self._events = conn.events(_encode(unit.sql))
        self.columns: tuple[ColumnDefinition41, ...] = ()
        self.finished = False
        self.status = 0
        self.warnings = 0

    async def start(self) -> None:
        """Read up to the column definitions (or the OK/ERR of a statement without a result set)."""
        async for ev in self._events:
            if isinstance(ev, ResultHeader):
                self.columns = ev.columns
                return
            if isinstance(ev, ERRPacket):
                self.finished = True
                raise UnitFailed(self.unit.data_source, ev)
            if isinstance(ev, OKPacket):
                self.finished = True
                self.status = int(ev.status)
                return
        self.finished = True

    async def payloads(self) -> AsyncIterator[bytes]:
        if self.finished:
            return
        async for ev in self._events:
            if isinstance(ev, bytes):
                yield ev
            elif isinstance(ev, ResultEnd):
                self.status, self.warnings = ev.status, ev.warnings
            elif isinstance(ev, ERRPacket):
                self.finished = True
                raise UnitFailed(self.unit.data_source, ev)
        self.finished = True

    async def rows(self, ncols: int) -> AsyncIterator[tuple[bytes | None, ...]]:
        async for payload in self.payloads():
            yield decode_text_row(payload, ncols)

    async def drain(self) -> None:
        if not self.finished:
            async for _ in self.payloads():
                pass


async def _open_streams(session: Session, routed: RoutedStatement) -> list[_UnitStream]:
    streams: list[_UnitStream] = []
    used: set[str] = set()
    in_trans = bool(session.status & ServerStatus.IN_TRANS)
    for unit in routed.execution_units:
        if unit.data_source not in used:
            conn = await session.backend(unit.data_source)
            used.add(unit.data_source)
            streams.append(_UnitStream(conn, unit, borrowed=False))
        elif in_trans:
            streams.append(_BufferedLater(session, unit))  # type: ignore[arg-type]
        else:
            conn = await session.extra_backend(unit.data_source)
            streams.append(_UnitStream(conn, unit, borrowed=True))
    return streams


class _BufferedLater:
    """Inside a transaction, a second unit on a data source waits for the session's connection, then its
    rows are read into memory (bounded by the merge row budget) so the first unit can keep streaming."""

    def __init__(self, session: Session, unit: ExecutionUnit) -> None:
        self.session = session
        self.unit = unit
        self.borrowed = False
        self.columns: tuple[ColumnDefinition41, ...] = ()
        self.finished = True
        self.status = 0
        self.warnings = 0
        self._rows: list[bytes] | None = None

    async def start(self) -> None:
        return None

    async def payloads(self) -> AsyncIterator[bytes]:
        if self._rows is None:
            return
        for p in self._rows:
            yield p

    async def load(self, budget: int) -> None:
        conn = await self.session.backend(self.unit.data_source)
        stream = _UnitStream(conn, self.unit, borrowed=False)
        await stream.start()
        rows: list[bytes] = []
        async for p in stream.payloads():
            rows.append(p)
            if len(rows) > budget:
                raise MergeError(
                    f"a transaction's second query on data source {self.unit.data_source} returned more than "
                    f"{budget} rows to hold in memory; raise props.proxy-merge-memory-rows"
                )
        self.columns, self._rows = stream.columns, rows

    async def rows(self, ncols: int) -> AsyncIterator[tuple[bytes | None, ...]]:
        async for payload in self.payloads():
            yield decode_text_row(payload, ncols)

    async def drain(self) -> None:
        return None


def _logic_column(col: ColumnDefinition41, renames: dict[str, str], schema: str) -> ColumnDefinition41:
    table = renames.get(col.table.lower(), col.table)
    org_table = renames.get(col.org_table.lower(), col.org_table)
    if table == col.table and org_table == col.org_table and not col.schema:
        return col
    return replace(col, table=table, org_table=org_table, schema=schema if col.schema else col.schema)


def _renames(routed: RoutedStatement) -> dict[str, str]:
    out = {actual.lower(): logic for actual, logic in routed.result_table_renames.items()}
    for ru in routed.route_units:
        for logic, actual in ru.table_map.items():
            if actual.lower() != logic.lower():
                out.setdefault(actual.lower(), logic)
    return out


async def _select(session: Session, routed: RoutedStatement) -> None:
    streams = await _open_streams(session, routed)
    budget = session.server.merge_memory_rows
    try:
        # start every unit concurrently: the queries run on the backends in parallel
        await asyncio.gather(*(s.start() for s in streams))
        for s in streams:
            if isinstance(s, _BufferedLater):
                await s.load(budget)
        header = next((s for s in streams if s.columns), None)
        if header is None:
            # no unit returned a result set (e.g. DDL-like statements routed as reads): answer OK
            session.update_status(streams[-1].status if streams else session.status)
            session.ok()
            return
        spec = routed.merge_spec
        renames = _renames(routed)
        schema = session.database.name if session.database else ""
        visible = spec.visible_columns if spec is not None else len(header.columns)
        columns = [_logic_column(c, renames, schema) for c in header.columns[:visible]]
        if renames and routed.result_table_renames:
            await _renamed_rows(session, streams, columns, renames)
            return
        wire = session.wire
        caps = session.capabilities
        head = [column_count_payload(len(columns))] + [c.encode() for c in columns]
        if not caps & Capability.DEPRECATE_EOF:
            head.append(EOFPacket(0, ServerStatus(session.status)).encode())
        wire.send_many(head)
        if spec is None or not _needs_merge(spec, len(header.columns)):
            for s in streams:
                await _relay_payloads(session, s.payloads())
        else:
            metas = [_meta(c) for c in header.columns]
            row_streams = [s.rows(len(header.columns)) for s in streams]
            out: list[bytes] = []
            async for row in merge_rows(row_streams, spec, metas, memory_row_budget=budget):
                out.append(encode_text_row(row))
                if len(out) >= 256:
                    wire.send_many(out)
                    out = []
                    await wire.flush()
            if out:
                wire.send_many(out)
            for rs in row_streams:
                with contextlib.suppress(Exception):
                    await rs.aclose()  # type: ignore[attr-defined]
            for s in streams:
                await s.drain()
        status = streams[-1].status or session.status
        session.update_status(status)
        warnings = sum(s.warnings for s in streams)
        wire.send(end_of_result(ServerStatus(session.status), min(warnings, 0xFFFF), caps))
    except UnitFailed:
        await _abandon(session, streams)
        raise
    except (BackendError, MergeError):
        await _abandon(session, streams)
        raise
    finally:
        for s in streams:
            if isinstance(s, _UnitStream) and s.borrowed:
                await session.return_extra_backend(s.conn, broken=not s.finished)


async def _abandon(session: Session, streams: Sequence[object]) -> None:
    """After a failure, leave every connection clean: drain what can be drained, drop the rest."""
    for s in streams:
        if isinstance(s, _UnitStream) and not s.finished:
            try:
                await asyncio.wait_for(s.drain(), timeout=5)
            except Exception:
                s.conn.broken = True
    session.drop_broken()


def _needs_merge(spec: MergeSpec, node_columns: int) -> bool:
    return bool(
        spec.needs_decoding
        or spec.offset
        or spec.limit is not None
        or spec.having_sql
        or spec.visible_columns < node_columns
    )


async def _relay_payloads(session: Session, payloads: AsyncIterator[bytes]) -> None:
    wire = session.wire
    writer = wire.writer
    seq = wire.seq
    chunk: list[bytes] = []
    size = 0
    async for p in payloads:
        data, seq = encode_packet(p, seq)
        chunk.append(data)
        size += len(data)
        if size >= 1 << 16:
            writer.write(b"".join(chunk))
            chunk, size = [], 0
            await wire.flush()
    if chunk:
        writer.write(b"".join(chunk))
    wire.seq = seq


async def _renamed_rows(
    session: Session, streams: Sequence[_UnitStream], columns: list[ColumnDefinition41], renames: dict[str, str]
) -> None:
    """DESCRIBE / SHOW CREATE TABLE / SHOW INDEX of a logic table: map actual table names in the values back."""
    rows: list[tuple[bytes | None, ...]] = []
    for s in streams:
        async for row in s.rows(len(s.columns)):
            rows.append(tuple(_rename_value(v, renames) for v in row))
    from proxy.resultset import result_packets

    session.wire.send_many(
        result_packets(columns, rows, capabilities=session.capabilities, status=session.status)
    )


def _rename_value(value: bytes | None, renames: dict[str, str]) -> bytes | None:
    if value is None:
        return None
    text = value.decode("utf-8", errors="surrogateescape")
    for actual, logic in renames.items():
        if text.lower() == actual:
            return logic.encode()
        for q in ("`", ""):
            needle = f"TABLE {q}{actual}{q}"
            idx = text.lower().find(needle.lower())
            if idx >= 0:
                text = text[:idx] + f"TABLE {q}{logic}{q}" + text[idx + len(needle):]
    return text.encode("utf-8", errors="surrogateescape")


def _meta(col: ColumnDefinition41) -> ColumnMeta:
    return ColumnMeta(col.name, int(col.type), col.character_set, col.flags, col.decimals)


async def field_list_sharded(session: Session, db: LogicalDatabase, req: ComFieldList) -> None:
    """COM_FIELD_LIST of a logic table: ask its first actual table, answer with the logic name."""
    assert db.kernel is not None
    routed = db.kernel.route(f"SELECT * FROM `{req.table}` LIMIT 0")
    unit = routed.execution_units[0]
    conn = await session.backend(unit.data_source)
    table_map = routed.route_units[0].table_map if routed.route_units else {}
    actual = table_map.get(req.table.lower(), req.table)
    payload = ComFieldList(actual, req.wildcard).encode()
    out = await conn.simple_command(payload)
    result: list[bytes] = []
    for p in out:
        if p[:1] == b"\xff":
            result.append(p)
            continue
        if p[:1] == b"\xfe" and len(p) < 9:
            result.append(end_of_result(ServerStatus(session.status), 0, session.capabilities))
            continue
        col = ColumnDefinition41.decode(p)
        result.append(replace(col, table=req.table, org_table=req.table, schema=db.name).encode())
    session.wire.send_many(result)


__all__ = ["execute_plan", "execute_routed", "field_list_sharded"]
