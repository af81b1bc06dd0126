"""Shape keys, value tokens and the offset-preserving parse."""

from __future__ import annotations

from decimal import Decimal

import pytest

from routing.admin import preview_rows, table_node_rows, table_rule_rows
from routing.kernel import ShardingKernel
from routing.parse import LITERAL_MARK, literal_value, parse_statement, scan_shape

M = LITERAL_MARK


@pytest.mark.parametrize(
    ("sql", "key", "values"),
    [
        ("SELECT * FROM t_order_1 WHERE a = 12", f"SELECT * FROM t_order_1 WHERE a = {M}", ["12"]),
        ("SELECT 'it''s', \"x\\\"y\", ?, 1.5e3", f"SELECT {M}, {M}, ?, {M}", ["'it''s'", '"x\\"y"', "?", "1.5e3"]),
        ("SELECT `a 1` /* 2 */ -- 3\n# 4\n FROM t", "SELECT `a 1` /* 2 */ -- 3\n# 4\n FROM t", []),
        ("SELECT -5, x1, 1x", f"SELECT -{M}, x1, 1x", ["5"]),
    ],
)
def test_scan_shape(sql: str, key: str, values: list[str]) -> None:
    shape = scan_shape(sql)
    assert shape.key == key
    assert [shape.text(k) for k in range(len(shape.spans))] == values


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("12", "n", 12),
        ("1.50", "n", Decimal("1.50")),
        ("'a''b'", "s", "a'b"),
        ("'a\\nb'", "s", "a\nb"),
        ('"x"', "s", "x"),
        # as MariaDB reads them (SELECT HEX(...)): \% and \_ keep their backslash, outside LIKE as in it
        ("'a\\_b'", "s", "a\\_b"),
        ("'a\\%b'", "s", "a\\%b"),
        ("'a\\\\_b'", "s", "a\\_b"),
        ("'a\\\\\\_b'", "s", "a\\\\_b"),
        ("'\\Z\\0\\q'", "s", "\x1a\0q"),
    ],
)
def test_literal_value(text: str, kind: str, value: object) -> None:
    assert literal_value(text, kind) == value


def test_parse_keeps_offsets_for_placeholders_and_replace() -> None:
    sql = "REPLACE INTO t (a) VALUES (?)"
    ast = parse_statement(scan_shape(sql))
    assert ast is not None
    literal = ast.expression.expressions[0].expressions[0]
    assert literal.meta["start"] == sql.index("?")


def test_admin_rows(kernel: ShardingKernel) -> None:
    routed = kernel.route("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 1")
    assert preview_rows(routed) == [("ds_1", "SELECT * FROM t_order_1 WHERE user_id = 1 AND order_id = 1")]
    nodes = dict(table_node_rows(kernel.rules))
    assert nodes["t_order"] == "ds_0.t_order_0, ds_0.t_order_1, ds_1.t_order_0, ds_1.t_order_1"
    rule = table_rule_rows(kernel.rules, "t_order")[0]
    assert rule[0] == "t_order" and rule[3:5] == ("STANDARD", "user_id")
    assert rule[5]  # the algorithm's type (SHOW SHARDING TABLE RULES prints types and props, as ShardingSphere)


@pytest.mark.parametrize("seed", range(4))
def test_text_shapes_by_skeleton_are_scan_shape(seed: int) -> None:
    """`TextShapes` by skeleton (the shape of a text whose integer literals differ from one seen before) gives
    exactly `scan_shape`'s shape, wherever the digits stand: literals, identifiers (`sbtest1`), strings,
    comments, decimals, exponents, hex, `$`, `.`, Unicode digits and parameters beside them."""
    import random

    from routing.parse import TextShapes

    rng = random.Random(seed)
    pieces = ["SELECT ", "c", " FROM ", "sbtest", "t", " WHERE ", "id", "=", " = ", " BETWEEN ", " AND ", " ORDER BY ",
              ", ", "(", ")", "'", "'a", "b'", '"', "`", "`x", "/* ", " */", "-- ", "\n", "#", ".", "e", "E", "+", "-",
              "0x", "$", "@", "?", " ", "\u0661", "_", "x", "\\", " LIMIT ", "IN (", "1e", "a.b"]
    shapes = TextShapes(limit=64)
    for _ in range(400):
        template = [rng.choice(pieces + ["#D"] * 6) for _ in range(rng.randint(1, 14))]
        for _ in range(6):
            sql = "".join("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 4))) if p == "#D" else p
                          for p in template)
            assert shapes.shape(sql) == scan_shape(sql), sql


def test_text_shapes_reuse_is_scan_shape() -> None:
    """`TextShapes` (a text statement's shape from the one of the same text before its trailing digits)
    gives exactly `scan_shape`'s shape, whatever the digits and whatever comes before them: literals,
    comments, strings, identifiers and numbers that run into the digits."""
    import random

    from routing.parse import TextShapes

    rng = random.Random(4)
    heads = ["SELECT c FROM t WHERE id=", "SELECT c FROM t WHERE id = ", "SELECT 1e", "SELECT 1.", "SELECT .",
             "SELECT x FROM t WHERE a='x' AND id=", "SELECT `a1` FROM t WHERE b = -", "SELECT c FROM t -- ",
             "SELECT c FROM t /* x */ WHERE id=", "SELECT 'abc", "SELECT id", "SELECT $", "SELECT a.b", "",
             "SELECT * FROM t LIMIT ", "SELECT * FROM t LIMIT 5, ", "SELECT c FROM t WHERE id IN (1, 2, ",
             "SELECT c FROM t WHERE s = \"q\" AND k=", "SELECT 0x", "SELECT 1e+", "SELECT ?, "]
    shapes = TextShapes(limit=8)
    for _ in range(3000):
        sql = rng.choice(heads) + "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 6)))
        assert shapes.shape(sql) == scan_shape(sql), sql


@pytest.mark.parametrize("quote", ["'", '"'])
def test_a_long_literal_costs_its_copies_not_memory_per_character(quote: str) -> None:
    """Python's re keeps a backtracking state per character for `(?:[^']|'')*`: a 2 MB literal took ~470 MB to
    tokenize. The patterns walk a literal in one pass of a character class between escapes."""
    import tracemalloc

    from routing.parse import scan_shape
    from routing.split import split_statements

    value = "x" * 2_000_000 + "\\\\" + quote * 2 + "y" * 1000
    sql = f"INSERT INTO t_order (user_id, order_id, status) VALUES (1, 2, {quote}{value}{quote})"
    tracemalloc.start()
    try:
        shape = scan_shape(sql)
        parts = split_statements(sql + "; SELECT 1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert shape.spans[-1][1] - shape.spans[-1][0] == len(value) + 2 or quote == '"'
    assert len(parts) == 2
    assert peak < 20 * len(sql), peak


def test_no_quoted_text_pattern_repeats_an_alternation_per_character() -> None:
    """The neighbours of the literal above: any `(?:[^...]|...)*` in the code's regexes keeps a state per character
    in Python's re (a long literal through the read/write classifier, a SHOW ... LIKE, a SQL PREPARE: hundreds of
    bytes per byte). Written unrolled instead: `'[^'\\\\]*(?:(?:\\\\.|'')[^'\\\\]*)*'`."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    per_character = re.compile(r"\(\?:\[\^[^\]]*\]\|[^)]*\)\*")
    found = [
        f"{path.relative_to(root)}:{n}"
        for package in ("proxy", "routing", "protocol", "merge")
        for path in sorted((root / package).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if not line.lstrip().startswith("#") and per_character.search(line)
    ]
    assert found == [], found
