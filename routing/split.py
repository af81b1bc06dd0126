"""Splitting a multi-statement COM_QUERY (`a; b; c`) into its statements, by the text alone.

Clients send several statements in one packet when they set CLIENT_MULTI_STATEMENTS (Django's start-up,
Navicat's probes, batched scripts). On a sharded database each one must be routed on its own, so the
proxy splits at top-level semicolons: not inside quotes, backquotes or comments, and not inside a compound
statement's body (`CREATE PROCEDURE p() BEGIN ...; ...; END`, `BEGIN NOT ATOMIC ... END`, `IF ... END IF`): the
server reads such a body as part of one statement (DELIMITER is the mysql client's own, never sent).
"""

from __future__ import annotations

import re

from routing.parse import ANSI_QUOTES, NO_BACKSLASH_ESCAPES


# (unrolled: one pass of a character class between escapes, so that a long literal costs no memory per character,
# which `(?:[^q]|qq)*` does in Python's re)
def _escaped(q: str) -> str:
    return rf"{q}[^{q}\\]*(?:(?:\\.|{q}{q})[^{q}\\]*)*{q}?"


def _plain(q: str) -> str:
    return rf"{q}[^{q}]*(?:{q}{q}[^{q}]*)*{q}?"


_TOKEN = re.compile(
    r"""
      '[^'\\]*(?:(?:\\.|'')[^'\\]*)*'?          # single-quoted string (unterminated: to the end)
    | "[^"\\]*(?:(?:\\.|"")[^"\\]*)*"?          # double-quoted string
    | `[^`]*(?:``[^`]*)*`?                # quoted identifier
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
    _TOKEN.pattern.replace(_escaped("'"), _plain("'")).replace(_escaped('"'), _plain('"')), re.S | re.X
)
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
    blocks = _Blocks()
    for m in scanner.finditer(sql):
        piece = m.group()
        if piece == ";":
            if blocks.separates():
                parts.append(sql[start : m.start()])
                start = m.end()
                blocks = _Blocks()
        elif piece[:1] not in ("'", '"', "`") and not piece.startswith(("--", "#")):
            if piece.startswith("/*"):
                code = _EXECUTABLE.match(piece)
                if code is not None:  # /*!50003 CREATE*/ (mariadb-dump): code the server reads
                    blocks.read(code.group(1))
            else:
                blocks.read(piece)
    parts.append(sql[start:])
    statements = [p for p in parts if p.strip() and not _only_comments(p)]
    if len(statements) == 1 and len(parts) <= 2:
        return [statements[0]]
    return statements


_EXECUTABLE = re.compile(r"/\*M?!\d*(.*?)(?:\*/)?$", re.S)
_WORD = re.compile(r"[A-Za-z_$0-9]+|[:()]")
# a statement that holds a body of statements: a stored program's definition, or an anonymous compound
# statement (MariaDB runs BEGIN NOT ATOMIC, IF, CASE, LOOP, WHILE, REPEAT and FOR outside stored programs)
_STORED = frozenset({"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"})
_CREATE_SKIPS = frozenset({"OR", "REPLACE", "AGGREGATE", "DEFINER", "=", "IF", "NOT", "EXISTS"})
# words that open a block where a statement may start; END closes the innermost (END IF, END LOOP: one block)
_OPENERS = frozenset({"BEGIN", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"})
# words after which a statement of the body starts (`lbl:` is a ':')
# words that may follow a CASE expression's END (`CASE ... END AS x`, `END FROM t`): no label of an END
_AFTER_CASE_END = frozenset(
    {
        "AS",
        "FROM",
        "WHERE",
        "AND",
        "OR",
        "XOR",
        "DIV",
        "MOD",
        "IS",
        "NOT",
        "IN",
        "LIKE",
        "BETWEEN",
        "THEN",
        "ELSE",
        "WHEN",
        "END",
        "INTO",
        "GROUP",
        "ORDER",
        "LIMIT",
        "HAVING",
        "UNION",
        "FOR",
        "DESC",
        "ASC",
        "COLLATE",
        "REGEXP",
        "RLIKE",
        "SOUNDS",
    }
)
_STATEMENT_START = frozenset({";", "BEGIN", "THEN", "ELSE", "DO", "LOOP", "REPEAT", ":", "ATOMIC", "ROW"})


class _Blocks:
    """Reads one statement's words and says whether a `;` there ends it: only outside every BEGIN ... END,
    IF ... END IF, CASE ... END (CASE), LOOP / WHILE / REPEAT / FOR ... END of a compound statement."""

    __slots__ = ("after_end", "compound", "depth", "head", "prev")

    def __init__(self) -> None:
        self.compound: bool | None = None  # decided by the statement's first words
        self.depth = 0
        self.head: list[str] = []
        self.prev = ";"
        self.after_end = False  # the word after END (IF, LOOP, a label) closes nothing more

    def separates(self) -> bool:
        if self.compound and self.depth > 0:
            self.prev = ";"
            self.after_end = False
            return False
        return True

    def read(self, text: str) -> None:
        for m in _WORD.finditer(text):
            word = m.group().upper()
            if self.compound is None:
                self._decide(word)
                if self.compound:  # the words read so far are the compound statement's first
                    self.prev = ";"
                    for seen in self.head:
                        self._count(seen)
                        self.prev = seen
                continue
            if self.compound:
                self._count(word)
            self.prev = word

    def _decide(self, word: str) -> None:
        head = self.head
        head.append(word)
        first = head[0]
        if first == "CREATE":
            if word in _STORED:
                self.compound = True
            elif len(head) > 1 and word not in _CREATE_SKIPS and not _is_definer_value(head):
                self.compound = False
        elif first == "BEGIN":
            if len(head) == 2:
                self.compound = word == "NOT"  # BEGIN NOT ATOMIC; BEGIN / BEGIN WORK start a transaction
        elif first in ("IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"):
            self.compound = True
        elif len(head) == 2 and word == ":":  # lbl: BEGIN / LOOP / ...
            pass
        elif len(head) == 3 and head[1] == ":":
            self.compound = word in _OPENERS
        elif len(head) >= 2:
            self.compound = False

    def _count(self, word: str) -> None:
        if self.after_end:
            self.after_end = False
            if word in _OPENERS or (word.isidentifier() and word not in _AFTER_CASE_END):
                return  # END IF / END LOOP / END lbl: closes nothing more
        if word == "END":
            if self.depth > 0:
                self.depth -= 1
            self.after_end = True
        elif word == "CASE" or (word == "BEGIN" and self.prev != "XA"):
            self.depth += 1
        elif word in _OPENERS and self.prev in _STATEMENT_START:
            self.depth += 1


def _is_definer_value(head: list[str]) -> bool:
    """CREATE DEFINER = `u`@`h` PROCEDURE: the words of the user name are no statement's kind."""
    return "DEFINER" in head and head[-1] not in _STORED


_COMMENTS_ONLY = re.compile(r"^(?:\s+|/\*(?!!).*?\*/|(?:--[ \t]|\#)[^\n]*(?:\n|$))*$", re.S)


def _only_comments(text: str) -> bool:
    return bool(_COMMENTS_ONLY.match(text))
