"""`!MASK` and `!SHADOW` through the proxy, against real MariaDB servers.

* mask: `msk` holds the e2e `mask` scenario's t_user (sharded by user_id % 2 over two servers) and a single table
  t_phone; every SELECT answers what the oracle (one database holding the same rows) answers with the masked
  columns put through their algorithms, as text and as prepared statements;
* shadow: `shd` is the e2e `shadow` scenario (one production and one shadow database), `shs` its `sharding_and_shadow`
  (t_shadow sharded by order_id % 2 over two shadow data sources); each statement's rows land (or are read) where
  ShardingSphere's e2e datasets put them, read on the physical databases themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from proxy.sandbox import MariaDBServer
from routing.mask.algorithms import make_algorithm
from tests.integration.harness import RunningProxy, start_proxy, write_conf

MASK_RULES = """\
- !SHARDING
  tables:
    t_user:
      actualDataNodes: ds_${0..1}.t_user
      databaseStrategy:
        standard: {shardingColumn: user_id, shardingAlgorithmName: by_user}
  shardingAlgorithms:
    by_user:
      type: INLINE
      props: {algorithm-expression: 'ds_${user_id % 2}', allow-range-query-with-inline-sharding: true}
- !SINGLE
  tables: ["*.*"]
- !MASK
  maskAlgorithms:
    md5_mask: {type: MD5}
    mask_before_special_chars_mask: {type: MASK_BEFORE_SPECIAL_CHARS, props: {special-chars: '@', replace-char: '*'}}
    keep_first_n_last_m_mask: {type: KEEP_FIRST_N_LAST_M, props: {first-n: 3, last-m: 4, replace-char: '*'}}
    mask_from: {type: MASK_FROM_X_TO_Y, props: {from-x: 1, to-y: 3, replace-char: '#'}}
  tables:
    t_user:
      columns:
        password: {maskAlgorithm: md5_mask}
        email: {maskAlgorithm: mask_before_special_chars_mask}
        telephone: {maskAlgorithm: keep_first_n_last_m_mask}
    t_phone:
      columns:
        phone: {maskAlgorithm: mask_from}
        n: {maskAlgorithm: md5_mask}
