"""A safe evaluator for ShardingSphere inline expressions (Groovy syntax, Java semantics).

ShardingSphere evaluates `actualDataNodes` and `algorithm-expression` as Groovy GStrings. Running Groovy
(or Python's `eval`) on configuration text is not an option, so this module implements the small subset
those configurations use: a tokenizer, a recursive-descent parser that compiles each `${...}` once into
Python closures, and runtime helpers that reproduce the Java/Groovy semantics users rely on when they
pick a shard (`%` keeps the dividend's sign, `/` gives a BigDecimal, `hashCode()` is Java's int32 hash).
A routed row then costs a few closure calls, never a re-parse.

Numbers follow ShardingSphere's SQL literal typing: a Python ``int`` is a Java ``Integer`` when it fits in
32 bits, a ``Long`` when it fits in 64 bits and a ``BigInteger`` otherwise. Arithmetic between two
``Integer`` values wraps at 32 bits like Groovy's does; wrap a value in :class:`JavaLong` when the caller
knows it is a Java ``long`` (a BIGINT binary-protocol parameter, ``.longValue()``, ``Long.valueOf``).

Grammar (Groovy precedence)::

    expr    := or ('?' expr ':' expr | '?:' expr)?
    or      := and ('||' and)*          and := eq ('&&' eq)*
    eq      := rel (('=='|'!=') rel)*   rel := range (('<'|'<='|'>'|'>=') range)*
    range   := add (('..'|'..<') add)?
    add     := mul (('+'|'-') mul)*     mul := unary (('*'|'/'|'%') unary)*
    unary   := ('-'|'+'|'!') unary | postfix
    postfix := primary ('.' NAME '(' args ')')*
    primary := NUMBER | STRING | true | false | null | NAME | CLASS '.' NAME '(' args ')'
             | '(' expr ')' | '[' (expr (',' expr)*)? ']'
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from datetime import time as dtime
from decimal import ROUND_HALF_UP, Context, Decimal, DivisionByZero, Inexact, InvalidOperation
from functools import lru_cache
from typing import Any

from routing.errors import ConfigError, RoutingError

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "InlineEvaluationError",
    "InlineExpression",
    "JavaLong",
    "compile_inline",
    "java_hash_code",
    "java_str",
    "java_string_hash",
    "to_int32",
    "to_int64",
]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_M32, _M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF


class JavaLong(int):
    """An int that Java holds as a ``Long``: it hashes and overflows as a 64-bit value even when small."""

    __slots__ = ()


class InlineEvaluationError(RoutingError):
    """An expression failed at run time (missing variable, wrong value type, division by zero...)."""


class _EvalError(Exception):
    """Internal: raised by runtime helpers, wrapped with the expression text by the public API."""


# --- Java value semantics ------------------------------------------------------------------------------


def to_int32(v: int) -> int:
    """Java ``(int)`` narrowing of an integer (two's complement wrap)."""
    v &= _M32
    return v - (1 << 32) if v & 0x80000000 else v


def to_int64(v: int) -> int:
    """Java ``(long)`` narrowing of an integer (two's complement wrap)."""
    v &= _M64
    return v - (1 << 64) if v & 0x8000000000000000 else v


def _int_width(v: int) -> int:
    """32 for a Java Integer, 64 for a Long, 0 for a BigInteger (no wrap)."""
    if type(v) is JavaLong:
        return 64
    if INT_MIN <= v <= INT_MAX:
        return 32
    if LONG_MIN <= v <= LONG_MAX:
        return 64
    return 0


def _wrap(v: int, width: int) -> int:
    if width == 32:
        return to_int32(v)
    if width == 64:
        return JavaLong(to_int64(v))
    return v


def _result_width(a: int, b: int) -> int:
    wa, wb = _int_width(a), _int_width(b)
    return 0 if wa == 0 or wb == 0 else max(wa, wb)


def java_string_hash(s: str) -> int:
    """``String.hashCode()``: s[0]*31^(n-1) + ... over UTF-16 code units, in int32."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & _M32
    else:
        data = s.encode("utf-16-le", "surrogatepass")
        for (unit,) in struct.iter_unpack("<H", data):
            h = (31 * h + unit) & _M32
    return to_int32(h)


def _big_integer_hash(v: int) -> int:
    """``BigInteger.hashCode()``: 31-polynomial over the big-endian 32-bit magnitude words, times signum."""
    mag = abs(v)
    words: list[int] = []
    while mag:
        words.append(mag & _M32)
        mag >>= 32
    h = 0
    for w in reversed(words):
        h = (31 * h + w) & _M32
    return to_int32(h * (1 if v > 0 else -1 if v < 0 else 0))


def _long_hash(v: int) -> int:
    u = v & _M64
    return to_int32(u ^ (u >> 32))


def java_hash_code(value: Any) -> int:
    """``value.hashCode()`` for the Java object ShardingSphere would hold for ``value``.

    str (and bytes, a string parameter of the binary protocol, read as UTF-8) → String, int →
    Integer/Long/BigInteger by magnitude (JavaLong → Long), Decimal → BigDecimal, float → Double, bool → Boolean.
    Other types (and None) raise ``TypeError``.
    """
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, bytes):  # a string parameter of the binary protocol: the String ShardingSphere decodes
        return java_string_hash(value.decode("utf-8", "surrogateescape"))
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        width = _int_width(value)
        if width == 32:
            return int(value)
        if width == 64:
            return _long_hash(value)
        return _big_integer_hash(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise TypeError(f"cannot hash {value}")
        sign, digits, exponent = value.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        return to_int32(31 * _big_integer_hash(unscaled) + (-int(exponent)))
    if isinstance(value, float):
        bits = 0x7FF8000000000000 if math.isnan(value) else struct.unpack("<q", struct.pack("<d", value))[0]
        return _long_hash(bits)
    raise TypeError(f"no Java hashCode() for a value of type {type(value).__name__}")


def _java_double_str(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        r = repr(x)
        return r if "e" not in r else format(Decimal(r), "f")
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    exp10 = len(ds) - 1 + int(exponent)
    mant = ds[0] + "." + (ds[1:] or "0")
    return ("-" if sign else "") + f"{mant}E{exp10}"


def java_str(value: Any) -> str:
    """``String.valueOf(value)`` / GString interpolation of a value, as Groovy prints it."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, Decimal):
        return str(value.copy_abs() if value.is_zero() else value)
    if isinstance(value, float):
        return _java_double_str(value)
    if isinstance(value, list):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    if isinstance(value, datetime):
        s = value.strftime("%Y-%m-%dT%H:%M")
        if value.second or value.microsecond:
            s += f":{value.second:02d}"
            if value.microsecond:
                s += f".{value.microsecond:06d}".rstrip("0")
        return s
    if isinstance(value, date | dtime):
        return value.isoformat()
    return str(value)


# --- runtime operators ------------------------------------------------------------------------------------

_DEC = Context(prec=1000, rounding=ROUND_HALF_UP, traps=[InvalidOperation, DivisionByZero])
_DEC_EXACT = Context(prec=1000, rounding=ROUND_HALF_UP, traps=[InvalidOperation, DivisionByZero, Inexact])


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | Decimal | float) and not isinstance(v, bool)


