"""COM_QUERY: what one text statement is and who answers it.

In order: statements the proxy answers itself (proxy.session.statements: USE, SHOW PROCESSLIST, KILL,
DistSQL, ...), metadata the proxy must answer or rewrite (proxy.session.metadata), no database chosen
yet, pass-through databases (relayed, with read/write splitting), several statements in one query, and
on sharded databases session statements (SET, transactions), SQL-level PREPARE and routed statements.

Why its own module: the text protocol's decision tree is one job; the session holds the state it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.constants import ErrorCode
from protocol.errors import ServerError
from protocol.packets import ComQuery
from proxy.backends.charset import changes_names, names_of, only_names, read_names
from proxy.backends.readwrite import ReadWriteGroup
from proxy.backends.rename import Renaming, prepared_name, prepared_text
from proxy.execution import diagnostics, infile, table_locks, txn_control
from proxy.execution.encrypted import encrypted_statement, run_encrypted
from proxy.execution.lock_text import parse_lock
from proxy.execution.plain import statement_kind
from proxy.execution.replicas import relay_pass_through
from proxy.execution.routed import execute_routed
from proxy.execution.sticky import may_be_sticky
from proxy.execution.txn_control import classify_session_statement
from proxy.session import metadata, sql_prepared
from proxy.session.encrypt_metadata import answer_metadata
from proxy.session.nodatabase import needs_database, qualified_database, unwrapped
from proxy.session.statements import classify
from proxy.session.stmt_database import in_database
from routing.split import split_statements

if TYPE_CHECKING:
    from proxy.backends.backend import DataSource
    from proxy.backends.runtime import LogicalDatabase
    from proxy.session.handle import SessionHandle as Session


async def query(session: Session, payload: bytes) -> None:
    sql = payload[1:].decode("utf-8", errors="surrogateescape")
    session.substituted = None
    session.stmt_kind = statement_kind(sql)
    session.info = sql[:100]
    session.sql = sql
    stmt = classify(sql)
    if stmt is not None:
        await session._proxy_statement(stmt, sql)
        return
    rewritten = metadata.substitute(session, sql)
    if rewritten is not None:
        session.substituted = (sql, *metadata.substitution_values(session))
        sql = rewritten
        payload = ComQuery(sql.encode("utf-8", errors="surrogateescape")).encode()
    db = session.database
    if await metadata.answer(session, db, sql):
        return
    if db is None or db.kernel is None:
        kept = sql_prepared.kept_statement(session, sql)  # prepared on a sharded database before a USE
        if kept is not None:
            await sql_prepared.sql_statement(session, *kept)
            return
    if db is None:
        await without_database(session, payload, sql)
        return
    became_sticky = not session.sticky and may_be_sticky(sql)
    if became_sticky:
        session.sticky = True
    if encrypted_statement(db, sql):  # an !ENCRYPT table: rewritten, answered decrypted (proxy.execution.encrypted)
        try:
            await encrypted_query(session, db, sql)
        except ServerError as exc:
            _unless_refused(session, became_sticky, exc.errno)
            raise
        _unless_refused(session, became_sticky)
        return
    source = db.pass_through_source
    if source is not None:
        if infile.refused(session, sql):
            return
        renaming = db.renaming
        if renaming is not None:  # the physical database has another name: qualified names are translated
            physical = renaming.request(sql)
            if physical is not sql:
                payload = ComQuery(physical.encode("utf-8", errors="surrogateescape")).encode()
            session.rename_rows = renaming.rows_for(sql) or _executes_renamed(session, sql)
        try:
            await relay_pass_through(session, source, payload, sql)
        finally:
            session.rename_rows = False
        await after_pass_through(session, source, sql)
        _unless_refused(session, became_sticky)
        return
    if session.multi_statements and ";" in sql:
        statements = split_statements(sql, session.txn.mode_flags)
        if len(statements) > 1:
            await multi(session, db, statements)  # an earlier statement may have run: sticky stays
            return
    try:
        await routed_query(session, db, sql)
    except ServerError as exc:  # the kernel's refusal: answered by the session as this statement's ERR
        _unless_refused(session, became_sticky, exc.errno)
        raise
    _unless_refused(session, became_sticky)


def _executes_renamed(session: Session, sql: str) -> bool:
    """EXECUTE of a SQL-level prepared statement whose rows print names (remembered at its PREPARE)."""
    head = sql.lstrip()[:7].upper()
    if head == "PREPARE":
        name, text = prepared_name(sql, "prepare"), prepared_text(sql)
        if name is not None:
            session.renamed_statements.discard(name)
            if text is not None and Renaming.rows_for(text):
                session.renamed_statements.add(name)
    elif head == "EXECUTE" and session.renamed_statements:
        return prepared_name(sql, "execute") in session.renamed_statements
    return False


# errors a statement gets before it runs anywhere (the proxy's refusals, a server's parse-time ones)
_NOT_RUN = frozenset({ErrorCode.NOT_SUPPORTED_YET, ErrorCode.PARSE_ERROR})


def _unless_refused(session: Session, became_sticky: bool, errno: int | None = None) -> None:
    """A statement that would leave state on its connection (`@v := ...`, GET_LOCK, ...) makes the session
    keep its connections to itself, but not when it was refused: it left nothing anywhere, and a session
    kept sticky by a refusal pins one connection of every pool it holds for the rest of its life (enough
    such sessions exhaust the pools, and every other session waits until ERR 1040)."""
    if became_sticky and (errno if errno is not None else session.last_errno if session.errored else 0) in _NOT_RUN:
        session.sticky = False


async def after_pass_through(session: Session, source: DataSource, sql: str) -> None:
    """What a passed-through statement leaves on its connection that the proxy must know: SET state to
    re-create on another connection, and results the client may ask for next (LAST_INSERT_ID() ...)."""
    conn = session.backends.get(source.name)
    if conn is None or session.errored:
        return
    head = sql.lstrip()[:7].upper()
    if head.startswith(("INSERT", "REPLACE", "UPDATE", "DELETE", "CALL", "LOAD")):
        conn.keep_for_next = True  # LAST_INSERT_ID(), ROW_COUNT() of this statement may come next
    if head.startswith("SET"):
        stmt = classify_session_statement(sql)
        if stmt is not None and stmt.kind == "set":
            if changes_names(sql):  # SET NAMES cs COLLATE c, SET CHARACTER SET, SET collation_connection = ...
                names = names_of(sql) or await read_names(conn)
                if names is not None:
                    session.set_names(names)
                    conn.charset = names
            if not only_names(sql):
                session.txn.session_sets.append(sql)
                conn.session_sets = tuple(session.txn.session_sets)
            if "sql_mode" in sql.lower():  # read by the kernel after a USE of a sharded database
                session.txn.mode_flags = conn.status & txn_control.MODE_FLAGS
                session.txn.sql_mode_bits = await txn_control.sql_mode_bits(conn)
            if isinstance(source, ReadWriteGroup):
                session.release_read_backends()  # the next read borrows a replica connection with it
        elif stmt is not None and stmt.kind in ("next_tx", "savepoint"):
            session.sticky = True


async def multi(session: Session, db: LogicalDatabase, statements: list[str]) -> None:
    """Several statements in one COM_QUERY on a sharded database: each routed on its own, answered as
    consecutive results flagged MORE_RESULTS_EXISTS; the first error ends the sequence, as on MySQL."""
    for i, statement in enumerate(statements):
        session.more_results = i < len(statements) - 1
        session.errored = False
        try:
            stmt = classify(statement)
            if stmt is not None:
                await session._proxy_statement(stmt, statement)
                continue
            rewritten = metadata.substitute(session, statement)
            session.substituted = None if rewritten is None else (statement, *metadata.substitution_values(session))
            statement = rewritten or statement
            if not await metadata.answer(session, session.database or db, statement):
                await routed_query(session, session.database or db, statement)
        finally:
            session.more_results = False
        if session.errored:
            return


async def routed_query(session: Session, db: LogicalDatabase, sql: str) -> None:
    session_stmt = classify_session_statement(sql)
    if session_stmt is not None:
        await txn_control.session_statement(session, session_stmt, sql)
        return
    lock = parse_lock(sql) if sql.lstrip()[:1] in ("L", "l", "U", "u", "/", "#", "-") else None
    if lock is not None:
        await table_locks.lock_statement(session, db, lock, txn_control.implicit_commit)
        return
    prepared_sql = sql_prepared.classify_sql_prepared(sql)
    if prepared_sql is not None:
        await sql_prepared.sql_statement(session, *prepared_sql)
        return
    if diagnostics.reads_diagnostics(sql) and await diagnostics.answer(session, db, sql):
        return
    await execute_routed(session, db, sql)


async def encrypted_query(session: Session, db: LogicalDatabase, sql: str, *, binary: bool = False) -> None:
    """A statement naming an encrypted table: rewritten, then run as the rewritten text would be."""
    if session.multi_statements and ";" in sql and len(split_statements(sql, session.txn.mode_flags)) > 1:
        session.error(ErrorCode.NOT_SUPPORTED_YET, "several statements in one query naming encrypted tables: "
                      "the proxy rewrites them one by one; send them one by one", "42000")
        return
    # (DESCRIBE / SHOW COLUMNS / SHOW CREATE TABLE: the table's logical shape, proxy.session.encrypt_metadata)
    await run_encrypted(session, db, sql, lambda text: run_rewritten(session, db, text), binary=binary,
                        other=answer_metadata)


async def run_rewritten(session: Session, db: LogicalDatabase, sql: str) -> None:
    """A statement already rewritten by the encrypt rule, on the database's ordinary path."""
    source = db.pass_through_source
    if source is not None:
        await relay_pass_through(session, source, ComQuery(sql.encode("utf-8", errors="surrogateescape")).encode(),
                                 sql)
        await after_pass_through(session, source, sql)
        return
    await routed_query(session, db, sql)


