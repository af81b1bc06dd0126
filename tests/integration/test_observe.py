"""Issue 37 items 1-3 against real servers: query digests (SHOW / RESET QUERY DIGESTS, the Prometheus export), the
slow-query log and the audit log, driven through the proxy with PyMySQL and a prepared-statement client."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families

from proxy.observe.audit import config_reload
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """\
- !SHARDING
  tables:
    t_dg:
      actualDataNodes: ds_${0..1}.t_dg
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: m}}
  shardingAlgorithms:
    m: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""
SECRET = "Sekr1t-xyz"
USERS = ({"user": "root@%", "password": "root", "admin": True}, {"user": "app@%", "password": "app"})


@pytest.fixture(scope="module")
def observed(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[RunningProxy, Path]]:
    for i, s in enumerate(mariadb_shards[:2]):
        s.execute(f"CREATE DATABASE IF NOT EXISTS dg_{i}")
        s.execute(f"CREATE TABLE IF NOT EXISTS dg_{i}.t_dg (id INT PRIMARY KEY, v INT)")
        s.execute(f"DELETE FROM dg_{i}.t_dg")
    work = tmp_path_factory.mktemp("observe")
    audit = work / "audit" / "audit.jsonl"
    conf = write_conf(work / "conf",
                      {"dg": {f"ds_{i}": (s, f"dg_{i}") for i, s in enumerate(mariadb_shards[:2])},
                       "dg_pass": {"ds_p": (mariadb_shards[0], "dg_0")}},
                      users=USERS, rules_yaml={"dg": RULES},
                      props={"proxy-metrics-port": 0, "proxy-audit-log-file": str(audit),
                             "proxy-federation-enabled": False})
    proxy = start_proxy(conf)
    with proxy.connect("dg") as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t_dg (id, v) VALUES (1, 10), (2, 20), (3, 30), (4, 40)")
    yield proxy, audit
    proxy.stop()


def digests(proxy: RunningProxy, user: str = "root", password: str = "root") -> dict[tuple[str, str], dict[str, Any]]:
    with proxy.connect("dg", user=user, password=password) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SHOW QUERY DIGESTS")
        return {(r["digest_text"], r["database"]): r for r in cur.fetchall()}


# (statement, database, how many times): the mix whose digests the table below expects
MIX: list[tuple[str, str, int]] = [
    ("SELECT v FROM t_dg WHERE id = 1", "dg", 1),
    ("SELECT v FROM t_dg WHERE id = 3", "dg", 2),
    ("SELECT v FROM t_dg WHERE id IN (1, 2)", "dg", 1),
    ("select v from t_dg where id in (1,2,3,4)", "dg", 1),
    ("SELECT v FROM t_dg WHERE id IN (3)  /* a comment */", "dg", 1),
    ("SELECT v FROM t_dg", "dg", 1),
    ("SELECT * FROM t_dg_missing WHERE id = 7", "dg", 2),
    ("SELECT a.v FROM t_dg a JOIN t_dg b ON a.v = b.id", "dg", 1),
    ("SHOW DATABASES", "dg", 1),
    ("SELECT 'x', 42", "dg_pass", 3),
]
# (digest_text, database, count, errors_by_errno, rows_sent, route)
EXPECTED: list[tuple[str, str, int, str, int, str]] = [
    ("select v from t_dg where id = ?", "dg", 5, "", 5, "single:5"),  # 3 text + 2 prepared executes
    ("select v from t_dg where id in (...)", "dg", 3, "", 7, "multi:2,single:1"),
    ("select v from t_dg", "dg", 1, "", 4, "multi:1"),
    ("select * from t_dg_missing where id = ?", "dg", 2, "1146:2", 0, None),
    ("select a.v from t_dg a join t_dg b on a.v = b.id", "dg", 1, "1235:1", 0, "refused:1"),
    ("show databases", "dg", 1, "", 2, "proxy:1"),
    ("select ?, ?", "dg_pass", 3, "", 3, "passthrough:3"),
]


