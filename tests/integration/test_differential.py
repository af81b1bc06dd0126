"""Differential suite: a SELECT through the proxy returns exactly what one unsharded database returns.

`sharding_db` is the ShardingSphere example (rules read from `conf/database-sharding.yaml` at test time:
t_order / t_order_item over 2 data sources by ``user_id % 2`` x 2 tables by ``order_id % 2``, bound;
t_address broadcast), its tables created through the proxy with DDL and filled through the proxy.
`oracle_db` holds the same tables and rows in one database and is queried directly with PyMySQL. Each
case of `differential_corpus` runs on both; values are compared exactly as PyMySQL returns them
(Decimal, float, datetime, str), together with the column names and the row count.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.differential_corpus import (
    ADDRESS_COLUMNS,
    BAG,
    CASES,
    DDL,
    ITEM_COLUMNS,
    ORDER_COLUMNS,
    ORDERED,
    ROWS,
    SUBSET,
    Case,
    ci_fold,
)
from tests.integration.harness import RunningProxy, start_proxy, write_conf

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PHYSICAL = ("diff_ds_0", "diff_ds_1")
ORACLE_DB = "oracle_db"
COLUMNS = {"t_order": ORDER_COLUMNS, "t_order_item": ITEM_COLUMNS, "t_address": ADDRESS_COLUMNS}
BATCH = 250
ER_NOT_SUPPORTED_YET = 1235

Conn = pymysql.connections.Connection  # type: ignore[type-arg]
Result = tuple[tuple[str, ...], list[tuple[Any, ...]]]


def sharding_rules_yaml() -> str:
    """The `rules:` list of the shipped ShardingSphere example, with range queries allowed on the INLINE
    algorithms (the corpus has BETWEEN / < / > on both sharding columns; refusing them is a separate,
    tested behaviour)."""
    text = (REPO / "conf" / "database-sharding.yaml").read_text()
    match = re.search(r"^rules:\s*\n", text, re.M)
    assert match is not None, "conf/database-sharding.yaml has no rules: section"
    rules = text[match.end():]
    rules = re.sub(
        r"^(\s*)(algorithm-expression: .*)$",
        r"\1\2\n\1allow-range-query-with-inline-sharding: true",
        rules,
        flags=re.M,
    )
    assert "allow-range-query-with-inline-sharding" in rules
    return rules


def _insert_sql(table: str, rows: Sequence[tuple[Any, ...]]) -> str:
    cols = COLUMNS[table]
    return f"INSERT INTO {table} ({', '.join(cols)}) VALUES " + ", ".join(
        "(" + ", ".join(["%s"] * len(cols)) + ")" for _ in rows
    )


def _load(conn: Conn) -> None:
    with conn.cursor() as cur:
        for table, rows in ROWS.items():
            for i in range(0, len(rows), BATCH):
                chunk = rows[i:i + BATCH]
                cur.execute(_insert_sql(table, chunk), [v for row in chunk for v in row])
    conn.commit()


@dataclass
class Env:
    proxy: RunningProxy
    proxy_conn: Conn
    oracle_conn: Conn


@pytest.fixture(scope="module")
def env(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    s0, s1 = mariadb_shards
    for server, physical in zip(mariadb_shards, PHYSICAL, strict=True):
        server.execute(f"DROP DATABASE IF EXISTS {physical}")
        server.execute(f"CREATE DATABASE {physical}")
    s0.execute(f"DROP DATABASE IF EXISTS {ORACLE_DB}")
    s0.execute(f"CREATE DATABASE {ORACLE_DB}")
    conf = write_conf(
        tmp_path_factory.mktemp("differential-conf"),
        {"sharding_db": {"ds_0": (s0, PHYSICAL[0]), "ds_1": (s1, PHYSICAL[1])}},
        rules_yaml={"sharding_db": sharding_rules_yaml()},
    )
    proxy = start_proxy(Path(conf))
    proxy_conn = proxy.connect("sharding_db", autocommit=True)
    oracle_conn = s0.connect(ORACLE_DB)
    try:
        for conn in (proxy_conn, oracle_conn):
            with conn.cursor() as cur:
                for ddl in DDL:
                    cur.execute(ddl)
            _load(conn)
        yield Env(proxy, proxy_conn, oracle_conn)
    finally:
        proxy_conn.close()
        oracle_conn.close()
        proxy.stop()
        for server, physical in zip(mariadb_shards, PHYSICAL, strict=True):
            server.execute(f"DROP DATABASE IF EXISTS {physical}")
        s0.execute(f"DROP DATABASE IF EXISTS {ORACLE_DB}")


def run(conn: Conn, sql: str) -> Result:
    with conn.cursor() as cur:
        cur.execute(sql)
        names = tuple(d[0] for d in cur.description or ())
        return names, list(cur.fetchall())


def _fold(rows: list[tuple[Any, ...]], case: Case) -> list[tuple[Any, ...]]:
    if not (case.ci or case.split or case.length):
        return rows
    split = dict(case.split)

    def fold(i: int, v: Any) -> Any:
        if v is None:
            return v
        if i in case.ci:
            return ci_fold(v)
        if i in split:
            return tuple(sorted(str(v).split(split[i])))
        if i in case.length:
            return len(v)
        return v

    return [tuple(fold(i, v) for i, v in enumerate(row)) for row in rows]


def _typed(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Values paired with their type: Decimal('1') and 1 (or 1.0) compare equal in Python but are
    different answers."""
    return [tuple((type(v).__name__, v) for v in row) for row in rows]


