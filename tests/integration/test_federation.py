"""Federation (issue 17): SELECTs the kernel cannot distribute are answered on one MariaDB over copies of
their tables (routing.federation, proxy.federation), and must give exactly the unsharded database's answer.

The layout of the differential suite (t_order / t_order_item over 2 data sources x 2 tables, bound;
t_address broadcast) plus two single tables on different data sources: t_status on ds_1 and t_user on
ds_0 (created on the shards before the proxy starts). Each case runs through the proxy and on the oracle
with the same client and protocol (text: PyMySQL; prepared: mysql-connector's COM_STMT_PREPARE/EXECUTE).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.differential_corpus import DDL, ROWS
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.test_differential import (
    ER_NOT_SUPPORTED_YET,
    Client,
    Refused,
    _differ,
    _load,
    _same_answer,
    _typed,
    sharding_rules_yaml,
)

pytestmark = pytest.mark.integration

PHYSICAL = ("fed_ds_0", "fed_ds_1")
ORACLE_DB = "fed_oracle"
MODES = ("text", "prepared")
STATUS_DDL = ("CREATE TABLE t_status (status VARCHAR(45) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL "
              "PRIMARY KEY, label VARCHAR(20) NOT NULL, rank_no INT NOT NULL)")
STATUS_ROWS = "INSERT INTO t_status VALUES ('paid', 'done', 1), ('pending', 'open', 2), ('shipped', 'done', 3), " \
              "('café', 'odd', 4), ('init', 'open', 5)"
USER_DDL = "CREATE TABLE t_user (user_id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, tier INT NULL)"
USER_ROWS = "INSERT INTO t_user VALUES " + ", ".join(
    f"({u}, 'user {u}', {'NULL' if u % 7 == 0 else u % 3})" for u in range(1, 41))


@dataclass
class FedEnv:
    proxy: RunningProxy
    bounded: RunningProxy  # the same databases behind props.proxy-federation-max-rows: 100
    xa: RunningProxy  # the same databases under the XA transaction rule
    clients: dict[str, tuple[Client, Client]]


@pytest.fixture(scope="module")
def fed(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[FedEnv]:
    s0, s1 = mariadb_shards
    for server, physical in zip(mariadb_shards, PHYSICAL, strict=True):
        server.execute(f"DROP DATABASE IF EXISTS {physical}")
        server.execute(f"CREATE DATABASE {physical}")
    s0.execute(f"DROP DATABASE IF EXISTS {ORACLE_DB}")
    s0.execute(f"CREATE DATABASE {ORACLE_DB}")
    for server, physical, ddl, rows in ((s1, PHYSICAL[1], STATUS_DDL, STATUS_ROWS), (s0, PHYSICAL[0], USER_DDL,
                                                                                        USER_ROWS)):
        conn = server.connect(physical)
        with conn.cursor() as cur:
            cur.execute(ddl)
            cur.execute(rows)
        conn.commit()
        conn.close()
    dbs = {"sharding_db": {"ds_0": (s0, PHYSICAL[0]), "ds_1": (s1, PHYSICAL[1])}}
    rules = {"sharding_db": sharding_rules_yaml()}
    proxy = start_proxy(Path(write_conf(tmp_path_factory.mktemp("fed-conf"), dbs, rules_yaml=rules)))
    bounded = start_proxy(Path(write_conf(tmp_path_factory.mktemp("fed-bounded"), dbs, rules_yaml=rules,
                                          props={"proxy-federation-max-rows": 100})))
    xa = start_proxy(Path(write_conf(tmp_path_factory.mktemp("fed-xa"), dbs, rules_yaml=rules,
                                     transaction={"defaultType": "XA", "providerType": "Atomikos"})))
    proxy_conn = proxy.connect("sharding_db", autocommit=True)
    oracle_conn = s0.connect(ORACLE_DB)
    try:
        for conn in (proxy_conn, oracle_conn):
            with conn.cursor() as cur:
                for ddl in DDL:
                    cur.execute(ddl)
            _load(conn)
        with oracle_conn.cursor() as cur:
            for sql in (STATUS_DDL, STATUS_ROWS, USER_DDL, USER_ROWS):
                cur.execute(sql)
        oracle_conn.commit()
        clients = {mode: (Client(mode, proxy.host, proxy.port, "root", "sharding_db"),
                          Client(mode, s0.host, s0.port, s0.password, ORACLE_DB)) for mode in MODES}
        yield FedEnv(proxy, bounded, xa, clients)
        for pair in clients.values():
            for client in pair:
                client.close()
    finally:
        proxy_conn.close()
        oracle_conn.close()
        xa.stop()
        bounded.stop()
        proxy.stop()
        for server, physical in zip(mariadb_shards, PHYSICAL, strict=True):
            server.execute(f"DROP DATABASE IF EXISTS {physical}")
        s0.execute(f"DROP DATABASE IF EXISTS {ORACLE_DB}")


@dataclass(frozen=True)
class Fed:
    sql: str
    ordered: bool = False  # the ORDER BY determines the order of the rows (else compared as multisets)


def O(sql: str) -> Fed:  # noqa: E743 - one letter, as the corpus' Q/B
    return Fed(sql, True)


def B(sql: str) -> Fed:
    return Fed(sql, False)


_O = ROWS["t_order"][1234]

FED_CASES = [
    # -- uncorrelated subqueries: IN / NOT IN / scalar / EXISTS / ALL / SOME over several nodes --
    O("SELECT order_id FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item WHERE qty = 9) "
      "ORDER BY order_id"),
    O("SELECT order_id FROM t_order WHERE user_id IN (SELECT user_id FROM t_order_item WHERE qty < 0) AND amount > 900 "
      "ORDER BY order_id"),
    O("SELECT COUNT(*) FROM t_order WHERE order_id NOT IN (SELECT order_id FROM t_order_item)"),
    O("SELECT order_id, amount FROM t_order WHERE amount > (SELECT AVG(amount) + 850 FROM t_order) ORDER BY order_id"),
    O("SELECT order_id, (SELECT MAX(qty) FROM t_order_item) AS m FROM t_order WHERE user_id = 5 ORDER BY order_id"),
    O("SELECT COUNT(*) FROM t_order WHERE EXISTS (SELECT 1 FROM t_order_item WHERE qty = 9 AND user_id = 7)"),
    O("SELECT order_id FROM t_order WHERE amount > ALL (SELECT unit_price FROM t_order_item WHERE qty = 9 "
      "AND unit_price IS NOT NULL) ORDER BY order_id"),
    B("SELECT o.order_id FROM t_order o WHERE o.user_id = SOME (SELECT i.user_id FROM t_order_item i WHERE i.qty = 9)"),
    # -- correlated subqueries not on the binding key --
    B("SELECT a.address_id FROM t_address a WHERE EXISTS (SELECT 1 FROM t_order o WHERE o.user_id = a.user_id "
      "AND o.amount > 900)"),
    B("SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.user_id = o.user_id "
      "AND i.qty = 9)"),
    O("SELECT o.user_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.user_id = o.user_id) AS n FROM t_order o "
      "WHERE o.order_id < 300 ORDER BY o.order_id"),
    B("SELECT o.order_id FROM t_order o WHERE o.amount > (SELECT AVG(p.amount) + 700 FROM t_order p "
      "WHERE p.user_id = o.user_id)"),
    # -- derived tables --
    O("SELECT user_id, n FROM (SELECT user_id, COUNT(*) n FROM t_order GROUP BY user_id) x WHERE n > 65 "
      "ORDER BY user_id"),
    O("SELECT COUNT(*), SUM(s) FROM (SELECT order_id, SUM(qty) s FROM t_order_item GROUP BY order_id HAVING s > 10) d"),
    O("SELECT d.user_id, d.total, u.name FROM (SELECT user_id, SUM(amount) total FROM t_order GROUP BY user_id) d "
      "JOIN t_user u ON u.user_id = d.user_id ORDER BY d.total DESC, d.user_id LIMIT 5"),
    # -- CTEs, recursive too --
    O("WITH big AS (SELECT * FROM t_order WHERE amount > 900) SELECT user_id, COUNT(*) FROM big GROUP BY user_id "
      "ORDER BY user_id"),
    O("WITH u AS (SELECT user_id, COUNT(*) c FROM t_order GROUP BY user_id) SELECT COUNT(*) FROM u a JOIN u b "
      "ON a.user_id = b.user_id + 1 AND a.c > b.c"),
    O("WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 12) SELECT r.n, COUNT(o.order_id) "
      "FROM r LEFT JOIN t_order o ON o.user_id = r.n GROUP BY r.n ORDER BY r.n"),
    # -- set operations with ORDER BY / LIMIT of the whole --
    O("SELECT user_id FROM t_order WHERE amount > 990 UNION SELECT user_id FROM t_order_item WHERE qty = 9 "
      "ORDER BY user_id"),
    O("(SELECT order_id FROM t_order WHERE user_id = 3) UNION ALL "
      "(SELECT order_id FROM t_order_item WHERE user_id = 4) ORDER BY order_id LIMIT 10"),
    O("SELECT order_id FROM t_order WHERE amount > 500 INTERSECT SELECT order_id FROM t_order_item WHERE qty > 7 "
      "ORDER BY order_id"),
    O("SELECT user_id FROM t_order EXCEPT SELECT user_id FROM t_order_item WHERE qty > 0 ORDER BY user_id"),
    O("SELECT COUNT(*) FROM (SELECT order_id FROM t_order UNION ALL SELECT order_id FROM t_order_item) u"),
    # -- window functions --
    B("SELECT order_id, ROW_NUMBER() OVER (ORDER BY order_id) rn FROM t_order WHERE user_id = 1"),
    B("SELECT order_id, RANK() OVER (PARTITION BY user_id ORDER BY amount, order_id) r FROM t_order WHERE user_id < 6"),
    B("SELECT user_id, SUM(amount) OVER (PARTITION BY user_id) AS s FROM t_order WHERE user_id IN (3, 4)"),
    B("SELECT order_id, LAG(order_id) OVER w, LEAD(amount, 2) OVER w FROM t_order WHERE user_id IN (1, 2) "
      "WINDOW w AS (ORDER BY order_id)"),
    O("SELECT user_id, DENSE_RANK() OVER (ORDER BY COUNT(*) DESC) dr, COUNT(*) FROM t_order GROUP BY user_id "
      "ORDER BY user_id"),
    # -- joins that do not run node by node --
    B("SELECT o.order_id, i.order_item_id FROM t_order o JOIN t_order_item i ON i.user_id = o.user_id AND i.qty = 9 "
      "WHERE o.amount > 990"),
    B("SELECT a.order_id, b.order_id FROM t_order a JOIN t_order b ON a.created = b.created "
      "AND a.order_id < b.order_id"),
    B("SELECT a.address_id, o.order_id FROM t_address a LEFT JOIN t_order o ON o.user_id = a.user_id"),
    B("SELECT a.address_id, o.order_id FROM t_order o RIGHT JOIN t_address a ON o.user_id = a.user_id "
      "AND o.amount > 900"),
    B("SELECT o.order_id, i.order_item_id FROM t_order o LEFT JOIN t_order_item i ON i.user_id = o.user_id "
      "AND i.qty = 9 WHERE o.user_id IN (3, 6)"),
    B("SELECT o.order_id, s.label FROM t_order o JOIN t_status s ON s.status = o.status WHERE o.user_id = 2"),
    O("SELECT s.label, COUNT(*) FROM t_order o JOIN t_status s ON s.status = o.status GROUP BY s.label "
      "ORDER BY s.label"),
    B("SELECT u.name, s.label FROM t_user u JOIN t_status s ON s.rank_no = u.tier"),
    O("SELECT u.user_id, COUNT(o.order_id) FROM t_user u LEFT JOIN t_order o ON o.user_id = u.user_id "
      "AND o.amount > 800 GROUP BY u.user_id ORDER BY u.user_id"),
    # -- aggregates the merge does not implement: computed by MariaDB --
    O("SELECT COUNT(DISTINCT user_id, status) FROM t_order"),
    O("SELECT user_id, ROUND(STDDEV_POP(amount), 6), ROUND(VARIANCE(qty), 6) FROM t_order "
      "JOIN t_order_item USING (order_id, user_id) GROUP BY user_id ORDER BY user_id"),
    O("SELECT user_id, GROUP_CONCAT(order_id ORDER BY order_id) FROM t_order GROUP BY user_id ORDER BY user_id"),
    O("SELECT user_id, SUM(amount) FROM t_order WHERE user_id < 5 GROUP BY user_id WITH ROLLUP"),
    O("SELECT JSON_LENGTH(JSON_ARRAYAGG(order_id)) FROM t_order WHERE user_id = 5"),
    # -- pushed-down conditions (the sharding key reads one node) --
    O(f"SELECT o.order_id, (SELECT COUNT(*) FROM t_order p WHERE p.user_id = o.user_id) AS n FROM t_order o "
      f"WHERE o.user_id = {_O[1]} AND o.order_id = {_O[0]}"),
    O("SELECT `o`.order_id FROM sharding_db.t_order AS `o` WHERE `o`.user_id = 9 AND o.order_id IN "
      "(SELECT order_id FROM sharding_db.t_order_item WHERE sharding_db.t_order_item.qty BETWEEN 7 AND 8) "
      "ORDER BY 1"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", FED_CASES, ids=lambda c: " ".join(c.sql.split())[:100])
def test_federated_answer_is_the_oracles(fed: FedEnv, case: Fed, mode: str) -> None:
    proxy_client, oracle_client = fed.clients[mode]
    names, expected, _ = oracle_client.run(case.sql.replace("sharding_db.", ""))  # the oracle's own database
    got_names, got, _ = proxy_client.run(case.sql)
    assert got_names == names
    assert _same_answer(got, expected, case.ordered), _differ(case.sql, got, expected)


# what federation still refuses: the kernel's refusal stands (1235, naming the construct)
STILL_REFUSED = [
    ("SELECT order_id FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item WHERE qty = 9) FOR UPDATE",
     "subquery on sharded table t_order_item"),
    ("SELECT @n := COUNT(*) FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.user_id = o.user_id)",
     "subquery on sharded table t_order_item"),
    ("/* SHARDINGSPHERE_HINT: t_order.SHARDING_DATABASE_VALUE=1 */ SELECT COUNT(*) FROM t_order o WHERE "
     "o.order_id IN (SELECT order_id FROM t_order_item)", "subquery on sharded table t_order_item"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("sql", "fragment"), STILL_REFUSED, ids=[s[:60] for s, _ in STILL_REFUSED])
def test_still_refused(fed: FedEnv, sql: str, fragment: str, mode: str) -> None:
    with pytest.raises(Refused) as info:
        fed.clients[mode][0].run(sql)
    assert info.value.errno == ER_NOT_SUPPORTED_YET, info.value
    assert fragment in info.value.message, info.value.message


@pytest.mark.parametrize("mode", MODES)
def test_federation_inside_a_transaction_sees_its_own_rows(fed: FedEnv, mode: str) -> None:
    """Reads go through the session's own connections: uncommitted rows of the transaction are copied."""
    proxy_client, oracle_client = fed.clients[mode]
    sql = "SELECT order_id FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item WHERE qty = 77)"
    for client in (proxy_client, oracle_client):
        client.run("BEGIN")
    try:
        for client in (proxy_client, oracle_client):
            client.run("INSERT INTO t_order_item (order_item_id, order_id, user_id, qty, unit_price, sku) "
                       f"VALUES (888888881, {_O[0]}, {_O[1]}, 77, 1.00, 'A-1')")
        got, expected = proxy_client.run(sql)[1], oracle_client.run(sql)[1]
        assert _typed(got) == _typed(expected)
        assert got == [(_O[0],)]
    finally:
        for client in (proxy_client, oracle_client):
            client.run("ROLLBACK")
    assert proxy_client.run(sql)[1] == []


