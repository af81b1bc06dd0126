"""LOCK TABLES / UNLOCK TABLES on a sharded logical database, as one server takes them.

A logical table is locked by locking every actual table it has, on every data node (as ShardingSphere routes LOCK
TABLES to all actual tables): a sharded table's actual tables, a broadcast table on every data source, a single
table where it lives. Each data source gets one LOCK TABLES with its part of the list, on the session's own
connection (the session then keeps its connections: `sticky`), in the order of the data sources' names, so that two
sessions locking the same tables never hold one server each while waiting for the other's. A LOCK that fails on a
data source after others took theirs is undone there (UNLOCK TABLES): all or nothing, as on one server.

What follows from the servers' own rules needs nothing more: a statement under the lock reading a table the list
left out gets each server's 1100 (Table 'x' was not locked with LOCK TABLES), an alias must be used as given. As on
MariaDB, LOCK TABLES commits the open transaction and releases the locks held before; UNLOCK TABLES commits it when
tables were locked; START TRANSACTION releases them (proxy.execution.txn_control).

Refused before anything is locked (ERR, nothing changed): a table of another logical database, an alias that
would name two actual tables on one data source (MariaDB's 1066 there), a text the proxy cannot read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from protocol.constants import ErrorCode
from protocol.errors import ServerError
from protocol.packets import ERRPacket
from proxy.execution.lock_text import LockItem, LockStatement
from proxy.execution.txn_text import quote

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session
    from routing.plan import RoutedStatement

ER_NONUNIQ_TABLE = 1066
ER_NO_SUCH_TABLE = 1146


class LockRefused(ServerError):
    """The LOCK TABLES cannot be taken as one server would: (errno, message, sqlstate) for the client."""

    def __init__(self, errno: int, message: str, sqlstate: str) -> None:
        super().__init__(message, errno=errno, sqlstate=sqlstate)


def actual_nodes(db: LogicalDatabase, table: str) -> dict[str, list[str]]:
    """Data source -> the actual tables of logical table `table` there. A table no rule or data source knows is
    looked for where the kernel sends an unknown table (its server answers 1146 when it has none)."""
    rules = db.rules
    rule = rules.sharding.table(table) if rules.sharding is not None else None
    if rule is not None:
        return {ds: rule.tables_in(ds) for ds in rule.data_sources}
    if table in rules.broadcast:
        return {ds: [table] for ds in rules.data_sources}
    ds = db.metadata.single_table_data_source(table)
    return {ds if ds is not None else rules.data_sources[0]: [table]}


def per_data_source(db: LogicalDatabase, items: tuple[LockItem, ...]) -> dict[str, str]:
    """Data source -> its LOCK TABLES statement, or LockRefused."""
    seen: set[str] = set()
    lists: dict[str, list[str]] = {}
    for item in items:
        if item.schema is not None and item.schema != db.name:
            raise LockRefused(
                ErrorCode.NOT_SUPPORTED_YET,
                f"LOCK TABLES {item.schema}.{item.table}: shardproxy locks tables of the current logical database "
                f"({db.name}) only; USE {item.schema} and lock it there",
                "42000",
            )
        if item.name.lower() in seen:
            raise LockRefused(ER_NONUNIQ_TABLE, f"Not unique table/alias: '{item.name}'", "42000")
        seen.add(item.name.lower())
        kind = " ".join(item.lock_type)
        for ds, tables in actual_nodes(db, item.table).items():
            if item.alias is not None and len(tables) > 1:
                raise LockRefused(
                    ErrorCode.NOT_SUPPORTED_YET,
                    f"LOCK TABLES {item.table} AS {item.alias}: sharded table {item.table} has {len(tables)} actual "
                    f"tables on {ds} ({', '.join(tables)}), and one alias cannot name two tables on one server; "
                    f"lock {item.table} without an alias and use it without one",
                    "42000",
                )
            alias = f" AS {quote(item.alias)}" if item.alias is not None else ""
            lists.setdefault(ds, []).extend(f"{quote(t)}{alias} {kind}" for t in tables)
    return {ds: "LOCK TABLES " + ", ".join(parts) for ds, parts in sorted(lists.items())}


async def lock_statement(session: Session, db: LogicalDatabase, stmt: LockStatement,
                         implicit_commit: Callable[[Session], Awaitable[bool]]) -> None:
    """LOCK TABLES / UNLOCK TABLES, answered to the client (module docstring). `implicit_commit` is
    txn_control's (which imports this module to release the locks at BEGIN: handed in, not imported)."""

    if stmt.error is not None:
        session.error(ErrorCode.PARSE_ERROR, f"You have an error in your SQL syntax: {stmt.error}", "42000")
        return
    if stmt.unlock:
        if session.txn.table_locks and not await implicit_commit(session):
            return
        await unlock_all(session)
        session.update_status(0)
        session.ok()
        return
    try:
        statements = per_data_source(db, stmt.items)
    except LockRefused as exc:
        session.error(exc.errno, exc.message, exc.sqlstate)
        return
    if not await implicit_commit(session):
        return
    await unlock_all(session)  # LOCK TABLES first releases the locks the session holds
    session.sticky = True  # the locks live on these connections: no other session may borrow them
    done: list[str] = []
    for ds, sql in statements.items():
        try:
            conn = await session.backend(ds, record_write=False)  # (a lock is no write: no read-after-write pin)
            answer = await conn.execute(sql)
        except BaseException:
            session.txn.table_locks = done
            await unlock_all(session)
            raise
        if isinstance(answer, ERRPacket):
            session.txn.table_locks = done
            await unlock_all(session)
            session.error(answer.errno, answer.message, answer.sqlstate)
            return
        done.append(ds)
    session.txn.table_locks = done
    session.update_status(0)
    session.ok()


async def unlock_all(session: Session) -> None:
    """UNLOCK TABLES on every data source where the session holds table locks (a connection that fails it is
    closed, which releases them too)."""
    locked, session.txn.table_locks = session.txn.table_locks, []
    for ds in locked:
        conn = session.backends.get(ds)
        if conn is None or conn.broken:
            continue
        try:
            answer = await conn.execute("UNLOCK TABLES")
        except Exception as exc:
            conn.broken = True
            session.log.warning("unlock_tables_failed", data_source=ds, error=str(exc))
            continue
        if isinstance(answer, ERRPacket):
            conn.broken = True
    session.drop_broken()


__all__ = ["LockRefused", "actual_nodes", "lock_statement", "per_data_source", "unlock_all"]


ER_TABLE_NOT_LOCKED = 1100


def refuse_unlocked(session: Session, routed: RoutedStatement) -> None:
    """Under LOCK TABLES, a statement that would read a table on a data source where the session locked nothing:
    that server would run it (it has no locks of the session's to check against), where one server answers 1100
    for a table the LOCK TABLES left out. Raises that ERR, naming the logic table; nothing runs."""
    locked = session.txn.table_locks
    if not locked:
        return
    used = {u.data_source for u in routed.execution_units}
    for ru in routed.route_units:
        if ru.data_source in used and ru.data_source not in locked and ru.table_map:
            table = min(ru.table_map)
            raise ServerError(f"Table '{table}' was not locked with LOCK TABLES", errno=ER_TABLE_NOT_LOCKED,
                              sqlstate="HY000")

