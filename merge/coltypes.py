"""MySQL column type codes and flags, grouped the way the merge engine compares values.

Kept here (not imported from the protocol package) because `merge` has no dependencies on the rest of
the proxy: callers build `ColumnMeta` from their column definitions using these numbers.
"""

from __future__ import annotations

DECIMAL = 0
TINY = 1
SHORT = 2
LONG = 3
FLOAT = 4
DOUBLE = 5
NULL = 6
TIMESTAMP = 7
LONGLONG = 8
INT24 = 9
DATE = 10
TIME = 11
DATETIME = 12
YEAR = 13
NEWDATE = 14
VARCHAR = 15
BIT = 16
TIMESTAMP2 = 17
DATETIME2 = 18
TIME2 = 19
JSON = 245
NEWDECIMAL = 246
ENUM = 247
SET = 248
TINY_BLOB = 249
MEDIUM_BLOB = 250
LONG_BLOB = 251
BLOB = 252
VAR_STRING = 253
STRING = 254
GEOMETRY = 255

NOT_NULL_FLAG = 1
UNSIGNED_FLAG = 32
BINARY_FLAG = 128
ENUM_FLAG = 256
SET_FLAG = 2048

BINARY_COLLATION = 63
NOT_FIXED_DEC = 31  # `decimals` of a FLOAT/DOUBLE without a declared scale

INTEGER_TYPES = frozenset({TINY, SHORT, LONG, LONGLONG, INT24, YEAR})
DECIMAL_TYPES = frozenset({DECIMAL, NEWDECIMAL})
FLOAT_TYPES = frozenset({FLOAT, DOUBLE})
NUMERIC_TYPES = INTEGER_TYPES | DECIMAL_TYPES | FLOAT_TYPES
# Their text form sorts like the value ('YYYY-MM-DD hh:mm:ss[.f]', fixed width per column).
TEXT_ORDERED_TEMPORAL_TYPES = frozenset({TIMESTAMP, DATE, DATETIME, NEWDATE, TIMESTAMP2, DATETIME2})
TIME_TYPES = frozenset({TIME, TIME2})
STRING_TYPES = frozenset(
    {VARCHAR, ENUM, SET, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB, VAR_STRING, STRING}
)
