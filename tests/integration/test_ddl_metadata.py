"""A DDL statement's answer comes once the proxy knows the change: another session, told that the table was
created (or changed), may insert into it without a column list at once. The proxy used to answer first and
reload its table metadata after, and an INSERT sent right away by another session was refused (1136: 'the
proxy does not know the table's columns') or mapped onto the old columns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

pytestmark = pytest.mark.integration

PHYSICAL = ("ddlm_ds_0", "ddlm_ds_1")
RULES = """\
- !SHARDING
  tables:
    t_ddl:
      actualDataNodes: ds_${0..1}.t_ddl
      databaseStrategy:
        standard: {shardingColumn: id, shardingAlgorithmName: db_mod}
  shardingAlgorithms:
    db_mod: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""


@pytest.fixture(scope="module")
def proxy(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    for server, db in zip(mariadb_shards, PHYSICAL, strict=True):
        server.execute(f"DROP DATABASE IF EXISTS {db}")
        server.execute(f"CREATE DATABASE {db}")
    conf = write_conf(tmp_path_factory.mktemp("ddl-metadata"),
                      {"ddl_db": {f"ds_{i}": (server, db) for i, (server, db)
                                  in enumerate(zip(mariadb_shards, PHYSICAL, strict=True))}},
                      rules_yaml={"ddl_db": RULES})
    running = start_proxy(Path(conf))
    yield running
    running.stop()


def test_a_table_created_or_changed_is_known_to_every_session_once_answered(
        proxy: RunningProxy, mariadb_shards: list[MariaDBServer]) -> None:
    with proxy.connect("ddl_db") as ddl, proxy.connect("ddl_db") as other, \
            ddl.cursor() as d, other.cursor() as o:
        for round_ in range(5):
            d.execute("DROP TABLE IF EXISTS t_ddl")
            d.execute("CREATE TABLE t_ddl (id BIGINT PRIMARY KEY, v VARCHAR(20))")
            o.execute(f"INSERT INTO t_ddl VALUES ({2 * round_}, 'two'), ({2 * round_ + 1}, 'columns')")
            d.execute("ALTER TABLE t_ddl ADD COLUMN w VARCHAR(20) AFTER id")
            o.execute(f"INSERT INTO t_ddl VALUES ({2 * round_ + 10}, 'w', 'three'), ({2 * round_ + 11}, 'w', 'c')")
            o.execute("SELECT id, w, v FROM t_ddl ORDER BY id")
            assert o.fetchall() == ((2 * round_, None, "two"), (2 * round_ + 1, None, "columns"),
                                    (2 * round_ + 10, "w", "three"), (2 * round_ + 11, "w", "c"))
    assert [s.execute(f"SELECT COUNT(*) FROM {db}.t_ddl")[0][0]
            for s, db in zip(mariadb_shards, PHYSICAL, strict=True)] == [2, 2]
