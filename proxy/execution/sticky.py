"""Statements that leave state on a backend connection the proxy cannot re-create elsewhere.

After one of these the session keeps its connections to itself (as ProxySQL disables multiplexing):
temporary tables, named locks, user variables assigned by a query, FOUND_ROWS()/LAST_INSERT_ID(expr)
state, SQL-level PREPARE, HANDLER and XA.
"""

from __future__ import annotations

import re

STICKY = re.compile(
    r"\bTEMPORARY\b|\bGET_LOCK\s*\(|\bLOCK\s+TABLES?\b|:=|\bINTO\s+@|\bSQL_CALC_FOUND_ROWS\b|^\s*(?:PREPARE|"
    r"HANDLER|XA)\b|\bFOUND_ROWS\s*\(|\bLAST_INSERT_ID\s*\(\s*[^\s)]",
    re.I,
)

# every STICKY match contains one of these (lowercase; "lock" covers GET_LOCK, "found_rows" covers
# SQL_CALC_FOUND_ROWS): most statements contain none, and the substring tests cost far less than the regex
MARKERS = ("lock", "into", ":=", "temporary", "found_rows", "last_insert_id", "prepare", "handler", "xa")


def mentions_marker(low: str) -> bool:
    """Does lowercase text contain one of MARKERS? (Spelled out: a chain of `in` tests costs a third of
    any() over a generator.)"""
    return ("lock" in low or "into" in low or ":=" in low or "temporary" in low or "found_rows" in low
            or "last_insert_id" in low or "prepare" in low or "handler" in low or "xa" in low)


# string literals and comments (not MariaDB's executable /*! ... */ ones): a marker inside them is data
_QUOTED = re.compile(r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\""
                     r"|/\*(?![!+M]).*?\*/|--\s[^\n]*|#[^\n]*", re.S)


# STICKY, searched fast: `re` scans a long text quickly only for a pattern that starts with a character (set), and
# every STICKY alternative but the anchored one starts with `\b`, so STICKY tries all of them at every position
# (0.29 s for a 2 MB literal, the event loop blocked meanwhile). The same alternatives, each starting with its first
# character (every character `re.I` matches to it), then `(?<!\w.)`: no word character before that one, which is
# what the `\b` before it says; the anchored alternative is a `match` of its own. `sticky_search(t)` is
# `STICKY.search(t) is not None` (tests/proxy/test_sticky.py compares them).
_STICKY_START = re.compile(r"\s*(?:PREPARE|HANDLER|XA)\b", re.I)
_STICKY_ANYWHERE = re.compile(
    "[TtGgLlIi\u0130\u0131Ss\u017fFf:]"
    r"(?:(?<=[Tt])(?<!\w.)(?i:EMPORARY)\b"
    r"|(?<=[Gg])(?<!\w.)(?i:ET_LOCK)\s*\("
    r"|(?<=[Ll])(?<!\w.)(?i:OCK)\s+(?i:TABLES?)\b"
    r"|(?<=:)="
    "|(?<=[Ii\u0130\u0131])(?<!\\w.)(?i:NTO)\\s+@"
    "|(?<=[Ss\u017f])(?<!\\w.)(?i:QL_CALC_FOUND_ROWS)\\b"
    r"|(?<=[Ff])(?<!\w.)(?i:OUND_ROWS)\s*\("
    r"|(?<=[Ll])(?<!\w.)(?i:AST_INSERT_ID)\s*\(\s*[^\s)])"
)


def sticky_search(text: str) -> bool:
    """Does STICKY match somewhere in `text`? (Without scanning a long text alternative by alternative.)"""
    return _STICKY_START.match(text) is not None or _STICKY_ANYWHERE.search(text) is not None


def may_be_sticky(sql: str, low: str | None = None) -> bool:
    """Does `sql` match STICKY outside its string literals and comments? `low`: `sql.lower()`, when the
    caller has it already. A literal such as `status = 'temporary'` must not pin the session's
    connections for good (the cheap tests run first; the literals are blanked only after a match)."""
    if not mentions_marker(sql.lower() if low is None else low) or not sticky_search(sql):
        return False
    return sticky_search(_QUOTED.sub("''", sql))


__all__ = ["MARKERS", "STICKY", "may_be_sticky", "mentions_marker", "sticky_search"]
