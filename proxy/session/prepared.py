"""Prepared statements (COM_STMT_*), for pass-through and sharded logical databases.

Pass-through: the statement is prepared on the session's backend connection and every COM_STMT_* is
forwarded with the statement id translated; answers are relayed frame by frame.

Read/write splitting on a pass-through database: the statement is prepared on the primary (which answers
the PREPARE); its text is classified once (`proxy.backends.readwrite.classify_access`, as a text statement is) and
every EXECUTE of a read asks the group for a replica connection by the same rules as a text read
(transaction strategy, read-after-write, health), where it is prepared once per connection. Such an
EXECUTE is decoded and re-encoded with its parameter types bound, so a statement executed on a replica,
then on the primary, never lacks the types the client bound only once; long data is kept in the proxy
and sent inline. A read-only cursor stays on the connection that opened it, for COM_STMT_FETCH.

Sharded: PREPARE parses nothing per execution — the kernel's plan cache keys on the prepared text, so
each EXECUTE only evaluates the algorithms with the bound values. The answer to PREPARE describes the
logic statement: a query's columns are MariaDB's own for its text, `?` kept, prepared on one data source with
each logic table named by one of its actual tables (proxy.session.describe; subqueries, CTEs, derived tables and
federated statements alike), anything else's from one routed variant; EXECUTE routes with the parameter values
and runs each unit as a prepared statement on its backend (prepared once per backend connection, bound with the
client's types when the unit carries the client's parameters: proxy.session.bound_types), relaying binary rows
for a single unit and merging them for several.

PREPARE / EXECUTE sent as SQL text are `sql_prepared.py`.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from protocol.binary import (
    CURSOR_TYPE_READ_ONLY,
    ComStmtClose,
    ComStmtExecute,
    ComStmtFetch,
    ComStmtPrepare,
    ComStmtReset,
    ComStmtSendLongData,
    PrepareResponse,
    StmtPrepareOK,
)
from protocol.constants import Collation, ColumnFlag, ColumnType, ErrorCode, ServerStatus
from protocol.errors import ServerError
from protocol.packets import ColumnDefinition41, ERRPacket, end_of_result
from protocol.wire import Reader
from proxy.backends.backend import BackendConnection, BackendError
from proxy.backends.codec import BINARY
from proxy.backends.readwrite import Access, ReadWriteGroup, classify_access
from proxy.execution import txn_control
from proxy.execution.decide import OFF_LOOP_TEXT, view_of
from proxy.execution.encrypted import (
    PreparedEncrypted,
    encrypted_statement,
    fast_encrypted_execute,
    mapped_execute,
    physical_binding,
    prepared_encrypted,
    prepared_rewrite,
    relay_prepared_encrypted,
    run_encrypted_prepared,
)
from proxy.execution.explain import DATA_SOURCE_COLUMN, split_explain, xa_refusal
from proxy.execution.plans import Explained, Run, Strategy
from proxy.execution.replicas import TrackingWriter, drop_replica, group_backend
from proxy.execution.resultset import BINARY_ROWS
from proxy.execution.routed import decide_fairly, route_and_execute
from proxy.execution.state import ClientStatement
from proxy.execution.txn_control import classify_session_statement
from proxy.execution.units import _logical_message
from proxy.frontend.wire import CapturedWriter
from proxy.session import definitions, metadata, processlist, system_schema
from proxy.session.bound_types import BoundTypes
from proxy.session.describe import describing_text
from proxy.session.nodatabase import needs_database, qualified_database, unwrapped
from proxy.session.query import after_pass_through, encrypted_query
from proxy.session.statements import classify
from proxy.session.stmt_database import in_database
from routing.errors import RoutingError
from routing.interpolate import interpolate
from routing.logical_names import LogicalNames
from routing.parse import reading, scan_shape
from routing.session_functions import has_call

if TYPE_CHECKING:
    from proxy.backends.runtime import ColumnSchema, LogicalDatabase
    from proxy.execution.context import SessionContext as Session

# MariaDB's and MySQL's definition of a `?` parameter in a PREPARE answer
PARAM_DEFINITION = ColumnDefinition41(
    "?", ColumnType.VAR_STRING, character_set=Collation.BINARY, column_length=0, flags=ColumnFlag.BINARY
)


def _unknown(session: Session, sid: int, command: str) -> None:
    session.error(ErrorCode.UNKNOWN_STMT_HANDLER,
                  f"Unknown prepared statement handler ({sid}) given to {command}", "HY000")


def _prepare_answer(session: Session, stmt: ClientStatement, warnings: int = 0) -> None:
    params = tuple(PARAM_DEFINITION for _ in range(stmt.num_params))
    answer = PrepareResponse(StmtPrepareOK(stmt.id, len(stmt.columns), stmt.num_params, warnings), params,
                             stmt.columns)
    session.wire.send_many(answer.encode(session.deprecate_eof, session.status))


async def prepare(session: Session, payload: bytes) -> None:
    req = ComStmtPrepare.decode(payload)
    sql = req.sql.decode("utf-8", errors="surrogateescape")
    db = session.database
    own_metadata = metadata.answered_here(sql)  # SHOW CREATE DATABASE, SHOW OPEN TABLES ...: the proxy's
    if db is None and classify(sql) is None and not own_metadata:
        await _prepare_without_database(session, sql)
        return
    source = db.pass_through_source if db is not None else None
    if _answered_by_proxy(sql) or metadata.reads_encrypted_columns(db, sql) or own_metadata:
        # KILL, SHOW PROCESSLIST, information_schema.PROCESSLIST ... are the proxy's, prepared or not: a backend
        # would answer (or kill) its own threads. Kept here, answered at EXECUTE as the text statement is (so is
        # information_schema.COLUMNS of a database with encrypted tables: their columns in the logical shape, and
        # SHOW CREATE DATABASE of a logical database, whatever the current one is).
        num_params = await _placeholders(sql, session.txn.mode_flags)
        stmt = ClientStatement(session.statements.new_id(), sql, num_params, (), metadata_statement=True,
                               session_functions=has_call(sql), proxy_answered=True, database=db)
        stmt.columns = await _proxy_columns(session, stmt)
        session.statements.add(stmt)
        _prepare_answer(session, stmt)
        return
    if encrypted_statement(db, sql):  # an !ENCRYPT table: described as rewritten, run as text at EXECUTE
        await _prepare_encrypted(session, db, sql)
        return
    if source is not None:
        # preparing is no write: on a read/write splitting group it must not pin the session to the primary
        conn = await session.backend(source.name, record_write=False)
        # the session's own functions (DATABASE() is the logical database, CONNECTION_ID() the proxy's id) as the
        # text protocol substitutes them: the backend would answer with its own
        sent = metadata.substitute(session, sql) or sql
        renaming = db.renaming
        if renaming is not None:  # the physical database has another name (proxy.backends.rename)
            sent = renaming.request(sent)
        answer = await conn.prepare(sent)
        if isinstance(answer, ERRPacket):
            if renaming is not None:
                answer = ERRPacket.decode(renaming.error(answer.encode()))
            session.wire.send(answer.encode(session.capabilities))
            return
        if renaming is not None:
            answer = replace(answer, params=tuple(map(renaming.definition, answer.params)),
                             columns=tuple(map(renaming.definition, answer.columns)))
        stmt = ClientStatement(session.statements.new_id(), sql, answer.ok.num_params, answer.columns,
                               backend=conn, backend_id=answer.ok.statement_id,
                               access=classify_access(sql) if isinstance(source, ReadWriteGroup) else None,
                               database=db)
        session.statements.add(stmt)
        fixed = replace(answer, ok=replace(answer.ok, statement_id=stmt.id))
        session.wire.send_many(fixed.encode(session.deprecate_eof, session.status))
        return
    assert db is not None and db.kernel is not None
    num_params = await _placeholders(sql, session.txn.mode_flags)
    # BEGIN / COMMIT / SET ... are the session's (proxy.execution.txn), prepared or not: nothing to describe
    columns = () if classify_session_statement(sql) else await _describe(session, sql, num_params)
    stmt = ClientStatement(session.statements.new_id(), sql, num_params, columns,
                           metadata_statement=_metadata_hint(sql),
                           session_functions=has_call(sql), database=db)
    session.statements.add(stmt)
    _prepare_answer(session, stmt)


# what the proxy answers itself and only reads: described at PREPARE by building the answer (nothing changes);
# not SHOW PROCESSLIST, which MariaDB describes only when it executes it (its PREPARE has no columns)
_READ_KINDS = frozenset({"show_databases", "select_database", "preview", "show_rules", "show_nodes",
                         "units", "show_rw_rules", "show_txn_rule", "show_in_doubt"})


async def _proxy_columns(session: Session, stmt: ClientStatement) -> tuple[ColumnDefinition41, ...]:
    """The columns a statement the proxy answers itself will have at EXECUTE (MariaDB describes them at PREPARE:
    `SELECT DATABASE()` has one): its answer is built, with NULL for each `?`, and only its column definitions kept.
    A statement that does something (KILL, USE, DistSQL that changes rules) is not run: it answers OK, no columns."""
    proxy_stmt = classify(stmt.sql)
    if proxy_stmt is not None and proxy_stmt.kind not in _READ_KINDS and not (
            proxy_stmt.kind == "distsql" and stmt.sql.lstrip()[:4].upper() == "SHOW"):
        return ()
    capture = CapturedWriter()
    saved = (session.writer, session.wire.writer, session.wire.seq, session.row_count, session.errored,
             session.last_errno)
    session.writer = session.wire.writer = capture  # type: ignore[assignment]
    try:
        request = ComStmtExecute(stmt.id, 0, 1, (None,) * stmt.num_params, (), False)
        await _execute_proxy_answered(session, stmt, request)
    except Exception:
        return ()  # (its EXECUTE answers the error)
    finally:
        (session.writer, session.wire.writer, session.wire.seq, session.row_count, session.errored,
         session.last_errno) = saved
    answer = [p for _f, _l, p in capture.frames.packets()]
    if answer and answer[0][:1] == b"\xff" and proxy_stmt is None:
        # refused when executed now (SHOW CREATE DATABASE of a database that does not exist): MariaDB describes the
        # text at PREPARE without running it, and so does a data source
        return await _server_prepared_columns(session, stmt.sql)
    if not answer or answer[0][:1] in (b"\x00", b"\xff"):
        return ()
    count = Reader(answer[0]).lenenc_int() or 0
    return tuple(ColumnDefinition41.decode(p) for p in answer[1 : 1 + count])


async def _server_prepared_columns(session: Session, sql: str) -> tuple[ColumnDefinition41, ...]:
    """The columns a data source describes `sql` with at PREPARE (prepared on the session's connection for metadata,
    then closed); none when it refuses it."""
    try:
        conn = await definitions.metadata_connection(session)
        if conn is None:
            return ()
        answer = await conn.prepare(sql)
    except BackendError:
        return ()
    if isinstance(answer, ERRPacket):
        return ()
    conn.send_only(ComStmtClose(answer.ok.statement_id).encode())
    return answer.columns


async def _prepare_without_database(session: Session, sql: str) -> None:
    """No database chosen: what needs none (SELECT DATABASE(), SELECT @@version ...) is prepared on the default
    data source, as a text statement runs there (proxy.session.query.without_database), and executed on that
    connection; what reads the current database answers 1046, as MariaDB does."""
    default = session.server.default_database()
    if default is None or _answered_by_proxy(sql) or needs_database(unwrapped(sql)):
        named = None if _answered_by_proxy(sql) else qualified_database(unwrapped(sql))
        target = session.database_access(named)[0] if named is not None else None
        if target is None:
            session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
            return
        # every table is qualified with one logical database: prepared there (and executed there, as a statement
        # prepared before a USE), as MariaDB prepares it without a current one
        async with in_database(session, target, f"a statement naming tables of database '{target.name}'"):
            await prepare(session, b"\x16" + sql.encode("utf-8", "surrogateescape"))
        return
    session.database = default
    try:
        conn = await session.backend(next(iter(default.sources)), record_write=False)
    finally:
        session.database = None
    sent = metadata.substitute(session, sql)
    answer = await conn.prepare(sent or sql)  # DATABASE() is NULL, as on MariaDB
    if isinstance(answer, ERRPacket):
        session.wire.send(answer.encode(session.capabilities))
        return
    if sent is not None:
        # described as the text itself: MariaDB's PREPARE types DATABASE() as a name even without a database (its
        # EXECUTE as the NULL it is: `CONCAT(USER(), DATABASE())` is 1796 bytes long at PREPARE, 1540 at EXECUTE)
        described = await conn.prepare(sql)
        if isinstance(described, PrepareResponse):
            conn.send_only(ComStmtClose(described.ok.statement_id).encode())
            if len(described.columns) == len(answer.columns):
                answer = replace(answer, columns=described.columns)
    stmt = ClientStatement(session.statements.new_id(), sql, answer.ok.num_params, answer.columns, backend=conn,
                           backend_id=answer.ok.statement_id)
    session.statements.add(stmt)
    fixed = replace(answer, ok=replace(answer.ok, statement_id=stmt.id))
    session.wire.send_many(fixed.encode(session.deprecate_eof, session.status))


def _count_placeholders(sql: str, mode: int = 0) -> int:
    with reading(mode):  # (issue 34: under NO_BACKSLASH_ESCAPES 'a\' is a whole string)
        return sum(1 for _s, _e, kind in scan_shape(sql).spans if kind == "p")


async def _placeholders(sql: str, mode: int = 0) -> int:
    """The statement's `?` placeholders, as the kernel reads the text in the session's sql_mode (`mode`: its
    status flags); a long text is scanned in a worker thread (a 1.5 MB IN list takes ~300 ms, which would hold
    every other session: decide.OFF_LOOP_TEXT)."""
    if len(sql) < OFF_LOOP_TEXT:
        return _count_placeholders(sql, mode)
    return await asyncio.to_thread(_count_placeholders, sql, mode)


async def _describe(session: Session, sql: str, num_params: int) -> tuple[ColumnDefinition41, ...]:
    """The columns of a sharded statement: a query's as MariaDB describes its text (`_describe_query`), another's
    (or a query no one data source can describe) from preparing one routed variant on its backend. A statement
    that cannot be routed without its values (or cannot be routed at all) is described when executed:
    the binary protocol sends the columns with every result anyway."""
    db = session.database
    assert db is not None and db.kernel is not None

    if xa_refusal(sql) is not None:
        return ()  # XA: refused at EXECUTE
    if split_explain(sql) is not None:
        return await _describe_explain(session, sql, num_params)
    spelled = metadata.routed_spelling(db, sql)  # DESC t col, SHOW FIELDS, SHOW KEYS ...: as EXECUTE runs them
    if spelled is not None:
        return await _describe_routed(session, spelled, num_params)
    # A long text (an IN list of thousands of values) is described from its routed variant first: the kernel
    # reads its lists without sqlglot, whose parse of the whole text would hold the event loop (issue 35)
    long = len(sql) >= OFF_LOOP_TEXT
    if not long:
        described = await _describe_query(session, sql)
        if described is not None:
            return described
    routed = await _describe_routed(session, sql, num_params)
    if routed or not long:
        return routed
    return await _describe_query(session, sql) or ()


async def _describe_explain(session: Session, sql: str, num_params: int) -> tuple[ColumnDefinition41, ...]:
    """The columns of the proxy's answer to an EXPLAIN (proxy.execution.explain): its one unit's EXPLAIN as the
    data source describes it, or with several units those and `data_source`. Decided with the statement's values
    when it has none; with parameters, with stand-in values (values that route to another number of units get
    the columns of that answer at EXECUTE)."""
    db = session.database
    assert db is not None and db.kernel is not None
    view = view_of(session, federation=False, found_rows=False)
    for dummy in (0, "0", None):
        plan = await decide_fairly(db, sql, [dummy] * num_params, view)
        if not isinstance(plan, Explained):
            continue
        units = plan.run.routed.execution_units
        conn = await session.backend(units[0].data_source, record_write=False)  # describing is no write
        answer = await conn.prepared(units[0].sql)
        if isinstance(answer, ERRPacket):
            return ()
        return (*answer.columns, DATA_SOURCE_COLUMN) if len(units) > 1 else answer.columns
    return ()


async def _describe_routed(session: Session, sql: str, num_params: int) -> tuple[ColumnDefinition41, ...]:
    """The columns of one routed variant of the statement, decided with stand-in values; none when it routes
    nowhere with them."""
    db = session.database
    assert db is not None and db.kernel is not None
    view = view_of(session, federation=False, found_rows=False)
    for dummy in (0, "0", None):  # decided with stand-in values: a plan to describe, never run
        plan = await decide_fairly(db, sql, [dummy] * num_params, view)
        if not isinstance(plan, Run):
            continue  # refused with these values
        if plan.strategy is Strategy.SELECT_INTO:
            return ()  # SELECT ... INTO @v answers OK, no rows
        routed = plan.routed
        unit = routed.execution_units[0]
        conn = await session.backend(unit.data_source, record_write=False)  # describing is no write
        answer = await conn.prepared(unit.sql)
        if isinstance(answer, ERRPacket):  # in logical names, as EXECUTE's would be (`Table 'sharding_db.t' ...`)
            raise RoutingError(_logical_message(db, routed, answer.message), errno=answer.errno,
                               sqlstate=answer.sqlstate)
        renames = {actual.lower(): logic for ru in routed.route_units for logic, actual in ru.table_map.items()}
        visible = routed.merge_spec.visible_columns if routed.merge_spec else len(answer.columns)
        physical = getattr(db.sources[unit.data_source].config, "database", None)
        return tuple(_tables_in(_logic_column(c, renames, db.column_schema), physical, db.name)
                     for c in answer.columns[:visible])
    return ()


def _tables_in(c: ColumnDefinition41, physical: str | None, logical: str) -> ColumnDefinition41:
    """SHOW TABLES' column `Tables_in_<physical database>` as `Tables_in_<logical database>`."""
    prefix = f"Tables_in_{physical}"
    if physical is None or not c.name.startswith(prefix):
        return c
    return replace(c, name=f"Tables_in_{logical}{c.name[len(prefix):]}")


