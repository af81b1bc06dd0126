"""The statements that control a transaction and the session's SET state on sharded databases: BEGIN /
START TRANSACTION, COMMIT, ROLLBACK, SET autocommit, SAVEPOINT / ROLLBACK TO / RELEASE, SET TRANSACTION,
SET NAMES and other session SETs; and the implicit commit before DDL.

Why apart from proxy.execution.txn: that module fans one transaction out over the data sources (joining,
losing a part, ending it, XA); this one decides what a client's statement means for it. The text is
classified without parsing (`classify_session_statement`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.constants import ErrorCode, ServerStatus
from protocol.packets import ERRPacket
from proxy.backends.charset import changes_names, names_of, only_names, read_names
from proxy.execution import diagnostics, setquery
from proxy.execution.errors import answer_error
from proxy.execution.table_locks import unlock_all
from proxy.execution.txn import (
    _LOST,
    CR_SERVER_LOST,
    ER_SP_DOES_NOT_EXIST,
    _detail,
    _drop_lost,
    _names,
    _over,
    join,
    next_is_xa,
)
from proxy.execution.txn_end import end_transaction
from proxy.execution.txn_text import VERBS, key, parse_savepoint, without_comments
from routing.parse import NO_AUTO_VALUE_ON_ZERO, PIPES_AS_CONCAT

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.execution.context import SessionContext as Session
    from proxy.execution.state import TransactionState

_TX = re.compile(
    r"^\s*(?:(?P<begin>BEGIN(?:\s+WORK)?|START\s+TRANSACTION\b[^;]*)"
    r"|(?P<end>COMMIT|ROLLBACK)(?:\s+WORK)?(?:\s+AND\s+(?:NO\s+)?CHAIN)?(?:\s+(?:NO\s+)?RELEASE)?)"
    r"\s*;?\s*$",
    re.I | re.S,
)
_SET = re.compile(r"^\s*SET\s+(?!GLOBAL\b|@@global\.|PASSWORD\b|ROLE\b|DEFAULT\s+ROLE\b|STATEMENT\b)", re.I)
_AUTOCOMMIT = re.compile(r"^\s*SET\s+(?:SESSION\s+|LOCAL\s+|@@session\.|@@local\.|@@)?autocommit\s*(?::=|=)\s*"
                         r"(?P<v>1|0|ON|OFF|TRUE|FALSE)\s*;?\s*$", re.I)
_SET_NAMES = re.compile(r"^\s*SET\s+(?:NAMES|CHARACTER\s+SET|CHARSET)\s+'?`?(?P<cs>\w+)", re.I)
MODE_FLAGS = int(ServerStatus.NO_BACKSLASH_ESCAPES | ServerStatus.ANSI_QUOTES)
_NEXT_TX = re.compile(r"^\s*SET\s+TRANSACTION\b", re.I)


@dataclass(frozen=True)
class SessionStatement:
    kind: str  # begin | commit | rollback | savepoint | autocommit | set | next_tx
    value: str | None = None


def classify_session_statement(sql: str) -> SessionStatement | None:
    verb = VERBS.get(sql.upper()) if len(sql) <= 8 else None  # the texts the fast path answers too
    if verb is not None:
        return SessionStatement(verb)
    m = _TX.match(sql)
    if m is None and (bare := without_comments(sql)) is not sql:
        m = _TX.match(bare)  # `COMMIT /* c */` commits, as MySQL reads it (it went to one node as a routed statement)
    if m:
        if m.group("begin"):
            return SessionStatement("begin")
        return SessionStatement(m.group("end").lower())
    if parse_savepoint(sql) is not None:  # SAVEPOINT, ROLLBACK TO, RELEASE SAVEPOINT: any name, comments too
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


async def session_statement(session: Session, stmt: SessionStatement, sql: str) -> None:
    """Transactions and SET on a sharded database, fanned out over the data sources."""
    txn = session.txn
    if stmt.kind == "begin":
        if txn.commits_before_begin:
            # implicit commit, as MySQL does; when it fails, no new transaction starts (as in MySQL)
            failure = await end_transaction(session, "COMMIT", label=f"the implicit COMMIT of {sql.strip()}",
                                            consequence="; no new transaction was started")
            if failure is not None:
                answer_error(session, failure)
                return
        if txn.table_locks:  # START TRANSACTION releases the table locks, as on MariaDB
            await unlock_all(session)
        txn.begin(sql)  # also answered by proxy.execution.fastlocal (`local_begin`)
        session.update_status(0)
        session.ok()
    elif stmt.kind in ("commit", "rollback"):
        failure = await end_transaction(session, stmt.kind.upper())
        if failure is not None:
            answer_error(session, failure)
        else:
            note, session.commit_note = session.commit_note, ""
            session.ok(info=note.encode() if note else b"", warnings=session.end_warnings)
    elif stmt.kind == "savepoint":
        await savepoint(session, sql)
    elif stmt.kind == "autocommit":
        on = stmt.value == "1"
        if on and not txn.autocommit:
            # SET autocommit=1 commits, as MySQL does; when that fails, autocommit stays 0 (as in MySQL)
            failure = await end_transaction(session, "COMMIT", label="the implicit COMMIT of SET autocommit=1",
                                            consequence="; autocommit is still 0")
            if failure is not None:
                answer_error(session, failure)
                return
            txn.joined = []
            for conn in list(session.backends.values()):  # join() left them at autocommit=0
                try:
                    await session._must(conn, "SET autocommit=1")
                except Exception as exc:
                    conn.broken = True  # closed: the next statement there gets a pooled (autocommit) one
                    session.log.warning("autocommit_restore_failed", data_source=conn.name, error=str(exc))
            session.drop_broken()
        elif not on and next_is_xa(session):
            # XA: the held connections are at autocommit=0 too (as @@autocommit says), and each one starts
            # its branch when the transaction touches it; one holding a branch now gets it at its next join
            txn.autocommit = False
            for conn in list(session.backends.values()):
                if conn.xa is None and conn.status & ServerStatus.AUTOCOMMIT:
                    await session._must(conn, "SET autocommit=0")
        elif not on:
            was_on = txn.autocommit
            txn.autocommit = False
            for conn in list(session.backends.values()):
                if conn.name not in txn.joined:
                    await join(session, conn)
                elif was_on:  # already in the BEGIN transaction: sending BEGIN again would commit it
                    await session._must(conn, "SET autocommit=0")
        txn.autocommit = on
        session.update_status(0)
        session.ok()
    elif stmt.kind == "next_tx":
        probe = await _probe(session)
        for conn in list(session.backends.values()):
            await session._must(conn, sql)
        txn.next_tx_sets.append(sql)  # only once it ran: a SET TRANSACTION that fails is not replayed
        _end_probe(session, probe)
        session.ok()
    else:  # plain SET: every connection now, and every one borrowed later
        db = session.database
        if stmt.value is None and db is not None and db.kernel is not None and setquery.reads_tables(sql) \
                and await setquery.routed_set(session, db, sql):
            return  # SET @v = (SELECT ... FROM t): run where the kernel routes it, values copied
        session.release_read_backends()
        # SET NAMES <known character set> (every connector sends one when it connects) needs no trial run:
        # only the name is replayed, and MariaDB takes every one of these
        plain_names = names_of(sql)
        probe = None if plain_names is not None and " " not in plain_names else await _probe(session)
        last = None
        # every connection warns alike; the OK counts one server's, and SHOW WARNINGS (routed to the first data
        # source, as the kernel routes a statement without tables) reads that connection's
        warned: dict[str, int] = {}
        for conn in list(session.backends.values()):
            warned[conn.name] = await session._must(conn, sql)
            txn.mode_flags = conn.status & MODE_FLAGS  # (sql_mode as the servers read it: SET sql_mode, DEFAULT)
            last = conn
        if last is not None and "sql_mode" in sql.lower():  # PIPES_AS_CONCAT has no status flag: asked
            txn.sql_mode_bits = await sql_mode_bits(last)
        if changes_names(sql):  # SET NAMES cs COLLATE c, SET CHARACTER SET, SET collation_connection = ...
            names = plain_names or (await read_names(last) if last is not None else None)
            if names is not None:
                session.set_names(names)
                for conn in session.backends.values():
                    conn.charset = names
        if not only_names(sql):
            txn.session_sets.append(sql)
            for conn in session.backends.values():
                conn.session_sets = tuple(txn.session_sets)
        warnings = max(warned.values(), default=0)
        if warnings:  # (a SET that warns none leaves the session's diagnostics as they were)
            diagnostics.ran_on(session, [next(name for name, n in warned.items() if n == warnings)])
        if not warnings:
            _end_probe(session, probe)  # (with warnings it stays the session's: SHOW WARNINGS reads it)
        session.update_status(0)
        session.ok(warnings=warnings)


def mirror(txn: TransactionState, stmt: SessionStatement, sql: str) -> None:
    """A transaction statement a session ran before choosing a database (relayed to a default data source, which
    answered it): the session's transaction state follows, so that it holds after USE, as on MariaDB, where USE ends
    no transaction (mariadb-dump --single-transaction starts its transaction and sets its savepoint before it
    chooses the database). Nothing can be written without a database, so the transaction has no work yet: the
    data sources of the database chosen next join it, with its savepoints."""
    if stmt.kind == "begin":
        txn.begin(sql)
        txn.savepoints = []
        txn.next_tx_sets = []
    elif stmt.kind in ("commit", "rollback"):
        txn.begin_sql, txn.savepoints, txn.next_tx_sets = None, [], []
    elif stmt.kind == "autocommit":
        if stmt.value == "1" and not txn.autocommit:
            txn.begin_sql, txn.savepoints = None, []
        txn.autocommit = stmt.value == "1"
    elif stmt.kind == "next_tx":
        txn.next_tx_sets.append(sql)
    elif stmt.kind == "savepoint" and (sp := parse_savepoint(sql)) is not None and sp.name is not None \
            and txn.active:
        keys = [key(n) for n in txn.savepoints]
        k = key(sp.name)
        if sp.verb == "set":
            txn.savepoints = [n for n, kn in zip(txn.savepoints, keys, strict=True) if kn != k] + [sp.name]
        elif k in keys:
            txn.savepoints = txn.savepoints[: keys.index(k) + (1 if sp.verb == "rollback" else 0)]


async def sql_mode_bits(conn: BackendConnection) -> int:
    """The flags of the connection's sql_mode (just SET) that no status flag says: PIPES_AS_CONCAT (ANSI and ORACLE
    include it) and NO_AUTO_VALUE_ON_ZERO, as routing.parse's bits."""
    rows = await conn.execute("SELECT @@SESSION.sql_mode")
    if not isinstance(rows, list) or not rows or rows[0][0] is None:
        return 0
    flags = bytes(rows[0][0]).decode("ascii", "replace").upper().split(",")
    return (PIPES_AS_CONCAT if "PIPES_AS_CONCAT" in flags else 0) | (
        NO_AUTO_VALUE_ON_ZERO if "NO_AUTO_VALUE_ON_ZERO" in flags else 0)