def _limitless(sql: str) -> str:
    stripped = re.sub(r"\s+LIMIT\s+\d+(\s*(,|OFFSET)\s*\d+)?\s*$", "", sql, flags=re.I)
    assert stripped != sql, f"SUBSET case without a trailing LIMIT: {sql}"
    return stripped


def check(env: Env, case: Case) -> None:
    exp_names, expected = run(env.oracle_conn, case.sql)
    for sql in case.before:
        run(env.proxy_conn, sql)
    if case.refused is not None:
        with pytest.raises(pymysql.MySQLError) as info:
            run(env.proxy_conn, case.sql)
        assert info.value.args[0] == ER_NOT_SUPPORTED_YET, info.value.args
        assert case.refused in info.value.args[1], info.value.args
        return
    got_names, got = run(env.proxy_conn, case.sql)
    assert got_names == exp_names, "column names differ"
    assert len(got) == len(expected), f"row count: proxy {len(got)}, oracle {len(expected)}"
    exp_rows, got_rows = _typed(_fold(expected, case)), _typed(_fold(got, case))
    if case.check == ORDERED:
        if got_rows != exp_rows:
            first = next(i for i, (g, e) in enumerate(zip(got_rows, exp_rows, strict=True)) if g != e)
            pytest.fail(f"row {first} differs:\n proxy  {got[first]!r}\n oracle {expected[first]!r}")
    elif case.check == BAG:
        _assert_same_bag(got_rows, exp_rows)
    elif case.check == SUBSET:
        _, full = run(env.oracle_conn, _limitless(case.sql))
        missing = Counter(got_rows) - Counter(_typed(_fold(full, case)))
        assert not missing, f"proxy rows not in the unlimited result: {list(missing)[:5]}"
    else:  # pragma: no cover - corpus typo
        raise AssertionError(case.check)
    for key in case.keys:
        got_keys = [row[key] for row in got_rows]
        exp_keys = [row[key] for row in exp_rows]
        assert got_keys == exp_keys, f"order of sort key column {key} ({exp_names[key]}) differs"


def _assert_same_bag(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> None:
    g, e = Counter(got), Counter(expected)
    if g != e:
        extra, missing = list((g - e).elements()), list((e - g).elements())
        pytest.fail(f"multisets differ: {len(extra)} extra, {len(missing)} missing\n"
                    f" extra   {extra[:3]!r}\n missing {missing[:3]!r}")


@pytest.mark.parametrize("case", CASES)
def test_differential(env: Env, case: Case) -> None:
    check(env, case)


def test_fixture_rows_where_the_rules_put_them(env: Env, mariadb_shards: list[MariaDBServer]) -> None:
    """The load went through the proxy: every actual table holds exactly its shard's rows."""
    for ds, (server, physical) in enumerate(zip(mariadb_shards, PHYSICAL, strict=True)):
        for t in (0, 1):
            for table in ("t_order", "t_order_item"):
                rows = server.execute(f"SELECT user_id, order_id FROM {physical}.{table}_{t}")
                want = sum(1 for r in ROWS[table] if r[COLUMNS[table].index("user_id")] % 2 == ds
                           and r[COLUMNS[table].index("order_id")] % 2 == t)
                assert len(rows) == want, (physical, table, t)
                assert all(u % 2 == ds and o % 2 == t for u, o in rows), (physical, table, t)
        assert len(server.execute(f"SELECT * FROM {physical}.t_address")) == len(ROWS["t_address"])
    assert BAG and SUBSET  # the corpus uses every comparison mode
