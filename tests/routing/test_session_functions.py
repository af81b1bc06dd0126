# ruff: noqa: E501  (table-driven: one case per line)
import pytest

from routing.session_functions import label_placeholders, printed_back, substitute_session_functions

VALUES = {
    "database": "'sharding_db'",
    "schema": "'sharding_db'",
    "connection_id": "7",
    "user": "'root@127.0.0.1'",
    "current_user": "'root@%'",
    "last_insert_id": "42",
    "row_count": "3",
    "found_rows": "10",
}


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("select database()", "select 'sharding_db' AS `database()`"),
        ("SELECT DATABASE(), 1", "SELECT 'sharding_db' AS `DATABASE()`, 1"),
        ("SELECT DATABASE() AS db", "SELECT 'sharding_db' AS db"),
        (
            "SELECT * FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
            "SELECT * FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sharding_db'",
        ),
        ("select 'database()'", None),
        ("select `database()` from t", None),
        ("select 1 /* database() */", None),
        ("SELECT CONNECTION_ID()", "SELECT CAST(7 AS UNSIGNED) AS `CONNECTION_ID()`"),
        ("select user(), current_user()", "select 'root@127.0.0.1' AS `user()`, 'root@%' AS `current_user()`"),
        ("SELECT LAST_INSERT_ID()", "SELECT CAST(42 AS UNSIGNED) AS `LAST_INSERT_ID()`"),
        ("SELECT LAST_INSERT_ID(5)", None),
        ("SELECT ROW_COUNT(), FOUND_ROWS()", "SELECT 3 AS `ROW_COUNT()`, 10 AS `FOUND_ROWS()`"),
        ("select 1", None),
        ("SELECT schema ( )", "SELECT 'sharding_db' AS `schema ( )`"),
        # an expression inside parentheses that are no subquery's: no alias (it was `... AS `USER()`` there: 1583)
        ("SELECT CONCAT('<', USER(), '>')", "SELECT CONCAT('<', 'root@127.0.0.1', '>') AS `CONCAT('<', USER(), '>')`"),
        (
            "SELECT IF(0, CONNECTION_ID(), CONNECTION_ID())",
            "SELECT IF(0, CAST(7 AS UNSIGNED), CAST(7 AS UNSIGNED)) AS `IF(0, CONNECTION_ID(), CONNECTION_ID())`",
        ),
        ("INSERT INTO t VALUES (1, USER(), 2)", "INSERT INTO t VALUES (1, 'root@127.0.0.1', 2)"),
        ("INSERT INTO t VALUES (USER())", "INSERT INTO t VALUES ('root@127.0.0.1')"),
        ("SELECT (SELECT DATABASE()), 1", "SELECT (SELECT 'sharding_db') AS `(SELECT DATABASE())`, 1"),
        ("SELECT (SELECT DATABASE() FROM DUAL)", "SELECT (SELECT 'sharding_db' AS `DATABASE()` FROM DUAL)"),
        (
            "SELECT COALESCE(NULL, DATABASE()), DATABASE()",
            "SELECT COALESCE(NULL, 'sharding_db') AS `COALESCE(NULL, DATABASE())`, 'sharding_db' AS `DATABASE()`",
        ),
        ("SELECT ')', DATABASE()", "SELECT ')', 'sharding_db' AS `DATABASE()`"),
        # an unaliased select-list item holding a call keeps its text as its label; an aliased one its alias
        ("SELECT @a - connection_id()", "SELECT @a - CAST(7 AS UNSIGNED) AS `@a - connection_id()`"),
        ("SELECT @a - connection_id() AS x FROM t", "SELECT @a - CAST(7 AS UNSIGNED) AS x FROM t"),
        ("SELECT CONCAT(USER()) u", "SELECT CONCAT('root@127.0.0.1') u"),
        (
            "SELECT a, CONCAT(USER(), 'x') FROM t WHERE u = USER() ORDER BY 1",
            "SELECT a, CONCAT('root@127.0.0.1', 'x') AS `CONCAT(USER(), 'x')` FROM t WHERE u = 'root@127.0.0.1' "
            "ORDER BY 1",
        ),
        (
            "SELECT DISTINCT CONCAT('`', USER())",
            "SELECT DISTINCT CONCAT('`', 'root@127.0.0.1') AS `CONCAT('``', USER())`",
        ),
        ("SELECT 1 FROM t WHERE id = LAST_INSERT_ID()", "SELECT 1 FROM t WHERE id = CAST(42 AS UNSIGNED)"),
    ],
)
def test_substitute_session_functions(sql: str, expected: str | None) -> None:
    assert substitute_session_functions(sql, VALUES) == expected


