"""metadata.routed_spelling: the SHOW / DESCRIBE spellings the kernel does not parse, as the one it routes (so that
a sharded table's answer is the data node's, column definitions and all, at EXECUTE and at PREPARE alike)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from proxy.session.metadata import routed_spelling

DB: Any = SimpleNamespace(name="sharding_db", config=SimpleNamespace(encrypt=None))

# (statement, the spelling the kernel routes, or None: the kernel's own, or not this function's)
CASES: list[tuple[str, str | None]] = [
    ("SHOW COLUMNS FROM t_order", None),
    ("SHOW FULL COLUMNS FROM t_order FROM sharding_db", None),
    ("SHOW FIELDS FROM t_order", "SHOW COLUMNS FROM t_order"),
    ("show full fields in t_order like 's%'", "SHOW FULL COLUMNS FROM t_order like 's%'"),
    ("SHOW COLUMNS IN sharding_db.t_order", "SHOW COLUMNS FROM sharding_db.t_order"),
    ("SHOW COLUMNS FROM `t_order` IN `sharding_db` WHERE Field = 'x'",
     "SHOW COLUMNS FROM `t_order` FROM `sharding_db` WHERE Field = 'x'"),
    ("SHOW FIELDS FROM t_order;", "SHOW COLUMNS FROM t_order"),
    ("DESCRIBE t_order", None),
    ("DESC t_order status", "SHOW COLUMNS FROM t_order LIKE 'status'"),
    ("DESCRIBE t_order 'st%'", "SHOW COLUMNS FROM t_order LIKE 'st%'"),
    ("DESC t_order `it's`", "SHOW COLUMNS FROM t_order LIKE 'it''s'"),
    ("DESC SELECT * FROM t_order", None),
    ("SHOW INDEX FROM t_order", None),
    ("SHOW KEYS FROM t_order", "SHOW INDEX FROM t_order"),
    ("SHOW INDEXES IN t_order WHERE Key_name = 'PRIMARY'", "SHOW INDEX FROM t_order WHERE Key_name = 'PRIMARY'"),
    ("SHOW KEYS FROM t_order FROM sharding_db", "SHOW INDEX FROM t_order"),
    ("SHOW KEYS FROM t_order FROM other_db", None),
    ("SHOW EXTENDED INDEX FROM t_order", "SHOW INDEX FROM t_order"),
    ("SHOW TABLES", None),
    ("SELECT 1", None),
]


@pytest.mark.parametrize(("sql", "spelled"), CASES)
def test_routed_spelling(sql: str, spelled: str | None) -> None:
    assert routed_spelling(DB, sql) == spelled
