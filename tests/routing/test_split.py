import pytest

from routing.split import split_statements


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1;", ["SELECT 1"]),
        ("SELECT 1; SELECT 2", ["SELECT 1", " SELECT 2"]),
        ("SELECT ';'; SELECT 2", ["SELECT ';'", " SELECT 2"]),
        ('SELECT "a;b";SELECT 2;', ['SELECT "a;b"', "SELECT 2"]),
        ("SELECT `x;y` FROM t; SELECT 2", ["SELECT `x;y` FROM t", " SELECT 2"]),
        ("SELECT 'it\\'s;'; SELECT 2", ["SELECT 'it\\'s;'", " SELECT 2"]),
        ("SELECT 'a'';b'; SELECT 2", ["SELECT 'a'';b'", " SELECT 2"]),
        ("SELECT 1 /* ; */; SELECT 2", ["SELECT 1 /* ; */", " SELECT 2"]),
        ("SELECT 1 -- ;\n; SELECT 2", ["SELECT 1 -- ;\n", " SELECT 2"]),
        ("SELECT 1 # ;\n; SELECT 2", ["SELECT 1 # ;\n", " SELECT 2"]),
        ("SELECT 1 - 1; SELECT 2", ["SELECT 1 - 1", " SELECT 2"]),
        ("SELECT 1;;SELECT 2", ["SELECT 1", "SELECT 2"]),
        (
            "SET SQL_AUTO_IS_NULL = 0; SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            ["SET SQL_AUTO_IS_NULL = 0", " SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"],
        ),
        ("SELECT 1; -- trailing comment", ["SELECT 1"]),
        ("SELECT 'unterminated; x", ["SELECT 'unterminated; x"]),
    ],
)
def test_split_statements(sql: str, expected: list[str]) -> None:
    assert split_statements(sql) == expected


# compound statements: a body's `;` belongs to the statement (the server reads the body as part of it)
@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END; SELECT 3",
            ["CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END", " SELECT 3"],
        ),
        (
            "CREATE OR REPLACE DEFINER=`root`@`%` PROCEDURE p() lbl: LOOP LEAVE lbl; END LOOP lbl; SELECT 1",
            ["CREATE OR REPLACE DEFINER=`root`@`%` PROCEDURE p() lbl: LOOP LEAVE lbl; END LOOP lbl", " SELECT 1"],
        ),
        (
            "CREATE FUNCTION f() RETURNS INT BEGIN DECLARE x INT; SET x = IF(1, 2, 3); RETURN x; END; SELECT f()",
            ["CREATE FUNCTION f() RETURNS INT BEGIN DECLARE x INT; SET x = IF(1, 2, 3); RETURN x; END", " SELECT f()"],
        ),
        (
            "CREATE FUNCTION f() RETURNS INT RETURN 1; SELECT 2",
            ["CREATE FUNCTION f() RETURNS INT RETURN 1", " SELECT 2"],
        ),
        (
            "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1; SELECT 2",
            ["CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1", " SELECT 2"],
        ),
        (
            "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN IF NEW.a > 0 THEN SET NEW.b = 1; END IF; END; "
            "SELECT 2",
            [
                "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN IF NEW.a > 0 THEN SET NEW.b = 1; END IF; END",
                " SELECT 2",
            ],
        ),
        (
            "BEGIN NOT ATOMIC DECLARE x INT DEFAULT 0; IF x = 0 THEN SELECT 1; ELSEIF x THEN SELECT 3; ELSE SELECT 2; "
            "END IF; END; SELECT 9",
            [
                "BEGIN NOT ATOMIC DECLARE x INT DEFAULT 0; IF x = 0 THEN SELECT 1; ELSEIF x THEN "
                "SELECT 3; ELSE SELECT 2; END IF; END",
                " SELECT 9",
            ],
        ),
        (
            "BEGIN NOT ATOMIC SELECT 'a;b'; /* ; */ SELECT REPEAT('x', 2); END; SELECT 3",
            ["BEGIN NOT ATOMIC SELECT 'a;b'; /* ; */ SELECT REPEAT('x', 2); END", " SELECT 3"],
        ),
        (
            "BEGIN NOT ATOMIC SELECT CASE 1 WHEN 1 THEN 2 END AS c FROM dual; SELECT 1; END; SELECT 2",
            ["BEGIN NOT ATOMIC SELECT CASE 1 WHEN 1 THEN 2 END AS c FROM dual; SELECT 1; END", " SELECT 2"],
        ),
        ("lbl: BEGIN NOT ATOMIC SELECT 1; END lbl; SELECT 2", ["lbl: BEGIN NOT ATOMIC SELECT 1; END lbl", " SELECT 2"]),
        (
            "IF 1 THEN SELECT CASE WHEN 1 THEN 2 END; END IF; SELECT 5",
            ["IF 1 THEN SELECT CASE WHEN 1 THEN 2 END; END IF", " SELECT 5"],
        ),
        (
            "CREATE PROCEDURE p() BEGIN WHILE 1 DO SELECT 1; END WHILE; REPEAT SELECT 1; UNTIL 1 END REPEAT; END; "
            "SELECT 2",
            [
                "CREATE PROCEDURE p() BEGIN WHILE 1 DO SELECT 1; END WHILE; REPEAT SELECT 1; UNTIL 1 END REPEAT; END",
                " SELECT 2",
            ],
        ),
        (
            "CREATE PROCEDURE p() BEGIN CASE WHEN 1 THEN SELECT 1; END CASE; FOR i IN 1..3 DO SELECT i; END FOR; END; "
            "SELECT 2",
            [
                "CREATE PROCEDURE p() BEGIN CASE WHEN 1 THEN SELECT 1; END CASE; FOR i IN 1..3 DO SELECT i; "
                "END FOR; END",
                " SELECT 2",
            ],
        ),
        (
            "/*!50003 CREATE*/ /*!50003 PROCEDURE p() BEGIN SELECT 1; END */; SELECT 2",
            ["/*!50003 CREATE*/ /*!50003 PROCEDURE p() BEGIN SELECT 1; END */", " SELECT 2"],
        ),
        # not compound: a transaction's BEGIN, IF in DDL, IF() and REPEAT() functions, FOR UPDATE
        ("BEGIN; SELECT 1", ["BEGIN", " SELECT 1"]),
        ("BEGIN WORK; SELECT 1", ["BEGIN WORK", " SELECT 1"]),
        (
            "DROP TABLE IF EXISTS x; CREATE TABLE IF NOT EXISTS y (a INT); SELECT 1",
            ["DROP TABLE IF EXISTS x", " CREATE TABLE IF NOT EXISTS y (a INT)", " SELECT 1"],
        ),
        (
            "SELECT IF(1, 2, 3), REPEAT('a', 2); SELECT 1 FROM t FOR UPDATE; SELECT 2",
            ["SELECT IF(1, 2, 3), REPEAT('a', 2)", " SELECT 1 FROM t FOR UPDATE", " SELECT 2"],
        ),
        ("SELECT CASE WHEN 1 THEN 2 END; SELECT 3", ["SELECT CASE WHEN 1 THEN 2 END", " SELECT 3"]),
    ],
)
def test_compound_bodies_stay_whole(sql: str, expected: list[str]) -> None:
    assert split_statements(sql) == expected
