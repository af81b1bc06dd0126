"""The RQL of `!MASK` and `!SHADOW`: ShardingSphere 5.5's columns and rows (`ShowMaskRuleExecutor`,
`ShowShadowRuleExecutor`, `ShowShadowTableRulesExecutor`, `ShowShadowAlgorithmsExecutor`,
`ShowDefaultShadowAlgorithmExecutor`, the `COUNT ... RULE` row builders, `SHOW ... ALGORITHM PLUGINS`), from the
rules in use. Props are shown as the other RQL shows them (rules.props_text).

`SHOW SHADOW TABLE RULE t` answers t's row: ShardingSphere 5.5.2's parser hands the executor the keyword TABLE as
the table's name, so that its answer has a row of NULLs per other table; this is what the statement means.
"""

from __future__ import annotations

from proxy.session.distsql.rules import props_text
from routing.model import DatabaseRules

MASK_COLUMNS = ("table", "column", "algorithm_type", "algorithm_props")
SHADOW_COLUMNS = ("shadow_table", "rule_name", "source_name", "shadow_name", "algorithm_type", "algorithm_props")
SHADOW_TABLE_COLUMNS = ("shadow_table", "shadow_algorithm_name")
SHADOW_ALGORITHM_COLUMNS = ("shadow_algorithm_name", "type", "props", "is_default")
DEFAULT_SHADOW_ALGORITHM_COLUMNS = ("shadow_algorithm_name", "type", "props")
PLUGIN_COLUMNS = ("type", "type_aliases", "description")
# ShardingSphere's SPI files list them in this order (META-INF/services of features/mask/core, features/shadow/core)
_PLUGINS = {
    "MASK": ("MD5", "KEEP_FIRST_N_LAST_M", "KEEP_FROM_X_TO_Y", "MASK_AFTER_SPECIAL_CHARS", "MASK_BEFORE_SPECIAL_CHARS",
             "MASK_FIRST_N_LAST_M", "MASK_FROM_X_TO_Y", "GENERIC_TABLE_RANDOM_REPLACE"),
    "SHADOW": ("SQL_HINT", "REGEX_MATCH", "VALUE_MATCH"),
}  # fmt: skip

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


def shadow_table_rows(rules: DatabaseRules, table: str | None = None) -> list[Row]:
    """Per shadow table (`table`: that one only), its algorithms' names joined by commas."""
    rule = rules.shadow
    if rule is None:
        return []
    return [(t.name, ",".join(a.name for a in t.algorithms)) for t in rule.tables.values()
            if table is None or t.name.lower() == table.lower()]  # fmt: skip


def shadow_algorithm_rows(rules: DatabaseRules) -> list[Row]:
    rule = rules.shadow
    if rule is None:
        return []
    default = rule.default_algorithm.name if rule.default_algorithm is not None else None
    return [(name, a.type, props_text(a.props), "true" if name == default else "false")
            for name, a in rule.algorithms.items()]  # fmt: skip


def default_shadow_algorithm_rows(rules: DatabaseRules) -> list[Row]:
    rule = rules.shadow
    if rule is None or rule.default_algorithm is None:
        return []
    a = rule.default_algorithm
    return [(a.name, a.type, props_text(a.props))]


def count_rows(kind: str, rules: DatabaseRules, database: str) -> list[Row]:
    """COUNT MASK RULE (the masked tables) / COUNT SHADOW RULE (the shadow data sources); no row without the rule."""
    if kind == "MASK":
        return [] if rules.mask is None else [("mask", database, str(len(rules.mask.tables)))]
    return [] if rules.shadow is None else [("shadow", database, str(len(rules.shadow.data_sources)))]


def plugin_rows(kind: str) -> list[Row]:
    """SHOW MASK | SHADOW ALGORITHM PLUGINS: the algorithm types shardproxy implements (all of ShardingSphere's)."""
    return [(t, "", "") for t in _PLUGINS[kind]]


__all__ = [
    "DEFAULT_SHADOW_ALGORITHM_COLUMNS",
    "MASK_COLUMNS",
    "PLUGIN_COLUMNS",
    "SHADOW_ALGORITHM_COLUMNS",
    "SHADOW_COLUMNS",
    "SHADOW_TABLE_COLUMNS",
    "count_rows",
    "default_shadow_algorithm_rows",
    "mask_rule_rows",
    "plugin_rows",
    "shadow_algorithm_rows",
    "shadow_rule_rows",
    "shadow_table_rows",
]
