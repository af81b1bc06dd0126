"""Row-at-a-time filters after grouping: DISTINCT and the final in-memory sort."""

from __future__ import annotations

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
    produce (ORDER BY an aggregate, or groups merged in memory)."""

    def __init__(self, key: RowKey, budget: RowBudget) -> None:
        self.key = key
        self.budget = budget
        self._rows: list[tuple[Any, int, Row]] = []

    def push(self, row: Row) -> Sequence[Row]:
        self.budget.charge_item("rows to sort", row)
        self._rows.append((self.key(row), len(self._rows), row))
        return NOTHING

    def finish(self) -> Iterable[Row]:
        rows, self._rows = self._rows, []
        rows.sort(key=lambda entry: (entry[0], entry[1]))
        self.budget.release(len(rows))
        return [entry[2] for entry in rows]
