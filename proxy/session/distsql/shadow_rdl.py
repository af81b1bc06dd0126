"""The shadow RDL of ShardingSphere 5.5.2, turned into the `!SHADOW` rule's YAML.

    CREATE SHADOW RULE [IF NOT EXISTS] shadow_group (SOURCE=ds, SHADOW=ds_shadow,
        t_order (TYPE(NAME='SQL_HINT'), TYPE(NAME='VALUE_MATCH', PROPERTIES('operation'='insert', 'column'='user_id',
        'value'='0'))), t_item (TYPE(NAME='REGEX_MATCH', PROPERTIES(...)))), other_group (...)
    ALTER SHADOW RULE shadow_group (...)                       -- the rule's data sources and tables replaced
    DROP SHADOW RULE [IF EXISTS] shadow_group, ...
    CREATE DEFAULT SHADOW ALGORITHM [IF NOT EXISTS] TYPE(NAME='SQL_HINT')
    ALTER DEFAULT SHADOW ALGORITHM TYPE(NAME='SQL_HINT', PROPERTIES(...))
    DROP DEFAULT SHADOW ALGORITHM [IF EXISTS]
    DROP SHADOW ALGORITHM [IF EXISTS] name, ...

A shadow rule is a shadow data source (`dataSources.<rule>`: its production and shadow storage units) and the
tables it names (`tables.<t>.dataSourceNames`). As ShardingSphere names them (`ShadowDistSQLStatementVisitor`), a
table's algorithms are `<rule>_<table>_<type>_<index>` in lower case, the default one `default_shadow_algorithm`;
props are kept as text. A table several rules name takes the union of their algorithms (ShardingSphere merges
the tables of one statement so); an algorithm nothing uses any more goes with the change that left it unused.
The document is then validated as the file is loaded (proxy.session.distsql.rdl): an unknown type, a missing
`column` / `operation`, a default algorithm that is no SQL_HINT are refused with their key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from proxy.session.distsql.definitions import (
    Assign,
    Atom,
    Call,
    Item,
    _error,
    _names,
    _show,
    parse_items,
    typed_algorithm,
)
from proxy.session.distsql.errors import DistSQLError
from proxy.session.distsql.rules import RULE_KEY, drop_unused, names, rules_of

__all__ = ["DEFAULT_ALGORITHM", "SHADOW_KINDS", "shadow_change"]

SHADOW_KINDS = frozenset({"create_shadow_rule", "alter_shadow_rule", "drop_shadow_rule", "drop_shadow_algorithm",
                          "create_default_shadow_algorithm", "alter_default_shadow_algorithm",
                          "drop_default_shadow_algorithm"})  # fmt: skip
DEFAULT_ALGORITHM = "default_shadow_algorithm"


class _Definition:
    """One `rule (SOURCE=..., SHADOW=..., table (TYPE(...), ...), ...)` of a statement."""

    def __init__(self, item: Item) -> None:
        if not isinstance(item, Call):
            raise DistSQLError(1064, f"expected rule_name (SOURCE=..., SHADOW=..., table (TYPE(...)), ...), got "
                               f"{_show(item)}", "42000")  # fmt: skip
        self.name = item.name
        self.units: dict[str, str] = {}
        self.tables: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for arg in item.args:
            if isinstance(arg, Assign) and arg.upper in ("SOURCE", "SHADOW") and isinstance(arg.value, Atom):
                self.units[arg.upper] = arg.value.text
            elif isinstance(arg, Call) and arg.upper != "TYPE":
                if any(t.lower() == arg.name.lower() for t in self.tables):
                    raise _error(f"Duplicate shadow table `{arg.name}` in shadow rule `{self.name}`")
                if not arg.args:
                    raise DistSQLError(1064, f"{self.name}.{arg.name}: a shadow table needs TYPE(NAME='...')", "42000")
                algorithms = []
                for index, call in enumerate(arg.args):
                    if not isinstance(call, Call):
                        raise DistSQLError(
                            1064, f"{self.name}.{arg.name}: expected TYPE(...), got {_show(call)}", "42000"
                        )
                    conf = typed_algorithm(call, f"{self.name}.{arg.name}")
                    algorithms.append((f"{self.name}_{arg.name}_{conf['type']}_{index}".lower(), conf))
                self.tables[arg.name] = algorithms
            else:
                raise DistSQLError(1064, f"{self.name}: unexpected {_show(arg)} in a shadow rule definition", "42000")
        if set(self.units) != {"SOURCE", "SHADOW"} or not self.tables:
            raise DistSQLError(1064, f"{self.name}: a shadow rule needs SOURCE=..., SHADOW=... and at least one "
                               "table (TYPE(...))", "42000")  # fmt: skip


def _lower_find(keys: Any, name: str) -> str | None:
    return next((str(k) for k in keys if str(k).lower() == name.lower()), None)


def _section(rule: dict[str, Any], key: str) -> dict[str, Any]:
    section = rule.get(key)
    if not isinstance(section, dict):
        section = rule[key] = {}
    return section


def _table_sources(conf: Any) -> list[str]:
    return list(names(conf.get("dataSourceNames"))) if isinstance(conf, Mapping) else []


def _table_algorithms(conf: Any) -> list[str]:
    return list(names(conf.get("shadowAlgorithmNames"))) if isinstance(conf, Mapping) else []


def _release(rule: dict[str, Any], rule_names: set[str]) -> None:
    """Take shadow rules (data sources) out of every table; a table left with none goes."""
    tables = _section(rule, "tables")
    for table in list(tables):
        sources = _table_sources(tables[table])
        kept = [s for s in sources if s.lower() not in rule_names]
        if not kept:
            del tables[table]
        elif kept != sources:
            tables[table] = {**tables[table], "dataSourceNames": kept}


def _used(rule: Mapping[str, Any]) -> set[str]:
    used = {a for t in (rule.get("tables") or {}).values() for a in _table_algorithms(t)}
    if rule.get("defaultShadowAlgorithmName"):
        used.add(str(rule["defaultShadowAlgorithmName"]))
    return used


def _drop_unused(rule: dict[str, Any]) -> None:
    _section(rule, "shadowAlgorithms")
    drop_unused(rule, "shadowAlgorithms", _used(rule))


def _add(rule: dict[str, Any], definition: _Definition) -> None:
    _section(rule, "dataSources")[definition.name] = {
        "productionDataSourceName": definition.units["SOURCE"],
        "shadowDataSourceName": definition.units["SHADOW"],
    }
    tables, algorithms = _section(rule, "tables"), _section(rule, "shadowAlgorithms")
    for table, used in definition.tables.items():
        key = _lower_find(tables, table) or table
        sources, names_ = _table_sources(tables.get(key)), _table_algorithms(tables.get(key))
        tables[key] = {
            "dataSourceNames": [*sources, *([] if definition.name in sources else [definition.name])],
            "shadowAlgorithmNames": [*names_, *(n for n, _ in used if n not in names_)],
        }
        algorithms.update(used)


def _check_units(definitions: list[_Definition], doc: Mapping[str, Any], database: str) -> None:
    units = doc.get("dataSources") if isinstance(doc.get("dataSources"), Mapping) else {}
    missing = list(dict.fromkeys(u for d in definitions for u in d.units.values() if _lower_find(units, u) is None))
    if missing:
        raise _error(f"Storage units `{', '.join(missing)}` do not exist in database `{database}`")


def _check_names(definitions: list[_Definition], doc: Mapping[str, Any], database: str) -> None:
    seen: set[str] = set()
    for d in definitions:
        if d.name.lower() in seen:
            raise _error(f"Duplicate shadow rule names `{d.name}` in the statement")
        seen.add(d.name.lower())
    taken = {str(n).lower() for n in (doc.get("dataSources") or {})}
    for other in rules_of(doc, "READWRITE_SPLITTING"):
        groups = other.get("dataSourceGroups") or other.get("dataSources") or {}
        taken.update(str(g).lower() for g in groups)
    clash = [d.name for d in definitions if d.name.lower() in taken]
    if clash:
        raise _error(
            f"Invalid shadow rules `{', '.join(clash)}`: the name is already a storage unit or a data source "
            f"group in database `{database}`"
        )


def _rule(doc: dict[str, Any], create: bool) -> dict[str, Any] | None:
    rules = doc.get("rules")
    if not isinstance(rules, list):
        rules = doc["rules"] = []
    found = next((r for r in rules if isinstance(r, dict) and str(r.get(RULE_KEY, "")).upper() == "SHADOW"), None)
    if found is None and create:
        found = {RULE_KEY: "SHADOW", "dataSources": {}, "tables": {}, "shadowAlgorithms": {}}
        rules.append(found)
    return found


def _default_algorithm(body: str) -> dict[str, Any]:
    items = parse_items(body)
    if len(items) != 1 or not isinstance(items[0], Call):
        raise DistSQLError(1064, f"expected TYPE(NAME='SQL_HINT', ...), got {body[:40]!r}", "42000")
    return typed_algorithm(items[0], "default shadow algorithm")


def shadow_change(kind: str, body: str, doc: dict[str, Any], quiet: bool, database: str) -> tuple[dict[str, Any], str]:
    """The document after one shadow RDL statement, and what changed."""
    doc = copy.deepcopy(doc)
    if kind in ("create_shadow_rule", "alter_shadow_rule"):
        definitions = [_Definition(item) for item in parse_items(body)]
        _check_names(definitions, doc, database)
        rule = _rule(doc, create=kind == "create_shadow_rule")
        if rule is None:
            raise _error(f"Shadow rule does not exist in database `{database}`")
        existing = _section(rule, "dataSources")
        if kind == "create_shadow_rule":
            duplicate = [d.name for d in definitions if _lower_find(existing, d.name) is not None]
            if duplicate and not quiet:
                raise _error(f"Duplicate shadow rule names `{', '.join(duplicate)}` in database `{database}`")
            definitions = [d for d in definitions if d.name not in duplicate]
        else:
            missing = [d.name for d in definitions if _lower_find(existing, d.name) is None]
            if missing:
                raise _error(f"Shadow rules `{', '.join(missing)}` do not exist in database `{database}`")
        _check_units(definitions, doc, database)
        for d in definitions:
            old = _lower_find(existing, d.name)
            if old is not None:
                del existing[old]
                _release(rule, {old.lower()})
            _add(rule, d)
        _drop_unused(rule)
        return doc, ", ".join(d.name for d in definitions)
    rule = _rule(doc, create=kind == "create_default_shadow_algorithm")
    if rule is None:
        if quiet:
            return doc, ""
        raise _error(f"Shadow rule does not exist in database `{database}`")
    algorithms = _section(rule, "shadowAlgorithms")
    if kind == "drop_shadow_rule":
        wanted = _names(body, "shadow rule")
        sources = _section(rule, "dataSources")
        missing = [n for n in wanted if _lower_find(sources, n) is None]
        if missing and not quiet:
            raise _error(f"Shadow rules `{', '.join(missing)}` do not exist in database `{database}`")
        dropped = [key for key in (_lower_find(sources, n) for n in wanted) if key is not None]
        for key in dropped:
            del sources[key]
        _release(rule, {k.lower() for k in dropped})
        _drop_unused(rule)
        return doc, ", ".join(dropped)
    if kind == "drop_shadow_algorithm":
        wanted = _names(body, "shadow algorithm")
        missing = [n for n in wanted if n not in algorithms]
        if missing and not quiet:
            raise _error(f"Shadow algorithms `{', '.join(missing)}` do not exist in database `{database}`")
        default = rule.get("defaultShadowAlgorithmName")
        if default in wanted:
            raise _error(
                f"Shadow algorithm `{default}` is the default shadow algorithm of database `{database}`: "
                "DROP DEFAULT SHADOW ALGORITHM drops it"
            )
        for name in wanted:
            users = [str(t) for t, conf in (rule.get("tables") or {}).items() if name in _table_algorithms(conf)]
            if users:
                raise _error(
                    f"Shadow algorithm `{name}` in database `{database}` is still in use by shadow table "
                    f"`{', '.join(users)}`"
                )
        for name in wanted:
            algorithms.pop(name, None)
        return doc, ", ".join(n for n in wanted if n not in missing)
    if kind == "drop_default_shadow_algorithm":
        default = rule.pop("defaultShadowAlgorithmName", None)
        if default is None:
            if quiet:
                return doc, ""
            raise _error(f"Default shadow algorithm does not exist in database `{database}`")
        _drop_unused(rule)
        return doc, str(default)
    algorithm = _default_algorithm(body)
    if kind == "create_default_shadow_algorithm":
        if DEFAULT_ALGORITHM in algorithms:
            if quiet:
                return doc, ""
            raise _error(
                f"Shadow algorithm `{DEFAULT_ALGORITHM}` already exists in database `{database}`: ALTER "
                "DEFAULT SHADOW ALGORITHM changes it"
            )
    elif DEFAULT_ALGORITHM not in algorithms:
        raise _error(
            f"Shadow algorithm `{DEFAULT_ALGORITHM}` does not exist in database `{database}`: CREATE DEFAULT "
            "SHADOW ALGORITHM first"
        )
    algorithms[DEFAULT_ALGORITHM] = algorithm
    rule["defaultShadowAlgorithmName"] = DEFAULT_ALGORITHM
    _drop_unused(rule)
    return doc, DEFAULT_ALGORITHM
