"""DistSQL recognition (proxy.session.distsql.grammar) and the RQL rows built from a configuration
(proxy.session.distsql.rules): no server needed."""

from __future__ import annotations

import pytest

from proxy.session.distsql import grammar, rules
from proxy.session.statements import classify
from routing.config import load_database_rules, load_yaml


@pytest.mark.parametrize(("sql", "kind", "fields"), [
    ("SHOW SHARDING ALGORITHMS", "show_sharding_algorithms", {}),
    ("show sharding algorithms from `my db`;", "show_sharding_algorithms", {"database": "my db"}),
    ("SHOW SHARDING KEY GENERATORS FROM d", "show_sharding_key_generators", {"database": "d"}),
    ("SHOW DEFAULT SHARDING STRATEGY", "show_default_sharding_strategy", {}),
    ("SHOW SHARDING TABLE REFERENCE RULES FROM d", "show_sharding_table_reference_rules", {"database": "d"}),
    ("SHOW SHARDING TABLE REFERENCE RULE r1", "show_sharding_table_reference_rules", {"name": "r1"}),
    ("SHOW BROADCAST TABLE RULES", "show_broadcast_table_rules", {}),
    ("SHOW SINGLE TABLES LIKE 't\\_%'", "show_single_tables", {"like": "t\\_%"}),
    ("SHOW SINGLE TABLES FROM d LIKE \"x%\"", "show_single_tables", {"database": "d", "like": "x%"}),
    ("SHOW SINGLE TABLE t_user FROM d", "show_single_table", {"name": "t_user", "database": "d"}),
    ("COUNT SHARDING RULE", "count_rule", {"name": "SHARDING"}),
    ("count broadcast rule from d", "count_rule", {"name": "broadcast", "database": "d"}),
    ("COUNT SINGLE TABLE", "count_single_table", {}),
    ("SHOW UNUSED SHARDING ALGORITHMS", "show_unused_sharding_algorithms", {}),
    ("SHOW UNUSED SHARDING KEY GENERATORS FROM d", "show_unused_sharding_key_generators", {"database": "d"}),
    ("SHOW RULES USED STORAGE UNIT ds_0 FROM d", "show_rules_used_storage_unit", {"name": "ds_0", "database": "d"}),
    ("SHOW SHARDING TABLE RULES USED ALGORITHM a1", "show_rules_used_algorithm", {"name": "a1"}),
    ("SHOW SHARDING TABLE RULES USED KEY GENERATOR snow", "show_rules_used_key_generator", {"name": "snow"}),
    ("SHOW DIST VARIABLE WHERE NAME = sql_show", "show_dist_variable", {"name": "sql_show"}),
    ("SHOW DIST VARIABLE WHERE name='sql_show'", "show_dist_variable", {"name": "sql_show"}),
    ("SHOW DIST VARIABLES", "show_dist_variables", {}),
    ("SHOW DIST VARIABLES LIKE 'sql_%'", "show_dist_variables", {"like": "sql_%"}),
    ("SET DIST VARIABLE sql_show = true", "set_dist_variable", {"name": "sql_show", "value": "true"}),
    ("SET DIST VARIABLE 'sql_show'='false';", "set_dist_variable", {"name": "sql_show", "value": "false"}),
    ("SET DIST VARIABLE proxy_statement_timeout_seconds = 2.5", "set_dist_variable", {"value": "2.5"}),
    ("SHOW COMPUTE NODES", "show_compute_nodes", {}),
    ("REFRESH TABLE METADATA", "refresh_table_metadata", {}),
    ("REFRESH TABLE METADATA t_order", "refresh_table_metadata", {"name": "t_order"}),
    ("REFRESH TABLE METADATA FROM STORAGE UNIT ds_1", "refresh_table_metadata", {"storage_unit": "ds_1"}),
    ("REFRESH TABLE METADATA t FROM STORAGE UNIT ds_1 SCHEMA s", "refresh_table_metadata",
     {"name": "t", "storage_unit": "ds_1", "schema": "s"}),
    ("REFRESH DATABASE METADATA", "refresh_database_metadata", {"force": False}),
    ("FORCE REFRESH DATABASE METADATA d", "refresh_database_metadata", {"force": True, "name": "d"}),
    ("EXPORT DATABASE CONFIGURATION", "export_database_configuration", {}),
    ("EXPORT DATABASE CONFIGURATION FROM d TO FILE '/tmp/d.yaml'", "export_database_configuration",
     {"database": "d", "file": "/tmp/d.yaml"}),
    ("SHOW STORAGE UNITS LIKE 'ds%'", "show_storage_units_like", {"like": "ds%"}),
    ("SHOW FULL LOGICAL TABLES FROM d", "show_logical_tables", {"force": True, "database": "d"}),
    ("SHOW ENCRYPT RULES FROM d", "show_encrypt_rules", {"database": "d", "name": None}),
    ("SHOW ENCRYPT TABLE RULE t_user", "show_encrypt_rules", {"name": "t_user"}),
    ("SHOW ENCRYPT RULE `t_user` FROM d", "show_encrypt_rules", {"name": "t_user", "database": "d"}),
    ("COUNT ENCRYPT RULE", "count_rule", {"name": "ENCRYPT"}),
    ("CREATE ENCRYPT RULE t (COLUMNS((NAME=c, CIPHER=c_c, ENCRYPT_ALGORITHM(TYPE(NAME='AES')))))",
     "create_encrypt_rule", {}),
    ("ALTER ENCRYPT RULE t (COLUMNS((NAME=c, CIPHER=c_c, ENCRYPT_ALGORITHM(TYPE(NAME='AES')))))",
     "alter_encrypt_rule", {}),
    ("DROP ENCRYPT RULE IF EXISTS t, u", "drop_encrypt_rule", {}),
    # mask and shadow (features/mask|shadow/distsql/parser of ShardingSphere 5.5.2)
    ("SHOW MASK RULES", "show_mask_rules", {"name": None}),
    ("SHOW MASK TABLE RULE `t_user` FROM d", "show_mask_rules", {"name": "t_user", "database": "d"}),
    ("COUNT MASK RULE FROM d", "count_rule", {"name": "MASK", "database": "d"}),
    ("show mask algorithm plugins", "show_mask_algorithm_plugins", {}),
    ("CREATE MASK RULE t (COLUMNS((NAME=c, TYPE(NAME='MD5'))))", "create_mask_rule", {}),
    ("CREATE MASK TABLE RULE IF NOT EXISTS t (COLUMNS((NAME=c, TYPE(NAME=MD5))))", "create_mask_rule", {}),
    ("ALTER MASK RULE t (COLUMNS((NAME=c, TYPE(NAME='MD5'))));", "alter_mask_rule", {}),
    ("DROP MASK TABLE RULE IF EXISTS t, u", "drop_mask_rule", {}),
    ("SHOW SHADOW RULE shadow_group FROM d", "show_shadow_rules", {"name": "shadow_group", "database": "d"}),
    ("SHOW SHADOW TABLE RULES", "show_shadow_table_rules", {"name": None}),
    ("SHOW SHADOW TABLE RULE t_order FROM d", "show_shadow_table_rules", {"name": "t_order", "database": "d"}),
    ("SHOW SHADOW ALGORITHMS FROM d", "show_shadow_algorithms", {"database": "d"}),
    ("SHOW DEFAULT SHADOW ALGORITHM", "show_default_shadow_algorithm", {}),
    ("SHOW SHADOW ALGORITHM PLUGINS", "show_shadow_algorithm_plugins", {}),
    ("COUNT SHADOW RULE", "count_rule", {"name": "SHADOW"}),
    ("CREATE SHADOW RULE IF NOT EXISTS g (SOURCE=ds, SHADOW=ds_s, t (TYPE(NAME='SQL_HINT')))", "create_shadow_rule",
     {}),
    ("ALTER SHADOW RULE g (SOURCE=ds, SHADOW=ds_s, t (TYPE(NAME='SQL_HINT')))", "alter_shadow_rule", {}),
    ("DROP SHADOW RULE IF EXISTS g, h", "drop_shadow_rule", {}),
    ("DROP SHADOW ALGORITHM IF EXISTS a, b", "drop_shadow_algorithm", {}),
    ("CREATE DEFAULT SHADOW ALGORITHM IF NOT EXISTS TYPE(NAME='SQL_HINT')", "create_default_shadow_algorithm", {}),
    ("ALTER DEFAULT SHADOW ALGORITHM TYPE(NAME=SQL_HINT)", "alter_default_shadow_algorithm", {}),
    ("DROP DEFAULT SHADOW ALGORITHM IF EXISTS;", "drop_default_shadow_algorithm", {}),
])
def test_parse(sql: str, kind: str, fields: dict[str, object]) -> None:
    parsed = grammar.parse(sql)
    assert parsed is not None and parsed.kind == kind
    for key, value in fields.items():
        assert getattr(parsed, key) == value, key
    assert classify(f"/* c */ {sql}") is not None


