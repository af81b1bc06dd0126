"""DISTINCT aggregates beyond one argument: ``COUNT(DISTINCT a, b, ...)`` and ``AVG(DISTINCT x)``.

Why here: a node can only de-duplicate its own rows, so the kernel pushes ``GROUP BY <keys>, <distinct
args>`` down (one node row per group and distinct value, for every DISTINCT aggregate of the statement at
once) and the merge unions the values the nodes report, identified by the columns' equality keys (the
nodes' weights for text when the kernel asked for them), charging each stored value to the merge's row
budget (``proxy-merge-memory-rows``).

* ``COUNT(DISTINCT a, b)`` counts the distinct tuples in which no value is NULL, as MariaDB does;
* ``AVG(DISTINCT x)`` is the SUM of the distinct values over their number, printed with the AVG column's
  type and scale (`merge.aggregate.avg_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from merge import coltypes as t
from merge.aggregate import DistinctAggregator, _add, avg_text, parse_exact
from merge.errors import RowBudget
from merge.keys import Row, Weights, value_key, weight_index, weighted_value_key
from merge.numfmt import format_int
from merge.spec import AggregateItem, ColumnMeta


class TupleDistinctAggregator(DistinctAggregator):
    """COUNT(DISTINCT a, b, ...): the number of distinct non-NULL tuples the nodes report."""

    def __init__(self, item: AggregateItem, columns: Sequence[ColumnMeta], budget: RowBudget,
                 weights: Weights | None = None) -> None:
        super().__init__(item, columns, budget, weights)
        self.sources = (self.source, *item.distinct_more)
        self.keys = []
        for index in self.sources:
            wi = weight_index(index, columns, weights)
            if wi is not None:
                self.keys.append(weighted_value_key(index, wi, order=False))
            else:
                key = value_key(columns[index])
                self.keys.append(lambda row, i=index, k=key: k(row[i]))

    def add(self, state: dict[Any, bytes], row: Row) -> dict[Any, bytes]:
        if any(row[i] is None for i in self.sources):
            return state
        k = tuple(key(row) for key in self.keys)
        if k not in state:
            self.budget.charge_item("distinct aggregate values", k)
            state[k] = b""
        return state

    def result(self, state: dict[Any, bytes]) -> bytes | None:
        self.budget.release(len(state))
        return format_int(len(state))


class AvgDistinctAggregator(DistinctAggregator):
    """AVG(DISTINCT x): the distinct values' sum over their count."""

    def result(self, state: dict[Any, bytes]) -> bytes | None:
        self.budget.release(len(state))
        if not state:
            return None
        floating = self.floating
        total: int | Decimal | float = 0.0 if floating else 0
        for v in state.values():
            total = _add(total, float(v) if floating else parse_exact(v))
        if not floating and self.column.type_code in t.FLOAT_TYPES:
            total = float(total)
        return avg_text(total, len(state), self.column)