def test_digests_count_fold_and_route_a_known_mix(observed: tuple[RunningProxy, Path]) -> None:
    proxy, _ = observed
    with proxy.connect("dg") as conn, conn.cursor() as cur:
        cur.execute("RESET QUERY DIGESTS")
    conns = {db: proxy.connect(db) for db in ("dg", "dg_pass")}
    for sql, db, times in MIX:
        for _ in range(times):
            with conns[db].cursor() as cur:
                try:
                    cur.execute(sql)
                    cur.fetchall()
                except pymysql.err.MySQLError:
                    pass
    prepared = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root",
                                       database="dg", use_pure=True, ssl_disabled=True)
    pcur = prepared.cursor(prepared=True)
    for i in (1, 2):
        pcur.execute("SELECT v FROM t_dg WHERE id = ?", (i,))
        assert pcur.fetchall() == [(i * 10,)]
    prepared.ping()  # (a digest is counted after its answer: the next command on a connection waits for that)
    prepared.close()
    for c in conns.values():
        c.ping()
        c.close()
    rows = digests(proxy)
    got = [(text, db, r["count"], r["errors_by_errno"], r["rows_sent"], r["route"])
           for (text, db) in [(e[0], e[1]) for e in EXPECTED] if (r := rows.get((text, db)))]
    want = [(t, d, n, e, s, route if route is not None else rows.get((t, d), {}).get("route")) for
            t, d, n, e, s, route in EXPECTED]
    assert got == want
    for row in rows.values():
        assert row["user"] == "root" and len(row["digest"]) == 16
        assert float(row["max_ms"]) <= float(row["total_ms"]) and 0 < float(row["p99_ms"]) <= float(row["max_ms"])
        assert row["first_seen"] <= row["last_seen"]
    assert rows[("select * from t_dg_missing where id = ?", "dg")]["errors"] == 2
    with proxy.connect("dg") as conn, conn.cursor() as cur:  # sorted by total time, LIMIT n
        cur.execute("SHOW QUERY DIGESTS LIMIT 2")
        limited = cur.fetchall()
    names = [d[0] for d in cur.description]
    total = names.index("total_ms")
    assert len(limited) == 2 and float(limited[0][total]) >= float(limited[1][total])
    assert float(limited[1][total]) >= max(float(r["total_ms"]) for r in rows.values()
                                           if r["digest"] not in (limited[0][0], limited[1][0]))


def test_reset_is_for_admin_users_and_others_see_their_own(observed: tuple[RunningProxy, Path]) -> None:
    proxy, _ = observed
    with proxy.connect("dg", user="app", password="app") as conn, conn.cursor() as cur:
        cur.execute("SELECT v FROM t_dg WHERE id = 2")
        with pytest.raises(pymysql.err.OperationalError) as refused:
            cur.execute("RESET QUERY DIGESTS")
    assert refused.value.args[0] == 1227
    own = digests(proxy, "app", "app")
    assert own and {r["user"] for r in own.values()} == {"app"}
    assert {r["user"] for r in digests(proxy).values()} >= {"app", "root"}
    with proxy.connect("dg") as conn, conn.cursor() as cur:
        cur.execute("RESET QUERY DIGESTS")
    after = {text for text, _db in digests(proxy)}  # the RESET itself (counted as it ends), a driver's SET NAMES
    assert "reset query digests" in after and not any(text.startswith("select") for text in after)


def test_top_digests_are_exported_to_prometheus(observed: tuple[RunningProxy, Path]) -> None:
    proxy, _ = observed
    with proxy.connect("dg") as conn, conn.cursor() as cur:
        for i in range(3):
            cur.execute(f"SELECT v FROM t_dg WHERE id = {i + 1}")
    digest_id = digests(proxy)[("select v from t_dg where id = ?", "dg")]["digest"]
    host, port = proxy.server.metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {(s.name, s.labels.get("digest"), s.labels.get("database")): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("shardproxy_digest_statements_total", digest_id, "dg")] >= 3
    assert samples[("shardproxy_digest_seconds_total", digest_id, "dg")] > 0


