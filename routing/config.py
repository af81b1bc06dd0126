"""Turn one parsed ``database-*.yaml`` into ``routing.model.DatabaseRules``.

The proxy reads the file (no I/O here) and hands us the parsed document; :func:`load_yaml` parses text
with :class:`RuleYamlLoader`, which understands ShardingSphere's rule tags (``- !SHARDING``): a tagged
mapping becomes ``{"__rule__": "SHARDING", ...}``. :func:`load_database_rules` then builds the sharding,
broadcast and single rules the kernel needs, creating every algorithm and key generator up front so
configuration mistakes surface at start-up as ``ConfigError`` naming the file and a dotted key
(``rules[0].tables.t_order.actualDataNodes``), never as a wrong route later.

Rules we do not interpret (``!READWRITE_SPLITTING``, ``!ENCRYPT``, ``!SHADOW``…) are left for the proxy:
:func:`other_rules` returns them untouched. An unknown key stops the start, with the closest known key
(:func:`unknown_key`), as ShardingSphere's own YAML loading refuses properties its classes do not have: a
misspelt ``bindingTablez`` would otherwise drop the binding without a word.

Data sources: ``DatabaseRules.data_sources`` are the *logical* data sources the kernel routes to. When a
``!READWRITE_SPLITTING`` (or ``!DB_DISCOVERY`` / ``!SHADOW``) rule groups physical data sources, the group
name replaces its members (at the position of the first member), as in ShardingSphere where
``actualDataNodes`` name the group (``readwrite_ds_${0..1}.t_order_${0..1}``); the proxy resolves a group
to a physical data source.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

import yaml

from routing.algorithms import AutoTableAlgorithm, InlineShardingAlgorithm, algorithm_kind, create_algorithm
from routing.errors import ConfigError
from routing.inline import InlineExpression
from routing.keygen import create_key_generator
from routing.model import (
    BroadcastRule,
    ComplexStrategy,
    DatabaseRules,
    DataNode,
    DualRouting,
    HintStrategy,
    KeyGenerateStrategy,
    KeyGenerator,
    NoneStrategy,
    ShardingRule,
    ShardingStrategy,
    SingleRule,
    StandardStrategy,
    TableRule,
)

__all__ = [
    "INTERPRETED_RULES",
    "RuleYamlLoader",
    "expect_mapping",
    "key_line",
    "load_database_rules",
    "load_yaml",
    "logical_data_sources",
    "other_rules",
    "refuse_unknown_keys",
    "unknown_key",
]

_log = logging.getLogger(__name__)

Warn = Callable[[str], None]

RULE_KEY = "__rule__"
#: Rule types this module turns into the model; every other tagged rule is returned by other_rules().
INTERPRETED_RULES = frozenset({"SHARDING", "BROADCAST", "SINGLE"})

#: how many integers an INLINE algorithm is tried with when checking its targets at load time
INLINE_CHECK_SAMPLES = 64


# --- YAML ----------------------------------------------------------------------------------------------


class RuleYamlLoader(yaml.SafeLoader):
    """A SafeLoader that keeps ShardingSphere's local tags instead of failing on them.

    ``!NAME`` on a mapping gives ``{"__rule__": "NAME", **mapping}``, on a sequence
    ``{"__rule__": "NAME", "__items__": [...]}`` and on a scalar ``{"__rule__": "NAME", "__value__": text}``.
    """


def _construct_tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.MappingNode):
        mapping = loader.construct_mapping(node, deep=True)
        return {RULE_KEY: suffix, **mapping}
    if isinstance(node, yaml.SequenceNode):
        return {RULE_KEY: suffix, "__items__": loader.construct_sequence(node, deep=True)}
    return {RULE_KEY: suffix, "__value__": loader.construct_scalar(node)}  # type: ignore[arg-type]


RuleYamlLoader.add_multi_constructor("!", _construct_tagged)


def unknown_key(name: object, known: set[str] | frozenset[str], *, file: str | None, key: str) -> ConfigError:
    """The refusal of a key no section has, with the closest known one ("did you mean bindingTables?")."""
    candidates = sorted(k for k in known if k != RULE_KEY)
    close = difflib.get_close_matches(str(name), candidates, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"the known keys here are {', '.join(candidates)}"
    return ConfigError(f"unknown key {str(name)!r}: {hint}", file=file, key=key)


def refuse_unknown_keys(doc: Mapping[str, Any], known: set[str] | frozenset[str], *, file: str | None,
                        prefix: str) -> None:
    """Raise :func:`unknown_key` for the first key of ``doc`` not in ``known`` (``prefix`` is the dotted path of
    ``doc`` itself, ending in a dot, or empty at the top)."""
    for name in doc:
        if name not in known and name != RULE_KEY:
            raise unknown_key(name, known, file=file, key=f"{prefix}{name}")


def expect_mapping(value: Any, file: str | None, key: str) -> Mapping[str, Any]:
    """A section that must be a mapping (absent: an empty one); anything else is refused naming `key`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected a mapping, got {type(value).__name__}", file=file, key=key)
    return value


