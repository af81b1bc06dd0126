"""One sharded proxy for the compatibility suite: the ShardingSphere example rules over the two sandbox
servers of ``mariadb_shards``, one logical database per client (and one for the start-up/browsing
queries) so that every client creates, fills and drops its own sharded tables without meeting another's.

Logical database ``compat_<client>`` has data sources ``ds_0`` (server 0, physical ``cpt_<client>_0``) and
``ds_1`` (server 1, physical ``cpt_<client>_1``) and the ``rules:`` part of ``conf/database-sharding.yaml``
verbatim: t_order / t_order_item sharded by user_id % 2 (data source) and order_id % 2 (table), t_address
broadcast. Tests read rows back on the backends (``CompatEnv.backend_rows``), never only through the proxy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

REPO = Path(__file__).resolve().parents[2]
RULES = (REPO / "conf" / "database-sharding.yaml").read_text().split("rules:\n", 1)[1]

CLIENTS = ("startup", "cli", "pymysql", "mysqlclient", "connector", "connector_cext", "aiomysql", "asyncmy",
           "sqlalchemy", "django", "node")

# The example schema, created through the proxy by each client (Django and SQLAlchemy create their own).
T_ORDER_DDL = ("CREATE TABLE t_order (order_id BIGINT NOT NULL, user_id INT NOT NULL, status VARCHAR(45) NULL, "
               "PRIMARY KEY (order_id), KEY idx_user (user_id))")
T_ORDER_ITEM_DDL = ("CREATE TABLE t_order_item (order_item_id BIGINT NOT NULL, order_id BIGINT NOT NULL, "
                    "user_id INT NOT NULL, status VARCHAR(45) NULL, PRIMARY KEY (order_item_id))")
T_ADDRESS_DDL = ("CREATE TABLE t_address (address_id BIGINT NOT NULL, address_name VARCHAR(100) NOT NULL, "
                 "PRIMARY KEY (address_id))")

# (user_id, order_id) pairs that land on all four actual tables: ds = user_id % 2, table = order_id % 2
SPREAD = ((10, 100), (10, 101), (11, 102), (11, 103))

ACTUAL_TABLES = ("t_order_0", "t_order_1")


@dataclass
class CompatEnv:
    proxy: RunningProxy
    servers: list[MariaDBServer]

    @property
    def host(self) -> str:
        return self.proxy.host

    @property
    def port(self) -> int:
        return self.proxy.port

    @staticmethod
    def database(client: str) -> str:
        return f"compat_{client}"

    @staticmethod
    def physical(client: str, ds: int) -> str:
        return f"cpt_{client}_{ds}"

    def dsn(self, client: str) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": "root", "password": "root",
                "database": self.database(client)}

    def backend_rows(self, client: str, table: str = "t_order", columns: str = "order_id, user_id, status"
                     ) -> dict[str, list[tuple[Any, ...]]]:
        """`ds_i.t_order_j` -> its rows (sorted), read directly on the servers, every actual table."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        for i, server in enumerate(self.servers):
            for j in (0, 1):
                rows = server.execute(f"SELECT {columns} FROM {table}_{j} ORDER BY 1", self.physical(client, i))
                out[f"ds_{i}.{table}_{j}"] = sorted(rows)
        return out

    def all_backend_rows(self, client: str, table: str = "t_order", columns: str = "order_id, user_id, status"
                         ) -> list[tuple[Any, ...]]:
        return sorted(r for rows in self.backend_rows(client, table, columns).values() for r in rows)

    def assert_spread(self, client: str, table: str = "t_order") -> None:
        """Every (user_id, order_id) of SPREAD is on the node the rules say, and nowhere else."""
        placed = self.backend_rows(client, table, "order_id, user_id")
        expected: dict[str, list[tuple[Any, ...]]] = {k: [] for k in placed}
        for user_id, order_id in SPREAD:
            expected[f"ds_{user_id % 2}.{table}_{order_id % 2}"].append((order_id, user_id))
        assert placed == {k: sorted(v) for k, v in expected.items()}


@pytest.fixture(scope="session")
def compat(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[CompatEnv]:
    for client in CLIENTS:
        for i, server in enumerate(mariadb_shards):
            db = CompatEnv.physical(client, i)
            server.execute(f"DROP DATABASE IF EXISTS {db}")
            server.execute(f"CREATE DATABASE {db}")
    conf = write_conf(
        tmp_path_factory.mktemp("compat-conf"),
        {CompatEnv.database(c): {f"ds_{i}": (s, CompatEnv.physical(c, i)) for i, s in enumerate(mariadb_shards)}
         for c in CLIENTS},
        rules_yaml={CompatEnv.database(c): RULES for c in CLIENTS},
        max_pool_size=8,
    )
    proxy = start_proxy(conf)
    try:
        yield CompatEnv(proxy, mariadb_shards)
    finally:
        proxy.stop()
