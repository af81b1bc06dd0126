"""Cluster mode end to end: a single-node etcd, three proxies (A and C in this process, B a `shardproxy serve`
subprocess so that it can be SIGKILLed) and the two session MariaDB servers.

A seeds the registry from its conf/; B and C start from a conf/ that lacks A's rules and take the
registry's. A rule created on A routes on B and C within a second; a change that fails validation reaches
no one; SET DIST VARIABLE travels too; SHOW COMPUTE NODES lists three, then two after B is killed; KILL on A
ends a session on C; SHOW PROCESSLIST on A lists C's sessions; etcd stopped and started again mid-test
while clients read and write without an error, changes refused meanwhile and accepted after.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from proxy.sandbox import MariaDBServer
from tests.integration.etcd_server import EtcdServer, etcd
from tests.integration.harness import RunningProxy, free_port, start_proxy, write_conf

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PHYSICAL = ("cl_ds_0", "cl_ds_1")
RULES = textwrap.dedent("""\
    - !SHARDING
      tables:
        t_order:
          actualDataNodes: ds_${0..1}.t_order_${0..1}
          databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
          tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: t_inline}}
      shardingAlgorithms:
        db_inline: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}'}}
        t_inline: {type: INLINE, props: {algorithm-expression: 't_order_${order_id % 2}'}}
    """)
T_USER = ("t_user (STORAGE_UNITS(ds_0, ds_1), SHARDING_COLUMN=id, TYPE(NAME='hash_mod', "
          "PROPERTIES('sharding-count'='4')))")
WITHIN = 1.0  # seconds a change may take to reach the other proxies
__all__ = ["etcd"]  # the fixture


def cluster_conf(conf: Path, servers: list[MariaDBServer], etcd: EtcdServer, namespace: str,
                 rules: str | None) -> Path:
    write_conf(conf, {"cl_db": {f"ds_{i}": (servers[i], PHYSICAL[i]) for i in range(2)}},
               rules_yaml={"cl_db": rules} if rules else None)
    gdoc = yaml.safe_load((conf / "global.yaml").read_text())
    gdoc["mode"] = {"type": "Cluster", "repository": {"type": "etcd", "props": {
        "namespace": namespace, "server-lists": f"http://{etcd.endpoint}", "timeToLiveSeconds": 2,
        "connectionTimeout": 2}}}
    (conf / "global.yaml").write_text(yaml.safe_dump(gdoc))
    return conf


class SubprocessProxy:
    """`shardproxy serve` as its own process (SIGKILL: a proxy that dies without leaving the cluster)."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.host, self.port = "127.0.0.1", free_port()
        self._log = open(log, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--conf", str(conf), "--host",
                                      self.host, "--port", str(self.port)], cwd=REPO, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.query("SELECT 1")
                return
            except pymysql.err.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"proxy B did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)

    def connect(self, database: str | None = None) -> Any:
        return pymysql.connect(host=self.host, port=self.port, user="root", password="root", database=database,
                               autocommit=True, connect_timeout=5)

    def query(self, sql: str, database: str | None = None) -> list[tuple[Any, ...]]:
        with self.connect(database) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()


