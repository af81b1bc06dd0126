"""Loading database-*.yaml into DatabaseRules: the ShardingSphere example, variants, and every error path."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from routing.algorithms import ModShardingAlgorithm
from routing.config import RuleYamlLoader, load_database_rules, load_yaml, logical_data_sources, other_rules
from routing.errors import ConfigError
from routing.keygen import SnowflakeKeyGenerator
from routing.model import (
    ComplexStrategy,
    DataNode,
    HintStrategy,
    NoneStrategy,
    StandardStrategy,
)

EXAMPLE = """\
databaseName: sharding_db
dataSources:
  ds_0: {url: "jdbc:mysql://127.0.0.1:3306/demo_ds_0?useSSL=false", username: root, password: ""}
  ds_1: {url: "jdbc:mysql://127.0.0.1:3306/demo_ds_1?useSSL=false", username: root, password: ""}
rules:
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order_${0..1}
      tableStrategy:
        standard:
          shardingColumn: order_id
          shardingAlgorithmName: t_order_inline
      keyGenerateStrategy:
        column: order_id
        keyGeneratorName: snowflake
    t_order_item:
      actualDataNodes: ds_${0..1}.t_order_item_${0..1}
      tableStrategy:
        standard:
          shardingColumn: order_id
          shardingAlgorithmName: t_order_item_inline
      keyGenerateStrategy:
        column: order_item_id
        keyGeneratorName: snowflake
  bindingTables:
    - t_order,t_order_item
  defaultDatabaseStrategy:
    standard:
      shardingColumn: user_id
      shardingAlgorithmName: database_inline
  defaultTableStrategy:
    none:
  shardingAlgorithms:
    database_inline:
      type: INLINE
      props:
        algorithm-expression: ds_${user_id % 2}
    t_order_inline:
      type: INLINE
      props:
        algorithm-expression: t_order_${order_id % 2}
    t_order_item_inline:
      type: INLINE
      props:
        algorithm-expression: t_order_item_${order_id % 2}
  keyGenerators:
    snowflake:
      type: SNOWFLAKE
- !BROADCAST
  tables:
    - t_address