async def _describe_query(session: Session, sql: str) -> tuple[ColumnDefinition41, ...] | None:
    """A query's columns as MariaDB gives them: its text, `?` kept, prepared on one data source with each logic
    table named by one of its actual tables there (proxy.session.describe), then renamed to logic names. None when
    the text is no such query or the backend refuses it (the caller describes it from a routed variant)."""
    db = session.database
    assert db is not None
    tables = {ds: db.metadata.actual_tables(ds) for ds in db.sources}
    names = LogicalNames(db.rules, tables)
    held = set(session.backends)
    if len(sql) < OFF_LOOP_TEXT:
        found = describing_text(sql, db.name, names, tables, held)
    else:
        found = await asyncio.to_thread(describing_text, sql, db.name, names, tables, held)
    if found is None:
        return None
    conn = await session.backend(found.data_source, record_write=False)  # describing is no write
    answer = await conn.prepared(found.sql)
    if isinstance(answer, ERRPacket):
        return None
    return tuple(_logic_column(c, found.renames, db.column_schema) for c in answer.columns)


def _logic_column(c: ColumnDefinition41, renames: Mapping[str, str], schema: ColumnSchema) -> ColumnDefinition41:
    """A data source's definition in logical names: its actual tables as logic tables, its physical database as the
    logical one (`information_schema`, `mysql` or another database stay)."""
    return replace(c, table=renames.get(c.table.lower(), c.table),
                   org_table=renames.get(c.org_table.lower(), c.org_table), schema=schema.shown(c.schema))


