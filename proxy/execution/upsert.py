"""Running an upsert whose unique key does not contain the sharding columns (see routing.upsert).

The statement runs inside a transaction: the session's own when one is open, else one of its own
(BEGIN on every data source it touches, COMMIT at the end, ROLLBACK when anything fails). In it:

1. named locks (GET_LOCK on the first data source's connection, one per checked key value, in sorted
   order): two sessions that upsert the same key value go one after the other, whichever node each row
   would go to, and whatever the isolation level (gap locks, which would do this under REPEATABLE READ,
   are not taken under READ COMMITTED, and two of them on different servers deadlock undetected). The
   locks are released when the transaction ends (at once for a statement's own transaction). A lock
   that cannot be had within innodb_lock_wait_timeout fails the statement with 1205, as a row lock would;
   MariaDB's deadlock detection covers them (1213);
2. locking reads (SELECT ... FOR UPDATE) of the rows with the statement's key values on every node they
   could be on but the row's own: the latest committed rows, locked until the transaction ends;
3. no conflict there, and no two rows of the statement sharing a key value but not a node: the
   statement runs as usual, one batch per node; else row by row, in order, each where MySQL would act on
   it (routing.upsert). Affected rows, warnings, LAST_INSERT_ID and the OK's info text are those of the
   statements that ran, as MariaDB counts them (1 per inserted row, 2 per updated one, 0 when unchanged;
   REPLACE: 1 + the rows it deleted); row by row inside an open transaction, a failure rolls the
   statement's rows back to a savepoint (statement atomicity, as InnoDB does).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.constants import ErrorCode, ServerStatus
from protocol.errors import ServerError
from protocol.packets import ERRPacket, OKPacket
from proxy.backends.backend import BackendConnection, BackendError
from proxy.backends.codec import StatementCodec
from proxy.execution import lastid, own_txn
from proxy.execution.atomic import (
    NOTHING_APPLIED,
    held_whole,
    parts_of,
    rollback_to_savepoint,
    run_parts,
    said,
    taken_back,
)
from proxy.execution.locks import release, release_session_locks
from proxy.execution.units import UnitFailed, _run_unit_to_ok, insert_info
from routing.errors import RoutingError
from routing.model import DataNode
from routing.parse import NO_AUTO_VALUE_ON_ZERO
from routing.plan import ExecutionUnit, RoutedStatement
from routing.upsert import MODES, UpsertCheck

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

_SAVEPOINT = "shardproxy_upsert"
ER_DUP_ENTRY = 1062


@dataclass
class _Outcome:
    affected: int = 0
    warnings: int = 0
    last_id: int = 0
    duplicates: int = 0
    status: int = 0
    oks: list[OKPacket] | None = None  # the batched path: the units' own OKs
    # each statement that wrote the rows with its OK's id (lastid.of_units: the id one server would report)
    answers: list[tuple[ExecutionUnit, int]] = field(default_factory=list)


async def execute_upsert(session: Session, db: LogicalDatabase, routed: RoutedStatement,
                         codec: StatementCodec) -> None:
    """Raises UnitFailed / ServerError / BackendError like the executor's write path (its caller reports)."""
    check: UpsertCheck = routed.upsert
    implicit = not session.txn.active
    if implicit:  # the statement's own transaction: every data source it touches joins it
        own_txn.begin(session)  # (under LOCK TABLES not BEGIN, which releases them)
    label = f"the COMMIT of this {MODES[check.mode]}"
    try:
        if implicit:  # the statement's own transaction takes it back whole
            with held_whole():
                outcome = await _run(session, routed, check, codec, explicit=False)
        else:
            outcome = await _run(session, routed, check, codec, explicit=True)
    except BaseException as exc:
        if implicit:
            await own_txn.end(session, "ROLLBACK")  # releases the locks too
            if isinstance(exc, Exception):
                raise said(exc, NOTHING_APPLIED + ": its transaction was rolled back on every data source") from None
        raise
    if implicit:
        failure = await own_txn.end(session, "COMMIT", label=label)
        if failure is not None:
            raise failure
    zero_is_value = bool(session.txn.text_mode & NO_AUTO_VALUE_ON_ZERO)
    outcome.last_id, session_id = lastid.of_units(db, routed, outcome.answers, zero_is_value)
    session.update_status(outcome.status or session.status)
    session.row_count = outcome.affected
    if session_id is not None:
        session.last_insert_id = session_id
    if outcome.oks is not None:
        info = insert_info(routed.insert_mode, outcome.oks)
    elif len(check.rows) > 1:
        info = f"Records: {len(check.rows)}  Duplicates: {outcome.duplicates}  Warnings: {outcome.warnings}".encode()
    else:
        info = b""
    session.wire.send(OKPacket(outcome.affected, outcome.last_id, ServerStatus(session.status),
                               min(outcome.warnings, 0xFFFF), info).encode(session.capabilities))


