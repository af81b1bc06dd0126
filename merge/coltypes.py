"""MySQL column type codes and flags, grouped the way the merge engine compares values.

The type codes themselves are protocol.constants.ColumnType (merge depends on the codec's constants,
never on the proxy); this module only groups them the way comparisons and formatting need.
"""

from __future__ import annotations

from protocol.constants import Collation, ColumnFlag, ColumnType

T = ColumnType

# the column flags and the collation the merge reads (protocol.constants holds them all)
UNSIGNED_FLAG = int(ColumnFlag.UNSIGNED)
BINARY_FLAG = int(ColumnFlag.BINARY)

BINARY_COLLATION = int(Collation.BINARY)
NOT_FIXED_DEC = 31  # `decimals` of a FLOAT/DOUBLE without a declared scale



def _codes(*types: ColumnType) -> frozenset[int]:
    return frozenset(int(t) for t in types)


INTEGER_TYPES = _codes(T.TINY, T.SHORT, T.LONG, T.LONGLONG, T.INT24, T.YEAR)
DECIMAL_TYPES = _codes(T.DECIMAL, T.NEWDECIMAL)
FLOAT_TYPES = _codes(T.FLOAT, T.DOUBLE)
NUMERIC_TYPES = INTEGER_TYPES | DECIMAL_TYPES | FLOAT_TYPES
# Their text form sorts like the value ('YYYY-MM-DD hh:mm:ss[.f]', fixed width per column).
TEXT_ORDERED_TEMPORAL_TYPES = _codes(T.TIMESTAMP, T.DATE, T.DATETIME, T.NEWDATE, T.TIMESTAMP2, T.DATETIME2)
TIME_TYPES = _codes(T.TIME, T.TIME2)
STRING_TYPES = _codes(
    T.VARCHAR, T.ENUM, T.SET, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB, T.VAR_STRING, T.STRING
)
