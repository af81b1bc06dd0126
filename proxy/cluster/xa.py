"""Cluster mode's XA decision log, in the registry, and taking over the in-doubt branches of a dead proxy.

Why not the local log (proxy.backends.xalog) in Cluster mode: a proxy killed between its commit decision
and the second phase leaves branches prepared on the data sources; with the decision on its own disk only
it can finish them, and only once it is restarted on the same machine. In the registry, any live proxy can.

Keys (relative to the namespace; proxy.cluster.registry lists them all):

    xa/owners/<owner>          {"node": instance id, "host": ...}: an XA owner exists (not bound to a lease)
    xa/alive/<owner>           bound to the lease of the node that made it: the owner is alive
    xa/log/<owner>/<gtrid>     the commit decision ({"branches": [[data source, server, bqual], ...]}), or
                               {"aborted": true} when a decision whose write failed was voided
    claims/xa/<owner>          the live node recovering a dead owner's branches (bound to that node's lease)

An owner is one proxy process under one lease: `sp-<owner>-1-<n>` is every gtrid it makes. It is
registered (both keys, one transaction) when the node joins, and again each time the node takes a new lease,
before any gtrid of it is handed out: a branch can never be prepared under an owner no one can find. When
the lease ends (the proxy died, or lost etcd for longer than timeToLiveSeconds) the owner is dead for good:
the proxy, if alive, registers a new owner for its next transactions.

Fencing: a decision is put in one etcd transaction that requires `xa/alive/<owner>`; a claim requires that
key to be gone. etcd orders the two, so a decision either precedes the claim (and the taker, which reads the
decisions after claiming, sees it) or fails (the proxy rolls the transaction back). A claim is one
transaction too, so exactly one live proxy takes an owner over; it runs the same recovery pass as the local
recovery at start-up (TransactionManager.recover_once with the owner's decisions: COMMIT where there is a
decision, ROLLBACK otherwise), until nothing of the owner is left prepared, then deletes the owner's keys.

A decision write whose answer is lost (etcd went away mid-request) is settled before the caller is
answered: an `aborted` marker is put if the decision is not there, else the decision stands. Only when etcd
stays unreachable for connectionTimeout is the outcome unknown; the transaction is then rolled back and the
marker is put once etcd is back (if etcd had applied the decision meanwhile, that is logged as an error).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from proxy.backends.xalog import Branch, CommitRecord, DecisionLog, LogUnavailable
from proxy.cluster import registry as reg
from proxy.cluster.etcd import (
    RegistryUnavailable,
    absent,
    delete_op,
    exists,
    put_op,
    range_op,
    txn_kvs,
)

if TYPE_CHECKING:
    from proxy.cluster.node import ClusterNode
    from proxy.server import ProxyServer

log = structlog.get_logger("shardproxy.cluster.xa")

ABORTED = reg.dumps({"aborted": True})
_FORGET_BATCH = 100  # deletes per etcd transaction (etcd takes at most 128 operations in one)


def _owner_of(gtrid: str) -> str:
    """`sp-<owner>-<boot>-<n>` -> owner."""
    return gtrid.removeprefix("sp-").split("-", 1)[0]


def _record(gtrid: str, value: str) -> CommitRecord | None:
    """A commit decision as the registry keeps it; None for an `aborted` marker (or a damaged value)."""
    try:
        doc = json.loads(value)
        if doc.get("aborted"):
            return None
        return CommitRecord(gtrid, tuple(Branch(str(d), str(s), str(q)) for d, s, q in doc["branches"]),
                            float(doc.get("logged_at", 0)))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _value(record: CommitRecord) -> str:
    return reg.dumps({"branches": [[b.data_source, b.server, b.bqual] for b in record.branches],
                      "logged_at": round(record.logged_at, 3)})


async def register_owner(node: ClusterNode) -> str:
    """A new XA owner under the node's current lease (at join, and after the lease was renewed); raises
    RegistryUnavailable. The node's transactions use it from the moment it is registered."""
    lease = node.lease
    current = getattr(node, "xa_owner", None)
    if current is not None and current[1] == lease:
        return str(current[0])
    owner = secrets.token_hex(6)
    info = reg.dumps({"node": node.instance_id, "host": node._node_info.get("host"),
                      "port": node._node_info.get("port"), "at": time.time()})
    await node.client.txn([], [put_op(node.key(reg.XA_OWNERS + owner), info),
                               put_op(node.key(reg.XA_ALIVE + owner), "1", lease=lease)])
    node.xa_owner = (owner, lease)
    if current is not None:
        log.warning("xa_owner_renewed", old=current[0], new=owner,
                    detail="the registry lease ended: the old owner's prepared branches are recovered by the proxy "
                           "that claims it; its transactions still running here roll back")
    return owner