async def _prepare_encrypted(session: Session, db: LogicalDatabase, sql: str) -> None:
    """PREPARE of a statement naming an encrypted table: its columns are those of the rewritten text (the cipher
    columns under the logical names). On a pass-through database the rewrite stays prepared on the connection and
    EXECUTE runs it there, the parameters mapped and encrypted (`_execute_encrypted`); on a sharded one a SELECT
    whose parameters are not encrypted keeps its rewrite, routed and prepared on each node's connection at EXECUTE
    (`_execute_rewrite`); both on the socket callbacks' fast path when they can. Otherwise (what
    `prepared_encrypted` does not keep) EXECUTE runs it as text, its values written in."""
    try:
        encrypted = await prepared_rewrite(session, db, sql)
    except ServerError as exc:
        session.error(exc.errno, exc.message, exc.sqlstate)
        return
    text = sql if encrypted is None else encrypted.sql
    num_params = await _placeholders(sql, session.txn.mode_flags)
    source = db.pass_through_source
    kept = None
    if source is not None:
        conn = await session.backend(source.name, record_write=False)
        answer = await conn.prepared(text)
        if isinstance(answer, ERRPacket):
            session.wire.send(answer.encode(session.capabilities))
            return
        columns = tuple(answer.columns)
        kept = prepared_encrypted(session, db, sql, encrypted, num_params, answer.ok.num_params)
    else:
        text_params = await _placeholders(text, session.txn.mode_flags)
        columns = await _describe(session, text, text_params)
        kept = prepared_encrypted(session, db, sql, encrypted, num_params, text_params)
    stmt = ClientStatement(session.statements.new_id(), sql, num_params, columns, database=db, encrypted=kept)
    session.statements.add(stmt)
    _prepare_answer(session, stmt)


