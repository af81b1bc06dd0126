"""Building blocks: number formatting like MySQL's text protocol, collations, sort keys."""

from __future__ import annotations

from decimal import Decimal

import pytest

from merge.collations import collation, string_key
from merge.keys import Desc, order_key, time_key
from merge.numfmt import format_decimal, format_number, gcvt
from merge.spec import OrderItem
from tests.merge.support import col, cols

GCVT_CASES = [
    (1e15, "1e15"),
    (1e14, "100000000000000"),
    (123456789012345.6, "123456789012345.6"),
    (0.1 + 0.2, "0.30000000000000004"),
    (1.5e20, "1.5e20"),
    (1e-15, "0.000000000000001"),
    (1e-16, "1e-16"),
    (2.5e-5, "0.000025"),
    (-1.2345678901234568e-05, "-0.000012345678901234568"),
    (-1.2345678901234568e-15, "-0.0000000000000012345678901234568"),
    (-1.2345678901234568e-16, "-1.2345678901234568e-16"),
    (1.2345678901234567e-14, "0.000000000000012345678901234567"),
    (-0.5, "-0.5"),
    (100.0, "100"),
    (0.0, "0"),
    (1.7976931348623157e308, "1.7976931348623157e308"),
    (5e-324, "5e-324"),
]


@pytest.mark.parametrize(("value", "text"), GCVT_CASES, ids=[t for _, t in GCVT_CASES])
def test_gcvt_double(value: float, text: str) -> None:
    assert gcvt(value) == text.encode()


@pytest.mark.parametrize(("value", "text"), [(0.1, "0.1"), (3.4028234663852886e38, "3.40282e38"),
                                             (1234567.0, "1234570"), (0.000123456789, "0.000123457")])
def test_gcvt_float(value: float, text: str) -> None:
    assert gcvt(value, is_float=True) == text.encode()


@pytest.mark.parametrize(
    ("value", "scale", "text"),
    [(Decimal("2.5"), 0, "3"), (Decimal("-2.5"), 0, "-3"), (Decimal("0.125"), 2, "0.13"),
     (Decimal("-0.001"), 2, "0.00"), (10, 4, "10.0000"), (Decimal("1E+3"), 1, "1000.0")],
)
def test_format_decimal_half_up(value: Decimal | int, scale: int, text: str) -> None:
    assert format_decimal(value, scale) == text.encode()


@pytest.mark.parametrize(
    ("kind", "value", "text"),
    [("bigint", 42, "42"), ("dec", Decimal("1.5"), "1.50"), ("double", 2.0, "2"), ("double:x:2", 2.0, "2.00"),
     ("dec:x:0", 12345678901234567890123, "12345678901234567890123")],
)
def test_format_number_by_column(kind: str, value: int | Decimal | float, text: str) -> None:
    assert format_number(value, cols(kind)[0]) == text.encode()


COLLATION_CASES = [
    (45, "ci", True, True), (46, "bin", True, False), (224, "ci", True, True), (255, "ci", False, True),
    (33, "ci", True, True), (83, "bin", True, False), (8, "ci", True, True), (47, "bin", True, False),
    (63, "binary", False, False), (2304, "ci", True, True), (2308, "ci", False, True), (2307, "cs", True, False),
    (1069, "ci", False, True), (1070, "bin", False, False), (309, "bin", False, False), (278, "cs", False, False),
    (305, "ci", False, False), (49, "cs", True, False), (12345, "ci", True, True),
]


@pytest.mark.parametrize(("cid", "sensitivity", "pad", "ai"), COLLATION_CASES, ids=[str(c[0]) for c in COLLATION_CASES])
def test_collation_table(cid: int, sensitivity: str, pad: bool, ai: bool) -> None:
    c = collation(cid)
    assert (c.sensitivity, c.pad_space, c.accent_insensitive) == (sensitivity, pad, ai)


@pytest.mark.parametrize(
    ("cid", "a", "b", "equal"),
    [(45, b"Abc", b"aBC ", True), (45, "Café".encode(), b"cafe", True), (255, b"a", b"a ", False),
     (46, b"a", b"a ", True), (46, b"a", b"A", False), (63, b"a", b"a ", False), (309, b"a", b"a ", False),
     (8, b"\xc9T\xc9", b"ete", True), (2304, "ÉLAN".encode(), "élan".encode(), True),
     (54, "A".encode("utf-16-be"), "a ".encode("utf-16-be"), True)],
)
def test_string_keys_equality(cid: int, a: bytes, b: bytes, equal: bool) -> None:
    key = string_key(collation(cid))
    assert (key(a) == key(b)) is equal


@pytest.mark.parametrize(("text", "micros"), [("00:00:01", 1_000_000), ("-00:00:01.5", -1_500_000),
                                              ("838:59:59", 3_020_399_000_000), ("1 02:00:00", 93_600_000_000)])
def test_time_key(text: str, micros: int) -> None:
    assert time_key(text.encode()) == micros


def test_order_key_desc_and_nulls() -> None:
    key = order_key([OrderItem(0, True), OrderItem(1)], [col("ci"), col("int")])
    rows = [(b"b", b"2"), (None, b"1"), (b"B", b"1"), (b"a", None)]
    assert sorted(rows, key=key) == [(b"B", b"1"), (b"b", b"2"), (b"a", None), (None, b"1")]
    assert Desc(1) == Desc(1) and Desc(2) < Desc(1)