@pytest.mark.parametrize(("sql", "name"), [
    ("ALTER SQL_PARSER RULE (SQL_STATEMENT_CACHE(INITIAL_CAPACITY=1))", "ALTER SQL_PARSER RULE"),
    ("DROP SHARDING KEY GENERATOR IF EXISTS snowflake", "DROP SHARDING KEY GENERATOR"),
    ("SHOW STATUS FROM READWRITE_SPLITTING RULES", "SHOW STATUS FROM READWRITE_SPLITTING RULES"),
    ("STOP MIGRATION 'j'", "STOP MIGRATION"),  # COMMIT MIGRATION is answered (proxy.migration)
    ("SHOW PLUGINS OF 'x'", "SHOW PLUGINS OF"),
    ("SET DEFAULT SINGLE TABLE STORAGE UNIT = RANDOM", "SET DEFAULT SINGLE TABLE STORAGE UNIT"),
    ("show encrypt algorithm plugins", "SHOW ENCRYPT ALGORITHM PLUGINS"),
    ("SHOW DIST VARIABLES WHERE x", "SHOW DIST VARIABLES"),  # not the grammar: still DistSQL, refused
])
def test_other_distsql_is_named(sql: str, name: str) -> None:
    assert grammar.parse(sql) is None
    assert grammar.looks_like_distsql(sql) == name
    stmt = classify(sql)
    assert stmt is not None and (stmt.kind, stmt.arg) == ("distsql_unsupported", name)


