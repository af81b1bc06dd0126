"""`!MASK` on the way out: the masked columns of a SELECT's answer shown through their algorithms.

A column is masked by its origin, as ShardingSphere's `MaskMergedResult` finds it: MariaDB names in each column
definition the table and column a plain column reference comes from (`org_table`, `org_name`), under an alias, in
`SELECT *` and through joins alike, and names none for an expression (`CONCAT(phone, '')`, `MAX(phone)`), which
ShardingSphere does not mask either. The nodes compute WHERE, ORDER BY and GROUP BY on the real values; only
the rows sent to the client are masked, after every merge.

An answer that may hold a masked column (a SELECT naming a masked table) is read and re-encoded row by row (the
executor's merge readers, text or binary rows alike), never relayed frame by frame; any other answer is untouched.
A masked column whose type is not a string (an INT masked by MD5) is sent as a VAR_STRING, since the masked text
is no longer a value of its type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from protocol.constants import ColumnFlag, ColumnType
from protocol.packets import ColumnDefinition41
from routing.mask.algorithms import MaskAlgorithm
from routing.mask.config import MaskRule
from routing.model import DatabaseRules
from routing.plan import RoutedStatement, StatementKind

_STRING_TYPES = frozenset(
    {
        ColumnType.VARCHAR,
        ColumnType.VAR_STRING,
        ColumnType.STRING,
        ColumnType.TINY_BLOB,
        ColumnType.MEDIUM_BLOB,
        ColumnType.LONG_BLOB,
        ColumnType.BLOB,
        ColumnType.JSON,
        ColumnType.ENUM,
        ColumnType.SET,
    }
)
_UTF8MB4 = 45  # utf8mb4_general_ci
_KEPT_FLAGS = int(ColumnFlag.NOT_NULL)

Masks = tuple[tuple[int, MaskAlgorithm], ...]


def mask_rule_for(rules: DatabaseRules, routed: RoutedStatement) -> MaskRule | None:
    """The database's mask rule when this statement's answer may hold a masked column, else None."""
    rule = rules.mask
    if rule is None or routed.kind is not StatementKind.SELECT or not rule.touches(routed.logic_tables):
        return None
    return rule


def masked_columns(rule: MaskRule, columns: Sequence[ColumnDefinition41]) -> Masks:
    """(index, algorithm) of each column the rule masks, by the table and column it comes from (logical names)."""
    out = []
    for i, col in enumerate(columns):
        if col.org_table and col.org_name:
            algorithm = rule.algorithm(col.org_table, col.org_name)
            if algorithm is not None:
                out.append((i, algorithm))
    return tuple(out)


def masked_definitions(columns: Sequence[ColumnDefinition41], masks: Masks) -> list[ColumnDefinition41]:
    """The definitions sent for the masked answer: a masked column of another type than a string as a VAR_STRING."""
    out = list(columns)
    for i, _algorithm in masks:
        col = out[i]
        if col.type not in _STRING_TYPES or (col.character_set == 63 and col.type is not ColumnType.JSON):
            out[i] = replace(
                col,
                type=ColumnType.VAR_STRING,
                character_set=_UTF8MB4,
                decimals=0,
                flags=col.flags & _KEPT_FLAGS,
                column_length=max(col.column_length, 32) * 4,
            )
    return out


def mask_row(row: Sequence[bytes | None], masks: Masks) -> list[bytes | None]:
    """The row's text values with the masked ones replaced."""
    out = list(row)
    for i, algorithm in masks:
        value = out[i]
        if value is None:
            continue
        masked = algorithm.mask(value.decode("utf-8", "surrogateescape"))
        out[i] = None if masked is None else masked.encode("utf-8", "surrogateescape")
    return out


__all__ = ["Masks", "mask_row", "mask_rule_for", "masked_columns", "masked_definitions"]
