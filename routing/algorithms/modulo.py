"""MOD and HASH_MOD: ShardingSphere's auto-table algorithms that pick shard ``n`` of ``sharding-count``.

MOD takes the value as an integer and uses ``BigInteger.mod`` (never negative). HASH_MOD uses
``Math.abs((long) value.hashCode()) % count`` where ``hashCode()`` is that of the Java object
ShardingSphere would hold (see ``routing.inline.java_hash_code``): a str hashes as ``String``, an int as
``Integer`` when it fits in 32 bits, else ``Long`` (``JavaLong`` forces ``Long``), a Decimal as
``BigDecimal``. The shard number names the target through ``match_suffix``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from routing.algorithms.base import Algorithm, match_suffix, to_integer, to_number
from routing.inline import java_hash_code
from routing.model import RangeBound


class _CountAlgorithm(Algorithm):
    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key)
        self.sharding_count = self.prop_int("sharding-count", minimum=1)

    def auto_tables_amount(self) -> int:
        return self.sharding_count


class ModShardingAlgorithm(_CountAlgorithm):
    """MOD: target ``value mod sharding-count``; a small bounded integer range routes value by value."""

    type_name: ClassVar[str] = "MOD"

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        number = to_integer(value)
        if number is None:
            return None  # not an integer: no row of an integer key can equal it
        return match_suffix(targets, str(number % self.sharding_count))

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        lower = integer_bound(bound.lower, bound.lower_inclusive, up=True)
        upper = integer_bound(bound.upper, bound.upper_inclusive, up=False)
        if lower is None or upper is None:
            return list(targets)
        if upper < lower:
            return []
        if upper - lower + 1 >= self.sharding_count:
            return list(targets)
        chosen: dict[str, None] = {}
        for number in range(lower, upper + 1):
            hit = match_suffix(targets, str(number % self.sharding_count))
            if hit is not None:
                chosen[hit] = None
        return [t for t in targets if t in chosen]


def integer_bound(value: Any, inclusive: bool, *, up: bool) -> int | None:
    """The closest integer inside a range bound (lower bounds round up, upper bounds down); None when the
    side is unbounded or not numeric."""
    number = to_number(value) if value is not None else None
    if number is None:
        return None
    if isinstance(number, int):
        if inclusive:
            return number
        return number + 1 if up else number - 1
    return int(number.to_integral_value(rounding="ROUND_CEILING" if up else "ROUND_FLOOR"))


class HashModShardingAlgorithm(_CountAlgorithm):
    """HASH_MOD: ``abs((long) hashCode(value)) % sharding-count``; any range routes to every target."""

    type_name: ClassVar[str] = "HASH_MOD"

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        try:
            code = java_hash_code(value)
        except TypeError:
            raise self.routing_error(
                f"cannot hash a {type(value).__name__} value of {column!r} the way ShardingSphere does"
            ) from None
        return match_suffix(targets, str(abs(code) % self.sharding_count))

    def ranges_route_everywhere(self) -> bool:
        return True

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        return list(targets)
