"""Statements that leave state on a backend connection the proxy cannot re-create elsewhere.

After one of these the session keeps its connections to itself (as ProxySQL disables multiplexing):
temporary tables, named locks, user variables assigned by a query, FOUND_ROWS()/LAST_INSERT_ID(expr)
state, SQL-level PREPARE, HANDLER and XA.
"""

from __future__ import annotations

import re

STICKY = re.compile(
    r"\bTEMPORARY\b|\bGET_LOCK\s*\(|\bLOCK\s+TABLES?\b|:=|\bINTO\s+@|\bSQL_CALC_FOUND_ROWS\b|^\s*(?:PREPARE|"
    r"HANDLER|XA)\b|\bFOUND_ROWS\s*\(|\bLAST_INSERT_ID\s*\(\s*\S",
    re.I,
)

# every STICKY match contains one of these (lowercase): most statements contain none, and the substring
# test costs far less than the regex
_MARKERS = ("temporary", "get_lock", "lock", ":=", "into", "sql_calc_found_rows", "prepare", "handler",
            "xa", "found_rows", "last_insert_id")


def may_be_sticky(sql: str, low: str | None = None) -> bool:
    """Does `sql` match STICKY? `low`: `sql.lower()`, when the caller has it already."""
    if low is None:
        low = sql.lower()
    return any(marker in low for marker in _MARKERS) and STICKY.search(sql) is not None


__all__ = ["STICKY", "may_be_sticky"]
