"""The mask and shadow RDL through the proxy, against a real MariaDB: each statement changes the running proxy
(the next SELECT is masked, the next INSERT lands on the shadow database), is written back to the database's
YAML, and survives a restart; what ShardingSphere refuses is refused.

* `frm`: one data source (pass-through until a mask rule exists) holding t_user;
* `frs`: data sources `db` and `shadow_db` (t_order on `db`; `shadow_db` gets its copy once the shadow rule
  stands for both, so that before it t_order is one single table).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest
import yaml

from proxy.sandbox import MariaDBServer
from routing.mask.algorithms import make_algorithm
from tests.integration.etcd_server import EtcdServer, etcd
from tests.integration.harness import RunningProxy, start_proxy, write_conf

__all__ = ["etcd"]  # the fixture

USERS = [(1, "111111", "13900001111"), (2, "222222", "13900002222")]
ORDER_DDL = "CREATE TABLE t_order (order_id INT PRIMARY KEY, user_id INT NOT NULL)"


@dataclass
class Env:
    proxy: RunningProxy
    server: MariaDBServer
    conf: Path

    def restart(self) -> None:
        self.proxy.stop()
        self.proxy = start_proxy(self.conf)

    def yaml(self, database: str) -> dict[str, Any]:
        text = (self.conf / f"database-{database}.yaml").read_text()
        return yaml.load(text, Loader=_TaggedLoader)

    def rows(self, database: str, sql: str) -> list[tuple[Any, ...]]:
        with self.proxy.connect(database) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()]

    def columns(self, database: str, sql: str) -> list[str]:
        with self.proxy.connect(database) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return [d[0] for d in cur.description]

    def run(self, database: str, *statements: str) -> None:
        with self.proxy.connect(database) as conn, conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)

    def refused(self, database: str, sql: str) -> tuple[int, str]:
        with self.proxy.connect(database) as conn, conn.cursor() as cur, pytest.raises(pymysql.MySQLError) as info:
            cur.execute(sql)
        return info.value.args[0], info.value.args[1]


class _TaggedLoader(yaml.SafeLoader):
    """The rules' tags (`!MASK`) kept as a `__tag__` key, to read what the proxy wrote."""


_TaggedLoader.add_multi_constructor(
    "!", lambda loader, tag, node: {"__tag__": tag, **loader.construct_mapping(node, deep=True)}
)


def _rule(doc: dict[str, Any], tag: str) -> dict[str, Any] | None:
    return next((r for r in doc.get("rules") or [] if r.get("__tag__") == tag), None)


