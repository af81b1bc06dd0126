"""Splitting a multi-statement COM_QUERY (`a; b; c`) into its statements, by the text alone.

Clients send several statements in one packet when they set CLIENT_MULTI_STATEMENTS (Django's start-up,
Navicat's probes, batched scripts). On a sharded database each one must be routed on its own, so the
proxy splits at top-level semicolons: not inside quotes, backquotes or comments.
"""

from __future__ import annotations

import re

from routing.parse import ANSI_QUOTES, NO_BACKSLASH_ESCAPES


def _escaped(q: str) -> str:
    return rf"{q}(?:[^{q}\\]|\\.|{q}{q})*{q}?"


def _plain(q: str) -> str:
    return rf"{q}(?:[^{q}]|{q}{q})*{q}?"


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


# by the session's sql_mode (routing.parse): under NO_BACKSLASH_ESCAPES a backslash in a string is itself; under
# ANSI_QUOTES "..." is a name, where a backslash is itself too
_TOKEN_NBE = re.compile(
    _TOKEN.pattern.replace(_escaped("'"), _plain("'")).replace(_escaped('"'), _plain('"')), re.S | re.X)
_TOKEN_ANSI = re.compile(_TOKEN.pattern.replace(_escaped('"'), _plain('"')), re.S | re.X)
assert _TOKEN.pattern != _TOKEN_ANSI.pattern != _TOKEN_NBE.pattern


def split_statements(sql: str, mode: int = 0) -> list[str]:
    """The statements of `sql`, each without its trailing `;`; empty statements are dropped.
    A single statement comes back unchanged (the fast path: no `;`, or only a trailing one). `mode`: the session's
    sql_mode flags (routing.parse.NO_BACKSLASH_ESCAPES, ANSI_QUOTES)."""
    if ";" not in sql:
        return [sql]
    parts: list[str] = []
    start = 0
    scanner = _TOKEN_NBE if mode & NO_BACKSLASH_ESCAPES else _TOKEN_ANSI if mode & ANSI_QUOTES else _TOKEN
    for m in scanner.finditer(sql):
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