def test_federation_bound_on_copied_rows(fed: FedEnv) -> None:
    """More rows than props.proxy-federation-max-rows: a clear error, and the session keeps working."""
    conn = fed.bounded.connect("sharding_db", autocommit=True)
    try:
        with conn.cursor() as cur:
            with pytest.raises(pymysql.MySQLError) as info:
                cur.execute("SELECT COUNT(*) FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item)")
            assert info.value.args[0] == 1038  # ER_OUT_OF_SORTMEMORY, as the merge's memory bound
            assert "proxy-federation-max-rows (100)" in info.value.args[1]
            # pushed down to a few rows, the same shape is answered
            cur.execute("SELECT COUNT(*) FROM t_order o WHERE o.user_id = 3 AND o.order_id < 400 AND o.order_id IN "
                        "(SELECT i.order_id FROM t_order_item i WHERE i.user_id = 3 AND i.order_id < 400)")
            assert cur.fetchall()[0][0] >= 0
            cur.execute("SELECT COUNT(*) FROM t_order")
            assert cur.fetchall() == ((len(ROWS["t_order"]),),)
    finally:
        conn.close()


def test_federation_repeats_on_one_session(fed: FedEnv) -> None:
    """Scratch tables are dropped after each statement: the same federated statement runs again and again
    on one connection (text and prepared)."""
    sql = "SELECT COUNT(*) FROM t_order a JOIN t_order b ON a.created = b.created AND a.order_id < b.order_id"
    proxy_client, oracle_client = fed.clients["prepared"]
    expected = oracle_client.run(sql)[1]
    for _ in range(3):
        assert proxy_client.run(sql)[1] == expected
        assert fed.clients["text"][0].run(sql)[1] == expected