async def execute(session: Session, payload: bytes) -> None:
    if len(payload) < 5:
        session.error(ErrorCode.MALFORMED_PACKET, "Malformed communication packet: COM_STMT_EXECUTE", "HY000")
        return
    sid = struct.unpack_from("<I", payload, 1)[0]
    stmt = session.statements.get(sid)
    if stmt is None:
        _unknown(session, sid, "mysqld_stmt_execute")
        return
    if stmt.database is not session.database:  # prepared before a USE: it runs in its own database, as on MariaDB
        try:
            async with in_database(session, stmt.database, f"prepared statement ({sid})"):
                await _execute_in(session, stmt, payload, elsewhere=True)
        finally:
            stmt.backend_id = 0  # (its connection went back with the command)
        return
    await _execute_in(session, stmt, payload)


async def _execute_in(session: Session, stmt: ClientStatement, payload: bytes, *, elsewhere: bool = False) -> None:
    """EXECUTE in the session's database (`elsewhere`: one that USE left, on connections borrowed for this
    command: a pass-through statement is prepared there afresh, so it is sent with its parameter types and long
    data, which the proxy kept, and no cursor can outlive the command)."""
    if stmt.access is not None:
        await _execute_on_group(session, stmt, payload)
        return
    if stmt.backend is not None:
        if elsewhere:
            request = ComStmtExecute.decode(payload, stmt.num_params, stmt.types, stmt.long_data)
            stmt.types = request.types
            stmt.long_data.clear()
            if request.flags & CURSOR_TYPE_READ_ONLY:
                raise RoutingError(f"shardproxy: prepared statement ({stmt.id}) was prepared in another database "
                                   "than the current one: it cannot open a cursor here; USE its database first",
                                   errno=ErrorCode.NOT_SUPPORTED_YET, sqlstate="42000")
        was = stmt.backend, stmt.backend_id
        conn = await _pass_through_conn(session, stmt)
        if conn is None:
            return
        if not elsewhere and stmt.num_params and (stmt.backend, stmt.backend_id) != was:
            # prepared again (its connection went back at a USE): the types it was bound with go with this execute
            request = ComStmtExecute.decode(payload, stmt.num_params, stmt.types)
            stmt.types, elsewhere = request.types, True
        if elsewhere:
            await session.relay_on(conn, replace(request, statement_id=stmt.backend_id, new_params_bound=True).encode())
            return
        stmt.remember_types(payload)
        forwarded = payload[:1] + struct.pack("<I", stmt.backend_id) + payload[5:]
        await session.relay_on(conn, forwarded)
        return
    request = ComStmtExecute.decode(payload, stmt.num_params, stmt.types, stmt.long_data)
    stmt.types = request.types
    stmt.long_data.clear()
    if request.flags & CURSOR_TYPE_READ_ONLY:
        await _open_cursor(session, stmt, request)
        return
    await _execute_sharded(session, stmt, request)


