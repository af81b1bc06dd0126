"""Sharding algorithms, built from a configured ``(name, type, props)`` by :func:`create_algorithm`.

Every algorithm implements one protocol of ``routing.model`` (``StandardShardingAlgorithm``,
``ComplexShardingAlgorithm`` or ``HintShardingAlgorithm``) and says which through ``strategy_kind``
("standard", "complex", "hint"); auto-table algorithms (MOD, HASH_MOD, VOLUME_RANGE, BOUNDARY_RANGE,
AUTO_INTERVAL, CONSISTENT_HASH) also have ``auto_tables_amount()``. Precise routing is a pure function;
range routing widens, never narrows. Errors while routing are ``RoutingError`` naming the algorithm;
errors in props are ``ConfigError`` naming the file and key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from routing.algorithms.base import Algorithm, match_suffix
from routing.algorithms.class_based import create_class_based
from routing.algorithms.consistent_hash import ConsistentHashShardingAlgorithm, HashRing, murmur_hash
from routing.algorithms.inline_based import (
    ComplexInlineShardingAlgorithm,
    HintInlineShardingAlgorithm,
    InlineShardingAlgorithm,
)
from routing.algorithms.modulo import HashModShardingAlgorithm, ModShardingAlgorithm
from routing.algorithms.ranges import BoundaryRangeShardingAlgorithm, VolumeRangeShardingAlgorithm
from routing.algorithms.temporal import AutoIntervalShardingAlgorithm, IntervalShardingAlgorithm
from routing.errors import ConfigError

__all__ = [
    "ALGORITHM_TYPES",
    "Algorithm",
    "AutoIntervalShardingAlgorithm",
    "AutoTableAlgorithm",
    "BoundaryRangeShardingAlgorithm",
    "ComplexInlineShardingAlgorithm",
    "ConsistentHashShardingAlgorithm",
    "HashModShardingAlgorithm",
    "HashRing",
    "HintInlineShardingAlgorithm",
    "InlineShardingAlgorithm",
    "IntervalShardingAlgorithm",
    "ModShardingAlgorithm",
    "VolumeRangeShardingAlgorithm",
    "algorithm_kind",
    "create_algorithm",
    "match_suffix",
    "murmur_hash",
]


@runtime_checkable
class AutoTableAlgorithm(Protocol):
    """An algorithm usable in ``autoTables``: it knows how many actual tables it shards over."""

    def auto_tables_amount(self) -> int: ...


Factory = Callable[..., Any]

ALGORITHM_TYPES: dict[str, Factory] = {
    "INLINE": InlineShardingAlgorithm,
    "COMPLEX_INLINE": ComplexInlineShardingAlgorithm,
    "HINT_INLINE": HintInlineShardingAlgorithm,
    "MOD": ModShardingAlgorithm,
    "HASH_MOD": HashModShardingAlgorithm,
    "VOLUME_RANGE": VolumeRangeShardingAlgorithm,
    "BOUNDARY_RANGE": BoundaryRangeShardingAlgorithm,
    "AUTO_INTERVAL": AutoIntervalShardingAlgorithm,
    "INTERVAL": IntervalShardingAlgorithm,
    "CONSISTENT_HASH": ConsistentHashShardingAlgorithm,
    "CLASS_BASED": create_class_based,
}


def create_algorithm(
    name: str,
    type_: str,
    props: Mapping[str, Any] | None = None,
    *,
    file: str | None = None,
    key: str | None = None,
) -> Any:
    """Build the algorithm ``name`` of ``type_`` (case-insensitive) from its ``props``.

    ``key`` is the dotted config path of the algorithm (e.g. ``rules[0].shardingAlgorithms.t_inline``);
    problems raise ``ConfigError`` with ``file`` and that key (plus ``.props.<prop>`` where it applies).
    """
    factory = ALGORITHM_TYPES.get(str(type_).strip().upper())
    if factory is None:
        known = ", ".join(sorted(ALGORITHM_TYPES))
        raise ConfigError(
            f"unknown sharding algorithm type {type_!r} for {name!r} (known: {known})",
            file=file,
            key=f"{key}.type" if key else "type",
        )
    if props is not None and not isinstance(props, Mapping):
        raise ConfigError(f"props of {name!r} must be a mapping", file=file, key=f"{key}.props" if key else None)
    return factory(name, props or {}, file=file, key=key)


def algorithm_kind(algorithm: object) -> str | None:
    """ "standard", "complex" or "hint" for an algorithm built here; None for anything else."""
    kind = getattr(algorithm, "strategy_kind", None)
    return kind if isinstance(kind, str) else None
