"""SIGTERM drains, SIGHUP reloads: `shardproxy serve` in its own process, sent real signals.

Before: SIGTERM ended the process at once (a running statement's client got 2013) and SIGHUP ended it too.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from proxy.sandbox import MariaDBServer
from tests.integration.harness import free_port, write_conf

REPO = Path(__file__).resolve().parents[2]
RULES = """\
- !SHARDING
  tables:
    t_d:
      actualDataNodes: ds_${0..1}.t_d
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: m}}
  shardingAlgorithms:
    m: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""
T_E_RULE = """\
    t_e:
      actualDataNodes: ds_${0..1}.t_e
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: m}}
"""
_NAMES = itertools.count()


class Served:
    """`python -m proxy serve` on free ports, JSON logs in a file."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.conf = conf
        self.port = free_port()
        doc = yaml.safe_load((conf / "global.yaml").read_text())
        self.metrics_port = int(doc["props"]["proxy-metrics-port"])
        self.log_path = log
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--log-json", "serve", "--conf", str(conf), "--port", str(self.port)],
            cwd=REPO,
            stdout=self._log,
            stderr=self._log,
        )
        deadline = time.monotonic() + 60
        while not self.events("accepting_connections"):
            assert self.proc.poll() is None, f"the proxy ended: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.1)

    def connect(self, database: str | None = None, **kw: Any) -> pymysql.connections.Connection[Any]:
        kw.setdefault("autocommit", True)
        kw.setdefault("read_timeout", 30)
        return pymysql.connect(host="127.0.0.1", port=self.port, user="root", password="root", database=database, **kw)

    def http(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=10) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text().splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("event") == name:
                    out.append(event)
        return out

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def wait_for(check: Callable[[], Any], what: str, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.fixture
def env(mariadb_shards: list[MariaDBServer], tmp_path: Path) -> Iterator[Callable[..., Served]]:
    made: list[Served] = []
    n = next(_NAMES)
    physical = [f"dr{n}_{i}" for i in range(2)]
    for server, db in zip(mariadb_shards, physical, strict=True):
        server.execute(f"CREATE DATABASE {db}")
        server.execute(f"CREATE TABLE {db}.t_d (id INT PRIMARY KEY, v INT)")
        server.execute(f"CREATE TABLE {db}.t_e (id INT PRIMARY KEY, v INT)")

    def start(grace: float = 10, **props: Any) -> Served:
        conf = write_conf(
            tmp_path / f"conf{len(made)}",
            {
                "sharded": {f"ds_{i}": (s, db) for i, (s, db) in enumerate(zip(mariadb_shards, physical, strict=True))},
                "plain": {"ds_p": (mariadb_shards[0], physical[0])},
            },
            rules_yaml={"sharded": RULES},
            props={"proxy-metrics-port": free_port(), "proxy-shutdown-grace-seconds": grace, **props},
        )
        served = Served(conf, tmp_path / f"proxy{len(made)}.log")
        made.append(served)
        return served

    start.servers = mariadb_shards  # type: ignore[attr-defined]
    start.physical = physical  # type: ignore[attr-defined]
    yield start
    for served in made:
        served.close()
    for server, db in zip(mariadb_shards, physical, strict=True):
        server.execute(f"DROP DATABASE IF EXISTS {db}")


def _refused(served: Served) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", served.port)) != 0


def _gone(conn: pymysql.connections.Connection[Any]) -> bool:
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
    except pymysql.err.OperationalError:
        return True
    return False


@pytest.mark.parametrize("database", ["sharded", "plain"])
def test_sigterm_lets_an_open_transaction_commit_and_refuses_new_clients(env: Any, database: str) -> None:
    served = env(grace=10)
    assert served.http("/readyz") == 200
    in_txn = served.connect(database)
    idle = served.connect(database)
    running = served.connect(database)
    with in_txn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t_d (id, v) VALUES (1, 1)")
    answer: list[Any] = []

    def slow() -> None:
        with running.cursor() as cur:
            cur.execute("SELECT SLEEP(1.5), 7")
            answer.extend(cur.fetchall())

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.3)  # the SLEEP is running
    served.signal(signal.SIGTERM)
    wait_for(lambda: served.http("/readyz") == 503, "/readyz did not answer 503 during the drain")
    assert _refused(served), "a new connection was accepted during the drain"
    wait_for(lambda: _gone(idle), "the idle session was not closed")
    with in_txn.cursor() as cur:  # the open transaction goes on and commits
        cur.execute("INSERT INTO t_d (id, v) VALUES (2, 2)")
        cur.execute("COMMIT")
    thread.join(10)
    assert answer == [(0, 7)]  # the running statement answered
    assert served.proc.wait(10) == 0  # every session done: the stop comes before the grace period ends
    drained = served.events("drained")
    assert drained, served.log_path.read_text()[-3000:]
    rows = sorted(
        r
        for server, db in zip(env.servers, env.physical, strict=True)
        for r in server.execute(f"SELECT id, v FROM {db}.t_d")
    )
    assert rows == [(1, 1), (2, 2)]
    for server, db in zip(env.servers, env.physical, strict=True):
        server.execute(f"DELETE FROM {db}.t_d")


def test_the_grace_period_ends_and_an_unfinished_transaction_rolls_back(env: Any) -> None:
    served = env(grace=1)
    conn = served.connect("sharded")
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t_d (id, v) VALUES (3, 3)")
    started = time.monotonic()
    served.signal(signal.SIGTERM)
    assert served.proc.wait(15) == 0
    assert 0.9 <= time.monotonic() - started < 10
    assert served.events("drain_grace_over")
    assert _gone(conn)
    assert [
        r
        for server, db in zip(env.servers, env.physical, strict=True)
        for r in server.execute(f"SELECT id FROM {db}.t_d")
    ] == []


def _database_file(served: Served) -> Path:
    return served.conf / "database-sharded.yaml"


def _rules(conn: pymysql.connections.Connection[Any]) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SHOW SHARDING TABLE RULES")
        return sorted(r[0] for r in cur.fetchall())


def _variable(conn: pymysql.connections.Connection[Any], name: str) -> str:
    with conn.cursor() as cur:
        cur.execute(f"SHOW DIST VARIABLE WHERE NAME = {name}")
        return str(cur.fetchall()[0][1])


def test_sighup_reloads_rules_props_and_databases_without_dropping_sessions(env: Any) -> None:
    served = env(grace=5)
    session = served.connect("sharded")
    with session.cursor() as cur:
        cur.execute("SET @kept = 42")
    path = _database_file(served)
    path.write_text(path.read_text().replace("  tables:\n", "  tables:\n" + T_E_RULE, 1))
    global_yaml = served.conf / "global.yaml"
    doc = yaml.safe_load(global_yaml.read_text())
    doc["props"]["proxy-frontend-max-connections"] = 50  # LIVE: applied
    doc["props"]["proxy-backlog"] = 77  # read at start-up: named as needing a restart
    global_yaml.write_text(yaml.safe_dump(doc))
    served.signal(signal.SIGHUP)
    wait_for(lambda: served.events("config_reloaded"), "no config_reloaded event")
    assert _rules(session) == ["t_d", "t_e"]
    assert _variable(session, "proxy_frontend_max_connections") == "50"
    restart = served.events("config_reload_needs_restart")
    assert restart and "props.proxy-backlog" in restart[0]["what"]
    with session.cursor() as cur:  # the same session, its state kept
        cur.execute("SELECT @kept")
        assert cur.fetchall() == ((42,),)
        cur.execute("INSERT INTO t_e (id, v) VALUES (5, 5)")
        cur.execute("SELECT id FROM t_e")
        assert cur.fetchall() == ((5,),)
        cur.execute("DELETE FROM t_e")

    # a new logical database
    new_file = served.conf / "database-added.yaml"
    text = (served.conf / "database-plain.yaml").read_text().replace("databaseName: plain", "databaseName: added")
    new_file.write_text(text)
    served.signal(signal.SIGHUP)
    wait_for(lambda: len(served.events("config_reloaded")) == 2, "no second config_reloaded event")
    with session.cursor() as cur:
        cur.execute("USE added")
        cur.execute("SELECT DATABASE()")
        assert cur.fetchall() == (("added",),)
        cur.execute("USE sharded")
    assert served.proc.poll() is None


@pytest.mark.parametrize(
    ("file", "breakage", "error"),
    [
        ("global.yaml", lambda t: t + "\nprops: {no-such-prop: 1}\n", "no-such-prop"),
        ("database-sharded.yaml", lambda t: t.replace("shardingColumn: id", "shardingColumn: [id"), "database-sharded"),
        ("database-sharded.yaml", lambda t: t + "- !COMPATIBLE_ENCRYPT\n  tables: {}\n", "COMPATIBLE_ENCRYPT"),
    ],
)
def test_an_invalid_configuration_changes_nothing(env: Any, file: str, breakage: Any, error: str) -> None:
    served = env(grace=5)
    session = served.connect("sharded")
    path = served.conf / file
    before = path.read_text()
    path.write_text(breakage(before))
    served.signal(signal.SIGHUP)
    failed = wait_for(lambda: served.events("config_reload_failed"), "no config_reload_failed event")
    assert error in failed[0]["error"]
    assert served.proc.poll() is None  # SIGHUP ended the process before
    assert _rules(session) == ["t_d"]
    assert not served.events("config_reloaded")
    path.write_text(before)
