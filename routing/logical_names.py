"""The logical view of the actual tables: which physical table shows as which logic table, and which
physical tables stay hidden (the second and later nodes of a sharded table, the copies of a broadcast
table on other data sources). Metadata answers (SHOW TABLES, information_schema) are built from it, so
clients browsing a sharded database see t_order once and never t_order_0 .. t_order_3."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from routing.model import DatabaseRules


class LogicalNames:
    def __init__(self, rules: DatabaseRules, tables_by_source: Mapping[str, Sequence[str]]) -> None:
        """`tables_by_source`: data source -> the physical tables it holds (any case)."""
        self.rules = rules
        self._view: dict[tuple[str, str], str | None] = {}
        self._actual: dict[tuple[str, str], str] = {}
        self.tables: list[str] = []
        sharding = rules.sharding
        seen: set[str] = set()
        if sharding is not None:
            for rule in sharding.tables.values():
                for i, node in enumerate(rule.data_nodes):
                    key = (node.data_source, node.table.lower())
                    self._view[key] = rule.logic_table if i == 0 else None
                    self._actual.setdefault((node.data_source, rule.logic_table.lower()), node.table)
                self.tables.append(rule.logic_table)
                seen.add(rule.logic_table.lower())
        first = rules.data_sources[0] if rules.data_sources else None
        for name in sorted(rules.broadcast.tables):
            for ds in rules.data_sources:
                self._view[(ds, name)] = name if ds == first else None
            if name not in seen:
                self.tables.append(name)
                seen.add(name)
        for ds in rules.data_sources:
            for table in tables_by_source.get(ds, ()):
                key = (ds, table.lower())
                if key in self._view:
                    continue
                self._view[key] = table
                if table.lower() not in seen:
                    self.tables.append(table)
                    seen.add(table.lower())
        self.tables.sort(key=str.lower)

    def view(self, data_source: str, table: str) -> str | None:
        """The name a physical table shows as, or None when it is hidden."""
        return self._view.get((data_source, table.lower()), table)

    def actual(self, data_source: str, logic_table: str) -> str | None:
        """The physical table standing for a logic table on a data source (for rewriting metadata
        queries), or None when the logic table has no node there."""
        found = self._actual.get((data_source, logic_table.lower()))
        if found is not None:
            return found
        if logic_table.lower() in self.rules.broadcast:
            return logic_table
        return None
