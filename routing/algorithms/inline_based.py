"""INLINE, COMPLEX_INLINE and HINT_INLINE: algorithms whose rule is an inline (Groovy) expression.

The expression is compiled once at configuration time (`routing.inline`); shard() only binds values
and evaluates. A result that is not one of the targets means the value maps nowhere (None / dropped),
which lets the kernel refuse instead of sending SQL to a table that does not exist.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from routing.algorithms.base import Algorithm, to_number
from routing.errors import ConfigError, RoutingError
from routing.inline import InlineExpression
from routing.model import RangeBound

_ALLOW_RANGE = "allow-range-query-with-inline-sharding"


def _pick(targets: Sequence[str], name: str) -> str | None:
    if name in targets:
        return name
    low = name.lower()
    for target in targets:
        if target.lower() == low:
            return target
    return None


class _ExpressionAlgorithm(Algorithm):
    def __init__(
        self,
        name: str,
        props: Mapping[str, Any],
        *,
        file: str | None = None,
        key: str | None = None,
        default_expression: str | None = None,
    ) -> None:
        super().__init__(name, props, file=file, key=key)
        text = self.prop_str("algorithm-expression", default_expression)
        try:
            self.expression = InlineExpression.compile(text.strip())
        except ConfigError as exc:  # raised without file/key: re-raise with them
            raise self.config_error("algorithm-expression", str(exc)) from None

    def _variables_for(self, column: str) -> tuple[str, ...]:
        """Expression variables a column binds: itself plus case-insensitive matches (SQL is case-blind)."""
        low = column.lower()
        return (column, *(v for v in self.expression.free_variables if v != column and v.lower() == low))


# ``prefix${column % N}suffix``, the most common inline algorithm: evaluated without the general evaluator
_MODULO_FORM = re.compile(r"\A([\w.-]*)\$(?:->)?\{\s*([A-Za-z_]\w*)\s*%\s*([1-9]\d{0,8})\s*\}([\w.-]*)\Z")


_REMAINDER_TABLE_LIMIT = 4096  # `targets_by_remainder`: a larger divisor is evaluated per value


def modulo_form(text: str) -> tuple[str, str, int, str] | None:
    """(prefix, variable, divisor, suffix) of an expression that is exactly ``prefix${variable % N}suffix``."""
    m = _MODULO_FORM.match(text)
    return (m.group(1), m.group(2), int(m.group(3)), m.group(4)) if m else None


class InlineShardingAlgorithm(_ExpressionAlgorithm):
    """INLINE: ``algorithm-expression`` over one sharding column; ranges only when explicitly allowed."""

    type_name: ClassVar[str] = "INLINE"
    strategy_kind: ClassVar[str] = "standard"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key)
        self.allow_range = self.prop_bool(_ALLOW_RANGE, False)
        self._binds: dict[str, tuple[str, ...]] = {}
        self._modulo = modulo_form(self.expression.text)

    def evaluate(self, column: str, value: Any) -> str:
        names = self._binds.get(column)
        if names is None:
            names = self._binds[column] = self._variables_for(column)
        modulo = self._modulo
        if modulo is not None and type(value) is int and modulo[1] in names:
            # Groovy's % on an integer keeps the dividend's sign; the remainder fits any width
            prefix, _, n, suffix = modulo
            return f"{prefix}{value % n if value >= 0 else -(-value % n)}{suffix}"
        try:
            return self.expression.evaluate(dict.fromkeys(names, value))
        except RoutingError:
            # MySQL compares a numeric column with '7' as the number 7: text that reads as a number is
            # retried as that number when the expression cannot use it as text ('%' on a str, say).
            number = to_number(value) if isinstance(value, str | bytes) else None
            if number is None:
                raise
            return self.expression.evaluate(dict.fromkeys(names, number))

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        return _pick(targets, self.evaluate(column, value))

    def targets_by_remainder(self, targets: Sequence[str], column: str) -> tuple[str | None, ...] | None:
        """``prefix${column % N}suffix``: what `shard_precise` picks for each remainder (`evaluate`'s modulo form)."""
        modulo = self._modulo
        if modulo is None or modulo[2] > _REMAINDER_TABLE_LIMIT or modulo[1] not in self._variables_for(column):
            return None
        prefix, _, n, suffix = modulo
        return tuple(_pick(targets, f"{prefix}{r}{suffix}") for r in range(n))

    def ranges_route_everywhere(self) -> bool:
        return self.allow_range

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        if not self.allow_range:
            raise self.routing_error(
                f"a range condition on {column!r} cannot be routed by an inline expression; "
                f"set {_ALLOW_RANGE}: true to route it to every target"
            )
        return list(targets)

    def sample_results(self, column: str, values: Iterable[Any]) -> set[str] | None:
        """What the expression yields for ``values``; None when it cannot evaluate them (config check)."""
        try:
            return {self.evaluate(column, v) for v in values}
        except RoutingError:
            return None


class ComplexInlineShardingAlgorithm(_ExpressionAlgorithm):
    """COMPLEX_INLINE: one expression over several columns, evaluated for every combination of values."""

    type_name: ClassVar[str] = "COMPLEX_INLINE"
    strategy_kind: ClassVar[str] = "complex"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key)
        self.allow_range = self.prop_bool(_ALLOW_RANGE, False)
        columns = self.props.get("sharding-columns")
        self.columns: tuple[str, ...] = (
            tuple(c.strip() for c in str(columns).split(",") if c.strip()) if columns else ()
        )

    def shard(
        self, targets: Sequence[str], values: Mapping[str, Sequence[Any]], ranges: Mapping[str, RangeBound]
    ) -> list[str]:
        if ranges:
            if not self.allow_range:
                raise self.routing_error(
                    f"range conditions on {', '.join(ranges)} cannot be routed by an inline expression; "
                    f"set {_ALLOW_RANGE}: true to route them to every target"
                )
            return list(targets)
        by_lower = {k.lower(): (k, v) for k, v in values.items()}
        needed = {c.lower() for c in self.columns} | {v.lower() for v in self.expression.free_variables}
        if not needed or any(n not in by_lower or not by_lower[n][1] for n in needed):
            return list(targets)  # a column without a value: any target may hold the rows
        names: list[tuple[str, ...]] = []
        choices: list[Sequence[Any]] = []
        for low in sorted(needed):
            column, column_values = by_lower[low]
            names.append(self._variables_for(column))
            choices.append(column_values)
        chosen: dict[str, None] = {}
        for combo in itertools.product(*choices):
            env: dict[str, Any] = {}
            for variables, value in zip(names, combo, strict=True):
                env.update(dict.fromkeys(variables, value))
            hit = _pick(targets, self.expression.evaluate(env))
            if hit is not None:
                chosen[hit] = None
        return list(chosen)


class HintInlineShardingAlgorithm(_ExpressionAlgorithm):
    """HINT_INLINE: the expression binds ``value`` to each hint value (default ``${value}``)."""

    type_name: ClassVar[str] = "HINT_INLINE"
    strategy_kind: ClassVar[str] = "hint"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key, default_expression="${value}")

    def shard(self, targets: Sequence[str], values: Sequence[Any]) -> list[str]:
        if not values:
            return list(targets)
        chosen: dict[str, None] = {}
        for value in values:
            hit = _pick(targets, self.expression.evaluate({"value": value}))
            if hit is not None:
                chosen[hit] = None
        return list(chosen)
