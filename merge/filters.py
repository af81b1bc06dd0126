"""Row-at-a-time filters after grouping: DISTINCT and the final in-memory sort."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any

from merge.errors import RowBudget
from merge.keys import Row, RowKey
from merge.stages import NOTHING


class DistinctFilter:
    """DISTINCT as a streaming group-by on the visible columns: a row passes the first time its
    collation-aware key is seen, so merge order (and an ORDER BY merge's sortedness) is kept and a LIMIT
    stops early. Every remembered key is charged to the row budget."""

    def __init__(self, key: RowKey, budget: RowBudget) -> None:
        self.key = key
        self.budget = budget
        self._seen: set[Any] = set()

    def push(self, row: Row) -> Sequence[Row]:
        k = self.key(row)
        if k in self._seen:
            return NOTHING
        self.budget.charge_item("DISTINCT rows", k)
        self._seen.add(k)
        return (row,)

    def finish(self) -> Iterable[Row]:
        self.budget.release(len(self._seen))
        self._seen = set()
        return NOTHING


class SortStage:
    """Buffers every row and releases them sorted (stable) by `key` — for orders the nodes could not
    produce (ORDER BY an aggregate, or groups merged in memory).

    Sorted by runs of `RUN` rows as they come, then merged lazily: one sort of a million rows is one C call of a
    second or more, during which the event loop serves no other session; a run's sort is a few milliseconds, and
    the merge hands rows out one at a time (the async driver lets the loop run between them)."""

    RUN = 32768

    def __init__(self, key: RowKey, budget: RowBudget) -> None:
        self.key = key
        self.budget = budget
        self._rows: list[tuple[Any, int, Row]] = []
        self._runs: list[list[tuple[Any, int, Row]]] = []
        self._seq = 0
        # the runs once merged: left to the async driver to free in slices (freeing half a million entries at once
        # is a quarter of a second)
        self.spent: list[list[tuple[Any, int, Row]]] = []

    def push(self, row: Row) -> Sequence[Row]:
        self.budget.charge_item("rows to sort", row)
        self._rows.append((self.key(row), self._seq, row))  # (key, arrival): stable, rows never compared
        self._seq += 1
        if len(self._rows) >= self.RUN:
            self._rows.sort()
            self._runs.append(self._rows)
            self._rows = []
        return NOTHING

    def finish(self) -> Iterable[Row]:
        rows, self._rows = self._rows, []
        rows.sort()
        runs, self._runs = [*self._runs, rows], []
        self.budget.release(self._seq)
        self._seq = 0
        self.spent = runs
        if len(runs) == 1:
            return [entry[2] for entry in rows]
        return (entry[2] for entry in heapq.merge(*runs))
