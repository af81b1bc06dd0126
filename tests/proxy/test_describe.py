"""proxy.session.describe: the text a sharded query is described with at COM_STMT_PREPARE (issue 34 item 4), on the
shipped example's rules (t_order / t_order_item over ds_0, ds_1 x 2 tables, t_address broadcast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.session.describe import Described, describing_text
from routing.config import load_database_rules, load_yaml
from routing.logical_names import LogicalNames

ROOT = Path(__file__).resolve().parents[2]
TABLES = {"ds_0": ["t_order_0", "t_order_1", "t_order_item_0", "t_order_item_1", "t_address", "t_single"],
          "ds_1": ["t_order_0", "t_order_1", "t_order_item_0", "t_order_item_1", "t_address", "t_other"]}


@pytest.fixture(scope="module")
def names() -> LogicalNames:
    doc = load_yaml((ROOT / "conf" / "database-sharding.yaml").read_text(), "database-sharding.yaml")
    return LogicalNames(load_database_rules(doc, file="database-sharding.yaml"), TABLES)


def described(names: LogicalNames, sql: str) -> Described | None:
    return describing_text(sql, "sharding_db", names, TABLES)


@pytest.mark.parametrize(("sql", "ds", "text"), [
    ("SELECT * FROM t_order WHERE order_id = ?", "ds_0", "SELECT * FROM t_order_0 WHERE order_id = ?"),
    ("SELECT * FROM `T_Order` o WHERE o.order_id IN (SELECT order_id FROM t_order_item WHERE user_id = ?)", "ds_0",
     "SELECT * FROM `t_order_0` o WHERE o.order_id IN (SELECT order_id FROM t_order_item_0 WHERE user_id = ?)"),
    ("WITH t_order AS (SELECT ? AS n) SELECT n FROM t_order", "ds_0",
     "WITH t_order AS (SELECT ? AS n) SELECT n FROM t_order"),
    ("WITH RECURSIVE r (n) AS (SELECT ? UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r", "ds_0",
     "WITH RECURSIVE r (n) AS (SELECT ? UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r"),
    ("SELECT a.address_name FROM sharding_db.t_address a", "ds_0", "SELECT a.address_name FROM t_address a"),
    ("SELECT ? AS p", "ds_0", "SELECT ? AS p"),
    ("SELECT 1 FROM dual", "ds_0", "SELECT 1 FROM dual"),
    ("SELECT * FROM t_other JOIN t_order ON 1 = 1", "ds_1", "SELECT * FROM t_other JOIN t_order_0 ON 1 = 1"),
    ("SELECT order_id FROM t_order UNION SELECT order_id FROM t_order_item", "ds_0",
     "SELECT order_id FROM t_order_0 UNION SELECT order_id FROM t_order_item_0"),
])
def test_text_prepared_for_the_columns(names: LogicalNames, sql: str, ds: str, text: str) -> None:
    found = described(names, sql)
    assert found is not None
    assert (found.data_source, found.sql) == (ds, text)


def test_actual_tables_are_renamed_to_logic_names(names: LogicalNames) -> None:
    found = described(names, "SELECT * FROM t_order o JOIN t_order_item i USING (order_id) JOIN t_address a")
    assert found is not None
    assert found.renames == {"t_order_0": "t_order", "t_order_item_0": "t_order_item", "t_address": "t_address"}


@pytest.mark.parametrize("sql", [
    "INSERT INTO t_order (order_id, user_id) VALUES (?, ?)",  # no query: described from a routed variant
    "UPDATE t_order SET status = ? WHERE order_id = 1",
    "SELECT status INTO @s FROM t_order WHERE order_id = ?",  # SELECT ... INTO answers OK
    "SELECT * FROM information_schema.tables WHERE table_name = ?",  # another database's table
    "SELECT * FROM t_single JOIN t_other ON 1 = 1",  # no data source holds both
    "SELECT * FROM t_missing",
    "SHOW TABLES",
])
def test_not_described_here(names: LogicalNames, sql: str) -> None:
    assert described(names, sql) is None


def test_a_held_data_source_first(names: LogicalNames) -> None:
    found = describing_text("SELECT * FROM t_order WHERE order_id = ?", "sharding_db", names, TABLES, {"ds_1"})
    assert found is not None
    assert (found.data_source, found.sql) == ("ds_1", "SELECT * FROM t_order_0 WHERE order_id = ?")