@pytest.fixture(scope="module")
def env(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for name in ("frd_mask", "frd_db", "frd_shadow"):
        mariadb.execute(f"DROP DATABASE IF EXISTS {name}")
        mariadb.execute(f"CREATE DATABASE {name}")
    mariadb.execute(
        "CREATE TABLE t_user (user_id INT PRIMARY KEY, password VARCHAR(20), phone VARCHAR(20))", "frd_mask"
    )
    for row in USERS:
        mariadb.execute("INSERT INTO t_user VALUES (%s, %s, %s)", "frd_mask", args=row)
    mariadb.execute(ORDER_DDL, "frd_db")
    conf = write_conf(
        tmp_path_factory.mktemp("feature-rdl-conf"),
        {
            "frm": {"ds": (mariadb, "frd_mask")},
            "frs": {"db": (mariadb, "frd_db"), "shadow_db": (mariadb, "frd_shadow")},
        },
        rules_yaml={"frs": '- !SINGLE\n  tables: ["*.*"]\n'},
    )
    env = Env(start_proxy(conf), mariadb, conf)
    try:
        yield env
    finally:
        env.proxy.stop()


# --- mask -------------------------------------------------------------------------------------------------------

KEEP = "TYPE(NAME='KEEP_FIRST_N_LAST_M', PROPERTIES('first-n'=3, 'last-m'=4, 'replace-char'='*'))"
FROM = "TYPE(NAME='MASK_FROM_X_TO_Y', PROPERTIES('from-x'=1, 'to-y'=2, 'replace-char'='#'))"
MASK_CREATE = f"CREATE MASK RULE t_user (COLUMNS((NAME=phone, {KEEP}), (NAME=password, TYPE(NAME='MD5'))))"
MASK_ALTER = f"ALTER MASK RULE t_user (COLUMNS((NAME=phone, {FROM})))"
KEEP_PROPS = '{"first-n":"3","last-m":"4","replace-char":"*"}'
FROM_PROPS = '{"from-x":"1","replace-char":"#","to-y":"2"}'


def _masked(algorithms: dict[int, Any]) -> list[tuple[Any, ...]]:
    return [tuple(algorithms[i].mask(v) if i in algorithms else v for i, v in enumerate(row)) for row in USERS]


def test_mask_rule_create_alter_drop(env: Env) -> None:
    sql = "SELECT user_id, password, phone FROM t_user ORDER BY user_id"
    assert env.rows("frm", sql) == USERS  # nothing masked yet
    env.run("frm", MASK_CREATE)
    try:
        assert env.columns("frm", "SHOW MASK RULES") == ["table", "column", "algorithm_type", "algorithm_props"]
        assert env.rows("frm", "SHOW MASK RULES") == [
            ("t_user", "phone", "KEEP_FIRST_N_LAST_M", KEEP_PROPS),
            ("t_user", "password", "MD5", ""),
        ]
        assert env.rows("frm", "COUNT MASK RULE") == [("mask", "frm", "1")]
        keep = make_algorithm("KEEP_FIRST_N_LAST_M", {"first-n": 3, "last-m": 4, "replace-char": "*"})
        assert env.rows("frm", sql) == _masked({1: make_algorithm("MD5"), 2: keep})
        rule = _rule(env.yaml("frm"), "MASK")
        assert rule is not None and rule["tables"]["t_user"]["columns"]["phone"] == {
            "maskAlgorithm": "t_user_phone_keep_first_n_last_m"
        }
        env.restart()  # the file holds the rule
        assert env.rows("frm", sql) == _masked({1: make_algorithm("MD5"), 2: keep})
        env.run("frm", "CREATE MASK RULE IF NOT EXISTS t_user (COLUMNS((NAME=password, TYPE(NAME='MD5'))))")
        env.run("frm", MASK_ALTER)
        assert env.rows("frm", "SHOW MASK RULE t_user") == [("t_user", "phone", "MASK_FROM_X_TO_Y", FROM_PROPS)]
        from_ = make_algorithm("MASK_FROM_X_TO_Y", {"from-x": 1, "to-y": 2, "replace-char": "#"})
        assert env.rows("frm", sql) == _masked({2: from_})
        rule = _rule(env.yaml("frm"), "MASK")
        assert rule is not None and list(rule["maskAlgorithms"]) == ["t_user_phone_mask_from_x_to_y"]
    finally:
        env.run("frm", "DROP MASK RULE IF EXISTS t_user")
    assert env.rows("frm", "SHOW MASK RULES") == [] and env.rows("frm", "COUNT MASK RULE") == []
    assert env.rows("frm", sql) == USERS
    assert _rule(env.yaml("frm"), "MASK") is None
    env.restart()
    assert env.rows("frm", sql) == USERS


def test_prepared_select_is_masked_once_the_rule_exists(env: Env) -> None:
    """On a routed database (frs): a SELECT prepared before CREATE MASK RULE is masked when executed after it,
    and no longer after DROP MASK RULE."""
    env.run("frs", "INSERT INTO t_order VALUES (21, 42)")
    conn = mysql.connector.connect(
        host=env.proxy.host, port=env.proxy.port, user="root", password="root", database="frs", autocommit=True
    )
    try:
        cur = conn.cursor(prepared=True)
        sql = "SELECT order_id, user_id FROM t_order WHERE order_id = ?"
        cur.execute(sql, (21,))
        assert cur.fetchall() == [(21, 42)]
        env.run("frs", "CREATE MASK RULE t_order (COLUMNS((NAME=user_id, TYPE(NAME='MD5'))))")
        cur.execute(sql, (21,))
        assert [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in cur.fetchall()] == [
            (21, make_algorithm("MD5").mask("42"))
        ]
        env.run("frs", "DROP MASK RULE t_order")
        cur.execute(sql, (21,))
        assert cur.fetchall() == [(21, 42)]
    finally:
        conn.close()
        env.run("frs", "DROP MASK RULE IF EXISTS t_order", "DELETE FROM t_order")


# ShardingSphere 5.5.2's e2e RDL cases for mask (test/e2e/sql/src/test/resources/cases/rdl/e2e-rdl-*.xml and their
# dataset/distsql_rdl/*_mask_rule.xml): (initial statements, the statement, SHOW MASK RULES after it)
E2E_CREATE = "CREATE MASK RULE t_mask (COLUMNS((NAME=order_id,TYPE(NAME='MD5'))));"
E2E_RDL = [
    ([], E2E_CREATE, [("t_mask", "order_id", "MD5", "")]),
    (
        [E2E_CREATE],
        "ALTER MASK RULE t_mask (COLUMNS((NAME=order_id, TYPE(NAME='MASK_FROM_X_TO_Y', PROPERTIES('from-x'=1, "
        "'to-y'=2, 'replace-char'='*')))));",
        [("t_mask", "order_id", "MASK_FROM_X_TO_Y", '{"from-x":"1","replace-char":"*","to-y":"2"}')],
    ),
    ([E2E_CREATE], "DROP MASK RULE t_mask;", []),
]


@pytest.mark.parametrize(("initial", "sql", "rows"), E2E_RDL, ids=["create", "alter", "drop"])
def test_shardingsphere_e2e_mask_rdl(env: Env, initial: list[str], sql: str, rows: list[tuple[str, ...]]) -> None:
    try:
        env.run("frm", *initial, sql)
        assert env.rows("frm", "SHOW MASK RULES;") == rows
    finally:
        env.run("frm", "DROP MASK RULE IF EXISTS t_mask")


# (statement, errno, words of the message); run with no mask rule but t_user's
MASK_REFUSALS = [
    (MASK_CREATE, 1105, "Duplicate mask rule names `t_user` in database `frm`"),
    (MASK_ALTER.replace("t_user", "t_none"), 1105, "Mask rule `t_none` does not exist in database `frm`"),
    ("DROP MASK RULE t_none", 1105, "Mask rule `t_none` does not exist in database `frm`"),
    ("CREATE MASK RULE t_x (COLUMNS((NAME=a, TYPE(NAME='NOPE'))))", 1105, "unknown mask algorithm type 'NOPE'"),
    (
        "CREATE MASK RULE t_x (COLUMNS((NAME=a, TYPE(NAME='KEEP_FIRST_N_LAST_M', PROPERTIES('first-n'=0, "
        "'last-m'=1, 'replace-char'='*')))))",
        1105,
        "first-n must be a positive integer",
    ),
    ("CREATE MASK RULE t_x (COLUMNS((NAME=a)))", 1064, "a column needs NAME= and TYPE(NAME='...')"),
    ("CREATE MASK RULE t_x (COLUMNS((NAME=a, TYPE(NAME='MD5')))), T_X (COLUMNS((NAME=b, TYPE(NAME='MD5'))))", 1105,
     "Duplicate mask rule names `T_X` in the statement"),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "errno", "words"), MASK_REFUSALS, ids=[c[2][:50] for c in MASK_REFUSALS])
