"""Session-wide statements on a sharded logical database: transactions and SET.

On one data source a client's BEGIN, COMMIT and SET simply go to its connection. Across data sources
the proxy must fan them out: a transaction starts on each data source the first time the transaction
touches it (LOCAL transactions, as ShardingSphere's default), COMMIT/ROLLBACK/SAVEPOINT go to every
data source that joined, and SET statements reach every connection the session holds now or borrows later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.constants import ErrorCode
from protocol.packets import ERRPacket

if TYPE_CHECKING:
    from proxy.backend import BackendConnection
    from proxy.session import Session

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


# --- fanning them out over a session's data sources ------------------------------------------------------


async def join(session: Session, conn: BackendConnection) -> None:
    """An already held connection enters the session's open transaction."""
    for sql in session.txn.next_tx_sets:
        await session._must(conn, sql)
    if not session.txn.autocommit:
        await session._must(conn, "SET autocommit=0")
    if session.txn.begin_sql is not None:
        await session._must(conn, session.txn.begin_sql)
    session.txn.joined.append(conn.name)

async def session_statement(session: Session, stmt: SessionStatement, sql: str) -> None:
    """Transactions and SET on a sharded database, fanned out over the data sources ."""
    txn = session.txn
    if stmt.kind == "begin":
        if txn.active and txn.joined:
            await end_transaction(session, "COMMIT")  # implicit commit, as MySQL does
        txn.begin_sql = sql
        txn.joined = []
        session.update_status(0)
        session.ok()
    elif stmt.kind in ("commit", "rollback"):
        failed = await end_transaction(session, stmt.kind.upper())
        if failed:
            session.error(ErrorCode.UNKNOWN_ERROR, failed, "HY000")
        else:
            session.ok()
    elif stmt.kind == "savepoint":
        for name in list(txn.joined):
            await session._must(session.backends[name], sql)
        session.ok()
    elif stmt.kind == "autocommit":
        on = stmt.value == "1"
        if on and not txn.autocommit:
            await end_transaction(session, "COMMIT")  # SET autocommit=1 commits, as MySQL does
            txn.joined = []
            for conn in list(session.backends.values()):  # _join left them at autocommit=0
                await session._must(conn, "SET autocommit=1")
        txn.autocommit = on
        if not on:
            txn.joined = []
            for conn in list(session.backends.values()):
                await join(session, conn)
        session.update_status(0)
        session.ok()
    elif stmt.kind == "next_tx":
        txn.next_tx_sets.append(sql)
        for conn in list(session.backends.values()):
            await session._must(conn, sql)
        session.ok()
    else:  # plain SET: every connection now, and every one borrowed later
        session.release_read_backends()
        for conn in list(session.backends.values()):
            await session._must(conn, sql)
        if stmt.value:
            session.charset = stmt.value if stmt.value != "utf8" else "utf8mb3"
            for conn in session.backends.values():
                conn.charset = session.charset
        else:
            txn.session_sets.append(sql)
            for conn in session.backends.values():
                conn.session_sets = tuple(txn.session_sets)
        session.ok()

async def implicit_commit(session: Session) -> None:
    """DDL commits the open transaction on every connection it ran on, as in MySQL; the transaction's
    other data sources are committed by the proxy, so the session ends up outside a transaction."""
    txn = session.txn
    if txn.begin_sql is None:
        return
    others = [session.backends[n] for n in txn.joined if n in session.backends]
    txn.begin_sql = None
    txn.joined = []
    txn.next_tx_sets = []
    for conn in others:
        res = await conn.execute("COMMIT")
        if isinstance(res, ERRPacket):
            session.log.warning("implicit_commit_failed", data_source=conn.name, error=res.message)
    session.update_status(0)

async def end_transaction(session: Session, verb: str) -> str | None:
    """COMMIT or ROLLBACK on every data source the transaction touched; says plainly which did what."""
    txn = session.txn
    done: list[str] = []
    failed: list[str] = []
    for name in txn.joined:
        conn = session.backends.get(name)
        if conn is None:
            failed.append(f"{name} (connection lost)")
            continue
        res = await conn.execute(verb)
        if isinstance(res, ERRPacket):
            failed.append(f"{name} ({res.errno}: {res.message})")
        else:
            done.append(name)
    txn.begin_sql = None
    txn.joined = []
    txn.next_tx_sets = []
    if not txn.autocommit:
        for conn in session.backends.values():
            txn.joined.append(conn.name)
    session.update_status(0)
    if failed:
        return (f"{verb} failed on {', '.join(failed)}; "
                f"{'committed' if verb == 'COMMIT' else 'rolled back'} on {', '.join(done) or 'none'}")
    return None