"""

DS = ["ds_0", "ds_1"]


def example() -> dict[str, Any]:
    return copy.deepcopy(load_yaml(EXAMPLE, "database-sharding.yaml"))


def load(doc: dict[str, Any], warnings: list[str] | None = None, sources: list[str] | None = None) -> Any:
    sink = warnings if warnings is not None else []
    return load_database_rules(doc, DS if sources is None else sources, "database-sharding.yaml", warn=sink.append)


def sharding(doc: dict[str, Any]) -> dict[str, Any]:
    rule: dict[str, Any] = doc["rules"][0]
    return rule


def test_shardingsphere_example_loads_unchanged() -> None:
    warnings: list[str] = []
    rules = load(example(), warnings)
    assert warnings == []
    assert rules.name == "sharding_db"
    assert rules.data_sources == ("ds_0", "ds_1")
    assert rules.broadcast.tables == frozenset({"t_address"})
    assert "T_ADDRESS" in rules.broadcast
    assert rules.sharding is not None
    order = rules.sharding.table("T_Order")
    assert order is not None
    assert [str(n) for n in order.data_nodes] == [
        "ds_0.t_order_0",
        "ds_0.t_order_1",
        "ds_1.t_order_0",
        "ds_1.t_order_1",
    ]
    assert isinstance(order.database_strategy, StandardStrategy)  # from defaultDatabaseStrategy
    assert order.database_strategy.column == "user_id"
    assert order.database_strategy.algorithm_name == "database_inline"
    assert order.database_strategy.algorithm.shard_precise(DS, "user_id", 7) == "ds_1"
    assert isinstance(order.table_strategy, StandardStrategy)
    assert order.table_strategy.algorithm.shard_precise(order.tables_in("ds_1"), "order_id", 4) == "t_order_0"
    assert order.sharding_columns == {"user_id", "order_id"}
    assert order.key_generate is not None and order.key_generate.column == "order_id"
    assert isinstance(order.key_generate.generator, SnowflakeKeyGenerator)
    item = rules.sharding.table("t_order_item")
    assert item is not None and item.key_generate is not None
    assert item.key_generate.column == "order_item_id"
    assert item.key_generate.generator is order.key_generate.generator  # one generator per name
    assert rules.sharding.binding_groups == (("t_order", "t_order_item"),)
    assert rules.sharding.are_bound(["t_order", "T_ORDER_ITEM"])
    assert rules.single.patterns == ()
    assert not rules.is_pass_through


def test_example_with_data_sources_taken_from_the_document() -> None:
    rules = load_database_rules(example(), None, "database-sharding.yaml", warn=lambda m: None)
    assert rules.data_sources == ("ds_0", "ds_1")


def test_yaml_loader_keeps_unknown_tags() -> None:
    doc = load_yaml(
        "rules:\n- !READWRITE_SPLITTING\n  dataSourceGroups: {rw: {writeDataSourceName: w}}\n"
        "- !ENCRYPT []\n- !MASK text\n",
        "f.yaml",
    )
    assert doc["rules"] == [
        {"__rule__": "READWRITE_SPLITTING", "dataSourceGroups": {"rw": {"writeDataSourceName": "w"}}},
        {"__rule__": "ENCRYPT", "__items__": []},
        {"__rule__": "MASK", "__value__": "text"},
    ]
    import yaml

    assert yaml.load("- !X {a: 1}", Loader=RuleYamlLoader) == [{"__rule__": "X", "a": 1}]


def test_yaml_syntax_error_names_file_and_line() -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml("rules:\n  - !SHARDING\n    tables: [\n", "bad.yaml")
    assert info.value.file == "bad.yaml"
    assert "line" in str(info.value.key)


READWRITE = """\
databaseName: rw_db
dataSources: {write_ds_0: {}, read_ds_0: {}, write_ds_1: {}, read_ds_1: {}, other: {}}
rules:
- !SHARDING
  tables:
    t_order:
      actualDataNodes: readwrite_ds_${0..1}.t_order_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db}}
  shardingAlgorithms:
    db: {type: INLINE, props: {algorithm-expression: "readwrite_ds_${user_id % 2}"}}
- !READWRITE_SPLITTING
  dataSourceGroups:
    readwrite_ds_0: {writeDataSourceName: write_ds_0, readDataSourceNames: [read_ds_0], loadBalancerName: rr}
    readwrite_ds_1: {writeDataSourceName: write_ds_1, readDataSourceNames: [read_ds_1], loadBalancerName: rr}
  loadBalancers:
    rr: {type: ROUND_ROBIN}
"""


def test_readwrite_splitting_is_kept_and_groups_become_logical_data_sources() -> None:
    doc = load_yaml(READWRITE, "database-rw.yaml")
    rules = load_database_rules(doc, None, "database-rw.yaml", warn=lambda m: None)
    assert rules.data_sources == ("readwrite_ds_0", "readwrite_ds_1", "other")
    table = rules.sharding.table("t_order") if rules.sharding else None
    assert table is not None and table.data_sources == ["readwrite_ds_0", "readwrite_ds_1"]
    kept = other_rules(doc)
    assert [r["__rule__"] for r in kept] == ["READWRITE_SPLITTING"]
    assert kept[0]["loadBalancers"] == {"rr": {"type": "ROUND_ROBIN"}}


@pytest.mark.parametrize(
    ("rule", "sources", "expected"),
    [
        ({"dataSources": {"g": {"staticStrategy": {"writeDataSourceName": "w", "readDataSourceNames": "r1,r2"}}}},
         ["a", "w", "r1", "r2"], ["a", "g"]),
        ({"dataSourceGroups": {"g": {"writeDataSourceName": "w", "readDataSourceNames": ["r"]}}}, ["r", "w"], ["g"]),
        ({"dataSourceGroups": {"g": {"writeDataSourceName": "w"}}}, ["x"], ["x", "g"]),
    ],
)  # fmt: skip
def test_logical_data_sources(rule: dict[str, Any], sources: list[str], expected: list[str]) -> None:
    doc = {"rules": [{"__rule__": "READWRITE_SPLITTING", **rule}]}
    assert logical_data_sources(doc, sources) == expected


def test_tables_without_nodes_autotables_defaults_and_other_strategies() -> None:
    doc = load_yaml(
        """\