def test_mask_rdl_refusals(env: Env, sql: str, errno: int, words: str) -> None:
    env.run("frm", MASK_CREATE)
    try:
        before = (env.conf / "database-frm.yaml").read_text()
        code, message = env.refused("frm", sql)
        assert (code, words in message) == (errno, True), message
        assert (env.conf / "database-frm.yaml").read_text() == before  # nothing was written
    finally:
        env.run("frm", "DROP MASK RULE t_user")


# --- shadow -----------------------------------------------------------------------------------------------------

INSERT_MATCH = "TYPE(NAME='VALUE_MATCH', PROPERTIES('operation'='insert', 'column'='user_id', 'value'=0))"
SHADOW_CREATE = f"CREATE SHADOW RULE shadow_group (SOURCE=db, SHADOW=shadow_db, t_order ({INSERT_MATCH}))"
SHADOW_ALTER = (
    "ALTER SHADOW RULE shadow_group (SOURCE=db, SHADOW=shadow_db, t_order (TYPE(NAME='REGEX_MATCH', "
    "PROPERTIES('operation'='insert', 'column'='user_id', 'regex'='[89]')), TYPE(NAME='SQL_HINT')))"
)
INSERT_PROPS = '{"column":"user_id","operation":"insert","value":"0"}'
REGEX_PROPS = '{"column":"user_id","operation":"insert","regex":"[89]"}'


def _landed(env: Env, order_id: int) -> list[str]:
    """The physical databases holding the order (frd_shadow has no t_order while no shadow rule names it)."""
    found = env.server.execute(
        "SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME = 't_order' AND TABLE_SCHEMA IN "
        "('frd_db', 'frd_shadow') ORDER BY TABLE_SCHEMA"
    )
    return [db for (db,) in found if env.server.execute(f"SELECT 1 FROM t_order WHERE order_id = {order_id}", db)]