class RegistryDecisionLog:
    """proxy.backends.xalog.DecisionLog's interface over the registry (TransactionManager.log_factory)."""

    def __init__(self, node: ClusterNode, directory: Path, *, instance_id: str | None = None) -> None:
        self.node = node
        self.directory = directory  # the local log's: only looked at, for a leftover from Standalone
        self.boot = 1  # an owner lives for one lease of one process: its sequence never restarts
        self.committed: dict[str, CommitRecord] = {}  # this owner's decisions not known done
        self.pending: set[str] = set()  # decisions being written: as good as in flight
        self.aborted: set[str] = set()
        self.failed: str | None = None  # never set: a failed write voids one decision, not the log
        self.writes = 0
        self._owner = ""
        self._forget: list[str] = []  # decision keys to delete
        self._unresolved: list[str] = []  # decision keys whose write's outcome is unknown: abort them
        self._flusher: asyncio.Task[None] | None = None

    # -- the owner -------------------------------------------------------------------------------------

    def open(self) -> None:
        if getattr(self.node, "xa_owner", None) is None:
            raise LogUnavailable("Cluster mode: this proxy has no XA owner in the registry yet")
        log.info("xa_log_open", registry=self.node.describe(), owner=self._owner)

    def close(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None

    @property
    def instance_id(self) -> str:
        """The node's current (registered) owner; its gtrids are `sp-<owner>-1-<n>`."""
        owner = str(self.node.xa_owner[0])
        if owner != self._owner:
            self._owner = owner
            self.committed = {}  # an old owner's decisions are its taker's now
        return owner

    def _key(self, area: str, owner: str, gtrid: str = "") -> str:
        return self.node.key(f"{area}{owner}" + (f"/{gtrid}" if gtrid else ""))

    # -- writing ---------------------------------------------------------------------------------------

    async def log_commit(self, record: CommitRecord) -> None:
        """The commit decision, in the registry under this owner, before any XA COMMIT. Raises
        LogUnavailable when it is not there (the caller rolls back)."""
        owner = self.instance_id
        if self.node.lease != self.node.xa_owner[1]:  # renewed, but its new owner not registered yet
            with contextlib.suppress(RegistryUnavailable):
                await register_owner(self.node)
        if _owner_of(record.gtrid) != owner:
            raise LogUnavailable("this proxy's registry lease ended while the transaction ran (etcd "
                                 f"{self.node.describe()} was out of reach for longer than timeToLiveSeconds), so "
                                 "another proxy may be recovering its branches: the commit decision was not taken")
        self.pending.add(record.gtrid)
        try:
            await asyncio.shield(self._decide(owner, record))
        finally:
            self.pending.discard(record.gtrid)
        self.committed[record.gtrid] = record
        self.writes += 1

    async def _decide(self, owner: str, record: CommitRecord) -> None:
        key = self._key(reg.XA_LOG, owner, record.gtrid)
        try:
            answer = await self.node.client.txn([exists(self._key(reg.XA_ALIVE, owner)), absent(key)],
                                                [put_op(key, _value(record))])
        except RegistryUnavailable as exc:
            # not sent (etcd down: connections refused), or refused by etcd: nothing to settle, fail at once
            outcome = await self._settle(key) if exc.maybe_applied else False
            if outcome is True:
                return
            self.aborted.add(record.gtrid)
            state = "voided" if outcome is False else "voided once etcd is back"
            raise LogUnavailable(f"the commit decision could not be kept in the cluster registry (etcd "
                                 f"{self.node.describe()}: {exc}); it is {state}. XA transactions that wrote to "
                                 "several data sources need the registry in Cluster mode") from None
        if not answer.get("succeeded"):
            self.aborted.add(record.gtrid)
            raise LogUnavailable("this proxy's registry lease ended (its XA owner is being taken over by another "
                                 "proxy): the commit decision was not taken")

    async def _settle(self, key: str) -> bool | None:
        """After a decision write whose answer was lost: True when the decision is there, False once an
        `aborted` marker keeps it from ever being; None when etcd does not answer (marked later)."""
        deadline = time.monotonic() + self.node.mode.timeout
        while True:
            try:
                answer = await self.node.client.txn([absent(key)], [put_op(key, ABORTED)], [range_op(key)])
            except RegistryUnavailable:
                if time.monotonic() > deadline:
                    self._unresolved.append(key)
                    self._kick()
                    return None
                await asyncio.sleep(0.2)
                continue
            if answer.get("succeeded"):
                return False
            kvs = txn_kvs(answer)
            return bool(kvs) and _record("", kvs[0].value) is not None

    def forget(self, gtrid: str) -> None:
        """Every branch committed: the decision is deleted from the registry (in the background)."""
        if self.committed.pop(gtrid, None) is not None:
            self._forget.append(self._key(reg.XA_LOG, _owner_of(gtrid), gtrid))
            self._kick()

    def _kick(self) -> None:
        if self._flusher is None or self._flusher.done():
            with contextlib.suppress(RuntimeError):
                self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        delay = 0.2
        while self._forget or self._unresolved:
            try:
                while self._unresolved:
                    key = self._unresolved[0]
                    answer = await self.node.client.txn([absent(key)], [put_op(key, ABORTED)], [range_op(key)])
                    if not answer.get("succeeded") and any(_record("", kv.value) for kv in txn_kvs(answer)):
                        log.error("xa_decision_applied_late", key=key,
                                  detail="etcd kept a commit decision this proxy reported as failed and rolled "
                                         "back: check the transaction's rows (SHOW TRANSACTION IN DOUBT)")
                    self._unresolved.pop(0)
                batch, self._forget = self._forget[:_FORGET_BATCH], self._forget[_FORGET_BATCH:]
                if batch:
                    try:
                        await self.node.client.txn([], [delete_op(k) for k in batch])
                    except BaseException:
                        self._forget[:0] = batch
                        raise
                delay = 0.2
            except RegistryUnavailable:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


class AdoptedDecisions:
    """A dead owner's decisions, as TransactionManager.recover_once reads them (read once, after the claim)."""

    def __init__(self, owner: str, committed: dict[str, CommitRecord], aborted: set[str]) -> None:
        self.instance_id = owner
        self.committed = committed
        self.aborted = aborted
        self.pending: set[str] = set()

    def forget(self, gtrid: str) -> None:
        self.committed.pop(gtrid, None)


class XATakeOver:
    """On every node: finds XA owners whose lease ended, claims one at a time, recovers its branches."""

    def __init__(self, node: ClusterNode, server: ProxyServer) -> None:
        self.node = node
        self.server = server
        self.running: dict[str, asyncio.Task[None]] = {}
        self.done: list[str] = []  # owners this node finished (for tests and logs)
        self._wake = asyncio.Event()

    def start(self) -> asyncio.Task[None]:
        self.node.node_left.append(self._node_left)
        return asyncio.get_running_loop().create_task(self._loop(), name="xa-takeover")

    async def _node_left(self, _instance: str) -> None:
        self._wake.set()

    @property
    def interval(self) -> float:
        return float(max(1, self.node.mode.ttl))

    async def _loop(self) -> None:
        try:
            while True:
                try:
                    await self.sweep()
                except RegistryUnavailable:
                    pass
                except Exception:
                    log.exception("xa_takeover_sweep_failed")
                with contextlib.suppress(TimeoutError):
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancel that comes as
                    # the event is set (a node leaving as this one stops), and the task never ended
                    async with asyncio.timeout(self.interval):
                        await self._wake.wait()
                self._wake.clear()
        finally:
            for task in self.running.values():
                task.cancel()

    async def sweep(self) -> list[str]:
        """Claim every dead owner no one has claimed; the owners claimed now."""
        owners, alive, claimed = [await self._names(area) for area in (reg.XA_OWNERS, reg.XA_ALIVE, reg.XA_CLAIMS)]
        taken = []
        for owner in sorted(owners - alive - claimed - set(self.running)):
            if not self.node.lease:
                break
            answer = await self.node.client.txn(
                [absent(self.node.key(reg.XA_ALIVE + owner)), absent(self.node.key(reg.XA_CLAIMS + owner))],
                [put_op(self.node.key(reg.XA_CLAIMS + owner), self.node.instance_id, lease=self.node.lease)])
            if answer.get("succeeded"):
                taken.append(owner)
                task = asyncio.get_running_loop().create_task(self._take_over(owner, self.node.lease))
                self.running[owner] = task
                task.add_done_callback(lambda _t, o=owner: self.running.pop(o, None))
        return taken

    async def _names(self, area: str) -> set[str]:
        prefix = self.node.key(area)
        kvs, _rev = await self.node.client.get_prefix(prefix)
        return {kv.key.removeprefix(prefix) for kv in kvs}

    async def _decisions(self, owner: str) -> AdoptedDecisions:
        prefix = self.node.key(f"{reg.XA_LOG}{owner}/")
        kvs, _rev = await self.node.client.get_prefix(prefix)
        committed: dict[str, CommitRecord] = {}
        aborted: set[str] = set()
        for kv in kvs:
            gtrid = kv.key.removeprefix(prefix)
            record = _record(gtrid, kv.value)
            if record is None:
                aborted.add(gtrid)
            else:
                committed[gtrid] = record
        return AdoptedDecisions(owner, committed, aborted)

    async def _take_over(self, owner: str, lease: int) -> None:
        started = time.monotonic()
        delay = 0.2
        decisions: AdoptedDecisions | None = None
        while self.node.lease == lease:  # a new lease: our claim is gone, another node may hold it now
            try:
                if decisions is None:
                    decisions = await self._decisions(owner)
                    log.warning("xa_owner_taken_over", owner=owner, decisions=len(decisions.committed),
                                detail="a proxy's lease ended: its prepared XA branches are finished here")
                report = await self.server.tm.recover_once(decisions)
                if not (report.unreachable or report.retry or report.waiting):
                    await self.node.client.txn([], [
                        delete_op(self.node.key(f"{reg.XA_LOG}{owner}/"), prefix=True),
                        delete_op(self.node.key(reg.XA_OWNERS + owner)),
                        delete_op(self.node.key(reg.XA_CLAIMS + owner))])
                    self.done.append(owner)
                    log.info("xa_owner_recovered", owner=owner, seconds=round(time.monotonic() - started, 3))
                    return
            except RegistryUnavailable as exc:
                log.info("xa_takeover_waits", owner=owner, error=str(exc))
            except Exception:
                log.exception("xa_takeover_failed", owner=owner)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.server.tm.recovery_interval)


