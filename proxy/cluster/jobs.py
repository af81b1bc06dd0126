"""Migration jobs in Cluster mode: one proxy copies a job at a time, and another takes it over when it dies.

A job's state stays where Standalone keeps it (the `shardproxy` schema on the logical database's first data
source, proxy.migration.store: the position after every batch); the registry holds who runs it:

    jobs/owners/<job-id>    the instance id of the proxy copying the job, bound to that proxy's lease

MIGRATE TABLE claims the job before it saves it; a proxy starting up resumes only the jobs it can claim.
When an owner's lease ends (SIGKILL, or etcd out of its reach for longer than timeToLiveSeconds) the key
goes; every live proxy then reads the active jobs from the store and tries to claim each unowned one (one
etcd transaction: exactly one wins), and the winner resumes the copy from the saved position, as a
restarted standalone proxy does. A proxy whose own lease was renewed claims its running jobs again, and
stops the copy of any another proxy has taken meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import structlog

from proxy.cluster.etcd import RegistryUnavailable, absent, put_op, range_op, txn_kvs

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.cluster.node import ClusterNode
    from proxy.server import ProxyServer

log = structlog.get_logger("shardproxy.cluster.jobs")

JOB_OWNERS = "jobs/owners/"
CLAIMED, OURS, TAKEN = "claimed", "ours", "taken"


async def claim(node: ClusterNode, job_id: str) -> str:
    """CLAIMED (it was nobody's, it is ours now), OURS (already, under our current lease) or TAKEN.
    Raises RegistryUnavailable."""
    key = node.key(JOB_OWNERS + job_id)
    answer = await node.client.txn([absent(key)], [put_op(key, node.instance_id, lease=node.lease)],
                                   [range_op(key)])
    if answer.get("succeeded"):
        return CLAIMED
    kvs = txn_kvs(answer)
    if kvs and kvs[0].value == node.instance_id and kvs[0].lease == node.lease:
        return OURS
    return TAKEN


async def owner(node: ClusterNode, job_id: str) -> str | None:
    """The instance id of the proxy running the job, None when no live proxy does. Raises RegistryUnavailable."""
    kv = await node.client.get(node.key(JOB_OWNERS + job_id))
    return kv.value if kv is not None else None


async def release(node: ClusterNode, job_id: str) -> None:
    with contextlib.suppress(RegistryUnavailable):
        await node.client.delete(node.key(JOB_OWNERS + job_id))


def _windowed(db: LogicalDatabase) -> bool:
    sharding = db.rules.sharding
    return sharding is not None and any(t.window is not None for t in sharding.tables.values())


class MigrationTakeOver:
    """On every node: resumes the active jobs whose owner is gone (claimed first)."""

    def __init__(self, node: ClusterNode, server: ProxyServer) -> None:
        self.node = node
        self.server = server
        self.taken: list[str] = []  # job ids this node took over (for tests and logs)
        self._wake = asyncio.Event()

    def start(self) -> asyncio.Task[None]:
        self.node.node_left.append(self._node_left)
        self.node.lease_renewed.append(self._lease_renewed)
        return asyncio.get_running_loop().create_task(self._loop(), name="migration-takeover")

    async def _node_left(self, _instance: str) -> None:
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                # not wait_for, which on Python 3.11 swallows a cancel that comes as the event is set
                async with asyncio.timeout(float(max(1, self.node.mode.ttl))):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.sweep()
            except RegistryUnavailable:
                pass
            except Exception:
                log.exception("migration_takeover_sweep_failed")

    def _jobs(self):  # type: ignore[no-untyped-def]
        from proxy.session.distsql import migration

        return migration._jobs(self.server)

    async def sweep(self) -> list[str]:
        """Claim and resume every active job without a live owner; the ids resumed now."""
        from proxy.execution.write_gate import gate_for
        from proxy.migration import store
        from proxy.migration.job import Job, new_state

        resumed = []
        jobs = self._jobs()
        for db in list(self.server.databases_by_name.values()):
            if not _windowed(db):
                continue
            holder = Job(self.server, db, new_state(db.name, ""))
            try:
                async with holder.conn(db.rules.data_sources[0]) as conn:
                    states = await store.load(conn, db.name)
            except Exception as exc:  # the store unreadable now: the next sweep tries again
                log.info("migration_state_unreadable", database=db.name, error=str(exc))
                continue
            for state in states:
                local = jobs.get(state.id)
                if state.phase not in store.ACTIVE or (local is not None and local.task is not None
                                                       and not local.task.done()):
                    continue
                if await claim(self.node, state.id) != CLAIMED:
                    continue
                job = Job(self.server, db, state)  # the store's state: the position the dead owner saved
                jobs[state.id] = job
                gate_for(db.name, state.table)
                job.start()
                resumed.append(state.id)
                self.taken.append(state.id)
                log.warning("migration_taken_over", job=state.id, table=state.table, position=state.position,
                            copied=state.copied,
                            detail="its proxy's lease ended: the copy resumes here from the saved position")
        return resumed

    async def _lease_renewed(self) -> None:
        """Our lease ended and was renewed: our claims went with it. Claim our running jobs again; stop those
        another proxy took meanwhile (it resumed them from the store)."""
        for job in list(self._jobs().values()):
            if job.task is None or job.task.done():
                continue
            try:
                outcome = await claim(self.node, job.state.id)
            except RegistryUnavailable:
                continue
            if outcome == TAKEN:
                await job._stop_task()
                log.warning("migration_given_up", job=job.state.id,
                            detail="this proxy's lease ended and another proxy took the job over")


__all__ = ["CLAIMED", "JOB_OWNERS", "OURS", "TAKEN", "MigrationTakeOver", "claim", "owner", "release"]