@pytest.mark.parametrize("sql", [
    "SHOW STATUS", "SHOW PLUGINS", "SHOW GLOBAL STATUS", "SHOW TABLE STATUS", "SET NAMES utf8mb4", "SET @a = 1",
    "SET DEFAULT ROLE r TO u", "LOCK TABLES t WRITE", "UNLOCK TABLES", "COMMIT", "ROLLBACK", "START TRANSACTION",
    "CREATE TABLE t (id INT)", "DROP TABLE t", "ALTER TABLE t ADD c INT", "LOAD DATA INFILE 'x' INTO TABLE t",
    "CHECK TABLE t", "SELECT 1", "INSERT INTO t VALUES (1)",
    # issue 18's (XA): left to that work, not claimed here
    "SHOW TRANSACTION RULE", "ALTER TRANSACTION RULE (DEFAULT='XA')",
])
def test_sql_is_not_distsql(sql: str) -> None:
    assert grammar.parse(sql) is None and grammar.looks_like_distsql(sql) is None
    stmt = classify(sql)
    assert stmt is None or not stmt.kind.startswith("distsql")


DOC = """\
databaseName: d
dataSources: {ds_0: {}, ds_1: {}}
rules:
- !SHARDING
  tables:
    t_a:
      actualDataNodes: ds_${0..1}.t_a
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: by_id}}
      keyGenerateStrategy: {column: id, keyGeneratorName: snow}
    t_b:
      actualDataNodes: ds_${0..1}.t_b
  autoTables:
    t_c:
      actualDataSources: ds_1
      shardingStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: mod2}}
  bindingTables:
    - t_a,t_b
    - named:t_a,t_b
  defaultDatabaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: by_id}}
  defaultTableStrategy: {hint: {shardingAlgorithmName: h}}
  shardingAlgorithms:
    by_id: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}', allow-range-query-with-inline-sharding: true}}
    mod2: {type: MOD, props: {sharding-count: 2}}
    h: {type: HINT_INLINE, props: {algorithm-expression: 't_a'}}
    spare: {type: HASH_MOD, props: {sharding-count: 4}}
  keyGenerators:
    snow: {type: SNOWFLAKE}
    spare_uuid: {type: UUID}
  broadcastTables: [t_legacy]
- !BROADCAST
  tables: t_x, t_y
"""