def _to_decimal(v: Any) -> Decimal:
    if isinstance(v, Decimal):
        return v
    if isinstance(v, float):
        return Decimal(repr(v))
    return Decimal(int(v))


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _numeric(op: str, a: Any, b: Any) -> Any:
    if not (_is_num(a) and _is_num(b)):
        raise _EvalError(f"cannot apply {op!r} to {_type_name(a)} and {_type_name(b)}")
    if isinstance(a, float) or isinstance(b, float):
        fa, fb = float(a), float(b)
        if op == "+":
            return fa + fb
        if op == "-":
            return fa - fb
        if op == "*":
            return fa * fb
        if op == "%":
            return math.fmod(fa, fb) if fb else math.nan
        return fa / fb if fb else (math.nan if fa == 0 else math.copysign(math.inf, fa) * math.copysign(1, fb))
    if op == "/":
        return _groovy_divide(_to_decimal(a), _to_decimal(b))
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        da, db = _to_decimal(a), _to_decimal(b)
        if op == "+":
            return _DEC.add(da, db)
        if op == "-":
            return _DEC.subtract(da, db)
        if op == "*":
            return _DEC.multiply(da, db)
        if db == 0:
            raise _EvalError("Division by zero")
        return _DEC.remainder(da, db)  # sign of the dividend, like BigDecimal.remainder
    width = _result_width(a, b)
    ia, ib = int(a), int(b)
    if op == "+":
        return _wrap(ia + ib, width)
    if op == "-":
        return _wrap(ia - ib, width)
    if op == "*":
        return _wrap(ia * ib, width)
    return _wrap(_java_rem(ia, ib), width)


