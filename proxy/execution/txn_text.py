"""The text of the statements that control a transaction, read as MySQL reads it, in one place for both engines.

* `VERBS`: the exact texts BEGIN, COMMIT, ROLLBACK (any case). The socket-callback fast path
  (proxy.execution.fastpath) answers these and only these itself; the session's coroutine
  (proxy.execution.txn_control.classify_session_statement) reads them, and every other form, the same way.
* `without_comments`: a statement's plain comments as blanks (BEGIN, COMMIT, ROLLBACK with a comment are still
  what they are; txn_control reads them through it).
* Savepoint statements (`parse_savepoint`): SAVEPOINT, ROLLBACK [WORK] TO [SAVEPOINT], RELEASE SAVEPOINT, with
  comments anywhere, a trailing `;`, and the name plain or backquoted (spaces, doubled backquotes, reserved words).
  Names compare case-insensitively, as MySQL compares them (`key`). The fast path takes none of them.

Why apart: the session's transaction control decides what such a statement means, the fast path decides whether it
may answer it, and the fan-out of a transaction (proxy.execution.txn) sets the transaction's savepoints on a data
source that joins later (`quote`); all must read and write a statement the same way. Pure text: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# one token at a time: blanks and comments are skipped (`/*!...*/` and `/*M!...*/` are executable comments: their
# content is read as SQL, as MySQL and MariaDB read it), a backquoted name, a word, or one other character
_TOKEN = re.compile(
    r"(?P<blank>\s+)"
    r"|(?P<exec>/\*M?!\d{0,6})"
    r"|(?P<close>\*/)"
    r"|(?P<comment>/\*(?!M?!).*?\*/|--(?:[ \t\r\f\v][^\n]*)?(?:\n|$)|\#[^\n]*(?:\n|$))"
    r"|`(?P<quoted>[^`]*(?:``[^`]*)*)`"
    r"|(?P<word>[0-9A-Za-z_$\u0080-\U0010ffff]+)"
    r"|(?P<other>.)",
    re.S,
)
# plain comments (not `/*!...*/`, which MySQL reads as SQL), found outside strings and quoted names
_COMMENT_OR_QUOTED = re.compile(
    r"(?P<q>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\"|`[^`]*(?:``[^`]*)*`)"
    r"|/\*(?!M?!).*?\*/|--(?:[ \t\r\f\v][^\n]*)?(?:\n|$)|\#[^\n]*(?:\n|$)",
    re.S,
)


def without_comments(sql: str) -> str:
    """`sql` with its plain comments as blanks, as MySQL reads it (`COMMIT /* c */` is COMMIT)."""
    if "/*" not in sql and "#" not in sql and "--" not in sql:
        return sql
    return _COMMENT_OR_QUOTED.sub(lambda m: m.group("q") or " ", sql)


# the exact statements (upper-cased) the fast path answers itself -> the session statement they are
VERBS = {"BEGIN": "begin", "COMMIT": "commit", "ROLLBACK": "rollback"}

_HEADS = frozenset({"SAVEPOINT", "ROLLBACK", "RELEASE"})
# the blanks and plain comments before the first word
_LEADING = re.compile(r"(?:\s+|/\*(?!M?!).*?\*/|--(?:[ \t\r\f\v][^\n]*)?(?:\n|$)|\#[^\n]*(?:\n|$))*", re.S)


@dataclass(frozen=True)
class Savepoint:
    """A savepoint statement: `verb` is "set", "rollback" or "release"; `name` is the name as MySQL reads it
    (backquotes taken off), None when the text names none that MySQL would take (a syntax error)."""

    verb: str
    name: str | None

    @property
    def key(self) -> str | None:
        return None if self.name is None else key(self.name)

    def sql(self) -> str:
        """The statement in one form, for every data source."""
        assert self.name is not None
        return {"set": "SAVEPOINT ", "rollback": "ROLLBACK TO SAVEPOINT ", "release": "RELEASE SAVEPOINT "}[
            self.verb] + quote(self.name)


def key(name: str) -> str:
    """What a name is compared by: savepoint names compare case-insensitively in MySQL."""
    return name.lower()


def quote(name: str) -> str:
    """`name` as a backquoted identifier (any name, a reserved word or one with spaces or backquotes too)."""
    return "`" + name.replace("`", "``") + "`"


def _tokens(sql: str) -> list[tuple[str, str]] | None:
    """The statement's tokens (kind, text), blanks and comments left out; None when a comment is not closed."""
    out: list[tuple[str, str]] = []
    in_exec = False
    pos = 0
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        assert m is not None  # (`other` takes any character)
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None
        if kind == "blank" or kind == "comment":
            continue
        if kind == "exec":
            if in_exec:
                return None
            in_exec = True
            continue
        if kind == "close" and in_exec:
            in_exec = False
            continue
        if kind == "other" and sql[m.start()] == "/" and sql.startswith("/*", m.start()):
            return None  # a comment that does not end
        out.append((kind, m.group("quoted").replace("``", "`") if kind == "quoted" else m.group(kind)))
    return None if in_exec else out


def parse_savepoint(sql: str) -> Savepoint | None:
    """The savepoint statement `sql` is, or None when it is none (its first words are not SAVEPOINT, ROLLBACK
    [WORK] TO, RELEASE SAVEPOINT). A savepoint statement MySQL would refuse as a syntax error has `name` None."""
    lead = _LEADING.match(sql)
    start = lead.end() if lead is not None else 0
    if not sql[start:start + 9].upper().startswith(("SAVEPOINT", "ROLLBACK", "RELEASE")):
        return None
    tokens = _tokens(sql)
    if not tokens or tokens[0][0] != "word":
        return None
    words = [text.upper() if kind == "word" else None for kind, text in tokens]
    first = words[0]
    if first not in _HEADS:
        return None
    if first == "SAVEPOINT":
        verb, rest = "set", 1
    elif first == "RELEASE":
        if words[1:2] != ["SAVEPOINT"]:
            return None
        verb, rest = "release", 2
    else:  # ROLLBACK [WORK] TO [SAVEPOINT]
        rest = 2 if words[1:2] == ["WORK"] else 1
        if words[rest:rest + 1] != ["TO"]:
            return None  # ROLLBACK [WORK] [AND [NO] CHAIN] [[NO] RELEASE]: the transaction's end
        verb, rest = "rollback", rest + 1
        if words[rest:rest + 1] == ["SAVEPOINT"] and len(tokens) > rest + 1 and tokens[rest + 1] != ("other", ";"):
            rest += 1  # (ROLLBACK TO SAVEPOINT names a savepoint called `savepoint` when nothing follows)
    tail = tokens[rest:]
    if tail and tail[-1] == ("other", ";"):
        tail = tail[:-1]
    if len(tail) != 1 or tail[0][0] not in ("word", "quoted"):
        return Savepoint(verb, None)
    kind, name = tail[0]
    if not name or (kind == "word" and name.isdigit()):
        return Savepoint(verb, None)  # MySQL: no empty name, and a number is no name
    return Savepoint(verb, name)


__all__ = ["VERBS", "Savepoint", "key", "parse_savepoint", "quote", "without_comments"]