_PATH_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def key_line(text: str, key: str | None) -> int | None:
    """The line (1-based) of a dotted key path such as ``rules[0].tables.t_order.foo`` in YAML ``text``: the
    deepest part of the path found (a name may itself hold dots, as ``ds_0.t_order`` does); None when the
    text does not parse or the path names nothing in it."""
    if not key:
        return None
    try:
        node = yaml.compose(text, Loader=RuleYamlLoader)
    except yaml.YAMLError:
        return None
    parts: list[str | int] = [int(m[1]) if m[1] else m[2] for m in _PATH_PART.finditer(key)]
    line: int | None = None
    i = 0
    while i < len(parts) and node is not None:
        part = parts[i]
        if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
            i += 1
            continue
        if not isinstance(node, yaml.MappingNode) or isinstance(part, int):
            break
        found = None
        for j in range(len(parts), i, -1):  # the longest run of parts that is one key
            if any(isinstance(p, int) for p in parts[i:j]):
                continue
            name = ".".join(str(p) for p in parts[i:j])
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == name:
                    found = (j, k, v)
                    break
            if found:
                break
        if found is None:
            break
        i, knode, node = found
        line = knode.start_mark.line + 1
    return line


def load_yaml(text: str, file: str | None = None) -> Any:
    """Parse YAML text with :class:`RuleYamlLoader`; syntax errors become ``ConfigError`` naming the line."""
    try:
        return yaml.load(text, Loader=RuleYamlLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"invalid YAML: {problem}", file=file, key=where) from None


# --- small typed readers ---------------------------------------------------------------------------------


class _Ctx:
    """Where we are (file) and how to report warnings."""

    def __init__(self, file: str | None, warn: Warn) -> None:
        self.file = file
        self._warn = warn

    def error(self, message: str, key: str | None) -> ConfigError:
        return ConfigError(message, file=self.file, key=key)

    def warn(self, message: str, key: str | None) -> None:
        where = ": ".join(p for p in (self.file, key) if p)
        self._warn(f"{where}: {message}" if where else message)

    def mapping(self, value: Any, key: str, *, optional: bool = True) -> Mapping[str, Any]:
        if value is None and optional:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(f"expected a mapping, got {_describe(value)}", key)
        return value

    def string(self, value: Any, key: str) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
            raise self.error(f"expected a non-empty string, got {_describe(value)}", key)
        return str(value).strip()

    def names(self, value: Any, key: str) -> list[str]:
        """A list of names written as a YAML list or as one comma-separated string."""
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        if isinstance(value, list):
            out: list[str] = []
            for n, item in enumerate(value):
                out.extend(
                    self.names(item, f"{key}[{n}]") if isinstance(item, list) else [self.string(item, f"{key}[{n}]")]
                )
            return out
        raise self.error(f"expected a list or a comma-separated string, got {_describe(value)}", key)

    def check_keys(self, value: Mapping[str, Any], known: set[str], key: str) -> None:
        refuse_unknown_keys(value, known, file=self.file, prefix=f"{key}." if key else "")


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


# --- data sources ----------------------------------------------------------------------------------------


