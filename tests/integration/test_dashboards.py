"""docker/monitoring's Grafana dashboard and Prometheus alert rules name only metrics the proxy exports: a
renamed metric would leave a panel empty and an alert silent without anyone noticing."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

MONITORING = Path(__file__).resolve().parents[2] / "docker" / "monitoring"
METRIC = re.compile(r"\bshardproxy_[a-z0-9_]+\b")
# the sample names a family of each type is exported as
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
    "summary": ("", "_count", "_sum"),
}


@pytest.fixture(scope="module")
def metrics_proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS dash_db")
    conf = write_conf(
        tmp_path_factory.mktemp("dashboards"), {"dash": {"ds": (mariadb, "dash_db")}}, props={"proxy-metrics-port": 0}
    )
    proxy = start_proxy(conf)
    proxy.query("SELECT 1", "dash")
    yield proxy
    proxy.stop()


def _expressions(value: Any) -> list[str]:
    """Every `expr` in a parsed dashboard or rules file."""
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in ([v] if k == "expr" and isinstance(v, str) else _expressions(v))]
    if isinstance(value, list):
        return [e for v in value for e in _expressions(v)]
    return []


def exported(proxy: RunningProxy) -> set[str]:
    host, port = proxy.server.metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in SUFFIXES.get(family.type, ("",))
    }


@pytest.mark.parametrize(
    ("file", "load"),
    [
        ("grafana-dashboard.json", json.loads),
        ("alerts.yml", yaml.safe_load),
    ],
)
def test_every_metric_named_is_exported(metrics_proxy: RunningProxy, file: str, load: Any) -> None:
    expressions = _expressions(load((MONITORING / file).read_text()))
    named = {m for e in expressions for m in METRIC.findall(e)}
    assert len(expressions) >= 5 and len(named) >= 5, f"{file}: no expressions found"
    missing = named - exported(metrics_proxy)
    assert not missing, f"{file} names metrics /metrics does not export: {sorted(missing)}"
