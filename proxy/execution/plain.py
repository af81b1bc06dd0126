"""Which text statements the fast path may relay as they are, and a statement's metrics label.

Why its own module: these read nothing but the text (no session, no kernel), and the session's dispatcher needs
the label too; kept apart, proxy.execution.fastpath holds only the relay itself. `plain_statement` is on the fast
path's hot path: it remembers its answers by the text's skeleton (issue 15).
"""

from __future__ import annotations

import re

from proxy.execution.sticky import may_be_sticky
from proxy.execution.txn_text import VERBS
from routing.session_functions import has_call, sets_last_insert_id

SELECT, WRITE, TRANSACTION = "select", "write", "transaction"
_WRITE_HEADS = ("INSERT", "UPDATE", "DELETE", "REPLACE")
_TRANSACTION_WORDS = tuple(VERBS)  # BEGIN, COMMIT, ROLLBACK exactly: what txn_control reads them as, too


_DIGIT_RUNS = re.compile(r"[0-9]+")
_PLAIN_LIMIT = 4096
_plain_by_skeleton: dict[tuple[str, ...], str | None] = {}


def plain_statement(sql: str) -> str | None:
    """`plain_statement_uncached`, remembered by the text's skeleton: the text between its runs of ASCII digits
    (issue 15: its regexes were 7-17 us of a text statement's fast path). Exact: every test it makes treats
    every digit alike (`\\w`, `[^\\s)]`, not `;`, not a letter; no pattern names a digit), so two texts that
    differ only in the digits of their (non-empty) runs get the same answer."""
    if "(" not in sql:  # no regex to run: asking costs less than the key
        return plain_statement_uncached(sql)
    key = tuple(_DIGIT_RUNS.split(sql))
    try:
        return _plain_by_skeleton[key]
    except KeyError:
        pass
    kind = plain_statement_uncached(sql)
    if len(_plain_by_skeleton) >= _PLAIN_LIMIT:
        _plain_by_skeleton.clear()
    _plain_by_skeleton[key] = kind
    return kind


def plain_statement_uncached(sql: str) -> str | None:
    """What the session's `_query` would do nothing to but relay to the pass-through connection (and then,
    for a write, keep the connection for the LAST_INSERT_ID() / ROW_COUNT() that may come next): SELECT,
    a write (INSERT, UPDATE, DELETE, REPLACE), or exactly BEGIN / COMMIT / ROLLBACK; with no leading comment
    or hint, no session function the proxy answers itself (DATABASE(), LAST_INSERT_ID() ...), no
    information_schema (logical names), nothing that makes the session sticky, and a single statement.
    None for anything else."""
    head = sql[:7].upper()
    if head.startswith("SELECT"):
        kind = SELECT
    elif head.startswith(_WRITE_HEADS):
        kind = WRITE
    elif head in _TRANSACTION_WORDS or sql.upper() in _TRANSACTION_WORDS:
        kind = TRANSACTION
    else:
        return None
    if ";" in sql or ("(" in sql and (has_call(sql) or sets_last_insert_id(sql))):
        return None  # (LAST_INSERT_ID(expr): a sharded database's session learns its value from the node)
    low = sql.lower()
    if "information_schema" in low or may_be_sticky(sql, low):
        return None
    return kind


_KINDS = {"SELECT": SELECT, "WITH": SELECT, "INSERT": WRITE, "UPDATE": WRITE, "DELETE": WRITE, "REPLACE": WRITE,
          "BEGIN": TRANSACTION, "START": TRANSACTION, "COMMIT": TRANSACTION, "ROLLBACK": TRANSACTION,
          "SAVEPOINT": TRANSACTION, "RELEASE": TRANSACTION, "XA": TRANSACTION, "CREATE": "ddl", "ALTER": "ddl",
          "DROP": "ddl", "TRUNCATE": "ddl", "RENAME": "ddl", "SET": "set", "SHOW": "show", "DESC": "show",
          "DESCRIBE": "show", "EXPLAIN": "show", "USE": "use", "CALL": "call", "PREPARE": "prepare",
          "EXECUTE": "execute", "DEALLOCATE": "prepare", "KILL": "kill", "PREVIEW": "distsql"}


def statement_kind(sql: str) -> str:
    """The metrics label of a statement: select, write, transaction, ddl, set, show, ... or other."""
    words = sql.lstrip(" \t\r\n(").split(None, 1)
    return _KINDS.get(words[0].upper(), "other") if words else "other"


__all__ = ["SELECT", "TRANSACTION", "WRITE", "plain_statement", "plain_statement_uncached", "statement_kind"]
