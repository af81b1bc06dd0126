"""proxy.backends.readwrite without servers: which statement texts may use a replica, and group configuration errors."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.backends.readwrite import Access, classify_access, parse_groups
from routing.errors import ConfigError


@pytest.mark.parametrize(("sql", "access"), [
    ("SELECT * FROM t", Access.READ),
    ("  /* c */ select 1", Access.READ),
    ("(SELECT 1) UNION (SELECT 2)", Access.READ),
    ("WITH c AS (SELECT 1) SELECT * FROM c", Access.READ),
    ("SHOW TABLES", Access.READ),
    ("SHOW CREATE TABLE t", Access.READ),
    ("DESC t", Access.READ),
    ("EXPLAIN SELECT 1", Access.READ),
    ("SELECT 'a;b', 'FOR UPDATE'", Access.READ),
    ("SELECT * FROM t FOR UPDATE", Access.SESSION),
    ("SELECT * FROM t LOCK IN SHARE MODE", Access.SESSION),
    ("SELECT * FROM t FOR SHARE", Access.SESSION),
    ("SELECT a INTO @x FROM t", Access.SESSION),
    ("SELECT LAST_INSERT_ID()", Access.SESSION),
    ("SELECT GET_LOCK('a', 1)", Access.SESSION),
    ("SHOW WARNINGS", Access.SESSION),
    ("SHOW SESSION STATUS", Access.SESSION),
    ("/* SHARDINGSPHERE_HINT: WRITE_ROUTE_ONLY=true */ SELECT 1", Access.SESSION),
    ("SET NAMES utf8mb4", Access.SESSION),
    ("BEGIN", Access.SESSION),
    ("COMMIT", Access.SESSION),
    ("INSERT INTO t VALUES (1)", Access.WRITE),
    ("UPDATE t SET a = 1", Access.WRITE),
    ("WITH c AS (SELECT 1) DELETE FROM t", Access.WRITE),
    ("SELECT 1; DELETE FROM t", Access.WRITE),
    ("CALL p()", Access.WRITE),
    ("EXPLAIN ANALYZE DELETE FROM t", Access.WRITE),  # MySQL 8 runs it
    ("EXPLAIN DELETE FROM t", Access.READ),
    ("PREPARE s FROM 'SELECT 1'", Access.SESSION),  # the statement lives on the primary connection
    ("DEALLOCATE PREPARE s", Access.SESSION),
    ("DROP PREPARE s", Access.SESSION),
    ("EXECUTE s", Access.WRITE),  # what it runs is not known from its text
    ("DROP TABLE t", Access.WRITE),
    ("/*!40101 SET x = 1 */", Access.WRITE),
    ("", Access.WRITE),
])
def test_classify_access(sql: str, access: Access) -> None:
    assert classify_access(sql) is access


def _rule(**group: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"writeDataSourceName": "w", "readDataSourceNames": ["r0", "r1"]}
    base.update(group)
    return {"__rule__": "READWRITE_SPLITTING", "dataSourceGroups": {"g": base},
            "loadBalancers": {"rr": {"type": "ROUND_ROBIN"}, "w3": {"type": "WEIGHT", "props": {"r0": 3, "r1": 1}},
                              "bad": {"type": "WEIGHT", "props": {"r0": 1}}}}


def test_group_keys_and_defaults() -> None:
    warnings: list[str] = []
    (g,) = parse_groups([_rule(loadBalancerName="w3", readAfterWrite="gtid", maxReplicationLagSeconds=5,
                               healthCheckIntervalMilliseconds=250)], ["w", "r0", "r1"], "f.yaml",
                        warnings.append)
    assert (g.name, g.write, g.reads, g.load_balancer_type, dict(g.weights)) == (
        "g", "w", ("r0", "r1"), "WEIGHT", {"r0": 3.0, "r1": 1.0})
    assert (g.read_after_write, g.transactional_read_query_strategy, g.max_lag_seconds, g.health_interval) == (
        "GTID", "PRIMARY", 5.0, 0.25)
    assert warnings == []


@pytest.mark.parametrize(("group", "message"), [
    ({"writeDataSourceName": "nope"}, "'nope' is not defined"),
    ({"readAfterWrite": "ALWAYS"}, "SESSION, TRANSACTION, GTID"),
    ({"transactionalReadQueryStrategy": "ANY"}, "PRIMARY, FIXED, DYNAMIC"),
    ({"loadBalancerName": "missing"}, "not defined in loadBalancers"),
    ({"loadBalancerName": "bad"}, "weight for read data source 'r1'"),
    ({"readDataSourceNames": ["r0", "w"]}, "already a member"),
    ({"maxReplicationLagSeconds": -1}, "negative"),
    ({"readDataSourceName": ["r0"]}, "unknown key 'readDataSourceName': did you mean readDataSourceNames?"),
])
def test_group_errors_name_the_key(group: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_groups([_rule(**group)], ["w", "r0", "r1"], "f.yaml", lambda _w: None)
    assert message in str(err.value)
