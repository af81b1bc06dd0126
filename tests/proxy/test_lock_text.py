"""proxy.execution.lock_text reads LOCK / UNLOCK TABLES as MariaDB does (one line per text)."""

from __future__ import annotations

import pytest

from proxy.execution.lock_text import LockItem, parse_lock

R, W = ("READ",), ("WRITE",)
CASES = (
    ("LOCK TABLES t READ", (LockItem(None, "t", None, R),)),
    ("lock table t write;", (LockItem(None, "t", None, W),)),
    (
        "LOCK TABLES `t` READ /*!32311 LOCAL */,`u` READ /*!32311 LOCAL */",
        (LockItem(None, "t", None, ("READ", "LOCAL")), LockItem(None, "u", None, ("READ", "LOCAL"))),
    ),
    (
        "LOCK TABLES t AS o READ, u o2 LOW_PRIORITY WRITE",
        (LockItem(None, "t", "o", R), LockItem(None, "u", "o2", ("LOW_PRIORITY", "WRITE"))),
    ),
    ("LOCK TABLES db.t `read` WRITE CONCURRENT", (LockItem("db", "t", "read", ("WRITE", "CONCURRENT")),)),
    ("/* c */ LOCK TABLES t -- x\n READ", (LockItem(None, "t", None, R),)),
)
ERRORS = (
    "LOCK TABLES t",
    "LOCK TABLES t READ WRITE",
    "LOCK TABLES",
    "LOCK TABLES t READ,",
    "LOCK TABLES t AS READ",
    "UNLOCK TABLES t",
)
NOT_LOCKS = (
    "LOCK INSTANCE FOR BACKUP",
    "LOCK CLUSTER WITH LOCK_STRATEGY()",
    "SELECT 1 LOCK IN SHARE MODE",
    "UNLOCKED",
    "LOCKS TABLES t READ",
)


@pytest.mark.parametrize(("sql", "items"), CASES)
def test_lock_tables_items(sql: str, items: tuple[LockItem, ...]) -> None:
    stmt = parse_lock(sql)
    assert stmt is not None and stmt.error is None and not stmt.unlock
    assert stmt.items == items


@pytest.mark.parametrize("sql", ("UNLOCK TABLES", "unlock table;", "/* x */ UNLOCK TABLES"))
def test_unlock(sql: str) -> None:
    assert parse_lock(sql) is not None and parse_lock(sql).unlock and parse_lock(sql).error is None  # type: ignore[union-attr]


@pytest.mark.parametrize("sql", ERRORS)
def test_syntax_errors_lock_nothing(sql: str) -> None:
    stmt = parse_lock(sql)
    assert stmt is not None and stmt.error is not None


@pytest.mark.parametrize("sql", NOT_LOCKS)
def test_other_statements_are_not_lock_tables(sql: str) -> None:
    assert parse_lock(sql) is None
