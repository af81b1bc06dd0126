"""One error hierarchy, one place that makes the client's ERR (proxy.execution.errors), without servers.

* the table: each kind of exception -> the (errno, SQLSTATE, message) the client gets, byte for byte what the
  handlers sent before they shared `error_packet` / `answer_error`;
* what `answer_error` does besides (a backend error's transaction note, a bug's dropped connections);
* every exception class under proxy/ is a ServerError, or is listed below with why it never reaches a client
  as itself (read from the source with `ast`, so a new class has to choose).
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import pytest

from merge.errors import MergeError, MergeMemoryError
from protocol.errors import ServerError
from protocol.packets import ERRPacket
from protocol.wire import MalformedPacket
from proxy.backends.backend import BackendError
from proxy.backends.codec import StatementFailed
from proxy.execution.atomic import said
from proxy.execution.errors import answer_error, error_packet, server_errno
from proxy.execution.federation import FederationError
from proxy.execution.state import TransactionState
from proxy.execution.stepwise import StepFailed
from proxy.execution.units import UnitFailed
from proxy.frontend.handshake import HandshakeFailed
from proxy.migration.job import MigrationError
from proxy.session.distsql.errors import DistSQLError, not_supported
from routing.errors import RoutingError
from routing.plan import ExecutionUnit, RoutedStatement, RouteUnit, StatementKind

ROOT = Path(__file__).resolve().parents[2]

_MISSING = ERRPacket(1146, "Table 'demo_ds_1.t_order_1' doesn't exist", "42S02")


def _unit_failed(note: str = "") -> UnitFailed:
    exc = UnitFailed("ds_1", _MISSING)
    exc.note = note
    return exc


TABLE: list[tuple[str, BaseException, tuple[int, str, str]]] = [
    ("backend lost", BackendError("ds_0", "lost connection to MySQL server during query"),
     (1158, "08S01", "data source ds_0: lost connection to MySQL server during query")),
    ("backend unreachable", BackendError("ds_0", "cannot connect to 127.0.0.1:1: refused", errno=2003),
     (1429, "HY000", "data source ds_0: cannot connect to 127.0.0.1:1: refused")),
    ("backend timed out", BackendError("ds_0", "timed out after 30 s"),
     (1159, "08S01", "data source ds_0: timed out after 30 s")),
    ("pool timeout", BackendError("ds_0", "no connection within 1000 ms", errno=1040),
     (1040, "HY000", "data source ds_0: no connection within 1000 ms")),
    ("shutting down", BackendError("ds_0", "the proxy is shutting down", errno=1053, sqlstate="08S01"),
     (1053, "08S01", "data source ds_0: the proxy is shutting down")),
    ("backend, statement taken back",
     said(BackendError("ds_0", "lost connection to MySQL server during query"), "; nothing was applied"),
     (1158, "08S01", "data source ds_0: lost connection to MySQL server during query; nothing was applied")),
    ("unit ERR", _unit_failed(), (1146, "42S02", "[ds_1] Table 'demo_ds_1.t_order_1' doesn't exist")),
    ("unit ERR with its note", said(_unit_failed(), "; the transaction goes on"),
     (1146, "42S02", "[ds_1] Table 'demo_ds_1.t_order_1' doesn't exist; the transaction goes on")),
    ("prepare refused", StatementFailed(ERRPacket(1064, "You have an error in your SQL syntax", "42000")),
     (1064, "42000", "You have an error in your SQL syntax")),
    ("step ERR", StepFailed(ERRPacket(1136, "Column count doesn't match value count at row 1", "21S01")),
     (1136, "21S01", "Column count doesn't match value count at row 1")),
    ("handshake", HandshakeFailed(1045, "Access denied for user 'u'@'h' (using password: YES)", "28000"),
     (1045, "28000", "Access denied for user 'u'@'h' (using password: YES)")),
    ("migration", MigrationError("MIGRATE TABLE t: already running"),
     (1105, "HY000", "MIGRATE TABLE t: already running")),
    ("migration, own errno", MigrationError("no such table", 1146, "42S02"), (1146, "42S02", "no such table")),
    ("DistSQL", not_supported("SHOW FOO"), (1235, "42000", "SHOW FOO is not supported by shardproxy")),
    ("DistSQL, own errno", DistSQLError(1049, "Unknown database 'x'", "42000"),
     (1049, "42000", "Unknown database 'x'")),
    ("kernel refusal", RoutingError("cannot route"), (1235, "42000", "cannot route")),
    ("federation refusal", FederationError("too big"), (1235, "42000", "too big")),
    ("merge", MergeError("spec"), (1105, "HY000", "spec")),
    ("merge memory", MergeMemoryError("Out of merge memory"), (1038, "HY001", "Out of merge memory")),
    ("server error", ServerError("plain"), (1105, "HY000", "plain")),
    ("malformed", MalformedPacket("truncated"), (1835, "HY000", "Malformed communication packet: truncated")),
    ("bug", RuntimeError("planted"), (1105, "HY000", "shardproxy internal error: RuntimeError: planted")),
]


@pytest.mark.parametrize(("exc", "expected"), [(e, x) for _n, e, x in TABLE], ids=[n for n, _e, _x in TABLE])
def test_error_packet(exc: BaseException, expected: tuple[int, str, str]) -> None:
    err = error_packet(exc)
    assert (err.errno, err.sqlstate, err.message) == expected
    if not isinstance(exc, (MalformedPacket, RuntimeError)):
        assert isinstance(exc, ServerError)
        if not isinstance(exc, UnitFailed):  # its `[ds]` and note belong to the answer, not to the error
            # (a client-library number stays the error's own; the client gets the server's: `server_errno`)
            assert (*server_errno(exc.errno, exc.sqlstate, exc.message), exc.message) == expected


def test_the_old_attributes_stay() -> None:
    lost = BackendError("ds_0", "gone", errno=2003)
    assert str(lost) == lost.message == "data source ds_0: gone"
    assert (lost.data_source, lost.to_err()) == ("ds_0", ERRPacket(2003, "data source ds_0: gone", "HY000"))
    lost.message = "data source ds_0: gone; more"
    assert str(lost) == "data source ds_0: gone; more"
    unit = _unit_failed("; note")
    assert (unit.data_source, unit.err, unit.note, str(unit)) == ("ds_1", _MISSING, "; note", _MISSING.message)
    assert StatementFailed(_MISSING).err is _MISSING
    assert StepFailed(_MISSING).err is _MISSING
    shake = HandshakeFailed(1045, "denied", "28000")
    assert (shake.errno, shake.message, shake.sqlstate) == (1045, "denied", "28000")


# --- answer_error: the session's answer -------------------------------------------------------------------


class _Session:
    """What answer_error and txn.note_failure touch of a session."""

    def __init__(self, *, loses: str | None = None) -> None:
        self.sent: list[tuple[int, str, str]] = []
        self.dropped = 0
        self.loses = loses
        self.log = MagicMock()
        self.txn = TransactionState()

    def error(self, errno: int, message: str, sqlstate: str = "HY000") -> None:
        self.sent.append((errno, sqlstate, message))

    def drop_broken(self) -> None:
        self.dropped += 1
        if self.loses is not None:  # the broken connection held part of the open transaction
            self.txn.lost[self.loses] = "?"


def _answer(session: _Session, exc: BaseException, **kw: Any) -> tuple[int, str, str]:
    try:
        raise exc
    except BaseException as caught:
        answer_error(session, caught, **kw)  # type: ignore[arg-type]
    (sent,) = session.sent
    return sent


_DB: Any = SimpleNamespace(name="sharding_db", sources={
    f"ds_{i}": SimpleNamespace(config=SimpleNamespace(database=f"demo_ds_{i}")) for i in range(2)})


def _routed(units: int) -> RoutedStatement:
    return RoutedStatement(
        StatementKind.SELECT,
        tuple(RouteUnit(f"ds_{i}", {"t_order": f"t_order_{i}"}) for i in range(2)),
        tuple(ExecutionUnit(f"ds_{i}", "SELECT 1") for i in range(units)),
    )


@pytest.mark.parametrize(("units", "named", "message"), [
    (2, None, "[ds_1] Table 'sharding_db.t_order' doesn't exist; note"),  # several units: the data source named
    (1, None, "Table 'sharding_db.t_order' doesn't exist; note"),
    (1, True, "[ds_1] Table 'sharding_db.t_order' doesn't exist; note"),  # EXPLAIN, a stepwise write
    (2, False, "Table 'sharding_db.t_order' doesn't exist; note"),  # SELECT ... INTO
])
def test_a_units_error_in_logic_names(units: int, named: bool | None, message: str) -> None:
    session = _Session()
    assert _answer(session, _unit_failed("; note"), db=_DB, routed=_routed(units), named=named) == (
        1146, "42S02", message)
    assert session.dropped == 0


def test_a_prepare_refusal_renamed_by_its_caller() -> None:
    session = _Session()
    exc = StatementFailed(ERRPacket(1146, "Table 'x.scratch_1' doesn't exist", "42S02"))
    assert _answer(session, exc, rename=lambda m: m.replace("scratch_1", "t")) == (
        1146, "42S02", "Table 'x.t' doesn't exist")


def test_a_backend_error_drops_the_broken_and_says_what_the_transaction_lost() -> None:
    session = _Session()
    assert _answer(session, BackendError("ds_0", "gone")) == (1158, "08S01", "data source ds_0: gone")
    assert session.dropped == 1
    session.log.warning.assert_called_once()
    session = _Session(loses="ds_0")
    errno, sqlstate, message = _answer(session, BackendError("ds_0", "gone"))
    assert (errno, sqlstate) == (1158, "08S01")
    assert message.startswith("data source ds_0: gone; the open transaction's work on ds_0 is lost")
    assert session.txn.lost["ds_0"] == "2013: gone"


def test_a_bug_costs_the_statement() -> None:
    session = _Session()
    assert _answer(session, KeyError("k")) == (1105, "HY000", "shardproxy internal error: KeyError: 'k'")
    assert session.dropped == 1
    session.log.exception.assert_called_once_with("command_failed")


@pytest.mark.parametrize("exc", [RoutingError("no"), MalformedPacket("bad"), StepFailed(_MISSING)])
def test_a_refusal_is_not_a_bug(exc: BaseException) -> None:
    session = _Session()
    _answer(session, exc)
    assert session.dropped == 0
    session.log.exception.assert_not_called()


# --- every exception class under proxy/ -------------------------------------------------------------------

# exception classes that never reach a client as themselves, and why
INTERNAL = {
    "ClientGone": "the client left: there is no one to answer",
    "PoolTimeout": "proxy.backends.backend.DataSource.acquire raises BackendError 1040 for it",
    "PoolClosed": "proxy.backends.backend.DataSource.acquire raises BackendError 1053 for it",
    "PoolInvariantError": "an ownership bug (AssertionError): answered as one (shardproxy internal error)",
    "LogUnavailable": "the XA log: its callers say what it means (ALTER TRANSACTION RULE 1235, COMMIT's outcome)",
    "RegistryUnavailable": "etcd: proxy.cluster.hooks answers for it in the client's terms (KILL 1094, ...)",
    "ConcurrentChange": "proxy.cluster.hooks answers for it (another proxy changed the rule first)",
    "RuleSyntaxError": "ALTER TRANSACTION RULE answers 1064 for it (proxy.session.admin)",
    "SandboxError": "the CLI's sandbox installer: no client connection",
    "SandboxUnavailableError": "the CLI's sandbox installer: no client connection",
    "_LockTimeout": "a migration's own retry signal (proxy.migration.job)",
    "_TooMany": "proxy.execution.dualread raises MergeError for it",
    "_Undecryptable": "proxy.execution.decrypting answers its ERR 1105 (or DecryptingRelay raises ServerError for it)",
}


def _classes() -> tuple[dict[str, list[str]], dict[str, str]]:
    """Every class's base names (protocol, routing, merge, proxy), and where each of proxy/'s is."""
    bases: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for package in ("protocol", "routing", "merge", "proxy"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    names = [b.attr if isinstance(b, ast.Attribute) else b.id for b in node.bases
                             if isinstance(b, (ast.Attribute, ast.Name))]
                    bases.setdefault(node.name, names)
                    if package == "proxy":
                        where[node.name] = str(path.relative_to(ROOT))
    return bases, where


def _ancestors(name: str, bases: dict[str, list[str]]) -> set[str]:
    out: set[str] = set()
    todo = list(bases.get(name, ()))
    while todo:
        base = todo.pop()
        if base not in out:
            out.add(base)
            todo.extend(bases.get(base, ()))
    return out


def _is_exception(ancestors: set[str]) -> bool:
    return any(isinstance(t := getattr(builtins, a, None), type) and issubclass(t, BaseException) for a in ancestors)


def test_every_error_a_client_can_get_is_a_server_error() -> None:
    bases, where = _classes()
    exceptions = {n for n in where if _is_exception(_ancestors(n, bases))}
    assert {"BackendError", "UnitFailed", "StepFailed", "StatementFailed"} <= exceptions  # the scan sees them
    wrong = sorted(f"{where[n]}: {n}" for n in exceptions - INTERNAL.keys()
                   if "ServerError" not in _ancestors(n, bases))
    assert not wrong, f"exception classes a client can get that are not protocol.errors.ServerError: {wrong}"
    stale = sorted(set(INTERNAL) - exceptions)
    assert not stale, f"INTERNAL names classes that are gone: {stale}"
