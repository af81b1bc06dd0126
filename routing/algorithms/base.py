"""Shared plumbing for the sharding algorithms: reading props, matching shard suffixes to target names,
coercing SQL values to numbers, and testing interval overlap.

Kept apart from the algorithms so each algorithm module reads as the ShardingSphere behaviour it ports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from routing.errors import ConfigError, RoutingError
from routing.model import RangeBound

Number = int | Decimal

_TRAILING_DIGITS = re.compile(r"(\d+)$")


class Algorithm:
    """Base of the built-in algorithms: remembers the configured name (errors name it) and props."""

    type_name: ClassVar[str] = ""
    #: "standard", "complex" or "hint": which strategy the algorithm may serve.
    strategy_kind: ClassVar[str] = "standard"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        self.name = name
        self.props: dict[str, Any] = dict(props or {})
        self._file = file
        self._key = key

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, props={self.props!r})"

    def ranges_route_everywhere(self) -> bool:
        """Does `shard_range` answer every range, whatever its bounds, with all the targets it is given (and
        never refuse one)? Then a statement whose conditions on the column are ranges routes the same way for
        any values, and the kernel need not ask. False unless an algorithm knows it is so."""
        return False

    def targets_by_remainder(self, targets: Sequence[str], column: str) -> tuple[str | None, ...] | None:
        """When `shard_precise(targets, column, v)` for every int v >= 0 is ``table[v % len(table)]`` (None: the
        value maps to no target), that table; None otherwise. The kernel's point plans look a value's target up
        with it instead of asking the algorithm. None unless an algorithm knows it is so."""
        return None

    # -- props --

    def config_error(self, prop: str | None, message: str) -> ConfigError:
        key = self._key
        if prop is not None:
            key = f"{key}.props.{prop}" if key else f"props.{prop}"
        return ConfigError(f"{self.type_name} algorithm {self.name!r}: {message}", file=self._file, key=key)

    def prop_str(self, prop: str, default: str | None = None) -> str:
        value = self.props.get(prop, default)
        if value is None:
            raise self.config_error(prop, f"property {prop!r} is required")
        if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
            raise self.config_error(prop, f"property {prop!r} must be a string, got {type(value).__name__}")
        return str(value)

    def prop_int(self, prop: str, default: int | None = None, *, minimum: int | None = None) -> int:
        value = self.props.get(prop, default)
        if value is None:
            raise self.config_error(prop, f"property {prop!r} is required")
        try:
            if isinstance(value, bool):
                raise ValueError
            result = int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            raise self.config_error(prop, f"property {prop!r} must be an integer, got {value!r}") from None
        if minimum is not None and result < minimum:
            raise self.config_error(prop, f"property {prop!r} must be at least {minimum}, got {result}")
        return result

    def prop_bool(self, prop: str, default: bool) -> bool:
        value = self.props.get(prop, default)
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise self.config_error(prop, f"property {prop!r} must be true or false, got {value!r}")

    def routing_error(self, message: str) -> RoutingError:
        return RoutingError(f"{self.type_name} sharding algorithm {self.name!r}: {message}")


def match_suffix(targets: Sequence[str], suffix: str) -> str | None:
    """The target a numeric shard suffix denotes.

    ShardingSphere's auto algorithms compute a shard number and look for the target named with that
    suffix. We accept ``<prefix>_<n>``, a bare ``<n>`` and zero-padded forms (``t_01``), comparing the
    whole trailing digit run so ``t_11`` never matches shard ``1``.
    """
    for target in targets:
        if target == suffix or target.endswith("_" + suffix):
            return target
    try:
        number = int(suffix)
    except ValueError:
        return None
    for target in targets:
        m = _TRAILING_DIGITS.search(target)
        if m and int(m.group(1)) == number:
            return target
    return None


def to_number(value: Any) -> Number | None:
    """A SQL value as an exact number (int, or Decimal when fractional); None when it is not numeric.

    Numeric strings count, as MySQL compares them numerically against numeric columns.
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            return None
        return int(value) if value == value.to_integral_value() else value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return to_number(Decimal(repr(value)))
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return to_number(Decimal(text))
        except InvalidOperation:
            return None
    return None


def to_integer(value: Any) -> int | None:
    """A SQL value as an integer, or None when it is not an integral number."""
    number = to_number(value)
    return number if isinstance(number, int) else None


def interval_overlaps(lower: Any, upper: Any, bound: RangeBound) -> bool:
    """Does the half-open partition ``[lower, upper)`` (None = unbounded) meet the condition ``bound``?

    Bound values must already be comparable with the partition ends.
    """
    if bound.lower is not None and upper is not None and not bound.lower < upper:
        return False
    if bound.upper is not None and lower is not None:
        if lower > bound.upper or (lower == bound.upper and not bound.upper_inclusive):
            return False
    return True


def keep_order(targets: Sequence[str], chosen: set[str] | dict[str, None]) -> list[str]:
    """``chosen`` in the order of ``targets`` (routes follow rule order)."""
    return [t for t in targets if t in chosen]
