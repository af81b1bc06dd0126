"""Format merged numbers exactly as MySQL prints them in the text protocol for the column's type.

Only values the merge computes (COUNT, SUM, AVG, BIT_*) are formatted; values taken from a node row
(group columns, MIN/MAX, first-row columns) pass through untouched.

* integer types: plain digits.
* DECIMAL: the column's scale, rounded half up (MySQL's decimal rounding).
* FLOAT/DOUBLE with a fixed scale (``decimals`` < 31): ``%.{scale}f``.
* FLOAT/DOUBLE without one: a port of ``my_gcvt`` (strings/dtoa.c) as ``String::set_real`` calls it
  for the text protocol: the shortest round-trip digits (FLOAT: at most FLT_DIG = 6 digits), 'f'
  notation while the decimal exponent stays within MAX_DECPT_FOR_F_FORMAT (15: ``1e14`` prints
  ``100000000000000``, ``1e15`` prints ``1e15``, ``1e-15`` prints ``0.000000000000001``), otherwise
  ``1.5e20`` / ``1e-16`` style (no '+', no zero padding). Checked against MariaDB 10.11; MySQL 8
  prints the same for the values tested.
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal

from merge import coltypes as t
from merge.spec import ColumnMeta
from protocol.constants import ColumnType

# Exact arithmetic for sums of DECIMAL(65, 30) values over many rows.
DEC_CTX = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP, Emax=999999, Emin=-999999)

# String::set_real() calls my_gcvt with its whole FLOATING_POINT_BUFFER (311 + 31) as the width, so for
# protocol output the width never truncates and only MAX_DECPT_FOR_F_FORMAT decides 'f' versus 'e'
# (checked against MariaDB 10.11: -1.2345678901234567e-5 prints as -0.000012345678901234568).
_DOUBLE_WIDTH = 311 + 31 - 1
_FLOAT_WIDTH = _DOUBLE_WIDTH
_FLT_DIG = 6
_MAX_DECPT_FOR_F_FORMAT = 15  # DBL_DIG


def format_int(value: int) -> bytes:
    return str(value).encode("ascii")


def format_decimal(value: Decimal | int, scale: int) -> bytes:
    """DECIMAL text with exactly `scale` fractional digits, rounded half up, never '-0'."""
    d = Decimal(value)
    q = d.quantize(Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP, context=DEC_CTX)
    if q.is_zero():
        q = abs(q)
    return format(q, "f").encode("ascii")


def _digits(x: float, max_digits: int) -> tuple[str, int]:
    """dtoa mode 4: shortest round-trip digits of abs(x) unless longer than `max_digits`, then rounded
    (half even on the exact binary value) to `max_digits`. Returns (digits, decpt): value =
    0.DIGITS * 10**decpt."""
    shortest = Decimal(repr(abs(x)))
    _, digit_tuple, exponent = shortest.as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    decpt = len(digit_tuple) + exponent
    if len(digits) > max_digits:
        exact = Decimal(abs(x))
        ctx = decimal.Context(prec=max_digits, rounding=decimal.ROUND_HALF_EVEN)
        rounded = ctx.plus(exact)
        _, digit_tuple, exponent = rounded.as_tuple()
        assert isinstance(exponent, int)
        digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
        decpt = len(digit_tuple) + exponent
    return digits, decpt


def _fixed_digits(x: float, frac_digits: int) -> tuple[str, int]:
    """dtoa mode 5: abs(x) rounded to `frac_digits` digits after the point, trailing zeros dropped."""
    q = Decimal(abs(x)).quantize(Decimal(1).scaleb(-frac_digits), rounding=decimal.ROUND_HALF_EVEN)
    _, digit_tuple, exponent = q.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    if not digits:
        return "", 0
    decpt = len(digit_tuple) + exponent - (len(digit_tuple) - len(digits))
    return digits.rstrip("0"), decpt


def gcvt(x: float, *, is_float: bool = False) -> bytes:
    """Port of MySQL's my_gcvt for the text protocol (see module docstring)."""
    if math.isnan(x) or math.isinf(x):
        return b"0"  # my_gcvt's overflow answer
    width = _FLOAT_WIDTH if is_float else _DOUBLE_WIDTH
    negative = math.copysign(1.0, x) < 0
    if negative:
        width -= 1
    if x == 0:
        return b"-0" if negative else b"0"
    digits, decpt = _digits(x, min(width, _FLT_DIG) if is_float else width)
    length = len(digits)
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    if decpt <= 0:
        f_len = length - decpt + 2
    elif decpt < length:
        f_len = length + 1
    else:
        f_len = decpt
    have_space = f_len <= width
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    use_f = (
        have_space
        or (decpt <= width and (decpt >= -1 or (decpt == -2 and (length > 1 or not force_e))) and not force_e)
    ) and (
        not have_space
        or (
            decpt >= -_MAX_DECPT_FOR_F_FORMAT + 1
            and (decpt <= _MAX_DECPT_FOR_F_FORMAT or length > decpt)
        )
    )
    out = "-" if negative else ""
    if use_f:
        width -= (decpt < length) + (1 - decpt if decpt <= 0 else 0)
        if width < length:
            width = max(width, decpt)
            digits, decpt = _fixed_digits(x, width - decpt)
            length = len(digits)
            if length == 0:
                return b"0"
        if decpt <= 0:
            out += "0." + "0" * (-decpt) + digits
        elif decpt < length:
            out += digits[:decpt] + "." + digits[decpt:]
        else:
            out += digits + "0" * (decpt - length)
        return out.encode("ascii")
    exp = decpt - 1
    width -= 1 if exp < 0 else 0
    width -= 1 + exp_len
    if length > 1:
        width -= 1
    width = max(width, 1)
    if width < length:
        digits, decpt = _digits(x, width)
        length = len(digits)
        exp = decpt - 1
    out += digits[0]
    if length > 1:
        out += "." + digits[1:]
    out += "e" + str(exp)
    return out.encode("ascii")


def format_double(x: float, decimals: int, *, is_float: bool = False) -> bytes:
    if decimals < t.NOT_FIXED_DEC:
        return f"{x:.{decimals}f}".encode("ascii")
    return gcvt(x, is_float=is_float)


def format_number(value: int | Decimal | float, col: ColumnMeta) -> bytes:
    """`value` as the text MySQL sends for a column described by `col`."""
    code = col.type_code
    if code in t.FLOAT_TYPES:
        return format_double(float(value), col.decimals, is_float=code == ColumnType.FLOAT)
    if code in t.DECIMAL_TYPES:
        return format_decimal(value if not isinstance(value, float) else Decimal(repr(value)), col.decimals)
    if isinstance(value, int):
        return format_int(value)
    if isinstance(value, float):
        return gcvt(value)
    if value == value.to_integral_value() and code in t.INTEGER_TYPES:
        return format_int(int(value))
    return format(value, "f").encode("ascii")
