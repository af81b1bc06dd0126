"""Which statements a session that has chosen no database may run, as on MariaDB: SET (also inside an executable
comment `/*!40101 SET ... */`, which mariadb-dump starts with), SELECT and DO without tables, SHOW of server
state (VARIABLES, STATUS, COLLATION ...). What reads the current database (SHOW TABLES, SHOW CREATE TABLE t, a
table name) answers `ERROR 1046 (3D000): No database selected`, as MariaDB does, instead of answering from some
data source's physical database.

Why its own module: a text decision with no session state (proxy.session.query runs what it allows).
"""

from __future__ import annotations

import re

# an executable comment wrapping the whole statement: MariaDB runs its text (every version this proxy serves is
# newer than the ones dump tools write)
_EXECUTABLE = re.compile(r"^\s*/\*M?!\d{0,6}\s?(?P<body>.*?)\*/\s*;?\s*$", re.S)
# SHOW statements about the server, not the current database
_SERVER_SHOW = re.compile(
    r"^\s*SHOW\s+(?:(?:GLOBAL|SESSION|LOCAL|ALL|FULL)\s+)*(?:VARIABLES|STATUS|WARNINGS|ERRORS|COUNT|COLLATION|"
    r"CHARACTER\s+SET|CHARSET|ENGINES?|STORAGE\s+ENGINES|PLUGINS|PRIVILEGES|GRANTS|MASTER|BINARY|BINLOG|SLAVES?|"
    r"REPLICAS?|PROCESSLIST|DATABASES|SCHEMAS|CREATE\s+(?:DATABASE|SCHEMA|USER)|AUTHORS|CONTRIBUTORS|PROFILES?|"
    r"LOCALES|EXPLAIN|ANALYZE)\b",
    re.I,
)


def unwrapped(sql: str) -> str:
    """The statement an executable comment holds (`/*!40100 SET @@SQL_MODE='' */`), else `sql` itself."""
    m = _EXECUTABLE.match(sql)
    return m.group("body").strip() if m is not None else sql


def needs_database(sql: str) -> bool:
    """Does this statement (unwrapped) read the current database, so that it fails with 1046 without one?"""
    head = sql.lstrip()[:4].upper()
    if head == "SET ":
        return False
    if head == "SHOW":
        return _SERVER_SHOW.match(sql) is None
    if head[:3] == "DO " or head == "DO\t":  # DO expr: what SELECT expr reads
        return _mentions_tables("SELECT " + sql.lstrip()[3:])
    return _mentions_tables(sql)


# EXPLAIN / ANALYZE of a statement: its tables are the statement's
_EXPLAINED = re.compile(
    r"^\s*(?:ANALYZE|EXPLAIN|DESCRIBE|DESC)\s+(?:(?:EXTENDED|PARTITIONS|FORMAT\s*=\s*\w+)\s+)?"
    r"(?=\(|(?:SELECT|INSERT|UPDATE|DELETE|REPLACE|WITH)\b)",
    re.I,
)


_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
# SHOW statements that name their database: SHOW TABLES FROM db, SHOW COLUMNS FROM t FROM db / FROM db.t,
# SHOW CREATE TABLE db.t ...
_SHOW_IN_DATABASE = re.compile(
    rf"^\s*SHOW\s+(?:FULL\s+)?(?:TABLES|TABLE\s+STATUS|TRIGGERS|EVENTS)\s+(?:FROM|IN)\s+(?P<db>{_NAME})"
    rf"|^\s*SHOW\s+(?:FULL\s+|EXTENDED\s+)*(?:COLUMNS|FIELDS|INDEX|INDEXES|KEYS)\s+(?:FROM|IN)\s+"
    rf"(?:(?P<qualifier>{_NAME})\s*\.\s*)?{_NAME}(?:\s+(?:FROM|IN)\s+(?P<named>{_NAME}))?"
    rf"|^\s*SHOW\s+CREATE\s+(?:TABLE|VIEW|TRIGGER|EVENT|SEQUENCE)\s+(?P<owner>{_NAME})\s*\.",
    re.I,
)


def _unquoted(name: str) -> str:
    return name[1:-1].replace("``", "`") if name[:1] == "`" else name


def qualified_database(sql: str) -> str | None:
    """The database every table of the statement is qualified with (`SELECT * FROM app.t`, `EXPLAIN ...`), or a
    SHOW names (`SHOW TABLES FROM app`, `SHOW COLUMNS FROM app.t`), which MariaDB runs without a current database;
    None when a table is unqualified or the names differ."""
    if sql.lstrip()[:4].upper() == "SHOW":
        m = _SHOW_IN_DATABASE.match(sql)
        found = m and (m.group("db") or m.group("named") or m.group("qualifier") or m.group("owner"))
        return _unquoted(found) if found else None
    try:
        import sqlglot
        from sqlglot import exp

        tree = sqlglot.parse_one(_EXPLAINED.sub("", sql, count=1), read="mysql")
    except Exception:
        return None
    if tree is None:
        return None
    names = {t.db for t in tree.find_all(exp.Table)}
    if len(names) != 1 or "" in names:
        return None
    return names.pop()


def _mentions_tables(sql: str) -> bool:
    try:
        import sqlglot
        from sqlglot import exp

        tree = sqlglot.parse_one(sql, read="mysql")
    except Exception:
        return True
    if tree is None:
        return False
    # any table, the server's own schemas too: information_schema answers in logical names and only what the user
    # may see (proxy.session.metadata), which needs a database; a data source would answer in its physical ones
    return not _reads_files(tree) and any(True for _ in tree.find_all(exp.Table))


def _reads_files(tree: object) -> bool:
    """A SELECT whose rows come from INFORMATION_SCHEMA.FILES alone (mariadb-dump's tablespaces query, before it
    chooses a database): that table is always empty on MariaDB, on a data source too, so its answer (no rows,
    MariaDB's columns) is the same whatever its subqueries read."""
    from sqlglot import exp

    if not isinstance(tree, exp.Select) or tree.args.get("joins"):
        return False
    source = tree.args.get("from_") or tree.args.get("from")
    table = source.this if source is not None else None
    return isinstance(table, exp.Table) and table.name.upper() == "FILES" and table.db.upper() == "INFORMATION_SCHEMA"


__all__ = ["needs_database", "qualified_database", "unwrapped"]
