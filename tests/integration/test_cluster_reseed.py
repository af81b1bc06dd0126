"""etcd comes back empty (its data directory lost): the running proxies seed it again from their current
configuration (a rule created by DistSQL since the start included, which no conf/ holds), register again,
and go on as a cluster: a proxy started then takes that configuration, a change made on one reaches the
other. Two proxies in this process, the two session MariaDB servers, lease 2 s."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.etcd_server import EtcdServer, etcd
from tests.integration.harness import start_proxy
from tests.integration.test_cluster import PHYSICAL, RULES, T_USER, _preview, cluster_conf, wait_for

pytestmark = pytest.mark.integration
__all__ = ["etcd"]


def test_an_emptied_registry_is_seeded_again_from_the_running_proxies(
        mariadb_shards: list[MariaDBServer], etcd: EtcdServer, tmp_path: Path) -> None:
    for server, physical in zip(mariadb_shards, PHYSICAL, strict=True):
        server.execute(f"DROP DATABASE IF EXISTS {physical}")
        server.execute(f"CREATE DATABASE {physical}")
    namespace = f"rs_{uuid.uuid4().hex[:8]}"
    a = start_proxy(cluster_conf(tmp_path / "a", mariadb_shards, etcd, namespace, RULES))
    b = start_proxy(cluster_conf(tmp_path / "b", mariadb_shards, etcd, namespace, None))
    c = None
    try:
        a.query(f"CREATE SHARDING TABLE RULE {T_USER}", "cl_db")  # in the registry and the proxies only
        sharded = "SELECT * FROM t_user WHERE id = 5"
        expected = a.query(f"PREVIEW {sharded}", "cl_db")
        wait_for(lambda: _preview(b, sharded) == expected, 5)
        a.query("SET DIST VARIABLE proxy_merge_memory_rows = 4242")
        wait_for(lambda: b.query("SHOW DIST VARIABLE WHERE NAME = proxy_merge_memory_rows")[0][1] == "4242", 5)

        etcd.stop()
        shutil.rmtree(etcd.data_dir)  # the registry's data is lost
        etcd.start()
        assert a.query(f"PREVIEW {sharded}", "cl_db") == expected  # serving on, meanwhile and after
        started = time.monotonic()
        wait_for(lambda: len(a.query("SHOW COMPUTE NODES")) == 2, 15)
        print(f"\nre-seeded and both proxies listed again in {time.monotonic() - started:.2f}s")

        conf_c = cluster_conf(tmp_path / "c", mariadb_shards, etcd, namespace, None)
        (conf_c / "database-cl_db.yaml").unlink()  # global.yaml only: all it has is the registry's
        c = start_proxy(conf_c)
        assert c.query(f"PREVIEW {sharded}", "cl_db") == expected  # the DistSQL rule, which no conf/ holds
        assert c.query("SHOW DIST VARIABLE WHERE NAME = proxy_merge_memory_rows") == [
            ("proxy_merge_memory_rows", "4242")]

        # changes flow again, with the new etcd's revisions
        b.query("CREATE SHARDING TABLE RULE t_after (STORAGE_UNITS(ds_0, ds_1), SHARDING_COLUMN=id, "
                "TYPE(NAME='hash_mod', PROPERTIES('sharding-count'='2')))", "cl_db")
        later = "SELECT * FROM t_after WHERE id = 3"
        for p in (a, c):
            wait_for(lambda p=p: len(_preview(p, later)) == 1 and "t_after_" in _preview(p, later)[0][1], 5)
        a.query("SET DIST VARIABLE proxy_merge_memory_rows = 4343")
        wait_for(lambda: c.query("SHOW DIST VARIABLE WHERE NAME = proxy_merge_memory_rows")[0][1] == "4343", 5)
        assert len(b.query("SHOW COMPUTE NODES")) == 3
    finally:
        for p in (c, b, a):
            if p is not None:
                p.stop()
