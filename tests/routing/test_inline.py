"""Inline expressions: Groovy syntax, Java semantics. Golden hash values were produced with OpenJDK 17."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from routing.errors import ConfigError, RoutingError
from routing.inline import InlineExpression, JavaLong, compile_inline, java_hash_code, java_str, java_string_hash


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ds_${0..1}.t_order_${0..1}", ["ds_0.t_order_0", "ds_0.t_order_1", "ds_1.t_order_0", "ds_1.t_order_1"]),
        ("ds_$->{0..1}.t_$->{0..1}", ["ds_0.t_0", "ds_0.t_1", "ds_1.t_0", "ds_1.t_1"]),
        ("ds_${0..1}.t_order_${0..1}, ds_2.t_x", [*(f"ds_{d}.t_order_{t}" for d in "01" for t in "01"), "ds_2.t_x"]),
        ("t_${1..3}", ["t_1", "t_2", "t_3"]),
        ("t_${3..1}", ["t_3", "t_2", "t_1"]),
        ("t_${0..<2}", ["t_0", "t_1"]),
        ("${['a','b']}_${[0,1]}", ["a_0", "a_1", "b_0", "b_1"]),
        ('${["x", "y"]}', ["x", "y"]),
        ("ds_0.t_${[0, 0, 1]}", ["ds_0.t_0", "ds_0.t_1"]),
        ("t_${['a,b']}", ["t_a,b"]),
        ("  a , b  ,", ["a", "b"]),
        ("ds_0.t_order", ["ds_0.t_order"]),
        ("<LITERAL>ds_${0..1}.t_0, ds_1.t_1", ["ds_${0..1}.t_0", "ds_1.t_1"]),
        ("<GROOVY>t_${0..1}", ["t_0", "t_1"]),
        ("t_${0..1}_${'a'..'b'}", ["t_0_a", "t_0_b", "t_1_a", "t_1_b"]),
        ("t_${(0..1)}${2 * 3}", ["t_06", "t_16"]),
        ("ds_${[0..1, 5]}", ["ds_0", "ds_1", "ds_5"]),
    ],
)
def test_expand(text: str, expected: list[str]) -> None:
    assert InlineExpression.compile(text).expand() == expected


@pytest.mark.parametrize(
    ("text", "bindings", "expected"),
    [
        ("t_order_${order_id % 2}", {"order_id": 3}, "t_order_1"),
        ("t_order_${order_id % 2}", {"order_id": -3}, "t_order_-1"),  # Java %: sign of the dividend
        ("t_order_$->{order_id % 2}", {"order_id": 6}, "t_order_0"),
        ("${-3 % 2}", {}, "-1"),
        ("${7 % -3}", {}, "1"),
        ("${7/2}", {}, "3.5"),  # Groovy / gives a BigDecimal
        ("${4/2}", {}, "2"),
        ("${10/4}", {}, "2.5"),
        ("${1/3}", {}, "0.33333333333"),
        ("${2/3}", {}, "0.66666666667"),
        ("${x / 8}", {"x": 1}, "0.125"),
        ("${-7.intdiv(2)}", {}, "-3"),  # unary minus binds looser than the call
        ("${(-7).intdiv(2)}", {}, "-3"),  # truncation toward zero, like Java
        ("${x.intdiv(2)}", {"x": -7}, "-3"),
        ("${x.intdiv(-2)}", {"x": 7}, "-3"),
        ("${Math.floorMod(-7, 3)}", {}, "2"),
        ("${Math.floorMod(7, -3)}", {}, "-2"),
        ("${Math.floorMod(x, 4)}", {"x": -1}, "3"),
        ("${Math.floorDiv(-7, 2)}", {}, "-4"),
        ("${Math.abs(-5)}", {}, "5"),
        ("${Math.abs(x.hashCode())}", {"x": "polygenelubricants"}, "-2147483648"),  # abs(MIN_VALUE)
        ("${Math.abs(x.hashCode()) % 4}", {"x": "hello world"}, "0"),
        ("${'abc'.hashCode()}", {}, "96354"),
        ("${x.hashCode()}", {"x": -1}, "-1"),  # an int that fits is an Integer
        ("${x.longValue().hashCode()}", {"x": -1}, "0"),  # Long.hashCode(-1)
        ("${x.hashCode()}", {"x": JavaLong(-1)}, "0"),
        ("${x.hashCode()}", {"x": 5000000000}, "705032705"),
        ("${2147483647 + 1}", {}, "-2147483648"),  # Integer + Integer overflows in 32 bits
        ("${x + 1}", {"x": JavaLong(2147483647)}, "2147483648"),
        ("${2147483647L + 1}", {}, "2147483648"),
        ("${x * 2}", {"x": 9223372036854775807}, "-2"),  # Long overflow
        ("${-x}", {"x": -2147483648}, "-2147483648"),
        ("${x.intValue()}", {"x": 4294967297}, "1"),
        ("${x.longValue()}", {"x": Decimal("-7.9")}, "-7"),
        ("${'t_' + x}", {"x": 5}, "t_5"),
        ("${x + '_a'}", {"x": 5}, "5_a"),
        ("${1 + 2 + 'a'}", {}, "3a"),
        ("${'a' + 1 + 2}", {}, "a12"),
        ("${Integer.valueOf('12') + 1}", {}, "13"),
        ("${Long.valueOf(x).hashCode()}", {"x": "-1"}, "0"),
        ("${String.valueOf(5).padLeft(3, '0')}", {}, "005"),
        ("${x.toString().padLeft(2, '0')}", {"x": 7}, "07"),
        ("${x.substring(0, 3)}", {"x": "abcdef"}, "abc"),
        ("${x.substring(2)}", {"x": "abcdef"}, "cdef"),
        ("${x.toUpperCase()}_${x.toLowerCase()}", {"x": "aB"}, "AB_ab"),
        ("${x.length()}", {"x": "中文"}, "2"),
        ("${x > 5 ? 'big' : 'small'}", {"x": 7}, "big"),
        ("${x > 5 ? 'big' : 'small'}", {"x": 5}, "small"),
        ("${x >= 5 && x != 6 ? 1 : 0}", {"x": 6}, "0"),
        ("${x ?: 'none'}", {"x": ""}, "none"),
        ("${value}", {"value": Decimal("1.50")}, "1.50"),
        ("${value}", {"value": 1.5}, "1.5"),
        ("${value}", {"value": True}, "true"),
        ("${1.5 + 1}", {}, "2.5"),
        ("${x % 2}", {"x": Decimal("5.0")}, "1.0"),
        ('${"double"}', {}, "double"),
        ("${'it\\'s'}", {}, "it's"),
        ("ds_${user_id % 2}, t", {"user_id": 3}, "ds_1, t"),  # evaluate keeps commas as text
        ("<LITERAL>ds_${0..1}", {}, "ds_${0..1}"),
        ("${0x10 + 1}", {}, "17"),
        ("${(a + b) * 2 - c}", {"a": 1, "b": 2, "c": 3}, "3"),
        ("t_${[1, 2]}", {}, "t_[1, 2]"),  # Groovy prints a list inside a GString
        # a string parameter of the binary protocol (bytes): the String ShardingSphere decodes, in every binding
        ("${x.length()}", {"x": "中文".encode()}, "2"),
        ("t_${x.substring(0, 1)}", {"x": b"abc"}, "t_a"),
        ("ds_${Math.abs(a.hashCode()) % 3}_${b}", {"a": b"a\\_b", "b": b"z"},
         f"ds_{abs(java_string_hash('a' + chr(92) + '_b')) % 3}_z"),
    ],
)
def test_evaluate(text: str, bindings: dict[str, Any], expected: str) -> None:
    assert InlineExpression.compile(text).evaluate(bindings) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("t_${order_id %}", "unexpected end of expression at position 14"),
        ("t_${foo(1)}", "unexpected '(' at position 7"),
        ("t_${x.exec()}", "unsupported method exec() at position 6"),
        ("t_${System.exit(0)}", "unsupported method exit()"),
        ("t_${Math.pow(2, 3)}", "unsupported call Math.pow"),
        ("t_${x.hashCode}", "must be called with parentheses"),
        ("t_${x.substring()}", "takes 1..2 arguments, got 0"),
        ("t_${x @ 2}", "unexpected character '@' at position 6"),
        ("t_${0..1", "unterminated '${' at position 2"),
        ("t_${'abc}", "unterminated"),
        ("t_${}", "empty '${}' at position 2"),
        ("t_${ }", "empty '${}'"),
        ('t_${"a$b"}', "interpolation"),
        ("t_${(1 + 2}", "expected ')'"),
        ("t_${1 ? 2}", "expected ':'"),
        ("t_${12abc}", "malformed number"),
        ("<INTERVAL>t_${0..1}", "unsupported expression type <INTERVAL>"),
        ("t_${__import__('os')}", "unexpected '('"),
    ],
)
def test_compile_errors_name_expression_and_position(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        InlineExpression.compile(text)
    assert fragment in str(info.value)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("text", "bindings", "fragment"),
    [
        ("${x % 0}", {"x": 1}, "Division by zero"),
        ("${x / 0}", {"x": 1}, "Division by zero"),
        ("${x.intdiv(0)}", {"x": 1}, "Division by zero"),
        ("${y}", {"x": 1}, "no value bound to 'y'"),
        ("${x.substring(5)}", {"x": "ab"}, "out of range"),
        ("${x.intdiv(2)}", {"x": "ab"}, "needs an integer"),
        ("${x % 2}", {"x": "abc"}, "cannot apply '%' to str and int"),
        ("${Integer.valueOf(x)}", {"x": "12a"}, "For input string"),
        ("${Integer.valueOf(x)}", {"x": "3000000000"}, "For input string"),
        ("${x.hashCode()}", {"x": None}, "no Java hashCode()"),
        ("${x.toUpperCase()}", {"x": 5}, "is a String method"),
        ("${x > 1}", {"x": "a"}, "cannot compare"),
    ],
)
def test_evaluation_errors_are_routing_errors(text: str, bindings: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RoutingError) as info:
        InlineExpression.compile(text).evaluate(bindings)
    assert fragment in str(info.value)
    assert repr(text) in str(info.value)


def test_expand_with_unbound_variable_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no value bound to 'order_id'"):
        InlineExpression.compile("t_${order_id % 2}").expand()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello world", 1794106052),
        ("polygenelubricants", -2147483648),
        ("中文", 646394),
        ("😀", 1772899),  # UTF-16 surrogate pair
        ("U0000000001", -997165034),
        (b"U0000000001", -997165034),  # a string parameter of the binary protocol: its String's
        ("王五".encode(), java_string_hash("王五")),
        (-5, -5),  # Integer
        (-1, -1),
        (JavaLong(-1), 0),  # Long
        (JavaLong(5), 5),
        (5000000000, 705032705),
        (-5000000000, 705032702),
        (123456789012345678901234567890, 1915528825),  # BigInteger
        (-123456789012345678901234567890, -1915528825),
        (Decimal("1.50"), 4652),  # BigDecimal: 31 * unscaled.hashCode() + scale
        (Decimal("-7.5"), -2324),
        (Decimal("12345678901234567890.1"), 1337890791),
        (1.5, 1073217536),  # Double
        (-0.1, 639631363),
        (True, 1231),
        (False, 1237),
    ],
)
def test_java_hash_code(value: Any, expected: int) -> None:
    assert java_hash_code(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e7, "1.0E7"),
        (1e-4, "1.0E-4"),
        (123.456, "123.456"),
        (1e21, "1.0E21"),
        (1.0, "1.0"),
        (None, "null"),
        (Decimal("-0"), "0"),
        (JavaLong(3), "3"),
    ],
)
def test_java_str(value: Any, expected: str) -> None:
    assert java_str(value) == expected


def test_string_hash_non_ascii_path_is_the_java_polynomial() -> None:
    text = "aé中"
    expected = 0
    for ch in text:
        expected = (31 * expected + ord(ch)) & 0xFFFFFFFF
    assert java_string_hash(text) == expected


def test_compile_is_cached_and_reports_variables() -> None:
    expr = compile_inline("t_${order_id % 2}_${Math.floorMod(user_id, 2)}")
    assert InlineExpression.compile("t_${order_id % 2}_${Math.floorMod(user_id, 2)}") is expr
    assert expr.free_variables == {"order_id", "user_id"}
    assert expr.uses_modulo
    assert not compile_inline("t_${order_id.intdiv(2)}").uses_modulo
    assert compile_inline("ds_${0..1}").is_constant


def test_evaluate_is_fast_enough_for_per_row_use() -> None:
    import time

    expr = compile_inline("t_order_${order_id % 16}")
    start = time.perf_counter()
    for i in range(20000):
        expr.evaluate({"order_id": i})
    assert time.perf_counter() - start < 1.0
