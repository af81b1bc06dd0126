"""proxy.execution.federation's pure parts: the scratch table's definition from SHOW CREATE TABLE, and the literals
that store a text-protocol value unchanged in a column of the same definition."""

from __future__ import annotations

import pytest

from protocol.constants import ColumnType
from protocol.packets import ColumnDefinition41
from proxy.execution.federation import FederationError, literal, reopens_temporary, scratch_ddl

CREATE = """CREATE TABLE `t_order_0` (
  `order_id` bigint(20) NOT NULL AUTO_INCREMENT,
  `user_id` int(11) NOT NULL,
  `status` varchar(45) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
  `code` varchar(10) DEFAULT NULL,
  PRIMARY KEY (`order_id`),
  UNIQUE KEY `u_code` (`code`),
  KEY `i_user` (`user_id`),
  CONSTRAINT `fk_user` FOREIGN KEY (`user_id`) REFERENCES `t_user` (`user_id`)
) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

PARTITIONED = """CREATE TABLE `t_log` (
  `id` int(11) NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=latin1
 PARTITION BY HASH (`id`)
PARTITIONS 4"""


def test_scratch_ddl_keeps_columns_and_primary_key() -> None:
    ddl = scratch_ddl(CREATE, "__shardproxy_fed_0")
    assert ddl.startswith("CREATE TEMPORARY TABLE `__shardproxy_fed_0` (")
    assert "COLLATE utf8mb4_general_ci NOT NULL" in ddl and "PRIMARY KEY (`order_id`)" in ddl
    assert "UNIQUE" not in ddl and "KEY `u_code` (`code`)" in ddl
    assert "AUTO_INCREMENT" not in ddl and "FOREIGN KEY" not in ddl
    assert "KEY `i_user` (`user_id`)\n)" in ddl  # the comma before the dropped constraint is gone


def test_scratch_ddl_drops_partitioning() -> None:
    ddl = scratch_ddl(PARTITIONED, "s")
    assert "PARTITION" not in ddl and ddl.rstrip().endswith("DEFAULT CHARSET=latin1")


def test_scratch_ddl_refuses_what_it_cannot_read() -> None:
    with pytest.raises(FederationError):
        scratch_ddl("CREATE VIEW v AS SELECT 1", "s")


def col(kind: ColumnType, charset: int = 45) -> ColumnDefinition41:
    return ColumnDefinition41("c", kind, character_set=charset)


LITERALS = [
    (None, col(ColumnType.LONG), "NULL"),
    (b"-12", col(ColumnType.LONGLONG, 63), "-12"),
    (b"12.50", col(ColumnType.NEWDECIMAL, 63), "12.50"),
    (b"1.5e-7", col(ColumnType.DOUBLE, 63), "1.5e-7"),
    (b"2024-01-02 03:04:05", col(ColumnType.DATETIME, 63), "'2024-01-02 03:04:05'"),
    (b"-838:59:59", col(ColumnType.TIME, 63), "'-838:59:59'"),
    (b"caf\xc3\xa9'", col(ColumnType.VAR_STRING, 45), "_utf8mb4 X'636166c3a927'"),
    (b"", col(ColumnType.VAR_STRING, 45), "_utf8mb4''"),
    (b"\x00\xff", col(ColumnType.BLOB, 63), "X'00ff'"),
    (b"\x05", col(ColumnType.BIT, 63), "X'05'"),
    (b"\xe9", col(ColumnType.STRING, 8), "_latin1 X'e9'"),
]


@pytest.mark.parametrize(("value", "column", "expected"), LITERALS, ids=[repr(v[0]) for v in LITERALS])
def test_literal(value: bytes | None, column: ColumnDefinition41, expected: str) -> None:
    assert literal(value, column) == expected


def test_scratch_ddl_makes_generated_columns_plain() -> None:
    ddl = scratch_ddl("CREATE TABLE `t` (\n  `a` int(11) NOT NULL,\n  `b` int(11) GENERATED ALWAYS AS (`a` * 2) "
                      "VIRTUAL,\n  `c` varchar(5) AS (concat(`a`,'x')) PERSISTENT,\n  PRIMARY KEY (`a`)\n"
                      ") ENGINE=InnoDB", "s")
    assert "  `b` int(11),\n  `c` varchar(5),\n" in ddl


@pytest.mark.parametrize(("version", "reopens"), [
    ("10.11.19-MariaDB-0+deb12u1", True),
    ("5.5.5-10.6.18-MariaDB-log", True),
    ("10.1.48-MariaDB", False),
    ("8.0.36", False),
    ("", False),
])
def test_reopens_temporary(version: str, reopens: bool) -> None:
    assert reopens_temporary(version) is reopens
