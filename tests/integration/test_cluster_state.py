"""The cluster's hooks for long-running work (migration jobs, the XA log) against a real etcd, with two
compute nodes and no proxy around them: state that outlives its node, a node leaving seen by the other,
and exactly one taker for what the node that left kept. Also: the two hold different connection-id slots."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from proxy.cluster import registry as reg
from proxy.cluster.mode import ClusterMode
from proxy.cluster.node import ClusterNode
from proxy.config import load_config
from routing.errors import ConfigError
from tests.integration.etcd_server import EtcdServer, etcd
from tests.integration.harness import write_conf

pytestmark = pytest.mark.integration
__all__ = ["etcd"]


def _config(tmp_path: Path, etcd: EtcdServer, namespace: str, name: str):  # type: ignore[no-untyped-def]
    fake = SimpleNamespace(host="127.0.0.1", port=1, user="u", password="p")  # never connected to here
    config = load_config(write_conf(tmp_path / name, {"db": {"ds_0": (fake, "x")}}))
    host, port = etcd.endpoint.split(":")
    return dataclasses.replace(config, mode=ClusterMode(namespace, ((host, int(port)),), ttl=2, timeout=2))


async def test_state_outlives_its_node_and_has_one_taker(etcd: EtcdServer, tmp_path: Path) -> None:
    namespace = f"st_{uuid.uuid4().hex[:8]}"
    first = await ClusterNode.join(_config(tmp_path, etcd, namespace, "one"))
    second = await ClusterNode.join(_config(tmp_path, etcd, namespace, "two"))
    try:
        assert (first.slot, second.slot) == (0, 1)
        await first.start("127.0.0.1", 1, "t")
        await second.start("127.0.0.1", 2, "t")
        assert [n["instance_id"] for n in await second.compute_nodes()] == [first.instance_id, second.instance_id]
        left: list[str] = []

        async def seen(instance: str) -> None:
            left.append(instance)

        second.node_left.append(seen)
        await first.put_state(reg.MIGRATION_JOBS, "job-1", {"position": 42})
        await first.put_state(reg.XA_LOG, "sp-x-1", {"branches": ["ds_0", "ds_1"]})
        assert (await second.states(reg.MIGRATION_JOBS)) == {first.instance_id: {"job-1": {"position": 42}}}

        await first.close()  # revokes its lease: it leaves the list at once, its states stay
        for _ in range(100):
            if left:
                break
            await asyncio.sleep(0.02)
        assert left == [first.instance_id]
        assert [n["instance_id"] for n in await second.compute_nodes()] == [second.instance_id]
        assert await second.take_over(reg.MIGRATION_JOBS, first.instance_id) == {"job-1": {"position": 42}}
        assert await second.take_over(reg.MIGRATION_JOBS, first.instance_id) is None  # claimed once
        assert await second.take_over(reg.XA_LOG, first.instance_id) == {"sp-x-1": {"branches": ["ds_0", "ds_1"]}}
        await second.delete_state(reg.MIGRATION_JOBS, "job-1", owner=first.instance_id)
        assert await second.states(reg.MIGRATION_JOBS) == {}
    finally:
        await first.close()
        await second.close()


async def test_a_node_whose_lease_ended_registers_again(etcd: EtcdServer, tmp_path: Path) -> None:
    """As after an etcd outage longer than timeToLiveSeconds: the lease is gone, the keep-alive sees it and the
    node takes a new one, listed again under the same connection-id slot."""
    from proxy.cluster import xa

    node = await ClusterNode.join(_config(tmp_path, etcd, f"ls_{uuid.uuid4().hex[:8]}", "one"))
    try:
        old_owner = await xa.register_owner(node)
        node.lease_renewed.append(lambda: xa.register_owner(node))
        await node.start("127.0.0.1", 1, "t")
        slot, old_lease = node.slot, node.lease
        await node.client.revoke(old_lease)
        assert await node.compute_nodes() == []
        for _ in range(200):
            if await node.compute_nodes():
                break
            await asyncio.sleep(0.02)
        assert [n["instance_id"] for n in await node.compute_nodes()] == [node.instance_id]
        assert node.lease != old_lease and node.slot == slot
        for _ in range(100):  # and a new XA owner under the new lease (the old one is dead, for a taker)
            if node.xa_owner is not None and node.xa_owner[1] == node.lease:
                break
            await asyncio.sleep(0.02)
        assert node.xa_owner is not None and node.xa_owner[0] != old_owner and node.xa_owner[1] == node.lease
        assert (await node.client.get(node.key(f"{reg.SLOTS}{slot}"))).value == node.instance_id  # type: ignore[union-attr]
    finally:
        await node.close()


async def test_a_first_proxy_without_databases_seeds_nothing(etcd: EtcdServer, tmp_path: Path) -> None:
    config = _config(tmp_path, etcd, f"nd_{uuid.uuid4().hex[:8]}", "one")
    for path in config.conf_dir.glob("database-*.yaml"):
        path.unlink()
    gdoc = yaml.safe_load((config.conf_dir / "global.yaml").read_text())
    gdoc["mode"] = {"type": "Cluster", "repository": {"type": "etcd", "props": {
        "namespace": config.mode.namespace, "server-lists": etcd.endpoint, "connectionTimeout": 2}}}
    (config.conf_dir / "global.yaml").write_text(yaml.safe_dump(gdoc))
    empty = load_config(config.conf_dir)  # Cluster mode: conf/ may hold global.yaml only
    assert empty.databases == {} and empty.mode is not None
    with pytest.raises(ConfigError, match="nor the cluster registry"):
        await ClusterNode.join(empty)
    node = ClusterNode(config.mode, config)  # type: ignore[arg-type]
    assert (await node.client.get_prefix(node.prefix))[0] == []  # not seeded: a full conf/ may still seed it


class _FakeTM:
    """What XATakeOver asks of the transaction manager: a recovery pass with the adopted decisions."""

    recovery_interval = 0.2

    def __init__(self) -> None:
        self.passes: list[dict[str, object]] = []

    async def recover_once(self, decisions):  # type: ignore[no-untyped-def]
        from proxy.backends.xa import RecoveryPass

        self.passes.append({"owner": decisions.instance_id, "committed": sorted(decisions.committed)})
        return RecoveryPass()


async def test_xa_decisions_are_fenced_by_the_owners_lease_and_taken_over_once(etcd: EtcdServer,
                                                                              tmp_path: Path) -> None:
    """A decision is kept only while its owner's lease lives; once it ended, exactly one of two live nodes
    claims the owner, reads its decisions, and deletes its keys when its recovery pass left nothing."""
    from proxy.backends.xalog import Branch, CommitRecord, LogUnavailable
    from proxy.cluster import xa

    namespace = f"xa_{uuid.uuid4().hex[:8]}"
    nodes = [await ClusterNode.join(_config(tmp_path, etcd, namespace, name)) for name in ("one", "two", "three")]
    try:
        for node in nodes:
            await xa.register_owner(node)
        dead, *alive = nodes
        decisions = xa.RegistryDecisionLog(dead, tmp_path)
        decisions.open()
        owner = decisions.instance_id
        branches = (Branch("ds_0", "h:1", "ds_0"), Branch("ds_1", "h:2", "ds_1"))
        await decisions.log_commit(CommitRecord(f"sp-{owner}-1-1", branches, 1.0))
        assert set(decisions.committed) == {f"sp-{owner}-1-1"}

        await dead.client.revoke(dead.lease)  # as when it is SIGKILLed and its lease runs out
        with pytest.raises(LogUnavailable, match="lease ended"):
            await decisions.log_commit(CommitRecord(f"sp-{owner}-1-2", branches, 2.0))

        tms = [_FakeTM(), _FakeTM()]
        takers = [xa.XATakeOver(node, SimpleNamespace(tm=tm)) for node, tm in zip(alive, tms, strict=True)]
        claimed = await asyncio.gather(*(t.sweep() for t in takers))
        assert sorted(map(len, claimed)) == [0, 1]  # the dead owner, once; the live ones are nobody's
        assert [o for c in claimed for o in c] == [owner]
        for _ in range(100):
            if any(t.done for t in takers):
                break
            await asyncio.sleep(0.02)
        assert [p for tm in tms for p in tm.passes] == [{"owner": owner, "committed": [f"sp-{owner}-1-1"]}]
        kvs, _rev = await alive[0].client.get_prefix(alive[0].key("xa/"))
        assert not any(owner in kv.key for kv in kvs)  # owner, alive, decisions: all gone
        assert all(o.xa_owner and o.xa_owner[0] in {kv.key.rsplit("/", 1)[1] for kv in kvs} for o in alive)
    finally:
        for node in nodes:
            with contextlib.suppress(Exception):
                await node.close()