def _shadow_state(env: Env) -> dict[str, list[tuple[Any, ...]]]:
    return {
        sql: env.rows("frs", sql)
        for sql in (
            "SHOW SHADOW RULES",
            "SHOW SHADOW TABLE RULES",
            "SHOW SHADOW ALGORITHMS",
            "SHOW DEFAULT SHADOW ALGORITHM",
            "COUNT SHADOW RULE",
        )
    }


def test_shadow_rule_create_alter_drop(env: Env) -> None:
    env.run("frs", "INSERT INTO t_order VALUES (1, 0)")
    assert _landed(env, 1) == ["frd_db"]  # no rule: production
    env.run("frs", SHADOW_CREATE)
    env.server.execute(ORDER_DDL, "frd_shadow")
    try:
        state = _shadow_state(env)
        assert state == {
            "SHOW SHADOW RULES": [("t_order", "shadow_group", "db", "shadow_db", "VALUE_MATCH", INSERT_PROPS)],
            "SHOW SHADOW TABLE RULES": [("t_order", "shadow_group_t_order_value_match_0")],
            "SHOW SHADOW ALGORITHMS": [("shadow_group_t_order_value_match_0", "VALUE_MATCH", INSERT_PROPS, "false")],
            "SHOW DEFAULT SHADOW ALGORITHM": [],
            "COUNT SHADOW RULE": [("shadow", "frs", "1")],
        }
        assert env.rows("frs", "SHOW RULES USED STORAGE UNIT shadow_db") == [("shadow", "shadow_group")]
        code, message = env.refused("frs", "UNREGISTER STORAGE UNIT db")
        assert code == 1105
        assert "Storage unit `db` is still used by shadow rule shadow_group" in message, message
        env.run("frs", "INSERT INTO t_order VALUES (2, 0)", "INSERT INTO t_order VALUES (3, 7)")
        assert (_landed(env, 2), _landed(env, 3)) == (["frd_shadow"], ["frd_db"])
        env.run("frs", "CREATE DEFAULT SHADOW ALGORITHM TYPE(NAME='SQL_HINT')")
        assert env.rows("frs", "SHOW DEFAULT SHADOW ALGORITHM") == [("default_shadow_algorithm", "SQL_HINT", "")]
        env.restart()
        assert _shadow_state(env) == {
            **state,
            "SHOW SHADOW ALGORITHMS": [
                *state["SHOW SHADOW ALGORITHMS"],
                ("default_shadow_algorithm", "SQL_HINT", "", "true"),
            ],
            "SHOW DEFAULT SHADOW ALGORITHM": [("default_shadow_algorithm", "SQL_HINT", "")],
        }
        env.run("frs", "INSERT INTO t_order VALUES (4, 0)")
        assert _landed(env, 4) == ["frd_shadow"]  # after the restart too
        env.run("frs", SHADOW_ALTER)
        assert env.rows("frs", "SHOW SHADOW TABLE RULE t_order") == [
            ("t_order", "shadow_group_t_order_regex_match_0,shadow_group_t_order_sql_hint_1")
        ]
        env.run(
            "frs",
            "INSERT INTO t_order VALUES (5, 0)",
            "INSERT INTO t_order VALUES (6, 8)",
            "/* SHARDINGSPHERE_HINT: SHADOW=true */ INSERT INTO t_order VALUES (7, 1)",
        )
        assert [_landed(env, i) for i in (5, 6, 7)] == [["frd_db"], ["frd_shadow"], ["frd_shadow"]]
        doc = _rule(env.yaml("frs"), "SHADOW")
        assert doc is not None and list(doc["shadowAlgorithms"]) == [
            "default_shadow_algorithm",
            "shadow_group_t_order_regex_match_0",
            "shadow_group_t_order_sql_hint_1",
        ]  # the VALUE_MATCH nothing uses any more went with the ALTER
        env.run("frs", "DROP DEFAULT SHADOW ALGORITHM", "DROP DEFAULT SHADOW ALGORITHM IF EXISTS")
        assert env.rows("frs", "SHOW DEFAULT SHADOW ALGORITHM") == []
    finally:
        env.server.execute("DROP TABLE IF EXISTS t_order", "frd_shadow")
        env.run("frs", "DROP SHADOW RULE IF EXISTS shadow_group", "DROP DEFAULT SHADOW ALGORITHM IF EXISTS")
        env.run("frs", "DELETE FROM t_order")
    assert _shadow_state(env) == {
        "SHOW SHADOW RULES": [],
        "SHOW SHADOW TABLE RULES": [],
        "SHOW SHADOW ALGORITHMS": [],
        "SHOW DEFAULT SHADOW ALGORITHM": [],
        "COUNT SHADOW RULE": [],
    }
    assert _rule(env.yaml("frs"), "SHADOW") is None


