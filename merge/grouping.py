"""GROUP BY / aggregate merges: one output row per group, aggregates merged across nodes.

`GroupByStreamMerger` needs rows clustered by group (a k-way merge of node streams sorted by the group
columns) and releases each group as soon as the next one starts: O(1) memory, LIMIT stops early.
`GroupByMemoryMerger` accepts rows in any order and holds every group until the end, bounded by the
merge's row budget. Groups are identified by the collation-aware equality key of the group columns, so
under a _ci collation 'a' and 'A' are one group (showing the first value seen, as MySQL does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from merge.aggregate import GroupAccumulator
from merge.errors import RowBudget
from merge.keys import Row, RowKey
from merge.stages import NOTHING

_NO_GROUP = object()


class GroupByStreamMerger:
    """Merges consecutive rows with the same group key. With `always_one_row` (aggregates without
    GROUP BY: every row is one group) an empty input still yields one row, as MySQL returns for
    ``SELECT COUNT(*) ... WHERE <nothing matches>``."""

    def __init__(
        self, key: RowKey, accumulator: GroupAccumulator, width: int, *, always_one_row: bool = False,
        run_key: RowKey | None = None, budget: RowBudget | None = None,
    ) -> None:
        self.key = key
        self.acc = accumulator
        self.width = width
        self.always_one_row = always_one_row
        self._current_key: Any = _NO_GROUP
        self._group: list[Any] | None = None
        self._emitted = False
        # run mode: rows arrive ordered by run_key, which may tie for different groups (text keys cut
        # at max_sort_length): a run of equal run keys is grouped in a dict and released when it ends
        self.run_key = run_key
        self.budget = budget
        self._run_key: Any = _NO_GROUP
        self._run: dict[Any, list[Any]] = {}

    def _push_run(self, row: Row) -> Sequence[Row]:
        assert self.run_key is not None
        rk = self.run_key(row)
        k = self.key(row)
        out: Sequence[Row] = NOTHING
        if rk != self._run_key:
            out = self._flush_run()
            self._run_key = rk
        group = self._run.get(k)
        if group is None:
            if self._run and self.budget is not None:
                self.budget.charge_item("groups", row)
            self._run[k] = self.acc.start(row)
        else:
            self.acc.add(group, row)
        return out

    def _flush_run(self) -> Sequence[Row]:
        if not self._run:
            return NOTHING
        run, self._run = self._run, {}
        if self.budget is not None and len(run) > 1:
            self.budget.release(len(run) - 1)
        self._emitted = True
        return [self.acc.finish(g) for g in run.values()]

    def push(self, row: Row) -> Sequence[Row]:
        if self.run_key is not None:
            return self._push_run(row)
        k = self.key(row)
        if self._group is not None and k == self._current_key:
            self.acc.add(self._group, row)
            return NOTHING
        finished = None if self._group is None else self.acc.finish(self._group)  # before the next starts
        self._current_key = k
        self._group = self.acc.start(row)
        if finished is None:
            return NOTHING
        self._emitted = True
        return (finished,)

    def finish(self) -> Iterable[Row]:
        if self.run_key is not None:
            return self._flush_run()
        if self._group is not None:
            group, self._group = self._group, None
            self._emitted = True
            return (self.acc.finish(group),)
        if self.always_one_row and not self._emitted:
            self._emitted = True
            return (self.acc.empty_row(self.width),)
        return NOTHING


class GroupByMemoryMerger:
    """Merges rows of the same group wherever they appear; releases groups (in first-seen order) at the
    end — the sort stage after it puts them in ORDER BY / GROUP BY order."""

    def __init__(self, key: RowKey, accumulator: GroupAccumulator, budget: RowBudget) -> None:
        self.key = key
        self.acc = accumulator
        self.budget = budget
        self._groups: dict[Any, list[Any]] = {}

    def push(self, row: Row) -> Sequence[Row]:
        k = self.key(row)
        group = self._groups.get(k)
        if group is None:
            self.budget.charge_item("groups", row)
            self._groups[k] = self.acc.start(row)
        else:
            self.acc.add(group, row)
        return NOTHING

    def finish(self) -> Iterable[Row]:
        groups, self._groups = self._groups, {}
        self.budget.release(len(groups))
        for k in groups:
            group = groups[k]
            groups[k] = None  # freed as it goes: half a million groups freed at once held the event loop 0.3 s
            yield self.acc.finish(group)
