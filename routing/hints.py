"""``/* SHARDINGSPHERE_HINT: ... */`` comments (ShardingSphere 5.5 syntax) and their merge with session hints.

Only ``/* */`` comments count (``--`` and ``#`` comments are ignored, as ShardingSphere does). Comment hints
win over the session's: a statement that names its own route means it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from routing.plan import SessionHints

_HINT_RE = re.compile(r"/\*\s*SHARDINGSPHERE_HINT\s*:(.*?)\*/", re.I | re.S)
_QUICK = re.compile(r"SHARDINGSPHERE_HINT", re.I)
_STRING_RE = re.compile(r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\"", re.S)


@dataclass(frozen=True)
class CommentHints:
    """Everything one statement's hint comments say (``SessionHints`` plus the flags only comments carry)."""

    hints: SessionHints = field(default_factory=SessionHints)
    skip_sql_rewrite: bool = False
    present: bool = False


EMPTY = CommentHints()


def _value(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return Decimal(text)
    except InvalidOperation:
        return text


def _true(text: str) -> bool:
    return text.strip().strip("'\"").lower() in ("true", "1", "yes", "on")


def has_hint_comment(sql: str) -> bool:
    """Cheap pre-check so statements without hints pay almost nothing."""
    return "/*" in sql and _QUICK.search(sql) is not None


def parse_hint_comments(sql: str) -> CommentHints:
    """All hint comments of ``sql`` (outside string literals), merged left to right."""
    if not has_hint_comment(sql):
        return EMPTY
    masked = _STRING_RE.sub(lambda m: " " * len(m.group()), sql)
    db_values: dict[str, tuple[Any, ...]] = {}
    table_values: dict[str, tuple[Any, ...]] = {}
    data_source: str | None = None
    write_only = False
    skip = False
    found = False
    for m in _HINT_RE.finditer(masked):
        found = True
        body = sql[m.start(1) : m.end(1)]
        for item in re.split(r"[,;]", body):
            if "=" not in item:
                continue
            key, _, raw = item.partition("=")
            key = key.strip()
            table, dot, name = key.rpartition(".")
            name = name.upper()
            table = table.strip("`").lower() if dot else ""
            if name == "SHARDING_DATABASE_VALUE":
                db_values[table] = (*db_values.get(table, ()), _value(raw))
            elif name == "SHARDING_TABLE_VALUE":
                table_values[table] = (*table_values.get(table, ()), _value(raw))
            elif name == "DATA_SOURCE_NAME":
                data_source = raw.strip().strip("'\"`")
            elif name == "WRITE_ROUTE_ONLY":
                write_only = _true(raw)
            elif name == "SKIP_SQL_REWRITE":
                skip = _true(raw)
    if not found:
        return EMPTY
    hints = SessionHints(
        database_values=db_values, table_values=table_values, data_source=data_source, write_route_only=write_only
    )
    return CommentHints(hints, skip, True)


def parse_comment_hints(sql: str) -> SessionHints:
    """The `SessionHints` that ``sql``'s ``/* SHARDINGSPHERE_HINT: ... */`` comments ask for."""
    return parse_hint_comments(sql).hints


def merge_hints(session: SessionHints | None, comment: SessionHints) -> SessionHints:
    """Comment hints over session hints (per table for sharding values)."""
    if session is None:
        return comment
    return replace(
        session,
        database_values={**session.database_values, **comment.database_values},
        table_values={**session.table_values, **comment.table_values},
        data_source=comment.data_source or session.data_source,
        write_route_only=session.write_route_only or comment.write_route_only,
    )
