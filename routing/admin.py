"""Rows for the DistSQL statements users know from ShardingSphere (the proxy sends them as result sets).

Pure functions of a `RoutedStatement` or of `DatabaseRules`; the proxy recognizes the statements and calls
these to build rows, so PREVIEW shows exactly what the kernel would execute.
"""

from __future__ import annotations

import json

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
    "database_sharding_algorithm_props",
    "table_strategy_type",
    "table_sharding_column",
    "table_sharding_algorithm_type",
    "table_sharding_algorithm_props",
    "key_generate_column",
    "key_generator_type",
    # the resharding window (routing.model.DualRouting): empty when the table has none
    "old_database_strategy_type",
    "old_database_sharding_column",
    "old_database_sharding_algorithm_type",
    "old_table_strategy_type",
    "old_table_sharding_column",
    "old_table_sharding_algorithm_type",
    "dual_routing_key_column",
    "dual_routing_version_column",
)
TABLE_NODE_COLUMNS = ("name", "nodes")


def preview_rows(routed: RoutedStatement) -> list[tuple[str, str]]:
    """``PREVIEW <sql>``: one row per execution unit."""
    return [(u.data_source, u.sql) for u in routed.execution_units]


def _algorithm_type(algorithm: object, fallback_suffix: str = "") -> str:
    return str(getattr(algorithm, "type_name", "") or type(algorithm).__name__.removesuffix(fallback_suffix).upper())


def _props(algorithm: object) -> str:
    props = getattr(algorithm, "props", None) or {}
    return json.dumps(props, default=str) if props else ""


def _strategy(strategy: ShardingStrategy) -> tuple[str, str, str, str]:
    """(type, sharding column, algorithm type, algorithm props) as ShardingSphere prints them."""
    if isinstance(strategy, StandardStrategy):
        return "STANDARD", strategy.column, _algorithm_type(strategy.algorithm), _props(strategy.algorithm)
    if isinstance(strategy, ComplexStrategy):
        return "COMPLEX", ",".join(strategy.columns), _algorithm_type(strategy.algorithm), _props(strategy.algorithm)
    if isinstance(strategy, HintStrategy):
        return "HINT", "", _algorithm_type(strategy.algorithm), _props(strategy.algorithm)
    return "NONE", "", "", ""


def table_rule_rows(rules: DatabaseRules, table: str | None = None) -> list[tuple[str, ...]]:
    """``SHOW SHARDING TABLE RULES [FROM db]`` / ``SHOW SHARDING TABLE RULE t``."""
    if rules.sharding is None:
        return []
    rows = []
    for name, rule in rules.sharding.tables.items():
        if table is not None and name != table.lower():
            continue
        key = rule.key_generate
        window = rule.window
        if window is None:
            old: tuple[str, ...] = ("",) * 8
        else:
            old = (*_strategy(window.database_strategy)[:3], *_strategy(window.table_strategy)[:3],
                   window.key_column or "(primary key)", window.version_column or "")
        rows.append(
            (
                rule.logic_table,
                "" if rule.auto else ", ".join(str(n) for n in rule.data_nodes),
                ", ".join(rule.data_sources),
                *_strategy(rule.database_strategy),
                *_strategy(rule.table_strategy),
                key.column if key else "",
                _algorithm_type(key.generator, "KeyGenerator") if key else "",
                *old,
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