async def _execute_on_group(session: Session, stmt: ClientStatement, payload: bytes) -> None:
    """COM_STMT_EXECUTE on a pass-through read/write splitting group: a read where a text read of the same
    statement would go (a replica, or the primary), anything else on the primary (counted as a write
    unless it is a session statement, a locking or hinted read)."""
    db = session.database
    assert db is not None
    group = db.pass_through_source
    if not isinstance(group, ReadWriteGroup):  # (the database was replaced under the statement)
        _unknown(session, stmt.id, "mysqld_stmt_execute")
        return
    request = ComStmtExecute.decode(payload, stmt.num_params, stmt.types, stmt.long_data)
    stmt.types = request.types
    stmt.long_data.clear()
    stmt.cursor_conn = None
    if stmt.access is Access.READ:
        for _attempt in range(len(group.replicas) + 1):
            conn = await group_backend(session, group, read=True, record_write=False)
            if conn is None:
                break
            answer = await conn.prepared(stmt.sql)
            if isinstance(answer, ERRPacket):
                session.wire.send(answer.encode(session.capabilities))
                return
            backend_id = answer.ok.statement_id
            forwarded = replace(request, statement_id=backend_id, new_params_bound=True).encode()
            tracker = TrackingWriter(session.writer)
            try:
                await session.relay_on(conn, forwarded, writer=tracker, replica=True)
            except BackendError as exc:  # a replica lost before any byte reached the client: another member
                if tracker.written:
                    raise
                drop_replica(session, group, conn, exc)
                continue
            if request.flags & CURSOR_TYPE_READ_ONLY:
                stmt.cursor_conn, stmt.cursor_id = conn, backend_id
            return
    conn = await _pass_through_conn(session, stmt, record_write=stmt.access is Access.WRITE)
    if conn is None:
        return
    await session.relay_on(conn, replace(request, statement_id=stmt.backend_id, new_params_bound=True).encode())


