"""Session-wide statements on a sharded logical database: transactions and SET.

On one data source a client's BEGIN, COMMIT and SET simply go to its connection. Across data sources
the proxy must fan them out: a transaction starts on each data source the first time the transaction
touches it (LOCAL transactions, as ShardingSphere's default), COMMIT/ROLLBACK/SAVEPOINT go to every
data source that joined, and SET statements reach every connection the session holds now or borrows later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TX = re.compile(
    r"^\s*(?:(?P<begin>BEGIN(?:\s+WORK)?|START\s+TRANSACTION\b[^;]*)"
    r"|(?P<end>COMMIT|ROLLBACK)(?:\s+WORK)?(?:\s+AND\s+(?:NO\s+)?CHAIN)?(?:\s+(?:NO\s+)?RELEASE)?"
    r"|(?P<savepoint>SAVEPOINT\s+\S+|ROLLBACK\s+(?:WORK\s+)?TO\s+(?:SAVEPOINT\s+)?\S+|RELEASE\s+SAVEPOINT\s+\S+))"
    r"\s*;?\s*$",
    re.I | re.S,
)
_SET = re.compile(r"^\s*SET\s+(?!GLOBAL\b|@@global\.|PASSWORD\b|ROLE\b|DEFAULT\s+ROLE\b|STATEMENT\b)", re.I)
_AUTOCOMMIT = re.compile(r"^\s*SET\s+(?:SESSION\s+|LOCAL\s+|@@session\.|@@local\.|@@)?autocommit\s*(?::=|=)\s*"
                         r"(?P<v>1|0|ON|OFF|TRUE|FALSE)\s*;?\s*$", re.I)
_SET_NAMES = re.compile(r"^\s*SET\s+(?:NAMES|CHARACTER\s+SET|CHARSET)\s+'?`?(?P<cs>\w+)", re.I)
_NEXT_TX = re.compile(r"^\s*SET\s+TRANSACTION\b", re.I)


@dataclass(frozen=True)
class SessionStatement:
    kind: str  # begin | commit | rollback | savepoint | autocommit | set | next_tx
    value: str | None = None


def classify_session_statement(sql: str) -> SessionStatement | None:
    m = _TX.match(sql)
    if m:
        if m.group("begin"):
            return SessionStatement("begin")
        if m.group("end"):
            return SessionStatement(m.group("end").lower())
        return SessionStatement("savepoint")
    if not sql.lstrip()[:3].upper() == "SET":
        return None
    m = _AUTOCOMMIT.match(sql)
    if m:
        v = m.group("v").upper()
        return SessionStatement("autocommit", "1" if v in ("1", "ON", "TRUE") else "0")
    if _NEXT_TX.match(sql):
        return SessionStatement("next_tx")
    if _SET.match(sql):
        m = _SET_NAMES.match(sql)
        return SessionStatement("set", m.group("cs").lower() if m else None)
    return None


@dataclass
class TransactionState:
    begin_sql: str | None = None  # the statement that opened the transaction, replayed per data source
    joined: list[str] = field(default_factory=list)  # data sources the transaction has touched
    autocommit: bool = True
    session_sets: list[str] = field(default_factory=list)  # replayed on every newly borrowed connection
    next_tx_sets: list[str] = field(default_factory=list)  # SET TRANSACTION: only for the next transaction

    @property
    def active(self) -> bool:
        return self.begin_sql is not None or not self.autocommit