async def finish_local_log(server: ProxyServer) -> bool:
    """A proxy moved from Standalone to Cluster mode may have left in-doubt branches whose decisions are in
    its local xa-log-dir: finish them from there (the same recovery pass, with that log), in the background,
    until nothing of it is left. False when there is no such log (or it cannot be opened: logged)."""
    tm = server.tm
    directory = tm.log_dir()
    if not (directory / "decisions.log").exists():
        return False
    local = DecisionLog(directory, instance_id=tm._instance_prop())
    try:
        local.open()
    except LogUnavailable as exc:
        log.error("xa_local_log_unusable", error=str(exc),
                  detail="branches prepared by this proxy in Standalone mode wait in XA RECOVER")
        return False
    try:
        delay = 0.2
        while True:
            report = await tm.recover_once(local)
            if not (report.unreachable or report.retry or report.waiting or local.committed):
                log.info("xa_local_log_finished", directory=str(directory))
                return True
            await asyncio.sleep(delay)
            delay = min(delay * 2, tm.recovery_interval)
    finally:
        local.close()


def install(node: ClusterNode, server: ProxyServer) -> None:
    """Cluster mode's XA: decisions in the registry (from the next time the log opens: at start-up)."""

    def factory(directory: Path, *, instance_id: str | None = None) -> Any:
        return RegistryDecisionLog(node, directory, instance_id=instance_id)

    server.tm.log_factory = factory


__all__ = ["AdoptedDecisions", "RegistryDecisionLog", "XATakeOver", "install"]