def _java_rem(a: int, b: int) -> int:
    if b == 0:
        raise _EvalError("Division by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _groovy_divide(a: Decimal, b: Decimal) -> Decimal:
    """Groovy's ``/`` on non-floating numbers (BigDecimalMath.divideImpl)."""
    if b == 0:
        raise _EvalError("Division by zero")
    try:
        return _DEC_EXACT.divide(a, b)
    except Inexact:
        pass
    precision = max(len(a.as_tuple().digits), len(b.as_tuple().digits)) + 10
    result = Context(prec=precision, rounding=ROUND_HALF_UP).divide(a, b)
    scale = max(-int(result.as_tuple().exponent), -int(a.as_tuple().exponent), -int(b.as_tuple().exponent))
    return result.quantize(Decimal(1).scaleb(-max(scale, 10)), rounding=ROUND_HALF_UP)


def _plus(a: Any, b: Any) -> Any:
    if isinstance(a, str) or isinstance(b, str):
        return java_str(a) + java_str(b)
    if isinstance(a, list):
        return [*a, *(b if isinstance(b, list) else [b])]
    return _numeric("+", a, b)


def _negate(v: Any) -> Any:
    if _is_int(v):
        return _wrap(-int(v), _int_width(v))
    if isinstance(v, Decimal | float):
        return -v
    raise _EvalError(f"cannot negate {_type_name(v)}")


def _truth(v: Any) -> bool:
    """Groovy truth: null, false, 0, empty strings and empty lists are false."""
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float | Decimal | str | list):
        return bool(v)
    return True


def _compare(a: Any, b: Any) -> int:
    if _is_num(a) and _is_num(b):
        if isinstance(a, float) or isinstance(b, float):
            fa, fb = float(a), float(b)
        else:
            fa, fb = _to_decimal(a), _to_decimal(b)  # type: ignore[assignment]
        return (fa > fb) - (fa < fb)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    if isinstance(a, datetime | date) and type(a) is type(b):
        return (a > b) - (a < b)
    raise _EvalError(f"cannot compare {_type_name(a)} with {_type_name(b)}")


def _equals(a: Any, b: Any) -> bool:
    if _is_num(a) and _is_num(b):
        return _compare(a, b) == 0
    return (type(a) is type(b) and a == b) or (a is None and b is None)


def _require_int(v: Any, what: str) -> int:
    if _is_int(v):
        return v
    if isinstance(v, Decimal) and v == v.to_integral_value():
        return int(v)
    raise _EvalError(f"{what} needs an integer, got {_type_name(v)} {java_str(v)!r}")


def _make_range(lo: Any, hi: Any, exclusive: bool) -> list[Any]:
    if isinstance(lo, str) and isinstance(hi, str) and len(lo) == 1 and len(hi) == 1:
        a, b = ord(lo), ord(hi)
        step = 1 if b >= a else -1
        end = b if not exclusive else b - step
        return [chr(c) for c in range(a, end + step, step)] if not (exclusive and a == b) else []
    a, b = _require_int(lo, "a range"), _require_int(hi, "a range")
    if exclusive:
        if a == b:
            return []
        b = b - 1 if b > a else b + 1
    if abs(b - a) > 1_000_000:
        raise _EvalError(f"range {a}..{b} is too large")
    return list(range(a, b + 1)) if b >= a else list(range(a, b - 1, -1))


def _long_value(v: Any) -> JavaLong:
    if _is_int(v):
        return JavaLong(to_int64(int(v)))
    if isinstance(v, Decimal):
        return JavaLong(to_int64(int(v)))  # BigDecimal.longValue truncates toward zero, then narrows
    if isinstance(v, float):
        if math.isnan(v):
            return JavaLong(0)
        return JavaLong(max(LONG_MIN, min(LONG_MAX, int(v))))
    raise _EvalError(f"{_type_name(v)} has no longValue()")


def _int_value(v: Any) -> int:
    if isinstance(v, float):
        if math.isnan(v):
            return 0
        return max(INT_MIN, min(INT_MAX, int(v)))
    return to_int32(int(_long_value(v)) if not _is_int(v) else int(v))


def _parse_java_int(v: Any, lo: int, hi: int, what: str) -> int:
    if _is_int(v):
        if not lo <= v <= hi:
            raise _EvalError(f"{what}: {v} is out of range")
        return int(v)
    if isinstance(v, str):
        s = v[1:] if v[:1] in "+-" else v
        if not s or not s.isascii() or not s.isdigit():
            raise _EvalError(f"{what}: For input string: {v!r}")
        n = int(v)
        if not lo <= n <= hi:
            raise _EvalError(f"{what}: For input string: {v!r}")
        return n
    raise _EvalError(f"{what} cannot take {_type_name(v)}")


def _abs(v: Any) -> Any:
    if _is_int(v):
        width = _int_width(v)
        return _wrap(abs(int(v)), width)  # abs(Integer.MIN_VALUE) stays negative, as in Java
    if isinstance(v, Decimal | float):
        return abs(v)
    raise _EvalError(f"Math.abs cannot take {_type_name(v)}")


