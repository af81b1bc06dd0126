"""Rows for the DistSQL statements users know from ShardingSphere (the proxy sends them as result sets).

Pure functions of a `RoutedStatement` or of `DatabaseRules`; the proxy recognizes the statements and calls
these to build rows, so PREVIEW shows exactly what the kernel would execute.
"""

from __future__ import annotations

from routing.model import ComplexStrategy, DatabaseRules, HintStrategy, ShardingStrategy, StandardStrategy
from routing.plan import RoutedStatement

PREVIEW_COLUMNS = ("data_source_name", "actual_sql")
TABLE_RULE_COLUMNS = (
    "table",
    "actual_data_nodes",
    "actual_data_sources",
    "database_strategy_type",
    "database_sharding_column",
    "database_sharding_algorithm_type",
    "table_strategy_type",
    "table_sharding_column",
    "table_sharding_algorithm_type",
    "key_generate_column",
    "key_generator_type",
)
TABLE_NODE_COLUMNS = ("name", "nodes")


def preview_rows(routed: RoutedStatement) -> list[tuple[str, str]]:
    """``PREVIEW <sql>``: one row per execution unit."""
    return [(u.data_source, u.sql) for u in routed.execution_units]


def _strategy(strategy: ShardingStrategy) -> tuple[str, str, str]:
    if isinstance(strategy, StandardStrategy):
        return "STANDARD", strategy.column, strategy.algorithm_name
    if isinstance(strategy, ComplexStrategy):
        return "COMPLEX", ",".join(strategy.columns), strategy.algorithm_name
    if isinstance(strategy, HintStrategy):
        return "HINT", "", strategy.algorithm_name
    return "NONE", "", ""


def table_rule_rows(rules: DatabaseRules, table: str | None = None) -> list[tuple[str, ...]]:
    """``SHOW SHARDING TABLE RULES [FROM db]`` / ``SHOW SHARDING TABLE RULE t``."""
    if rules.sharding is None:
        return []
    rows = []
    for name, rule in rules.sharding.tables.items():
        if table is not None and name != table.lower():
            continue
        db = _strategy(rule.database_strategy)
        tb = _strategy(rule.table_strategy)
        key = rule.key_generate
        rows.append(
            (
                rule.logic_table,
                "" if rule.auto else ",".join(str(n) for n in rule.data_nodes),
                ",".join(rule.data_sources) if rule.auto else "",
                *db,
                *tb,
                key.column if key else "",
                key.generator_name if key else "",
            )
        )
    return rows


def table_node_rows(rules: DatabaseRules, table: str | None = None) -> list[tuple[str, str]]:
    """``SHOW SHARDING TABLE NODES [t]``: the data nodes of each table, comma separated."""
    if rules.sharding is None:
        return []
    return [
        (rule.logic_table, ", ".join(str(n) for n in rule.data_nodes))
        for name, rule in rules.sharding.tables.items()
        if table is None or name == table.lower()
    ]
