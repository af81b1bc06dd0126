"""`may_be_sticky`: the substring pre-test never hides a STICKY match."""

from __future__ import annotations

import pytest

from proxy.execution.sticky import MARKERS, STICKY, may_be_sticky, mentions_marker

STATEMENTS = [
    # (SQL, sticky)
    ("CREATE TEMPORARY TABLE t (a INT)", True),
    ("SELECT GET_LOCK('a', 1)", True),
    ("select get_lock ('a', 1)", True),
    ("LOCK TABLES t READ", True),
    ("lock table t write", True),
    ("SELECT @a := 1", True),
    ("SELECT 1 INTO @x", True),
    ("SELECT a INTO  @x FROM t", True),
    ("SELECT SQL_CALC_FOUND_ROWS * FROM t", True),
    ("PREPARE s FROM 'SELECT 1'", True),
    ("  prepare s from 'SELECT 1'", True),
    ("HANDLER t OPEN", True),
    ("XA START 'x'", True),
    ("SELECT FOUND_ROWS()", True),
    ("SELECT LAST_INSERT_ID(5)", True),
    ("SELECT c FROM sbtest1 WHERE id=5033", False),
    ("SELECT LAST_INSERT_ID()", False),
    ("INSERT INTO t VALUES (1)", False),
    ("SELECT * FROM blocks", False),
    ("SELECT 'example' AS xa_column", False),
    ("UPDATE t SET a = 1", False),
]


@pytest.mark.parametrize(("sql", "sticky"), STATEMENTS)
def test_may_be_sticky(sql: str, sticky: bool) -> None:
    assert may_be_sticky(sql) is sticky
    assert (STICKY.search(sql) is not None) is sticky


def test_every_sticky_match_contains_a_marker() -> None:
    for sql, sticky in STATEMENTS:
        if sticky:
            match = STICKY.search(sql)
            assert match is not None
            assert any(m in match.group(0).lower() or m in sql.lower() for m in MARKERS), sql


@pytest.mark.parametrize("marker", MARKERS)
def test_the_pre_test_checks_every_marker(marker: str) -> None:
    assert mentions_marker(f"select {marker} from t")


# a marker inside a string literal or a comment is data: it leaves nothing on the connection, and a session
# made sticky by it would keep one connection of every pool it holds for the rest of its life
IN_LITERALS = [
    ("SELECT * FROM t WHERE note = 'temporary'", False),
    ("SELECT 'a := b', 'lock tables'", False),
    ("SELECT 'it''s', \"LOCK TABLES\" FROM t", False),
    ("SELECT 'x\\' get_lock(' FROM t", False),
    ("/* temporary */ SELECT 1", False),
    ("SELECT 1 -- into @x", False),
    ("SELECT note FROM t # into @x", False),
    ("SELECT 'it''s', @v := 2", True),
    ("/*!40101 SET @a := 1 */", True),
    ("SELECT GET_LOCK('temporary', 1)", True),
]


@pytest.mark.parametrize(("sql", "sticky"), IN_LITERALS)
def test_markers_in_literals_and_comments(sql: str, sticky: bool) -> None:
    assert may_be_sticky(sql) is sticky


_PIECES = ["TEMPORARY", "temporary", "GET_LOCK", "get_lock (", "LOCK", "lock", "TABLES", "TABLE", "table", " ",
           "  ", "\n", "\t", "(", ")", ":", "=", ":=", "INTO", "into", "@", "SQL_CALC_FOUND_ROWS", "FOUND_ROWS",
           "found_rows(", "LAST_INSERT_ID", "last_insert_id(", "5", "x", "_", "a", "PREPARE", "HANDLER", "XA", "xa",
           "\u0130NTO", "\u0131nto", "\u017fql_calc_found_rows", "\u017f", "\u0130", "\u0131", "K", "\u212a",
           "\u00e9", "1", "'", "$", ".", "b", "S", "s", "T", "t", "F", "G", "L", "I"]


@pytest.mark.parametrize("seed", range(3))
def test_sticky_search_is_sticky(seed: int) -> None:
    """`sticky_search` (STICKY's alternatives led by their first character, which `re` scans a long text for
    quickly) finds a match exactly where STICKY does: its words in any case, Unicode case folds (`\u017f` is an
    `s`, `\u0130` an `i`), word boundaries, the anchored PREPARE / HANDLER / XA."""
    import random

    from proxy.execution.sticky import sticky_search

    rng = random.Random(seed)
    for sql, _ in STATEMENTS + IN_LITERALS:
        assert sticky_search(sql) is (STICKY.search(sql) is not None), sql
    for _ in range(20000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 8)))
        assert sticky_search(text) is (STICKY.search(text) is not None), text