def _text(fed: FedEnv, sql: str) -> list[tuple[object, ...]]:
    return fed.clients["text"][0].run(sql)[1]


FEDERATED = "SELECT COUNT(*) FROM t_order o WHERE o.user_id = 3 AND o.order_id IN (SELECT order_id FROM t_order_item)"


def test_preview_says_federated(fed: FedEnv) -> None:
    """PREVIEW shows the copies (the pushed-down sharding condition reads one data source) and the answer."""
    rows = _text(fed, f"PREVIEW {FEDERATED}")
    steps = [(ds, sql.split("*/")[0]) for ds, sql in rows]
    assert all("federation" in s for _, s in steps), rows
    copies = [r for r in rows if "federation copy" in str(r[1])]
    assert {r[0] for r in copies if "t_order_" in str(r[1]) and "t_order_item" not in str(r[1])} == {"ds_1"}
    assert len([r for r in copies if "t_order_item" in str(r[1])]) == 4  # no condition: every node
    assert "federation answer" in str(rows[-1][1]) and "__shardproxy_fed_0" in str(rows[-1][1])


@pytest.mark.parametrize("mode", MODES)
def test_explain_says_federated(fed: FedEnv, mode: str) -> None:
    names, rows, _ = fed.clients[mode][0].run(f"EXPLAIN {FEDERATED}")
    assert names == ("federation_step", "data_source_name", "actual_sql")
    assert [r[0] for r in rows][-1] == "answer" and {r[0] for r in rows[:-1]} == {"copy"}


