"""LOCK TABLES / UNLOCK TABLES read as MariaDB reads them: the tables, their aliases and lock types.

Why apart from proxy.execution.table_locks: that module sends the locks to the data nodes; this one only reads the
text (comments anywhere, `/*!32311 LOCAL */` as mariadb-dump writes it, backquoted names), so that what the proxy
cannot read is refused before anything is locked anywhere. Pure text: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.execution.txn_text import _LEADING, _tokens

# the lock types MariaDB takes, as words (LOCAL and CONCURRENT are kept: they mean something on every node)
LOCK_TYPES = frozenset({("READ",), ("READ", "LOCAL"), ("WRITE",), ("LOW_PRIORITY", "WRITE"), ("WRITE", "CONCURRENT")})
_TYPE_WORDS = frozenset({"READ", "WRITE", "LOW_PRIORITY", "LOCAL", "CONCURRENT"})


@dataclass(frozen=True)
class LockItem:
    """One table of a LOCK TABLES list: `schema` as written (None: the current database), the alias (None: none)
    and the lock type's words, upper case."""

    schema: str | None
    table: str
    alias: str | None
    lock_type: tuple[str, ...]

    @property
    def name(self) -> str:
        """What the statements under the lock call it (MariaDB's 'Not unique table/alias' compares these)."""
        return self.alias if self.alias is not None else self.table


@dataclass(frozen=True)
class LockStatement:
    """`unlock`: UNLOCK TABLES; else the items of LOCK TABLES. `error`: why the text is no statement MariaDB takes
    (nothing is then locked or unlocked)."""

    unlock: bool
    items: tuple[LockItem, ...] = ()
    error: str | None = None


def parse_lock(sql: str) -> LockStatement | None:
    """The LOCK / UNLOCK TABLES statement `sql` is, or None when it is none (LOCK TABLES and UNLOCK TABLES only:
    not LOCK INSTANCE, DistSQL's LOCK CLUSTER, or a SELECT's LOCK IN SHARE MODE)."""
    lead = _LEADING.match(sql)
    start = lead.end() if lead is not None else 0
    if not sql[start : start + 6].upper().startswith(("LOCK", "UNLOCK")):
        return None
    tokens = _tokens(sql)
    if not tokens or tokens[0][0] != "word":
        return None
    words = [text.upper() if kind == "word" else text for kind, text in tokens]
    if words[0] not in ("LOCK", "UNLOCK") or words[1:2] not in (["TABLE"], ["TABLES"]):
        return None
    rest = tokens[2:]
    if rest and rest[-1] == ("other", ";"):
        rest = rest[:-1]
    if words[0] == "UNLOCK":
        return LockStatement(True, error="UNLOCK TABLES takes nothing after TABLES" if rest else None)
    items: list[LockItem] = []
    for part in _split(rest):
        item = _item(part)
        if item is None:
            shown = " ".join(text for _k, text in part) or "nothing"
            return LockStatement(False, error=f"cannot read {shown!r} as `table [[AS] alias] lock_type`")
        items.append(item)
    if not items:
        return LockStatement(False, error="LOCK TABLES names no table")
    return LockStatement(False, tuple(items))


def _split(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    parts: list[list[tuple[str, str]]] = [[]]
    for token in tokens:
        if token == ("other", ","):
            parts.append([])
        else:
            parts[-1].append(token)
    return parts if parts != [[]] else []


def _item(part: list[tuple[str, str]]) -> LockItem | None:
    """`[schema.]table [[AS] alias] lock_type`, or None when it is not that."""
    names: list[str] = []
    i = 0
    if i < len(part) and part[i][0] in ("word", "quoted"):
        names.append(part[i][1])
        i += 1
        if i + 1 < len(part) and part[i] == ("other", ".") and part[i + 1][0] in ("word", "quoted"):
            names.append(part[i + 1][1])
            i += 2
    if not names:
        return None
    alias = None
    if i < len(part) and part[i][0] == "word" and part[i][1].upper() == "AS":
        i += 1
        if i >= len(part) or part[i][0] not in ("word", "quoted"):
            return None
        alias = part[i][1]
        i += 1
    elif i < len(part) and (part[i][0] == "quoted" or (part[i][0] == "word" and part[i][1].upper() not in _TYPE_WORDS)):
        alias = part[i][1]
        i += 1
    lock_type = tuple(text.upper() for kind, text in part[i:] if kind == "word")
    if len(lock_type) != len(part) - i or lock_type not in LOCK_TYPES:
        return None
    schema, table = (names[0], names[1]) if len(names) == 2 else (None, names[0])
    return LockItem(schema, table, alias, lock_type)


__all__ = ["LOCK_TYPES", "LockItem", "LockStatement", "parse_lock"]