async def _probe(session: Session) -> BackendConnection | None:
    """A SET recorded for the connections borrowed later must have run somewhere first: with no connection
    held yet, one is borrowed for it, so that a SET the backends refuse fails now (and is not recorded)
    instead of failing every later statement that borrows a connection."""
    db = session.database
    if session.backends or db is None or not db.sources:
        return None
    # not a write: a read/write splitting group must not pin the session to its primary for a SET
    return await session.backend(next(iter(db.sources)), record_write=False)


def _end_probe(session: Session, probe: BackendConnection | None) -> None:
    """The SET ran: the connection borrowed only for it goes back to the pool (it keeps the session's
    state, so borrowing it again costs nothing), as if the SET had been recorded without running."""
    if probe is None or not session._lendable(probe):
        return
    for name, conn in list(session.backends.items()):
        if conn is probe:
            del session.backends[name]
            session.give_back(probe, reset=False)


async def savepoint(session: Session, sql: str) -> None:
    """SAVEPOINT / ROLLBACK TO / RELEASE SAVEPOINT on every data source the transaction touched. The proxy
    keeps the transaction's savepoints itself: a data source joining later sets them too (so ROLLBACK TO
    undoes its part), and an unknown name is refused before anything runs (1305, as MySQL).

    A data source on which the statement fails after it ran on others (or whose connection is lost) leaves
    the transaction in a state no data source agrees on: that data source's connection is closed (its part
    rolled back by its server) and its part of the transaction recorded as lost, so that COMMIT cannot
    claim success; the client hears it at once."""
    txn = session.txn
    sp = parse_savepoint(sql)
    if sp is None or sp.name is None:  # nothing ran anywhere
        session.error(ErrorCode.PARSE_ERROR, f"You have an error in your SQL syntax near {sql.strip()[:80]!r}",
                      "42000")
        return
    name, k = sp.name, key(sp.name)
    keys = [key(n) for n in txn.savepoints]
    if sp.verb != "set" and k not in keys:
        session.error(ER_SP_DOES_NOT_EXIST, f"SAVEPOINT {name} does not exist", "42000")
        return
    statement = sp.sql()  # one form on every data source, as a data source joining later sets it (txn.join)
    fresh = _drop_lost(session)
    done: list[str] = []
    failed: dict[str, str] = {}
    errno = CR_SERVER_LOST
    for ds in list(txn.joined):
        conn = session.backends.get(ds)
        if conn is None or conn.broken:
            continue
        try:
            res = await conn.execute(statement)
        except Exception as exc:
            conn.broken = True
            failed[ds] = _detail(exc)
            continue
        if isinstance(res, ERRPacket):
            if not done and not failed:  # refused on the first data source, nothing changed anywhere
                session.error(res.errno, f"[{ds}] {res.message}" if len(txn.joined) > 1 else res.message,
                              res.sqlstate)
                return
            conn.broken = True
            failed[ds] = f"{res.errno}: {res.message}"
            errno = res.errno if len(failed) == 1 else errno
            continue
        done.append(ds)
    fresh += _drop_lost(session)
    for ds, detail in failed.items():
        if ds in txn.lost:
            txn.lost[ds] = detail
    if txn.active:
        if sp.verb == "set":  # a name set again moves the savepoint: the earlier one is gone
            txn.savepoints = [n for n, kn in zip(txn.savepoints, keys, strict=True) if kn != k] + [name]
        elif sp.verb == "rollback":  # the later ones are gone, this one stays
            txn.savepoints = txn.savepoints[: keys.index(k) + 1]
        else:  # this one and the later ones
            txn.savepoints = txn.savepoints[: keys.index(k)]
    session.update_status(0)
    if failed or fresh:
        problems = {n: txn.lost.get(n, _LOST) for n in fresh} | failed
        session.error(
            errno,
            f"{sql.strip()} failed on " + ", ".join(f"{n} ({d})" for n, d in problems.items())
            + f"; done on {_names(done)}; the open transaction's work on {', '.join(problems)} is lost with its "
            f"connection: the transaction cannot commit any more (ROLLBACK ends it; COMMIT rolls back the rest "
            f"and reports it)",
            "HY000",
        )
        return
    session.ok()


async def implicit_commit(session: Session) -> bool:
    """DDL commits the open transaction first, as MySQL does: every data source it touched (the DDL's own
    connections would commit theirs implicitly, the others would stay open). False when that commit failed:
    the client has the error and the DDL must not run (as in MySQL)."""
    txn = session.txn
    if not txn.active:
        return True
    if not txn.joined and not txn.lost:
        if txn.begin_sql is not None:
            _over(session)
        return True
    failure = await end_transaction(session, "COMMIT", label="the implicit COMMIT before the DDL",
                                    consequence="; the DDL was not run")
    if failure is not None:
        answer_error(session, failure)
        return False
    return True


__all__ = ["SessionStatement", "classify_session_statement", "implicit_commit", "mirror", "savepoint",
           "session_statement"]
