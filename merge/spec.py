"""How to merge the result streams of several route units into what one database would return.

The kernel builds a `MergeSpec` from the logic SELECT while rewriting it (adding derived columns, rewriting
pagination); `merge` executes it over the node streams. Column indexes refer to the columns each node
returns (the rewritten select list, derived columns included).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class AggregateKind(enum.Enum):
    COUNT = "COUNT"
    SUM = "SUM"
    MIN = "MIN"
    MAX = "MAX"
    AVG = "AVG"  # merged from derived SUM and COUNT columns
    COUNT_DISTINCT = "COUNT_DISTINCT"
    SUM_DISTINCT = "SUM_DISTINCT"
    GROUP_CONCAT = "GROUP_CONCAT"
    BIT_XOR = "BIT_XOR"
    BIT_OR = "BIT_OR"
    BIT_AND = "BIT_AND"
    AVG_DISTINCT = "AVG_DISTINCT"  # the distinct values' SUM / COUNT (merge.distinct)


@dataclass(frozen=True)
class OrderItem:
    index: int  # column index in the node rows
    descending: bool = False


@dataclass(frozen=True)
class AggregateItem:
    kind: AggregateKind
    index: int  # the column that carries the merged value in output rows
    sum_index: int | None = None  # AVG: derived SUM column
    count_index: int | None = None  # AVG: derived COUNT column
    separator: str = ","  # GROUP_CONCAT
    distinct_index: int | None = None  # COUNT/SUM(DISTINCT x): column carrying x per distinct value
    limit_index: int | None = None  # GROUP_CONCAT: column carrying '<group_concat_max_len>:<result charset>'
    distinct_more: tuple[int, ...] = ()  # COUNT(DISTINCT a, b, ...): the columns of b, ... (a: distinct_index)
    # GROUP_CONCAT finished in the proxy (merge.concat): value in distinct_index, its row count in count_index
    concat_order: tuple[OrderItem, ...] = ()
    concat_distinct: bool = False


@dataclass(frozen=True)
class MergeSpec:
    visible_columns: int  # columns sent to the client; the rest are derived and dropped
    order_by: tuple[OrderItem, ...] = ()
    group_by: tuple[int, ...] = ()  # column indexes
    aggregates: tuple[AggregateItem, ...] = ()
    distinct: bool = False
    offset: int = 0
    limit: int | None = None  # rows after offset; None = all
    having_sql: str | None = None  # HAVING to evaluate after merging (references output columns by name)
    groups_sorted: bool = False  # True when nodes return rows ordered by the group columns (stream merge)
    # (value column, its hidden WEIGHT_STRING column): text keys compare by the nodes' own weights
    # (merge.weights); the weight columns come after every other column, so rows whose weights are not
    # needed (the key turned out not to be text) need not decode them (see `pipeline.decoded_width`)
    weights: tuple[tuple[int, int], ...] = ()
    with_ties: bool = False  # FETCH ... WITH TIES: after `limit` rows, the rows that tie with the last one
    having_bindings: tuple[tuple[str, int], ...] = ()  # HAVING name (normalized SQL) -> column index
    # HAVING text comparisons with a string literal: (the comparison's normalized SQL, the text value's
    # column, the column carrying the literal's weight under that value's collation)
    having_weights: tuple[tuple[str, int, int], ...] = ()
    # SQL_CALC_FOUND_ROWS with pagination: "count" — the merge counts the rows before pagination (the nodes
    # return all their rows); "window" — each node's rows carry its count in `found_rows_index`
    found_rows: str | None = None
    found_rows_index: int | None = None
    # select items computed after the merge from merged aggregates (merge.compute): (column index, the
    # expression over ``__c<N>`` names of columns), and the column carrying @@div_precision_increment
    computed: tuple[tuple[int, str], ...] = ()
    increment_index: int | None = None
    rollup: bool = False  # GROUP BY ... WITH ROLLUP: super-aggregate rows after the merge (merge.rollup)
    # at most this many rows come from each node, by the rewritten statement itself: 1 for aggregates without a
    # GROUP BY on the nodes, offset + count when the nodes keep the pagination (LIMIT / FETCH without WITH TIES);
    # None when the rewrite guarantees no bound (the proxy may hold a node's rows whole only within it)
    node_rows: int | None = None

    @property
    def needs_decoding(self) -> bool:
        return bool(self.order_by or self.group_by or self.aggregates or self.distinct)


@dataclass(frozen=True)
class ColumnMeta:
    """What the merge engine needs from a column definition to compare and format values like MySQL.

    `type_code` is MySQL's numeric column type (MYSQL_TYPE_*), `charset` the collation id from the column
    definition (63 = binary), `flags` the column flags (UNSIGNED=32, BINARY=128, ...), `decimals` the
    scale (31 = not fixed, e.g. a plain DOUBLE); the codes are `protocol.constants.ColumnType` and
    `ColumnFlag`. Servers put the result character set's default collation in the column definition,
    not the column's own; a text column with a ``_bin`` collation is recognised by BINARY=128. A caller
    that knows the column's real collation id may put it in `charset` for closer ordering.
    """

    name: str
    type_code: int
    charset: int = 45
    flags: int = 0
    decimals: int = 0
