"""Statements ShardingSphere users know from DistSQL: PREVIEW, SHOW SHARDING TABLE RULES / NODES,
SHOW STORAGE UNITS, SHOW / ALTER TRANSACTION RULE; and SHOW TRANSACTION IN DOUBT (the XA branches left
prepared). They describe the loaded rules (rows built by `routing.admin`) and never execute anything on the
backends (SHOW TRANSACTION IN DOUBT runs XA RECOVER on the data sources' admin connections)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from protocol.constants import ErrorCode
from proxy.backends.backend import DataSource
from proxy.backends.readwrite import RULE_COLUMNS, ReadWriteGroup, storage_unit_rows
from proxy.clusterport import port
from proxy.execution.decide import routed_statement
from proxy.session.statements import ProxyStatement, unquote_ident
from routing import admin as rule_rows
from routing.errors import RoutingError

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

STORAGE_UNIT_COLUMNS = [
    "name", "type", "host", "port", "db", "connection_timeout_milliseconds", "idle_timeout_milliseconds",
    "max_lifetime_milliseconds", "max_pool_size", "min_pool_size", "connections_in_use", "connections_idle",
    # read/write splitting members: enabled | disabled, why, Seconds_Behind_Master at the last probe
    "status", "status_detail", "replication_lag_seconds",
]


def _target_db(session: Session, name: str | None) -> LogicalDatabase | None:
    if name:
        return session.database_named(unquote_ident(name))
    if session.database is None:
        session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
    return session.database


ER_SPECIFIC_ACCESS_DENIED = 1227
ER_PARSE_ERROR = 1064
ER_NOT_SUPPORTED_YET = 1235

_TOKEN = re.compile(r"""\s*(?:(?P<str>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")"""
                    r"""|(?P<num>-?\d+(?:\.\d+)?)"""
                    r"|(?P<word>[A-Za-z_][A-Za-z0-9_.-]*)|(?P<sym>[(),=]))", re.S)


class RuleSyntaxError(ValueError):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise RuleSyntaxError(f"near '{text[pos:pos + 20].strip()}'")
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "str":
            quote = value[0]
            value = re.sub(r"\\(.)", r"\1", value[1:-1].replace(quote * 2, quote))
        out.append((kind, value))
        pos = m.end()
    return out


def parse_transaction_rule(definition: str) -> tuple[str, str | None, dict[str, Any] | None]:
    """ShardingSphere 5.5's `(DEFAULT = type [, TYPE(NAME = provider [, PROPERTIES("k" = v, ...)])])`, with
    names bare or quoted; -> (default type as written, provider or None, props or None)."""
    toks = _tokens(definition)
    pos = 0

    def take(kind: str, word: str | None = None) -> str:
        nonlocal pos
        if pos >= len(toks):
            raise RuleSyntaxError("unexpected end of the rule definition")
        k, v = toks[pos]
        if (k != kind and not (kind == "name" and k in ("word", "str"))) or (word is not None and v.upper() != word):
            raise RuleSyntaxError(f"near '{v}'")
        pos += 1
        return v

    def peek(value: str) -> bool:
        return pos < len(toks) and toks[pos][1].upper() == value

    take("sym", "(")
    take("word", "DEFAULT")
    take("sym", "=")
    default = take("name")
    provider: str | None = None
    props: dict[str, Any] | None = None
    if peek(","):
        take("sym", ",")
        take("word", "TYPE")
        take("sym", "(")
        take("word", "NAME")
        take("sym", "=")
        provider = take("name")
        if peek(","):
            take("sym", ",")
            take("word", "PROPERTIES")
            take("sym", "(")
            props = {}
            while not peek(")"):
                key = take("str")
                take("sym", "=")
                kind, value = toks[pos] if pos < len(toks) else ("", "")
                if kind == "num":
                    props[key] = float(value) if "." in value else int(value)
                elif kind == "word" and value.upper() in ("TRUE", "FALSE"):
                    props[key] = value.upper() == "TRUE"
                elif kind == "str":
                    props[key] = value
                else:
                    raise RuleSyntaxError(f"near '{value}'")
                pos += 1
                if peek(","):
                    take("sym", ",")
            take("sym", ")")
        take("sym", ")")
    take("sym", ")")
    if pos != len(toks):
        raise RuleSyntaxError(f"near '{toks[pos][1]}'")
    return default, provider, props


async def transaction_statement(session: Session, stmt: ProxyStatement) -> None:
    from proxy.backends.xa import IN_DOUBT_COLUMNS, RULE_COLUMNS, LogUnavailable, rule_from_statement

    tm = session.server.tm
    if stmt.kind == "show_txn_rule":
        session.rows(RULE_COLUMNS, [tm.rule_row()])
        return
    if stmt.kind == "show_in_doubt":
        session.rows(IN_DOUBT_COLUMNS, await tm.in_doubt_rows())
        return
    if session.user_config is None or not session.user_config.admin:
        session.error(ER_SPECIFIC_ACCESS_DENIED, "Access denied; ALTER TRANSACTION RULE needs an admin user "
                      "(authority.users[].admin: true)", "42000")
        return
    try:
        default, provider, props = parse_transaction_rule(stmt.arg or "")
    except RuleSyntaxError as exc:
        session.error(ER_PARSE_ERROR, f"ALTER TRANSACTION RULE: syntax error {exc}; expected "
                      f"(DEFAULT='LOCAL'|'XA'[, TYPE(NAME='Atomikos'|'Narayana'[, PROPERTIES('key'='value', ...)])])",
                      "42000")
        return
    try:
        kind, provider, props = rule_from_statement(default, provider, props)
        before = (tm.default_type, tm.provider_type, dict(tm.props))
        tm.alter(kind, provider, props)
        # Cluster mode: every proxy takes it, or (put back) no one
        await port(session.server).publish_transaction_rule(before)
    except ValueError as exc:
        session.error(ER_NOT_SUPPORTED_YET, f"ALTER TRANSACTION RULE: {exc}", "42000")
        return
    except LogUnavailable as exc:
        session.error(ER_NOT_SUPPORTED_YET, f"ALTER TRANSACTION RULE: XA needs its log: {exc}", "HY000")
        return
    session.ok()


async def admin_statement(session: Session, stmt: ProxyStatement, sql: str) -> None:
    if stmt.kind in ("show_txn_rule", "show_in_doubt", "alter_txn_rule"):
        await transaction_statement(session, stmt)
        return
    if stmt.kind == "preview":
        db = session.database
        if db is None:
            session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
            return
        inner = stmt.arg or ""
        if db.kernel is None:
            rows = [(next(iter(db.sources)), inner)]
        else:
            try:
                rows = rule_rows.preview_rows(routed_statement(db.kernel, inner, None, session.hints()))
            except RoutingError:  # hook: a statement federation answers previews its copies (proxy.federation)
                from proxy.execution.federation import preview

                federated = preview(session, db, inner)
                if federated is None:
                    raise
                rows = federated
        session.rows(list(rule_rows.PREVIEW_COLUMNS), rows)
        return
    db = _target_db(session, stmt.arg2 if stmt.kind != "units" else stmt.arg)
    if db is None:
        return
    table = unquote_ident(stmt.arg) if stmt.arg and stmt.kind != "units" else None
    if stmt.kind == "show_rules":
        session.rows(list(rule_rows.TABLE_RULE_COLUMNS), rule_rows.table_rule_rows(db.rules, table))
    elif stmt.kind == "show_nodes":
        session.rows(list(rule_rows.TABLE_NODE_COLUMNS), rule_rows.table_node_rows(db.rules, table))
    elif stmt.kind == "show_rw_rules":
        groups = [s for s in db.sources.values() if isinstance(s, ReadWriteGroup)]
        session.rows(list(RULE_COLUMNS), [g.rule_row() for g in groups if table is None or g.name == table])
    elif stmt.kind == "units":
        session.rows(STORAGE_UNIT_COLUMNS, storage_units(db))


def storage_units(db: LogicalDatabase) -> list[tuple[object, ...]]:
    """SHOW STORAGE UNITS: one row per physical data source (each member of a read/write splitting group)."""
    rows: list[tuple[object, ...]] = []
    members: list[tuple[str, DataSource, tuple[str, str, float | None]]] = []
    for name, source in db.sources.items():
        if isinstance(source, ReadWriteGroup):
            members.extend(storage_unit_rows(source))
        else:
            members.append((name, source, ("enabled", "", None)))
    for name, source, (status, detail, lag) in members:
        c = source.config
        stats = source.stats()
        timeouts = (int(c.connect_timeout * 1000), int(c.idle_timeout * 1000), int(c.max_lifetime * 1000))
        rows.append((name, "MySQL", c.host, c.port, c.database, *timeouts, c.max_pool_size, c.min_pool_size,
                     stats["used"], stats["free"], status, detail, None if lag is None else f"{lag:g}"))
    return rows
