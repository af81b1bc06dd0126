"""The proxy as an XA transaction manager: the transaction rule, xids, the decision log, recovery.

A transaction on a sharded database runs as the rule's `defaultType` says when it starts (global.yaml
`transaction.defaultType`, changed at run time by `ALTER TRANSACTION RULE`): LOCAL (proxy.execution.txn's fan-out
of BEGIN/COMMIT) or XA. Under XA every data source joins with `XA START <xid>`; COMMIT on one data source
is `XA END` + `XA COMMIT ... ONE PHASE`; on several it is two-phase: `XA END` + `XA PREPARE` on each, the
commit decision written to the durable log (proxy.backends.xalog), then `XA COMMIT` on each. The branches of one
transaction share its gtrid, `sp-<instance>-<boot>-<n>`, and differ by bqual (the data source's name);
formatID is `FORMAT_ID`.

Recovery (`recover_once`, at start-up and every `xa-recovery-interval-seconds`): `XA RECOVER` on every
data source of the sharded databases; each prepared branch of this proxy (its gtrid prefix) that is not
part of a transaction in flight in this process is committed when its gtrid has a commit decision in the
log, else rolled back. A data source that does not answer is tried again at the next pass. Branches of
other transaction managers are left alone (and listed by SHOW TRANSACTION IN DOUBT).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from protocol.packets import ERRPacket
from proxy.backends.readwrite import ReadWriteGroup
from proxy.backends.xalog import Branch, CommitRecord, DecisionLog, LogUnavailable
from proxy.config.model import ProxyConfig

if TYPE_CHECKING:
    from proxy.backends.backend import DataSource
    from proxy.backends.runtime import LogicalDatabase

log = structlog.get_logger("shardproxy.xa")


class Decisions(Protocol):
    """What recovery reads of a decision log: proxy.backends.xalog.DecisionLog (this proxy's, in its
    directory), or in Cluster mode the registry's (proxy.cluster.xa: this proxy's, or a dead proxy's that
    this one took over)."""

    @property
    def instance_id(self) -> str: ...

    committed: dict[str, CommitRecord]
    pending: set[str]
    aborted: set[str]

    def forget(self, gtrid: str) -> None: ...


class ProxyServer(Protocol):
    """What recovery reads of the server (proxy.server.ProxyServer, which owns the transaction manager):
    its logical databases, for the data sources of the sharded ones."""

    databases_by_name: dict[str, LogicalDatabase]

FORMAT_ID = 21328  # 0x5350, "SP": the formatID of every xid this proxy makes
DEFAULT_RECOVERY_INTERVAL = 5.0
DEFAULT_LOG_DIR = "xa-log"  # relative to the state directory (props.proxy-state-directory), else conf/
XAER_NOTA = 1397  # unknown xid (or, on MariaDB, a branch still attached to a live connection)
_SAFE_BQUAL = re.compile(r"[A-Za-z0-9_.$-]{1,64}")


def bqual_for(data_source: str) -> str:
    """A data source's branch qualifier: its name when that is a plain one, else a digest of it."""
    if _SAFE_BQUAL.fullmatch(data_source):
        return data_source
    return "b" + hashlib.sha1(data_source.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def xid_sql(gtrid: str, bqual: str, format_id: int = FORMAT_ID) -> str:
    """An xid as XA statements take it: 'gtrid','bqual',formatID (ours are plain ASCII)."""
    return f"'{gtrid}','{bqual}',{format_id}"


def xid_hex(gtrid: bytes, bqual: bytes, format_id: int) -> str:
    """Any xid, bytes as they are (XA RECOVER's): X'..',X'..',formatID."""
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{format_id}"


@dataclass
class XATransaction:
    """One session's XA transaction: its gtrid and the data sources that started a branch."""

    gtrid: str
    branches: dict[str, str] = field(default_factory=dict)  # data source -> bqual (XA START sent)
    # data sources that ran anything but a plain SELECT in it (writes, locking reads, DDL-free unknowns):
    # branches that only read commit in one phase before the others, and 2PC is needed only when two or
    # more branches wrote
    written: set[str] = field(default_factory=set)

    def xid(self, data_source: str) -> str:
        bqual = self.branches.get(data_source) or bqual_for(data_source)
        return xid_sql(self.gtrid, bqual)


@dataclass(frozen=True)
class PreparedBranch:
    """One row of XA RECOVER."""

    format_id: int
    gtrid: bytes
    bqual: bytes

    @property
    def sql(self) -> str:
        if self.format_id == FORMAT_ID and _printable(self.gtrid) and _printable(self.bqual):
            return xid_sql(self.gtrid.decode(), self.bqual.decode())
        return xid_hex(self.gtrid, self.bqual, self.format_id)


def _printable(b: bytes) -> bool:
    return bool(re.fullmatch(rb"[A-Za-z0-9_.$-]*", b))


def parse_recover(rows: Iterable[tuple[bytes | None, ...]]) -> list[PreparedBranch]:
    out = []
    for row in rows:
        try:
            fmt, glen, blen, data = int(row[0] or 0), int(row[1] or 0), int(row[2] or 0), row[3] or b""
        except (TypeError, ValueError, IndexError):
            continue
        out.append(PreparedBranch(fmt, bytes(data[:glen]), bytes(data[glen:glen + blen])))
    return out


def server_key(source: DataSource) -> str:
    return f"{source.config.host}:{source.config.port}"


@dataclass
class RecoveryPass:
    """What one recovery pass did (for logs and tests)."""

    committed: list[str] = field(default_factory=list)  # xids
    rolled_back: list[str] = field(default_factory=list)
    retry: list[str] = field(default_factory=list)  # xids whose XA COMMIT/ROLLBACK did not go through yet
    unreachable: list[str] = field(default_factory=list)  # servers
    finished: list[str] = field(default_factory=list)  # commit records now done
    waiting: list[str] = field(default_factory=list)  # xids left alone: their transaction is in flight here


class TransactionManager:
    """The proxy-wide transaction rule and XA state (one per proxy process)."""

    def __init__(self, config: ProxyConfig, *, worker: int = 0, workers: int = 1) -> None:
        rule = config.transaction
        # a relative xa-log-dir is under props.proxy-state-directory when there is one, else under conf/
        self.conf_dir = config.state_dir or config.conf_dir
        self.default_type = rule.default_type
        self.provider_type = rule.provider_type
        self.props: dict[str, Any] = dict(rule.props)
        self.worker, self.workers = worker, workers
        self.log: DecisionLog | None = None
        # Cluster mode (proxy.cluster.xa): the decisions go to the registry, where another proxy finds them
        # when this one dies, instead of to the local directory: called as DecisionLog is
        self.log_factory: Callable[..., DecisionLog] | None = None
        self.in_flight: set[str] = set()  # gtrids of this process's open XA transactions
        self._seq = itertools.count(1)
        self._server: ProxyServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._recovery_lock = asyncio.Lock()
        self.last_pass: RecoveryPass | None = None
        self.passes = 0

    # -- the rule ----------------------------------------------------------------------------------------

    @property
    def xa(self) -> bool:
        """New transactions are XA."""
        return self.default_type == "XA"

    @property
    def recovery_interval(self) -> float:
        try:
            value = float(self.props.get("xa-recovery-interval-seconds", DEFAULT_RECOVERY_INTERVAL))
        except (TypeError, ValueError):
            return DEFAULT_RECOVERY_INTERVAL
        return value if value > 0 else DEFAULT_RECOVERY_INTERVAL

    def log_dir(self, props: Mapping[str, Any] | None = None) -> Path:
        raw = (props if props is not None else self.props).get("xa-log-dir") or DEFAULT_LOG_DIR
        path = Path(str(raw)).expanduser()
        if not path.is_absolute():
            path = Path(self.conf_dir) / path
        if self.workers > 1:  # each --workers process has a log (and an instance id) of its own
            path = path / f"worker-{self.worker}"
        return path

    def _instance_prop(self, props: Mapping[str, Any] | None = None) -> str | None:
        value = (props if props is not None else self.props).get("xa-instance-id")
        if not value:
            return None
        return f"{value}w{self.worker}" if self.workers > 1 else str(value)

    def rule_row(self) -> tuple[str, str, str]:
        """SHOW TRANSACTION RULE: default_type, provider_type, props (JSON, keys sorted; '' when none)."""
        props = json.dumps({k: self.props[k] for k in sorted(self.props)}, separators=(",", ":")) \
            if self.props else ""
        return self.default_type, self.provider_type, props

    def alter(self, default_type: str, provider_type: str | None, props: Mapping[str, Any] | None) -> None:
        """ALTER TRANSACTION RULE: from the next transaction of every session. Switching to XA opens the log
        (raising LogUnavailable, the rule unchanged, when it cannot). The log's directory and the instance
        id cannot change while the log is open (it holds what recovery needs)."""
        new_props = dict(props) if props is not None else dict(self.props)
        if self.log is not None:
            for key in ("xa-log-dir", "xa-instance-id"):
                if props is not None and new_props.get(key) != self.props.get(key):
                    raise ValueError(f"{key} cannot change while the XA log is in use (it holds what recovery "
                                     f"needs): change it in global.yaml and restart")
        if default_type == "XA" and self.log is None:
            self._open_log(new_props)
            self._start_recovery()
        self.default_type = default_type
        self.provider_type = provider_type or ""  # the statement is the whole rule: no TYPE, no provider
        self.props = new_props
        self._wake.set()  # a changed interval applies at once
        log.info("transaction_rule_altered", default_type=self.default_type, provider_type=self.provider_type,
                 props=self.props)

    # -- start and stop ----------------------------------------------------------------------------------

    async def start(self, server: ProxyServer) -> None:
        """At start-up, before clients are accepted: open the log when XA is the default or a log exists
        from an earlier run (its branches may be waiting), and run a first recovery pass."""
        self._server = server
        if self.xa or (self.log_dir() / "decisions.log").exists():
            self._open_log(self.props)
            await self.recover_once()
            self._start_recovery()

    def _open_log(self, props: Mapping[str, Any]) -> None:
        xa_log = (self.log_factory or DecisionLog)(self.log_dir(props), instance_id=self._instance_prop(props))
        xa_log.open()
        self.log = xa_log

    def _start_recovery(self) -> None:
        if self._task is None and self._server is not None:
            self._task = asyncio.get_running_loop().create_task(self._recovery_loop(), name="xa-recovery")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self.log is not None:
            self.log.close()
            self.log = None

    @property
    def prefix(self) -> str:
        """The start of every gtrid of this proxy instance (any boot)."""
        assert self.log is not None
        return f"sp-{self.log.instance_id}-"

    # -- transactions -----------------------------------------------------------------------------------

    def begin(self) -> XATransaction:
        """A new XA transaction, in flight (recovery leaves its branches alone) until `finish`."""
        if self.log is None:
            self._open_log(self.props)
            self._start_recovery()
        assert self.log is not None
        gtrid = f"{self.prefix}{self.log.boot}-{next(self._seq)}"
        self.in_flight.add(gtrid)
        return XATransaction(gtrid)

    def finish(self, xa: XATransaction, *, unresolved: bool = False) -> None:
        """The transaction is over in this process; `unresolved`: some branch may be left prepared (its
        XA COMMIT/ROLLBACK did not go through), so recovery looks soon."""
        self.in_flight.discard(xa.gtrid)
        if unresolved:
            self.wake_soon()

    def wake_soon(self, delay: float = 0.3) -> None:
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().call_later(delay, self._wake.set)

    async def decide_commit(self, xa: XATransaction, branches: list[Branch]) -> None:
        """Write the commit decision durably (raises LogUnavailable when it could not be)."""
        if self.log is None:
            raise LogUnavailable("the XA log is not open")
        await self.log.log_commit(CommitRecord(xa.gtrid, tuple(branches), time.time()))

    def committed(self, xa: XATransaction) -> None:
        """Every branch committed: the decision is done."""
        if self.log is not None:
            self.log.forget(xa.gtrid)

    # -- recovery ---------------------------------------------------------------------------------------

    def _servers(self) -> dict[str, tuple[DataSource, list[str]]]:
        """One data source per server of the sharded databases (read/write groups: the primary), with the
        data source names it serves."""

        out: dict[str, tuple[DataSource, list[str]]] = {}
        if self._server is None:
            return out
        for db in self._server.databases_by_name.values():
            if db.kernel is None:
                continue
            for name, source in db.sources.items():
                physical = source.primary if isinstance(source, ReadWriteGroup) else source
                key = server_key(physical)
                entry = out.setdefault(key, (physical, []))
                if name not in entry[1]:
                    entry[1].append(name)
        return out

    def _ours(self, branch: PreparedBranch, decisions: Decisions | None = None) -> str | None:
        """The gtrid when the branch is this proxy's (or, given, that log's), else None."""
        decisions = decisions or self.log
        if decisions is None or branch.format_id != FORMAT_ID:
            return None
        try:
            gtrid = branch.gtrid.decode("ascii")
        except UnicodeDecodeError:
            return None
        return gtrid if gtrid.startswith(f"sp-{decisions.instance_id}-") else None

    def _busy(self, gtrid: str, decisions: Decisions | None = None) -> bool:
        decisions = decisions or self.log
        assert decisions is not None
        return gtrid in self.in_flight or gtrid in decisions.pending

    def _decision(self, gtrid: str, decisions: Decisions | None = None) -> bool:
        """Commit (True) or roll back."""
        decisions = decisions or self.log
        assert decisions is not None
        return gtrid in decisions.committed and gtrid not in decisions.aborted

    async def _scan(self, source: DataSource) -> list[PreparedBranch] | None:
        res = await source.admin_execute("XA RECOVER")
        if res is None or isinstance(res, ERRPacket) or not isinstance(res, list):
            if isinstance(res, ERRPacket):
                log.warning("xa_recover_failed", data_source=source.name, error=f"{res.errno}: {res.message}")
            return None
        return parse_recover(res)

    async def recover_once(self, decisions: Decisions | None = None) -> RecoveryPass:
        """One pass over every server: finish this proxy's prepared branches that no transaction in flight
        owns. A commit record is done once every server it names was scanned and holds none of its branches
        (or had them committed by this pass). `decisions`: another log's branches instead (Cluster mode: a
        dead proxy's, taken over; proxy.cluster.xa)."""
        report = RecoveryPass()
        xa_log = decisions or self.log
        if xa_log is None:
            return report
        async with self._recovery_lock:
            servers = self._servers()
            scans = await asyncio.gather(*(self._scan(src) for src, _n in servers.values()))
            left: dict[str, set[str]] = {}  # gtrid -> servers where a branch of it is still prepared
            scanned: set[str] = set()
            for (key, (source, _names)), branches in zip(servers.items(), scans, strict=True):
                if branches is None:
                    report.unreachable.append(key)
                    continue
                scanned.add(key)
                for branch in branches:
                    gtrid = self._ours(branch, xa_log)
                    if gtrid is None or self._busy(gtrid, xa_log):
                        if gtrid is not None:
                            left.setdefault(gtrid, set()).add(key)
                            report.waiting.append(branch.sql)
                        continue
                    commit = self._decision(gtrid, xa_log)
                    verb = "COMMIT" if commit else "ROLLBACK"
                    res = await source.admin_execute(f"XA {verb} {branch.sql}")
                    if res is None or isinstance(res, ERRPacket):
                        # NOTA: still attached to a connection the server has not seen close yet; or the
                        # server went away: next pass
                        left.setdefault(gtrid, set()).add(key)
                        report.retry.append(branch.sql)
                        detail = "unreachable" if res is None else f"{res.errno}: {res.message}"
                        log.info("xa_recovery_retry", xid=branch.sql, data_source=source.name, action=verb,
                                 error=detail)
                        continue
                    (report.committed if commit else report.rolled_back).append(branch.sql)
                    log.warning("xa_recovered", xid=branch.sql, data_source=source.name,
                                action="committed" if commit else "rolled back")
            for gtrid, record in list(xa_log.committed.items()):
                if self._busy(gtrid, xa_log) or gtrid in left:
                    continue
                if all(b.server in scanned for b in record.branches):
                    xa_log.forget(gtrid)
                    report.finished.append(gtrid)
        if decisions is None:
            self.passes += 1
            self.last_pass = report
        return report

    async def _recovery_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                # not wait_for, which on Python 3.11 swallows a cancel that comes as the event is set
                async with asyncio.timeout(self.recovery_interval):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.recover_once()
            except Exception:  # a bug must not end recovery for good
                log.exception("xa_recovery_failed")

    # -- SHOW TRANSACTION IN DOUBT ------------------------------------------------------------------------

    async def in_doubt_rows(self) -> list[tuple[object, ...]]:
        """Every prepared XA branch on the sharded databases' servers now, with what will become of it, and
        the commit decisions whose servers cannot be reached."""
        rows: list[tuple[object, ...]] = []
        servers = self._servers()
        scans = await asyncio.gather(*(self._scan(src) for src, _n in servers.values()))
        seen: set[tuple[str, str]] = set()
        unreachable = set()
        for (key, (_source, names)), branches in zip(servers.items(), scans, strict=True):
            if branches is None:
                unreachable.add(key)
                continue
            for branch in branches:
                gtrid = self._ours(branch)
                bqual = branch.bqual.decode("utf-8", "replace")
                data_source = ", ".join(names)
                record = self.log.committed.get(gtrid) if gtrid is not None and self.log is not None else None
                if record is not None:
                    data_source = next((b.data_source for b in record.branches if b.bqual == bqual), data_source)
                if gtrid is None:
                    decision, detail = "", "not this proxy's transaction (another instance or transaction " \
                                           "manager): left alone"
                elif self._busy(gtrid):
                    decision, detail = "IN FLIGHT", "its transaction is committing or rolling back now"
                elif self._decision(gtrid):
                    decision, detail = "COMMIT", "commit decision logged: recovery commits it"
                else:
                    decision, detail = "ROLLBACK", "no commit decision logged: recovery rolls it back"
                if gtrid is not None:
                    seen.add((gtrid, key))
                rows.append((branch.sql, branch.gtrid.decode("utf-8", "replace"), bqual, branch.format_id,
                             data_source, key, "PREPARED", decision, detail))
        if self.log is not None:
            for gtrid, record in self.log.committed.items():
                for b in record.branches:
                    if b.server in unreachable and (gtrid, b.server) not in seen:
                        rows.append((xid_sql(gtrid, b.bqual), gtrid, b.bqual, FORMAT_ID, b.data_source, b.server,
                                     "UNKNOWN", "COMMIT", "commit decision logged; the server does not answer: "
                                     "recovery commits the branch when it is back"))
        return rows


IN_DOUBT_COLUMNS = ["xid", "gtrid", "bqual", "format_id", "data_source", "server", "state", "decision", "detail"]
RULE_COLUMNS = ["default_type", "provider_type", "props"]


def rule_from_statement(default_type: str, provider: str | None, props: Mapping[str, Any] | None
                        ) -> tuple[str, str | None, Mapping[str, Any] | None]:
    """Validate ALTER TRANSACTION RULE's values (raises ValueError with the reason)."""
    kind = default_type.strip().upper()
    if kind == "BASE":
        raise ValueError("BASE (Seata) transactions are not supported by shardproxy; use LOCAL or XA")
    if kind not in ("LOCAL", "XA"):
        raise ValueError(f"unsupported transaction type `{default_type}`: use LOCAL or XA")
    if props is not None:
        interval = props.get("xa-recovery-interval-seconds")
        if interval is not None:
            try:
                if float(interval) <= 0:
                    raise ValueError
            except (TypeError, ValueError):
                raise ValueError(f"xa-recovery-interval-seconds: expected a positive number, got {interval!r}"
                                 ) from None
    return kind, provider, props


__all__ = [
    "FORMAT_ID", "IN_DOUBT_COLUMNS", "RULE_COLUMNS", "LogUnavailable", "PreparedBranch", "RecoveryPass",
    "TransactionManager", "XATransaction", "bqual_for", "parse_recover", "rule_from_statement", "server_key",
    "xid_sql",
]