TYPED = {name: f"IF(0, {name.upper()}(), {value})" for name, value in VALUES.items()}


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # the select list's calls typed (`select_values`), the others' plain: a value routes only outside it
        ("SELECT USER()", "SELECT IF(0, USER(), 'root@127.0.0.1') AS `USER()`"),
        (
            "SELECT USER(), id FROM t WHERE u = USER()",
            "SELECT IF(0, USER(), 'root@127.0.0.1') AS `USER()`, id FROM t WHERE u = 'root@127.0.0.1'",
        ),
        (
            "SELECT CONCAT(USER(), 'x') FROM t WHERE k = CONNECTION_ID()",
            "SELECT CONCAT(IF(0, USER(), 'root@127.0.0.1'), 'x') AS `CONCAT(USER(), 'x')` FROM t "
            "WHERE k = CAST(7 AS UNSIGNED)",
        ),
        (
            "SELECT k, COUNT(*), LAST_INSERT_ID() AS l FROM t GROUP BY k",
            "SELECT k, COUNT(*), IF(0, LAST_INSERT_ID(), 42) AS l FROM t GROUP BY k",
        ),
        # an item holding an aggregate: the merge computes it from its text, plain literals only
        ("SELECT COUNT(*) + CONNECTION_ID() AS n FROM t", "SELECT COUNT(*) + CAST(7 AS UNSIGNED) AS n FROM t"),
        (
            "SELECT CONCAT(DATABASE(), SUM(v)), DATABASE() FROM t",
            "SELECT CONCAT('sharding_db', SUM(v)) AS `CONCAT(DATABASE(), SUM(v))`, "
            "IF(0, DATABASE(), 'sharding_db') AS `DATABASE()` FROM t",
        ),
        ("INSERT INTO t VALUES (USER())", "INSERT INTO t VALUES ('root@127.0.0.1')"),
        ("UPDATE t SET u = USER() WHERE id = 1", "UPDATE t SET u = 'root@127.0.0.1' WHERE id = 1"),
    ],
)
def test_select_list_values(sql: str, expected: str) -> None:
    assert substitute_session_functions(sql, VALUES, TYPED) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # DATABASE() without a database: a whole item is a column of the function's type; in an expression, NULL
        ("SELECT DATABASE(), 1", "SELECT IF(0, DATABASE(), NULL) AS `DATABASE()`, 1"),
        ("SELECT schema()", "SELECT IF(0, schema(), NULL) AS `schema()`"),
        ("SELECT CONCAT(DATABASE(), 'x')", "SELECT CONCAT(NULL, 'x') AS `CONCAT(DATABASE(), 'x')`"),
    ],
)
def test_no_database(sql: str, expected: str) -> None:
    assert substitute_session_functions(sql, {"database": "NULL", "schema": "NULL"}) == expected


def test_functions_without_a_value_are_left_to_the_backend() -> None:
    assert substitute_session_functions("SELECT LAST_INSERT_ID()", {"database": "'x'"}) is None


def test_has_call_answers_as_the_call_pattern() -> None:
    """`has_call` (linear, literal-led) says what `CALL.search` says, on generated texts."""
    import random

    from routing.session_functions import CALL, has_call

    rng = random.Random(35)
    words = [
        "database",
        "DATABASE",
        "schema",
        "user",
        "User",
        "current_user",
        "last_insert_id",
        "found_rows",
        "row_count",
        "connection_id",
        "xuser",
        "user_id",
        "users",
        "my_database",
        "count",
        "now",
        "f",
    ]
    seps = ["", " ", "  ", "\n", "\t", "(", ")", "()", "( )", "(\n)", ",", "`", "'", ".", "_", "1", "x"]
    for _ in range(20000):
        text = "".join(rng.choice(words) if rng.random() < 0.4 else rng.choice(seps) for _ in range(rng.randint(1, 12)))
        assert has_call(text) == (CALL.search(text) is not None), repr(text)


