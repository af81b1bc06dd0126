"""proxy.backends.rename: a pass-through database's logical name translated in statements, the physical one
shown back as the logical one in answers."""

from __future__ import annotations

import pytest

from protocol.packets import ColumnDefinition41, ERRPacket, encode_text_row
from proxy.backends.rename import Renaming, renaming_of

R = Renaming("app", "app_phys")

REQUESTS = [
    ("INSERT INTO app.t VALUES (1)", "INSERT INTO `app_phys`.t VALUES (1)"),
    ("select app.t.a, `app`.`t`.b from `APP`.t", "select `app_phys`.t.a, `app_phys`.`t`.b from `app_phys`.t"),
    ("SELECT * FROM app . t", "SELECT * FROM `app_phys` . t"),
    ("CHECK TABLE app.t, app.u", "CHECK TABLE `app_phys`.t, `app_phys`.u"),
    ("SHOW TABLES FROM app", "SHOW TABLES FROM `app_phys`"),
    ("show columns from t in app", "show columns from t in `app_phys`"),
    # a table or alias also named `app`: `app.x` is its column, but a table where a table is named
    ("select app.x from app", "select app.x from app"),
    ("select a.x from app.t a join app on 1", "select a.x from `app_phys`.t a join app on 1"),
    # strings, comments, other names: untouched
    ("select 'app.t' -- app.t", "select 'app.t' -- app.t"),
    ("select * from apps.t, t.app", "select * from apps.t, t.app"),
    ("select * from t", "select * from t"),
    # RENAME: sqlglot's tokenizer takes its text as one string
    (
        "RENAME TABLE mysql.p TO app.p, app.a TO app.b",
        "RENAME TABLE mysql.p TO `app_phys`.p, `app_phys`.a TO `app_phys`.b",
    ),
    # a SQL-level PREPARE's text is translated; a variable's is the server's
    (
        "PREPARE s FROM 'SELECT * FROM app.t WHERE v = \\'x\\''",
        "PREPARE s FROM 'SELECT * FROM `app_phys`.t WHERE v = ''x'''",
    ),
    ("PREPARE s FROM @q", "PREPARE s FROM @q"),
    # an expression keeps its label as typed; a column reference is labelled by its column
    (
        "SELECT app.f(), app.t.a + 1, app.t.b, app.g() AS g FROM app.t",
        "SELECT `app_phys`.f() AS `app.f()`, `app_phys`.t.a + 1 AS `app.t.a + 1`, `app_phys`.t.b, `app_phys`.g() AS g "
        "FROM `app_phys`.t",
    ),
]


@pytest.mark.parametrize(("sql", "sent"), REQUESTS)
def test_request_translates_only_the_database_qualifier(sql: str, sent: str) -> None:
    assert R.request(sql) == sent


ROWS = [
    ([b"app_phys.t", b"check", b"status", b"OK"], [b"app.t", b"check", b"status", b"OK"]),
    ([b"Table 'app_phys.t' doesn't exist", None], [b"Table 'app.t' doesn't exist", None]),
    ([b"select `app_phys`.`t`.`a` AS `a`" * 20], [b"select `app`.`t`.`a` AS `a`" * 20]),  # a 2-byte length
    ([b"app_physx", b"xapp_phys"], [b"app_physx", b"xapp_phys"]),
]


@pytest.mark.parametrize(("row", "shown"), ROWS)
def test_row_values_show_the_logical_name(row: list[bytes | None], shown: list[bytes | None]) -> None:
    assert R.row(encode_text_row(row)) == encode_text_row(shown)


def test_error_and_column_definitions() -> None:
    err = ERRPacket(1146, "Table 'app_phys.t' doesn't exist", "42S02").encode()
    assert ERRPacket.decode(R.error(err)).message == "Table 'app.t' doesn't exist"
    col = ColumnDefinition41("Tables_in_app_phys (t%)", schema="app_phys", org_name="Tables_in_app_phys")
    got = ColumnDefinition41.decode(R.column(col.encode()))
    assert (got.schema, got.name, got.org_name) == ("app", "Tables_in_app (t%)", "Tables_in_app")
    other = ColumnDefinition41("a", schema="other").encode()
    assert R.column(other) is other


@pytest.mark.parametrize(("name", "schema", "shown"), [
    # COM_STMT_PREPARE's definitions, decoded: SHOW TABLES' label and the schema (it kept `Tables_in_app_phys`)
    ("Tables_in_app_phys", "information_schema", ("Tables_in_app", "information_schema")),
    ("Tables_in_app_phys (t%)", "information_schema", ("Tables_in_app (t%)", "information_schema")),
    ("a", "app_phys", ("a", "app")),
    ("Tables_in_other", "other", ("Tables_in_other", "other")),
])
def test_prepared_definition(name: str, schema: str, shown: tuple[str, str]) -> None:
    got = R.definition(ColumnDefinition41(name, schema=schema, org_name=name))
    assert (got.name, got.schema) == shown


@pytest.mark.parametrize(
    ("sql", "renamed"),
    [
        ("CHECK TABLE t", True),
        ("show warnings", True),
        ("SHOW CREATE VIEW v", True),
        ("SELECT * FROM t", False),
        ("SHOW TABLES", True),
        ("OPTIMIZE NO_WRITE_TO_BINLOG TABLE t", True),
        ("EXPLAIN SELECT * FROM t", True),
        ("explain format=json update t set a = 1", True),
        ("ANALYZE FORMAT=JSON SELECT 1", True),
        ("DESCRIBE t", False),
        ("LOAD INDEX INTO CACHE t", True),
        ("ALTER TABLE t CHECK PARTITION p0", True),
    ],
)
def test_rows_for(sql: str, renamed: bool) -> None:
    assert Renaming.rows_for(sql) is renamed


def test_same_name_needs_no_renaming() -> None:
    assert renaming_of("app", "app") is None
    assert renaming_of("app", "app_phys") == R