def test_sql_prepare_execute_federates(fed: FedEnv) -> None:
    """PREPARE / EXECUTE ... USING as SQL: the statement is run as text with the user variables' values."""
    proxy_client, oracle_client = fed.clients["text"]
    sql = ("SELECT o.order_id FROM t_order o WHERE o.user_id = ? AND o.amount > "
           "(SELECT AVG(amount) FROM t_order) ORDER BY o.order_id")
    for client in (proxy_client, oracle_client):
        client.run(f"PREPARE fed_stmt FROM '{sql}'")
        client.run("SET @u = 7")
    got, expected = proxy_client.run("EXECUTE fed_stmt USING @u")[1], oracle_client.run("EXECUTE fed_stmt USING @u")[1]
    assert got and _typed(got) == _typed(expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sql", [
    "SELECT o.nope FROM t_order o WHERE o.order_id IN (SELECT order_id FROM t_order_item)",
    "SELECT t_order.nope FROM t_order WHERE t_order.amount > (SELECT AVG(amount) FROM t_order_item i)",
    "SELECT order_id FROM t_order WHERE order_id = (SELECT order_id FROM t_order_item)",
])
def test_federated_errors_are_the_oracles(fed: FedEnv, sql: str, mode: str) -> None:
    """MariaDB's own error for the statement, in the client's names (no scratch table named)."""
    proxy_client, oracle_client = fed.clients[mode]
    with pytest.raises(Refused) as want:
        oracle_client.run(sql)
    with pytest.raises(Refused) as got:
        proxy_client.run(sql)
    assert (got.value.errno, got.value.message) == (want.value.errno, want.value.message)
    assert proxy_client.run("SELECT COUNT(*) FROM t_address")[1] == [(60,)]  # the session goes on


def test_federation_inside_an_xa_transaction(fed: FedEnv) -> None:
    """Under the XA rule the copies live on the XA branches' connections: the transaction's own rows are
    seen, the branches roll back, and autocommit statements are federated as well."""
    sql = "SELECT order_id FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item WHERE qty = 78)"
    conn = fed.xa.connect("sharding_db", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("INSERT INTO t_order_item (order_item_id, order_id, user_id, qty, unit_price, sku) "
                        f"VALUES (888888882, {_O[0]}, {_O[1]}, 78, 1.00, 'A-1')")
            cur.execute(sql)
            assert cur.fetchall() == ((_O[0],),)
            cur.execute("ROLLBACK")
            cur.execute(sql)
            assert cur.fetchall() == ()
            cur.execute("SELECT COUNT(*) FROM t_order a JOIN t_order b ON a.created = b.created "
                        "AND a.order_id < b.order_id")
            assert cur.fetchall()[0][0] > 0
    finally:
        conn.close()
