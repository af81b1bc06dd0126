"""AUTO_INTERVAL and INTERVAL: time-bucketed shards.

AUTO_INTERVAL (an auto-table algorithm) numbers buckets of ``sharding-seconds`` after ``datetime-lower``
exactly as ShardingSphere does, including its rounding: the position ``seconds / sharding-seconds`` is
formatted with two decimals (HALF_EVEN) before ``ceil``, so bucket 0 is "at or before the lower bound",
and the result is clamped to ``[0, amount - 1]``.

INTERVAL walks from ``datetime-lower`` to ``datetime-upper`` in steps of ``datetime-interval-amount``
``datetime-interval-unit`` (cumulatively, so month steps drift like ``plusMonths``); each step
``[t, t + step)`` is the set of targets whose name ends with ``t`` formatted by ``sharding-suffix-pattern``.
The steps are computed once at configuration time.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, ClassVar

from routing.algorithms.base import Algorithm, interval_overlaps, match_suffix
from routing.algorithms.java_time import CHRONO_UNITS, JavaDateTimePattern, plus, to_datetime
from routing.model import RangeBound

_STANDARD_PATTERN = JavaDateTimePattern("yyyy-MM-dd HH:mm:ss")
_MAX_STEPS = 1_000_000


class AutoIntervalShardingAlgorithm(Algorithm):
    """AUTO_INTERVAL: ``datetime-lower``, ``datetime-upper`` ('yyyy-MM-dd HH:mm:ss'), ``sharding-seconds``."""

    type_name: ClassVar[str] = "AUTO_INTERVAL"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key)
        self.lower = self._prop_datetime("datetime-lower")
        upper = self._prop_datetime("datetime-upper")
        self.sharding_seconds = self.prop_int("sharding-seconds", minimum=1)
        # (int) (Math.ceil((double) (parseDate(upper) / shardingSeconds)) + 2): long division, then ceil
        seconds = self._seconds_since_lower(upper)
        quotient = abs(seconds) // self.sharding_seconds
        self.amount = (quotient if seconds >= 0 else -quotient) + 2
        if self.amount < 1:
            raise self.config_error("datetime-upper", "datetime-upper is before datetime-lower")

    def _prop_datetime(self, prop: str) -> datetime:
        parsed = _STANDARD_PATTERN.parse(self.prop_str(prop))
        if parsed is None:
            raise self.config_error(prop, f"{self.props[prop]!r} is not 'yyyy-MM-dd HH:mm:ss'")
        return parsed

    def _seconds_since_lower(self, value: datetime) -> int:
        delta = value - self.lower  # Duration.between(...).toMillis() / 1000 truncates toward zero
        millis = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
        return millis // 1000 if millis >= 0 else -((-millis) // 1000)

    def auto_tables_amount(self) -> int:
        return self.amount

    def partition_of(self, value: datetime) -> int:
        seconds = self._seconds_since_lower(value)
        ratio = Decimal(seconds / self.sharding_seconds)  # the double, exactly
        position = ratio.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)  # DecimalFormat("0.00")
        return min(max(0, math.ceil(position)), self.amount - 1)

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        moment = to_datetime(value, _STANDARD_PATTERN)
        if moment is None:
            raise self.routing_error(f"{value!r} is not a date/time value for {column!r}")
        return match_suffix(targets, str(self.partition_of(moment)))

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        lower = to_datetime(bound.lower, _STANDARD_PATTERN) if bound.lower is not None else None
        upper = to_datetime(bound.upper, _STANDARD_PATTERN) if bound.upper is not None else None
        first = self.partition_of(lower) if lower is not None else 0
        last = self.partition_of(upper) if upper is not None else self.amount - 1
        chosen = {match_suffix(targets, str(i)) for i in range(first, last + 1)}
        return [t for t in targets if t in chosen]


class IntervalShardingAlgorithm(Algorithm):
    """INTERVAL: time-suffixed tables (``t_order_202401``) between ``datetime-lower`` and ``datetime-upper``."""

    type_name: ClassVar[str] = "INTERVAL"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key)
        self.pattern = self._pattern("datetime-pattern")
        self.suffix_pattern = self._pattern("sharding-suffix-pattern")
        self.lower = self._prop_datetime("datetime-lower")
        if self.props.get("datetime-upper") is not None:
            upper = self._prop_datetime("datetime-upper")
        else:  # ShardingSphere: now, formatted by the pattern
            upper = self.pattern.parse(self.pattern.format(datetime.now())) or datetime.now()
        self.amount = self.prop_int("datetime-interval-amount", 1, minimum=1)
        self.unit = self.prop_str("datetime-interval-unit", "DAYS").strip().upper()
        if self.unit not in CHRONO_UNITS:
            raise self.config_error("datetime-interval-unit", f"unknown ChronoUnit {self.unit!r}")
        self.starts: list[datetime] = []
        self.ends: list[datetime] = []
        moment = self.lower
        while moment <= upper:
            if len(self.starts) >= _MAX_STEPS:
                raise self.config_error("datetime-interval-unit", f"more than {_MAX_STEPS} intervals")
            following = plus(moment, self.amount, self.unit)
            self.starts.append(moment)
            self.ends.append(following)
            moment = following
        self.suffixes = [self.suffix_pattern.format(s) for s in self.starts]

    def _pattern(self, prop: str) -> JavaDateTimePattern:
        try:
            return JavaDateTimePattern(self.prop_str(prop))
        except ValueError as exc:
            raise self.config_error(prop, str(exc)) from None

    def _prop_datetime(self, prop: str) -> datetime:
        parsed = self.pattern.parse(self.prop_str(prop))
        if parsed is None:
            raise self.config_error(prop, f"{self.props[prop]!r} does not match {self.pattern.pattern!r}")
        return parsed

    def _matching(self, targets: Sequence[str], index: int) -> list[str]:
        suffix = self.suffixes[index]
        return [t for t in targets if t.endswith(suffix)]

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        moment = to_datetime(value, self.pattern)
        if moment is None:
            raise self.routing_error(f"{value!r} is not a date/time value for {column!r}")
        index = bisect.bisect_right(self.starts, moment) - 1
        if index < 0 or moment >= self.ends[index]:
            return None  # outside [datetime-lower, datetime-upper]: no table holds it
        matches = self._matching(targets, index)
        return matches[0] if matches else None

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        lower = to_datetime(bound.lower, self.pattern) if bound.lower is not None else None
        upper = to_datetime(bound.upper, self.pattern) if bound.upper is not None else None
        query = RangeBound(lower, bound.lower_inclusive, upper, bound.upper_inclusive)
        first = 0 if lower is None else max(0, bisect.bisect_right(self.starts, lower) - 1)
        chosen: set[str] = set()
        for index in range(first, len(self.starts)):
            if upper is not None and self.starts[index] > upper:
                break
            if interval_overlaps(self.starts[index], self.ends[index], query):
                chosen.update(self._matching(targets, index))
        return [t for t in targets if t in chosen]
