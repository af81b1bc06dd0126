"""The metrics port's routes: /metrics, /healthz, /readyz, /status, /status.json, and 404 for any other path
(every path answered 200 with the metrics text before)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf


def get(proxy: RunningProxy, path: str) -> tuple[int, str, bytes]:
    host, port = proxy.server.metrics_address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


@pytest.fixture(scope="module")
def ops_proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS ops_http")
    conf = write_conf(
        tmp_path_factory.mktemp("ops-http"), {"ops": {"ds_0": (mariadb, "ops_http")}}, props={"proxy-metrics-port": 0}
    )
    proxy = start_proxy(conf)
    yield proxy
    proxy.stop()


@pytest.mark.parametrize(
    ("path", "status", "content_type", "contains"),
    [
        ("/metrics", 200, "text/plain", b"shardproxy_client_sessions"),
        ("/healthz", 200, "text/plain", b"ok"),
        ("/readyz", 200, "application/json", b'"ready": true'),
        ("/status", 200, "text/html", b'<main id="main">'),
        ("/status.json", 200, "application/json", b'"databases"'),
        ("/status/main", 200, "text/html", b'data-database="ops"'),
        ("/", 404, "text/plain", b"/healthz"),
        ("/metricsx", 404, "text/plain", b"no /metricsx here"),
        ("/healthz/extra", 404, "text/plain", b""),
        ("/readyz?verbose=1", 200, "application/json", b'"ops"'),
    ],
)
def test_routes(ops_proxy: RunningProxy, path: str, status: int, content_type: str, contains: bytes) -> None:
    got_status, got_type, body = get(ops_proxy, path)
    assert (got_status, got_type.split(";")[0]) == (status, content_type)
    assert contains in body


def test_readyz_names_a_data_source_that_cannot_be_reached(mariadb_factory, tmp_path: Path) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE ready_db")
    conf = write_conf(tmp_path / "conf", {"ready": {"ds_r": (server, "ready_db")}}, props={"proxy-metrics-port": 0})
    proxy = start_proxy(conf)
    try:
        assert get(proxy, "/readyz")[0] == 200
        server.stop()
        time.sleep(1.1)  # the last answer is kept for a second
        status, _type, body = get(proxy, "/readyz")
        assert status == 503
        report = json.loads(body)
        assert report["ready"] is False and report["databases"]["ready"]["ds_r"] != "ok"
        assert get(proxy, "/healthz")[0] == 200  # alive all the same
        server.restart()
        deadline = time.monotonic() + 10
        while get(proxy, "/readyz")[0] != 200:
            assert time.monotonic() < deadline, "not ready again after the data source came back"
            time.sleep(0.3)
    finally:
        proxy.stop()
