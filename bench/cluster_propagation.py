"""How long a DistSQL change takes to reach the other proxies of a cluster (docs/cluster.md).

    python bench/cluster_propagation.py                 # 3 proxies, 30 changes of each kind
    python bench/cluster_propagation.py --proxies 5 --rounds 100

Setup (all on this machine): a single-node etcd (own data directory, free ports), two sandbox MariaDB
servers, and N proxy subprocesses (`python -m proxy --log-level WARNING serve --conf DIR --port P`) in
Cluster mode on that etcd, each with its own conf/ (the first seeds the registry). Each round makes one
change on proxy 1 and polls every other proxy (each through its own open connection, every 2 ms) until it
shows the change:

* `SET DIST VARIABLE proxy_merge_memory_rows = <n>`, seen by `SHOW DIST VARIABLE WHERE NAME = ...`;
* `CREATE SHARDING TABLE RULE t_bench_<k> (...)` then `DROP SHARDING TABLE RULE`, seen by
  `SHOW SHARDING TABLE RULE t_bench_<k>` (a rule change swaps the kernel and reloads metadata there).

Measured: from the client's OK on proxy 1 to the last other proxy showing it (ms: p50 / p95 / max), and the
statement's own time on proxy 1 (it includes the registry write). The polling clients add load of their own.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pymysql
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from proxy.sandbox import start_servers  # noqa: E402
from tests.integration.etcd_server import EtcdServer  # noqa: E402
from tests.integration.harness import free_port, write_conf  # noqa: E402

RULE = ("t_bench_{k} (STORAGE_UNITS(ds_0, ds_1), SHARDING_COLUMN=id, TYPE(NAME='hash_mod', "
        "PROPERTIES('sharding-count'='4')))")


def _conf(conf: Path, servers: list[Any], etcd: EtcdServer) -> Path:
    write_conf(conf, {"bench_db": {f"ds_{i}": (servers[i], f"bench_cl_{i}") for i in range(2)}},
               props={"proxy-default-port": 3307})
    gdoc = yaml.safe_load((conf / "global.yaml").read_text())
    gdoc["mode"] = {"type": "Cluster", "repository": {"type": "etcd", "props": {
        "namespace": "bench", "server-lists": etcd.endpoint, "timeToLiveSeconds": 10, "connectionTimeout": 5}}}
    (conf / "global.yaml").write_text(yaml.safe_dump(gdoc))
    return conf


def _connect(port: int) -> Any:
    deadline = time.monotonic() + 60
    while True:
        try:
            return pymysql.connect(host="127.0.0.1", port=port, user="root", password="root", database="bench_db",
                                   autocommit=True)
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _query(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def _until(conns: list[Any], sql: str, check: Any) -> float:
    pending = list(conns)
    while pending:
        pending = [c for c in pending if not check(_query(c, sql))]
        if pending:
            time.sleep(0.002)
    return time.monotonic()


def _summary(name: str, reach: list[float], own: list[float]) -> str:
    q = statistics.quantiles(reach, n=20) if len(reach) >= 2 else reach * 19
    return (f"{name:<34} reach p50 {statistics.median(reach):7.1f}  p95 {q[18]:7.1f}  max {max(reach):7.1f}   "
            f"statement p50 {statistics.median(own):6.1f} ms   (n={len(reach)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proxies", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    etcd = EtcdServer(work / "etcd").start()
    servers = start_servers(2)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, server in enumerate(servers):
            server.execute(f"CREATE DATABASE IF NOT EXISTS bench_cl_{i}")
        ports = []
        for n in range(args.proxies):
            port = free_port()
            conf = _conf(work / f"p{n}", servers, etcd)
            log = open(work / f"p{n}.log", "wb")
            procs.append(subprocess.Popen([sys.executable, "-m", "proxy", "--log-level", "WARNING", "serve", "--conf",
                                           str(conf), "--port", str(port)], cwd=REPO, stdout=log, stderr=log))
            ports.append(port)
            _connect(port).close()  # one at a time: the first seeds the registry
        first, *others = [_connect(p) for p in ports]
        variable: tuple[list[float], list[float]] = ([], [])
        rules: tuple[list[float], list[float]] = ([], [])
        for r in range(args.rounds):
            value = str(100000 + r)
            t0 = time.monotonic()
            _query(first, f"SET DIST VARIABLE proxy_merge_memory_rows = {value}")
            t1 = time.monotonic()
            done = _until(others, "SHOW DIST VARIABLE WHERE NAME = proxy_merge_memory_rows",
                          lambda rows, v=value: rows == [("proxy_merge_memory_rows", v)])
            variable[0].append((done - t1) * 1000)
            variable[1].append((t1 - t0) * 1000)
            for create in (True, False):
                t0 = time.monotonic()
                _query(first, f"CREATE SHARDING TABLE RULE {RULE.format(k=r)}" if create
                       else f"DROP SHARDING TABLE RULE t_bench_{r}")
                t1 = time.monotonic()
                done = _until(others, "SHOW SHARDING TABLE RULES FROM bench_db",
                              lambda rows, c=create, k=r: any(row[0] == f"t_bench_{k}" for row in rows) == c)
                rules[0].append((done - t1) * 1000)
                rules[1].append((t1 - t0) * 1000)
        print(f"{args.proxies} proxies, {args.rounds} rounds; ms from proxy 1's OK to the last other proxy seeing it")
        print(_summary("SET DIST VARIABLE", *variable))
        print(_summary("CREATE / DROP SHARDING TABLE RULE", *rules))
        for c in (first, *others):
            c.close()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(15)
        for server in servers:
            server.cleanup()
        etcd.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
