"""ORDER BY merges: k-way merge of sorted node streams, compared like MySQL."""

from __future__ import annotations

import pytest

from merge.spec import MergeSpec, OrderItem
from tests.merge.support import cols, expect, node, run

A, D = False, True  # ASC, DESC


def ob(*items: tuple[int, bool]) -> tuple[OrderItem, ...]:
    return tuple(OrderItem(i, d) for i, d in items)


# (case, column kinds, order items, node streams, expected output)
CASES = [
    ("int asc", ["int"], ob((0, A)), [node(1, 4, 9), node(2, 3, 10)], expect(1, 2, 3, 4, 9, 10)),
    ("int numeric not text", ["int"], ob((0, A)), [node(9, 100), node(10)], expect(9, 10, 100)),
    ("int desc", ["int"], ob((0, D)), [node(9, 4, 1), node(10, 3, 2)], expect(10, 9, 4, 3, 2, 1)),
    ("negative ints", ["int"], ob((0, A)), [node(-10, -2), node(-5, 0)], expect(-10, -5, -2, 0)),
    ("unsigned bigint", ["uint"], ob((0, A)), [node("9223372036854775808"), node("18446744073709551615", )],
     expect("9223372036854775808", "18446744073709551615")),
    ("decimal", ["dec"], ob((0, A)), [node("-1.50", "2.00"), node("-10.00", "10.00")],
     expect("-10.00", "-1.50", "2.00", "10.00")),
    ("double incl exponent", ["double"], ob((0, A)), [node("-1e20", "0.5", "1e20"), node("2", "3e5")],
     expect("-1e20", "0.5", "2", "3e5", "1e20")),
    ("nulls first asc", ["int"], ob((0, A)), [node(None, 1, 5), node(None, 3)], expect(None, None, 1, 3, 5)),
    ("nulls last desc", ["int"], ob((0, D)), [node(5, 1, None), node(3, None)], expect(5, 3, 1, None, None)),
    ("ci mixed case", ["ci"], ob((0, A)), [node("apple", "Cherry"), node("Banana", "date")],
     expect("apple", "Banana", "Cherry", "date")),
    ("ci ties keep stream order", ["ci"], ob((0, A)), [node("a", "b"), node("A", "B")], expect("a", "A", "b", "B")),
    ("ci accents fold", ["ci"], ob((0, A)), [node("éclair", "zebra"), node("apple", "fig")],
     expect("apple", "éclair", "fig", "zebra")),
    ("ci pad space", ["ci"], ob((0, A)), [node("a ", "b"), node("a", "ab")], expect("a ", "a", "ab", "b")),
    ("bin byte order", ["bin"], ob((0, A)), [node("Cherry", "apple"), node("Banana", "date")],
     expect("Banana", "Cherry", "apple", "date")),
    ("binary charset", ["binary"], ob((0, A)), [node(b"\x01", b"\xff"), node(b"\x00", b"a")],
     expect(b"\x00", b"\x01", b"a", b"\xff")),
    ("cs collation", ["cs"], ob((0, A)), [node("B", "a"), node("A", "b")], expect("A", "B", "a", "b")),
    ("0900 ci", ["0900"], ob((0, A)), [node("a", "C"), node("B")], expect("a", "B", "C")),
    ("uca1400 ci", ["uca1400"], ob((0, A)), [node("x", "Z"), node("Y")], expect("x", "Y", "Z")),
    ("latin1 ci", ["latin1"], ob((0, A)), [node(b"b", b"\xc9t\xe9"), node(b"A")], expect("A", "b", b"\xc9t\xe9")),
    ("string desc ci", ["ci"], ob((0, D)), [node("b", "A"), node("C", "a")], expect("C", "b", "A", "a")),
    ("date", ["date"], ob((0, A)), [node("2020-01-02", "2021-01-01"), node("2019-12-31")],
     expect("2019-12-31", "2020-01-02", "2021-01-01")),
    ("time negative and >99h", ["time"], ob((0, A)), [node("-01:00:00", "100:00:00"), node("09:00:00")],
     expect("-01:00:00", "09:00:00", "100:00:00")),
    ("multi key", ["ci", "int"], ob((0, A), (1, D)), [node(("a", 1), ("b", 9)), node(("A", 5), ("b", 2))],
     expect(("A", 5), ("a", 1), ("b", 9), ("b", 2))),
    ("multi key nulls", ["int", "int"], ob((0, D), (1, A)),
     [node((2, None), (2, 1), (None, 0)), node((2, 0), (None, None))],
     expect((2, None), (2, 0), (2, 1), (None, None), (None, 0))),
    ("empty streams", ["int"], ob((0, A)), [node(), node(3), node()], expect(3)),
    ("single stream", ["int"], ob((0, A)), [node(1, 2)], expect(1, 2)),
    ("no streams", ["int"], ob((0, A)), [], []),
]


@pytest.mark.parametrize(("kinds", "order", "streams", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_order_by(kinds: list[str], order: tuple[OrderItem, ...], streams: list, expected: list) -> None:
    columns = cols(*kinds)
    assert run(streams, MergeSpec(visible_columns=len(columns), order_by=order), columns) == expected


def test_derived_order_column_dropped() -> None:
    # SELECT name FROM t ORDER BY id: the kernel appended id as a derived column 1.
    columns = cols("ci", "int")
    spec = MergeSpec(visible_columns=1, order_by=ob((1, A)))
    assert run([node(("x", 3)), node(("y", 1), ("z", 4))], spec, columns) == expect("y", "x", "z")


def test_no_order_concatenates_in_stream_order() -> None:
    columns = cols("int")
    assert run([node(3, 1), node(2)], MergeSpec(visible_columns=1), columns) == expect(3, 1, 2)