async def _run(session: Session, routed: RoutedStatement, check: UpsertCheck, codec: StatementCodec,
               *, explicit: bool) -> _Outcome:
    charset = session.charset
    sources = {check.lock_source} | {u.data_source for u in routed.execution_units}
    sources |= {n.data_source for row in check.rows for kv in row.keys for n in kv.candidates}
    conns = await session.backends_for(sorted(sources), record_write=True)
    session.give_back_idle()  # nothing else held idle while waiting for a lock another session holds
    names = await _lock(session, check, conns[check.lock_source], check.lock_source, charset)
    slow = _shared_across_nodes(check, names) or await _conflicts_elsewhere(check, conns, charset)
    if not slow:
        return await _batched(session, routed, conns, codec)
    if not explicit:
        return await _row_by_row(check, conns, codec, charset)
    involved = [conns[ds] for ds in sorted(sources)]
    for conn in involved:
        await _ok(conn, ExecutionUnit(conn.name, f"SAVEPOINT {_SAVEPOINT}"))
    try:
        outcome = await _row_by_row(check, conns, codec, charset)
    except BaseException as exc:
        lost = await rollback_to_savepoint(session, involved, _SAVEPOINT)
        if isinstance(exc, Exception):
            raise said(exc, taken_back(lost)) from None
        raise
    for conn in involved:
        await _ok(conn, ExecutionUnit(conn.name, f"RELEASE SAVEPOINT {_SAVEPOINT}"))
    return outcome


# --- named locks -------------------------------------------------------------------------------------------


async def _lock(session: Session, check: UpsertCheck, conn: BackendConnection, source: str, charset: str
                ) -> list[list[str | None]]:
    """Every checked key value's lock (those the session holds already are not asked for again); the names,
    per row and key."""
    names, sql = check.lock_names(charset)
    if sql is not None:
        rows = await _rows(conn, ExecutionUnit(conn.name, sql))
        computed = iter(v.decode() if isinstance(v, bytes) else str(v) for v in (rows[0] if rows else ()))
        for per in names:
            for k, name in enumerate(per):
                if name == "":
                    per[k] = next(computed)
    held = session.txn.upsert_locks.setdefault(source, [])  # by data source name, as session.backends
    wanted = sorted({n for per in names for n in per if n} - set(held))
    if wanted:
        sql = "SELECT " + ", ".join(f"GET_LOCK('{n}', @@innodb_lock_wait_timeout)" for n in wanted)
        try:
            rows = await _rows(conn, ExecutionUnit(conn.name, sql))
        except BaseException:
            await release(conn, wanted)  # those taken before the one that failed (deadlock, killed)
            raise
        got = list(rows[0]) if rows else []
        if len(got) != len(wanted) or any(v != b"1" for v in got):
            await release(conn, wanted)
            raise ServerError("Lock wait timeout exceeded; try restarting transaction",
                              errno=ErrorCode.LOCK_WAIT_TIMEOUT, sqlstate="HY000")
        held.extend(wanted)
    return names


# --- deciding ----------------------------------------------------------------------------------------------


def _shared_across_nodes(check: UpsertCheck, names: list[list[str | None]]) -> bool:
    """Do two rows of the statement share a checked key value (its lock name) but not their node?"""
    homes: dict[tuple[int, str], DataNode] = {}
    for row, per in zip(check.rows, names, strict=True):
        for k, name in enumerate(per):
            if name:
                seen = homes.setdefault((k, name), row.home)
                if seen != row.home:
                    return True
    return False


async def _conflicts_elsewhere(check: UpsertCheck, conns: dict[str, BackendConnection], charset: str) -> bool:
    """Does a row with one of the statement's checked key values exist on a node other than that row's?"""
    by_source: dict[str, list[ExecutionUnit]] = {}
    for node, rows in check.probe_nodes().items():
        by_source.setdefault(node.data_source, []).append(check.probe(node, rows, charset))

    async def probe(ds: str, units: list[ExecutionUnit]) -> bool:
        for unit in units:
            if await _rows(conns[ds], unit):
                return True
        return False

    found = await asyncio.gather(*(probe(ds, us) for ds, us in by_source.items()))
    return any(found)


# --- running ----------------------------------------------------------------------------------------------


