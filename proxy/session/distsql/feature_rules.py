"""SHOW MASK RULES and SHOW SHADOW RULES: ShardingSphere 5.5's columns and rows (`ShowMaskRuleExecutor`,
`ShowShadowRuleExecutor`), from the rules in use. Props are shown as the other RQL shows them (rules.props_text)."""

from __future__ import annotations

from proxy.session.distsql.rules import props_text
from routing.model import DatabaseRules

MASK_COLUMNS = ("table", "column", "algorithm_type", "algorithm_props")
SHADOW_COLUMNS = ("shadow_table", "rule_name", "source_name", "shadow_name", "algorithm_type", "algorithm_props")

Row = tuple[object, ...]


def mask_rule_rows(rules: DatabaseRules, table: str | None = None) -> list[Row]:
    """One row per masked column, tables in file order; `table`: that table's only (SHOW MASK RULE t)."""
    rule = rules.mask
    if rule is None:
        return []
    return [
        (c.table, c.column, c.algorithm.type, props_text(c.algorithm.props))
        for c in rule.columns.values()
        if table is None or c.table.lower() == table.lower()
    ]


def shadow_rule_rows(rules: DatabaseRules, name: str | None = None) -> list[Row]:
    """Per shadow data source (`name`: that one only), per table naming it, per algorithm of that table."""
    rule = rules.shadow
    if rule is None:
        return []
    rows: list[Row] = []
    for source, (production, shadow) in rule.data_sources.items():
        if name and source.lower() != name.lower():
            continue
        for table in rule.tables.values():
            if source not in table.data_sources:
                continue
            rows += [(table.name, source, production, shadow, a.type, props_text(a.props)) for a in table.algorithms]
    return rows


__all__ = ["MASK_COLUMNS", "SHADOW_COLUMNS", "mask_rule_rows", "shadow_rule_rows"]
