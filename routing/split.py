"""Splitting a multi-statement COM_QUERY (`a; b; c`) into its statements, by the text alone.

Clients send several statements in one packet when they set CLIENT_MULTI_STATEMENTS (Django's start-up,
Navicat's probes, batched scripts). On a sharded database each one must be routed on its own, so the
proxy splits at top-level semicolons: not inside quotes, backquotes or comments.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"""
      '(?:[^'\\]|\\.|'')*'?          # single-quoted string (unterminated: to the end)
    | "(?:[^"\\]|\\.|"")*"?          # double-quoted string
    | `(?:[^`]|``)*`?                # quoted identifier
    | /\*.*?(?:\*/|$)                # block comment (also /*! ... */)
    | (?:--[ \t\r\n]|\#)[^\n]*       # line comment
    | ;                              # statement separator
    | [^'"`/;\-\#]+                  # anything else, fast
    | .                              # a lone / - or #
    """,
    re.S | re.X,
)


def split_statements(sql: str) -> list[str]:
    """The statements of `sql`, each without its trailing `;`; empty statements are dropped.
    A single statement comes back unchanged (the fast path: no `;`, or only a trailing one)."""
    if ";" not in sql:
        return [sql]
    parts: list[str] = []
    start = 0
    for m in _TOKEN.finditer(sql):
        if m.group() == ";":
            parts.append(sql[start : m.start()])
            start = m.end()
    parts.append(sql[start:])
    statements = [p for p in parts if p.strip() and not _only_comments(p)]
    if len(statements) == 1 and len(parts) <= 2:
        return [statements[0]]
    return statements


_COMMENTS_ONLY = re.compile(r"^(?:\s+|/\*(?!!).*?\*/|(?:--[ \t]|\#)[^\n]*(?:\n|$))*$", re.S)


def _only_comments(text: str) -> bool:
    return bool(_COMMENTS_ONLY.match(text))
