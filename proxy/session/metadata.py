"""Metadata answers in logical names: what GUI tools, ORMs and drivers ask when they connect and browse.

* Session functions (DATABASE(), CONNECTION_ID(), USER(), ...) are replaced by the session's values.
* `SHOW [FULL] TABLES` on a sharded database lists logic, broadcast and single tables.
* information_schema queries run on every data source with the logical names in their literals turned
  into the physical ones, and the answers are mapped back: physical schema -> logical database, the first
  actual table of a sharded table -> its logic name, the other actual tables hidden, rows deduplicated.
* `SHOW PROCESSLIST` lists the proxy's sessions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from protocol import text as ptext
from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket, decode_text_row
from protocol.results import ResultHeader
from proxy.backends.codec import BINARY
from proxy.clusterport import port
from proxy.execution.decide import decide, view_of
from proxy.execution.executor import execute_plan
from proxy.execution.plans import Refused, Run
from proxy.execution.resultset import BINARY_ROWS, result_packets
from proxy.execution.units import log_statement
from proxy.session import definitions, schema_merge, system_schema
from proxy.session.processlist import (
    _hides_proxy_statement,
    _masked,
    _processlist_table,
    _select_on_default,
    backend_states,
    reads_processlist,
)
from proxy.session.schema_scope import _SCHEMA_TABLE, Scope, restore_names, restore_reshaped, scope_to_schema
from proxy.session.statements import unquote_ident
from routing.encrypt.metadata import logical_schema_columns, logical_schema_select, table_metadata
from routing.encrypt.rule import EncryptTable
from routing.like import like_to_regex
from routing.logical_names import LogicalNames
from routing.session_functions import has_call, substitute_session_functions
from routing.split import _TOKEN

Row = tuple[bytes | None, ...]

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

_SHOW_TABLES = re.compile(
    r"^\s*SHOW\s+(?P<full>FULL\s+)?TABLES(?:\s+(?:FROM|IN)\s+(?P<db>`[^`]+`|\w+))?"
    r"(?:\s+LIKE\s+'(?P<like>[^'\\]*(?:(?:\\.|'')[^'\\]*)*)'|\s+WHERE\s+(?P<where>.+?))?\s*;?\s*$",
    re.I | re.S,
)
_SHOW_TABLE_STATUS = re.compile(
    r"^\s*SHOW\s+TABLE\s+STATUS(?:\s+(?:FROM|IN)\s+(?P<db>`[^`]+`|\w+))?"
    r"(?:\s+LIKE\s+'(?P<like>[^'\\]*(?:(?:\\.|'')[^'\\]*)*)'|\s+WHERE\s+(?P<where>.+?))?\s*;?\s*$",
    re.I | re.S,
)
# the spellings of SHOW INDEX the kernel does not parse: INDEXES / KEYS, IN, EXTENDED
_SHOW_INDEX = re.compile(
    r"^\s*SHOW\s+(?P<extended>EXTENDED\s+)?(?P<word>INDEX|INDEXES|KEYS)\s+(?P<prep>FROM|IN)\s+"
    r"(?P<table>(?:(?:`[^`]+`|\w+)\.)?(?:`[^`]+`|\w+))(?:\s+(?:FROM|IN)\s+(?P<db>`[^`]+`|\w+))?"
    r"(?P<where>\s+WHERE\s+.+?)?\s*;?\s*$",
    re.I | re.S,
)
# the spellings of SHOW COLUMNS the kernel does not parse: FIELDS, IN
_SHOW_COLUMNS = re.compile(
    r"^\s*SHOW\s+(?P<full>FULL\s+)?(?P<word>COLUMNS|FIELDS)\s+(?P<prep>FROM|IN)\s+"
    r"(?P<table>(?:(?:`[^`]+`|\w+)\.)?(?:`[^`]+`|\w+))(?:\s+(?P<dbprep>FROM|IN)\s+(?P<db>`[^`]+`|\w+))?"
    r"(?P<rest>\s+(?:LIKE|WHERE)\s+.+?)?\s*;?\s*$",
    re.I | re.S,
)
# DESCRIBE t col / DESC t 'pattern': the kernel parses only the form without a column
_DESCRIBE_COLUMN = re.compile(
    r"^\s*(?:DESCRIBE|DESC)\s+(?!(?:SELECT|INSERT|UPDATE|DELETE|REPLACE|WITH|TABLE|EXTENDED|PARTITIONS|FORMAT|"
    r"ANALYZE|FOR)\b)(?P<table>(?:(?:`[^`]+`|\w+)\.)?(?:`[^`]+`|\w+))\s+"
    r"(?P<column>`[^`]+`|\w+|'[^'\\]*(?:(?:\\.|'')[^'\\]*)*')\s*;?\s*$",
    re.I | re.S,
)
_SHOW_CREATE_DATABASE = re.compile(
    r"^\s*SHOW\s+CREATE\s+(?:DATABASE|SCHEMA)\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<db>`[^`]+`|\w+)\s*;?\s*$",
    re.I,
)
_SHOW_OPEN_TABLES = re.compile(
    r"^\s*SHOW\s+OPEN\s+TABLES(?:\s+(?:FROM|IN)\s+(?P<db>`[^`]+`|\w+))?"
    r"(?:\s+LIKE\s+'(?P<like>[^'\\]*(?:(?:\\.|'')[^'\\]*)*)'|\s+WHERE\s+(?P<where>.+?))?\s*;?\s*$",
    re.I | re.S,
)
_SYSTEM_SCHEMAS = {"information_schema", "performance_schema", "mysql", "sys"}
_SHOW_STATUS = re.compile(r"^\s*SHOW\s+(?:(?:GLOBAL|SESSION|LOCAL)\s+)?STATUS\b", re.I)
# status variables that count the server's clients: the proxy's sessions, not its pooled connections
_CLIENT_COUNTS = {b"threads_connected"}


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def function_values(session: Session) -> dict[str, str]:
    db = session.database
    user = session.user_config
    values = {
        "database": _quote(db.name) if db else "NULL",
        "schema": _quote(db.name) if db else "NULL",
        "connection_id": str(session.id),
        "user": _quote(f"{session.user}@{session.client_host}"),
        "session_user": _quote(f"{session.user}@{session.client_host}"),
        "system_user": _quote(f"{session.user}@{session.client_host}"),
        "current_user": _quote(f"{session.user}@{user.host if user else '%'}"),
    }
    if db is not None and db.kernel is not None:
        # on one pass-through connection the backend knows these; across shards only the proxy does
        values["last_insert_id"] = str(session.last_insert_id)
        values["row_count"] = str(session.row_count)
        if session.found_rows_value is not None:
            values["found_rows"] = str(session.found_rows_value)
        return values
    return {name: _typed(name, value) for name, value in values.items()}


# the function whose type a substituted value keeps (SCHEMA() is DATABASE(), the *_USER()s are USER())
_TYPED_AS = {"schema": "DATABASE", "session_user": "USER", "system_user": "USER"}


def _typed(name: str, value: str) -> str:
    """On a pass-through database, `value` standing for `name()` with the function's own type: MariaDB types a
    literal by its text (`CONCAT(CONNECTION_ID())` becomes VARCHAR(2), not VARCHAR(10); `CREATE TABLE ... AS
    SELECT USER()` a VARCHAR(14)), and IF(0, f(), value) has f()'s type and value's value (f() is not called).
    The kernel of a sharded database reads plain literals (a sharding value may come from one)."""
    if value == "NULL":
        return value  # DATABASE() without a database: NULL in an expression (a whole item: routing.session_functions)
    # (BIGINT UNSIGNED: CONNECTION_ID(), LAST_INSERT_ID(); ROW_COUNT() and FOUND_ROWS() are signed, and a signed
    # and an unsigned BIGINT make a DECIMAL)
    literal = f"CAST({value} AS UNSIGNED)" if value.isdigit() and name in _UNSIGNED_CALLS else value
    return f"IF(0, {_TYPED_AS.get(name, name.upper())}(), {literal})"


_UNSIGNED_CALLS = frozenset({"connection_id", "last_insert_id"})


def substitution_values(session: Session) -> tuple[dict[str, str], dict[str, str] | None]:
    """The literals standing for the session's functions (`function_values`), and on a sharded database those for a
    call in the statement's own select list: typed as the function there (`_typed`), where no value routes, so that
    the column has the function's definition (`SELECT USER()`: VARCHAR(384) NULL, not the literal's VARCHAR(14) NOT
    NULL)."""
    values = function_values(session)
    db = session.database
    if db is None or db.kernel is None:
        return values, None  # (already typed)
    return values, {name: _typed(name, value) for name, value in values.items()}


def substitute(session: Session, sql: str) -> str | None:
    if "(" not in sql or not has_call(sql):
        return None  # the common case, decided before building the session's values
    if _ACCOUNT_STATEMENT.match(sql):
        return None  # CURRENT_USER() names an account there (SHOW GRANTS FOR CURRENT_USER()), no value
    return substitute_session_functions(sql, *substitution_values(session))


_ACCOUNT_STATEMENT = re.compile(
    r"^\s*(?:SHOW\s+GRANTS|GRANT|REVOKE|(?:ALTER|CREATE|DROP|RENAME)\s+USER|SET\s+(?:PASSWORD|DEFAULT\s+ROLE))\b",
    re.I,
)


def logical_names(db: LogicalDatabase) -> LogicalNames:
    tables = {ds: db.metadata.actual_tables(ds) for ds in db.sources}
    return LogicalNames(db.rules, tables)


async def answer(session: Session, db: LogicalDatabase | None, sql: str) -> bool:
    """Answer `sql` here when it is a metadata statement that needs logical names; False otherwise."""
    if ";" in sql and (db is None or db.kernel is None) and _hides_proxy_statement(sql):
        session.error(
            1235,
            "shardproxy: KILL, SHOW PROCESSLIST and information_schema.PROCESSLIST are answered by "
            "the proxy: send them as a statement of their own, not in a multi-statement query",
            "42000",
        )
        return True
    head = sql.lstrip()[:20].upper()
    if head.startswith("SHOW"):
        if _SHOW_STATUS.match(sql):
            return await _show_status(session, db, sql)
        m = _SHOW_CREATE_DATABASE.match(sql)
        if m:
            await _show_create_database(session, m)
            return True
        m = _SHOW_OPEN_TABLES.match(sql)
        if m:
            await _show_open_tables(session, db, m)
            return True
        if db is not None and db.kernel is not None:
            m = _SHOW_TABLES.match(sql)
            if m:
                await _show_tables(session, db, m)
                return True
            m = _SHOW_TABLE_STATUS.match(sql)
            if m:
                await _show_table_status(session, db, m)
                return True
            spelled = routed_spelling(db, sql)
            if spelled is not None:
                await _route(session, db, spelled)
                return True
        return False
    if head.startswith("DESC") and db is not None and db.kernel is not None:
        spelled = routed_spelling(db, sql)
        if spelled is not None:
            await _route(session, db, spelled)
            return True
        return False
    if head.startswith(("SELECT", "WITH", "(")) and system_schema.reads_system_schema(sql):
        await system_schema.answer(session, db, sql)
        return True
    if "information_schema" in sql.lower() and head.startswith(("SELECT", "WITH", "(")):
        reads = reads_processlist(sql)
        others = await port(session.server).other_sessions(session, True) if reads else []
        rewritten = _processlist_table(session, sql, others, await backend_states(session) if reads else None)
        if rewritten is not None:
            await _select_on_default(session, db, rewritten, original=sql)
            return True
        if db is not None:
            await _information_schema(session, db, sql)
            return True
    return False


def routed_spelling(db: LogicalDatabase, sql: str) -> str | None:
    """`sql` in the spelling the kernel routes, when it is a SHOW / DESCRIBE of a table that the kernel does not parse
    as written: `DESC t col` (SHOW COLUMNS ... LIKE), SHOW FIELDS / SHOW COLUMNS IN, SHOW INDEXES / KEYS / IN /
    EXTENDED (MySQL's). None otherwise, and for an encrypted table's columns (answered in their logical shape by
    proxy.session.encrypt_metadata)."""
    head = sql.lstrip()[:4].upper()
    if head == "DESC":
        m = _DESCRIBE_COLUMN.match(sql)
        if m is None or _encrypted_columns(db, sql):
            return None
        column = m.group("column")
        pattern = column[1:-1] if column[0] == "'" else unquote_ident(column).replace("'", "''")
        return f"SHOW COLUMNS FROM {m.group('table')} LIKE '{pattern}'"
    if head != "SHOW":
        return None
    m = _SHOW_COLUMNS.match(sql)
    if m is not None:
        if (m.group("word").upper(), m.group("prep").upper(), (m.group("dbprep") or "FROM").upper()) == (
            "COLUMNS", "FROM", "FROM"
        ) or _encrypted_columns(db, sql):
            return None  # the kernel's own spelling; an encrypted table
        named = f" FROM {m.group('db')}" if m.group("db") else ""
        return f"SHOW {'FULL ' if m.group('full') else ''}COLUMNS FROM {m.group('table')}{named}{m.group('rest') or ''}"
    m = _SHOW_INDEX.match(sql)
    if m is None:
        return None
    if not m.group("extended") and (m.group("word").upper(), m.group("prep").upper()) == ("INDEX", "FROM"):
        return None  # the kernel's own spelling
    other = m.group("db")
    if other is not None and unquote_ident(other).lower() != db.name.lower():
        return None
    return f"SHOW INDEX FROM {m.group('table')}{m.group('where') or ''}"


def _encrypted_columns(db: LogicalDatabase, sql: str) -> bool:
    encrypt = db.config.encrypt
    return encrypt is not None and table_metadata(sql, encrypt, db.name) is not None


async def _show_status(session: Session, db: LogicalDatabase | None, sql: str) -> bool:
    """SHOW STATUS, run on a data source, with the counts of clients (`Threads_connected`) the proxy's own: the data
    source counts the proxy's pooled connections. False when no data source can answer (no database chosen and no
    default one)."""
    target = db if db is not None else session.server.default_database()
    if target is None:
        return False
    saved = session.database
    session.database = target  # (no database chosen: the default one's data source, as other such statements)
    try:
        conn = await session.backend(next(iter(target.sources)), record_write=False)
    finally:
        session.database = saved
    columns: tuple[ColumnDefinition41, ...] = ()
    rows: list[tuple[bytes | None, ...]] = []
    sessions = str(len(session.server.sessions)).encode()
    async for ev in conn.events(ComQuery(sql.encode("utf-8", "surrogateescape")).encode()):
        if isinstance(ev, ResultHeader):
            columns = ev.columns
        elif isinstance(ev, bytes):
            row = decode_text_row(ev, len(columns))
            if len(row) == 2 and (row[0] or b"").lower() in _CLIENT_COUNTS:
                row = (row[0], sessions)
            rows.append(row)
        elif isinstance(ev, ERRPacket):
            session.error(ev.errno, ev.message, ev.sqlstate)
            return True
    if not columns:
        session.ok()
        return True
    session.wire.send_many(
        result_packets(list(columns), rows, capabilities=session.capabilities, status=session.status)
    )
    return True


def _target(session: Session, db: LogicalDatabase, named: str | None) -> LogicalDatabase | None:
    """The database a `SHOW ... FROM db` names (the current one without FROM); None after an error."""
    if not named:
        return db
    if _invalid_name(session, unquote_ident(named)):
        return None
    return session.database_named(unquote_ident(named))


def _invalid_name(session: Session, name: str) -> bool:
    """A database name that is not valid in the session's character set gets MariaDB's ERR (True)."""
    bad = ptext.invalid_string(name, session.charset)
    if bad is not None:
        session.error(ptext.INVALID_CHARACTER_STRING, bad, "HY000")
    return bad is not None


async def _show_tables(session: Session, db: LogicalDatabase, m: re.Match[str]) -> None:
    target = _target(session, db, m.group("db"))
    if target is None:
        return
    if target.kernel is None:
        # a pass-through database lists its own tables; only the logical FROM name must not reach it
        text = (
            m.string[: m.start("db")]
            + "`"
            + target.sources[next(iter(target.sources))].config.database
            + "`"
            + m.string[m.end("db") :]
            if m.group("db")
            else m.string
        )
        # from that database's own data source (its data source names are its own: `ds_0` may be ours too)
        served = await definitions.backend_answer(session, text, target)
        if isinstance(served, ERRPacket):
            session.error(served.errno, served.message, served.sqlstate)
        elif served is None:
            session.error(2013, f"data source {next(iter(target.sources))} cannot be reached", "HY000")
        else:
            renaming = target.renaming
            columns = [renaming.definition(c) if renaming is not None else c for c in served[0]]
            session.rows(list(columns), list(served[1]))
        return
    await target.reload_metadata()  # tables may have been created behind the proxy's back
    names = existing_tables(target)
    if m.group("like") is not None:
        rx = like_to_regex(m.group("like"))
        names = [n for n in names if rx.match(n)]
    # MariaDB writes a byte of the pattern that is not UTF-8 as '?' in the column name
    column = f"Tables_in_{target.name}" + (f" ({ptext.shown(m.group('like'))})" if m.group("like") is not None else "")
    labels = [column, "Table_type"] if m.group("full") else [column]
    rows: list[tuple[object, ...]] = [(n, "BASE TABLE") if m.group("full") else (n,) for n in names]
    # MariaDB's definitions (information_schema.TABLE_NAMES'), from a data source: listing nothing
    defined = await _definitions(session, db, "SHOW FULL TABLES LIKE ''")
    if defined is None:
        return
    if m.group("where"):
        filtered = await filter_where(session, db, labels, rows, m.group("where"))
        if filtered is None:
            return
        rows = list(filtered)
    columns: list[str | ColumnDefinition41] = [
        replace(defined[i], name=label) if i < len(defined) else label for i, label in enumerate(labels)
    ]
    session.rows(columns, rows)


async def _definitions(session: Session, db: LogicalDatabase, sql: str) -> tuple[ColumnDefinition41, ...] | None:
    """The column definitions of `sql`'s answer on the session's connection to `db`'s first data source (its rows
    read and dropped): MariaDB's own, in the session's character set. None after an error was sent to the client."""
    conn = await session.backend(next(iter(db.sources)), record_write=False)  # a read of metadata
    columns: tuple[ColumnDefinition41, ...] = ()
    async for ev in conn.events(ComQuery(sql.encode()).encode()):
        if isinstance(ev, ResultHeader):
            columns = ev.columns
        elif isinstance(ev, ERRPacket):
            session.error(ev.errno, ev.message, ev.sqlstate)
            return None
    return columns


def existing_tables(db: LogicalDatabase) -> list[str]:
    """The logical tables that exist on the backends: a sharded table when one of its actual tables does,
    a broadcast table when one of its copies does, single tables as found (not every configured rule
    names a table somebody created: a listing that shows one makes ORMs skip creating it)."""
    names = logical_names(db)
    present = {(ds, t.lower()) for ds in db.sources for t in db.metadata.actual_tables(ds)}
    sharding = db.rules.sharding
    out: list[str] = []
    for name in names.tables:
        rule = sharding.table(name.lower()) if sharding is not None else None
        if rule is not None:
            if any((n.data_source, n.table.lower()) in present for n in rule.data_nodes):
                out.append(name)
        elif name in db.rules.broadcast:
            if any((ds, name.lower()) in present for ds in db.sources):
                out.append(name)
        else:
            out.append(name)
    return out


def _actual_to_logic(db: LogicalDatabase) -> dict[tuple[str, str], str]:
    """(data source, actual table lower-case) -> logic table, for every node of every sharded table."""
    out: dict[tuple[str, str], str] = {}
    sharding = db.rules.sharding
    if sharding is not None:
        for rule in sharding.tables.values():
            for node in rule.data_nodes:
                out[(node.data_source, node.table.lower())] = rule.logic_table
    return out


async def filter_where(
    session: Session, db: LogicalDatabase | None, columns: list[str], rows: list[tuple[object, ...]], where: str
) -> list[tuple[bytes | None, ...]] | None:
    """Evaluate a SHOW statement's WHERE over rows the proxy built, by MySQL itself: the rows go to a
    backend as a derived table (values as text, so that `Rows > 0` compares as MySQL would). None after
    an error was sent to the client."""

    def lit(v: object) -> str:
        if v is None:
            return "NULL"
        return _quote(v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v))

    first = rows[0] if rows else tuple(None for _ in columns)
    head = "SELECT " + ", ".join(f"{lit(v)} AS `{c.replace('`', '``')}`" for v, c in zip(first, columns, strict=True))
    selects = " UNION ALL ".join([head, *("SELECT " + ", ".join(lit(v) for v in r) for r in rows[1:])])
    empty = "" if rows else " AND FALSE"
    sql = f"SELECT * FROM ({selects}) AS t WHERE ({where}){empty}"
    conn = await definitions.metadata_connection(session, db)
    if conn is None:
        session.error(1046, "No database selected", "3D000")
        return None
    res = await conn.execute(sql)
    if isinstance(res, ERRPacket):
        session.error(res.errno, res.message, res.sqlstate)
        return None
    return res if isinstance(res, list) else []


_SUMMED = {"Rows", "Data_length", "Index_length", "Data_free"}


async def _show_table_status(session: Session, db: LogicalDatabase, m: re.Match[str]) -> None:
    """SHOW TABLE STATUS of logical tables: one row per logic table, its sizes summed over its actual tables; the
    column definitions MariaDB sends (information_schema.TABLES'), from a data source of the current database."""
    target = _target(session, db, m.group("db"))
    if target is None:
        return
    defined = await _definitions(session, db, "SHOW TABLE STATUS LIKE ''")
    if defined is None:
        return
    labels = [c.name for c in defined]
    summed = [i for i, label in enumerate(labels) if label in _SUMMED]
    at = {label: i for i, label in enumerate(labels)}
    names = logical_names(target)
    logic_of = _actual_to_logic(target)
    merged: dict[str, list[bytes | None]] = {}
    for ds, source in target.sources.items():
        physical = source.config.database
        res = await source.admin_execute(f"SHOW TABLE STATUS FROM `{physical.replace('`', '``')}`")
        if isinstance(res, ERRPacket):
            session.error(res.errno, res.message, res.sqlstate)
            return
        if not isinstance(res, list):
            session.error(2013, f"data source {ds} cannot be reached", "HY000")
            return
        for raw in res:
            row = [*raw[: len(labels)], *[None] * (len(labels) - len(raw))]  # (a server of another version)
            actual = (row[0] or b"").decode("utf-8", "surrogateescape")
            logic = logic_of.get((ds, actual.lower()))
            if logic is None:
                shown = names.view(ds, actual)
                if shown is None:
                    continue  # a copy of a broadcast table on another data source
                logic = shown
            row[0] = logic.encode()
            have = merged.get(logic.lower())
            if have is None:
                merged[logic.lower()] = row
                continue
            for i in summed:
                if row[i] is not None:
                    have[i] = str(int(have[i] or 0) + int(row[i] or 0)).encode()
    rows: list[tuple[object, ...]] = []
    count, average, size = at.get("Rows"), at.get("Avg_row_length"), at.get("Data_length")
    for row in sorted(merged.values(), key=lambda r: (r[0] or b"").lower()):
        if count is not None and average is not None and size is not None and row[count] and row[size] is not None:
            row[average] = str(int(row[size]) // max(1, int(row[count] or 0))).encode()  # over the summed rows
        rows.append(tuple(row))
    if m.group("like") is not None:
        rx = like_to_regex(m.group("like"))
        rows = [r for r in rows if rx.match(ptext.decode(r[0] or b"") if isinstance(r[0], bytes) else str(r[0]))]
    if m.group("where"):
        filtered = await filter_where(session, target if target is db else db, labels, rows, m.group("where"))
        if filtered is None:
            return
        rows = list(filtered)
    session.rows(list(defined), rows)


async def _route(session: Session, db: LogicalDatabase, sql: str) -> None:
    """Run a statement the kernel routes, in the protocol of the client's command (text or binary rows)."""

    assert db.kernel is not None
    plan = decide(
        db.kernel, sql, [] if BINARY_ROWS.get() else None, view_of(session, federation=False, found_rows=False)
    )
    if isinstance(plan, Refused):
        raise plan.error
    assert isinstance(plan, Run)  # a SHOW / DESCRIBE of a table: no EXPLAIN, nothing federated
    log_statement(session, sql, plan.routed)
    if BINARY_ROWS.get():
        await execute_plan(session, db, plan, BINARY)
    else:
        await execute_plan(session, db, plan)


async def _show_create_database(session: Session, m: re.Match[str]) -> None:
    name = unquote_ident(m.group("db"))
    if _invalid_name(session, name):
        return
    target = session.database_named(name)
    if target is None:
        return
    source = next(iter(target.sources.values()))
    physical = source.config.database
    res = await source.admin_execute(f"SHOW CREATE DATABASE {m.group('ine') or ''}`{physical.replace('`', '``')}`")
    if isinstance(res, ERRPacket):
        session.error(res.errno, res.message, res.sqlstate)
        return
    if not isinstance(res, list) or not res:
        session.error(2013, f"data source {source.name} cannot be reached", "HY000")
        return
    text = (res[0][1] or b"").decode("utf-8", "surrogateescape")
    text = text.replace(f"`{physical.replace('`', '``')}`", f"`{target.name.replace('`', '``')}`", 1)
    # MariaDB's definitions (the statement's own, in the session's character set): of a database every server has
    defined = await definitions.server_definitions(session, "SHOW CREATE DATABASE information_schema")
    session.rows(definitions.named(defined, ["Database", "Create Database"]), [(target.name, text)])


def answered_here(sql: str) -> bool:
    """A statement `answer` answers itself whatever the session's database (also when it chose none) that a data
    source would answer otherwise, prepared or not: SHOW CREATE DATABASE (of a logical database, whatever the
    current one is), SHOW OPEN TABLES (the logical databases' tables, also on a pass-through database: its server
    would list the others' actual tables), information_schema.PROCESSLIST."""
    if sql.lstrip()[:4].upper() == "SHOW":
        if _SHOW_CREATE_DATABASE.match(sql) is not None:
            return True
        return _SHOW_OPEN_TABLES.match(sql) is not None
    return reads_processlist(sql)


async def _show_open_tables(session: Session, db: LogicalDatabase | None, m: re.Match[str]) -> None:
    """SHOW OPEN TABLES as one server holding the logical databases answers it, whatever the current database: a
    logical table is open when one of its actual tables (a copy of a broadcast table) is open on its data source,
    listed once under its logical name and database (`In_use` and `Name_locked` the largest of its actual tables':
    a lock taken through the proxy counts once); a table no statement opened is not listed, and neither are the
    actual tables nor the other databases of the data sources. Without FROM: every logical database the user may
    see, and the server's own schemas (mysql, performance_schema ...) as the first data source of the current
    (else the default) database has them open; FROM a server schema, that data source's answer; FROM another name,
    no rows (as MariaDB answers for a database it does not have). The column definitions are MariaDB's
    (information_schema.OPEN_TABLES'), read from that data source."""
    named = unquote_ident(m.group("db")) if m.group("db") else None
    if named is not None and _invalid_name(session, named):
        return
    if named is not None and named.lower() in _SYSTEM_SCHEMAS:
        await _relay_on_metadata_connection(session, db, m.string)
        return
    served = await definitions.backend_answer(session, "SHOW OPEN TABLES" if named is None else
                                              "SHOW OPEN TABLES FROM information_schema LIKE ''", db)
    if isinstance(served, ERRPacket):
        session.error(served.errno, served.message, served.sqlstate)
        return
    if served is None:
        session.error(1046, "No database selected", "3D000")  # (no data source at all)
        return
    defined, server_rows = served
    rows: list[tuple[object, ...]] = []
    if named is None:
        rows.extend(r for r in server_rows if (r[0] or b"").decode("utf-8", "surrogateescape").lower()
                    in _SYSTEM_SCHEMAS)
        targets = [session.server.database(n) for n in session.visible_databases()]
    else:
        targets = [session.database_access(named)[0]]
    for target in targets:
        if target is not None:
            opened = await _open_tables_of(session, target)
            if opened is None:
                return
            rows.extend(opened)
    if m.group("like") is not None:
        rx = like_to_regex(m.group("like"))
        rows = [r for r in rows if rx.match(ptext.decode(r[1]) if isinstance(r[1], bytes) else str(r[1]))]
    labels = [c.name for c in defined]
    if m.group("where"):
        filtered = await filter_where(session, db, labels, rows, m.group("where"))
        if filtered is None:
            return
        rows = list(filtered)
    session.rows(list(defined), rows)


async def _open_tables_of(session: Session, target: LogicalDatabase) -> list[tuple[object, ...]] | None:
    """The open tables of one logical database (`_show_open_tables`), read from each of its data sources; None after
    an error was sent."""
    sharded = target.kernel is not None
    names = logical_names(target) if sharded else None
    logic_of = _actual_to_logic(target) if sharded else {}
    merged: dict[str, tuple[str, str, int, int]] = {}  # logic table (lower case) -> its row
    for ds, source in target.sources.items():
        physical = source.config.database
        res = await source.admin_execute(f"SHOW OPEN TABLES FROM `{physical.replace('`', '``')}`")
        if isinstance(res, ERRPacket):
            session.error(res.errno, res.message, res.sqlstate)
            return None
        if not isinstance(res, list):
            session.error(2013, f"data source {ds} cannot be reached", "HY000")
            return None
        for row in res:
            actual = (row[1] or b"").decode("utf-8", "surrogateescape")
            if names is None:
                logic: str | None = actual
            elif (ds, actual.lower()) in logic_of:
                logic = logic_of[(ds, actual.lower())]
            elif actual in target.rules.broadcast:
                logic = actual  # a copy of a broadcast table: open on one data source, open
            else:
                logic = names.view(ds, actual)
            if logic is None:
                continue
            in_use, locked = int(row[2] or 0), int(row[3] or 0)
            have = merged.get(logic.lower())
            if have is not None:
                in_use, locked = max(have[2], in_use), max(have[3], locked)
            merged[logic.lower()] = (target.name, have[1] if have is not None else logic, in_use, locked)
        if not sharded:
            break  # a pass-through database: its one data source
    return list(merged.values())


async def _relay_on_metadata_connection(session: Session, db: LogicalDatabase | None, sql: str) -> None:
    """`sql`, about the server itself, answered as the first data source of the current (else the default) database
    answers it."""
    served = await definitions.backend_answer(session, sql, db)
    if isinstance(served, ERRPacket):
        session.error(served.errno, served.message, served.sqlstate)
        return
    if served is None:
        session.error(1046, "No database selected", "3D000")
        return
    session.rows(list(served[0]), list(served[1]))


def _rewrite_literals(sql: str, mapping: dict[str, str]) -> str:
    """Replace string literals whose value is a logical name by the physical one (outside comments)."""
    out: list[str] = []
    for m in _TOKEN.finditer(sql):
        piece = m.group()
        if len(piece) >= 2 and piece[0] in ("'", '"') and piece[-1] == piece[0]:
            value = piece[1:-1]
            replacement = mapping.get(value.lower())
            if replacement is not None:
                out.append(_quote(replacement))
                continue
        out.append(piece)
    return "".join(out)


async def _information_schema(session: Session, db: LogicalDatabase, sql: str) -> None:
    """Each data source answers for the objects the logical view shows from it (see `_scope_to_schema`), so
    the answers are concatenated as they come: two rows that are equal are two objects (two columns of one
    name in two tables), never one object seen twice."""
    names = logical_names(db)
    first = next(iter(db.sources))
    encrypted = reads_encrypted_columns(db, sql)
    if len(db.sources) > 1 and schema_merge.needs_one_server(sql) and _SCHEMA_TABLE.search(_masked(sql)):
        scopes = {
            ds: Scope(first=ds == first, hidden=_hidden(names, ds, db.metadata.actual_tables(ds))) for ds in db.sources
        }
        await schema_merge.answer(
            session,
            db,
            sql,
            scopes,
            lambda row, cols, ds, phys: _map_row(row, cols, ds, phys, db.name, names),
            _logical_columns(db) if encrypted else None,
        )
        return
    header: tuple[ColumnDefinition41, ...] | None = None
    rows: list[tuple[bytes | None, ...]] = []
    for ds, source in db.sources.items():
        physical = source.config.database
        mapping = {db.name.lower(): physical}
        for table in names.tables:
            actual = names.actual(ds, table)
            if actual is not None:
                mapping.setdefault(table.lower(), actual)
        scope = Scope(first=ds == first, hidden=_hidden(names, ds, db.metadata.actual_tables(ds)))
        originals: dict[str, ColumnDefinition41] = {}
        if encrypted:  # the encrypted tables this data source shows, in their logical shape
            reshaped = await _reshaped_columns(session, db, names, ds, physical, originals)
            if reshaped is False:
                return
            scope = replace(scope, columns=reshaped)
        scoped = scope_to_schema(_rewrite_literals(sql, mapping), physical, scope)
        if scoped is None:
            continue  # nothing of this data source's own: the first one answered for the server
        conn = await session.backend(ds, record_write=False)  # a read of metadata: no write to remember
        columns: tuple[ColumnDefinition41, ...] = ()
        async for ev in conn.events(ComQuery(scoped.encode("utf-8", "surrogateescape")).encode()):
            if isinstance(ev, ResultHeader):
                columns = ev.columns
                header = header or restore_names(sql, restore_reshaped(sql, columns, originals))
            elif isinstance(ev, bytes):
                row = _map_row(decode_text_row(ev, len(columns)), columns, ds, physical, db.name, names)
                if row is not None:
                    rows.append(row)
            elif isinstance(ev, ERRPacket):
                session.wire.send(ev.encode(session.capabilities))
                session.errored = True
                return
    if header is None:
        session.ok()
        return

    session.wire.send_many(result_packets(list(header), rows, capabilities=session.capabilities, status=session.status))


async def _reshaped_columns(
    session: Session,
    db: LogicalDatabase,
    names: LogicalNames,
    ds: str,
    physical: str,
    originals: dict[str, ColumnDefinition41],
) -> tuple[str, str] | Literal[False] | None:
    """The `Scope.columns` of data source `ds`: its information_schema.COLUMNS with the encrypted tables it shows in
    their logical shape, computed by the server (routing.encrypt.metadata.logical_schema_select, from their rows read
    here); None when it shows none; False after an error was sent. `originals` gets information_schema.COLUMNS'
    column definitions."""
    encrypt = db.config.encrypt
    assert encrypt is not None
    shown: dict[str, EncryptTable] = {}  # physical table (lower case) -> its rule
    actuals: list[str] = []
    for table in encrypt.tables.values():
        actual = names.actual(ds, table.name) or table.name
        view = names.view(ds, actual)
        if view is not None and view.lower() == table.name.lower():
            shown[actual.lower()] = table
            actuals.append(actual)
    if not shown:
        return None
    read = (
        f"SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {_quote(physical)} "
        f"AND TABLE_NAME IN ({', '.join(map(_quote, actuals))})"
    )
    conn = await session.backend(ds, record_write=False)
    answer = await conn.answer(read)
    if isinstance(answer, ERRPacket):
        session.error(answer.errno, answer.message, answer.sqlstate)
        return False
    columns, rows = answer
    labels = [c.org_name or c.name for c in columns]
    originals.update({label.upper(): c for label, c in zip(labels, columns, strict=True)})
    return logical_schema_select(labels, rows, shown, physical)


def reads_encrypted_columns(db: LogicalDatabase | None, sql: str) -> bool:
    """The statement reads information_schema.COLUMNS of a database with encrypted tables: it sees them in their
    logical shape (whatever it does with them: a WHERE, an ORDER BY, a count see the logical columns), each data
    source's computed by the server (`_reshaped_columns`), or, for a statement answered over a copy of the
    logical view (proxy.session.schema_merge), copied so."""
    encrypt = None if db is None else db.config.encrypt
    return (
        encrypt is not None
        and bool(encrypt.tables)
        and "information_schema" in sql.lower()
        and "COLUMNS" in schema_merge.read_tables(sql)
    )


def _logical_columns(db: LogicalDatabase) -> schema_merge.RowsMapper:
    encrypt = db.config.encrypt
    assert encrypt is not None

    def mapped(table: str, rows: list[Row], columns: tuple[ColumnDefinition41, ...]) -> list[Row]:
        if table != "COLUMNS":
            return rows
        return logical_schema_columns([c.org_name or c.name for c in columns], rows, encrypt.tables, db.name)

    return mapped


def _hidden(names: LogicalNames, ds: str, tables: Iterable[str]) -> tuple[str, ...]:
    """The physical tables of a data source the logical view hides."""
    return tuple(sorted(t for t in tables if names.view(ds, t) is None))


def _map_row(
    row: tuple[bytes | None, ...],
    columns: tuple[ColumnDefinition41, ...],
    ds: str,
    physical: str,
    logical: str,
    names: LogicalNames,
) -> tuple[bytes | None, ...] | None:
    out = list(row)
    for i, col in enumerate(columns):
        value = row[i]
        if value is None:
            continue
        label = (col.org_name or col.name).upper()
        text = value.decode("utf-8", "surrogateescape")
        if label.endswith("SCHEMA") or label in ("SCHEMA_NAME", "TABLE_CATALOG_SCHEMA", "DB"):
            if text == physical:
                out[i] = logical.encode()
            elif text.lower() not in _SYSTEM_SCHEMAS:
                return None  # another database on the same server: not part of this logical database
        elif label.endswith("TABLE_NAME"):
            shown = names.view(ds, text)
            if shown is None:
                return None
            out[i] = shown.encode()
    return tuple(out)
