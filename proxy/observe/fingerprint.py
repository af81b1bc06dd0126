"""A statement's fingerprint: its text with literals as `?`, IN lists and VALUES rows of literals folded to one form,
comments dropped, whitespace folded and letters in lower case, as ProxySQL's digests and pt-query-digest's
fingerprints do.

Why regular expressions and not sqlglot: this runs for every statement, fast path included, and a parse costs a
hundred times more; the fingerprint only has to group statements that differ in their values, not understand them.
Each pattern is chosen for Python's `re` speed (a word boundary, not a look-behind, at every position). Why the
caches: a prepared statement's text is the same string at each execute (one dict lookup), and a text statement that
differs from a recent one only in a trailing number (`... WHERE id=42`, the commonest point select) is found by the
text before that number.
"""

from __future__ import annotations

import re

# strings (with a charset introducer or an x/b/n prefix), quoted identifiers and comments, leftmost first: what is
# inside one is never read as anything else
_QUOTED = re.compile(
    r"""(?:\b(?:[xXbBnN]|_[A-Za-z0-9]+))?"""  # strings: ?
    r"""(?:'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'?|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"?)"""
    r"|`[^`]*(?:``[^`]*)*`?"  # a quoted identifier: kept
    r"|/\*(?!M?!)[\s\S]*?(?:\*/|$)"  # a comment: dropped
    r"|/\*M?!\d*|\*/"  # an executable comment's brackets: dropped, its text kept
    r"|(?:--(?=\s|$)|\#)[^\n]*"  # a line comment: dropped
)
# numbers that are tokens of their own (not the digits of `sbtest1`): decimal, exponent, hexadecimal
_NUMBER = re.compile(r"\b(?:0x[0-9a-f]+|0b[01]+|\d+(?:\.\d*)?(?:e[-+]?\d+)?)\b|\B\.\d+(?:e[-+]?\d+)?\b")
# the same, where quoted identifiers are left as they are (`t 2` is a name, not a number)
_NUMBER_OR_NAME = re.compile("`[^`]*(?:``[^`]*)*`?|" + _NUMBER.pattern)
_SIGN = re.compile(r"[-+] ?\?")
# after these a sign belongs to the number: `= -5` is `= ?` as `= 5` is, `a - 5` stays a subtraction
_SIGN_AFTER = frozenset("=<>(,*/%")
_SIGN_WORDS = frozenset(
    (
        "and",
        "or",
        "not",
        "like",
        "between",
        "when",
        "then",
        "else",
        "select",
        "where",
        "by",
        "limit",
        "offset",
        "in",
        "is",
        "return",
        "set",
        "values",
        "value",
        "div",
        "mod",
        "xor",
    )
)
_ITEM = r"(?:\?|null|default)"
_ROW = r"\( ?" + _ITEM + r"(?: ?, ?" + _ITEM + r")* ?\)"
_IN_LIST = re.compile(r"\bin ?\( ?(?:\?|null)(?: ?, ?(?:\?|null))* ?\)")
_VALUES = re.compile(r"\b(values?) ?" + _ROW + r"(?: ?, ?" + _ROW + r")*")
_DIGITS = "0123456789"
_IDENT_END = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$.0123456789'\"`")

MAX_TEXT = 64 * 1024  # longer texts are fingerprinted by their first MAX_TEXT characters (a huge IN list still folds)
CACHE_SIZE = 4096

_by_text: dict[str, str] = {}
_by_head: dict[str, str] = {}


def _quoted(m: re.Match[str]) -> str:
    token = m.group()
    first = token[0]
    if first == "`":
        return token
    if first in "/-#*":
        return " "  # comments, and the brackets of executable comments
    return "?"


def _number(m: re.Match[str]) -> str:
    token = m.group()
    return token if token[0] == "`" else "?"


def _sign(m: re.Match[str]) -> str:
    head = m.string[: m.start()].rstrip()
    if not head or head[-1] in _SIGN_AFTER or head.rsplit(None, 1)[-1] in _SIGN_WORDS:
        return "?"
    return m.group()


def fingerprint(sql: str) -> str:
    """The statement's fingerprint (uncached)."""
    s = sql if len(sql) <= MAX_TEXT else sql[:MAX_TEXT]
    if "'" in s or '"' in s or "`" in s or "/*" in s or "--" in s or "#" in s:
        s = _QUOTED.sub(_quoted, s)
    s = " ".join(s.split()).lower()
    s = _NUMBER_OR_NAME.sub(_number, s) if "`" in s else _NUMBER.sub("?", s)
    if "?" in s:
        if "-" in s or "+" in s:
            s = _SIGN.sub(_sign, s)
        if "in (" in s or "in(" in s:
            s = _IN_LIST.sub("in (...)", s)
        if "value" in s:
            s = _VALUES.sub(r"\1 (...)", s)
    return s.rstrip(" ;")


def cached(sql: str) -> str:
    """`fingerprint`, remembered by text, and for a text that ends in a number token by the text before it."""
    return cached_head(sql)[0]


def cached_head(sql: str) -> tuple[str, str | None]:
    """`cached`, and the text before the trailing number when the fingerprint was found by it (None otherwise):
    any text that is that head followed by digits has the same fingerprint."""
    fp = _by_text.get(sql)
    if fp is not None:
        return fp, None
    head = sql.rstrip(_DIGITS)
    # (an unterminated quoted name keeps its digits: such a text is looked up whole)
    if len(head) != len(sql) and head and head[-1] not in _IDENT_END and "`" not in head:
        fp = _by_head.get(head)
        if fp is None:
            fp = fingerprint(sql)
            _remember(_by_head, head, fp)
        return fp, head
    fp = fingerprint(sql)
    _remember(_by_text, sql, fp)
    return fp, None


def _remember(cache: dict[str, str], key: str, fp: str) -> None:
    if len(cache) >= CACHE_SIZE:
        cache.clear()  # a workload of ever new texts: cheaper than keeping an LRU's order on every hit
    cache[key] = fp


__all__ = ["CACHE_SIZE", "MAX_TEXT", "cached", "cached_head", "fingerprint"]
