# ruff: noqa: E501  (table-driven: one case per line)
"""`||` under PIPES_AS_CONCAT read as CONCAT (routing.pipes): MariaDB's precedence (tighter than every binary
operator, looser than unary ones), select items labelled with their own text."""

from __future__ import annotations

import pytest

from routing.errors import RoutingError
from routing.pipes import pipes_as_concat


@pytest.mark.parametrize(("sql", "rewritten"), [
    ("SELECT 1 + 2 || 3", "SELECT 1 + CONCAT(2, 3) AS `1 + 2 || 3`"),  # MariaDB: 24
    ("SELECT 2 ^ 1 || 0 AS x", "SELECT 2 ^ CONCAT(1, 0) AS x"),  # MariaDB: 8
    ("SELECT -1 || 2 y", "SELECT CONCAT(-1, 2) y"),  # '-12'
    ("SELECT 3 - 1 || 2 FROM t", "SELECT 3 - CONCAT(1, 2) AS `3 - 1 || 2` FROM t"),
    ("SELECT NOT 0 || 1", "SELECT NOT CONCAT(0, 1) AS `NOT 0 || 1`"),
    ("SELECT a.b || _utf8'x' || f(x) || @v || @@session.s || ?, 1 FROM t", "SELECT CONCAT(a.b, _utf8'x', f(x), @v, @@session.s, ?) AS `a.b || _utf8'x' || f(x) || @v || @@session.s || ?`, 1 FROM t"),
    ("SELECT `x``y` || 'z' FROM t", "SELECT CONCAT(`x``y`, 'z') AS ```x````y`` || 'z'` FROM t"),
    ("SELECT 'a' 'b' || x'41' COLLATE binary", "SELECT CONCAT('a' 'b', x'41' COLLATE binary) AS `'a' 'b' || x'41' COLLATE binary`"),
    ("SELECT CONCAT(a || b, c) FROM t", "SELECT CONCAT(CONCAT(a, b), c) AS `CONCAT(a || b, c)` FROM t"),
    ("SELECT * FROM t WHERE c = (a || b) || CASE WHEN 1 THEN 'x' END", "SELECT * FROM t WHERE c = CONCAT((CONCAT(a, b)), CASE WHEN 1 THEN 'x' END)"),
    ("(SELECT a || b FROM t) UNION (SELECT c FROM u)", "(SELECT CONCAT(a, b) AS `a || b` FROM t) UNION (SELECT c FROM u)"),
    ("SELECT a || b, COUNT(*) FROM t GROUP BY a || b", "SELECT CONCAT(a, b) AS `a || b`, COUNT(*) FROM t GROUP BY CONCAT(a, b)"),
    ("SELECT * FROM t WHERE id IN (SELECT a || b FROM u)", "SELECT * FROM t WHERE id IN (SELECT CONCAT(a, b) FROM u)"),
    ("INSERT INTO t (a) VALUES ('a' || 'b'), (? || ?)", "INSERT INTO t (a) VALUES (CONCAT('a', 'b')), (CONCAT(?, ?))"),
    ("SELECT 'a||b' /* || */ FROM t", "SELECT 'a||b' /* || */ FROM t"),
])
def test_rewrite(sql: str, rewritten: str) -> None:
    assert pipes_as_concat(sql) == rewritten


@pytest.mark.parametrize("sql", ["SELECT a ||", "SELECT || a", "SELECT a || NOT b", "SELECT a || INTERVAL 1 DAY"])
def test_refused(sql: str) -> None:
    with pytest.raises(RoutingError, match="PIPES_AS_CONCAT"):
        pipes_as_concat(sql)
