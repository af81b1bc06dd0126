"""A seeded random generator of SELECT statements for the differential suite (`test_differential.py`).

It combines the constructs issue 13 found wrong answers in with the ones around them: row-local
expressions and aliases, aggregates (merged and not), window functions, subqueries of every kind (EXISTS,
NOT EXISTS, IN, ALL, SOME, scalar; correlated on the binding key or not; over sharded and broadcast
tables), joins (binding, broadcast, outer joins with the broadcast table on either side), GROUP BY /
HAVING / ORDER BY / LIMIT (``LIMIT o, 18446744073709551615`` too) and DISTINCT, with sharding conditions
that route to one node, a few, or all. Every statement must get the oracle's answer through the proxy or
a 1235 refusal, never another answer. Since issue 17 it also emits what only federation answers (joins not
on the sharding columns, self joins, derived tables, set operations, CTEs, aggregates the merge lacks).

Only deterministic statements are generated: an ORDER BY either ends with a unique key of the rows (the
statement is then ``ordered``: rows compared as lists) or the rows are compared as multisets; LIMIT only
follows an ordering that determines the rows; grouped statements select their group keys and aggregates
only; no aggregate or window depends on the order of equal rows; strings compared under a ``_ci``
collation are not grouped, made DISTINCT or taken MIN/MAX of (which spelling answers depends on scan order).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BIG = "18446744073709551615"


@dataclass(frozen=True)
class Generated:
    sql: str
    ordered: bool  # the ORDER BY determines the order of the rows


@dataclass(frozen=True)
class Source:
    text: str
    aliases: tuple[str, ...]
    key: tuple[str, ...]  # columns unique over the joined rows (for a total ORDER BY)
    shape: str  # plain | outer_broadcast | broadcast


SOURCES = (
    Source("t_order o", ("o",), ("o.order_id",), "plain"),
    Source("t_order o JOIN t_order_item i ON i.order_id = o.order_id", ("o", "i"), ("i.order_item_id",), "plain"),
    Source("t_order o LEFT JOIN t_order_item i ON i.order_id = o.order_id", ("o", "i"),
           ("o.order_id", "i.order_item_id"), "plain"),
    Source("t_order o JOIN t_address a ON a.user_id = o.user_id", ("o", "a"), ("o.order_id", "a.address_id"), "plain"),
    Source("t_order o LEFT JOIN t_address a ON a.address_id = o.user_id", ("o", "a"), ("o.order_id",), "plain"),
    Source("t_address a LEFT JOIN t_order o ON o.user_id = a.user_id", ("a", "o"),
           ("a.address_id", "o.order_id"), "outer_broadcast"),
    Source("t_order o RIGHT JOIN t_address a ON o.user_id = a.user_id AND o.amount > 500", ("a", "o"),
           ("a.address_id", "o.order_id"), "outer_broadcast"),
    Source("t_address a", ("a",), ("a.address_id",), "broadcast"),
    # joins that do not run node by node (answered by federation): tables not joined on their sharding
    # columns, a self join, a derived table
    Source("t_order o JOIN t_order_item i ON i.user_id = o.user_id AND i.qty = 9", ("o", "i"),
           ("o.order_id", "i.order_item_id"), "plain"),
    Source("t_order o JOIN t_order p ON p.created = o.created AND p.order_id <> o.order_id", ("o",),
           ("o.order_id", "p.order_id"), "plain"),
    Source("(SELECT order_id, user_id, status, amount, price, created, note FROM t_order WHERE amount > 0) o", ("o",),
           ("o.order_id",), "plain"),
)

ROW_ITEMS = {
    "o": ("o.order_id", "o.user_id", "o.amount", "o.price", "o.created", "o.status", "o.note", "o.amount * 2",
          "o.user_id % 7", "COALESCE(o.amount, 0)", "CONCAT(o.status, '#', o.user_id)", "UPPER(o.note)",
          "CASE WHEN o.amount > 100 THEN 'big' WHEN o.amount < 0 THEN 'neg' ELSE 'small' END", "DATE(o.created)",
          "YEAR(o.created)", "ROUND(o.price / 3, 2)", "IFNULL(o.note, '-')", "LENGTH(o.note)",
          "o.price + o.user_id", "ABS(o.amount)", "LEAST(o.user_id, 10)", "FIELD(o.user_id, 1, 2, 3)",
          "CRC32(o.order_id)", "DATE_FORMAT(o.created, '%Y-%m')", "o.amount IS NULL",
          "IF(o.price > 500, o.price, NULL)", "CAST(o.user_id AS CHAR)", "o.order_id DIV 10"),
    "i": ("i.order_item_id", "i.qty", "i.unit_price", "i.sku", "i.qty * i.unit_price", "i.qty + 1",
          "COALESCE(i.unit_price, -1)"),
    "a": ("a.address_id", "a.user_id", "a.city", "a.address_name", "LOWER(a.city)", "a.address_id % 4"),
}
# group keys: no _ci strings (the spelling a group answers with depends on scan order)
GROUP_KEYS = {
    "o": ("o.user_id", "o.user_id % 3", "DATE(o.created)", "o.order_id % 5", "YEAR(o.created)",
          "o.amount IS NULL", "CASE WHEN o.amount > 100 THEN 1 ELSE 0 END"),
    "i": ("i.qty", "i.user_id"),
    "a": ("a.address_id", "a.user_id % 5"),
}
AGGREGATES = {
    "o": ("COUNT(*)", "COUNT(o.note)", "SUM(o.amount)", "MIN(o.amount)", "MAX(o.created)", "AVG(o.amount)",
          "AVG(o.price)", "SUM(o.price)", "COUNT(DISTINCT o.user_id)", "MAX(o.order_id)", "BIT_OR(o.user_id)",
          "BIT_XOR(o.order_id)", "MIN(o.price)", "COUNT(o.order_id)", "SUM(o.user_id)",
          # computed after the merge from merged aggregates (issue 17)
          "SUM(o.amount) + 1", "IFNULL(SUM(o.amount), 0)", "ROUND(AVG(o.amount), 2)", "SUM(o.amount) / COUNT(*)",
          "MAX(o.amount) - MIN(o.amount)", "COUNT(*) * 2 - MIN(o.user_id) % 5", "COALESCE(MAX(o.price), -1)",
          "COUNT(DISTINCT o.user_id) + 1", "SUM(DISTINCT o.amount) / COUNT(DISTINCT o.amount)",
          "AVG(DISTINCT o.user_id)", "COUNT(DISTINCT o.user_id, o.amount)",
          "GROUP_CONCAT(DISTINCT o.user_id % 7 ORDER BY o.user_id % 7 DESC)",
          # not merged: answered by federation (one MariaDB over copies of the rows); written so that their
          # value does not depend on the order rows are read in: a float variance's last bits do, so it is
          # rounded, and divided by 7 first (prices are multiples of 0.25: a variance can sit exactly on a
          # rounding boundary)
          "JSON_ARRAYAGG(o.order_id ORDER BY o.order_id)", "ROUND(STDDEV_POP(o.amount), 6)",
          "ROUND(VARIANCE(o.price) / 7, 6)"),
    "i": ("SUM(i.qty)", "COUNT(i.order_item_id)", "MIN(i.unit_price)", "MAX(i.qty)", "AVG(i.qty)",
          "SUM(i.qty) / COUNT(*)", "ROUND(AVG(i.unit_price), 1)", "IF(MAX(i.qty) > 5, 'big', 'small')"),
    "a": ("MIN(a.address_id)", "MAX(a.address_id)", "COUNT(DISTINCT a.address_id)", "SUM(a.address_id)"),
}
# window functions: ordered by the source's unique key ({key}), so that ties cannot decide a value
WINDOWS = ("ROW_NUMBER() OVER (ORDER BY {key})", "SUM(o.amount) OVER (PARTITION BY o.user_id)",
           "RANK() OVER (PARTITION BY o.user_id ORDER BY {key})", "COUNT(*) OVER ()",
           "LAG(o.order_id) OVER (ORDER BY {key})", "DENSE_RANK() OVER (ORDER BY o.user_id)",
           "LEAD(o.amount, 2) OVER (PARTITION BY o.user_id ORDER BY {key})",
           "SUM(o.user_id) OVER (ORDER BY {key} ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)")
SUBQUERIES = (
    # correlated on order_id alone (federated since issue 33: an item may have another user_id than its order)
    "EXISTS (SELECT 1 FROM t_order_item x WHERE x.order_id = o.order_id)",
    "NOT EXISTS (SELECT 1 FROM t_order_item x WHERE x.order_id = o.order_id AND x.qty > 5)",
    "NOT EXISTS (SELECT 1 FROM t_order_item x WHERE x.order_id = o.order_id AND x.user_id = {u})",
    "o.amount > ALL (SELECT x.unit_price FROM t_order_item x WHERE x.order_id = o.order_id "
    "AND x.unit_price IS NOT NULL)",
    "o.order_id = SOME (SELECT x.order_id FROM t_order_item x WHERE x.order_id = o.order_id AND x.qty >= 4)",
    "(SELECT COUNT(*) FROM t_order_item x WHERE x.order_id = o.order_id) > 1",
    # a broadcast table: on every data source, pushed down
    "o.user_id IN (SELECT a2.user_id FROM t_address a2 WHERE a2.city = 'Paris')",
    "EXISTS (SELECT 1 FROM t_address a2 WHERE a2.address_id = o.user_id AND a2.city IS NOT NULL)",
    # not co-located: refused over several nodes (each node would see only its own rows)
    "EXISTS (SELECT 1 FROM t_order_item x WHERE x.user_id = o.user_id AND x.qty = 9)",
    "NOT EXISTS (SELECT 1 FROM t_order_item x WHERE x.user_id = o.user_id AND x.qty = 9)",
    "o.amount > ALL (SELECT x.unit_price FROM t_order_item x WHERE x.qty = 9 AND x.unit_price IS NOT NULL)",
    "o.order_id = SOME (SELECT x.order_id FROM t_order_item x WHERE x.qty >= 8)",
    "o.user_id IN (SELECT x.user_id FROM t_order x WHERE x.amount > 900)",
)
BROADCAST_SUBQUERIES = (
    "EXISTS (SELECT 1 FROM t_order x WHERE x.user_id = a.user_id AND x.amount > 500)",
    "a.user_id IN (SELECT x.user_id FROM t_order x WHERE x.status = 'paid')",
    "EXISTS (SELECT 1 FROM t_order x WHERE x.user_id = {u} AND x.order_id = {oid} AND x.user_id = a.user_id)",
)
FILTERS = {
    "o": ("o.amount > {amount}", "o.status = 'paid'", "o.note IS NULL", "o.price BETWEEN 10 AND 500",
          "o.created >= '2024-02-01'", "o.amount < 0 OR o.price > 900", "o.note LIKE 'g%'"),
    "i": ("i.qty > 5", "i.unit_price IS NOT NULL"),
    "a": ("a.city = 'paris'", "a.address_id < 30", "a.city IS NULL"),
}


class StatementGenerator:
    def __init__(self, seed: int, orders: Sequence[tuple[Any, ...]]) -> None:
        self.rng = random.Random(seed)
        self.orders = list(orders)  # (order_id, user_id, ...)

    def choice(self, options: Sequence[Any]) -> Any:
        return self.rng.choice(options)

    def maybe(self, p: float) -> bool:
        return self.rng.random() < p

    def statement(self) -> Generated:
        kind = self.rng.random()
        if kind < 0.12:
            return self.set_operation()
        if kind < 0.2:
            return self.cte()
        source = self.choice(SOURCES)
        if source.shape == "outer_broadcast" and self.maybe(0.6):
            return self.grouped(source, keys_from="a")
        if source.shape == "broadcast":
            return self.plain(source, where=self.broadcast_where())
        roll = self.rng.random()
        if roll < 0.45:
            return self.plain(source, where=self.where(source))
        if roll < 0.85:
            return self.grouped(source, keys_from=self.choice(source.aliases))
        return self.aggregate_only(source)

    # -- WHERE --

    def routing_condition(self) -> str | None:
        order = self.choice(self.orders)
        return self.choice((
            None, None,
            f"o.user_id = {order[1]}",
            f"o.user_id IN ({order[1]}, {self.rng.randint(1, 50)})",
            f"o.user_id = {order[1]} AND o.order_id = {order[0]}",  # one data node
            f"o.order_id = {order[0]}",
            f"o.user_id BETWEEN {order[1]} AND {order[1] + 3}",
        ))

    def where(self, source: Source) -> str:
        parts: list[str] = []
        routing = self.routing_condition()
        if routing is not None and "o" in source.aliases and source.shape == "plain":
            parts.append(routing)
        for _ in range(self.rng.choice((0, 1, 1, 2))):
            alias = self.choice(source.aliases)
            parts.append(self.choice(FILTERS[alias]).format(amount=self.rng.choice((0, 100, 500, 900))))
        if "o" in source.aliases and source.shape == "plain" and self.maybe(0.45):
            order = self.choice(self.orders)
            parts.append(self.choice(SUBQUERIES).format(u=order[1], oid=order[0]))
        return " AND ".join(f"({p})" if " OR " in p else p for p in parts)

    def broadcast_where(self) -> str:
        parts = []
        if self.maybe(0.5):
            parts.append(self.choice(FILTERS["a"]))
        if self.maybe(0.7):
            order = self.choice(self.orders)
            parts.append(self.choice(BROADCAST_SUBQUERIES).format(u=order[1], oid=order[0]))
        return " AND ".join(parts)

    # -- statements --

    def plain(self, source: Source, where: str) -> Generated:
        items = [self.choice(ROW_ITEMS[self.choice(source.aliases)]) for _ in range(self.rng.randint(1, 4))]
        if "o" in source.aliases and self.maybe(0.15):
            items.append(self.choice(WINDOWS).format(key=", ".join(source.key)))
        items = list(dict.fromkeys(items))
        distinct = self.maybe(0.15) and not any(_ci(i) for i in items) and not any("OVER" in i for i in items)
        select = [f"{item} AS c{n}" if self.maybe(0.5) else item for n, item in enumerate(items)]
        sql = f"SELECT {'DISTINCT ' if distinct else ''}{', '.join(select)} FROM {source.text}"
        if where:
            sql += f" WHERE {where}"
        ordered = False
        if distinct:
            if self.maybe(0.6):
                sql += " ORDER BY " + ", ".join(f"{i + 1}" if self.maybe(0.5) else items[i] for i in range(len(items)))
                ordered = True  # DISTINCT rows are unique: ordering by all of them determines the order
        elif self.maybe(0.6):
            lead = [self.choice(ROW_ITEMS[self.choice(source.aliases)]) for _ in range(self.rng.randint(0, 2))]
            lead = [f"{c}{' DESC' if self.maybe(0.3) else ''}" for c in lead]
            sql += " ORDER BY " + ", ".join([*lead, *source.key])
            ordered = True
        if ordered and self.maybe(0.4):
            sql += self.limit()
        return Generated(sql, ordered)

    def grouped(self, source: Source, keys_from: str) -> Generated:
        keys = list(dict.fromkeys(self.choice(GROUP_KEYS[keys_from]) for _ in range(self.rng.randint(1, 2))))
        aggs = list(dict.fromkeys(self.choice(AGGREGATES[self.choice(source.aliases)])
                                  for _ in range(self.rng.randint(1, 3))))
        select = [f"{k} AS k{n}" for n, k in enumerate(keys)] + [f"{a} AS v{n}" for n, a in enumerate(aggs)]
        sql = f"SELECT {', '.join(select)} FROM {source.text}"
        where = self.where(source) if source.shape == "plain" else (
            self.choice(FILTERS["a"]) if self.maybe(0.3) else "")
        if where:
            sql += f" WHERE {where}"
        style = self.rng.random()
        group_by = [f"k{n}" if style < 0.4 else (str(n + 1) if style < 0.6 else k) for n, k in enumerate(keys)]
        sql += " GROUP BY " + ", ".join(group_by)
        rollup = self.maybe(0.15)  # super-aggregate rows after the merge (issue 17); MariaDB: no ORDER BY then
        if rollup:
            sql += " WITH ROLLUP"
        if self.maybe(0.3):
            sql += " HAVING " + self.choice(("COUNT(*) > 2", "v0 IS NOT NULL", "COUNT(*) BETWEEN 1 AND 60",
                                             f"k0 IS NOT NULL AND COUNT(*) > {self.rng.randint(1, 40)}"))
        ordered = False
        if not rollup and self.maybe(0.7):
            lead = ["v0 DESC"] if self.maybe(0.3) and not _unordered_agg(aggs[0]) else []
            sql += " ORDER BY " + ", ".join([*lead, *(f"k{n}" for n in range(len(keys)))])
            ordered = True  # the group keys are unique per group
            if self.maybe(0.4):
                sql += self.limit()
        return Generated(sql, ordered)

    def aggregate_only(self, source: Source) -> Generated:
        aggs = list(dict.fromkeys(self.choice(AGGREGATES[self.choice(source.aliases)])
                                  for _ in range(self.rng.randint(1, 4))))
        sql = f"SELECT {', '.join(aggs)} FROM {source.text}"
        where = self.where(source)
        if where:
            sql += f" WHERE {where}"
        return Generated(sql, True)

    def set_operation(self) -> Generated:
        """UNION [ALL] / INTERSECT / EXCEPT of sharded tables, ORDER BY / LIMIT of the whole."""
        op = self.choice(("UNION", "UNION ALL", "INTERSECT", "EXCEPT"))
        left = f"SELECT o.user_id, o.order_id FROM t_order o WHERE {self.choice(FILTERS['o']).format(amount=500)}"
        right = f"SELECT i.user_id, i.order_id FROM t_order_item i WHERE {self.choice(FILTERS['i'])}"
        if self.maybe(0.5):
            left += f" AND o.user_id < {self.rng.randint(5, 50)}"
        sql = f"{left} {op} {right}"
        if self.maybe(0.7):  # equal rows are indistinguishable: ordering by every column determines the list
            sql += " ORDER BY " + self.choice(("1, 2", "user_id DESC, order_id", "2 DESC, 1"))
            return Generated(sql + (self.limit() if self.maybe(0.4) else ""), True)
        return Generated(sql, False)

    def cte(self) -> Generated:
        """A CTE (or a recursive one) over a sharded table, read once or twice."""
        where = self.choice(FILTERS["o"]).format(amount=self.rng.choice((0, 100, 500)))
        body = f"SELECT o.user_id, COUNT(*) AS n, SUM(o.amount) AS s FROM t_order o WHERE {where} GROUP BY o.user_id"
        shape = self.rng.random()
        if shape < 0.4:
            sql = f"WITH c AS ({body}) SELECT c.user_id, c.n, c.s FROM c WHERE c.n > {self.rng.randint(0, 30)}"
        elif shape < 0.7:
            sql = (f"WITH c AS ({body}) SELECT a.user_id, a.n, b.n FROM c a JOIN c b ON b.user_id = a.user_id + 1 "
                   f"WHERE a.n >= b.n")
        else:
            sql = (f"WITH RECURSIVE r (k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM r WHERE k < "
                   f"{self.rng.randint(3, 55)}) SELECT r.k, COUNT(o.order_id) FROM r LEFT JOIN t_order o "
                   f"ON o.user_id = r.k AND {where} GROUP BY r.k")
            return Generated(sql + " ORDER BY r.k", True)
        if self.maybe(0.6):
            return Generated(sql + " ORDER BY 1", True)  # one row per user_id
        return Generated(sql, False)

    def limit(self) -> str:
        n, o = self.rng.randint(0, 40), self.rng.randint(0, 60)
        return self.choice((f" LIMIT {n}", f" LIMIT {o}, {n}", f" LIMIT {n} OFFSET {o}", f" LIMIT {o}, {BIG}"))


def _ci(item: str) -> bool:
    """Reads a _ci string column (its DISTINCT / GROUP BY spelling depends on scan order)."""
    return any(c in item for c in ("status", "note", "sku", "city", "address_name"))


def _unordered_agg(agg: str) -> bool:
    return agg.startswith(("JSON_ARRAYAGG", "STDDEV", "VARIANCE"))
