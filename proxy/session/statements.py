"""Recognising the statements the proxy answers itself, cheaply and without sqlglot.

These run before routing: `USE`, `SHOW DATABASES`, `PREVIEW`, `SHOW SHARDING ...`, `KILL`, the transaction
rule's RAL (`SHOW TRANSACTION RULE`, `ALTER TRANSACTION RULE (...)`, `SHOW TRANSACTION IN DOUBT`). A regex on
the first words (after comments) is enough and keeps the common path free of parsing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proxy.session.distsql import grammar as distsql

_LEADING = re.compile(r"^(?:\s+|/\*(?!!|\s*SHARDINGSPHERE_HINT).*?\*/|--[ \t][^\n]*\n|#[^\n]*\n)*", re.S)
_USE = re.compile(r"^USE\s+(`(?:[^`]|``)+`|[^\s;`]+)\s*;?\s*$", re.I | re.S)
_SHOW_DATABASES = re.compile(
    r"^SHOW\s+(?:DATABASES|SCHEMAS)(?:\s+LIKE\s+'([^'\\]*(?:(?:\\.|'')[^'\\]*)*)')?\s*;?\s*$", re.I
)
_PREVIEW = re.compile(r"^PREVIEW\s+(.+?)\s*;?\s*$", re.I | re.S)
_SHOW_RULES = re.compile(r"^SHOW\s+SHARDING\s+TABLE\s+RULES?(?:\s+(\S+?))?(?:\s+FROM\s+(\S+))?\s*;?\s*$", re.I)
_SHOW_NODES = re.compile(r"^SHOW\s+SHARDING\s+TABLE\s+NODES(?:\s+(\S+?))?(?:\s+FROM\s+(\S+))?\s*;?\s*$", re.I)
_KILL = re.compile(r"^KILL\s+(?:(?:HARD|SOFT)\s+)?(?:(QUERY|CONNECTION)\s+)?(?:(\d+)|\(\s*(\d+)\s*\))\s*;?\s*$",
                   re.I)
_KILL_WORD = re.compile(r"^KILL\b", re.I)
_SELECT_DATABASE = re.compile(r"^SELECT\s+(?P<call>(?:DATABASE|SCHEMA)\s*\(\s*\))\s*;?\s*$", re.I)
_SHOW_RW_RULES = re.compile(
    r"^SHOW\s+READWRITE_SPLITTING\s+RULES?(?:\s+(?!FROM\b)(\S+?))?(?:\s+FROM\s+(\S+))?\s*;?\s*$", re.I
)
_SHOW_PROCESSLIST = re.compile(r"^SHOW\s+(FULL\s+)?PROCESSLIST\s*;?\s*$", re.I)
_FIRST_WORD = re.compile(r"[A-Za-z_]+")
_SHOW_TXN_RULE = re.compile(r"^SHOW\s+TRANSACTION\s+RULE\s*;?\s*$", re.I)
_SHOW_IN_DOUBT = re.compile(r"^SHOW\s+TRANSACTIONS?\s+IN\s+DOUBT\s*;?\s*$", re.I)
_ALTER_TXN_RULE = re.compile(r"^ALTER\s+TRANSACTION\s+RULE\b\s*(.*?)\s*;?\s*$", re.I | re.S)
_SHOW_STORAGE_UNITS = re.compile(r"^SHOW\s+(?:STORAGE\s+UNITS|RESOURCES)(?:\s+FROM\s+(\S+))?\s*;?\s*$", re.I)


def strip_leading_comments(sql: str) -> str:
    m = _LEADING.match(sql)
    return sql[m.end() :] if m else sql


def unquote_ident(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] == "`":
        return name[1:-1].replace("``", "`")
    return name


@dataclass(frozen=True)
class ProxyStatement:
    kind: str  # use | show_databases | preview | show_rules | show_nodes | kill | kill_other | select_database (arg:
    # the call as typed, its label)
    # | units | show_rw_rules | show_txn_rule | show_in_doubt | alter_txn_rule | distsql (arg: the statement,
    # parsed by proxy.session.distsql) | distsql_unsupported (arg: the DistSQL statement's name)
    arg: str | None = None
    arg2: str | None = None


# every kind `classify` returns (proxy.session.dispatch has one handler for each)
KINDS = frozenset({
    "use", "show_databases", "select_database", "processlist", "kill", "kill_other", "preview", "show_rules",
    "show_nodes", "units", "show_rw_rules", "show_txn_rule", "show_in_doubt", "alter_txn_rule", "distsql",
    "distsql_unsupported",
})


def classify(sql: str) -> ProxyStatement | None:
    """A statement the proxy handles itself, or None when it goes to the kernel / the backend."""
    text = strip_leading_comments(sql)
    if not text:
        return None
    first = text[:8].upper()
    if first.startswith("USE"):
        m = _USE.match(text)
        if m:
            return ProxyStatement("use", unquote_ident(m.group(1)))
    elif first.startswith("SHOW"):
        m = _SHOW_PROCESSLIST.match(text)
        if m:
            return ProxyStatement("processlist", "FULL" if m.group(1) else None)
        for pattern, kind in (
            (_SHOW_DATABASES, "show_databases"),
            (_SHOW_RULES, "show_rules"),
            (_SHOW_NODES, "show_nodes"),
            (_SHOW_STORAGE_UNITS, "units"),
            (_SHOW_RW_RULES, "show_rw_rules"),
            (_SHOW_TXN_RULE, "show_txn_rule"),
            (_SHOW_IN_DOUBT, "show_in_doubt"),
        ):
            m = pattern.match(text)
            if m:
                groups = [g for g in m.groups()] + [None, None]
                return ProxyStatement(kind, groups[0], groups[1])
    elif first.startswith("PREVIEW"):
        m = _PREVIEW.match(text)
        if m:
            return ProxyStatement("preview", m.group(1))
    elif first.startswith("KILL"):
        m = _KILL.match(text)
        if m:
            return ProxyStatement("kill", m.group(2) or m.group(3), (m.group(1) or "CONNECTION").upper())
        if _KILL_WORD.match(text):
            # KILL USER u, KILL QUERY ID n, KILL <expression>: a backend would apply them to its own threads
            # (the proxy's pooled connections, every user's), so they never go there
            return ProxyStatement("kill_other")
    elif first.startswith("SELECT"):
        m = _SELECT_DATABASE.match(text)
        if m:
            return ProxyStatement("select_database", m.group("call"))  # the label: the call as typed
        return None
    elif first.startswith("ALTER"):
        m = _ALTER_TXN_RULE.match(text)
        if m:
            return ProxyStatement("alter_txn_rule", m.group(1))
    word = _FIRST_WORD.match(text)
    head = word.group(0).upper() if word is not None else ""
    if head in distsql.MAYBE_DISTSQL and distsql.starts_like_distsql(text, head):
        # DistSQL: answered by proxy.session.distsql, or refused there; never sent to a backend
        if distsql.parse(text) is not None:
            return ProxyStatement("distsql", text)
        name = distsql.looks_like_distsql(text)
        if name is not None:
            return ProxyStatement("distsql_unsupported", name)
    return None
