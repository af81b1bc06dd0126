"""Rows of the RQL statements (SHOW SHARDING ALGORITHMS, SHOW DEFAULT SHARDING STRATEGY, COUNT ... RULE ...),
with ShardingSphere 5.5.2's column names and value formats.

Pure functions of a logical database's configuration as loaded (`DatabaseConfig.doc`, the parsed YAML:
what ShardingSphere's executors read from the rule *configuration*), of its `DatabaseRules` (what the
kernel routes with) and of the actual tables the backends reported. Values are text, as ShardingSphere's
`LocalDataQueryResultRow` makes them: nothing is NULL (absent is ""), props are JSON objects with sorted
keys (`{"algorithm-expression":"ds_${user_id % 2}"}`), empty props are "".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from routing.model import DatabaseRules

RULE_KEY = "__rule__"

ALGORITHM_COLUMNS = ("name", "type", "props")  # SHOW SHARDING ALGORITHMS / KEY GENERATORS / AUDITORS, UNUSED ...
DEFAULT_STRATEGY_COLUMNS = ("name", "type", "sharding_column", "sharding_algorithm_name", "sharding_algorithm_type",
                            "sharding_algorithm_props")
REFERENCE_COLUMNS = ("name", "sharding_table_reference")
BROADCAST_COLUMNS = ("broadcast_table",)
SINGLE_TABLE_COLUMNS = ("table_name", "storage_unit_name")
DEFAULT_SINGLE_COLUMNS = ("storage_unit_name",)
COUNT_COLUMNS = ("rule_name", "database", "count")
USED_COLUMNS = ("type", "name")  # SHOW RULES USED STORAGE UNIT, SHOW SHARDING TABLE RULES USED ALGORITHM ...

Row = tuple[str, ...]


# --- reading the configuration -------------------------------------------------------------------------------


def rules_of(doc: Mapping[str, Any] | None, kind: str) -> list[Mapping[str, Any]]:
    """The rules tagged `!KIND` in the database's document."""
    raw = (doc or {}).get("rules") or []
    return [r for r in raw if isinstance(r, Mapping) and str(r.get(RULE_KEY, "")).upper() == kind]