def _answered_by_proxy(sql: str) -> bool:

    return classify(sql) is not None or processlist.reads_processlist(sql) or system_schema.reads_system_schema(sql)


async def _execute_proxy_answered(session: Session, stmt: ClientStatement, request: ComStmtExecute) -> None:
    """A statement the proxy answers itself, prepared on a pass-through database: answered in binary rows."""

    sql = interpolate(stmt.sql, request.values, session.txn.mode_flags) if stmt.num_params else stmt.sql
    token = BINARY_ROWS.set(True)
    try:
        # (read before the session functions are substituted: `SELECT DATABASE()` is itself the proxy's statement)
        proxy_stmt = classify(sql)
        sql = sql if proxy_stmt is not None else metadata.substitute(session, sql) or sql
        if proxy_stmt is not None:
            await session._proxy_statement(proxy_stmt, sql)
        elif not await metadata.answer(session, session.database, sql):
            session.error(ErrorCode.NOT_SUPPORTED_YET, "shardproxy: this prepared statement cannot be answered",
                          "HY000")
    finally:
        BINARY_ROWS.reset(token)


async def _execute_sharded(session: Session, stmt: ClientStatement, request: ComStmtExecute) -> None:
    db = session.database
    if stmt.proxy_answered:  # the proxy's own answer (before the encrypt rewrite: it names no table to rewrite)
        await _execute_proxy_answered(session, stmt, request)
        return
    if db is not None and encrypted_statement(db, stmt.sql):
        kept = stmt.encrypted
        if kept is not None and fast_encrypted_execute(session, db, kept):
            if db.pass_through_source is None and db.kernel is not None:
                await _execute_rewrite(session, db, kept, request)  # as the fast path executes it
                return
            if await _execute_encrypted(session, db, stmt, kept, request):
                return
        # its parameters encrypted in the text
        sql = interpolate(stmt.sql, request.values, session.txn.mode_flags) if stmt.num_params else stmt.sql
        await encrypted_query(session, db, sql, binary=True)
        return
    assert db is not None and db.kernel is not None
    session_stmt = classify_session_statement(stmt.sql)
    if session_stmt is not None:
        # a prepared BEGIN / COMMIT / ROLLBACK / SET (sysbench --db-ps-mode=auto prepares BEGIN and COMMIT):
        # the proxy's LOCAL transaction and SET fan-out, exactly as for the text form
        sql = interpolate(stmt.sql, request.values, session.txn.mode_flags) if stmt.num_params else stmt.sql
        await txn_control.session_statement(session, session_stmt, sql)
        return

    # results the proxy builds itself (metadata, SHOW INDEX / SHOW CREATE TABLE in logic names) in binary rows
    token = BINARY_ROWS.set(True)
    try:
        if stmt.metadata_statement:
            # SHOW ... / DESCRIBE / information_schema: the proxy's logical answer (proxy.session.metadata)
            sql = interpolate(stmt.sql, request.values, session.txn.mode_flags) if stmt.num_params else stmt.sql
            if await metadata.answer(session, db, metadata.substitute(session, sql) or sql):
                return
        # DATABASE(), CONNECTION_ID(), LAST_INSERT_ID() ... are the session's, as in the text protocol
        sql = (metadata.substitute(session, stmt.sql) or stmt.sql) if stmt.session_functions else stmt.sql
        codec = BoundTypes(request.values, request.types) if request.values else BINARY
        await route_and_execute(session, db, sql, list(request.values), codec)
    finally:
        BINARY_ROWS.reset(token)


