"""Executing a routed statement: run its units on their data sources, then answer the client.

* one unit: the backend's answer is relayed frame by frame (no row decoding);
* several units, rows simply concatenated: column definitions once, then every unit's raw row payloads;
* several units needing a merge (ORDER BY, GROUP BY, aggregates, DISTINCT, LIMIT): rows are decoded and
  streamed through `merge.merge_rows`, which pulls from each unit only as it needs;
* writes and DDL: units run concurrently per data source (sequentially within one), affected rows summed
  (`writes.py`).

A unit's data source is served by the session's own connection to it; when a SELECT has several units
on one data source and their results must be open at once, the extra units borrow pooled connections
for the duration of the statement (outside transactions), or are read one after another into memory
(inside a transaction, where only the session's connection sees its uncommitted rows).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from merge import ColumnMeta, MergeError, MergeSpec, merge_rows
from merge.aggregate import MergeStats
from merge.pipeline import decoded_width
from merge.raw import raw_mergeable, raw_order_merge
from protocol.constants import Capability, ServerStatus
from protocol.packets import (
    ColumnDefinition41,
    ComFieldList,
    column_count_payload,
    end_of_result,
)
from protocol.rowframes import RowFrames
from proxy.backends.backend import BackendConnection
from proxy.backends.codec import TEXT, StatementCodec, StatementFailed
from proxy.backends.runtime import NO_COLUMN_SCHEMA, ColumnSchema
from proxy.clusterport import port
from proxy.execution import budget, diagnostics, lastid, txn_control
from proxy.execution.decide import NO_FEDERATION, decide
from proxy.execution.dualread import execute_dual_read, reconcile_copies
from proxy.execution.errors import answer_error
from proxy.execution.into import select_into
from proxy.execution.logic_columns import relayed_columns
from proxy.execution.masking import Masks, mask_row, mask_rule_for, masked_columns, masked_definitions
from proxy.execution.memo import IdentityMemo
from proxy.execution.plans import Refused, Run, Strategy
from proxy.execution.readers import (
    _by_source,
    _finish_readers,
    _open_merge_readers,
    _Reader,
    _UnitStream,
    kill_until_done,
)
from proxy.execution.resultset import result_packets
from proxy.execution.stepwise import execute_stepwise
from proxy.execution.table_locks import refuse_unlocked
from proxy.execution.units import (
    UnitFailed,
    _access,
    _renames,
    error_renamer,
)
from proxy.execution.upsert import execute_upsert
from proxy.execution.write_gate import write_gate
from proxy.execution.writes import _write
from proxy.frontend.cork import corked, held
from proxy.frontend.relay import relay_frames
from routing.mask.config import MaskRule
from routing.plan import ExecutionUnit, RoutedStatement, StatementKind

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session


_CALC_FOUND_ROWS = re.compile(r"\bSQL_CALC_FOUND_ROWS\b", re.I)
# the strategies as module constants (an Enum member's lookup on its class is slow on Python 3.11)
_STEPWISE, _SELECT_INTO, _DDL, _DUAL_READ = Strategy.STEPWISE, Strategy.SELECT_INTO, Strategy.DDL, Strategy.DUAL_READ
_UPSERT, _RELAY, _SCATTER_SELECT, _RENAMED_METADATA = (
    Strategy.UPSERT, Strategy.RELAY, Strategy.SCATTER_SELECT, Strategy.RENAMED_METADATA)


async def execute_plan(
    session: Session, db: LogicalDatabase, run: Run, codec: StatementCodec = TEXT, *, gated: bool = False,
) -> None:
    """Carry out a decided plan (proxy.execution.decide): one branch per `Strategy`, nothing decided again."""
    routed = run.routed
    if not gated and (gate := write_gate(db.name, routed)) is not None:  # a migration holds the table's writes
        async with gate.write():
            await execute_plan(session, db, run, codec, gated=True)
        return
    refuse_unlocked(session, routed)  # under LOCK TABLES: a data source where nothing is locked answers 1100
    strategy = run.strategy
    if strategy is _STEPWISE:  # a write over several nodes run in steps (proxy.execution.stepwise)
        session.route = "multi"
        try:
            # the steps inherit this statement's pass through a migration's write gate
            await execute_stepwise(session, db, routed, functools.partial(execute_plan, gated=gated))
        except UnitFailed as exc:
            answer_error(session, exc, db=db, routed=routed, named=True)
        return
    if strategy is _SELECT_INTO:
        await select_into(session, db, routed, codec, execute_plan)
        return
    session.route = "single" if len(routed.execution_units) == 1 else "multi"
    if strategy is _DDL:
        if not await txn_control.implicit_commit(session):
            return  # committing the open transaction first failed (the client has the error): the DDL is not run
        # the client's answer waits for the reloaded metadata: a client told that the table exists may use it at
        # once, from any session (an INSERT without a column list into it needs its columns)
        with held(session):
            await _run_units(session, db, routed, run.units, codec)
            await db.reload_metadata()
        port(session.server).metadata_changed(db.name)  # Cluster mode: the other proxies reload it too
        return
    await _run_units(session, db, routed, strategy, codec)


async def _run_units(session: Session, db: LogicalDatabase, routed: RoutedStatement, strategy: Strategy,
                     codec: StatementCodec) -> None:
    units = routed.execution_units
    if routed.logic_tables:  # a statement with tables replaces the session's diagnostics (an error: its own)
        diagnostics.ran_on(session, [u.data_source for u in units])
    # !MASK: an answer that may hold a masked column is read row by row, never relayed (proxy.execution.masking)
    mask = mask_rule_for(db.rules, routed) if db.rules.mask is not None else None
    try:
        if routed.dual_repair is not None:  # resharding window: copies made alike before a dual write
            await reconcile_copies(session, routed, _access(routed))
        if strategy is _DUAL_READ:  # resharding window: copies de-duplicated first (proxy.execution.dualread)
            await execute_dual_read(session, db, routed, codec, _access(routed))
        elif strategy is _UPSERT:  # a unique key without the sharding columns: looked up everywhere first
            await execute_upsert(session, db, routed, codec)
        elif strategy is _RELAY and mask is None:
            unit = units[0]
            conn = await session.backend(unit.data_source, **_access(routed))
            try:
                payload = await codec.command(conn, unit)
            except StatementFailed as exc:
                raise UnitFailed(unit.data_source, exc.err) from exc
            summary = await session.relay_on(conn, payload, error_renamer(db, routed),
                                             column_rewriter=relayed_columns(db))  # (logical names: logic_columns)
            if not routed.logic_tables and (summary.warnings or summary.error is not None):
                diagnostics.ran_on(session, [unit.data_source])  # a statement without tables that warned
            await lastid.after_relayed(session, db, conn, routed, unit, summary)
            if routed.kind is StatementKind.SELECT and summary.error is None:
                await _after_relayed_select(session, conn, unit)
        else:
            # every data source's connection first, in one order, before any unit runs (see
            # Session.backends_for): a statement never holds one pool's connection while it waits for another's
            conns = await session.backends_for([u.data_source for u in units], **_access(routed))
            if strategy is _SCATTER_SELECT or strategy is _RENAMED_METADATA or mask is not None:
                await _select(session, routed, codec, conns, mask)
                session.row_count = -1  # ROW_COUNT() after a result set
            else:  # Strategy.FAN_OUT_WRITE
                await _write(session, routed, codec, conns)
    except (UnitFailed, MergeError) as exc:  # in logic names, `[ds]` when several units (proxy.execution.errors)
        answer_error(session, exc, db=db, routed=routed)


async def _after_relayed_select(session: Session, conn: BackendConnection, unit: ExecutionUnit) -> None:
    """FOUND_ROWS() after a SELECT one node answered: that node knows it. With SQL_CALC_FOUND_ROWS it is
    asked at once (the session may run other statements on other nodes before asking); otherwise the
    next SELECT FOUND_ROWS() goes to it (see `proxy.execution.decide.routing_hints`)."""
    if _CALC_FOUND_ROWS.search(unit.sql) is None:
        session.found_rows_value, session.found_rows_source = None, unit.data_source
        return
    answer = await conn.execute("SELECT FOUND_ROWS()")
    if isinstance(answer, list) and answer and answer[0][0] is not None:
        session.found_rows_value, session.found_rows_source = int(answer[0][0]), None
    else:
        session.found_rows_value, session.found_rows_source = None, unit.data_source


# --- reads ------------------------------------------------------------------------------------------------


def _logic_column(col: ColumnDefinition41, renames: dict[str, str], schema: ColumnSchema) -> ColumnDefinition41:
    """A node's column definition in logical names: an actual table as its logic table, the node's physical database
    as the logical one (information_schema's columns of SHOW COLUMNS / SHOW INDEX keep `information_schema`)."""
    table = renames.get(col.table.lower(), col.table)
    org_table = renames.get(col.org_table.lower(), col.org_table)
    shown = schema.shown(col.schema)
    if table == col.table and org_table == col.org_table and shown == col.schema:
        return col
    return replace(col, table=table, org_table=org_table, schema=shown)


# A node's column definition (decoded once per distinct payload, so the same object comes back
# statement after statement) -> its logic form and that form's payload, for the names it was renamed to
_LOGIC_COLUMNS: IdentityMemo[tuple[str, str, ColumnSchema, ColumnDefinition41, bytes]] = IdentityMemo(4096)


def _logic_columns(columns: Sequence[ColumnDefinition41], renames: dict[str, str], schema: ColumnSchema
                   ) -> tuple[list[ColumnDefinition41], list[bytes]]:
    """`_logic_column` of each column, and each one's encoded payload: the `dataclasses.replace` and the
    encoding are done once per node column and name mapping, not at every statement."""
    logic: list[ColumnDefinition41] = []
    payloads: list[bytes] = []
    cache = _LOGIC_COLUMNS
    for col in columns:
        table = renames.get(col.table.lower(), col.table)
        org_table = renames.get(col.org_table.lower(), col.org_table)
        hit = cache.get(col)
        if hit is not None and hit[0] == table and hit[1] == org_table and hit[2] is schema:
            logic.append(hit[3])
            payloads.append(hit[4])
            continue
        out = _logic_column(col, renames, schema)
        payload = out.encode()
        cache.put(col, (table, org_table, schema, out, payload))
        logic.append(out)
        payloads.append(payload)
    return logic, payloads


async def _select(session: Session, routed: RoutedStatement, codec: StatementCodec,
                  conns: dict[str, BackendConnection], mask: MaskRule | None = None) -> None:
    if routed.merge_spec is None and not routed.result_table_renames and mask is None:
        with corked(session.wire):  # one write: proxy.frontend.cork
            await _select_concatenated(session, routed, codec, conns)
        return
    readers = _merge_readers(session, routed, codec, conns) or await _open_merge_readers(session, routed, codec,
                                                                                         conns)
    answered = False
    try:
        await _start_all(readers)
        with corked(session.wire):  # header, rows and end in one write (proxy.frontend.cork)
            await _answer_merged(session, routed, readers, codec, mask)
        answered = True
    finally:
        await _finish_readers(session, readers, failed=not answered)


async def _start_all(readers: Sequence[_Reader]) -> None:
    """Send every unit's query at once (they run in parallel on the backends) and read their headers.
    The first failure stops the rest: KILL QUERY on what is still running, instead of waiting for it.
    (Not every command written first and the headers read in unit order with no task per unit: a later
    unit's failure would then be seen only after an earlier unit's header.)"""
    tasks = {asyncio.ensure_future(r.start()): r for r in readers}
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    failure = next((t.exception() for t in done if t.exception() is not None), None)
    if failure is not None and pending:
        await asyncio.gather(*(kill_until_done(reader.conn, task) for task in pending
                               if isinstance(reader := tasks[task], _UnitStream)))
        await asyncio.wait(pending)
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            failure = failure or task.exception()
    if failure is not None:
        raise failure


def _merge_readers(session: Session, routed: RoutedStatement, codec: StatementCodec,
                   conns: dict[str, BackendConnection]) -> list[_Reader] | None:
    """The readers `_open_merge_readers` opens when every data source has one unit (each on the session's
    connection, nothing borrowed or buffered), without its task per data source; None otherwise."""
    units = routed.execution_units
    if len({u.data_source for u in units}) != len(units):
        return None
    return [_UnitStream(conns[u.data_source], u, codec, borrowed=False) for u in units]


def _send_header(session: Session, columns: Sequence[ColumnDefinition41],
                 payloads: Sequence[bytes] | None = None) -> None:
    """`payloads`: the columns' encoded definitions, when the caller has them (`_logic_columns`)."""
    head = [column_count_payload(len(columns)), *(payloads if payloads is not None else (c.encode() for c in columns))]
    if not int(session.capabilities) & _DEPRECATE_EOF:
        head.append(b"\xfe\x00\x00" + (session.status & 0xFFFF).to_bytes(2, "little"))  # EOFPacket(0, status)
    session.wire.send_many(head)


_DEPRECATE_EOF = int(Capability.DEPRECATE_EOF)


def _send_end(session: Session, status: int, warnings: int) -> None:
    session.update_status(status or session.status)
    session.wire.send(end_of_result(session.status, min(warnings, 0xFFFF), session.capabilities))


async def _select_concatenated(session: Session, routed: RoutedStatement, codec: StatementCodec,
                               conns: dict[str, BackendConnection]) -> None:
    """Rows need no merging: one connection per data source, its units one after another, raw row
    payloads relayed as they come. The first unit of every data source starts at once."""
    groups = _by_source(routed.execution_units)
    firsts = [_UnitStream(conns[ds], units[0], codec, borrowed=False) for ds, units in groups.items()]
    active: list[_Reader] = list(firsts)
    try:
        await _start_all(firsts)
        header = next((r for r in firsts if r.columns), None)
        if header is None:
            session.update_status(firsts[-1].status)
            session.ok()
            return
        renames = _renames(routed)
        schema = session.database.column_schema if session.database else NO_COLUMN_SCHEMA
        _send_header(session, *_logic_columns(header.columns, renames, schema))
        status = warnings = sent = 0
        for first, (ds, units) in zip(firsts, groups.items(), strict=True):
            reader: _UnitStream = first
            for i in range(len(units)):
                if i:
                    reader = _UnitStream(conns[ds], units[i], codec, borrowed=False)
                    active.append(reader)
                    await reader.start()
                sent += await _relay_payloads(session, reader.frame_batches())
                status, warnings = reader.status, warnings + reader.warnings
        _send_end(session, status, warnings)
        session.found_rows_value, session.found_rows_source = sent, None
        session.rows_sent += sent
    finally:
        await _finish_readers(session, active)


async def _answer_merged(
    session: Session, routed: RoutedStatement, readers: Sequence[_Reader], codec: StatementCodec,
    mask: MaskRule | None = None,
) -> None:
    header = None
    for r in readers:  # (a loop, not a generator: every multi-node SELECT comes here)
        if r.columns:
            header = r
            break
    if header is None:
        # no unit returned a result set: answer OK
        session.update_status(readers[-1].status if readers else session.status)
        session.ok()
        return
    spec = routed.merge_spec
    renames = _renames(routed)
    schema = session.database.column_schema if session.database else NO_COLUMN_SCHEMA
    ncols = len(header.columns)
    visible = spec.visible_columns if spec is not None else ncols
    columns, payloads = _logic_columns(header.columns[:visible], renames, schema)
    if routed.result_table_renames:
        await _renamed_rows(session, readers, columns, renames)
        return
    masks = masked_columns(mask, columns) if mask is not None else ()
    if masks:
        await _answer_masked(session, routed, readers, codec, header.columns, columns, masks)
        return
    _send_header(session, columns, payloads)
    wire = session.wire
    if spec is None or not _needs_merge(spec, ncols):
        sent = 0
        for r in readers:
            sent += await _relay_payloads(session, r.frame_batches())
        session.found_rows_value, session.found_rows_source = sent, None
        session.rows_sent += sent
    else:
        metas = _metas(header.columns)
        if raw_mergeable(spec, ncols):  # merge.raw interleaves the row frames
            sent = await _raw_merged(session, readers, spec, metas, header.columns, codec)
            _send_end(session, readers[-1].status, _warnings(readers))
            session.found_rows_value, session.found_rows_source = sent, None
            session.rows_sent += sent
            return
        width = decoded_width(spec, metas)
        row_streams = [r.rows(header.columns, width if width < ncols else None) for r in readers]
        out: list[bytes] = []
        encode = codec.encode_row
        merge_warnings = MergeStats()
        sent = 0
        async for row in merge_rows(row_streams, spec, metas, memory_row_budget=session.server.merge_memory_rows,
                                    warnings=merge_warnings, meter=budget.current()):
            sent += 1
            out.append(encode(row, columns))
            if len(out) >= 256:
                wire.send_many(out)
                out = []
                await wire.flush()
        if out:
            wire.send_many(out)
        for rs in row_streams:
            with contextlib.suppress(Exception):
                await rs.aclose()  # type: ignore[attr-defined]
        warning_count = max(0, _warnings(readers) + merge_warnings.adjustment)
        _send_end(session, readers[-1].status, warning_count)
        found = merge_warnings.found_rows if spec.found_rows is not None else None
        session.found_rows_value, session.found_rows_source = sent if found is None else found, None
        session.rows_sent += sent
        return
    _send_end(session, readers[-1].status, _warnings(readers))


async def _answer_masked(session: Session, routed: RoutedStatement, readers: Sequence[_Reader], codec: StatementCodec,
                         node_columns: tuple[ColumnDefinition41, ...], columns: list[ColumnDefinition41],
                         masks: Masks) -> None:
    """The answer with its masked columns masked: rows decoded (merged first when the spec needs it), masked and
    encoded again, text or binary as the statement came."""
    out_columns = masked_definitions(columns, masks)
    _send_header(session, out_columns)
    spec = routed.merge_spec
    ncols = len(node_columns)
    visible = len(columns)
    merge_warnings = MergeStats()
    if spec is not None and _needs_merge(spec, ncols):
        metas = _metas(node_columns)
        width = decoded_width(spec, metas)
        streams = [r.rows(node_columns, width if width < ncols else None) for r in readers]
        rows: AsyncIterator[Sequence[bytes | None]] = merge_rows(
            streams, spec, metas, memory_row_budget=session.server.merge_memory_rows, warnings=merge_warnings)
    else:
        streams = []
        rows = _concatenated(readers, node_columns)
    wire = session.wire
    encode = codec.encode_row
    out: list[bytes] = []
    sent = 0
    try:
        async for row in rows:
            sent += 1
            out.append(encode(mask_row(row[:visible], masks), out_columns))
            if len(out) >= 256:
                wire.send_many(out)
                out = []
                await wire.flush()
    finally:
        for rs in (*streams, rows):
            with contextlib.suppress(Exception):
                await rs.aclose()  # type: ignore[attr-defined]
    if out:
        wire.send_many(out)
    _send_end(session, readers[-1].status, max(0, _warnings(readers) + merge_warnings.adjustment))
    found = merge_warnings.found_rows if spec is not None and spec.found_rows is not None else None
    session.found_rows_value, session.found_rows_source = sent if found is None else found, None
    session.rows_sent += sent


async def _concatenated(readers: Sequence[_Reader], columns: tuple[ColumnDefinition41, ...]
                        ) -> AsyncIterator[tuple[bytes | None, ...]]:
    for r in readers:
        async for row in r.rows(columns):
            yield row


async def _raw_merged(session: Session, readers: Sequence[_Reader], spec: MergeSpec, metas: list[ColumnMeta],
                      columns: tuple[ColumnDefinition41, ...], codec: StatementCodec) -> int:
    """`merge.raw.raw_order_merge` over the readers' runs of row frames; the rows sent."""
    batches = [r.frame_batches() for r in readers]
    decode = None if codec is TEXT else _decoder(codec, columns)
    try:
        return await _relay_payloads(session, raw_order_merge(
            batches, spec, metas, decode, memory_row_budget=session.server.merge_memory_rows,
            meter=budget.current()))
    finally:
        for b in batches:
            with contextlib.suppress(Exception):
                await b.aclose()  # type: ignore[attr-defined]


def _warnings(readers: Sequence[_Reader]) -> int:
    total = 0
    for r in readers:
        total += r.warnings
    return total


def _needs_merge(spec: MergeSpec, node_columns: int) -> bool:
    return bool(
        spec.needs_decoding
        or spec.offset
        or spec.limit is not None
        or spec.having_sql
        or spec.visible_columns < node_columns
    )


async def _relay_payloads(session: Session, runs: AsyncIterator[RowFrames]) -> int:
    """Rows that need no merging, runs of frames renumbered with the client's sequence ids; how many."""
    return await relay_frames(session.wire, runs)  # proxy.frontend.relay


async def _renamed_rows(
    session: Session, streams: Sequence[_Reader], columns: list[ColumnDefinition41], renames: dict[str, str]
) -> None:
    """DESCRIBE / SHOW CREATE TABLE / SHOW INDEX of a logic table: map actual table names in the values back."""
    rows: list[tuple[bytes | None, ...]] = []
    for s in streams:
        async for row in s.rows(s.columns):
            rows.append(tuple(_rename_value(v, renames) for v in row))

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


# Per node header (protocol.results gives the same columns tuple back for the same header bytes, statement
# after statement): its merge metadata, and its binary rows' decoder. The same list and function come back, which
# lets merge.raw keep its keys too.
_BY_COLUMNS: IdentityMemo[tuple[list[ColumnMeta], dict[object, Any]]] = IdentityMemo(1024)


def _by_columns(columns: Sequence[ColumnDefinition41]) -> tuple[list[ColumnMeta], dict[object, Any]]:
    cols = tuple(columns) if type(columns) is not tuple else columns
    known = _BY_COLUMNS.get(cols)
    return known if known is not None else _BY_COLUMNS.put(cols, ([_meta(c) for c in cols], {}))


def _metas(columns: Sequence[ColumnDefinition41]) -> list[ColumnMeta]:
    """The merge's ColumnMeta of each column (the list is shared: never changed)."""
    return _by_columns(columns)[0]


def _decoder(codec: StatementCodec, columns: Sequence[ColumnDefinition41]) -> Callable[[bytes, int], Any]:
    """`codec`'s binary row decoder for these columns, to text values (one function per header)."""
    extras = _by_columns(columns)[1]
    decode = extras.get(codec)
    if decode is None:
        decode_row = codec.decode_row
        cols = columns

        def decode(p: bytes, n: int) -> Any:
            return decode_row(p, cols, n)

        extras[codec] = decode
    return decode


async def field_list_sharded(session: Session, db: LogicalDatabase, req: ComFieldList) -> None:
    """COM_FIELD_LIST of a logic table: ask its first actual table, answer with the logic name."""
    assert db.kernel is not None
    plan = decide(db.kernel, f"SELECT * FROM `{req.table}` LIMIT 0", None, NO_FEDERATION)
    if isinstance(plan, Refused):
        raise plan.error
    assert isinstance(plan, Run)
    routed = plan.routed
    unit = routed.execution_units[0]
    conn = await session.backend(unit.data_source, record_write=False)
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


__all__ = ["execute_plan", "field_list_sharded"]