async def _batched(session: Session, routed: RoutedStatement, conns: dict[str, BackendConnection],
                   codec: StatementCodec) -> _Outcome:
    """The statement's units as they are, one batch per node: all or nothing (proxy.execution.atomic: inside the
    transaction the upsert runs in, a savepoint on each node it writes)."""
    parts = parts_of(routed.execution_units)
    results = await run_parts(session, parts, conns, codec)
    oks = [ok for r in results for ok in r]
    return _Outcome(
        affected=sum(ok.affected_rows for ok in oks),
        warnings=sum(ok.warnings for ok in oks),
        status=int(oks[-1].status) if oks else 0,
        oks=oks,
        answers=[(unit, ok.last_insert_id) for units, r in zip(parts.values(), results, strict=True)
                 for unit, ok in zip(units, r, strict=True)],
    )


async def _row_by_row(check: UpsertCheck, conns: dict[str, BackendConnection], codec: StatementCodec,
                      charset: str) -> _Outcome:

    out = _Outcome()
    for pos, row in enumerate(check.rows):
        found = await _conflicting(check, pos, conns, charset)  # (node, keys it conflicts on) per existing row
        by_key: dict[int, list[DataNode]] = {}
        for node, keys in found:
            for k in keys:
                by_key.setdefault(k, []).append(node)
        if check.mode == "replace":
            deleted = 0
            for node, keys in found:
                if node != row.home:
                    ok = await _ok(conns[node.data_source], check.delete(pos, node, min(keys), charset))
                    deleted += ok.affected_rows
            unit = check.statement(pos, row.home)
            ok = await _run_unit_to_ok(conns[row.home.data_source], unit, codec)
            out.affected += deleted + ok.affected_rows
            out.duplicates += deleted + max(ok.affected_rows - 1, 0)
        else:
            target = row.home
            first = min(by_key) if by_key else None
            if first is not None:
                nodes = by_key[first]
                if len(nodes) > 1:
                    key = check.spec.keys[first]
                    raise RoutingError(
                        f"{MODES[check.mode]} into {check.spec.table}: unique key {key.name} of row {row.index + 1} "
                        f"already has a row on each of {', '.join(str(n) for n in nodes)}; the table holds "
                        "duplicates the proxy cannot choose between: remove them first", errno=ER_DUP_ENTRY,
                        sqlstate="23000")
                target = nodes[0]
                if target != row.home and check.mode == "update" and any(u < first for u in row.unknown):
                    unknown = check.spec.keys[min(row.unknown)]
                    raise RoutingError(
                        f"INSERT ... ON DUPLICATE KEY UPDATE into {check.spec.table}: row {row.index + 1} conflicts "
                        f"with a row on another data node ({target}), and its value of unique key {unknown.name}, "
                        "which MariaDB checks first, is an expression the proxy cannot look up; give that key's "
                        "columns literal values or parameters")
            unit = check.statement(pos, target)
            ok = await _run_unit_to_ok(conns[target.data_source], unit, codec)
            out.affected += ok.affected_rows
            if first is not None and (check.mode == "ignore" or ok.affected_rows == 2):
                out.duplicates += 1
        out.warnings += ok.warnings
        out.answers.append((unit, ok.last_insert_id))
        out.status = int(ok.status)
    return out


async def _conflicting(check: UpsertCheck, pos: int, conns: dict[str, BackendConnection], charset: str
                       ) -> list[tuple[DataNode, list[int]]]:
    """The existing rows that conflict with row `pos`, on every node they could be on, locked."""
    row = check.rows[pos]
    nodes = list(dict.fromkeys(n for kv in row.keys for n in kv.candidates))
    by_source: dict[str, list[tuple[DataNode, ExecutionUnit, tuple[int, ...]]]] = {}
    for node in nodes:
        lookup = check.lookup(pos, node, charset)
        if lookup is not None:
            by_source.setdefault(node.data_source, []).append((node, *lookup))

    async def read(ds: str, lookups: list[tuple[DataNode, ExecutionUnit, tuple[int, ...]]]
                   ) -> list[tuple[DataNode, list[int]]]:
        found = []
        for node, unit, keys in lookups:
            for flags in await _rows(conns[ds], unit):
                found.append((node, [k for k, f in zip(keys, flags, strict=True) if f == b"1"]))
        return found

    results = await asyncio.gather(*(read(ds, ls) for ds, ls in by_source.items()))
    return [f for r in results for f in r]


async def _rows(conn: BackendConnection, unit: ExecutionUnit) -> list[tuple[bytes | None, ...]]:

    res = await conn.execute(unit.sql)
    if isinstance(res, ERRPacket):
        raise UnitFailed(conn.name, res)
    return res if isinstance(res, list) else []


async def _ok(conn: BackendConnection, unit: ExecutionUnit) -> OKPacket:

    res = await conn.execute(unit.sql)
    if isinstance(res, ERRPacket):
        raise UnitFailed(conn.name, res)
    if not isinstance(res, OKPacket):
        raise BackendError(conn.name, f"{unit.sql!r} answered rows")
    return res


__all__ = ["execute_upsert", "release", "release_session_locks"]
