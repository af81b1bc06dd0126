"""The dispatcher: which handler answers a command, and which answers a statement the proxy handles itself.

Two tables instead of an if-chain: `COMMANDS` maps a command byte (COM_QUERY, COM_STMT_EXECUTE, ...) to
a handler `(session, payload)`, `PROXY_STATEMENTS` maps a `ProxyStatement` kind (proxy.session.statements:
USE, SHOW PROCESSLIST, KILL, DistSQL, ...) to a handler `(session, statement, sql)`. The session calls
`dispatch_command` for every command it reads and turns what a handler raises into an ERR
(`Session._dispatch`); a command or kind missing from the tables is answered as MySQL does.

Why its own module: adding a command is one line in one table, and the tables can be checked without a
server (tests/proxy/test_dispatch.py). Handlers take the session through proxy.session.handle's Protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from protocol.constants import Command, ErrorCode, ServerStatus, SetOption
from protocol.packets import ComInitDB, ComProcessKill, ComSetOption, end_of_result
from protocol.wire import MalformedPacket
from proxy.backends.backend import BackendError
from proxy.execution.plain import statement_kind
from proxy.frontend.wire import ClientGone
from proxy.observe.audit import audit_statement, session_fields
from proxy.session import admin, commands, definitions, prepared, processlist, query
from proxy.session.distsql import handler as distsql
from proxy.session.statements import KINDS, ProxyStatement
from routing.like import like_to_regex

if TYPE_CHECKING:
    from proxy.session.handle import SessionHandle as Session

CommandHandler = Callable[["Session", bytes], Awaitable[None]]
StatementHandler = Callable[["Session", ProxyStatement, str], Awaitable[None]]


# --- commands ---------------------------------------------------------------------------------------------

async def _query(session: Session, payload: bytes) -> None:
    if session.server.statement_timeout > 0:
        await session._with_timeout(query.query(session, payload))
    else:
        await query.query(session, payload)


async def _ping(session: Session, payload: bytes) -> None:
    session.ok()


async def _init_db(session: Session, payload: bytes) -> None:
    await session._use(ComInitDB.decode(payload).database)


async def _set_option(session: Session, payload: bytes) -> None:
    opt = ComSetOption.decode(payload).option
    if opt not in (SetOption.MULTI_STATEMENTS_ON, SetOption.MULTI_STATEMENTS_OFF):
        session.error(ErrorCode.UNKNOWN_COM_ERROR, "Unknown command", "08S01")
        return
    session.multi_statements = opt == SetOption.MULTI_STATEMENTS_ON
    for conn in session.backends.values():
        await conn.simple_command(payload)
    # an EOF, or under DEPRECATE_EOF the OK with 0xFE header that servers send instead
    session.wire.send(end_of_result(ServerStatus(session.status), 0, session.capabilities))


async def _reset_connection(session: Session, payload: bytes) -> None:
    await commands.reset(session)
    session.ok()


async def _statistics(session: Session, payload: bytes) -> None:
    await commands.statistics(session)


async def _process_kill(session: Session, payload: bytes) -> None:
    target = ComProcessKill.decode(payload).connection_id
    try:
        await commands.kill(session, target, "CONNECTION")
    finally:
        audit_statement(session, "kill", f"COM_PROCESS_KILL {target}", target=target, scope="CONNECTION")


async def _stmt_execute(session: Session, payload: bytes) -> None:
    if len(payload) >= 5:
        stmt = session.statements.get(int.from_bytes(payload[1:5], "little"))
        if stmt is not None:
            session.stmt_kind = statement_kind(stmt.sql)
            session.sql = stmt.sql
            session.info = stmt.sql[:100]  # (the processlist's Info, as MariaDB shows an Execute)
    if session.server.statement_timeout > 0:
        await session._with_timeout(prepared.execute(session, payload))
    else:
        await prepared.execute(session, payload)


async def _change_user(session: Session, payload: bytes) -> None:
    """COM_CHANGE_USER, in the audit log as a login (failed: the connection ends, as on MySQL)."""
    try:
        await commands.change_user(session, payload)
    except ClientGone:
        session.server.audit.write("login_failed", **session_fields(session), via="COM_CHANGE_USER",
                                   errno=session.last_errno)
        raise
    session.server.audit.write("login", **session_fields(session), via="COM_CHANGE_USER", tls=session.secure)


def _unanswered(handler: CommandHandler) -> CommandHandler:
    """COM_STMT_SEND_LONG_DATA and COM_STMT_CLOSE have no answer by protocol, so not even an error: a
    failure is logged and surfaces at the next EXECUTE."""

    async def run(session: Session, payload: bytes) -> None:
        try:
            await handler(session, payload)
        except (MalformedPacket, BackendError) as exc:
            session.log.info("unanswered_command_failed", command=payload[0], error=str(exc))

    return run


async def unknown_command(session: Session, payload: bytes) -> None:
    session.error(ErrorCode.UNKNOWN_COM_ERROR, "Unknown command", "08S01")


COMMANDS: Mapping[int, CommandHandler] = {
    Command.QUERY: _query,
    Command.PING: _ping,
    Command.INIT_DB: _init_db,
    Command.FIELD_LIST: commands.field_list,
    Command.SET_OPTION: _set_option,
    Command.RESET_CONNECTION: _reset_connection,
    Command.STATISTICS: _statistics,
    Command.PROCESS_KILL: _process_kill,
    Command.CHANGE_USER: _change_user,
    Command.STMT_PREPARE: prepared.prepare,
    Command.STMT_EXECUTE: _stmt_execute,
    Command.STMT_SEND_LONG_DATA: _unanswered(prepared.send_long_data),
    Command.STMT_CLOSE: _unanswered(prepared.close),
    Command.STMT_RESET: prepared.reset,
    Command.STMT_FETCH: prepared.fetch,
}  # COM_QUIT ends the session before it is dispatched (Session.run)


async def dispatch_command(session: Session, payload: bytes) -> None:
    """Answer one command (`payload[0]` is the command byte) with its handler."""
    await COMMANDS.get(payload[0], unknown_command)(session, payload)


# --- statements the proxy answers itself -------------------------------------------------------------------

async def _use(session: Session, stmt: ProxyStatement, sql: str) -> None:
    await session._use(stmt.arg or "")


async def _show_databases(session: Session, stmt: ProxyStatement, sql: str) -> None:
    """The logical databases the user may see, under the definition MariaDB sends for the same statement
    (information_schema.SCHEMATA's SCHEMA_NAME, its heading naming the pattern), read from a data source."""
    names = session.visible_databases()
    header = "Database"
    if stmt.arg is not None:
        rx = like_to_regex(stmt.arg)
        names = [n for n in names if rx.match(n)]
        header = f"Database ({stmt.arg.replace(chr(39) * 2, chr(39))})"  # MySQL's heading names the pattern
    defined = await definitions.server_definitions(session, sql)
    session.rows(list(defined) if defined is not None and len(defined) == 1 else [header], [(n,) for n in names])


async def _select_database(session: Session, stmt: ProxyStatement, sql: str) -> None:
    """The logical database, under the definition MariaDB sends for the same SELECT (its label as typed)."""
    defined = await definitions.server_definitions(session, sql)
    columns = list(defined) if defined is not None and len(defined) == 1 else [stmt.arg or "DATABASE()"]
    session.rows(columns, [(session.database.name if session.database else None,)])


async def _processlist(session: Session, stmt: ProxyStatement, sql: str) -> None:
    await processlist.processlist(session, stmt.arg == "FULL")


async def _kill(session: Session, stmt: ProxyStatement, sql: str) -> None:
    try:
        await commands.kill(session, int(stmt.arg or 0), stmt.arg2 or "CONNECTION")
    finally:
        audit_statement(session, "kill", sql, target=int(stmt.arg or 0), scope=stmt.arg2 or "CONNECTION")


async def _kill_other(session: Session, stmt: ProxyStatement, sql: str) -> None:
    session.error(ErrorCode.NOT_SUPPORTED_YET, "shardproxy: KILL takes a proxy connection id, as a number "
                  "(SHOW PROCESSLIST); KILL USER, KILL QUERY ID and expressions are not supported", "42000")


async def _alter_txn_rule(session: Session, stmt: ProxyStatement, sql: str) -> None:
    try:
        await admin.admin_statement(session, stmt, sql)
    except Exception as exc:  # (the session answers it after this: the audit line records the refusal)
        audit_statement(session, "distsql", sql, outcome={"ok": False, "errno": getattr(exc, "errno", None)})
        raise
    audit_statement(session, "distsql", sql)


async def _distsql(session: Session, stmt: ProxyStatement, sql: str) -> None:
    await distsql.execute(session, stmt)


PROXY_STATEMENTS: Mapping[str, StatementHandler] = {
    "use": _use,
    "show_databases": _show_databases,
    "select_database": _select_database,
    "processlist": _processlist,
    "kill": _kill,
    "kill_other": _kill_other,
    **{kind: admin.admin_statement for kind in ("preview", "show_rules", "show_nodes", "units", "show_rw_rules",
                                                 "show_txn_rule", "show_in_doubt")},
    "alter_txn_rule": _alter_txn_rule,
    "distsql": _distsql,
    "distsql_unsupported": _distsql,
}
assert set(PROXY_STATEMENTS) == KINDS, "every kind proxy.session.statements.classify returns has a handler"


async def dispatch_proxy_statement(session: Session, stmt: ProxyStatement, sql: str) -> None:
    handler = PROXY_STATEMENTS.get(stmt.kind)
    if handler is None:  # pragma: no cover - classify() only returns the kinds above
        session.error(ErrorCode.NOT_SUPPORTED_YET, f"unsupported proxy statement {stmt.kind}", "42000")
        return
    await handler(session, stmt, sql)


__all__ = ["COMMANDS", "PROXY_STATEMENTS", "dispatch_command", "dispatch_proxy_statement", "unknown_command"]
