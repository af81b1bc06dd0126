"""The commands besides COM_QUERY and the prepared-statement ones: COM_CHANGE_USER, COM_RESET_CONNECTION,
COM_FIELD_LIST, COM_STATISTICS, and KILL (COM_PROCESS_KILL and the KILL statement).

Why its own module: each is a handler the dispatcher (proxy.session.dispatch) calls with the session and
what the command carries; none needs more of the session than proxy.session.handle names.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from protocol.constants import Command, ErrorCode, ServerStatus
from protocol.packets import ComChangeUser, ComFieldList, end_of_result
from proxy.backends.charset import names_for_collation
from proxy.clusterport import port
from proxy.execution import txn
from proxy.execution.errors import answer_error
from proxy.execution.executor import field_list_sharded
from proxy.execution.state import TransactionState
from proxy.frontend.handshake import HandshakeFailed
from proxy.frontend.wire import ClientGone
from proxy.session import processlist

if TYPE_CHECKING:
    from proxy.session.handle import SessionHandle as Session


async def change_user(session: Session, payload: bytes) -> None:
    """COM_CHANGE_USER: authenticate again, then start over as a fresh session of that user."""
    request = ComChangeUser.decode(payload, session.capabilities)
    try:
        user = await session.server.authenticator.change_user(session.wire, request, session.client_host,
                                                           secure=session.secure)
    except HandshakeFailed as exc:
        # MySQL closes the connection after a failed change-user
        answer_error(session, exc)
        await session.wire.flush()
        raise ClientGone("change user failed") from exc
    database = None
    if request.database:
        saved, session.user_config = session.user_config, user  # the new user's privileges decide
        try:
            database, refusal = session.database_access(request.database)
        finally:
            session.user_config = saved
        if database is None:
            session.error(*refusal)
            await session.wire.flush()
            raise ClientGone("change user to a database it may not use")
    txn.abandon(session)
    for conn in list(session.backends.values()) + list(session.read_backends.values()):
        session.give_back(conn)
    session.backends.clear()
    session.read_backends.clear()
    session.renewed.clear()  # a new session, as the server sees it: its connections take the globals again
    session.txn = TransactionState()
    session.statements.clear()
    session.sql_statements.clear()
    session.sql_databases.clear()
    session.user, session.user_config, session.database = user.user, user, database
    if request.character_set:
        session.set_names(names_for_collation(request.character_set))
    session.status = int(ServerStatus.AUTOCOMMIT)
    session.log = session.log.bind(user=session.user)
    session.ok()


async def reset(session: Session) -> None:
    txn.abandon(session)  # a connection with an XA branch is closed, not reset (MariaDB would keep it half-open)
    for name, conn in list(session.backends.items()):
        if conn.broken:
            del session.backends[name]
            session.give_back(conn)
    for name, conn in list(session.backends.items()):
        await conn.simple_command(bytes((Command.RESET_CONNECTION,)))
        conn.charset = "utf8mb4"
        if session.names != "utf8mb4":
            await conn.execute(f"SET NAMES {session.names}")
            conn.charset = session.names
        session.backends[name] = conn
    session.release_read_backends()
    session.read_state = {}
    session.txn = TransactionState()
    session.statements.clear()
    session.sql_statements.clear()
    session.sql_databases.clear()
    session.status = int(ServerStatus.AUTOCOMMIT)


async def field_list(session: Session, payload: bytes) -> None:
    req = ComFieldList.decode(payload)
    db = session.database
    if db is None:
        session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
        return
    source = db.pass_through_source
    if source is None:
        await field_list_sharded(session, db, req)
        return
    conn = await session.backend(source.name, record_write=False)
    # the answer is column definitions then EOF, like a result set without a count or rows
    out = await conn.simple_command(payload)
    renaming = db.renaming
    if renaming is not None:  # the physical database of another name shows as the logical one
        out = [renaming.error(p) if p[:1] == b"\xff" else renaming.column(p) if p[:1] == b"\x03" else p for p in out]
    if out and out[-1][:1] == b"\xfe":
        out[-1] = end_of_result(ServerStatus(session.status), 0, session.capabilities)
    session.wire.send_many(out)


async def statistics(session: Session) -> None:
    uptime = int(asyncio.get_running_loop().time() - session.server.started_at)
    text = (f"Uptime: {uptime}  Threads: {len(session.server.sessions)}  Questions: {session.server.questions}  "
            f"Slow queries: 0  Opens: 0  Open tables: 0  Queries per second avg: 0.000")
    session.wire.send(text.encode())


ER_CONNECTION_KILLED = 1927  # MariaDB's


async def kill(session: Session, target_id: int, scope: str) -> None:
    target = session.server.sessions.get(target_id)
    if target is None:
        if await port(session.server).remote_kill(session, target_id, scope):  # a session of another proxy
            return
        session.error(ErrorCode.NO_SUCH_THREAD, f"Unknown thread id: {target_id}", "HY000")
        return
    if not processlist.may_see(session, target):  # another user's session, and we are no admin
        session.error(ErrorCode.KILL_DENIED_ERROR, f"You are not owner of thread {target_id}", "HY000")
        return
    if scope == "QUERY":
        if target is session:  # the KILL QUERY itself is the statement it interrupts, as on MariaDB
            session.error(ErrorCode.QUERY_INTERRUPTED, "Query execution was interrupted", "70100")
            return
        target.interrupt()  # a command queued on a pool stops too, not only what runs on a backend
        await session.server.kill_backend_queries(target)
        session.ok()
        return
    if target is session:
        # MariaDB answers a session's KILL of itself with ER_CONNECTION_KILLED and closes the connection
        session.error(ER_CONNECTION_KILLED, "Connection was killed", "70100")
        await session.wire.flush()
        raise ClientGone("killed itself")
    await session.server.kill_backend_queries(target)
    if target.task is not None:
        target.task.cancel()
    session.ok()


__all__ = ["change_user", "field_list", "kill", "reset", "statistics"]