"""
USER_DDL = (
    "CREATE TABLE t_user (user_id INT PRIMARY KEY, user_name VARCHAR(50) NOT NULL, password VARCHAR(50) NOT "
    "NULL, email VARCHAR(50) NOT NULL, telephone CHAR(11) NOT NULL, creation_date DATE NOT NULL)"
)
PHONE_DDL = "CREATE TABLE t_phone (id INT PRIMARY KEY, phone VARCHAR(20), n INT)"
USERS = [
    (10, "zhangsan", "111111", "zhangsan@gmail.com", "12345678900"),
    (11, "lisi", "222222", "lisi@gmail.com", "12345678901"),
    (12, "wangwu", "333333", "wangwu@gmail.com", "12345678902"),
    (13, "zhaoliu", "444444", "zhaoliu@gmail.com", "12345678903"),
    (14, "", "", "@x", ""),
]
PHONES = [(1, "13900001111", 42), (2, None, None), (3, "ab", 7)]

MD5, BEFORE, KEEP = (
    make_algorithm("MD5"),
    make_algorithm("MASK_BEFORE_SPECIAL_CHARS", {"special-chars": "@", "replace-char": "*"}),
    make_algorithm("KEEP_FIRST_N_LAST_M", {"first-n": 3, "last-m": 4, "replace-char": "*"}),
)
FROM = make_algorithm("MASK_FROM_X_TO_Y", {"from-x": 1, "to-y": 3, "replace-char": "#"})

# (SQL, parameters, {result column index: the algorithm that masks it})
MASK_CASES = [
    ("SELECT user_id, password, email, telephone FROM t_user WHERE user_id = 10", (), {1: MD5, 2: BEFORE, 3: KEEP}),
    ("SELECT user_id, password, email, telephone FROM t_user WHERE user_id = %s", (11,), {1: MD5, 2: BEFORE, 3: KEEP}),
    ("SELECT * FROM t_user ORDER BY user_id", (), {2: MD5, 3: BEFORE, 4: KEEP}),
    ("SELECT user_id, password FROM t_user", (), {1: MD5}),
    ("SELECT u.email AS e, u.user_id FROM t_user u ORDER BY u.email DESC", (), {0: BEFORE}),
    ("SELECT telephone FROM t_user WHERE user_id IN (10, 11, 12) ORDER BY telephone DESC LIMIT 1, 2", (), {0: KEEP}),
    ("SELECT email, COUNT(*) FROM t_user GROUP BY email ORDER BY email", (), {0: BEFORE}),
    ("SELECT CONCAT(email, ''), MAX(telephone), user_name FROM t_user WHERE user_id = 10", (), {}),
    ("SELECT DISTINCT telephone FROM t_user WHERE user_id > %s ORDER BY telephone", (10,), {0: KEEP}),
    ("SELECT id, phone, n FROM t_phone ORDER BY id", (), {1: FROM, 2: MD5}),
    ("SELECT p.phone AS x, q.id FROM t_phone p JOIN t_phone q ON p.id = q.id WHERE p.id = %s", (1,), {0: FROM}),
    ("SELECT phone FROM t_phone WHERE phone = %s", ("13900001111",), {0: FROM}),  # WHERE on the real value
]


def _expected(rows: list[tuple[Any, ...]], masks: dict[int, Any]) -> list[tuple[Any, ...]]:
    out = []
    for row in rows:
        values = list(row)
        for i, algorithm in masks.items():
            values[i] = None if values[i] is None else algorithm.mask(str(values[i]))
        out.append(tuple(values))
    return out


@dataclass
class Env:
    proxy: RunningProxy
    servers: list[MariaDBServer]


@pytest.fixture(scope="module")
def env(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    s0, s1 = mariadb_shards
    physical = {
        "msk_0": s0,
        "msk_1": s1,
        "msk_oracle": s0,
        "shd_db": s0,
        "shd_shadow": s0,
        "shs_db_0": s0,
        "shs_db_1": s1,
        "shs_shadow_0": s0,
        "shs_shadow_1": s1,
    }
    for name, server in physical.items():
        server.execute(f"DROP DATABASE IF EXISTS {name}")
        server.execute(f"CREATE DATABASE {name}")
    for name in ("msk_0", "msk_1", "msk_oracle"):
        physical[name].execute(USER_DDL, name)
    for name in ("msk_0", "msk_oracle"):
        physical[name].execute(PHONE_DDL, name)
    for row in USERS:
        for name in (f"msk_{row[0] % 2}", "msk_oracle"):
            physical[name].execute("INSERT INTO t_user VALUES (%s, %s, %s, %s, %s, '2017-08-08')", name, args=row)
    for row in PHONES:
        for name in ("msk_0", "msk_oracle"):
            physical[name].execute("INSERT INTO t_phone VALUES (%s, %s, %s)", name, args=row)
    for name in ("shd_db", "shd_shadow", "shs_db_0", "shs_db_1", "shs_shadow_0", "shs_shadow_1"):
        physical[name].execute(SHADOW_DDL, name)
        physical[name].execute(MERCHANT_DDL, name)
        physical[name].execute("CREATE TABLE t_plain (id INT PRIMARY KEY, user_id INT)", name)
    databases = {
        "msk": {"ds_0": (s0, "msk_0"), "ds_1": (s1, "msk_1")},
        "shd": {"db": (s0, "shd_db"), "shadow_db": (s0, "shd_shadow")},
        "shs": {
            "db_0": (s0, "shs_db_0"),
            "db_1": (s1, "shs_db_1"),
            "shadow_db_0": (s0, "shs_shadow_0"),
            "shadow_db_1": (s1, "shs_shadow_1"),
        },
    }
    rules = {"msk": MASK_RULES, "shd": SHADOW_RULES, "shs": SHARDING_SHADOW_RULES}
    proxy = start_proxy(Path(write_conf(tmp_path_factory.mktemp("mask-shadow-conf"), databases, rules_yaml=rules)))
    try:
        yield Env(proxy, [s0, s1])
    finally:
        proxy.stop()


def _proxy_rows(env: Env, sql: str, params: tuple[Any, ...], prepared: bool) -> list[tuple[Any, ...]]:
    if not prepared:
        with env.proxy.connect("msk") as conn, conn.cursor() as cur:
            cur.execute(sql, params or None)
            return list(cur.fetchall())
    conn = mysql.connector.connect(
        host=env.proxy.host, port=env.proxy.port, user="root", password="root", database="msk", autocommit=True
    )
    try:
        cur = conn.cursor(prepared=True)
        cur.execute(sql.replace("%s", "?"), params or ())
        return [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in cur.fetchall()]
    finally:
        conn.close()


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize(("sql", "params", "masks"), MASK_CASES, ids=[c[0][:60] for c in MASK_CASES])
def test_masked_select(env: Env, sql: str, params: tuple[Any, ...], masks: dict[int, Any], prepared: bool) -> None:
    oracle = env.servers[0].execute(sql, "msk_oracle", args=params or None)
    expected = _expected(oracle, masks)
    got = _proxy_rows(env, sql, params, prepared)
    if "ORDER BY" not in sql:
        got, expected = sorted(got, key=repr), sorted(expected, key=repr)
    assert [tuple(str(v) if i in masks and v is not None else v for i, v in enumerate(r)) for r in got] == expected


def test_masked_int_column_is_a_string(env: Env) -> None:
    with env.proxy.connect("msk") as conn, conn.cursor() as cur:
        cur.execute("SELECT n FROM t_phone WHERE id = 1")
        assert cur.fetchall() == ((MD5.mask("42"),),)
        assert cur.description[0][1] == 253  # VAR_STRING: an MD5 digest is no INT


# --- shadow ---------------------------------------------------------------------------------------------

SHADOW_DDL = "CREATE TABLE t_shadow (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, order_name VARCHAR(32))"
MERCHANT_DDL = "CREATE TABLE t_merchant (merchant_id INT PRIMARY KEY, merchant_name VARCHAR(50))"
_ALGORITHMS = """\
  shadowAlgorithms:
    user-id-insert-match-algorithm: {type: VALUE_MATCH, props: {operation: insert, column: user_id, value: 0}}
    user-id-update-match-algorithm: {type: VALUE_MATCH, props: {operation: update, column: user_id, value: 0}}
    user-id-delete-match-algorithm: {type: VALUE_MATCH, props: {operation: delete, column: user_id, value: 0}}
    user-id-select-match-algorithm: {type: VALUE_MATCH, props: {operation: select, column: user_id, value: 0}}
    sql-hint-algorithm: {type: SQL_HINT, props: {foo: bar}}
    merchant-regex: {type: REGEX_MATCH, props: {operation: insert, column: merchant_name, regex: 'shadow_.*'}}