databaseName: db
rules:
- !SHARDING
  tables:
    t_plain: {}
    t_complex:
      actualDataNodes: ds_0.t_complex_${0..1}
      tableStrategy: {complex: {shardingColumns: "a, b", shardingAlgorithmName: cx}}
      databaseStrategy: {none: }
    t_hint:
      actualDataNodes: ds_${0..1}.t_hint
      databaseStrategy: {hint: {shardingAlgorithmName: hint}}
    t_default_column:
      actualDataNodes: ds_${0..1}.t_default_column
  autoTables:
    t_log:
      actualDataSources: ds_0,ds_1
      shardingStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: mod4}}
    t_event:
      actualDataSources: ds_${0..1}
      actualTablePrefix: ev_
      shardingStrategy: {standard: {shardingAlgorithmName: mod3}}
      keyGenerateStrategy: {column: event_id, keyGeneratorName: uuid}
  bindingTables:
    - pair:t_hint,t_default_column
    - [t_log]
  defaultDatabaseStrategy: {standard: {shardingAlgorithmName: db}}
  defaultShardingColumn: user_id
  defaultKeyGenerateStrategy: {column: id, keyGeneratorName: snow}
  shardingAlgorithms:
    db: {type: INLINE, props: {algorithm-expression: "ds_${user_id % 2}"}}
    cx: {type: COMPLEX_INLINE, props: {sharding-columns: "a,b", algorithm-expression: "t_complex_${(a + b) % 2}"}}
    hint: {type: HINT_INLINE}
    mod4: {type: MOD, props: {sharding-count: 4}}
    mod3: {type: MOD, props: {sharding-count: 3}}
  keyGenerators:
    snow: {type: SNOWFLAKE, props: {worker-id: 2}}
    uuid: {type: UUID}
- !SINGLE
  tables: ["*.*", ds_0.t_user, "ds_1.*"]
  defaultDataSource: ds_0
