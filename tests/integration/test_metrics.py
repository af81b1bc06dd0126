"""The Prometheus endpoint (props.proxy-metrics-port), scraped over HTTP while the proxy serves."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """\
- !SHARDING
  tables:
    t_m:
      actualDataNodes: ds_${0..1}.t_m
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: m}}
  shardingAlgorithms:
    m: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""


@pytest.fixture(scope="module")
def metrics_proxy(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[RunningProxy]:
    for i, s in enumerate(mariadb_shards[:2]):
        s.execute(f"CREATE DATABASE IF NOT EXISTS met_{i}")
    conf = write_conf(tmp_path_factory.mktemp("metrics-conf"),
                      {"met": {f"ds_{i}": (s, f"met_{i}") for i, s in enumerate(mariadb_shards[:2])},
                       "met_pass": {"ds_p": (mariadb_shards[0], "met_0")}},
                      rules_yaml={"met": RULES}, props={"proxy-metrics-port": 0})
    proxy = start_proxy(conf)
    yield proxy
    proxy.stop()


def scrape(proxy: RunningProxy) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    host, port = proxy.server.metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def value(metrics: dict[str, Any], name: str, **labels: str) -> float:
    return sum(v for k, v in metrics.get(name, {}).items() if all((lk, lv) in k for lk, lv in labels.items()))


def test_statements_errors_sessions_and_pools_are_counted(metrics_proxy: RunningProxy) -> None:
    before = scrape(metrics_proxy)
    conn = metrics_proxy.connect("met")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS t_m (id INT PRIMARY KEY, v INT)")
        cur.execute("DELETE FROM t_m")
        cur.execute("INSERT INTO t_m (id, v) VALUES (1, 10), (2, 20), (3, 30)")
        for _ in range(3):
            cur.execute("SELECT v FROM t_m WHERE id = 1")
        cur.execute("SELECT COUNT(*) FROM t_m")
        with pytest.raises(pymysql.err.ProgrammingError):
            cur.execute("SELECT * FROM t_no_such_table")
    prepared = mysql.connector.connect(host=metrics_proxy.host, port=metrics_proxy.port, user="root",
                                       password="root", database="met", use_pure=True, ssl_disabled=True)
    cur2 = prepared.cursor(prepared=True)
    cur2.execute("SELECT v FROM t_m WHERE id = ?", (2,))
    assert cur2.fetchall() == [(20,)]
    passthrough = metrics_proxy.connect("met_pass")
    with passthrough.cursor() as cur:
        cur.execute("SELECT 1")
    during = scrape(metrics_proxy)
    assert value(during, "shardproxy_client_sessions") >= 3
    prepared.close()
    conn.close()
    passthrough.close()
    after = scrape(metrics_proxy)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("shardproxy_statements_total", kind="select", route="single") >= 4  # 3 text + 1 prepared
    assert delta("shardproxy_statements_total", kind="select", route="multi") >= 1
    assert delta("shardproxy_statements_total", kind="write", route="multi") >= 1
    assert delta("shardproxy_statements_total", kind="ddl") >= 1
    assert delta("shardproxy_statements_total", kind="select", route="passthrough") >= 1
    assert delta("shardproxy_errors_total", errno="1146") == 1
    assert delta("shardproxy_statement_duration_seconds_count", kind="select") >= 6
    assert value(after, "shardproxy_statement_duration_seconds_bucket", kind="select", le="+Inf") == \
        value(after, "shardproxy_statement_duration_seconds_count", kind="select")
    assert value(after, "shardproxy_backend_pool_max", data_source="ds_0") == 20
    assert value(after, "shardproxy_backend_connections", data_source="ds_0") >= 1
    assert value(after, "shardproxy_plan_cache_hits_total", database="met") >= 1
    assert "shardproxy_uptime_seconds" in after


def test_not_a_get_is_refused(metrics_proxy: RunningProxy) -> None:
    host, port = metrics_proxy.server.metrics_address
    request = urllib.request.Request(f"http://{host}:{port}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 405


def test_off_by_default(tmp_path: Path, mariadb: MariaDBServer) -> None:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS met_off")
    proxy = start_proxy(write_conf(tmp_path / "conf", {"off": {"ds": (mariadb, "met_off")}}))
    try:
        assert proxy.server.metrics is None and proxy.server.metrics_address is None
    finally:
        proxy.stop()
