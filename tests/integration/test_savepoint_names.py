"""Savepoint names as MySQL reads them (issue 33, section 2), under LOCAL and XA transactions, on real MariaDB
servers: backquoted (spaces, doubled backquotes, reserved words), any case (names compare case-insensitively),
a reused name moving the savepoint, ROLLBACK WORK TO SAVEPOINT, RELEASE SAVEPOINT, a trailing `;` and comments.
Every script runs on both data sources, one of which joins the transaction after the savepoint was set (the
proxy sets the transaction's savepoints there when it joins); what each server holds is read from the server
itself after COMMIT."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """\
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order
      databaseStrategy:
        standard: {shardingColumn: user_id, shardingAlgorithmName: db_mod}
  shardingAlgorithms:
    db_mod: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}'}}
"""
_NAMES = itertools.count()

# the rows every script starts from: order 1 on ds_0 (user 0), order 2 on ds_1 (user 1)
START = {"ds_0": [(1, 0, "init")], "ds_1": [(2, 1, "init")]}


def ins(order_id: int) -> str:
    """An INSERT on ds_0 (even order ids, user 0) or ds_1 (odd order ids, user 1)."""
    return f"INSERT INTO t_order (order_id, user_id, status) VALUES ({order_id}, {order_id % 2}, 'new')"


UPD = "UPDATE t_order SET status = 'upd' WHERE order_id = 1 AND user_id = 0"  # ds_0 joins

# a script: statements run in order after BEGIN (a (statement, errno) pair expects that error), then COMMIT;
# then the rows each data source holds. Order 10 is on ds_0, orders 11 and 13 on ds_1 (which joins late).
CASES: dict[str, tuple[list[Any], dict[str, list[tuple[Any, ...]]]]] = {
    "issue": ([UPD, "SAVEPOINT `sp x7`", ins(10), ins(11), "ROLLBACK TO `sp x7`"],
              {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init")]}),
    "unquoted": ([UPD, "SAVEPOINT sp8", ins(10), ins(11), "ROLLBACK TO sp8"],
                 {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init")]}),
    "any case, work, savepoint": ([UPD, "savepoint `Sp X7`", ins(10), ins(11), "ROLLBACK WORK TO SAVEPOINT `sP x7`"],
                                  {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init")]}),
    "quoted and unquoted alike": ([UPD, "SAVEPOINT `abc`", ins(10), ins(11), "rollback to ABC"],
                                  {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init")]}),
    "doubled backquote": ([UPD, "SAVEPOINT `a``b c`", ins(10), ins(11), "ROLLBACK TO SAVEPOINT `A``B C`"],
                          {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init")]}),
    "reserved word": ([UPD, "SAVEPOINT `select`", ins(10), ins(11), "ROLLBACK TO `SELECT`"],
                      {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init")]}),
    "semicolon and comments": ([UPD, "SAVEPOINT /* c */ `sp x7` ;", ins(10), ins(11),
                                "/* lead */ ROLLBACK TO `sp x7`; -- trailing\n"],
                               {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init")]}),
    "no savepoint before the first join": (["SAVEPOINT `sp 0`", ins(10), ins(11), "ROLLBACK TO `sp 0`", UPD],
                                           {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init")]}),
    # SAVEPOINT a ... SAVEPOINT A moves it: rolling back to it keeps what came between the two
    "reused name moves it": ([UPD, "SAVEPOINT `x y`", ins(10), "SAVEPOINT `X Y`", ins(11), ins(12),
                              "ROLLBACK TO `x y`"],
                             {"ds_0": [(1, 0, "upd"), (10, 0, "new")], "ds_1": [(2, 1, "init")]}),
    # rolling back to an earlier savepoint drops the later ones (on the data source that joined late too)
    "later ones dropped": ([UPD, "SAVEPOINT `a 1`", ins(10), "SAVEPOINT `b 2`", ins(11), "ROLLBACK TO `a 1`",
                            ("ROLLBACK TO `b 2`", 1305), ins(13)],
                           {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init"), (13, 1, "new")]}),
    "released": ([UPD, "SAVEPOINT `r s`", ins(10), ins(11), "RELEASE SAVEPOINT `R S`;",
                  ("ROLLBACK TO `r s`", 1305), ins(13)],
                 {"ds_0": [(1, 0, "upd"), (10, 0, "new")],
                  "ds_1": [(2, 1, "init"), (11, 1, "new"), (13, 1, "new")]}),
    "syntax errors refused, the transaction goes on": (
        [UPD, "SAVEPOINT `s`", ("SAVEPOINT a b", 1064), ("SAVEPOINT", 1064), ("ROLLBACK TO `s` `t`", 1064),
         ("RELEASE SAVEPOINT 12", 1064), ins(11), "ROLLBACK TO s", ins(13)],
        {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init"), (13, 1, "new")]}),
    "unknown name": ([UPD, "SAVEPOINT `sp x7`", ins(10), ("ROLLBACK TO `sp x8`", 1305), ins(11)],
                     {"ds_0": [(1, 0, "upd"), (10, 0, "new")], "ds_1": [(2, 1, "init"), (11, 1, "new")]}),
}


class Env:
    def __init__(self, servers: list[MariaDBServer], tmp_path: Path, kind: str) -> None:
        self.servers = servers
        n = next(_NAMES)
        self.dbs = [f"spn{n}_{i}" for i in range(2)]
        for server, db in zip(servers, self.dbs, strict=True):
            server.execute(f"CREATE DATABASE {db}")
            server.execute(f"CREATE TABLE {db}.t_order (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, "
                           f"status VARCHAR(45))")
        conf = write_conf(tmp_path / f"conf{n}", {"sp_db": {"ds_0": (servers[0], self.dbs[0]),
                                                             "ds_1": (servers[1], self.dbs[1])}},
                          rules_yaml={"sp_db": RULES},
                          transaction={"defaultType": kind, "providerType": "Atomikos"})
        self.proxy: RunningProxy = start_proxy(conf)

    def rows(self, ds: str) -> list[tuple[Any, ...]]:
        i = int(ds[-1])
        return [tuple(r) for r in self.servers[i].execute(
            f"SELECT order_id, user_id, status FROM {self.dbs[i]}.t_order ORDER BY order_id")]

    def reset(self) -> None:
        for ds, rows in START.items():
            i = int(ds[-1])
            self.servers[i].execute(f"DELETE FROM {self.dbs[i]}.t_order")
            for row in rows:
                self.servers[i].execute(f"INSERT INTO {self.dbs[i]}.t_order VALUES {row!r}")


@pytest.fixture(scope="module", params=["LOCAL", "XA"])
def env(request: pytest.FixtureRequest, mariadb_shards: list[MariaDBServer],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = Env(mariadb_shards, tmp_path_factory.mktemp("savepoint_names"), request.param)
    yield e
    e.proxy.stop()


@pytest.mark.parametrize("case", list(CASES))
def test_savepoint_names(env: Env, case: str) -> None:
    script, expected = CASES[case]
    env.reset()
    conn = env.proxy.connect("sp_db", autocommit=True, read_timeout=30)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for step in script:
                sql, errno = step if isinstance(step, tuple) else (step, None)
                if errno is None:
                    cur.execute(sql)
                else:
                    with pytest.raises(pymysql.MySQLError) as info:
                        cur.execute(sql)
                    assert info.value.args[0] == errno, (sql, info.value.args)
            cur.execute("COMMIT")
    finally:
        conn.close()
    assert {ds: env.rows(ds) for ds in ("ds_0", "ds_1")} == expected


@pytest.mark.parametrize("case", [c for c, (script, _) in CASES.items() if all(isinstance(s, str) for s in script)])
def test_savepoint_names_prepared(env: Env, case: str) -> None:
    """The same scripts, every statement prepared and executed (COM_STMT_PREPARE / COM_STMT_EXECUTE)."""
    script, expected = CASES[case]
    env.reset()
    conn = mysql.connector.connect(host=env.proxy.host, port=env.proxy.port, user="root", password="root",
                                   database="sp_db", autocommit=True, use_pure=True)
    try:
        cur = conn.cursor(prepared=True)
        for sql in ["BEGIN", *script, "COMMIT"]:
            cur.execute(sql)
        cur.close()
    finally:
        conn.close()
    assert {ds: env.rows(ds) for ds in ("ds_0", "ds_1")} == expected


def test_unknown_savepoint_names_it_as_mysql_does(env: Env) -> None:
    env.reset()
    conn = env.proxy.connect("sp_db", autocommit=True, read_timeout=30)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(UPD)
            with pytest.raises(pymysql.MySQLError) as info:
                cur.execute("ROLLBACK TO SAVEPOINT `no such`")
            assert info.value.args == (1305, "SAVEPOINT no such does not exist")
            cur.execute("ROLLBACK")
    finally:
        conn.close()
    assert env.rows("ds_0") == START["ds_0"]


# the transaction's end with a comment is still COMMIT / ROLLBACK on every data source (it went to one node as a
# routed statement: `COMMIT /* c */` committed ds_0's part and lost ds_1's)
ENDS = {"COMMIT /* c */": "committed", "/* c */ COMMIT;": "committed", "COMMIT -- c\n": "committed",
        "commit work # c": "committed", "ROLLBACK /* c */": "rolled back", "-- c\nROLLBACK": "rolled back"}


@pytest.mark.parametrize("end", list(ENDS))
@pytest.mark.parametrize("begin", ["BEGIN", "/* c */ BEGIN", "START TRANSACTION -- c\n"])
def test_the_end_of_a_transaction_with_comments(env: Env, begin: str, end: str) -> None:
    env.reset()
    conn = env.proxy.connect("sp_db", autocommit=True, read_timeout=30)
    try:
        with conn.cursor() as cur:
            cur.execute(begin)
            cur.execute(UPD)
            cur.execute(ins(11))
            assert conn.server_status & 1  # SERVER_STATUS_IN_TRANS
            cur.execute(end)
            assert not conn.server_status & 1  # SERVER_STATUS_IN_TRANS
    finally:
        conn.close()
    committed = {"ds_0": [(1, 0, "upd")], "ds_1": [(2, 1, "init"), (11, 1, "new")]}
    assert {ds: env.rows(ds) for ds in ("ds_0", "ds_1")} == (committed if ENDS[end] == "committed" else START)