def _floor_mod(a: Any, b: Any) -> int:
    ia, ib = _require_int(a, "Math.floorMod"), _require_int(b, "Math.floorMod")
    if ib == 0:
        raise _EvalError("Division by zero")
    width = _result_width(ia, ib)
    return _wrap(ia % ib, width)  # Python's % already floors toward the divisor's sign


def _floor_div(a: Any, b: Any) -> int:
    ia, ib = _require_int(a, "Math.floorDiv"), _require_int(b, "Math.floorDiv")
    if ib == 0:
        raise _EvalError("Division by zero")
    return _wrap(ia // ib, _result_width(ia, ib))


def _intdiv(a: Any, b: Any) -> int:
    ia, ib = _require_int(a, "intdiv"), _require_int(b, "intdiv")
    if ib == 0:
        raise _EvalError("Division by zero")
    q = abs(ia) // abs(ib)
    return _wrap(q if (ia < 0) == (ib < 0) else -q, _result_width(ia, ib))


def _str_arg(v: Any, method: str) -> str:
    if not isinstance(v, str):
        raise _EvalError(f"{method}() is a String method; the value is {_type_name(v)} {java_str(v)!r}")
    return v


def _substring(s: Any, args: list[Any]) -> str:
    text = _str_arg(s, "substring")
    begin = _require_int(args[0], "substring")
    end = _require_int(args[1], "substring") if len(args) > 1 else len(text)
    if begin < 0 or end > len(text) or begin > end:
        raise _EvalError(f"substring({begin}, {end}) out of range for length {len(text)}")
    return text[begin:end]


def _pad(s: Any, args: list[Any], left: bool) -> str:
    text = java_str(s)
    width = _require_int(args[0], "pad")
    fill = java_str(args[1]) if len(args) > 1 else " "
    missing = width - len(text)
    if missing <= 0 or not fill:
        return text
    padding = (fill * (missing // len(fill) + 1))[:missing]
    return padding + text if left else text + padding


def _to_integer(v: Any, lo: int, hi: int, long: bool) -> int:
    if isinstance(v, str):
        n = _parse_java_int(v.strip(), lo, hi, "toInteger" if not long else "toLong")
        return JavaLong(n) if long else n
    return _long_value(v) if long else _int_value(v)


def _length(v: Any) -> int:
    if isinstance(v, str):
        return len(v.encode("utf-16-le", "surrogatepass")) // 2
    if isinstance(v, list):
        return len(v)
    raise _EvalError(f"{_type_name(v)} has no length()")


# method name -> (min args, max args, implementation(receiver, args))
_Method = tuple[int, int, Callable[[Any, list[Any]], Any]]
_METHODS: dict[str, _Method] = {
    "hashCode": (0, 0, lambda r, a: java_hash_code(r)),
    "toString": (0, 0, lambda r, a: java_str(r)),
    "longValue": (0, 0, lambda r, a: _long_value(r)),
    "intValue": (0, 0, lambda r, a: _int_value(r)),
    "toLong": (0, 0, lambda r, a: _to_integer(r, LONG_MIN, LONG_MAX, True)),
    "toInteger": (0, 0, lambda r, a: _to_integer(r, INT_MIN, INT_MAX, False)),
    "intdiv": (1, 1, lambda r, a: _intdiv(r, a[0])),
    "abs": (0, 0, lambda r, a: _abs(r)),
    "substring": (1, 2, _substring),
    "toUpperCase": (0, 0, lambda r, a: _str_arg(r, "toUpperCase").upper()),
    "toLowerCase": (0, 0, lambda r, a: _str_arg(r, "toLowerCase").lower()),
    "trim": (0, 0, lambda r, a: _str_arg(r, "trim").strip(" \t\n\r\x0b\x0c\x00")),
    "length": (0, 0, lambda r, a: _length(r)),
    "size": (0, 0, lambda r, a: _length(r)),
    "padLeft": (1, 2, lambda r, a: _pad(r, a, True)),
    "padRight": (1, 2, lambda r, a: _pad(r, a, False)),
    "startsWith": (1, 1, lambda r, a: _str_arg(r, "startsWith").startswith(java_str(a[0]))),
    "endsWith": (1, 1, lambda r, a: _str_arg(r, "endsWith").endswith(java_str(a[0]))),
}

_STATICS: dict[tuple[str, str], _Method] = {
    ("Math", "abs"): (1, 1, lambda r, a: _abs(a[0])),
    ("Math", "floorMod"): (2, 2, lambda r, a: _floor_mod(a[0], a[1])),
    ("Math", "floorDiv"): (2, 2, lambda r, a: _floor_div(a[0], a[1])),
    ("Math", "max"): (2, 2, lambda r, a: a[0] if _compare(a[0], a[1]) >= 0 else a[1]),
    ("Math", "min"): (2, 2, lambda r, a: a[0] if _compare(a[0], a[1]) <= 0 else a[1]),
    ("Integer", "valueOf"): (1, 1, lambda r, a: _parse_java_int(a[0], INT_MIN, INT_MAX, "Integer.valueOf")),
    ("Integer", "parseInt"): (1, 1, lambda r, a: _parse_java_int(a[0], INT_MIN, INT_MAX, "Integer.parseInt")),
    ("Long", "valueOf"): (
        1,
        1,
        lambda r, a: JavaLong(_parse_java_int(a[0], LONG_MIN, LONG_MAX, "Long.valueOf")),
    ),
    ("Long", "parseLong"): (
        1,
        1,
        lambda r, a: JavaLong(_parse_java_int(a[0], LONG_MIN, LONG_MAX, "Long.parseLong")),
    ),
    ("String", "valueOf"): (1, 1, lambda r, a: java_str(a[0])),
}


# --- tokenizer and parser ------------------------------------------------------------------------------

Env = Mapping[str, Any]
Fn = Callable[[Env], Any]

_OPERATORS = ("..<", "..", "?:", "==", "!=", "<=", ">=", "&&", "||", "+", "-", "*", "/", "%", "(", ")",
              "[", "]", ",", ".", "?", ":", "<", ">", "!")  # fmt: skip
_KEYWORDS = {"true": True, "false": False, "null": None}


class _Tok:
    __slots__ = ("kind", "pos", "value")

    def __init__(self, kind: str, value: Any, pos: int) -> None:
        self.kind = kind  # "num", "str", "name", "op", "end"
        self.value = value
        self.pos = pos


class _Parser:
    def __init__(self, source: str, expr: str, offset: int) -> None:
        self.source = source
        self.offset = offset
        self.uses_modulo = False
        self.variables: set[str] = set()
        self.toks = self._tokenize(expr)
        self.i = 0

    def error(self, message: str, pos: int) -> ConfigError:
        return ConfigError(f"inline expression {self.source!r}: {message} at position {pos}")

    def _tokenize(self, s: str) -> list[_Tok]:
        toks: list[_Tok] = []
        i, n = 0, len(s)
        while i < n:
            c = s[i]
            pos = self.offset + i
            if c.isspace():
                i += 1
            elif c.isdigit():
                i = self._number(s, i, toks)
            elif c.isalpha() or c == "_":
                j = i
                while j < n and (s[j].isalnum() or s[j] == "_"):
                    j += 1
                toks.append(_Tok("name", s[i:j], pos))
                i = j
            elif c in "'\"":
                i = self._string(s, i, toks)
            else:
                for op in _OPERATORS:
                    if s.startswith(op, i):
                        toks.append(_Tok("op", op, pos))
                        i += len(op)
                        break
                else:
                    raise self.error(f"unexpected character {c!r}", pos)
        toks.append(_Tok("end", None, self.offset + n))
        return toks

    def _number(self, s: str, i: int, toks: list[_Tok]) -> int:
        pos, n, j = self.offset + i, len(s), i
        if s.startswith(("0x", "0X"), i):
            j = i + 2
            while j < n and s[j] in "0123456789abcdefABCDEF_":
                j += 1
            digits = s[i + 2 : j].replace("_", "")
            if not digits:
                raise self.error("malformed number", pos)
            value: Any = int(digits, 16)
        else:
            while j < n and (s[j].isdigit() or s[j] == "_"):
                j += 1
            is_decimal = False
            if j + 1 < n and s[j] == "." and s[j + 1].isdigit():
                is_decimal = True
                j += 1
                while j < n and s[j].isdigit():
                    j += 1
            if j < n and s[j] in "eE" and (s[j + 1 : j + 2].isdigit() or s[j + 1 : j + 3][:1] in ("+", "-")):
                is_decimal = True
                j += 2
                while j < n and s[j].isdigit():
                    j += 1
            text = s[i:j].replace("_", "")
            value = Decimal(text) if is_decimal else int(text)
        if j < n and s[j] in "lLgGiIdDfF":
            suffix = s[j].lower()
            j += 1
            if suffix == "l":
                value = JavaLong(to_int64(int(value)))
            elif suffix in "df":
                value = float(value)
            elif suffix == "g":
                value = Decimal(value) if isinstance(value, Decimal) else int(value)
        elif isinstance(value, int) and not INT_MIN <= value <= INT_MAX and value <= LONG_MAX:
            value = JavaLong(value)
        if j < n and (s[j].isalnum() or s[j] == "_"):
            raise self.error("malformed number", pos)
        toks.append(_Tok("num", value, pos))
        return j

    def _string(self, s: str, i: int, toks: list[_Tok]) -> int:
        quote, j, out = s[i], i + 1, []
        escapes = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0", "\\": "\\", "'": "'",
                   '"': '"', "$": "$"}  # fmt: skip
        while j < len(s):
            c = s[j]
            if c == "\\":
                nxt = s[j + 1 : j + 2]
                if nxt not in escapes:
                    raise self.error(f"unsupported escape \\{nxt}", self.offset + j)
                out.append(escapes[nxt])
                j += 2
                continue
            if c == quote:
                text = "".join(out)
                if quote == '"' and "$" in text and "\\$" not in s[i:j]:
                    raise self.error("string interpolation inside double quotes is not supported", self.offset + i)
                toks.append(_Tok("str", text, self.offset + i))
                return j + 1
            out.append(c)
            j += 1
        raise self.error("unterminated string", self.offset + i)

    # -- recursive descent --

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def accept(self, op: str) -> bool:
        t = self.toks[self.i]
        if t.kind == "op" and t.value == op:
            self.i += 1
            return True
        return False

    def expect(self, op: str) -> None:
        if not self.accept(op):
            t = self.tok
            found = "end of expression" if t.kind == "end" else repr(str(t.value))
            raise self.error(f"expected {op!r}, found {found}", t.pos)

    def parse(self) -> Fn:
        fn = self.expr()
        if self.tok.kind != "end":
            raise self.error(f"unexpected {str(self.tok.value)!r}", self.tok.pos)
        return fn

    def expr(self) -> Fn:
        cond = self.or_()
        if self.accept("?"):
            then = self.expr()
            self.expect(":")
            other = self.expr()
            return lambda env: then(env) if _truth(cond(env)) else other(env)
        if self.accept("?:"):
            other = self.expr()

            def elvis(env: Env) -> Any:
                v = cond(env)
                return v if _truth(v) else other(env)

            return elvis
        return cond

    def or_(self) -> Fn:
        left = self.and_()
        while self.accept("||"):
            a, b = left, self.and_()
            left = lambda env, a=a, b=b: _truth(a(env)) or _truth(b(env))  # noqa: E731
        return left

    def and_(self) -> Fn:
        left = self.eq()
        while self.accept("&&"):
            a, b = left, self.eq()
            left = lambda env, a=a, b=b: _truth(a(env)) and _truth(b(env))  # noqa: E731
        return left

    def eq(self) -> Fn:
        left = self.rel()
        while True:
            if self.accept("=="):
                a, b = left, self.rel()
                left = lambda env, a=a, b=b: _equals(a(env), b(env))  # noqa: E731
            elif self.accept("!="):
                a, b = left, self.rel()
                left = lambda env, a=a, b=b: not _equals(a(env), b(env))  # noqa: E731
            else:
                return left

    def rel(self) -> Fn:
        left = self.range_()
        tests: dict[str, Callable[[int], bool]] = {
            "<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0,
        }  # fmt: skip
        while self.tok.kind == "op" and self.tok.value in tests:
            test = tests[self.tok.value]
            self.i += 1
            a, b = left, self.range_()
            left = lambda env, a=a, b=b, t=test: t(_compare(a(env), b(env)))  # noqa: E731
        return left

    def range_(self) -> Fn:
        left = self.add()
        for op, exclusive in (("..<", True), ("..", False)):
            if self.accept(op):
                a, b = left, self.add()
                return lambda env: _make_range(a(env), b(env), exclusive)
        return left

    def add(self) -> Fn:
        left = self.mul()
        while True:
            if self.accept("+"):
                a, b = left, self.mul()
                left = lambda env, a=a, b=b: _plus(a(env), b(env))  # noqa: E731
            elif self.accept("-"):
                a, b = left, self.mul()
                left = lambda env, a=a, b=b: _numeric("-", a(env), b(env))  # noqa: E731
            else:
                return left

    def mul(self) -> Fn:
        left = self.unary()
        while self.tok.kind == "op" and self.tok.value in ("*", "/", "%"):
            op = self.tok.value
            self.i += 1
            if op == "%":
                self.uses_modulo = True
            a, b = left, self.unary()
            left = lambda env, a=a, b=b, op=op: _numeric(op, a(env), b(env))  # noqa: E731
        return left

    def unary(self) -> Fn:
        if self.accept("-"):
            t = self.tok
            operand = self.unary()
            if t.kind == "num" and self.toks[self.i - 1] is t:
                value = _negate(t.value)
                return lambda env: value
            return lambda env: _negate(operand(env))
        if self.accept("+"):
            return self.unary()
        if self.accept("!"):
            operand = self.unary()
            return lambda env: not _truth(operand(env))
        return self.postfix(self.primary())

    def postfix(self, fn: Fn) -> Fn:
        while self.accept("."):
            name_tok = self.tok
            if name_tok.kind != "name":
                raise self.error("expected a method name after '.'", name_tok.pos)
            self.i += 1
            spec = _METHODS.get(name_tok.value)
            if spec is None:
                raise self.error(f"unsupported method {name_tok.value}()", name_tok.pos)
            args = self.call_args(name_tok, spec)
            fn = self._method_call(fn, spec[2], args)
        return fn

    @staticmethod
    def _method_call(recv: Fn, impl: Callable[[Any, list[Any]], Any], args: list[Fn]) -> Fn:
        if not args:
            return lambda env: impl(recv(env), [])
        return lambda env: impl(recv(env), [a(env) for a in args])

    def call_args(self, name_tok: _Tok, spec: _Method) -> list[Fn]:
        if self.tok.kind != "op" or self.tok.value != "(":
            raise self.error(f"{name_tok.value} must be called with parentheses", self.tok.pos)
        self.i += 1
        args: list[Fn] = []
        if not self.accept(")"):
            args.append(self.expr())
            while self.accept(","):
                args.append(self.expr())
            self.expect(")")
        if not spec[0] <= len(args) <= spec[1]:
            raise self.error(f"{name_tok.value}() takes {spec[0]}..{spec[1]} arguments, got {len(args)}",
                             name_tok.pos)  # fmt: skip
        return args

    def primary(self) -> Fn:
        t = self.tok
        self.i += 1
        if t.kind in ("num", "str"):
            value = t.value
            return lambda env: value
        if t.kind == "name":
            if t.value in _KEYWORDS:
                kw = _KEYWORDS[t.value]
                return lambda env: kw
            if t.value in ("Math", "Integer", "Long", "String") and self.tok.kind == "op" and self.tok.value == ".":
                self.i += 1
                name_tok = self.tok
                spec = _STATICS.get((t.value, str(name_tok.value))) if name_tok.kind == "name" else None
                if spec is None:
                    raise self.error(f"unsupported call {t.value}.{name_tok.value}", name_tok.pos)
                self.i += 1
                if name_tok.value == "floorMod":
                    self.uses_modulo = True
                args = self.call_args(name_tok, spec)
                return self._method_call(lambda env: None, spec[2], args)
            name = t.value
            self.variables.add(name)

            def variable(env: Env) -> Any:
                try:
                    return env[name]
                except KeyError:
                    raise _EvalError(f"no value bound to {name!r}") from None

            return variable
        if t.kind == "op" and t.value == "(":
            fn = self.expr()
            self.expect(")")
            return fn
        if t.kind == "op" and t.value == "[":
            items: list[Fn] = []
            if not self.accept("]"):
                items.append(self.expr())
                while self.accept(","):
                    items.append(self.expr())
                self.expect("]")
            return lambda env: [f(env) for f in items]
        found = "end of expression" if t.kind == "end" else repr(str(t.value))
        raise self.error(f"unexpected {found}", t.pos)


# --- the public expression object ----------------------------------------------------------------------

Segment = str | Fn


def _scan_expression_end(text: str, start: int) -> int:
    """Index of the '}' closing the expression whose body starts at ``start``; -1 when unterminated."""
    depth, quote, i, n = 1, "", start, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


class InlineExpression:
    """A compiled inline expression. Build with :meth:`compile` (cached), then call :meth:`evaluate`
    (one string, for algorithm expressions) or :meth:`expand` (every item, for actualDataNodes)."""

    __slots__ = ("_items", "_segments", "free_variables", "literal", "text", "uses_modulo")

    def __init__(self, text: str) -> None:
        self.text = text
        body, offset = text, 0
        self.literal = False
        stripped = text.lstrip()
        if stripped.startswith("<") and ">" in stripped:
            head = stripped.split(">", 1)[0] + ">"
            if head in ("<LITERAL>", "<GROOVY>"):
                offset = text.index(head) + len(head)
                body = text[offset:]
                self.literal = head == "<LITERAL>"
            elif head[1:-1].isalpha() and head[1:-1].isupper():
                raise ConfigError(f"inline expression {text!r}: unsupported expression type {head} at position 0")
        self.uses_modulo = False
        variables: set[str] = set()
        self._segments: list[Segment] = []
        if self.literal:
            self._segments = [body]
        else:
            self._segments = self._parse_segments(body, offset, variables)
        self.free_variables = frozenset(variables)
        self._items = self._split_items(self._segments)

    @classmethod
    def compile(cls, text: str) -> InlineExpression:
        """Compile ``text`` (cached: the same text always yields the same immutable object)."""
        return compile_inline(text)

    def _parse_segments(self, body: str, offset: int, variables: set[str]) -> list[Segment]:
        segments: list[Segment] = []
        i, n, plain = 0, len(body), []
        while i < n:
            if body.startswith("${", i):
                open_len = 2
            elif body.startswith("$->{", i):
                open_len = 4
            else:
                plain.append(body[i])
                i += 1
                continue
            start = i + open_len
            end = _scan_expression_end(body, start)
            if end < 0:
                raise ConfigError(f"inline expression {self.text!r}: unterminated '${{' at position {offset + i}")
            inner = body[start:end]
            if not inner.strip():
                raise ConfigError(f"inline expression {self.text!r}: empty '${{}}' at position {offset + i}")
            parser = _Parser(self.text, inner, offset + start)
            fn = parser.parse()
            self.uses_modulo = self.uses_modulo or parser.uses_modulo
            variables.update(parser.variables)
            if plain:
                segments.append("".join(plain))
                plain = []
            segments.append(fn)
            i = end + 1
        if plain:
            segments.append("".join(plain))
        return segments

    @staticmethod
    def _split_items(segments: list[Segment]) -> list[list[Segment]]:
        """Split at commas in the plain text between expressions (commas inside `${}` are not text)."""
        items: list[list[Segment]] = [[]]
        for seg in segments:
            if isinstance(seg, str):
                parts = seg.split(",")
                for k, part in enumerate(parts):
                    if k:
                        items.append([])
                    if part:
                        items[-1].append(part)
            else:
                items[-1].append(seg)
        cleaned: list[list[Segment]] = []
        for item in items:
            if item and isinstance(item[0], str):
                item[0] = item[0].lstrip()
            if item and isinstance(item[-1], str):
                item[-1] = item[-1].rstrip()
            item = [s for s in item if not (isinstance(s, str) and s == "")]
            if item:
                cleaned.append(item)
        return cleaned

    def __repr__(self) -> str:
        return f"InlineExpression({self.text!r})"

    @property
    def is_constant(self) -> bool:
        """True when the expression has no variables (it can be expanded at configuration time)."""
        return not self.free_variables

    def evaluate(self, bindings: Mapping[str, Any] | None = None) -> str:
        """The whole text as one Groovy GString (commas are plain text here, as in ShardingSphere).

        Raises :class:`InlineEvaluationError` (a ``RoutingError``) when evaluation fails.
        """
        env = bindings if bindings is not None else {}
        if any(type(v) is bytes for v in env.values()):  # a string parameter of the binary protocol: the String
            env = {k: v.decode("utf-8", "surrogateescape") if type(v) is bytes else v for k, v in env.items()}
        try:
            out = []
            for seg in self._segments:
                out.append(seg if isinstance(seg, str) else java_str(seg(env)))
            return "".join(out)
        except (_EvalError, ArithmeticError, ValueError, TypeError, OverflowError) as exc:
            raise InlineEvaluationError(f"cannot evaluate inline expression {self.text!r}: {exc}") from None

    def expand(self, bindings: Mapping[str, Any] | None = None) -> list[str]:
        """Every item, with ranges and lists expanded as a cartesian product (leftmost slowest).

        Raises :class:`ConfigError` when evaluation fails (this is used on configuration text).
        """
        env = bindings if bindings is not None else {}
        result: list[str] = []
        try:
            for item in self._items:
                choices: list[list[str]] = []
                for seg in item:
                    if isinstance(seg, str):
                        choices.append([seg])
                        continue
                    value = seg(env)
                    if isinstance(value, list):
                        choices.append(list(dict.fromkeys(java_str(v) for v in _flatten(value))))
                    else:
                        choices.append([java_str(value)])
                result.extend("".join(combo) for combo in itertools.product(*choices))
        except (_EvalError, ArithmeticError, ValueError, TypeError, OverflowError) as exc:
            raise ConfigError(f"cannot expand inline expression {self.text!r}: {exc}") from None
        return result


def _flatten(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, list):
            out.extend(_flatten(v))
        else:
            out.append(v)
    return out


@lru_cache(maxsize=4096)
def compile_inline(text: str) -> InlineExpression:
    """Compile an inline expression once; raises ``ConfigError`` naming the expression and position."""
    return InlineExpression(text)