def wait_for(check: Callable[[], bool], timeout: float) -> float:
    """Seconds until check() is true; fails after timeout."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout}s")
        time.sleep(0.02)
    return time.monotonic() - start


def error_of(run: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as info:
        run()
    return int(info.value.args[0]), str(info.value.args[1])


def _preview(proxy: Any, sql: str) -> list[tuple[Any, ...]]:
    try:
        return proxy.query(f"PREVIEW {sql}", "cl_db")
    except pymysql.err.MySQLError:
        return []


def test_three_proxies_one_configuration(mariadb_shards: list[MariaDBServer], etcd: EtcdServer,
                                         tmp_path: Path) -> None:
    for server, physical in zip(mariadb_shards, PHYSICAL, strict=True):
        server.execute(f"DROP DATABASE IF EXISTS {physical}")
        server.execute(f"CREATE DATABASE {physical}")
    namespace = f"cl_{uuid.uuid4().hex[:8]}"
    conf_a = cluster_conf(tmp_path / "a", mariadb_shards, etcd, namespace, RULES)
    conf_b = cluster_conf(tmp_path / "b", mariadb_shards, etcd, namespace, None)  # stale: no rules
    conf_c = cluster_conf(tmp_path / "c", mariadb_shards, etcd, namespace, None)
    a = start_proxy(conf_a)
    b: SubprocessProxy | None = None
    c: RunningProxy | None = None
    try:
        b = SubprocessProxy(conf_b, tmp_path / "b.log")
        c = start_proxy(conf_c)
        proxies: list[Any] = [a, b, c]

        # later proxies took the registry's rules (their own conf/ has none)
        point = "SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2"
        for p in proxies:
            assert p.query(f"PREVIEW {point}", "cl_db") == [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = 1 "
                                                                      "AND order_id = 2")]
        nodes = a.query("SHOW COMPUTE NODES")
        assert len(nodes) == 3 and {n[5] for n in nodes} == {"Cluster"}
        assert {int(n[3]) for n in nodes} == {a.port, b.port, c.port}

        # a rule created on A routes on B and C within a second
        a.query(f"CREATE SHARDING TABLE RULE {T_USER}", "cl_db")
        sharded = "SELECT * FROM t_user WHERE id = 5"
        expected = a.query(f"PREVIEW {sharded}", "cl_db")
        assert len(expected) == 1 and expected[0][1].startswith("SELECT * FROM t_user_")
        for p in (b, c):
            assert wait_for(lambda p=p: _preview(p, sharded) == expected, 5) < WITHIN
        assert "t_user" not in (conf_a / "database-cl_db.yaml").read_text()  # the registry keeps it, not conf/

        # rows written through one proxy are read through another, where the backends have them
        a.query("CREATE TABLE t_user (id INT PRIMARY KEY, name VARCHAR(20))", "cl_db")
        # the DDL's metadata reaches C (white box: the columns C's kernel reads)
        assert wait_for(lambda: c.call(lambda: c.server.database("cl_db").metadata.columns("t_user")) is not None,
                        5) < WITHIN
        b.query("INSERT INTO t_user (id, name) VALUES (1, 'one'), (2, 'two'), (5, 'five')", "cl_db")
        assert sorted(c.query("SELECT id, name FROM t_user", "cl_db")) == [(1, "one"), (2, "two"), (5, "five")]
        stored = [r for s, db in zip(mariadb_shards, PHYSICAL, strict=True)
                  for (t,) in s.execute("SHOW TABLES LIKE 't_user_%'", db) for r in _rows(s, db, t)]
        assert sorted(stored) == [(1, "one"), (2, "two"), (5, "five")]

        # a storage unit registered on A opens on C (a pool there too), and leaves it when unregistered
        s0 = mariadb_shards[0]
        s0.execute("DROP DATABASE IF EXISTS cl_ds_2")
        s0.execute("CREATE DATABASE cl_ds_2")
        a.query(f"REGISTER STORAGE UNIT ds_2 (HOST='{s0.host}', PORT={s0.port}, DB='cl_ds_2', "
                f"USER='{s0.user}', PASSWORD='{s0.password}')", "cl_db")
        units = "SHOW STORAGE UNITS FROM cl_db"
        assert wait_for(lambda: "ds_2" in {r[0] for r in c.query(units)}, 5) < WITHIN
        assert c.call(lambda: ("cl_db", "ds_2") in c.server.sources)
        b.query("UNREGISTER STORAGE UNIT ds_2", "cl_db")  # made on B this time
        assert wait_for(lambda: "ds_2" not in {r[0] for r in c.query(units)} | {r[0] for r in a.query(units)},
                        5) < WITHIN

        # a change that fails validation is refused where it was made and reaches no one
        errno, message = error_of(lambda: a.query("CREATE SHARDING TABLE RULE t_x (DATANODES('ds_9.t_x'))", "cl_db"))
        assert errno == 1105 and "ds_9" in message
        time.sleep(0.3)
        for p in proxies:
            assert not any("t_x" in str(r) for r in p.query("SHOW SHARDING TABLE RULES", "cl_db"))

        # SET DIST VARIABLE travels too
        a.query("SET DIST VARIABLE proxy_merge_memory_rows = 54321")
        for p in (b, c):
            shown = "SHOW DIST VARIABLE WHERE NAME = proxy_merge_memory_rows"
            assert wait_for(lambda p=p, shown=shown: p.query(shown) == [("proxy_merge_memory_rows", "54321")],
                            5) < WITHIN

        # ALTER TRANSACTION RULE travels too (the XA decisions go to the registry: no local log)
        a.query("ALTER TRANSACTION RULE (DEFAULT='XA', TYPE(NAME='Narayana'))")
        for p in (b, c):
            assert wait_for(lambda p=p: p.query("SHOW TRANSACTION RULE")[0][0] == "XA", 5) < WITHIN
        assert c.call(lambda: type(c.server.tm.log).__name__) == "RegistryDecisionLog"
        assert not (conf_c / "xa-log" / "decisions.log").exists()
        b.query("INSERT INTO t_user (id, name) VALUES (11, 'xa1'), (12, 'xa2')", "cl_db")  # an XA write, via B
        assert sorted(c.query("SELECT id FROM t_user WHERE id > 10", "cl_db")) == [(11,), (12,)]
        errno, _message = error_of(lambda: a.query("ALTER TRANSACTION RULE (DEFAULT='XA', TYPE(NAME='Narayana', "
                                                   "PROPERTIES('xa-instance-id'='same')))"))
        assert errno == 1235 and c.query("SHOW TRANSACTION RULE")[0][0] == "XA"
        c.query("ALTER TRANSACTION RULE (DEFAULT='LOCAL')")
        for p in (a, b):
            assert wait_for(lambda p=p: p.query("SHOW TRANSACTION RULE")[0][0] == "LOCAL", 5) < WITHIN

        # SHOW PROCESSLIST on A lists C's sessions; KILL on A ends a session on C
        victim = c.connect("cl_db")
        victim_id = victim.thread_id()
        assert victim_id not in {p_id for p_id in a.call(lambda: list(a.server.sessions))}
        assert victim_id in {int(r[0]) for r in a.query("SHOW PROCESSLIST")}
        assert victim_id in {int(r[0]) for r in a.query("SELECT ID FROM information_schema.PROCESSLIST")}
        a.query(f"KILL {victim_id}")
        wait_for(lambda: victim_id not in c.call(lambda: list(c.server.sessions)), 5)
        with pytest.raises(pymysql.err.OperationalError):
            victim.cursor().execute("SELECT 1")
        errno, _message = error_of(lambda: a.query("KILL 999999"))
        assert errno == 1094
        with c.connect("cl_db") as conn:
            assert conn.thread_id() not in {conn_id for conn_id in a.call(lambda: list(a.server.sessions))}

        # losing a proxy: SHOW COMPUTE NODES lists two once its lease runs out
        b.kill()
        wait_for(lambda: len(a.query("SHOW COMPUTE NODES")) == 2, 10)
        assert {int(n[3]) for n in c.query("SHOW COMPUTE NODES")} == {a.port, c.port}

        # etcd stops and comes back: reads and writes never fail; changes are refused meanwhile
        failures: list[BaseException] = []
        stop = threading.Event()
        workers = [threading.Thread(target=_traffic, args=(p, k, stop, failures)) for k, p in enumerate((a, c))]
        for w in workers:
            w.start()
        time.sleep(0.5)
        etcd.stop()
        time.sleep(1.0)
        errno, message = error_of(lambda: a.query("SET DIST VARIABLE proxy_merge_memory_rows = 777"))
        assert errno == 1105 and "registry" in message and "nothing was changed" in message
        errno, message = error_of(lambda: c.query("CREATE SHARDING TABLE RULE t_later (STORAGE_UNITS(ds_0, ds_1), "
                                                  "SHARDING_COLUMN=id, TYPE(NAME='mod', "
                                                  "PROPERTIES('sharding-count'='2')))", "cl_db"))
        assert errno == 1105 and "registry" in message
        assert a.query("SHOW DIST VARIABLE WHERE NAME = proxy_merge_memory_rows")[0][1] == "54321"
        time.sleep(1.0)
        etcd.start()
        time.sleep(1.0)
        stop.set()
        for w in workers:
            w.join(30)
        assert failures == []
        # back: a change made now reaches the other proxy as before
        wait_for(lambda: _set_ok(c, "SET DIST VARIABLE proxy_merge_memory_rows = 777"), 10)
        wait_for(lambda: a.query("SHOW DIST VARIABLE WHERE NAME = proxy_merge_memory_rows")[0][1] == "777", 5)
        assert len(a.query("SHOW COMPUTE NODES")) == 2

        # a proxy started now takes the registry's configuration as changed, not its conf/
        conf_d = cluster_conf(tmp_path / "d", mariadb_shards, etcd, namespace, None)
        (conf_d / "database-cl_db.yaml").unlink()  # global.yaml only: the registry has the databases
        d = start_proxy(conf_d)
        try:
            assert d.query(f"PREVIEW {sharded}", "cl_db") == expected
            assert d.query("SHOW DIST VARIABLE WHERE NAME = proxy_merge_memory_rows") == [
                ("proxy_merge_memory_rows", "777")]
            assert len(d.query("SHOW COMPUTE NODES")) == 3
        finally:
            d.stop()
        wait_for(lambda: len(a.query("SHOW COMPUTE NODES")) == 2, 5)  # a proxy that stops leaves at once
    finally:
        for p in (c, b, a):
            if isinstance(p, SubprocessProxy):
                p.kill()
            elif p is not None:
                p.stop()


def _set_ok(proxy: Any, sql: str) -> bool:
    try:
        proxy.query(sql)
        return True
    except pymysql.err.MySQLError:
        return False


def _rows(server: MariaDBServer, database: str, table: str) -> list[tuple[Any, ...]]:
    return [(int(r[0]), str(r[1])) for r in server.execute(f"SELECT id, name FROM {table}", database)]


def _traffic(proxy: Any, k: int, stop: threading.Event, failures: list[BaseException]) -> None:
    """Writes and reads through one connection, then a new one, until told to stop."""
    n = 0
    try:
        while not stop.is_set():
            with proxy.connect("cl_db") as conn, conn.cursor() as cur:
                for _ in range(20):
                    n += 1
                    row_id = 1000 + k * 100000 + n
                    cur.execute("INSERT INTO t_user (id, name) VALUES (%s, %s)", (row_id, f"r{n}"))
                    cur.execute("SELECT name FROM t_user WHERE id = %s", (row_id,))
                    assert cur.fetchall() == ((f"r{n}",),)
                    time.sleep(0.01)
    except BaseException as exc:
        failures.append(exc)
