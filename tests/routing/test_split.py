import pytest

from routing.split import split_statements


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1;", ["SELECT 1"]),
        ("SELECT 1; SELECT 2", ["SELECT 1", " SELECT 2"]),
        ("SELECT ';'; SELECT 2", ["SELECT ';'", " SELECT 2"]),
        ("SELECT \"a;b\";SELECT 2;", ['SELECT "a;b"', "SELECT 2"]),
        ("SELECT `x;y` FROM t; SELECT 2", ["SELECT `x;y` FROM t", " SELECT 2"]),
        ("SELECT 'it\\'s;'; SELECT 2", ["SELECT 'it\\'s;'", " SELECT 2"]),
        ("SELECT 'a'';b'; SELECT 2", ["SELECT 'a'';b'", " SELECT 2"]),
        ("SELECT 1 /* ; */; SELECT 2", ["SELECT 1 /* ; */", " SELECT 2"]),
        ("SELECT 1 -- ;\n; SELECT 2", ["SELECT 1 -- ;\n", " SELECT 2"]),
        ("SELECT 1 # ;\n; SELECT 2", ["SELECT 1 # ;\n", " SELECT 2"]),
        ("SELECT 1 - 1; SELECT 2", ["SELECT 1 - 1", " SELECT 2"]),
        ("SELECT 1;;SELECT 2", ["SELECT 1", "SELECT 2"]),
        ("SET SQL_AUTO_IS_NULL = 0; SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
         ["SET SQL_AUTO_IS_NULL = 0", " SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"]),
        ("SELECT 1; -- trailing comment", ["SELECT 1"]),
        ("SELECT 'unterminated; x", ["SELECT 'unterminated; x"]),
    ],
)
def test_split_statements(sql: str, expected: list[str]) -> None:
    assert split_statements(sql) == expected
