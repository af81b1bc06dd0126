"""The text of EXPLAIN and XA statements on sharded databases: recognised, checked, and an explained route built.

Why its own module: the decision (proxy.execution.decide) needs these pure pieces to decide an EXPLAIN or refuse
an XA statement, and sits below the executor; proxy.execution.explain, which runs an explained plan, sits above
the executor. Nothing here does I/O or routes: the caller hands the explained statement's route in.
"""

from __future__ import annotations

import re
from dataclasses import replace

from routing.errors import RoutingError
from routing.plan import RoutedStatement, StatementKind

_COMMENTS = r"(?:\s*(?:/\*.*?\*/|#[^\n]*\n|--\s[^\n]*\n))*"
_EXPLAIN = re.compile(
    r"^(?P<lead>" + _COMMENTS + r")\s*"
    r"(?P<words>(?:EXPLAIN|DESCRIBE|DESC|ANALYZE)\b"
    r"(?:\s+(?:EXTENDED|PARTITIONS|ANALYZE|FORMAT\s*=\s*\w+|FOR\s+CONNECTION))*)"
    r"\s*(?P<body>(?:SELECT|WITH|INSERT|UPDATE|DELETE|REPLACE|VALUES)\b.*|\(.*|\d.*)$",
    re.I | re.S,
)
_XA = re.compile(r"^" + _COMMENTS + r"\s*XA\s+(?P<verb>\w+)", re.I | re.S)
_READ_BODY = re.compile(r"^[\s(]*(?:SELECT|WITH|VALUES)\b", re.I)
_DML = re.compile(r"\b(?:INSERT|UPDATE|DELETE|REPLACE)\b", re.I)  # WITH ... DELETE (MySQL 8)


def split_explain(sql: str) -> tuple[str, str, str] | None:
    """(leading comments, the EXPLAIN words, the explained statement) of `sql`, or None when it is no
    EXPLAIN of a statement (`EXPLAIN t_order` is DESCRIBE of a table: not one)."""
    m = _EXPLAIN.match(sql)
    if m is None:
        return None
    return m.group("lead"), m.group("words"), m.group("body")


def xa_refusal(sql: str) -> RoutingError | None:
    m = _XA.match(sql)
    if m is None:
        return None
    return RoutingError(
        f"XA {m.group('verb').upper()}: transactions with the client's own xid cannot span a sharded database's "
        "data sources (the statement would reach one of them only). The proxy runs XA itself: set "
        "transaction.defaultType: XA in global.yaml, or ALTER TRANSACTION RULE (DEFAULT='XA'), then use "
        "BEGIN / COMMIT"
    )


def check_explain(words: str, body: str) -> None:
    """Raise RoutingError for an EXPLAIN the proxy cannot answer: FOR CONNECTION (a backend thread), and ANALYZE
    of anything but a read (ANALYZE runs the statement)."""
    upper = " ".join(words.upper().split())
    if "FOR CONNECTION" in upper:
        raise RoutingError("EXPLAIN FOR CONNECTION names a backend thread, not a proxy session: it cannot be "
                           "answered on a sharded database")
    if upper.startswith("ANALYZE") or " ANALYZE" in upper:
        if not _READ_BODY.match(body) or (body.lstrip("( ").upper().startswith("WITH") and _DML.search(body)):
            raise RoutingError(f"{words.split()[0].upper()} ... ANALYZE runs the statement it explains; on a "
                               "sharded database only a SELECT can be analyzed: use EXPLAIN, or run the "
                               "statement itself")


def explained(inner: RoutedStatement, words: str) -> RoutedStatement:
    """The explained statement's route with every unit's SQL behind the EXPLAIN words: a read of plans."""
    units = tuple(replace(u, sql=_behind(words, u.sql)) for u in inner.execution_units)
    return RoutedStatement(
        kind=StatementKind.SELECT, route_units=inner.route_units, execution_units=units, write=inner.write,
        logic_tables=inner.logic_tables,
    )


def _behind(words: str, sql: str) -> str:
    """`EXPLAIN ...` before a unit's SQL (after its leading comments, which may carry hints)."""
    m = re.match(_COMMENTS, sql, re.S)
    head = m.end() if m else 0
    return f"{sql[:head]} {words} {sql[head:].lstrip()}" if head else f"{words} {sql.lstrip()}"


__all__ = ["check_explain", "explained", "split_explain", "xa_refusal"]
