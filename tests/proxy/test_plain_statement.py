"""`plain.plain_statement` remembers its answer by the text's skeleton (the text between its digit runs):
for any text, the remembered answer of a text that differs only in its digits is the answer worked out anew."""

from __future__ import annotations

import random

import pytest

from proxy.execution import plain
from proxy.execution.plain import plain_statement, plain_statement_uncached

PIECES = ["SELECT ", "INSERT INTO t VALUES (", "UPDATE t SET a=", "DELETE FROM t", "BEGIN", "COMMIT", "ROLLBACK",
          "REPLACE t", " ", "c", "t", "_", "x", "xa", "XA", "(", ")", ";", "'", '"', "/* ", " */", "/*!", "-- ", "#",
          "\n", "LAST_INSERT_ID(", "FOUND_ROWS()", "GET_LOCK(", "user()", "database()", "@a:=", " INTO @v",
          "information_schema.", "TEMPORARY", "LOCK TABLES", "HANDLER", "PREPARE", "SQL_CALC_FOUND_ROWS", ",", "=",
          "e", ".", "$", "\u0661", "SELECT1"]


@pytest.mark.parametrize("seed", range(3))
def test_remembered_answers_are_the_answers(seed: int) -> None:
    rng = random.Random(seed)
    plain._plain_by_skeleton.clear()
    for _ in range(600):
        template = [rng.choice(PIECES + ["#D"] * 5) for _ in range(rng.randint(1, 10))]
        for _ in range(5):
            sql = "".join("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 3))) if p == "#D" else p
                          for p in template)
            assert plain_statement(sql) == plain_statement_uncached(sql), sql


def test_a_skeleton_is_asked_once() -> None:
    plain._plain_by_skeleton.clear()
    assert plain_statement("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 5 AND 104") == "select"
    assert len(plain._plain_by_skeleton) == 1
    assert plain_statement("SELECT SUM(k) FROM sbtest2 WHERE id BETWEEN 77 AND 9") == "select"
    assert plain_statement("SELECT LAST_INSERT_ID(5)") is None
    assert plain_statement("SELECT LAST_INSERT_ID(7)") is None
    assert len(plain._plain_by_skeleton) == 2
    assert plain_statement("SELECT c FROM sbtest1 WHERE id = 5") == "select"  # nothing to remember: asked
    assert len(plain._plain_by_skeleton) == 2