def test_slow_query_log(observed: tuple[RunningProxy, Path]) -> None:
    proxy, _ = observed
    with proxy.connect("dg") as conn, conn.cursor() as cur:
        cur.execute("SET DIST VARIABLE proxy_slow_query_threshold_milliseconds = 80")
        cur.execute("SHOW DIST VARIABLE WHERE NAME = proxy_slow_query_threshold_milliseconds")
        assert cur.fetchall() == ((("proxy_slow_query_threshold_milliseconds", "80"),))
        try:
            with structlog.testing.capture_logs() as events:
                cur.execute("SELECT v, SLEEP(0.1) FROM t_dg WHERE id = 3")
                cur.execute("SELECT v FROM t_dg WHERE id = 1")  # fast: not logged
                cur.execute("SELECT v, SLEEP(0.05) FROM t_dg ORDER BY v")  # 2 rows per node: 100 ms each
                with proxy.connect("dg_pass") as other, other.cursor() as cur2:
                    cur2.execute(f"SELECT SLEEP(0.1), PASSWORD('{SECRET}')")
                    cur2.execute("DO 1")  # (the proxy logs after the answer: its next command waits for that)
                cur.execute("DO 1")
        finally:
            cur.execute("SET DIST VARIABLE proxy_slow_query_threshold_milliseconds = 0")
    slow = [e for e in events if e["event"] == "slow_query"]
    assert [e["statement"] for e in slow] == ["SELECT v, SLEEP(0.1) FROM t_dg WHERE id = 3",
                                              "SELECT v, SLEEP(0.05) FROM t_dg ORDER BY v",
                                              "SELECT SLEEP(0.1), PASSWORD('***')"]
    one, scatter, _ = slow
    assert one["rows"] == 1 and one["route"] == "single" and one["ms"] >= 100 and one["user"] == "root"
    assert [u["data_source"] for u in one["units"]] == ["ds_1"] and one["units"][0]["ms"] >= 90
    assert scatter["rows"] == 4 and scatter["route"] == "multi"
    assert sorted(u["data_source"] for u in scatter["units"]) == ["ds_0", "ds_1"]
    assert all(u["ms"] >= 90 for u in scatter["units"])
    assert SECRET not in repr(events)


def _audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_audit_log(observed: tuple[RunningProxy, Path]) -> None:
    proxy, path = observed
    victim = proxy.connect("dg", user="app", password="app")
    victim_id = victim.thread_id()
    with pytest.raises(pymysql.err.OperationalError) as denied:
        proxy.connect("dg", user="root", password=SECRET)
    assert denied.value.args[0] == 1045
    with proxy.connect("dg") as conn, conn.cursor() as cur:
        cur.execute(f"KILL {victim_id}")
        cur.execute("SET DIST VARIABLE sql_show = false")
        with pytest.raises(pymysql.err.MySQLError):
            cur.execute(f"REGISTER STORAGE UNIT ds_bad (HOST='127.0.0.1', PORT=1, DB='x', USER='root', "
                        f"PASSWORD='{SECRET}')")
        cur.execute("SELECT v FROM t_dg WHERE id = 1")  # not audited
        root_id = conn.thread_id()
    changer = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root",
                                      database="dg", use_pure=True, ssl_disabled=True)
    changer.cmd_change_user(username="app", password="app", database="dg")
    changer_id = changer.connection_id
    changer.close()
    config_reload(proxy.server, ok=False, error=f"global.yaml: props.x: bad; password: {SECRET}")
    victim.close()
    proxy.query("DO 1", "dg")  # (a line follows its answer in the same loop step: one more round trip waits for it)
    lines = [e for e in _audit(path) if e.get("conn", victim_id) >= victim_id]  # this test's connections
    assert SECRET not in path.read_text()
    events = [(e["event"], e.get("user"), e.get("conn")) for e in lines if e["event"] != "disconnect"]
    assert events[:3] == [("connect", None, victim_id), ("login", "app", victim_id), ("connect", None, victim_id + 1)]
    failed = next(e for e in lines if e["event"] == "login_failed")
    assert failed["attempted_user"] == "root" and failed["errno"] == 1045 and failed["client"].startswith("127.0.0.1:")
    by_event = {e["event"]: e for e in lines if e.get("conn") == root_id or e["event"] == "config_reload"}
    kill = by_event["kill"]
    assert (kill["target"], kill["scope"], kill["ok"], kill["user"]) == (victim_id, "CONNECTION", True, "root")
    changes = [(e["statement"], e["ok"], e["errno"]) for e in lines if e["event"] == "distsql"]
    assert changes[0] == ("SET DIST VARIABLE sql_show = false", True, None)
    assert changes[1][0].endswith("PASSWORD='***')") and changes[1][1] is False and changes[1][2]
    reload = by_event["config_reload"]
    assert reload["ok"] is False and reload["error"].endswith("password: '***'")
    assert not any(e.get("statement", "").startswith("SELECT") for e in lines)
    assert [(e["event"], e["user"]) for e in lines if e.get("conn") == changer_id and e.get("via")] == [
        ("login", "app")]