async def without_database(session: Session, payload: bytes, sql: str) -> None:
    """No logical database chosen yet: what needs none (SET, SELECT @@version_comment, SHOW VARIABLES, also in
    an executable comment) runs on a default data source, and a SET stays the session's (it holds after USE, as
    on MariaDB); what reads the current database answers 1046 (proxy.session.nodatabase)."""
    default = session.server.default_database()
    statement = unwrapped(sql)
    if default is None or needs_database(statement):
        named = qualified_database(statement)
        target = session.database_access(named)[0] if named is not None else None
        if target is None:
            session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
            return
        # every table is qualified with one logical database: run there, as MariaDB runs it without a current one
        async with in_database(session, target, f"a statement naming tables of database '{target.name}'"):
            await query(session, payload)
        return
    saved = session.database
    session.database = default
    try:
        ds = next(iter(default.sources))
        await session.relay(ds, payload)
        await after_pass_through(session, default.sources[ds], statement)
        txn_stmt = classify_session_statement(statement)
        if txn_stmt is not None and txn_stmt.kind != "set" and not session.errored:
            txn_control.mirror(session.txn, txn_stmt, statement)
    finally:
        session.database = saved


__all__ = ["after_pass_through", "encrypted_query", "multi", "query", "routed_query", "without_database"]
