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
    return any(True for _ in tree.find_all(exp.Table))


__all__ = ["needs_database", "unwrapped"]