def _group_members(rule: Mapping[str, Any]) -> dict[str, list[str]]:
    """Logical data source groups a non-sharding rule defines, with their physical members."""
    kind = str(rule.get(RULE_KEY, "")).upper()
    groups: dict[str, list[str]] = {}
    if kind == "READWRITE_SPLITTING":
        raw = rule.get("dataSourceGroups") or rule.get("dataSources") or {}
        for name, group in raw.items() if isinstance(raw, Mapping) else []:
            g = group if isinstance(group, Mapping) else {}
            g = g.get("staticStrategy") if isinstance(g.get("staticStrategy"), Mapping) else g
            members: list[str] = []
            write = g.get("writeDataSourceName")
            if isinstance(write, str):
                members.append(write)
            reads = g.get("readDataSourceNames")
            if isinstance(reads, str):
                members.extend(p.strip() for p in reads.split(",") if p.strip())
            elif isinstance(reads, list):
                members.extend(str(r) for r in reads)
            groups[str(name)] = members
    elif kind == "DB_DISCOVERY":
        raw = rule.get("dataSources") or {}
        for name, group in raw.items() if isinstance(raw, Mapping) else []:
            names = group.get("dataSourceNames") if isinstance(group, Mapping) else None
            groups[str(name)] = [str(n) for n in names] if isinstance(names, list) else []
    elif kind == "SHADOW":
        raw = rule.get("dataSources") or {}
        for name, group in raw.items() if isinstance(raw, Mapping) else []:
            g = group if isinstance(group, Mapping) else {}
            groups[str(name)] = [
                str(g[k]) for k in ("productionDataSourceName", "shadowDataSourceName") if isinstance(g.get(k), str)
            ]
    return groups


def logical_data_sources(doc: Mapping[str, Any], data_source_names: Sequence[str]) -> list[str]:
    """The data sources the kernel routes to: physical ones, with grouped members replaced by their group."""
    groups: dict[str, list[str]] = {}
    for rule in other_rules(doc):
        groups.update(_group_members(rule))
    member_of = {m: g for g, members in groups.items() for m in members}

    def top(name: str) -> str:  # a group may be a member of another (a shadow data source as a group's primary)
        seen = {name}
        while name in member_of and member_of[name] not in seen:
            name = member_of[name]
            seen.add(name)
        return name

    result: dict[str, None] = {}
    for name in data_source_names:
        result[top(name)] = None
    for group in groups:
        result.setdefault(top(group), None)
    return list(result)


# --- rules -----------------------------------------------------------------------------------------------