@pytest.mark.parametrize(("message", "sql", "values", "expected"), [
    ("out of range in 'cast(4 as unsigned) - 5'", "SELECT LAST_INSERT_ID() - 5", {"last_insert_id": "4"}, "out of range in 'last_insert_id() - 5'"),
    ("in 'cast(cast(4 as unsigned) as unsigned) - 5'", "SELECT CAST(last_insert_id() AS UNSIGNED) - 5", {"last_insert_id": "4"}, "in 'cast(last_insert_id() as unsigned) - 5'"),
    ("in 'cast(7 as unsigned) - cast(4 as unsigned)'", "SELECT CONNECTION_ID() - LAST_INSERT_ID()", {"connection_id": "7", "last_insert_id": "4"}, "in 'connection_id() - last_insert_id()'"),
    ("in 'cast(4 as unsigned) - cast(4 as unsigned)'", "SELECT CONNECTION_ID() - LAST_INSERT_ID()", {"connection_id": "4", "last_insert_id": "4"}, "in 'cast(4 as unsigned) - cast(4 as unsigned)'"),  # which is which: unknown
    ("in 'cast(4 as unsigned) - 5'", "SELECT CAST(4 AS UNSIGNED) - 5", {"last_insert_id": "4"}, "in 'cast(4 as unsigned) - 5'"),  # no call: the user's own
    ("in 'cast(octet_length('kt') as unsigned) - 100'", "SELECT CAST(LENGTH(DATABASE()) AS UNSIGNED) - 100", {"database": "'kt'"}, "in 'cast(octet_length(database()) as unsigned) - 100'"),
    ("in 'cast(octet_length('kt') as unsigned) - 100'", "SELECT CAST(LENGTH(SCHEMA()) AS UNSIGNED) - 100", {"schema": "'kt'"}, "in 'cast(octet_length(database()) as unsigned) - 100'"),
    ("in 'octet_length('r@h') - octet_length('r@%')'", "SELECT LENGTH(SESSION_USER()) - LENGTH(CURRENT_USER())", {"session_user": "'r@h'", "current_user": "'r@%'"}, "in 'octet_length(user()) - octet_length(current_user())'"),
    ("in 'octet_length('a\\'b\\\\c')'", "SELECT LENGTH(SYSTEM_USER())", {"system_user": "'a''b\\\\c'"}, "in 'octet_length(user())'"),  # printed with backslashes
    ("in 'cast(0 as unsigned) - 100'", "SELECT CAST(ROW_COUNT() AS UNSIGNED) - 100", {"row_count": "0"}, "in 'cast(row_count() as unsigned) - 100'"),
    ("in 'cast(3 as unsigned) - 100'", "SELECT CAST(FOUND_ROWS() AS UNSIGNED) - 100", {"found_rows": "3"}, "in 'cast(found_rows() as unsigned) - 100'"),
    ("in 'cast(3 as unsigned) - 3'", "SELECT CAST(FOUND_ROWS() AS UNSIGNED) - 3", {"found_rows": "3"}, "in 'cast(3 as unsigned) - 3'"),  # the user's 3 too: unknown
    ("in 'octet_length('kt') - octet_length('kt')'", "SELECT LENGTH(DATABASE()) - LENGTH('kt')", {"database": "'kt'"}, "in 'octet_length('kt') - octet_length('kt')'"),  # the user's own 'kt'
    ("in 'octet_length('r') - octet_length('r')'", "SELECT LENGTH(USER()) - LENGTH(CURRENT_USER())", {"user": "'r'", "current_user": "'r'"}, "in 'octet_length('r') - octet_length('r')'"),  # which is which: unknown
    # typed as the function on a pass-through database (proxy.session.metadata)
    ("in 'if(0,connection_id(),cast(7 as unsigned)) + 1'", "SELECT CONNECTION_ID() + 1", {"connection_id": "IF(0, CONNECTION_ID(), CAST(7 AS UNSIGNED))"}, "in 'connection_id() + 1'"),
    ("in 'if(0,user(),'r@h') + 1'", "SELECT SESSION_USER() + 1", {"session_user": "IF(0, USER(), 'r@h')"}, "in 'user() + 1'"),
])
def test_printed_back(message: str, sql: str, values: dict[str, str], expected: str) -> None:
    assert printed_back(message, sql, values) == expected


@pytest.mark.parametrize(("sql", "labelled"), [
    ("SELECT ?, ? + 1 FROM t", "SELECT ? AS `?`, ? + 1 AS `? + 1` FROM t"),
    ("SELECT ((?)), (? + 1), ? AS x, ? y, '?' FROM t WHERE id = ?", "SELECT ((?)) AS `?`, (? + 1) AS `(? + 1)`, ? AS x, ? y, '?' FROM t WHERE id = ?"),
    ("SELECT CONCAT(?, '`') FROM t", "SELECT CONCAT(?, '`') AS `CONCAT(?, '``')` FROM t"),
    ("UPDATE t SET v = ? WHERE id = ?", "UPDATE t SET v = ? WHERE id = ?"),
    ("SELECT v FROM t WHERE id = ?", "SELECT v FROM t WHERE id = ?"),
])
def test_label_placeholders(sql: str, labelled: str) -> None:
    assert label_placeholders(sql) == labelled


@pytest.mark.parametrize(("message", "sql", "expected"), [
    # a select item's typed literal, then a plain one elsewhere (a sharded database's substitution)
    ("in 'if(0,last_insert_id(),cast(4 as unsigned)) - 5'", "SELECT LAST_INSERT_ID() - 5", "in 'last_insert_id() - 5'"),
    ("in 'cast(4 as unsigned) - 5'", "SELECT 1 FROM t WHERE id > LAST_INSERT_ID() - 5", "in 'last_insert_id() - 5'"),
])
def test_printed_back_with_select_values(message: str, sql: str, expected: str) -> None:
    values = {"last_insert_id": "4"}
    typed = {"last_insert_id": "IF(0, LAST_INSERT_ID(), CAST(4 AS UNSIGNED))"}
    assert printed_back(message, sql, values, typed) == expected
