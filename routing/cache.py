"""A bounded LRU of compiled plans keyed by statement shape.

The key is `routing.parse.Shape.key`: the statement text with every literal replaced by a marker (``?`` of a
prepared statement stays ``?``), so ``WHERE user_id = 1`` and ``WHERE user_id = 2`` share one plan and a
repeat never reaches sqlglot. Plans are immutable; a hit only re-evaluates algorithms and splices text.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class PlanCache(Generic[V]):
    """Least-recently-used map from shape key to plan (or any hashable key to anything: the kernel's route cache);
    ``size <= 0`` disables caching."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> V | None:
        item = self._items.get(key)
        if item is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return item

    def put(self, key: Hashable, value: V) -> None:
        if self._size <= 0:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
