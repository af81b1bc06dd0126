import pytest

from routing.session_functions import substitute_session_functions

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
