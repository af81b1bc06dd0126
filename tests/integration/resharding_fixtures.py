"""The seed's order-database expansion, shared by the window tests (test_dual_routing) and the managed
move (test_migration): four data sources, the old strategy pinning every row to `datasource-name`, the new
one placing rows by CONSISTENT_HASH on user_id."""

from __future__ import annotations

SOURCES = ("datasource-name", "datasource-name-1", "datasource-name-2", "datasource-name-3")
RULES = """\
- !SHARDING
  oldDatabaseStrategy:
    standard: {shardingColumn: user_id, shardingAlgorithmName: old_ds}
  defaultDatabaseStrategy:
    standard: {shardingColumn: user_id, shardingAlgorithmName: ring}
  tables:
    t_order_info:
      actualDataNodes: datasource-name.t_order_info, datasource-name-$->{1..3}.t_order_info
      dualRouting: {keyColumn: id, versionColumn: update_time}
  shardingAlgorithms:
    old_ds: {type: INLINE, props: {algorithm-expression: datasource-name}}
    ring: {type: CONSISTENT_HASH}
"""
COLUMNS = "id, user_id, update_time, amount, status"

__all__ = ["COLUMNS", "RULES", "SOURCES"]
