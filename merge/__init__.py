"""Merge engine: combines the result sets of several route units into what one server would return.

No I/O of its own: the proxy hands in node row streams (raw text-protocol values), a `MergeSpec` and
the column metadata, and re-encodes the rows that come out.
"""

from merge.errors import MergeError, MergeMemoryError
from merge.pipeline import MergePlan, merge_rows, merge_rows_sync, plan_merge
from merge.spec import AggregateItem, AggregateKind, ColumnMeta, MergeSpec, OrderItem

__all__ = [
    "AggregateItem",
    "AggregateKind",
    "ColumnMeta",
    "MergeError",
    "MergeMemoryError",
    "MergePlan",
    "MergeSpec",
    "OrderItem",
    "merge_rows",
    "merge_rows_sync",
    "plan_merge",
]