def sharding_rule(doc: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    found = rules_of(doc, "SHARDING")
    return found[0] if found else None


def as_mapping(value: Any) -> Mapping[str, Any]:
    """A section of a loaded configuration, or an empty one where it is absent or not a mapping."""
    return value if isinstance(value, Mapping) else {}


_mapping = as_mapping


def find_name(section: Mapping[str, Any], name: str) -> str | None:
    """The key of `section` that is `name` compared case-insensitively, as a rule's tables are named (None: none)."""
    lowered = name.lower()
    return next((k for k in section if str(k).lower() == lowered), None)


def drop_unused(rule: Mapping[str, Any], key: str, used: set[str]) -> None:
    """Remove from the rule's `key` section (its algorithms or encryptors) the entries no table uses any more: an
    RDL change leaves no definition behind that nothing names."""
    section = rule.get(key)
    if isinstance(section, dict):
        for name in [n for n in section if n not in used]:
            del section[name]


def names(value: Any) -> list[str]:
    """A YAML list of names, or one comma-separated string (as routing.config reads them)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            out.extend(names(item) if isinstance(item, list) else [str(item).strip()])
        return [n for n in out if n]
    return [str(value)]


def props_text(props: Any) -> str:
    """Props as ShardingSphere prints them: a JSON object with sorted keys, "" when there are none."""
    if not isinstance(props, Mapping) or not props:
        return ""
    ordered = {str(k): props[k] for k in sorted(props, key=str)}
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False, default=str)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _algorithm_rows(algorithms: Any, only: Iterable[str] | None = None) -> list[Row]:
    wanted = set(only) if only is not None else None
    rows = []
    for name, conf in _mapping(algorithms).items():
        if wanted is not None and str(name) not in wanted:
            continue
        conf = _mapping(conf)
        rows.append((str(name), _text(conf.get("type")), props_text(conf.get("props"))))
    return rows


def _strategy_body(conf: Any) -> tuple[str, Mapping[str, Any]] | None:
    """(standard | complex | hint | none, its body) of a strategy mapping, None when none is configured."""
    for kind in ("standard", "complex", "hint", "none"):
        if isinstance(conf, Mapping) and kind in conf:
            return kind, _mapping(conf[kind])
    return None


def _strategy_algorithm(conf: Any) -> str | None:
    found = _strategy_body(conf)
    if found is None or found[0] == "none":
        return None
    name = found[1].get("shardingAlgorithmName")
    return str(name) if name not in (None, "") else None


# --- SHOW SHARDING ALGORITHMS / KEY GENERATORS / AUDITORS, SHOW UNUSED ... -----------------------------------


def sharding_algorithm_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    rule = sharding_rule(doc)
    return _algorithm_rows(rule.get("shardingAlgorithms")) if rule else []


def key_generator_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    rule = sharding_rule(doc)
    return _algorithm_rows(rule.get("keyGenerators")) if rule else []


def auditor_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    rule = sharding_rule(doc)
    return _algorithm_rows(rule.get("auditors")) if rule else []


def _tables(rule: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(str(n), _mapping(c)) for n, c in _mapping(rule.get("tables")).items()]


def _auto_tables(rule: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(str(n), _mapping(c)) for n, c in _mapping(rule.get("autoTables")).items()]


def used_algorithms(rule: Mapping[str, Any]) -> set[str]:
    used: set[str] = set()
    for _, conf in _tables(rule):
        used.update(a for a in (_strategy_algorithm(conf.get("databaseStrategy")),
                                _strategy_algorithm(conf.get("tableStrategy"))) if a)
    for _, conf in _auto_tables(rule):
        used.update(a for a in (_strategy_algorithm(conf.get("shardingStrategy")),) if a)
    for key in ("defaultTableStrategy", "defaultDatabaseStrategy"):
        used.update(a for a in (_strategy_algorithm(rule.get(key)),) if a)
    return used


def used_key_generators(rule: Mapping[str, Any]) -> set[str]:
    used = {str(_mapping(c.get("keyGenerateStrategy")).get("keyGeneratorName"))
            for _, c in (*_tables(rule), *_auto_tables(rule)) if _mapping(c.get("keyGenerateStrategy"))}
    default = _mapping(rule.get("defaultKeyGenerateStrategy")).get("keyGeneratorName")
    if default:
        used.add(str(default))
    return used


def used_auditors(rule: Mapping[str, Any]) -> set[str]:
    used: set[str] = set()
    for _, conf in (*_tables(rule), *_auto_tables(rule)):
        used.update(names(_mapping(conf.get("auditStrategy")).get("auditorNames")))
    used.update(names(_mapping(rule.get("defaultAuditStrategy")).get("auditorNames")))
    return used


def unused_algorithm_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    rule = sharding_rule(doc)
    if rule is None:
        return []
    used = used_algorithms(rule)
    return [r for r in _algorithm_rows(rule.get("shardingAlgorithms")) if r[0] not in used]


def unused_key_generator_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    rule = sharding_rule(doc)
    if rule is None:
        return []
    used = used_key_generators(rule)
    return [r for r in _algorithm_rows(rule.get("keyGenerators")) if r[0] not in used]


def unused_auditor_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    rule = sharding_rule(doc)
    if rule is None:
        return []
    used = used_auditors(rule)
    return [r for r in _algorithm_rows(rule.get("auditors")) if r[0] not in used]


def rules_used_algorithm_rows(doc: Mapping[str, Any] | None, algorithm: str) -> list[Row]:
    """SHOW SHARDING TABLE RULES USED ALGORITHM a: tables whose strategy (or, lacking one, the default
    strategy) names it, then auto tables."""
    rule = sharding_rule(doc)
    if rule is None:
        return []
    default_db = _strategy_algorithm(rule.get("defaultDatabaseStrategy")) == algorithm
    default_table = _strategy_algorithm(rule.get("defaultTableStrategy")) == algorithm
    rows: list[Row] = []
    for name, conf in _tables(rule):
        db, table = conf.get("databaseStrategy"), conf.get("tableStrategy")
        if (_strategy_algorithm(db) == algorithm or (db is None and default_db)
                or _strategy_algorithm(table) == algorithm or (table is None and default_table)):
            rows.append(("table", name))
    rows.extend(("auto_table", name) for name, conf in _auto_tables(rule)
                if _strategy_algorithm(conf.get("shardingStrategy")) == algorithm)
    return rows


def rules_used_key_generator_rows(doc: Mapping[str, Any] | None, generator: str) -> list[Row]:
    rule = sharding_rule(doc)
    if rule is None:
        return []
    def uses(conf: Mapping[str, Any]) -> bool:
        return str(_mapping(conf.get("keyGenerateStrategy")).get("keyGeneratorName")) == generator
    return [("table", n) for n, c in _tables(rule) if uses(c)] + [("auto_table", n) for n, c in _auto_tables(rule)
                                                                 if uses(c)]


def rules_used_auditor_rows(doc: Mapping[str, Any] | None, auditor: str) -> list[Row]:
    rule = sharding_rule(doc)
    if rule is None:
        return []
    def uses(conf: Mapping[str, Any]) -> bool:
        return auditor in names(_mapping(conf.get("auditStrategy")).get("auditorNames"))
    return [("table", n) for n, c in _tables(rule) if uses(c)] + [("auto_table", n) for n, c in _auto_tables(rule)
                                                                 if uses(c)]


# --- SHOW DEFAULT SHARDING STRATEGY ---------------------------------------------------------------------------


def default_strategy_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    """Two rows, TABLE then DATABASE, as ShardingSphere lists them."""
    rule = sharding_rule(doc)
    if rule is None:
        return []
    algorithms = _mapping(rule.get("shardingAlgorithms"))
    default_column = _text(rule.get("defaultShardingColumn"))
    rows = []
    for label, key in (("TABLE", "defaultTableStrategy"), ("DATABASE", "defaultDatabaseStrategy")):
        found = _strategy_body(rule.get(key))
        if found is None:
            rows.append((label, "", "", "", "", ""))
            continue
        kind, body = found
        if kind == "none":
            rows.append((label, "NONE", "", "", "", ""))
            continue
        if kind == "standard":
            column = _text(body.get("shardingColumn")) or default_column
        elif kind == "complex":
            column = ",".join(names(body.get("shardingColumns")))
        else:
            column = ""
        algorithm_name = _text(body.get("shardingAlgorithmName"))
        algorithm = _mapping(algorithms.get(algorithm_name))
        rows.append((label, kind.upper(), column, algorithm_name, _text(algorithm.get("type")),
                     props_text(algorithm.get("props"))))
    return rows


# --- SHOW SHARDING TABLE REFERENCE RULES ----------------------------------------------------------------------


def reference_name(reference: str) -> str:
    """The name of a `bindingTables` entry written without one (`t_order,t_order_item`). ShardingSphere
    makes up 16 random hex digits; these 16 are a digest of the tables, so they survive a restart."""
    return hashlib.md5(reference.encode(), usedforsecurity=False).hexdigest()[:16]


def binding_references(rule: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, "t_a,t_b") of every bindingTables entry (`name:t_a,t_b` or `t_a,t_b`)."""
    out = []
    for item in rule.get("bindingTables") or []:
        if isinstance(item, str) and ":" in item:
            name, _, reference = item.partition(":")
            out.append((name.strip(), ",".join(names(reference))))
        else:
            reference = ",".join(names(item))
            out.append((reference_name(reference), reference))
    return out


def reference_rule_rows(doc: Mapping[str, Any] | None, name: str | None = None) -> list[Row]:
    rule = sharding_rule(doc)
    if rule is None:
        return []
    return [(n, ref) for n, ref in binding_references(rule) if name is None or n.lower() == name.lower()]


# --- broadcast and single tables --------------------------------------------------------------------------------


def broadcast_tables(doc: Mapping[str, Any] | None) -> list[str]:
    """Every broadcast table as configured: `!BROADCAST` tables, then the legacy sharding broadcastTables."""
    out: dict[str, None] = {}
    for rule in rules_of(doc, "BROADCAST"):
        out.update(dict.fromkeys(names(rule.get("tables"))))
    rule = sharding_rule(doc)
    if rule is not None:
        out.update(dict.fromkeys(names(rule.get("broadcastTables"))))
    return list(out)


def broadcast_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    return [(t,) for t in broadcast_tables(doc)]


def single_tables(rules: DatabaseRules, tables_by_source: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    """(table, data source) of every table the kernel routes as a single table: found on a data source and
    neither an actual table of a sharded table nor a broadcast table; the first data source holding it wins
    (as routing does). Sorted by table name, as ShardingSphere sorts them."""
    taken: set[tuple[str, str]] = set()
    logic: set[str] = set()
    if rules.sharding is not None:
        for name, rule in rules.sharding.tables.items():
            logic.add(name.lower())
            taken.update((n.data_source, n.table.lower()) for n in rule.data_nodes)
    found: dict[str, tuple[str, str]] = {}
    for ds in rules.data_sources:
        for table in tables_by_source.get(ds, ()):
            low = table.lower()
            if (ds, low) in taken or low in rules.broadcast or low in logic or low in found:
                continue
            found[low] = (table, ds)
    return sorted(found.values(), key=lambda r: r[0])


def default_single_storage_unit_rows(doc: Mapping[str, Any] | None) -> list[Row]:
    for rule in rules_of(doc, "SINGLE"):
        default = rule.get("defaultDataSource")
        if default:
            return [(str(default),)]
    return [("RANDOM",)]


# --- COUNT ... RULE ------------------------------------------------------------------------------------------------


def count_rows(kind: str, database: str, doc: Mapping[str, Any] | None, rules: DatabaseRules,
               single_count: int, groups: int) -> list[Row]:
    """COUNT SHARDING RULE (sharding_table, sharding_table_reference), COUNT BROADCAST RULE, COUNT
    READWRITE_SPLITTING RULE, COUNT SINGLE TABLE; nothing when the database has no such rule."""
    kind = kind.upper()
    if kind == "SHARDING":
        rule = sharding_rule(doc)
        if rule is None:
            return []
        tables = len(_tables(rule)) + len(_auto_tables(rule))
        return [("sharding_table", database, str(tables)),
                ("sharding_table_reference", database, str(len(binding_references(rule))))]
    if kind == "BROADCAST":
        tables = broadcast_tables(doc)
        return [("broadcast_table", database, str(len(tables)))] if tables or rules_of(doc, "BROADCAST") else []
    if kind == "READWRITE_SPLITTING":
        return [("readwrite_splitting", database, str(groups))] if rules_of(doc, "READWRITE_SPLITTING") else []
    if kind == "SINGLE":
        return [("single", database, str(single_count))]
    return []


# --- SHOW RULES USED STORAGE UNIT ------------------------------------------------------------------------------


def rules_used_storage_unit_rows(doc: Mapping[str, Any] | None, rules: DatabaseRules, unit: str,
                                 groups: Mapping[str, Sequence[str]]) -> list[Row]:
    """("sharding", table) for each sharded table with a data node on the storage unit (directly or through
    the read/write splitting group it belongs to; auto tables first, as ShardingSphere lists them), then
    ("readwrite_splitting", group) for each group it is the primary or a replica of, then ("shadow", rule) for
    each shadow data source it is the production or the shadow unit of (`InUsedShadowStorageUnitRetriever`).
    `groups`: group name -> its members."""
    low = unit.lower()
    shadow = rules.shadow.data_sources if rules.shadow is not None else {}
    shadows = [name for name, pair in shadow.items() if low in {p.lower() for p in pair}]
    via = ({low} | {g.lower() for g, members in groups.items() if low in {m.lower() for m in members}}
           | {name.lower() for name in shadows})
    rows: list[Row] = []
    rule = sharding_rule(doc)
    if rule is not None and rules.sharding is not None:
        for name, _ in (*_auto_tables(rule), *_tables(rule)):
            table = rules.sharding.table(name)
            if table is not None and any(ds.lower() in via for ds in table.data_sources):
                rows.append(("sharding", name))
    rows.extend(("readwrite_splitting", g) for g, members in groups.items()
                if low in {m.lower() for m in members})
    rows.extend(("shadow", name) for name in shadows)
    return rows
