"""CONSISTENT_HASH: the consistent-hash ring of seed 004 (a production ShardingSphere 4.x algorithm),
ported bit for bit so data placed by that Java code is found here.

Hash: MurmurHash2 32-bit (Jedis flavour) with seed ``0x1234ABCD`` over ``key.getBytes()`` (UTF-8, the JVM
default on Linux), little-endian words, and ``Math.abs`` on a negative result — which leaves
``Integer.MIN_VALUE`` negative, as Java does.

Ring: for each target in order, ``put(hash(node), node)`` (overwriting), then ``virtual-nodes`` extra points
``node#1``, ``node#2``, … where a point whose hash is already on the ring is skipped (and the counter keeps
going). A key goes to the first point with hash >= its hash (``tailMap``), wrapping to the first point.

``virtual-nodes`` defaults to the number of targets, which is what the seed does (``virtualNum =
realNodes.size()``). The ring is built over the targets the kernel passes in and cached per target list.
The key is the value's Java string form (``String.valueOf``); range conditions route to every target.
For auto tables, ``sharding-count`` gives the number of tables.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, ClassVar

from routing.algorithms.base import Algorithm
from routing.inline import java_str, to_int32
from routing.model import RangeBound

_SEED = 0x1234ABCD  # 305441741
_M = 0x5BD1E995  # 1540483477
_R = 24
_MASK = 0xFFFFFFFF


def murmur_hash(key: str) -> int:
    """The seed's ``hash(String)``: a non-negative int32, except ``Integer.MIN_VALUE`` itself."""
    data = key.encode("utf-8")
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    if whole < length:
        h ^= int.from_bytes(data[whole:].ljust(4, b"\0"), "little")
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    signed = to_int32(h)
    return to_int32(-signed) if signed < 0 else signed  # Math.abs(Integer.MIN_VALUE) == Integer.MIN_VALUE


class HashRing:
    """A sorted ring of (hash, node) points built as the seed's ``init``."""

    __slots__ = ("hashes", "nodes")

    def __init__(self, nodes: Sequence[str], virtual_nodes: int) -> None:
        ring: dict[int, str] = {}
        for node in nodes:
            ring[murmur_hash(node)] = node
            count = i = 0
            while count < virtual_nodes:
                i += 1
                point = murmur_hash(f"{node}#{i}")
                if point not in ring:
                    ring[point] = node
                    count += 1
        self.hashes = sorted(ring)
        self.nodes = [ring[h] for h in self.hashes]

    def locate(self, key: str) -> str:
        index = bisect.bisect_left(self.hashes, murmur_hash(key))
        return self.nodes[index if index < len(self.hashes) else 0]


class ConsistentHashShardingAlgorithm(Algorithm):
    """CONSISTENT_HASH: props ``virtual-nodes`` (default: number of targets), ``sharding-count`` (auto)."""

    type_name: ClassVar[str] = "CONSISTENT_HASH"

    def __init__(self, name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(name, props, file=file, key=key)
        self.virtual_nodes = (
            self.prop_int("virtual-nodes", minimum=0) if self.props.get("virtual-nodes") is not None else None
        )
        self.sharding_count = (
            self.prop_int("sharding-count", minimum=1) if self.props.get("sharding-count") is not None else None
        )
        self._rings: dict[tuple[str, ...], HashRing] = {}

    def auto_tables_amount(self) -> int:
        if self.sharding_count is None:
            raise self.config_error("sharding-count", "property 'sharding-count' is required for auto tables")
        return self.sharding_count

    def ring(self, targets: Sequence[str]) -> HashRing:
        key = tuple(targets)
        ring = self._rings.get(key)
        if ring is None:
            virtual = self.virtual_nodes if self.virtual_nodes is not None else len(key)
            ring = HashRing(key, virtual)
            if len(self._rings) > 64:
                self._rings.clear()
            self._rings[key] = ring
        return ring

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        if not targets:
            return None
        if value is None:
            return None  # `= NULL` matches no row
        return self.ring(targets).locate(self.key_of(column, value))

    def key_of(self, column: str, value: Any) -> str:
        if isinstance(value, bytes):
            return value.decode("utf-8", "surrogateescape")
        if isinstance(value, str | int | Decimal | float):
            return java_str(value)
        raise self.routing_error(f"cannot hash a {type(value).__name__} value of {column!r}")

    def ranges_route_everywhere(self) -> bool:
        return True

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        return list(targets)