"""
_ALGORITHM_NAMES = """[user-id-insert-match-algorithm, user-id-update-match-algorithm, user-id-delete-match-algorithm,
                             user-id-select-match-algorithm, sql-hint-algorithm]"""
SHADOW_RULES = f"""\
- !SINGLE
  tables: ["*.*"]
- !SHADOW
  dataSources:
    shadowDataSource: {{productionDataSourceName: db, shadowDataSourceName: shadow_db}}
  tables:
    t_shadow:
      dataSourceNames: [shadowDataSource]
      shadowAlgorithmNames: {_ALGORITHM_NAMES}
    t_merchant:
      dataSourceNames: [shadowDataSource]
      shadowAlgorithmNames: [merchant-regex, sql-hint-algorithm]
{_ALGORITHMS}"""
SHARDING_SHADOW_RULES = f"""\
- !SINGLE
  tables: ["*.*"]
- !SHARDING
  tables:
    t_shadow:
      actualDataNodes: shadowDataSource_${{0..1}}.t_shadow
      databaseStrategy:
        standard: {{shardingColumn: order_id, shardingAlgorithmName: by_order}}
  shardingAlgorithms:
    by_order: {{type: INLINE, props: {{algorithm-expression: 'shadowDataSource_${{order_id % 2}}',
                                     allow-range-query-with-inline-sharding: true}}}}