def test_rows_from_a_document() -> None:
    doc = load_yaml(DOC)
    assert rules.sharding_algorithm_rows(doc)[0] == (
        "by_id", "INLINE", '{"algorithm-expression":"ds_${id % 2}","allow-range-query-with-inline-sharding":true}')
    assert rules.unused_algorithm_rows(doc) == [("spare", "HASH_MOD", '{"sharding-count":4}')]
    assert rules.unused_key_generator_rows(doc) == [("spare_uuid", "UUID", "")]
    assert rules.default_strategy_rows(doc) == [
        ("TABLE", "HINT", "", "h", "HINT_INLINE", '{"algorithm-expression":"t_a"}'),
        ("DATABASE", "STANDARD", "id", "by_id", "INLINE",
         '{"algorithm-expression":"ds_${id % 2}","allow-range-query-with-inline-sharding":true}')]
    digest = rules.reference_name("t_a,t_b")
    assert len(digest) == 16 and digest == rules.reference_name("t_a,t_b")
    assert rules.reference_rule_rows(doc) == [(digest, "t_a,t_b"), ("named", "t_a,t_b")]
    assert rules.reference_rule_rows(doc, "NAMED") == [("named", "t_a,t_b")]
    assert rules.broadcast_rows(doc) == [("t_x",), ("t_y",), ("t_legacy",)]
    assert rules.rules_used_algorithm_rows(doc, "by_id") == [("table", "t_a"), ("table", "t_b")]
    assert rules.rules_used_algorithm_rows(doc, "h") == [("table", "t_a"), ("table", "t_b")]
    assert rules.rules_used_algorithm_rows(doc, "mod2") == [("auto_table", "t_c")]
    assert rules.rules_used_key_generator_rows(doc, "snow") == [("table", "t_a")]
    model = load_database_rules(doc)
    assert rules.rules_used_storage_unit_rows(doc, model, "ds_1", {}) == [
        ("sharding", "t_c"), ("sharding", "t_a"), ("sharding", "t_b")]
    assert rules.rules_used_storage_unit_rows(doc, model, "ds_0", {}) == [("sharding", "t_a"), ("sharding", "t_b")]
    assert rules.count_rows("SHARDING", "d", doc, model, 0, 0) == [
        ("sharding_table", "d", "3"), ("sharding_table_reference", "d", "2")]
    assert rules.count_rows("BROADCAST", "d", doc, model, 0, 0) == [("broadcast_table", "d", "3")]
    tables = {"ds_0": ["t_a", "t_b", "t_x", "t_one", "zz"], "ds_1": ["t_a", "t_c_0", "t_c_1", "t_one", "t_two"]}
    assert rules.single_tables(model, tables) == [("t_one", "ds_0"), ("t_two", "ds_1"), ("zz", "ds_0")]


def test_no_sharding_rule_gives_no_rows() -> None:
    doc = load_yaml("databaseName: p\ndataSources: {ds: {}}\n")
    for build in (rules.sharding_algorithm_rows, rules.key_generator_rows, rules.default_strategy_rows,
                  rules.reference_rule_rows, rules.unused_algorithm_rows, rules.broadcast_rows):
        assert build(doc) == []
    assert rules.default_single_storage_unit_rows(doc) == [("RANDOM",)]


@pytest.mark.parametrize(("sql", "kind", "name"), [
    ("MIGRATE TABLE t_order_info", "migrate_table", "t_order_info"),
    ("migrate table `t_order_info` FROM order_db;", "migrate_table", "t_order_info"),
    ("SHOW MIGRATION LIST", "show_migration_list", None),
    ("SHOW MIGRATION STATUS 'j1'", "show_migration_status", "j1"),
    ("SHOW MIGRATION CHECK STATUS 'j1'", "show_migration_check_status", "j1"),
    ("CHECK MIGRATION 'j1'", "check_migration", "j1"),
    ("COMMIT MIGRATION \"j1\"", "commit_migration", "j1"),
    ("ROLLBACK MIGRATION 'j1'", "rollback_migration", "j1"),
])
def test_migration_statements(sql: str, kind: str, name: str | None) -> None:
    parsed = grammar.parse(sql)
    assert parsed is not None and (parsed.kind, parsed.name) == (kind, name)
    assert kind in grammar.MIGRATION_KINDS
    stmt = classify(sql)
    assert stmt is not None and stmt.kind == "distsql"
