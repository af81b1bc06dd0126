"""proxy.cluster.etcd against a real etcd: what the registry relies on (prefix reads, compare-and-put,
leases that expire, a watch that sees puts and deletes, a clear RegistryUnavailable), and a proxy in
Cluster mode that cannot reach etcd refusing to start with the registry named."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from proxy.cluster.etcd import EtcdClient, RegistryUnavailable, WatchEvent
from proxy.sandbox import MariaDBServer
from tests.integration.etcd_server import EtcdServer, etcd
from tests.integration.harness import free_port, write_conf

pytestmark = pytest.mark.integration
__all__ = ["etcd"]
REPO = Path(__file__).resolve().parents[2]


def _client(server: EtcdServer) -> EtcdClient:
    host, port = server.endpoint.split(":")
    return EtcdClient([("127.0.0.1", free_port()), (host, int(port))], timeout=2)  # the first one is dead


async def test_kv_txn_lease_and_watch(etcd: EtcdServer) -> None:
    client = _client(etcd)
    await client.put("/t/a", "1")
    await client.put("/t/b", "2")
    await client.put("/u/c", "3")
    kvs, revision = await client.get_prefix("/t/")
    assert [(kv.key, kv.value) for kv in kvs] == [("/t/a", "1"), ("/t/b", "2")] and revision > 0
    assert await client.put_all_if_absent("/t/guard", [("/t/x", "x")]) is True
    assert await client.put_all_if_absent("/t/guard", [("/t/x", "y")]) is False
    assert (await client.get("/t/x")).value == "x"  # type: ignore[union-attr]
    kv = await client.get("/t/a")
    assert kv is not None and await client.put_if_revision("/t/a", "new", kv.mod_revision) is not None
    assert await client.put_if_revision("/t/a", "lost", kv.mod_revision) is None
    assert await client.put_if_revision("/t/fresh", "v", 0) is not None

    lease = await client.grant(1)
    await client.put("/t/leased", "v", lease=lease)
    assert await client.keepalive(lease) is True
    await asyncio.sleep(3.5)
    assert await client.get("/t/leased") is None and await client.keepalive(lease) is False

    seen: list[WatchEvent] = []

    async def watch() -> None:
        async for event in client.watch_prefix("/w/", revision + 1):
            seen.append(event)

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.3)
    await client.put("/w/k", "v1")
    await client.delete("/w/k")
    await client.put("/other", "no")
    for _ in range(100):
        if len(seen) >= 2:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    assert [(e.kind, e.key, e.value) for e in seen] == [("PUT", "/w/k", "v1"), ("DELETE", "/w/k", "")]
    await client.delete("/t/", prefix=True)
    assert (await client.get_prefix("/t/"))[0] == []


async def test_no_endpoint_answers() -> None:
    client = EtcdClient([("127.0.0.1", free_port())], timeout=1)
    with pytest.raises(RegistryUnavailable, match="no etcd endpoint answered"):
        await client.get("/x")


def test_a_cluster_proxy_without_its_registry_does_not_start(mariadb: MariaDBServer, tmp_path: Path) -> None:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS cl_nostart")
    conf = write_conf(tmp_path / "conf", {"db": {"ds_0": (mariadb, "cl_nostart")}})
    gdoc = yaml.safe_load((conf / "global.yaml").read_text())
    dead = f"127.0.0.1:{free_port()}"
    gdoc["mode"] = {"type": "Cluster", "repository": {"type": "etcd", "props": {"server-lists": dead,
                                                                               "connectionTimeout": 1}}}
    (conf / "global.yaml").write_text(yaml.safe_dump(gdoc))
    res = subprocess.run([sys.executable, "-m", "proxy", "serve", "--conf", str(conf), "--port", str(free_port())],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 3, res
    assert "cannot start" in res.stderr and dead in res.stderr and "Traceback" not in res.stderr