def test_prepared_statements_follow_the_shadow_rule(env: Env) -> None:
    """A statement prepared before the rule changes is routed by the rule in force when it is executed."""
    conn = mysql.connector.connect(
        host=env.proxy.host, port=env.proxy.port, user="root", password="root", database="frs", autocommit=True
    )
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("INSERT INTO t_order VALUES (?, ?)", (11, 0))
        env.run("frs", SHADOW_CREATE)
        env.server.execute(ORDER_DDL, "frd_shadow")
        cur.execute("INSERT INTO t_order VALUES (?, ?)", (12, 0))
        cur.execute("INSERT INTO t_order VALUES (?, ?)", (13, 4))
        assert [_landed(env, i) for i in (11, 12, 13)] == [["frd_db"], ["frd_shadow"], ["frd_db"]]
        env.run("frs", "DROP SHADOW RULE shadow_group")
        env.server.execute("DROP TABLE t_order", "frd_shadow")
        cur.execute("INSERT INTO t_order VALUES (?, ?)", (14, 0))
        assert _landed(env, 14) == ["frd_db"]
    finally:
        conn.close()
        env.server.execute("DROP TABLE IF EXISTS t_order", "frd_shadow")
        env.run("frs", "DROP SHADOW RULE IF EXISTS shadow_group", "DELETE FROM t_order")


# (statement, words of the message: ERR 1105 unless a syntax error); run with SHADOW_CREATE in place
SHADOW_REFUSALS = [
    (SHADOW_CREATE, "Duplicate shadow rule names `shadow_group` in database `frs`"),
    (SHADOW_ALTER.replace("shadow_group", "other_group"), "Shadow rules `other_group` do not exist in database `frs`"),
    ("DROP SHADOW RULE other_group", "Shadow rules `other_group` do not exist in database `frs`"),
    (SHADOW_CREATE.replace("shadow_group", "g2").replace("SHADOW=shadow_db", "SHADOW=nope"),
     "Storage units `nope` do not exist in database `frs`"),
    (SHADOW_CREATE.replace("shadow_group", "db"), "Invalid shadow rules `db`"),
    (SHADOW_CREATE.replace("shadow_group", "g2").replace("VALUE_MATCH", "NOPE"),
     "unknown shadow algorithm type 'NOPE'"),
    ("CREATE SHADOW RULE g2 (SOURCE=db, SHADOW=shadow_db, t_x (TYPE(NAME='VALUE_MATCH', PROPERTIES('operation'="
     "'insert', 'value'=1))))", "Column shadow algorithm column cannot be null"),
    ("DROP SHADOW ALGORITHM shadow_group_t_order_value_match_0",
     "Shadow algorithm `shadow_group_t_order_value_match_0` in database `frs` is still in use by shadow table "
     "`t_order`"),
    ("DROP SHADOW ALGORITHM nope", "Shadow algorithms `nope` do not exist in database `frs`"),
    ("DROP DEFAULT SHADOW ALGORITHM", "Default shadow algorithm does not exist in database `frs`"),
    ("ALTER DEFAULT SHADOW ALGORITHM TYPE(NAME='SQL_HINT')", "`default_shadow_algorithm` does not exist"),
    ("CREATE DEFAULT SHADOW ALGORITHM TYPE(NAME='VALUE_MATCH', PROPERTIES('operation'='insert', 'column'='a', "
     "'value'=1))", "the default shadow algorithm must be a defined SQL_HINT algorithm"),
    ("CREATE SHADOW RULE g2 (SOURCE=db, t_x (TYPE(NAME='SQL_HINT')))", "needs SOURCE=..., SHADOW=..."),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "words"), SHADOW_REFUSALS, ids=[c[1][:50] for c in SHADOW_REFUSALS])
def test_shadow_rdl_refusals(env: Env, sql: str, words: str) -> None:
    env.run("frs", SHADOW_CREATE)
    try:
        before = (env.conf / "database-frs.yaml").read_text()
        code, message = env.refused("frs", sql)
        assert words in message and code in (1105, 1064), message
        assert (env.conf / "database-frs.yaml").read_text() == before
    finally:
        env.run("frs", "DROP SHADOW RULE shadow_group")


