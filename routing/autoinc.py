"""An INSERT that gives a table's AUTO_INCREMENT column NULL or 0: MariaDB stores a generated id there, not the value.

Why the kernel must know: when that column is a sharding column, routing the row by the value written (0, or a
NULL it cannot route) puts it on a node its stored id does not route to — silently wrong. When the table has a key
generator for the column (keyGenerateStrategy), the proxy generates the id itself, as it does when the column is
left out, and routes by it; otherwise it refuses, since only the node knows the id it will generate.

MariaDB generates on NULL always and on 0 unless the session's sql_mode has NO_AUTO_VALUE_ON_ZERO (then 0 is a
value). That flag changes no text, so it reaches the plans through a context variable `ShardingKernel.route` sets
for the call, not through the kernel's per-mode readers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from routing.conditions import UNKNOWN, Concat, Const, Slot, ValueRef, resolve_value
from routing.errors import RoutingError

__all__ = ["NULL", "AutoIncrement", "zero_is_value"]

NULL = Const(None)  # the row's value is the NULL literal (no value token holds it)
_ZERO_IS_VALUE: ContextVar[bool] = ContextVar("routing_zero_is_value", default=False)


@contextmanager
def zero_is_value(on: bool) -> Iterator[None]:
    """Plans run in this context read a 0 given to an AUTO_INCREMENT column as a value (NO_AUTO_VALUE_ON_ZERO)."""
    token = _ZERO_IS_VALUE.set(on)
    try:
        yield
    finally:
        _ZERO_IS_VALUE.reset(token)


@dataclass(frozen=True)
class AutoIncrement:
    """An INSERT's values for the table's AUTO_INCREMENT column, which it names (per row: a value reference,
    `NULL`, or None for an expression the proxy does not evaluate)."""

    table: str
    column: str  # lower case
    values: tuple[ValueRef | None, ...]
    generator: Any = None  # the table's key generator for this column, if it has one
    sharding: bool = False  # the column is a sharding column of the table

    @property
    def routes(self) -> bool:
        """The values decide the rows' nodes or keys (a sharding column, or one the key generator fills); else they
        only tell which rows the node generates an id for."""
        return self.sharding or self.generator is not None

    def generates(self, row: int, values: Sequence[Any]) -> bool:
        """Does MariaDB generate this row's id (NULL, or 0 outside NO_AUTO_VALUE_ON_ZERO)? An expression the proxy
        does not evaluate: no (a sharding column given one is refused by the caller as any such value is)."""
        ref = self.values[row]
        if ref is None:
            return False
        value = _raw(ref, values)
        if value is None:
            return True
        return not _ZERO_IS_VALUE.get() and _is_zero(value)

    def refusal(self, row: int, values: Sequence[Any]) -> RoutingError:
        given = "NULL" if _raw(self.values[row], values) is None else "0"
        return RoutingError(
            f"INSERT into {self.table}: row {row + 1} gives {given} to {self.column}, an AUTO_INCREMENT sharding "
            f"column, where MariaDB stores an id the data node generates, which the proxy cannot know to route the "
            f"row by; give {self.column} its value, or configure a keyGenerateStrategy for {self.table}.{self.column} "
            "so that the proxy generates it"
        )


def _raw(ref: ValueRef, values: Sequence[Any]) -> Any:
    """The value as written (None for NULL, UNKNOWN when not known); the sign of a zero does not matter."""
    if isinstance(ref, Const):
        return ref.value
    if isinstance(ref, Slot):
        return values[ref.index]
    if isinstance(ref, Concat):
        return resolve_value(ref, values)
    return UNKNOWN


def _is_zero(value: Any) -> bool:
    """Is this what MariaDB stores as 0 in an integer column (0, 0.4 rounded, '0', ' 00 ', b'0')?"""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if isinstance(value, str):
        try:
            value = Decimal(value.strip())
        except InvalidOperation:
            return False
    if isinstance(value, int | float | Decimal):
        return abs(value) < Decimal("0.5") if isinstance(value, Decimal) else abs(value) < 0.5
    return False