- !SHADOW
  dataSources:
    shadowDataSource_0: {{productionDataSourceName: db_0, shadowDataSourceName: shadow_db_0}}
    shadowDataSource_1: {{productionDataSourceName: db_1, shadowDataSourceName: shadow_db_1}}
  tables:
    t_shadow:
      dataSourceNames: [shadowDataSource_0, shadowDataSource_1]
      shadowAlgorithmNames: {_ALGORITHM_NAMES}
{_ALGORITHMS}"""

# (statement, parameters, the rows of `table` each database then holds: production's, shadow's); each case's
# ids are its own, so that the cases are independent
SHADOW_WRITES = [
    ("INSERT INTO t_shadow (order_id, user_id, order_name) VALUES (101, 1, 'pro')", (), [(101, 1)], []),
    ("INSERT INTO t_shadow (order_id, user_id, order_name) VALUES (102, 0, 'shadow')", (), [], [(102, 0)]),
    ("INSERT INTO t_shadow (order_id, user_id, order_name) VALUES (%s, %s, %s)", (103, 0, "s"), [], [(103, 0)]),
    (
        "INSERT INTO t_shadow (order_id, user_id, order_name) VALUES (%s, %s, 's'), (%s, %s, 's')",
        (104, 0, 105, 0),
        [],
        [(104, 0), (105, 0)],
    ),
    (
        "INSERT INTO t_shadow (order_id, user_id, order_name) VALUES (106, 0, 's'), (107, 1, 's')",
        (),
        [(106, 0), (107, 1)],
        [],
    ),  # not every row's value matches: production
    ("INSERT INTO t_shadow VALUES (108, 0, 'no column list')", (), [], [(108, 0)]),
    ("/* SHARDINGSPHERE_HINT: SHADOW=true */ INSERT INTO t_shadow VALUES (109, 5, 'hint')", (), [], [(109, 5)]),
    ("/* SHARDINGSPHERE_HINT: SHADOW=false */ INSERT INTO t_shadow VALUES (110, 5, 'hint')", (), [(110, 5)], []),
]


def _ids(env: Env, logical: str, which: str, table: str, key: str, low: int, high: int) -> list[tuple[Any, ...]]:
    s0, s1 = env.servers
    if logical == "shd":
        names = [(s0, "shd_db" if which == "prod" else "shd_shadow")]
    else:
        prefix = "shs_db_" if which == "prod" else "shs_shadow_"
        names = [(s0, prefix + "0"), (s1, prefix + "1")]
    rows: list[tuple[Any, ...]] = []
    for server, name in names:
        rows += server.execute(f"SELECT {key}, user_id FROM {table} WHERE {key} BETWEEN {low} AND {high}", name)
    return sorted(rows)


@pytest.mark.parametrize("logical", ["shd", "shs"])
@pytest.mark.parametrize(("sql", "params", "prod", "shadow"), SHADOW_WRITES, ids=[c[0][:70] for c in SHADOW_WRITES])
def test_shadow_insert_lands(
    env: Env,
    logical: str,
    sql: str,
    params: tuple[Any, ...],
    prod: list[tuple[Any, ...]],
    shadow: list[tuple[Any, ...]],
) -> None:
    ids = [r[0] for r in prod + shadow]
    with env.proxy.connect(logical) as conn, conn.cursor() as cur:
        cur.execute(sql, params or None)
    try:
        assert _ids(env, logical, "prod", "t_shadow", "order_id", min(ids), max(ids)) == prod
        assert _ids(env, logical, "shadow", "t_shadow", "order_id", min(ids), max(ids)) == shadow
    finally:
        with env.proxy.connect(logical) as conn, conn.cursor() as cur:
            for hint in ("", "/* SHARDINGSPHERE_HINT: SHADOW=true */ "):
                cur.execute(f"{hint}DELETE FROM t_shadow WHERE order_id BETWEEN {min(ids)} AND {max(ids)}")


def _seed(env: Env, logical: str) -> None:
    """Orders 1..5 on production (user 1, 'pro_order') and on shadow (user 0, 'shadow_order'), as the e2e dataset."""
    s0, s1 = env.servers
    if logical == "shd":
        places = {("prod", i): (s0, "shd_db") for i in range(1, 6)}
        places |= {("shadow", i): (s0, "shd_shadow") for i in range(1, 6)}
    else:
        places = {
            (w, i): (s0 if i % 2 == 0 else s1, f"shs_{'db' if w == 'prod' else 'shadow'}_{i % 2}")
            for w in ("prod", "shadow")
            for i in range(1, 6)
        }
    for (which, i), (server, name) in places.items():
        user, label = (1, "pro_order") if which == "prod" else (0, "shadow_order")
        server.execute("REPLACE INTO t_shadow VALUES (%s, %s, %s)", name, args=(i, user, label))


# (statement, parameters, what the answer holds: the production or the shadow rows)
SHADOW_READS = [
    ("SELECT order_id, order_name FROM t_shadow WHERE user_id = 1 ORDER BY order_id", (), "prod"),
    ("SELECT order_id, order_name FROM t_shadow WHERE user_id = 0 ORDER BY order_id", (), "shadow"),
    ("SELECT order_id, order_name FROM t_shadow WHERE user_id = %s ORDER BY order_id", (1,), "prod"),
    ("SELECT order_id, order_name FROM t_shadow WHERE user_id = %s ORDER BY order_id", (0,), "shadow"),
    ("SELECT order_id, order_name FROM t_shadow WHERE user_id IN (0) ORDER BY order_id", (), "shadow"),
    ("SELECT order_id, order_name FROM t_shadow WHERE order_id = 0 OR order_id > 0 ORDER BY order_id", (), "prod"),
    (
        "/* SHARDINGSPHERE_HINT: SHADOW=true */ SELECT order_id, order_name FROM t_shadow ORDER BY order_id",
        (),
        "shadow",
    ),
]


@pytest.mark.parametrize("logical", ["shd", "shs"])
@pytest.mark.parametrize(("sql", "params", "where"), SHADOW_READS, ids=[c[0][:70] for c in SHADOW_READS])
def test_shadow_select_reads(env: Env, logical: str, sql: str, params: tuple[Any, ...], where: str) -> None:
    _seed(env, logical)
    label = "pro_order" if where == "prod" else "shadow_order"
    with env.proxy.connect(logical) as conn, conn.cursor() as cur:
        cur.execute(sql, params or None)
        rows = cur.fetchall()
    assert rows == tuple((i, label) for i in range(1, 6))


# (statement, parameters, the order ids left on production, on shadow)
SHADOW_CHANGES = [
    ("DELETE FROM t_shadow WHERE user_id = %s and order_id in (%s, %s)", (1, 4, 5), [1, 2, 3], [1, 2, 3, 4, 5]),
    ("DELETE FROM t_shadow WHERE user_id = %s and order_id in (%s, %s)", (0, 4, 5), [1, 2, 3, 4, 5], [1, 2, 3]),
    ("DELETE FROM t_shadow WHERE user_id = 0 and order_id = 2", (), [1, 2, 3, 4, 5], [1, 3, 4, 5]),
    (
        "UPDATE t_shadow SET order_name = 'gone' WHERE user_id = %s and order_id in (%s, %s)",
        (0, 1, 2),
        [1, 2, 3, 4, 5],
        [3, 4, 5],
    ),
    (
        "UPDATE t_shadow SET order_name = 'gone' WHERE user_id = %s and order_id in (%s, %s)",
        (1, 1, 2),
        [3, 4, 5],
        [1, 2, 3, 4, 5],
    ),
]


@pytest.mark.parametrize("logical", ["shd", "shs"])
@pytest.mark.parametrize(("sql", "params", "prod", "shadow"), SHADOW_CHANGES, ids=[c[0][:70] for c in SHADOW_CHANGES])
def test_shadow_update_delete(
    env: Env, logical: str, sql: str, params: tuple[Any, ...], prod: list[int], shadow: list[int]
) -> None:
    _seed(env, logical)
    with env.proxy.connect(logical) as conn, conn.cursor() as cur:
        cur.execute(sql, params or None)
    kept = {}
    for which in ("prod", "shadow"):
        s0, s1 = env.servers
        kind = "db" if which == "prod" else "shadow"
        names = [(s0, f"shd_{kind}")] if logical == "shd" else [(s0, f"shs_{kind}_0"), (s1, f"shs_{kind}_1")]
        kept[which] = sorted(
            r[0]
            for server, name in names
            for r in server.execute("SELECT order_id FROM t_shadow WHERE order_name <> 'gone'", name)
        )
    assert (kept["prod"], kept["shadow"]) == (prod, shadow)


# (statement, the database that holds the row afterwards)
MERCHANT_CASES = [
    ("INSERT INTO t_merchant VALUES (1, 'shadow_tencent')", "shd_shadow"),
    ("INSERT INTO t_merchant VALUES (2, 'tencent')", "shd_db"),
    ("INSERT INTO t_plain VALUES (3, 0)", "shd_db"),  # no shadow table: production
    ("/* SHARDINGSPHERE_HINT: SHADOW=true */ INSERT INTO t_plain VALUES (4, 0)", "shd_db"),  # no default algorithm
]


@pytest.mark.parametrize(("sql", "where"), MERCHANT_CASES)
def test_regex_match_and_plain_tables(env: Env, sql: str, where: str) -> None:
    table = "t_merchant" if "t_merchant" in sql else "t_plain"
    key = "merchant_id" if table == "t_merchant" else "id"
    with env.proxy.connect("shd") as conn, conn.cursor() as cur:
        cur.execute(sql)
    found = {
        name
        for name in ("shd_db", "shd_shadow")
        if env.servers[0].execute(f"SELECT 1 FROM {table} WHERE {key} = {sql.split('(')[1].split(',')[0]}", name)
    }
    assert found == {where}


# --- DistSQL ----------------------------------------------------------------------------------------------

_KEEP = '{"first-n":3,"last-m":4,"replace-char":"*"}'
_FROM = '{"from-x":1,"replace-char":"#","to-y":3}'
_INSERT0 = '{"column":"user_id","operation":"insert","value":0}'
# (database, statement, rows as ShardingSphere's ShowMaskRuleExecutor / ShowShadowRuleExecutor give them)
SHOW_CASES = [
    (
        "msk",
        "SHOW MASK RULES",
        [
            ("t_user", "password", "MD5", ""),
            ("t_user", "email", "MASK_BEFORE_SPECIAL_CHARS", '{"replace-char":"*","special-chars":"@"}'),
            ("t_user", "telephone", "KEEP_FIRST_N_LAST_M", _KEEP),
            ("t_phone", "phone", "MASK_FROM_X_TO_Y", _FROM),
            ("t_phone", "n", "MD5", ""),
        ],
    ),
    (
        "msk",
        "SHOW MASK RULE t_phone FROM msk",
        [("t_phone", "phone", "MASK_FROM_X_TO_Y", _FROM), ("t_phone", "n", "MD5", "")],
    ),
    ("shd", "SHOW MASK RULES", []),
    (
        "shs",
        "SHOW SHADOW RULE shadowDataSource_1",
        [
            ("t_shadow", "shadowDataSource_1", "db_1", "shadow_db_1", "VALUE_MATCH", _INSERT0),
            (
                "t_shadow",
                "shadowDataSource_1",
                "db_1",
                "shadow_db_1",
                "VALUE_MATCH",
                _INSERT0.replace("insert", "update"),
            ),
            (
                "t_shadow",
                "shadowDataSource_1",
                "db_1",
                "shadow_db_1",
                "VALUE_MATCH",
                _INSERT0.replace("insert", "delete"),
            ),
            (
                "t_shadow",
                "shadowDataSource_1",
                "db_1",
                "shadow_db_1",
                "VALUE_MATCH",
                _INSERT0.replace("insert", "select"),
            ),
            ("t_shadow", "shadowDataSource_1", "db_1", "shadow_db_1", "SQL_HINT", '{"foo":"bar"}'),
        ],
    ),
    (
        "shd",
        "SHOW SHADOW RULES FROM shd",
        [
            *(
                ("t_shadow", "shadowDataSource", "db", "shadow_db", "VALUE_MATCH", _INSERT0.replace("insert", op))
                for op in ("insert", "update", "delete", "select")
            ),
            ("t_shadow", "shadowDataSource", "db", "shadow_db", "SQL_HINT", '{"foo":"bar"}'),
            (
                "t_merchant",
                "shadowDataSource",
                "db",
                "shadow_db",
                "REGEX_MATCH",
                '{"column":"merchant_name","operation":"insert","regex":"shadow_.*"}',
            ),
            ("t_merchant", "shadowDataSource", "db", "shadow_db", "SQL_HINT", '{"foo":"bar"}'),
        ],
    ),
]


@pytest.mark.parametrize(("logical", "sql", "rows"), SHOW_CASES, ids=[f"{c[0]}: {c[1]}" for c in SHOW_CASES])
def test_show_mask_and_shadow_rules(env: Env, logical: str, sql: str, rows: list[tuple[Any, ...]]) -> None:
    with env.proxy.connect(logical) as conn, conn.cursor() as cur:
        cur.execute(sql)
        columns = [d[0] for d in cur.description]
        assert [tuple(r) for r in cur.fetchall()] == rows
    assert columns == (
        ["table", "column", "algorithm_type", "algorithm_props"]
        if "MASK" in sql
        else ["shadow_table", "rule_name", "source_name", "shadow_name", "algorithm_type", "algorithm_props"]
    )