def test_plugins(env: Env) -> None:
    assert env.columns("frm", "SHOW MASK ALGORITHM PLUGINS") == ["type", "type_aliases", "description"]
    assert [r[0] for r in env.rows("frm", "SHOW MASK ALGORITHM PLUGINS")] == [
        "MD5", "KEEP_FIRST_N_LAST_M", "KEEP_FROM_X_TO_Y", "MASK_AFTER_SPECIAL_CHARS", "MASK_BEFORE_SPECIAL_CHARS",
        "MASK_FIRST_N_LAST_M", "MASK_FROM_X_TO_Y", "GENERIC_TABLE_RANDOM_REPLACE",
    ]  # fmt: skip
    assert env.rows("frs", "SHOW SHADOW ALGORITHM PLUGINS") == [("SQL_HINT", "", ""), ("REGEX_MATCH", "", ""),
                                                                ("VALUE_MATCH", "", "")]  # fmt: skip


# --- Cluster mode -----------------------------------------------------------------------------------------------


def _cluster_conf(conf: Path, server: MariaDBServer, etcd: EtcdServer, namespace: str) -> Path:
    write_conf(
        conf,
        {"frc": {"db": (server, "frc_db"), "shadow_db": (server, "frc_shadow")}},
        rules_yaml={"frc": '- !SINGLE\n  tables: ["*.*"]\n'},
    )
    doc = yaml.safe_load((conf / "global.yaml").read_text())
    doc["mode"] = {"type": "Cluster", "repository": {"type": "etcd", "props": {
        "namespace": namespace, "server-lists": f"http://{etcd.endpoint}", "timeToLiveSeconds": 2,
        "connectionTimeout": 2}}}  # fmt: skip
    (conf / "global.yaml").write_text(yaml.safe_dump(doc))
    return conf


def _within(check: Any, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the change did not reach the other proxy"
        time.sleep(0.05)


def test_mask_and_shadow_rdl_travel_through_the_cluster(
    mariadb: MariaDBServer, etcd: EtcdServer, tmp_path: Path
) -> None:
    for name in ("frc_db", "frc_shadow"):
        mariadb.execute(f"DROP DATABASE IF EXISTS {name}")
        mariadb.execute(f"CREATE DATABASE {name}")
    mariadb.execute(ORDER_DDL, "frc_db")
    namespace = f"frc_{uuid.uuid4().hex[:8]}"
    a = start_proxy(_cluster_conf(tmp_path / "a", mariadb, etcd, namespace))
    c: RunningProxy | None = None
    try:
        c = start_proxy(_cluster_conf(tmp_path / "c", mariadb, etcd, namespace))
        a.query(SHADOW_CREATE, "frc")
        mariadb.execute(ORDER_DDL, "frc_shadow")
        shown = [("t_order", "shadow_group", "db", "shadow_db", "VALUE_MATCH", INSERT_PROPS)]
        _within(lambda: c is not None and c.query("SHOW SHADOW RULES", "frc") == shown)
        c.query("INSERT INTO t_order VALUES (1, 0)", "frc")  # through the other proxy: shadow
        c.query("INSERT INTO t_order VALUES (2, 5)", "frc")
        assert mariadb.execute("SELECT order_id FROM t_order", "frc_shadow") == [(1,)]
        assert mariadb.execute("SELECT order_id FROM t_order", "frc_db") == [(2,)]
        a.query("CREATE MASK RULE t_order (COLUMNS((NAME=user_id, TYPE(NAME='MD5'))))", "frc")
        md5 = make_algorithm("MD5").mask("5")
        _within(lambda: c is not None and c.query("SELECT user_id FROM t_order WHERE order_id = 2", "frc") == [(md5,)])
        a.query("DROP MASK RULE t_order", "frc")
        a.query("DROP SHADOW RULE shadow_group", "frc")
        mariadb.execute("DROP TABLE t_order", "frc_shadow")
        _within(lambda: c is not None and c.query("SHOW SHADOW RULES", "frc") == [])
        c.query("INSERT INTO t_order VALUES (3, 0)", "frc")  # no rule: production
        assert sorted(mariadb.execute("SELECT order_id, user_id FROM t_order", "frc_db")) == [(2, 5), (3, 0)]
        assert "SHADOW" not in (tmp_path / "a" / "database-frc.yaml").read_text()  # the registry keeps it
    finally:
        if c is not None:
            c.stop()
        a.stop()