""",
        "database-db.yaml",
    )
    rules = load(doc)
    assert rules.sharding is not None
    plain = rules.sharding.table("t_plain")
    assert plain is not None
    assert plain.data_nodes == (DataNode("ds_0", "t_plain"), DataNode("ds_1", "t_plain"))
    assert isinstance(plain.table_strategy, NoneStrategy)
    assert isinstance(plain.database_strategy, StandardStrategy) and plain.database_strategy.column == "user_id"
    assert plain.key_generate is not None and plain.key_generate.column == "id"  # defaultKeyGenerateStrategy
    complex_ = rules.sharding.table("t_complex")
    assert complex_ is not None
    assert isinstance(complex_.table_strategy, ComplexStrategy) and complex_.table_strategy.columns == ("a", "b")
    assert isinstance(complex_.database_strategy, NoneStrategy)  # explicit `none:` beats the default
    hint = rules.sharding.table("t_hint")
    assert hint is not None and isinstance(hint.database_strategy, HintStrategy)
    log = rules.sharding.table("t_log")
    assert log is not None and log.auto
    assert [str(n) for n in log.data_nodes] == ["ds_0.t_log_0", "ds_1.t_log_1", "ds_0.t_log_2", "ds_1.t_log_3"]
    assert isinstance(log.database_strategy, NoneStrategy)
    assert isinstance(log.table_strategy, StandardStrategy)
    assert isinstance(log.table_strategy.algorithm, ModShardingAlgorithm)
    assert log.table_strategy.algorithm.shard_precise([n.table for n in log.data_nodes], "id", 6) == "t_log_2"
    event = rules.sharding.table("t_event")
    assert event is not None
    assert [str(n) for n in event.data_nodes] == ["ds_0.ev_0", "ds_1.ev_1", "ds_0.ev_2"]
    assert isinstance(event.table_strategy, StandardStrategy) and event.table_strategy.column == "user_id"
    assert event.key_generate is not None and event.key_generate.generator_name == "uuid"
    assert rules.sharding.binding_groups == (("t_hint", "t_default_column"), ("t_log",))
    assert rules.sharding.default_sharding_column == "user_id"
    assert rules.single.patterns == ("*.*", "ds_0.t_user", "ds_1.*")
    assert rules.single.default_data_source == "ds_0"


def test_legacy_broadcast_tables_inside_sharding() -> None:
    doc = example()
    sharding(doc)["broadcastTables"] = ["t_dict", "T_Config"]
    assert load(doc).broadcast.tables == frozenset({"t_address", "t_dict", "t_config"})


def test_single_data_source_without_rules_is_pass_through() -> None:
    rules = load({"databaseName": "plain", "dataSources": {"ds": {}}}, sources=["ds"])
    assert rules.is_pass_through and rules.sharding is None


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: sharding(d).update(shardingCache={"a": 1}), "shardingCache is not supported"),
        (lambda d: d.pop("databaseName"), "no databaseName; using 'sharding'"),
    ],
)  # fmt: skip
def test_harmless_settings_warn(mutate: Callable[[dict[str, Any]], Any], fragment: str) -> None:
    doc = example()
    mutate(doc)
    warnings: list[str] = []
    load(doc, warnings)
    assert any(fragment in w for w in warnings), warnings
    assert all(w.startswith("database-sharding.yaml") for w in warnings)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(extra=1),
         "extra: unknown key 'extra': the known keys here are dataSources, databaseName, props, rules, schemaName"),
        (lambda d: sharding(d).update(bindingTablez=[]),
         "rules[0].bindingTablez: unknown key 'bindingTablez': did you mean bindingTables?"),
        (lambda d: sharding(d)["tables"]["t_order"].update(actualDataNode="x"),
         "rules[0].tables.t_order.actualDataNode: unknown key 'actualDataNode': did you mean actualDataNodes?"),
        (lambda d: sharding(d)["tables"]["t_order"].update(foo=1), "rules[0].tables.t_order.foo: unknown key 'foo'"),
        (lambda d: sharding(d)["shardingAlgorithms"]["database_inline"].update(kind="x"), "unknown key 'kind'"),
        (lambda d: sharding(d)["shardingAlgorithms"]["database_inline"].update(prop={}),
         "unknown key 'prop': did you mean props?"),
        (lambda d: sharding(d)["tables"]["t_order"]["tableStrategy"]["standard"].update(shardingColum="x"),
         "unknown key 'shardingColum': did you mean shardingColumn?"),
        (lambda d: sharding(d)["tables"]["t_order"].update(tableStrategy={"standart": {"shardingColumn": "order_id",
         "shardingAlgorithmName": "t_order_inline"}}),
         "tableStrategy.standart: unknown key 'standart': did you mean standard?"),
    ],
)  # fmt: skip
def test_unknown_keys_are_refused(mutate: Callable[[dict[str, Any]], Any], message: str) -> None:
    """ShardingSphere's YAML loading refuses a property its classes lack; a misspelt key that only warned
    dropped what it configured (a binding, a strategy) without a word."""
    doc = example()
    mutate(doc)
    with pytest.raises(ConfigError) as info:
        load(doc, [])
    assert str(info.value).startswith("database-sharding.yaml: ")
    assert message in str(info.value)


def test_a_default_strategy_that_misses_a_table_only_warns() -> None:
    doc = example()
    sharding(doc)["tables"]["t_solo"] = {"actualDataNodes": "ds_0.t_solo"}
    warnings: list[str] = []
    rules = load(doc, warnings)
    assert rules.sharding is not None and rules.sharding.table("t_solo") is not None
    assert any("rules[0].tables.t_solo.databaseStrategy" in w and "ds_1" in w for w in warnings)


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        node: Any = doc
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return mutate


def _drop(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        node: Any = doc
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return mutate


R = ["rules", 0]
ORDER = [*R, "tables", "t_order"]
ALGS = [*R, "shardingAlgorithms"]


@pytest.mark.parametrize(
    ("mutate", "key", "fragment"),
    [
        (_set([*ALGS, "t_order_inline", "type"], "MODULO"), "rules[0].shardingAlgorithms.t_order_inline.type",
         "unknown sharding algorithm type 'MODULO'"),
        (_drop([*ALGS, "t_order_inline", "type"]), "rules[0].shardingAlgorithms.t_order_inline.type", "no type"),
        (_set([*ORDER, "tableStrategy", "standard", "shardingAlgorithmName"], "missing"),
         "rules[0].tables.t_order.tableStrategy.standard.shardingAlgorithmName", "'missing' is not defined"),
        (_set([*ORDER, "actualDataNodes"], "ds_${0..2}.t_order_${0..1}"), "rules[0].tables.t_order.actualDataNodes",
         "data source 'ds_2', which is not defined"),
        (_set([*ORDER, "actualDataNodes"], "ds_0.t_order_${0..1}, ds_0.t_order_0"),
         "rules[0].tables.t_order.actualDataNodes", "listed twice"),
        (_set([*ORDER, "actualDataNodes"], "t_order_${0..1}"), "rules[0].tables.t_order.actualDataNodes",
         "is not 'data_source.table'"),
        (_set([*ORDER, "actualDataNodes"], "ds_${0..1}.t_order_${0..1"), "rules[0].tables.t_order.actualDataNodes",
         "unterminated"),
        (_set([*ORDER, "actualDataNodes"], ["ds_0.t_order_0"]), "rules[0].tables.t_order.actualDataNodes",
         "expected an inline expression string"),
        (_set([*ALGS, "t_order_inline", "props", "algorithm-expression"], "t_order_${order_id % 4}"),
         "rules[0].tables.t_order.tableStrategy", "t_order_2, t_order_3, which are not among the actual tables"),
        (_set([*ALGS, "t_order_inline", "props", "algorithm-expression"], "t_order_${order_id %}"),
         "rules[0].shardingAlgorithms.t_order_inline.props.algorithm-expression", "position"),
        (_set([*ORDER, "actualDataNodes"], "ds_${0..1}.t_order_${0..2}"), "rules[0].bindingTables[0]",
         "different layouts"),
        (_set([*ORDER, "actualDataNodes"], "ds_1.t_order_${0..1}, ds_0.t_order_${0..1}"), "rules[0].bindingTables[0]",
         "different layouts"),
        (_set([*R, "bindingTables"], ["t_order,t_nope"]), "rules[0].bindingTables[0]", "'t_nope' is not a sharded"),
        (_set([*R, "bindingTables"], "t_order,t_order_item"), "rules[0].bindingTables", "expected a list"),
        (_set([*R, "tables"], ["t_order"]), "rules[0].tables", "expected a mapping, got a list"),
        (_set([*ORDER, "tableStrategy"], ["standard"]), "rules[0].tables.t_order.tableStrategy", "expected a mapping"),
        (_set([*ORDER, "tableStrategy"], {"standard": {"shardingAlgorithmName": "t_order_inline"}}),
         "rules[0].tables.t_order.tableStrategy.standard.shardingColumn", "shardingColumn is required"),
        (_set([*ORDER, "tableStrategy"], {"none": None, "hint": {"shardingAlgorithmName": "t_order_inline"}}),
         "rules[0].tables.t_order.tableStrategy", "only one strategy type"),
        (_set([*ORDER, "tableStrategy"], {"hint": {"shardingAlgorithmName": "t_order_inline"}}),
         "rules[0].tables.t_order.tableStrategy.hint.shardingAlgorithmName", "cannot serve a hint strategy"),
        (_set([*ORDER, "keyGenerateStrategy", "keyGeneratorName"], "nope"),
         "rules[0].tables.t_order.keyGenerateStrategy.keyGeneratorName", "'nope' is not defined"),
        (_drop([*ORDER, "keyGenerateStrategy", "column"]), "rules[0].tables.t_order.keyGenerateStrategy.column",
         "expected a non-empty string"),
        (_set([*R, "keyGenerators", "snowflake", "type"], "COSID"), "rules[0].keyGenerators.snowflake.type",
         "unknown key generator type"),
        (_set([*R, "keyGenerators", "snowflake", "props"], {"worker-id": 5000}),
         "rules[0].keyGenerators.snowflake.props", "worker-id"),
        (_set([*R, "shardingAlgorithms", "database_inline", "props"], ["x"]),
         "rules[0].shardingAlgorithms.database_inline.props", "expected a mapping"),
        (_set([*R, "autoTables"], {"t_log": {"shardingStrategy": {"standard": {"shardingColumn": "id",
         "shardingAlgorithmName": "t_order_inline"}}}}), "rules[0].autoTables.t_log.shardingStrategy.standard"
         ".shardingAlgorithmName", "not an auto-table algorithm"),
        (_set([*R, "autoTables"], {"t_log": {"actualDataSources": "ds_0,ds_9", "shardingStrategy": {}}}),
         "rules[0].autoTables.t_log.actualDataSources", "'ds_9' is not defined"),
        (_set([*R, "autoTables"], {"t_log": {"shardingStrategy": {"none": None}}}),
         "rules[0].autoTables.t_log.shardingStrategy", "needs a standard sharding strategy"),
        (_set([*R, "autoTables"], {"t_order": {}}), "rules[0].autoTables.t_order", "both tables and autoTables"),
        (_set(["rules", 1], {"__rule__": "SINGLE", "tables": ["ds_7.*"]}), "rules[1].tables[0]",
         "'ds_7' is not defined"),
        (_set(["rules", 1], {"__rule__": "SINGLE", "defaultDataSource": "ds_7"}), "rules[1].defaultDataSource",
         "'ds_7' is not defined"),
        (_set(["rules", 1], {"__rule__": "SINGLE", "tables": ["t_user"]}), "rules[1].tables[0]",
         "expected 'data_source.table'"),
        (_set(["rules", 1], {"__rule__": "SHARDING"}), "rules[1]", "only one !SHARDING rule"),
        (_set(["rules", 1], {"tables": ["t"]}), "rules[1]", "tagged mapping"),
        (_set(["rules"], {"a": 1}), "rules", "expected a list of tagged rules"),
        (_set(["databaseName"], ["x"]), "databaseName", "expected a non-empty string"),
        (_set([*R, "defaultDatabaseStrategy", "standard", "shardingAlgorithmName"], "t_complex"),
         "rules[0].defaultDatabaseStrategy.standard.shardingAlgorithmName", "'t_complex' is not defined"),
    ],
)  # fmt: skip
def test_config_errors_name_file_and_key(mutate: Callable[[dict[str, Any]], Any], key: str, fragment: str) -> None:
    doc = example()
    mutate(doc)
    with pytest.raises(ConfigError) as info:
        load(doc)
    assert info.value.file == "database-sharding.yaml"
    assert info.value.key == key
    assert fragment in info.value.reason


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_database_rules(["x"], DS, "f.yaml")  # type: ignore[arg-type]
