"""The status page (`GET /status`) in a real headless Chromium: it renders, refreshes itself, logs no error
in the browser console, and its numbers are the ones the SQL statements show (SHOW STORAGE UNITS, SHOW
PROCESSLIST, SHOW SHARDING TABLE RULES, SHOW TRANSACTION IN DOUBT, SHOW MIGRATION LIST).

CI installs Debian's chromium and chromium-driver (.ci/run); elsewhere the test is skipped without them."""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs chromium and chromedriver (apt-get install -y chromium chromium-driver; .ci/run installs them)",
)

RULES = """\
- !SHARDING
  tables:
    t_page:
      actualDataNodes: ds_${0..1}.t_page_${0..1}
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: db}}
      tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: tb}}
  shardingAlgorithms:
    db: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
    tb: {type: INLINE, props: {algorithm-expression: 't_page_${id.intdiv(2) % 2}'}}
- !BROADCAST
  tables: [t_everywhere]
"""


@pytest.fixture(scope="module")
def page_proxy(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    for i, server in enumerate(mariadb_shards):
        server.execute(f"CREATE DATABASE IF NOT EXISTS page_{i}")
    conf = write_conf(
        tmp_path_factory.mktemp("status-page"),
        {
            "page_sharded": {f"ds_{i}": (s, f"page_{i}") for i, s in enumerate(mariadb_shards)},
            "page_plain": {"ds_p": (mariadb_shards[0], "page_0")},
        },
        rules_yaml={"page_sharded": RULES},
        props={"proxy-metrics-port": 0},
        max_pool_size=7,
    )
    proxy = start_proxy(conf)
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _cells(row: Any) -> dict[str, str]:
    from selenium.webdriver.common.by import By

    return {td.get_attribute("data-k"): td.text for td in row.find_elements(By.CSS_SELECTOR, "td")}


def _console_errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def test_the_page_shows_what_the_sql_statements_show(
    page_proxy: RunningProxy, browser: Any, mariadb_shards: list[MariaDBServer]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    host, port = page_proxy.server.metrics_address
    admin = page_proxy.connect("page_sharded")
    sleeper = page_proxy.connect("page_plain")
    # an XA branch left prepared on ds_0's server by someone else: in doubt, left alone
    mariadb_shards[0].execute("CREATE TABLE IF NOT EXISTS page_0.t_foreign (id INT)")
    foreign = mariadb_shards[0].connect("page_0")
    with foreign.cursor() as cur:
        for sql in (
            "XA START 'status-page','b1'",
            "INSERT INTO t_foreign VALUES (1)",
            "XA END 'status-page','b1'",
            "XA PREPARE 'status-page','b1'",
        ):
            cur.execute(sql)
    foreign.close()
    # long enough for a loaded machine; killed once the page has been compared (a fixed 4 s ran out under load)
    def sleep() -> None:
        with contextlib.suppress(Exception):  # (KILL QUERY ends it)
            sleeper.cursor().execute("SELECT SLEEP(60)")

    thread = threading.Thread(target=sleep)
    try:
        thread.start()
        with admin.cursor() as cur:
            for _ in range(200):  # until the SLEEP runs
                cur.execute("SHOW PROCESSLIST")
                if any(r[0] == sleeper.thread_id() and r[4] == "Query" for r in cur.fetchall()):
                    break
                time.sleep(0.05)
        browser.get(f"http://{host}:{port}/status")
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.CSS_SELECTOR, "main#main section")))
        with admin.cursor() as cur:
            for db in ("page_sharded", "page_plain"):
                cur.execute(f"SHOW STORAGE UNITS FROM {db}")
                columns = [c[0] for c in cur.description]
                units = {r[0]: dict(zip(columns, r, strict=True)) for r in cur.fetchall()}
                rows = browser.find_elements(By.CSS_SELECTOR, f'section[data-database="{db}"] tr[data-unit]')
                shown = {r.get_attribute("data-unit"): _cells(r) for r in rows}
                assert set(shown) == set(units)
                for name, unit in units.items():
                    cells = shown[name]
                    assert cells["in_use"] == str(unit["connections_in_use"]), (db, name)
                    assert cells["idle"] == str(unit["connections_idle"]), (db, name)
                    assert cells["max"] == str(unit["max_pool_size"]) == "7"
                    assert cells["status"].startswith(unit["status"])
                    assert cells["address"] == f"{unit['host']}:{unit['port']}/{unit['db']}"
                    assert cells["waiters"] == "0"
            cur.execute("SHOW SHARDING TABLE RULES FROM page_sharded")
            sharded = [r[0] for r in cur.fetchall()]
            cur.execute("SHOW BROADCAST TABLE RULES FROM page_sharded")
            broadcast = [r[0] for r in cur.fetchall()]
            rules = browser.find_elements(By.CSS_SELECTOR, 'section[data-database="page_sharded"] tr[data-rule]')
            assert sorted(r.get_attribute("data-rule") for r in rules) == sorted(sharded + broadcast)
            assert _cells(rules[0])["nodes"] == "4"  # t_page: 2 data sources x 2 tables
            cur.execute("SHOW PROCESSLIST")
            processes = {r[0]: r for r in cur.fetchall()}
            sessions = {
                int(r.get_attribute("data-session")): _cells(r)
                for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-session]")
            }
            assert set(sessions) == set(processes)
            assert browser.find_element(By.ID, "session-count").text == str(len(processes))
            running = [i for i, p in processes.items() if p[4] == "Query" and i != admin.thread_id()]
            assert browser.find_element(By.ID, "running-count").text == str(len(running)) == "1"
            assert "SLEEP(60)" in sessions[running[0]]["info"] and sessions[running[0]]["command"] == "Query"
            cur.execute("SHOW TRANSACTION IN DOUBT")
            in_doubt = cur.fetchall()
            xa_rows = [_cells(r) for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-xa]")]
            assert [(r["xid"], r["gtrid"], r["decision"]) for r in xa_rows] == [(r[0], r[1], r[7]) for r in in_doubt]
            assert [r["gtrid"] for r in xa_rows] == ["status-page"]
            cur.execute("SHOW MIGRATION LIST")
            assert cur.fetchall() == ()
            assert browser.find_elements(By.CSS_SELECTOR, '[data-empty="migration"]')
            assert browser.find_elements(By.CSS_SELECTOR, '[data-empty="digest"]')
        # it refreshes itself: the SLEEP ends, the next refresh shows nothing running
        with admin.cursor() as cur:
            cur.execute(f"KILL QUERY {sleeper.thread_id()}")
        thread.join(10)
        WebDriverWait(browser, 15).until(lambda d: d.find_element(By.ID, "running-count").text == "0")
        assert _console_errors(browser) == []
    finally:
        thread.join(10)
        with contextlib.suppress(Exception):
            mariadb_shards[0].execute("XA ROLLBACK 'status-page','b1'")
        mariadb_shards[0].execute("DROP TABLE IF EXISTS page_0.t_foreign")
        admin.close()
        sleeper.close()


def test_the_json_has_the_same_data(page_proxy: RunningProxy) -> None:
    import json
    import urllib.request

    host, port = page_proxy.server.metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/status.json", timeout=10) as response:
        data = json.loads(response.read())
    assert [d["name"] for d in data["databases"]] == ["page_plain", "page_sharded"]
    assert {"sessions", "digests", "xa_in_doubt", "migrations", "draining", "uptime_seconds"} <= set(data)