async def _execute_encrypted(session: Session, db: LogicalDatabase, stmt: ClientStatement, kept: PreparedEncrypted,
                             request: ComStmtExecute) -> bool:
    """EXECUTE of a statement on an encrypted table of a pass-through database as its rewrite, prepared on the
    session's connection (again, if that connection changed): the client's parameters mapped and encrypted into the
    backend's execute (proxy.execution.encrypted.mapped_execute, what the fast path sends), a SELECT's rows
    decrypted. False when the connection's statement does not take the rewrite's parameters (it runs as text)."""
    source = db.pass_through_source
    if source is None or not source.fast_relay:
        return False
    conn = await session.backend(source.name)
    answer = await conn.prepared(kept.sql)
    if isinstance(answer, ERRPacket):
        session.wire.send(answer.encode(session.capabilities))
        return True
    if answer.ok.num_params != (stmt.num_params if kept.params is None else len(kept.params)):
        return False
    try:
        payload = mapped_execute(kept, answer.ok.statement_id, request.values, request.types)
    except ServerError as exc:  # a LIKE encryptor's character without its dictionary: as the text path refuses it
        session.error(exc.errno, exc.message, exc.sqlstate)
        return True
    session.route = "passthrough"
    await relay_prepared_encrypted(session, conn, kept, payload)
    await after_pass_through(session, source, kept.sql)
    return True


async def _execute_rewrite(session: Session, db: LogicalDatabase, kept: PreparedEncrypted,
                           request: ComStmtExecute) -> None:
    """A prepared SELECT on an encrypted table of a sharded database: its rewrite executed as a prepared statement
    with the client's parameters (those bound to encrypted columns mapped and encrypted), binary rows decrypted
    (proxy.execution.encrypted.run_encrypted_prepared). (Its own function: `_execute_sharded`'s other statements
    build no closure cells.)"""
    values, types = request.values, request.types
    if kept.params is not None:  # parameters bound to encrypted columns: the rewrite's, encrypted
        try:
            values, types, _block = physical_binding(kept, values, types)
        except ServerError as exc:  # a LIKE encryptor's character without its dictionary: as the text path refuses it
            session.error(exc.errno, exc.message, exc.sqlstate)
            return
    codec = BoundTypes(values, types) if values else BINARY
    values = list(values)
    token = BINARY_ROWS.set(True)
    try:
        await run_encrypted_prepared(session, kept, lambda text: route_and_execute(session, db, text, values, codec))
    finally:
        BINARY_ROWS.reset(token)


def _metadata_hint(sql: str) -> bool:
    """SHOW / DESC, or information_schema anywhere (what a case-insensitive regex over the whole text said, at C
    speed: a 1.5 MB IN list took 46 ms of the event loop)."""
    return sql.lstrip()[:4].upper() in ("SHOW", "DESC") or "information_schema" in sql.lower()


async def _pass_through_conn(session: Session, stmt: ClientStatement, *, record_write: bool = True
                             ) -> BackendConnection | None:
    """The backend connection the statement lives on; re-prepared if that connection was replaced.
    `record_write`: a read/write splitting group counts the command as the session's write."""
    db = session.database
    if db is None:  # prepared before a database was chosen, on that connection (`_prepare_without_database`)
        if stmt.backend is not None and not stmt.backend.broken and stmt.backend in session.backends.values() \
                and stmt.backend_id:
            return stmt.backend
        default = session.server.default_database()  # given back since (a USE): prepared again, as at PREPARE
        if default is None:
            _unknown(session, stmt.id, "mysqld_stmt_execute")
            return None
        session.database = default
        try:
            conn = await session.backend(next(iter(default.sources)), record_write=False)
        finally:
            session.database = None
        answer = await conn.prepare(metadata.substitute(session, stmt.sql) or stmt.sql)
        if isinstance(answer, ERRPacket):
            session.wire.send(answer.encode(session.capabilities))
            return None
        stmt.backend, stmt.backend_id = conn, answer.ok.statement_id
        return conn
    source = db.pass_through_source
    if source is None:
        _unknown(session, stmt.id, "mysqld_stmt_execute")
        return None
    conn = await session.backend(source.name, record_write=record_write)
    if conn is not stmt.backend or not stmt.backend_id:
        sent = metadata.substitute(session, stmt.sql) or stmt.sql  # as at PREPARE (`prepare`)
        renaming = db.renaming
        answer = await conn.prepare(renaming.request(sent) if renaming is not None else sent)
        if isinstance(answer, ERRPacket):
            session.wire.send(answer.encode(session.capabilities))
            return None
        stmt.backend, stmt.backend_id = conn, answer.ok.statement_id
    return conn


async def send_long_data(session: Session, payload: bytes) -> None:
    """No answer, by protocol; errors surface at EXECUTE."""
    req = ComStmtSendLongData.decode(payload)
    stmt = session.statements.get(req.statement_id)
    if stmt is None:
        return
    if stmt.backend is not None and stmt.access is None and stmt.database is session.database:
        conn = await _pass_through_conn(session, stmt)
        if conn is not None:
            conn.send_only(ComStmtSendLongData(stmt.backend_id, req.param_id, req.data).encode())
        return
    stmt.long_data.setdefault(req.param_id, bytearray()).extend(req.data)


async def close(session: Session, payload: bytes) -> None:
    """No answer, by protocol."""
    req = ComStmtClose.decode(payload)
    stmt = session.statements.remove(req.statement_id)
    if stmt is not None and stmt.backend is not None and not stmt.backend.broken and stmt.backend_id \
            and stmt.backend in session.backends.values():
        stmt.backend.send_only(ComStmtClose(stmt.backend_id).encode())


