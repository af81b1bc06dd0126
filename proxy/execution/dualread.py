"""Running a dual read (``routing.dualread``): a SELECT on a table inside its resharding window.

The kernel says which nodes to ask and what to send; here the steps run on the session's connections (so
a transaction sees its own uncommitted rows): the keys matching the statement on every old and new node,
every copy of those keys, the winner per key, then the user's statement on a temporary table holding the
winners, whose answer is relayed to the client like any single-node answer. The number of keys is bounded
by ``proxy-merge-memory-rows``; beyond it the statement is refused, never answered from a subset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from merge import MergeError
from protocol.packets import ERRPacket
from proxy.backends.backend import BackendConnection
from proxy.backends.codec import StatementCodec, StatementFailed
from proxy.execution.units import UnitFailed, error_renamer
from routing.dualread import DualRead
from routing.model import DataNode
from routing.plan import RoutedStatement

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

log = structlog.get_logger("shardproxy.dualread")

INSERT_BATCH = 500  # winners per INSERT into the temporary table


async def _rows(conn: BackendConnection, data_source: str, sql: str) -> list[tuple[bytes | None, ...]]:
    answer = await conn.execute(sql)
    if isinstance(answer, ERRPacket):
        raise UnitFailed(data_source, answer)
    return answer if isinstance(answer, list) else []


async def _run(conn: BackendConnection, data_source: str, sql: str) -> None:
    answer = await conn.execute(sql)
    if isinstance(answer, ERRPacket):
        raise UnitFailed(data_source, answer)


async def _per_source(dual: DualRead, conns: dict[str, BackendConnection], work: object) -> None:
    """Run ``work(node, conn)`` for every node: data sources in parallel, a data source's nodes in turn
    (they share the session's one connection to it)."""
    groups: dict[str, list[DataNode]] = {}
    for node in dual.nodes:
        groups.setdefault(node.data_source, []).append(node)

    async def one(ds: str, nodes: list[DataNode]) -> None:
        for node in nodes:
            await work(node, conns[ds])  # type: ignore[operator]

    await asyncio.gather(*(one(ds, nodes) for ds, nodes in groups.items()))


async def _collect(session: Session, dual: DualRead, conns: dict[str, BackendConnection]
                   ) -> list[tuple[DataNode, Sequence[bytes | None]]]:
    """Steps 1 and 2: the keys matching the statement on every node, then every copy of those keys."""
    budget = session.server.merge_memory_rows
    keys: dict[bytes | None, None] = {}
    key_sql = dict(dual.key_sql)
    copies: list[tuple[DataNode, Sequence[bytes | None]]] = []
    try:
        async def find_keys(node: DataNode, conn: BackendConnection) -> None:
            for row in await _rows(conn, node.data_source, key_sql[node]):
                keys[row[0]] = None
            if len(keys) > budget:
                raise _TooMany()

        await _per_source(dual, conns, find_keys)
        wanted = [k for k in keys if k is not None]

        async def fetch_copies(node: DataNode, conn: BackendConnection) -> None:
            for sql in dual.copy_sql(node, wanted):
                copies.extend((node, row) for row in await _rows(conn, node.data_source, sql))

        if wanted:
            await _per_source(dual, conns, fetch_copies)
    except _TooMany:
        raise MergeError(
            f"the statement on {dual.rule.logic_table} during its resharding window matches more than {budget} "
            "rows (props.proxy-merge-memory-rows), whose copies the proxy would have to reconcile in memory; add "
            "conditions, raise proxy-merge-memory-rows, or finish the migration to end the window"
        ) from None
    return copies


async def reconcile_copies(session: Session, routed: RoutedStatement, access: dict[str, bool]) -> None:
    """Before a dual UPDATE / DELETE: copies differing from their row's winner are overwritten with it
    (`DualRead.repair_sql`), so that the statement changes every copy alike."""
    dual: DualRead = routed.dual_repair
    conns = await session.backends_for([n.data_source for n in dual.nodes], **access)
    copies = await _collect(session, dual, conns)
    repairs = dual.repair_sql(copies)
    for node, sql in repairs:
        await _run(conns[node.data_source], node.data_source, sql)
    if repairs:
        log.info("dual_write_reconciled", table=dual.rule.logic_table, statements=len(repairs))


async def execute_dual_read(session: Session, db: LogicalDatabase, routed: RoutedStatement,
                            codec: StatementCodec, access: dict[str, bool]) -> None:
    dual: DualRead = routed.dual_read
    conns = await session.backends_for([n.data_source for n in dual.nodes] + [dual.final.data_source], **access)
    table = dual.rule.logic_table
    copies = await _collect(session, dual, conns)
    winners = dual.pick(copies)
    conn = conns[dual.final.data_source]
    created = False
    try:
        await _run(conn, dual.final.data_source, dual.drop_sql())
        await _run(conn, dual.final.data_source, dual.create_sql())
        created = True
        for i in range(0, len(winners), INSERT_BATCH):
            await _run(conn, dual.final.data_source, dual.insert_sql(winners[i : i + INSERT_BATCH]))
        try:
            payload = await codec.command(conn, dual.final)
        except StatementFailed as exc:
            raise UnitFailed(dual.final.data_source, exc.err) from exc
        await session.relay_on(conn, payload, error_renamer(db, routed))
    finally:
        if created:
            try:
                await _run(conn, dual.final.data_source, dual.drop_sql())
            except Exception:  # a connection still holding the temporary table must not serve anyone else
                conn.broken = True
                session.drop_broken()
    log.debug("dual_read", table=table, nodes=len(dual.nodes), copies=len(copies), rows=len(winners))


class _TooMany(Exception):
    pass
