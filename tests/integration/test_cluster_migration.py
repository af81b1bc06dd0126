"""Cluster mode's migration jobs: a job runs on one proxy (its claim in the registry, bound to the proxy's
lease); when that proxy is SIGKILLed mid-copy, another proxy of the cluster claims the job and resumes the
copy from the position the dead one saved, to the end; nothing is copied twice over, CHECK passes.

Proxy A is a `shardproxy serve` process, B runs in this process; the seed's four data sources on the two
session servers, 3000 rows (batches of 300 at 3000 rows/s: about a second of copying), lease 2 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from proxy.cluster.etcd import EtcdClient
from proxy.sandbox import MariaDBServer
from tests.integration.etcd_server import EtcdServer, etcd
from tests.integration.harness import free_port, start_proxy
from tests.integration.test_migration import HOMES, SOURCES, USERS, Seed

pytestmark = pytest.mark.integration
__all__ = ["etcd"]
REPO = Path(__file__).resolve().parents[2]
ROWS, BATCH = 3000, 300


def _cluster(conf: Path, etcd: EtcdServer, namespace: str) -> Path:
    gdoc = yaml.safe_load((conf / "global.yaml").read_text())
    gdoc["mode"] = {"type": "Cluster", "repository": {"type": "etcd", "props": {
        "namespace": namespace, "server-lists": etcd.endpoint, "timeToLiveSeconds": 2, "connectionTimeout": 2}}}
    (conf / "global.yaml").write_text(yaml.safe_dump(gdoc))
    return conf


def test_a_dead_proxys_migration_job_is_resumed_by_another(mariadb_shards: list[MariaDBServer], etcd: EtcdServer,
                                                           tmp_path: Path) -> None:
    seed = Seed(mariadb_shards, "cmg", ROWS, tmp_path / "a",
                {"migration-batch-rows": BATCH, "migration-rows-per-second": 3000})
    namespace = f"cmg_{uuid.uuid4().hex[:8]}"
    conf_a = _cluster(seed.conf, etcd, namespace)
    port = free_port()
    log = (tmp_path / "a.log").open("wb")
    child = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--conf", str(conf_a), "--port", str(port)],
                             cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    b = None
    try:
        def on_a(sql: str) -> list[tuple[Any, ...]]:
            with pymysql.connect(host="127.0.0.1", port=port, user="root", password="root", database="order_db",
                                 autocommit=True) as conn, conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())

        deadline = time.monotonic() + 30
        while True:
            try:
                on_a("SELECT 1")
                break
            except pymysql.err.OperationalError:
                assert time.monotonic() < deadline and child.poll() is None, (tmp_path / "a.log").read_text()[-2000:]
                time.sleep(0.2)
        seed.conf = _copy_conf(conf_a, tmp_path / "b")  # the same configuration; B takes the registry's
        b = seed.proxy = start_proxy(seed.conf)

        (job,), = on_a("MIGRATE TABLE t_order_info")
        while int(on_a(f"SHOW MIGRATION STATUS '{job}'")[0][4]) < 2 * BATCH:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert b.call(lambda: list(b.server.cluster.node.job_takeover.taken)) == []  # A runs it, B only watches
        for statement, says in ((f"CHECK MIGRATION '{job}'", "run by another proxy"),
                                (f"ROLLBACK MIGRATION '{job}'", "run by another proxy"),
                                ("MIGRATE TABLE t_order_info", "already copying")):
            with pytest.raises(pymysql.err.MySQLError) as refused:  # B knows the job, and that A runs it
                seed.dist(statement)
            assert refused.value.args[0] == 1105 and says in refused.value.args[1], refused.value.args
        os.kill(child.pid, signal.SIGKILL)  # mid-copy, possibly mid-batch
        child.wait(10)
        killed = time.monotonic()

        while not b.call(lambda: list(b.server.cluster.node.job_takeover.taken)):
            assert time.monotonic() - killed < 15, "no proxy took the job over"
            time.sleep(0.05)
        print(f"\njob taken over {time.monotonic() - killed:.2f}s after the kill")
        ready = seed.wait_phase(str(job), "ready", timeout=30)
        assert ROWS <= ready["rows_scanned"] <= ROWS + BATCH  # resumed from the saved position, not from 0
        seed.dist(f"CHECK MIGRATION '{job}'")
        assert all(r[7] == "true" for r in seed.dist(f"SHOW MIGRATION CHECK STATUS '{job}'"))
        moved = sum(1 for u in (USERS[i % len(USERS)] for i in range(ROWS)) if HOMES[u] != SOURCES[0])
        placement = seed.placement()
        assert sum(1 for nodes in placement.values() if len(nodes) == 2) == moved
        assert all(len(nodes) <= 2 for nodes in placement.values())
        seed.dist(f"COMMIT MIGRATION '{job}'")  # on B, which runs the job now
        assert seed.status(str(job))["phase"] == "committed"
        assert all(len(nodes) == 1 for nodes in seed.placement().values())  # the old copies are gone
        host, eport = etcd.endpoint.split(":")
        client = EtcdClient([(host, int(eport))])
        owners, _rev = asyncio.run(client.get_prefix(f"/{namespace}/jobs/owners/"))
        assert owners == []  # the claim went with the job
        doc = asyncio.run(client.get(f"/{namespace}/metadata/databases/order_db"))
        assert doc is not None and "oldDatabaseStrategy" not in doc.value  # the window's end, for every proxy
        assert "oldDatabaseStrategy" in (seed.conf / "database-order_db.yaml").read_text()  # conf/ not written
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        log.close()
        if b is not None:
            b.stop()


def _copy_conf(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for path in src.glob("*.yaml"):
        (dst / path.name).write_text(path.read_text())
    return dst
