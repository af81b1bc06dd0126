"""GROUP_CONCAT([DISTINCT] ... [ORDER BY ...] [SEPARATOR ...]) finished in the proxy.

Why here: the order (and the de-duplication) of the values spans every node's rows of a group, so a
node's own GROUP_CONCAT part cannot be concatenated as is. The kernel pushes ``GROUP BY <keys>, <value>,
<order keys>`` down with the value, the order keys (with their weights for text) and ``COUNT(*)`` (how
many rows have that value and order key) as derived columns; the merge collects a group's values, drops
repeats under the value's collation for DISTINCT, sorts them by the ORDER BY keys as MariaDB compares
them (without ORDER BY, DISTINCT lists the values in their own order, as MariaDB's distinct tree does),
joins them with the separator and cuts the result at group_concat_max_len bytes like
`merge.aggregate.GroupConcatAggregator`. Every value held is charged to the merge's row budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from merge.aggregate import GroupConcatAggregator, MergeStats, _parse_limit
from merge.errors import MergeError, RowBudget
from merge.keys import Row, Weights, equality_key, order_key
from merge.spec import AggregateItem, ColumnMeta, OrderItem


class OrderedGroupConcatAggregator(GroupConcatAggregator):
    def __init__(self, item: AggregateItem, columns: Sequence[ColumnMeta], budget: RowBudget,
                 weights: Weights | None = None, warnings: MergeStats | None = None) -> None:
        super().__init__(item, columns, warnings)
        if item.distinct_index is None or item.count_index is None:
            raise MergeError(f"GROUP_CONCAT at column {item.index} needs its value and count columns")
        self.value_index = item.distinct_index
        self.count_index = item.count_index
        self.distinct = item.concat_distinct
        order = item.concat_order or (OrderItem(self.value_index),)
        self.sort_key = order_key(order, columns, weights, truncate=False)
        self.equal_key = equality_key((self.value_index,), columns, weights)
        self.budget = budget

    def initial(self) -> list[Any]:
        return [None, {} if self.distinct else []]  # [(max_len, charset) or None, values]

    def add(self, state: list[Any], row: Row) -> list[Any]:
        v = row[self.value_index]
        if v is None:
            return state
        if self.limit_index is not None:
            limit = _parse_limit(row[self.limit_index])
            if limit is not None:
                max_len, charset, full = limit
                state[0] = (max_len, charset)
                # the node cut (and warned about) its own part: every copy of the value, or one (DISTINCT)
                if (len(v) if self.distinct else full) > max_len and self.warnings is not None:
                    self.warnings.node_cut += 1
        values = state[1]
        if self.distinct:
            k = self.equal_key(row)
            if k not in values:
                self.budget.charge_item("GROUP_CONCAT values", v)
                values[k] = (self.sort_key(row), v, 1)
            return state
        self.budget.charge_item("GROUP_CONCAT values", v)
        values.append((self.sort_key(row), v, int(row[self.count_index] or 1)))
        return state

    def result(self, state: list[Any]) -> bytes | None:
        limit, values = state
        entries = list(values.values()) if self.distinct else values
        self.budget.release(len(entries))
        if not entries:
            return None
        entries.sort(key=lambda e: e[0])
        parts = [v for _, v, n in entries for _ in range(n)]
        joined = self.separator.join(parts)
        if limit is None:
            return joined
        max_len, charset = limit
        if len(self._encoded(joined, charset)) <= max_len:
            return joined
        if self.warnings is not None:
            self.warnings.cut += 1
        return self._cut(joined, max_len, charset)