def _rules(doc: Mapping[str, Any], ctx: _Ctx | None = None) -> list[tuple[int, Mapping[str, Any]]]:
    raw = doc.get("rules")
    if raw is None:
        return []
    if not isinstance(raw, list):
        if ctx is None:
            return []
        raise ctx.error(f"expected a list of tagged rules, got {_describe(raw)}", "rules")
    out: list[tuple[int, Mapping[str, Any]]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or RULE_KEY not in item:
            if ctx is None:
                continue
            raise ctx.error(
                "a rule must be a tagged mapping such as '- !SHARDING' (parse the file with RuleYamlLoader)",
                f"rules[{i}]",
            )
        out.append((i, item))
    return out


def other_rules(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rules this module does not interpret (``!READWRITE_SPLITTING``, ``!ENCRYPT``…), unchanged,
    each a dict with ``"__rule__"`` naming its tag."""
    return [dict(rule) for _, rule in _rules(doc) if str(rule[RULE_KEY]).upper() not in INTERPRETED_RULES]


def load_database_rules(
    doc: Mapping[str, Any],
    data_source_names: Sequence[str] | None = None,
    file: str | None = None,
    *,
    warn: Warn | None = None,
) -> DatabaseRules:
    """Build the rules of one logical database from its parsed YAML document.

    ``data_source_names`` are the physical data sources in file order (default: the keys of
    ``dataSources``). Unknown keys are reported through ``warn(message)`` (default: this module's
    logger); every real problem raises ``ConfigError(message, file=file, key=dotted.path)``.
    """
    ctx = _Ctx(file, warn or _log.warning)
    if not isinstance(doc, Mapping):
        raise ctx.error(f"a database configuration must be a mapping, got {_describe(doc)}", None)
    ctx.check_keys(doc, {"databaseName", "schemaName", "dataSources", "rules", "props"}, "")
    if data_source_names is None:
        data_source_names = list(ctx.mapping(doc.get("dataSources"), "dataSources"))
    name = doc.get("databaseName", doc.get("schemaName"))
    if name is None:
        stem = PurePath(file).stem if file else ""
        if not stem:
            raise ctx.error("databaseName is required", "databaseName")
        name = stem.removeprefix("database-")
        ctx.warn(f"no databaseName; using {name!r} from the file name", "databaseName")
    name = ctx.string(name, "databaseName")
    physical = list(dict.fromkeys(str(n) for n in data_source_names))
    logical = logical_data_sources(doc, physical)
    known_sources = set(logical) | set(physical)

    sharding: ShardingRule | None = None
    broadcast: set[str] = set()
    single = SingleRule()
    for i, rule in _rules(doc, ctx):
        kind = str(rule[RULE_KEY]).upper()
        key = f"rules[{i}]"
        if kind == "SHARDING":
            if sharding is not None:
                raise ctx.error("only one !SHARDING rule is allowed per database", key)
            sharding, legacy_broadcast = _ShardingLoader(ctx, key, logical, known_sources).load(rule)
            broadcast |= legacy_broadcast
        elif kind == "BROADCAST":
            ctx.check_keys(rule, {"tables"}, key)
            broadcast |= {t.lower() for t in ctx.names(rule.get("tables") or [], f"{key}.tables")}
        elif kind == "SINGLE":
            single = _load_single(ctx, key, rule, known_sources)
    props = doc.get("props")
    return DatabaseRules(
        name=name,
        data_sources=tuple(logical),
        sharding=sharding,
        broadcast=BroadcastRule(frozenset(broadcast)),
        single=single,
        props=dict(ctx.mapping(props, "props")),
    )


def _load_single(ctx: _Ctx, key: str, rule: Mapping[str, Any], known_sources: set[str]) -> SingleRule:
    ctx.check_keys(rule, {"tables", "defaultDataSource"}, key)
    patterns = ctx.names(rule.get("tables") or [], f"{key}.tables")
    for n, pattern in enumerate(patterns):
        parts = pattern.split(".")
        if len(parts) not in (2, 3) or not all(parts):
            raise ctx.error(f"expected 'data_source.table' (or '*.*'), got {pattern!r}", f"{key}.tables[{n}]")
        if parts[0] != "*" and parts[0] not in known_sources:
            raise ctx.error(f"data source {parts[0]!r} is not defined", f"{key}.tables[{n}]")
    default = rule.get("defaultDataSource")
    if default is not None:
        default = ctx.string(default, f"{key}.defaultDataSource")
        if default not in known_sources:
            raise ctx.error(f"data source {default!r} is not defined", f"{key}.defaultDataSource")
    return SingleRule(patterns=tuple(patterns), default_data_source=default)


_SHARDING_KEYS = {
    "tables", "autoTables", "bindingTables", "broadcastTables", "defaultDatabaseStrategy", "defaultTableStrategy",
    "defaultKeyGenerateStrategy", "defaultAuditStrategy", "defaultShardingColumn", "shardingAlgorithms",
    "keyGenerators", "auditors", "shardingCache", "oldDatabaseStrategy", "oldTableStrategy",
}  # fmt: skip
# logicTable: ShardingSphere writes it into every table it exports (the table's name again)
_TABLE_KEYS = {"actualDataNodes", "databaseStrategy", "tableStrategy", "keyGenerateStrategy", "auditStrategy",
               "logicTable", "oldDatabaseStrategy", "oldTableStrategy", "dualRouting"}
_AUTO_TABLE_KEYS = {
    "logicTable",
    "actualDataSources",
    "shardingStrategy",
    "keyGenerateStrategy",
    "auditStrategy",
    "actualTablePrefix",
}
_STRATEGY_KEYS = {
    "standard": {"shardingColumn", "shardingAlgorithmName"},
    "complex": {"shardingColumns", "shardingAlgorithmName"},
    "hint": {"shardingAlgorithmName"},
    "none": set(),
}


class _ShardingLoader:
    """Builds the ShardingRule of one ``!SHARDING`` rule (one instance per rule)."""

    def __init__(self, ctx: _Ctx, key: str, data_sources: list[str], known_sources: set[str]) -> None:
        self.ctx = ctx
        self.key = key
        self.data_sources = data_sources
        self.known_sources = known_sources
        self.algorithms: dict[str, Any] = {}
        self.generators: dict[str, KeyGenerator] = {}
        self.default_column: str | None = None
        self.old_db: ShardingStrategy | None = None
        self.old_table: ShardingStrategy | None = None

    def load(self, rule: Mapping[str, Any]) -> tuple[ShardingRule, set[str]]:
        ctx, key = self.ctx, self.key
        ctx.check_keys(rule, _SHARDING_KEYS, key)
        for absent in ("auditors", "defaultAuditStrategy", "shardingCache"):
            if rule.get(absent):
                ctx.warn(f"{absent} is not supported and is ignored", f"{key}.{absent}")
        column = rule.get("defaultShardingColumn")
        self.default_column = ctx.string(column, f"{key}.defaultShardingColumn") if column is not None else None
        self._load_algorithms(rule)
        self._load_generators(rule)
        default_db = self._strategy(rule.get("defaultDatabaseStrategy"), f"{key}.defaultDatabaseStrategy")
        default_table = self._strategy(rule.get("defaultTableStrategy"), f"{key}.defaultTableStrategy")
        default_keygen = self._key_generate(rule.get("defaultKeyGenerateStrategy"), f"{key}.defaultKeyGenerateStrategy")
        # the resharding window's defaults (routing.model.DualRouting)
        self.old_db = self._strategy(rule.get("oldDatabaseStrategy"), f"{key}.oldDatabaseStrategy")
        self.old_table = self._strategy(rule.get("oldTableStrategy"), f"{key}.oldTableStrategy")

        tables: dict[str, TableRule] = {}
        for logic, conf in ctx.mapping(rule.get("tables"), f"{key}.tables").items():
            tkey = f"{key}.tables.{logic}"
            table = self._table(str(logic), conf, tkey, default_db, default_table, default_keygen)
            if table.logic_table.lower() in tables:
                raise ctx.error(f"table {logic!r} is configured twice", tkey)
            tables[table.logic_table.lower()] = table
        for logic, conf in ctx.mapping(rule.get("autoTables"), f"{key}.autoTables").items():
            tkey = f"{key}.autoTables.{logic}"
            if isinstance(conf, Mapping) and any(k in conf for k in ("oldDatabaseStrategy", "oldTableStrategy",
                                                                      "dualRouting")):
                raise ctx.error("a resharding window (oldDatabaseStrategy / oldTableStrategy / dualRouting) needs "
                                "a table of 'tables' with actualDataNodes, not an auto table", tkey)
            if str(logic).lower() in tables:
                raise ctx.error(f"table {logic!r} is configured in both tables and autoTables", tkey)
            tables[str(logic).lower()] = self._auto_table(str(logic), conf, tkey, default_keygen)
        groups = self._binding_groups(rule.get("bindingTables"), tables)
        legacy = {t.lower() for t in ctx.names(rule.get("broadcastTables") or [], f"{key}.broadcastTables")}
        return ShardingRule(tables=tables, binding_groups=groups, default_sharding_column=self.default_column), legacy

    # -- algorithms and key generators --

    def _load_algorithms(self, rule: Mapping[str, Any]) -> None:
        akey = f"{self.key}.shardingAlgorithms"
        for name, conf in self.ctx.mapping(rule.get("shardingAlgorithms"), akey).items():
            ckey = f"{akey}.{name}"
            conf = self.ctx.mapping(conf, ckey, optional=False)
            self.ctx.check_keys(conf, {"type", "props"}, ckey)
            if conf.get("type") is None:
                raise self.ctx.error("the algorithm has no type", f"{ckey}.type")
            props = self.ctx.mapping(conf.get("props"), f"{ckey}.props")
            self.algorithms[str(name)] = create_algorithm(
                str(name), str(conf["type"]), props, file=self.ctx.file, key=ckey
            )

    def _load_generators(self, rule: Mapping[str, Any]) -> None:
        gkey = f"{self.key}.keyGenerators"
        for name, conf in self.ctx.mapping(rule.get("keyGenerators"), gkey).items():
            ckey = f"{gkey}.{name}"
            conf = self.ctx.mapping(conf, ckey, optional=False)
            self.ctx.check_keys(conf, {"type", "props"}, ckey)
            if conf.get("type") is None:
                raise self.ctx.error("the key generator has no type", f"{ckey}.type")
            props = self.ctx.mapping(conf.get("props"), f"{ckey}.props")
            self.generators[str(name)] = create_key_generator(
                str(name), str(conf["type"]), props, file=self.ctx.file, key=ckey
            )

    def _algorithm(self, name: Any, kind: str, key: str) -> tuple[str, Any]:
        name = self.ctx.string(name, key)
        algorithm = self.algorithms.get(name)
        if algorithm is None:
            raise self.ctx.error(f"sharding algorithm {name!r} is not defined in shardingAlgorithms", key)
        actual = algorithm_kind(algorithm)
        if actual != kind:
            raise self.ctx.error(
                f"sharding algorithm {name!r} ({algorithm.type_name}) cannot serve a {kind} strategy", key
            )
        return name, algorithm

    def _strategy(self, conf: Any, key: str) -> ShardingStrategy | None:
        """A strategy, or None when nothing is configured (the caller then applies its default)."""
        if conf is None:
            return None
        conf = self.ctx.mapping(conf, key, optional=False)
        given = [k for k in conf if k in _STRATEGY_KEYS]
        refuse_unknown_keys(conf, set(_STRATEGY_KEYS), file=self.ctx.file, prefix=f"{key}.")
        if not given:
            return None
        if len(given) > 1:
            raise self.ctx.error(f"only one strategy type may be given, got {', '.join(given)}", key)
        kind = given[0]
        skey = f"{key}.{kind}"
        if kind == "none":
            return NoneStrategy()
        body = self.ctx.mapping(conf[kind], skey)
        self.ctx.check_keys(body, _STRATEGY_KEYS[kind], skey)
        alg_name, algorithm = self._algorithm(body.get("shardingAlgorithmName"), kind, f"{skey}.shardingAlgorithmName")
        if kind == "standard":
            column = body.get("shardingColumn", self.default_column)
            if column is None:
                raise self.ctx.error(
                    "shardingColumn is required (or set defaultShardingColumn)", f"{skey}.shardingColumn"
                )
            return StandardStrategy(self.ctx.string(column, f"{skey}.shardingColumn"), alg_name, algorithm)
        if kind == "complex":
            columns = self.ctx.names(body.get("shardingColumns") or [], f"{skey}.shardingColumns")
            if not columns:
                raise self.ctx.error("shardingColumns is required", f"{skey}.shardingColumns")
            return ComplexStrategy(tuple(columns), alg_name, algorithm)
        return HintStrategy(alg_name, algorithm)

    def _key_generate(self, conf: Any, key: str) -> KeyGenerateStrategy | None:
        if conf is None:
            return None
        conf = self.ctx.mapping(conf, key, optional=False)
        self.ctx.check_keys(conf, {"column", "keyGeneratorName"}, key)
        column = self.ctx.string(conf.get("column"), f"{key}.column")
        name = self.ctx.string(conf.get("keyGeneratorName"), f"{key}.keyGeneratorName")
        generator = self.generators.get(name)
        if generator is None:
            raise self.ctx.error(f"key generator {name!r} is not defined in keyGenerators", f"{key}.keyGeneratorName")
        return KeyGenerateStrategy(column, name, generator)

    # -- tables --

    def _data_nodes(self, text: Any, logic: str, key: str) -> tuple[DataNode, ...]:
        if text is None:
            return tuple(DataNode(ds, logic) for ds in self.data_sources)
        if not isinstance(text, str):
            raise self.ctx.error(f"expected an inline expression string, got {_describe(text)}", key)
        try:
            names = InlineExpression.compile(text).expand()
        except ConfigError as exc:
            raise self.ctx.error(exc.reason, key) from None
        nodes: list[DataNode] = []
        seen: set[DataNode] = set()
        for item in names:
            ds, dot, table = item.partition(".")
            if not dot or not ds or not table:
                raise self.ctx.error(f"data node {item!r} is not 'data_source.table'", key)
            if ds not in self.known_sources:
                raise self.ctx.error(f"data node {item!r} names data source {ds!r}, which is not defined", key)
            node = DataNode(ds, table)
            if node in seen:
                raise self.ctx.error(f"data node {item!r} is listed twice", key)
            seen.add(node)
            nodes.append(node)
        if not nodes:
            raise self.ctx.error("no data node", key)
        return tuple(nodes)

    def _table(
        self,
        logic: str,
        conf: Any,
        key: str,
        default_db: ShardingStrategy | None,
        default_table: ShardingStrategy | None,
        default_keygen: KeyGenerateStrategy | None,
    ) -> TableRule:
        conf = self.ctx.mapping(conf, key)
        self.ctx.check_keys(conf, _TABLE_KEYS, key)
        nodes = self._data_nodes(conf.get("actualDataNodes"), logic, f"{key}.actualDataNodes")
        db = self._strategy(conf.get("databaseStrategy"), f"{key}.databaseStrategy")
        table = self._strategy(conf.get("tableStrategy"), f"{key}.tableStrategy")
        rule = TableRule(
            logic_table=logic,
            data_nodes=nodes,
            database_strategy=db or default_db or NoneStrategy(),
            table_strategy=table or default_table or NoneStrategy(),
            key_generate=self._key_generate(conf.get("keyGenerateStrategy"), f"{key}.keyGenerateStrategy")
            or default_keygen,
            window=self._window(
                conf, key, db or default_db or NoneStrategy(), table or default_table or NoneStrategy()
            ),
        )
        sources = rule.data_sources
        tables = list(dict.fromkeys(n.table for n in nodes))
        self._check_inline(rule.database_strategy, sources, db is not None, f"{key}.databaseStrategy", "data sources")
        self._check_inline(rule.table_strategy, tables, table is not None, f"{key}.tableStrategy", "actual tables")
        return rule

    def _window(
        self, conf: Mapping[str, Any], key: str, new_db: ShardingStrategy, new_table: ShardingStrategy
    ) -> DualRouting | None:
        """The table's resharding window: its own old strategies, else the rule's; None without any."""
        old_db = self._strategy(conf.get("oldDatabaseStrategy"), f"{key}.oldDatabaseStrategy") or self.old_db
        old_table = self._strategy(conf.get("oldTableStrategy"), f"{key}.oldTableStrategy") or self.old_table
        dkey = f"{key}.dualRouting"
        dual = self.ctx.mapping(conf.get("dualRouting"), dkey)
        self.ctx.check_keys(dual, {"keyColumn", "versionColumn"}, dkey)
        if old_db is None and old_table is None:
            if dual:
                raise self.ctx.error("dualRouting needs an oldDatabaseStrategy or oldTableStrategy (the table's or "
                                     "the rule's) saying where rows not yet moved live", dkey)
            return None
        key_column = dual.get("keyColumn")
        version = dual.get("versionColumn")
        return DualRouting(
            database_strategy=old_db or new_db,
            table_strategy=old_table or new_table,
            key_column=self.ctx.string(key_column, f"{dkey}.keyColumn") if key_column is not None else None,
            version_column=self.ctx.string(version, f"{dkey}.versionColumn") if version is not None else None,
        )

    def _check_inline(self, strategy: ShardingStrategy, targets: list[str], own: bool, key: str, what: str) -> None:
        """For a modulo-style INLINE expression over an integer column, every result must be a target.

        Checked only when cheap and meaningful: the expression has ``%``/``floorMod`` (so it is meant to
        cover all residues) and binds only the sharding column. A table's own strategy fails loading;
        an inherited default only warns (the table may never be queried by that column).
        """
        if not isinstance(strategy, StandardStrategy) or not isinstance(strategy.algorithm, InlineShardingAlgorithm):
            return
        expression = strategy.algorithm.expression
        if not expression.uses_modulo or {v.lower() for v in expression.free_variables} != {strategy.column.lower()}:
            return
        results = strategy.algorithm.sample_results(strategy.column, range(INLINE_CHECK_SAMPLES))
        if results is None:
            return
        outside = sorted(results - set(targets))
        if not outside:
            return
        message = (
            f"sharding algorithm {strategy.algorithm_name!r} ({expression.text}) routes to {', '.join(outside)}, "
            f"which {'is' if len(outside) == 1 else 'are'} not among the {what} {', '.join(targets)}"
        )
        if own:
            raise self.ctx.error(message, key)
        self.ctx.warn(message, key)

    def _auto_table(self, logic: str, conf: Any, key: str, default_keygen: KeyGenerateStrategy | None) -> TableRule:
        conf = self.ctx.mapping(conf, key)
        self.ctx.check_keys(conf, _AUTO_TABLE_KEYS, key)
        raw_sources = conf.get("actualDataSources")
        if raw_sources is None:
            sources = list(self.data_sources)
        else:
            text = ",".join(self.ctx.names(raw_sources, f"{key}.actualDataSources"))
            try:
                sources = InlineExpression.compile(text).expand()
            except ConfigError as exc:
                raise self.ctx.error(exc.reason, f"{key}.actualDataSources") from None
        for ds in sources:
            if ds not in self.known_sources:
                raise self.ctx.error(f"data source {ds!r} is not defined", f"{key}.actualDataSources")
        if not sources:
            raise self.ctx.error("no data source", f"{key}.actualDataSources")
        skey = f"{key}.shardingStrategy"
        strategy = self._strategy(conf.get("shardingStrategy"), skey)
        if not isinstance(strategy, StandardStrategy):
            raise self.ctx.error("an auto table needs a standard sharding strategy", skey)
        if not isinstance(strategy.algorithm, AutoTableAlgorithm):
            raise self.ctx.error(
                f"sharding algorithm {strategy.algorithm_name!r} ({strategy.algorithm.type_name}) is not an auto-table "
                "algorithm (MOD, HASH_MOD, VOLUME_RANGE, BOUNDARY_RANGE, AUTO_INTERVAL, CONSISTENT_HASH)",
                f"{skey}.standard.shardingAlgorithmName",
            )
        try:
            amount = strategy.algorithm.auto_tables_amount()
        except ConfigError as exc:
            raise self.ctx.error(exc.reason, f"{skey}.standard.shardingAlgorithmName") from None
        prefix = conf.get("actualTablePrefix")
        prefix = self.ctx.string(prefix, f"{key}.actualTablePrefix") if prefix is not None else f"{logic}_"
        nodes = tuple(DataNode(sources[i % len(sources)], f"{prefix}{i}") for i in range(amount))
        return TableRule(
            logic_table=logic,
            data_nodes=nodes,
            database_strategy=NoneStrategy(),
            table_strategy=strategy,
            key_generate=self._key_generate(conf.get("keyGenerateStrategy"), f"{key}.keyGenerateStrategy")
            or default_keygen,
            auto=True,
        )

    # -- binding tables --

    def _binding_groups(self, conf: Any, tables: Mapping[str, TableRule]) -> tuple[tuple[str, ...], ...]:
        key = f"{self.key}.bindingTables"
        if conf is None:
            return ()
        if not isinstance(conf, list):
            raise self.ctx.error(f"expected a list of 'a,b' groups, got {_describe(conf)}", key)
        groups: list[tuple[str, ...]] = []
        for n, item in enumerate(conf):
            gkey = f"{key}[{n}]"
            if isinstance(item, str) and ":" in item:
                item = item.split(":", 1)[1]  # "name:t_order,t_order_item"
            names = [t.lower() for t in self.ctx.names(item, gkey)]
            for name in names:
                if name not in tables:
                    raise self.ctx.error(f"binding table {name!r} is not a sharded table of this rule", gkey)
            first = tables[names[0]] if names else None
            for name in names[1:]:
                other = tables[name]
                assert first is not None
                if len(first.data_nodes) != len(other.data_nodes) or [d.data_source for d in first.data_nodes] != [
                    d.data_source for d in other.data_nodes
                ]:
                    raise self.ctx.error(
                        f"binding tables {first.logic_table!r} and {other.logic_table!r} have different layouts "
                        f"({len(first.data_nodes)} vs {len(other.data_nodes)} data nodes on "
                        f"{first.data_sources} vs {other.data_sources}); bound tables must pair 1:1",
                        gkey,
                    )
            groups.append(tuple(dict.fromkeys(names)))
        return tuple(groups)
