"""GROUP BY ... WITH ROLLUP computed after the merge.

Why here: a super-aggregate row (``a, NULL, SUM(...)`` for every ``a``, then the grand total) covers groups
that several nodes hold, so the nodes run the GROUP BY without ROLLUP, sorted by the group columns, and
the merge folds the k-way merged rows into one running group per level: level n is the group itself,
level i < n the prefix of its first i columns. When a row's prefix changes at level i, the levels below
it are finished (deepest first, as MariaDB emits them: the group, then its super-aggregates) and
restarted. Memory is one group per level, whatever the number of groups; no input, no row (as MariaDB).
Super-aggregate rows show NULL in the group columns they roll up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from merge.aggregate import GroupAccumulator
from merge.keys import Row, RowKey
from merge.stages import NOTHING


class RollupMerger:
    """A push stage over rows ordered by the group columns: groups and their super-aggregate rows."""

    def __init__(self, group_by: Sequence[int], level_keys: Sequence[RowKey], accumulator: GroupAccumulator) -> None:
        self.group_by = tuple(group_by)
        self.level_keys = tuple(level_keys)  # level_keys[i]: the equality key of the first i + 1 columns
        self.acc = accumulator
        self._keys: list[Any] = []  # the current key of each level 1..n
        self._groups: list[list[Any]] = []  # the running group of each level 0..n

    def _finish(self, level: int) -> list[bytes | None]:
        out = self.acc.finish(self._groups[level])
        for index in self.group_by[level:]:
            out[index] = None
        return out

    def push(self, row: Row) -> Sequence[Row]:
        n = len(self.group_by)
        if not self._groups:
            self._groups = [self.acc.start(row) for _ in range(n + 1)]
            self._keys = [key(row) for key in self.level_keys]
            return NOTHING
        keys = [key(row) for key in self.level_keys]
        changed = next((i for i in range(n) if keys[i] != self._keys[i]), None)
        if changed is None:
            for group in self._groups:
                self.acc.add(group, row)
            return NOTHING
        level = changed + 1  # levels level..n end here
        out = [self._finish(j) for j in range(n, level - 1, -1)]
        for j in range(level):
            self.acc.add(self._groups[j], row)
        for j in range(level, n + 1):
            self._groups[j] = self.acc.start(row)
        self._keys = keys
        return out

    def finish(self) -> Sequence[Row]:
        if not self._groups:
            return NOTHING
        out = [self._finish(j) for j in range(len(self.group_by), -1, -1)]
        self._groups = []
        return out