async def reset(session: Session, payload: bytes) -> None:
    req = ComStmtReset.decode(payload)
    stmt = session.statements.get(req.statement_id)
    if stmt is None:
        _unknown(session, req.statement_id, "mysqld_stmt_reset")
        return
    stmt.long_data.clear()
    stmt.cursor_rows = None  # COM_STMT_RESET closes the statement's cursor
    cursor_conn, stmt.cursor_conn = stmt.cursor_conn, None
    if cursor_conn is not None and _held(session, cursor_conn):  # the replica's cursor is closed too
        await cursor_conn.simple_command(ComStmtReset(stmt.cursor_id).encode())
    if stmt.backend is not None and stmt.database is session.database:
        conn = await _pass_through_conn(session, stmt, record_write=stmt.access is None)
        if conn is None:
            return
        answer = await conn.simple_command(ComStmtReset(stmt.backend_id).encode())
        session.wire.send_many(answer)
        return
    session.ok()


async def fetch(session: Session, payload: bytes) -> None:
    req = ComStmtFetch.decode(payload)
    stmt = session.statements.get(req.statement_id)
    if stmt is None:
        _unknown(session, req.statement_id, "mysqld_stmt_fetch")
        return
    if stmt.backend is None:
        rows = stmt.cursor_rows
        if rows is None:
            session.error(ER_STMT_HAS_NO_OPEN_CURSOR, f"The statement ({stmt.id}) has no open cursor", "HY000")
            return
        out = [rows.popleft() for _ in range(min(req.num_rows, len(rows)))]
        status = session.status | _CURSOR_EXISTS
        if not rows:  # the last page: the cursor is closed, as MariaDB says it
            status = session.status | _LAST_ROW_SENT
            stmt.cursor_rows = None
        out.append(end_of_result(ServerStatus(status), 0, session.capabilities))
        session.wire.send_many(out)
        return
    if stmt.cursor_conn is not None:  # a read/write splitting group's read: the cursor is on the replica
        if not _held(session, stmt.cursor_conn):  # (given back by a SET or USE since)
            stmt.cursor_conn = None
            session.error(ER_STMT_HAS_NO_OPEN_CURSOR, f"The statement ({stmt.id}) has no open cursor", "HY000")
            return
        conn, backend_id = stmt.cursor_conn, stmt.cursor_id
    elif stmt.database is not session.database:  # (its cursor ended with the command that opened it)
        session.error(ER_STMT_HAS_NO_OPEN_CURSOR, f"The statement ({stmt.id}) has no open cursor", "HY000")
        return
    else:
        found = await _pass_through_conn(session, stmt, record_write=stmt.access is None)
        if found is None:
            return
        conn, backend_id = found, stmt.backend_id
    summary = await conn.relay(
        ComStmtFetch(backend_id, req.num_rows).encode(), session.writer, first_seq=session.wire.seq,
        client_deprecate_eof=session.deprecate_eof, rows_only=True,
    )
    if stmt.cursor_conn is None:
        session.update_status(summary.status)


def _held(session: Session, conn: BackendConnection) -> bool:
    return not conn.broken and (conn in session.read_backends.values() or conn in session.backends.values())


# --- read-only cursors on sharded databases ---------------------------------------------------------------

_CURSOR_EXISTS = int(ServerStatus.CURSOR_EXISTS)
ER_STMT_HAS_NO_OPEN_CURSOR = 1421
_LAST_ROW_SENT = int(ServerStatus.LAST_ROW_SENT)


async def _open_cursor(session: Session, stmt: ClientStatement, request: ComStmtExecute) -> None:
    """COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY on a sharded database: the statement runs (and merges)
    as usual, its rows are kept for COM_STMT_FETCH (within props.proxy-merge-memory-rows), and the client
    gets the columns and a status saying a cursor is open, as from MySQL. (`request` was decoded with the
    statement's long data, which is gone from it since.)"""
    capture = CapturedWriter()
    saved = session.writer, session.wire.writer, session.wire.seq
    session.writer = session.wire.writer = capture  # type: ignore[assignment]
    try:
        await _execute_sharded(session, stmt, request)
    finally:
        session.writer, session.wire.writer, session.wire.seq = saved
    answer = [p for _f, _l, p in capture.frames.packets()]
    if not answer or answer[0][:1] in (b"\x00", b"\xff"):
        session.wire.send_many(answer)  # OK or ERR: no result set, no cursor
        return
    count = Reader(answer[0]).lenenc_int() or 0
    head = answer[: 1 + count]
    rows_start = 1 + count + (0 if session.deprecate_eof else 1)
    rows = answer[rows_start:-1]
    if len(rows) > session.server.merge_memory_rows:
        session.error(ErrorCode.NOT_SUPPORTED_YET,
                      f"a cursor over {len(rows)} rows exceeds props.proxy-merge-memory-rows "
                      f"({session.server.merge_memory_rows}); raise it or read without a cursor", "HY000")
        return
    stmt.cursor_rows = deque(rows)
    status = session.status | _CURSOR_EXISTS
    session.wire.send_many([*head, end_of_result(ServerStatus(status), 0, session.capabilities)])
