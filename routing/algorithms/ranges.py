"""VOLUME_RANGE and BOUNDARY_RANGE: numeric partitions, ShardingSphere's AbstractRangeShardingAlgorithm.

Partition 0 holds values below the first boundary, partition ``i`` the half-open ``[b(i-1), b(i))`` and the
last one everything from the last boundary up. The partition number names the target (``t_<i>``).
Values are compared as exact numbers, so numeric strings and decimals place correctly; a value that is not
numeric maps nowhere, a range bound that is not numeric is treated as unbounded (widening the route).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from routing.algorithms.base import Algorithm, Number, interval_overlaps, match_suffix, to_number
from routing.model import RangeBound

_MAX_PARTITIONS = 100_000


class _PartitionAlgorithm(Algorithm):
    #: partition i is [bounds[i-1], bounds[i]) with bounds[-1] = -inf and bounds[len] = +inf
    boundaries: list[int]

    def auto_tables_amount(self) -> int:
        return len(self.boundaries) + 1

    def partition_of(self, number: Number) -> int:
        return bisect.bisect_right(self.boundaries, number)

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        number = to_number(value)
        if number is None:
            return None
        return match_suffix(targets, str(self.partition_of(number)))

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        lower, upper = to_number(bound.lower), to_number(bound.upper)
        query = RangeBound(lower, bound.lower_inclusive, upper, bound.upper_inclusive)
        edges: list[int | None] = [None, *self.boundaries, None]
        chosen: list[str] = []
        for index in range(len(self.boundaries) + 1):
            if interval_overlaps(edges[index], edges[index + 1], query):
                hit = match_suffix(targets, str(index))
                if hit is not None and hit not in chosen:
                    chosen.append(hit)
        return [t for t in targets if t in chosen]


class VolumeRangeShardingAlgorithm(_PartitionAlgorithm):
    """VOLUME_RANGE: ``< range-lower``, one partition per ``sharding-volume``, then ``>= range-upper``."""

    type_name: ClassVar[str] = "VOLUME_RANGE"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key)
        lower = self.prop_int("range-lower")
        upper = self.prop_int("range-upper")
        volume = self.prop_int("sharding-volume", minimum=1)
        if upper - lower < volume:
            raise self.config_error("range-upper", "range-upper - range-lower must be >= sharding-volume")
        if (upper - lower) // volume > _MAX_PARTITIONS:
            raise self.config_error("sharding-volume", f"more than {_MAX_PARTITIONS} partitions")
        boundaries = list(range(lower, upper, volume))
        self.boundaries = [*boundaries, upper]  # the last volume is cut at range-upper, as Math.min does


class BoundaryRangeShardingAlgorithm(_PartitionAlgorithm):
    """BOUNDARY_RANGE: ``sharding-ranges: 1,5,10`` gives ``<1, [1,5), [5,10), >=10``.

    Like ShardingSphere, entries that are not integers are dropped and the rest sorted.
    """

    type_name: ClassVar[str] = "BOUNDARY_RANGE"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key)
        raw = self.props.get("sharding-ranges")
        if raw is None:
            raise self.config_error("sharding-ranges", "property 'sharding-ranges' is required")
        items = raw if isinstance(raw, list) else str(raw).split(",")
        boundaries: set[int] = set()
        for item in items:
            try:
                boundaries.add(int(str(item).strip()))
            except ValueError:
                continue
        if not boundaries:
            raise self.config_error("sharding-ranges", f"no integer boundary in {raw!r}")
        self.boundaries = sorted(boundaries)
