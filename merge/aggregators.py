"""Which aggregator merges which aggregate: the one place that knows every kind (the plain ones in
merge.aggregate, the DISTINCT ones in merge.distinct, the ordered GROUP_CONCAT in merge.concat), so that
those modules import only merge.aggregate's base pieces and never each other."""

from __future__ import annotations

from collections.abc import Sequence

from merge.aggregate import (
    Aggregator,
    AvgAggregator,
    BitAggregator,
    CountAggregator,
    DistinctAggregator,
    GroupConcatAggregator,
    MergeStats,
    MinMaxAggregator,
    SumAggregator,
)
from merge.concat import OrderedGroupConcatAggregator
from merge.distinct import AvgDistinctAggregator, TupleDistinctAggregator
from merge.errors import RowBudget
from merge.keys import Weights
from merge.spec import AggregateItem, AggregateKind, ColumnMeta


def make_aggregator(
    item: AggregateItem, columns: Sequence[ColumnMeta], budget: RowBudget, weights: Weights | None = None,
    warnings: MergeStats | None = None,
) -> Aggregator:
    kind = item.kind
    if kind is AggregateKind.COUNT:
        return CountAggregator(item, columns)
    if kind is AggregateKind.SUM:
        return SumAggregator(item, columns)
    if kind in (AggregateKind.MIN, AggregateKind.MAX):
        return MinMaxAggregator(item, columns, weights)
    if kind is AggregateKind.AVG:
        return AvgAggregator(item, columns)
    if kind in (AggregateKind.COUNT_DISTINCT, AggregateKind.SUM_DISTINCT):
        if item.distinct_more:  # COUNT(DISTINCT a, b, ...)
            return TupleDistinctAggregator(item, columns, budget, weights)
        return DistinctAggregator(item, columns, budget, weights)
    if kind is AggregateKind.AVG_DISTINCT:
        return AvgDistinctAggregator(item, columns, budget, weights)
    if kind is AggregateKind.GROUP_CONCAT:
        if item.distinct_index is not None:  # DISTINCT / ORDER BY: the values come one by one
            return OrderedGroupConcatAggregator(item, columns, budget, weights, warnings)
        return GroupConcatAggregator(item, columns, warnings)
    return BitAggregator(item, columns)


__all__ = ["make_aggregator"]
