"""What each RDL statement changes in a logical database's document (step 1 of `rdl.py`'s list).

`plan_change` parses a statement into the YAML it stands for and applies it to a copy of the document, as
ShardingSphere converts it: sharding and broadcast table rules, with the algorithms and key generators
they name; REGISTER / UNREGISTER STORAGE UNIT; the encrypt, mask and shadow RDL through their own modules
(encrypt_rules, mask_rdl, shadow_rdl). Nothing here is validated, written or applied: `rdl.py`
does that with the `Change` this returns.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from proxy.session.distsql import rules as rq
from proxy.session.distsql.definitions import (
    Assign,
    Atom,
    Call,
    _error,
    _literal,
    _names,
    _properties,
    _show,
    parse_items,
    table_definition,
)
from proxy.session.distsql.encrypt_rules import ENCRYPT_KINDS, encrypt_change
from proxy.session.distsql.errors import DistSQLError
from proxy.session.distsql.grammar import DistSQL
from proxy.session.distsql.mask_rdl import MASK_KINDS, mask_change
from proxy.session.distsql.shadow_rdl import SHADOW_KINDS, shadow_change

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase


RULE_KEY = "__rule__"


# --- editing the document ----------------------------------------------------------------------------------


def _rules_list(doc: dict[str, Any]) -> list[Any]:
    rules = doc.get("rules")
    if not isinstance(rules, list):
        rules = doc["rules"] = []
    return rules


def _sharding(doc: dict[str, Any], create: bool) -> dict[str, Any] | None:
    for rule in _rules_list(doc):
        if isinstance(rule, dict) and str(rule.get(RULE_KEY, "")).upper() == "SHARDING":
            return rule
    if not create:
        return None
    rule = {RULE_KEY: "SHARDING"}
    _rules_list(doc).insert(0, rule)
    return rule


def _section(rule: dict[str, Any], key: str) -> dict[str, Any]:
    section = rule.get(key)
    if not isinstance(section, dict):
        section = rule[key] = {}
    return section


def _find_table(rule: dict[str, Any] | None, name: str) -> tuple[str, str] | None:
    """(tables | autoTables, the key as written) of a sharded table, by name in any case."""
    if rule is None:
        return None
    for section in ("tables", "autoTables"):
        for key in rule.get(section) or {}:
            if str(key).lower() == name.lower():
                return section, str(key)
    return None


def _remove_table(rule: dict[str, Any], name: str) -> dict[str, Any] | None:
    found = _find_table(rule, name)
    if found is None:
        return None
    section, key = found
    conf = rule[section].pop(key)
    if not rule[section]:
        del rule[section]
    return conf if isinstance(conf, dict) else {}


def _drop_unused(rule: dict[str, Any], algorithms: set[str], generators: set[str]) -> None:
    """Remove the algorithms / key generators a changed or dropped table used, when nothing uses them now."""
    used_algorithms, used_generators = rq.used_algorithms(rule), rq.used_key_generators(rule)
    for key, names, used in (("shardingAlgorithms", algorithms, used_algorithms),
                             ("keyGenerators", generators, used_generators)):
        section = rule.get(key)
        if isinstance(section, dict):
            for name in names - used:
                section.pop(name, None)
            if not section:
                del rule[key]


def _table_uses(conf: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    algorithms = {a for a in (rq._strategy_algorithm(conf.get(k)) for k in
                              ("databaseStrategy", "tableStrategy", "shardingStrategy")) if a}
    generator = (conf.get("keyGenerateStrategy") or {}).get("keyGeneratorName")
    return algorithms, {str(generator)} if generator else set()


def _binding_tables(rule: Mapping[str, Any]) -> set[str]:
    return {t.lower() for _, ref in rq.binding_references(rule) for t in ref.split(",")}


def _broadcast_lower(doc: Mapping[str, Any]) -> set[str]:
    return {t.lower() for t in rq.broadcast_tables(doc)}


_HEADER = {
    "create_sharding_table_rule": re.compile(r"^CREATE\s+SHARDING\s+TABLE\s+RULE\s+(IF\s+NOT\s+EXISTS\s+)?(.+)$",
                                             re.I | re.S),
    "alter_sharding_table_rule": re.compile(r"^ALTER\s+SHARDING\s+TABLE\s+RULE\s+()(.+)$", re.I | re.S),
    "drop_sharding_table_rule": re.compile(r"^DROP\s+SHARDING\s+TABLE\s+RULE\s+(IF\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "create_broadcast_table_rule": re.compile(r"^CREATE\s+BROADCAST\s+TABLE\s+RULE\s+(IF\s+NOT\s+EXISTS\s+)?(.+)$",
                                              re.I | re.S),
    "drop_broadcast_table_rule": re.compile(r"^DROP\s+BROADCAST\s+TABLE\s+RULE\s+(IF\s+EXISTS\s+)?(.+)$",
                                            re.I | re.S),
    "create_encrypt_rule": re.compile(r"^CREATE\s+ENCRYPT\s+RULE\s+(IF\s+NOT\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "alter_encrypt_rule": re.compile(r"^ALTER\s+ENCRYPT\s+RULE\s+()(.+)$", re.I | re.S),
    "drop_encrypt_rule": re.compile(r"^DROP\s+ENCRYPT\s+RULE\s+(IF\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "create_mask_rule": re.compile(r"^CREATE\s+MASK\s+(?:TABLE\s+)?RULE\s+(IF\s+NOT\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "alter_mask_rule": re.compile(r"^ALTER\s+MASK\s+(?:TABLE\s+)?RULE\s+()(.+)$", re.I | re.S),
    "drop_mask_rule": re.compile(r"^DROP\s+MASK\s+(?:TABLE\s+)?RULE\s+(IF\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "create_shadow_rule": re.compile(r"^CREATE\s+SHADOW\s+RULE\s+(IF\s+NOT\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "alter_shadow_rule": re.compile(r"^ALTER\s+SHADOW\s+RULE\s+()(.+)$", re.I | re.S),
    "drop_shadow_rule": re.compile(r"^DROP\s+SHADOW\s+RULE\s+(IF\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "drop_shadow_algorithm": re.compile(r"^DROP\s+SHADOW\s+ALGORITHM\s+(IF\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "create_default_shadow_algorithm": re.compile(r"^CREATE\s+DEFAULT\s+SHADOW\s+ALGORITHM\s+(IF\s+NOT\s+EXISTS\s+)?"
                                                  r"(.+)$", re.I | re.S),
    "alter_default_shadow_algorithm": re.compile(r"^ALTER\s+DEFAULT\s+SHADOW\s+ALGORITHM\s+()(.+)$", re.I | re.S),
    "drop_default_shadow_algorithm": re.compile(r"^DROP\s+DEFAULT\s+SHADOW\s+ALGORITHM(\s+IF\s+EXISTS)?()\s*;?\s*$",
                                                re.I | re.S),
    "register_storage_unit": re.compile(r"^REGISTER\s+STORAGE\s+UNIT\s+(IF\s+NOT\s+EXISTS\s+)?(.+)$", re.I | re.S),
    "unregister_storage_unit": re.compile(r"^UNREGISTER\s+STORAGE\s+UNIT\s+(IF\s+EXISTS\s+)?(.+?)"
                                          r"(?:\s+IGNORE\s+(SINGLE\s*,\s*BROADCAST|BROADCAST\s*,\s*SINGLE|SINGLE|BROADCAST)"
                                          r"\s+TABLES)?\s*;?\s*$", re.I | re.S),
}


@dataclass
class Change:
    """What one statement does to a database: the new document, and the storage units it adds / removes."""

    doc: dict[str, Any]
    added_units: list[str] = field(default_factory=list)
    removed_units: list[str] = field(default_factory=list)
    summary: str = ""


def plan_change(d: DistSQL, db: LogicalDatabase, single_tables: dict[str, list[str]]) -> Change:
    """The document after the statement (not applied yet). `single_tables`: storage unit -> the single tables
    found on it (UNREGISTER refuses to strand them)."""
    m = _HEADER[d.kind].match(d.text.strip())
    if m is None:  # pragma: no cover - the grammar matched the same words
        raise DistSQLError(1064, "You have an error in your DistSQL syntax", "42000")
    quiet = bool(m.group(1))
    body = m.group(2).strip().rstrip(";").strip()
    doc = copy.deepcopy(dict(db.config.doc or {"databaseName": db.name, "dataSources": {}}))
    name = db.name
    if d.kind in ENCRYPT_KINDS:  # (proxy.session.distsql.encrypt_rules)
        doc, summary = encrypt_change(d.kind, body, doc, quiet, name)
        return Change(doc, summary=summary)
    if d.kind in MASK_KINDS:  # (proxy.session.distsql.mask_rdl)
        doc, summary = mask_change(d.kind, body, doc, quiet, name)
        return Change(doc, summary=summary)
    if d.kind in SHADOW_KINDS:  # (proxy.session.distsql.shadow_rdl)
        doc, summary = shadow_change(d.kind, body, doc, quiet, name)
        return Change(doc, summary=summary)
    if d.kind in ("create_sharding_table_rule", "alter_sharding_table_rule"):
        definitions = [table_definition(item) for item in parse_items(body)]
        seen: set[str] = set()
        for definition in definitions:
            if definition.name.lower() in seen:
                raise _error(f"Duplicate sharding rule names `{definition.name}` in the statement")
            seen.add(definition.name.lower())
        rule = _sharding(doc, create=True)
        assert rule is not None
        broadcast = _broadcast_lower(doc)
        changed: list[str] = []
        for definition in definitions:
            existing = _find_table(rule, definition.name)
            if d.kind.startswith("create"):
                if existing is not None:
                    if quiet:
                        continue
                    raise _error(f"Duplicate sharding rule names `{definition.name}` in database `{name}`")
                if definition.name.lower() in broadcast:
                    raise _error(f"`{definition.name}` is a broadcast table in database `{name}`: DROP BROADCAST "
                                 "TABLE RULE first")
                old_algorithms: set[str] = set()
                old_generators: set[str] = set()
            else:
                if existing is None:
                    raise _error(f"Sharding rule `{definition.name}` does not exist in database `{name}`")
                old = _remove_table(rule, definition.name) or {}
                old_algorithms, old_generators = _table_uses(old)
            _section(rule, "shardingAlgorithms").update(definition.algorithms)
            if definition.generators:
                _section(rule, "keyGenerators").update(definition.generators)
            _section(rule, "autoTables" if definition.auto else "tables")[definition.name] = definition.conf
            _drop_unused(rule, old_algorithms, old_generators)
            changed.append(definition.name)
        return Change(doc, summary=", ".join(changed))
    if d.kind == "drop_sharding_table_rule":
        names = _names(body, "table")
        rule = _sharding(doc, create=False)
        missing = [n for n in names if _find_table(rule, n) is None]
        if missing and not quiet:
            raise _error(f"Sharding rule `{', '.join(missing)}` does not exist in database `{name}`")
        if rule is not None:
            bound = sorted(n for n in names if n.lower() in _binding_tables(rule))
            if bound:
                raise _error(f"Sharding rule `{', '.join(bound)}` in database `{name}` is still used by a sharding "
                             "table reference (bindingTables)")
            for n in names:
                old = _remove_table(rule, n)
                if old is not None:
                    _drop_unused(rule, *_table_uses(old))
        return Change(doc, summary=", ".join(n for n in names if n not in missing))
    if d.kind == "create_broadcast_table_rule":
        names = _names(body, "table")
        present = _broadcast_lower(doc)
        duplicate = [n for n in names if n.lower() in present]
        if duplicate and not quiet:
            raise _error(f"Duplicate broadcast rule names `{', '.join(duplicate)}` in database `{name}`")
        sharded = [n for n in names if _find_table(_sharding(doc, create=False), n) is not None]
        if sharded:
            raise _error(f"`{', '.join(sharded)}` is a sharded table in database `{name}`: DROP SHARDING TABLE "
                         "RULE first")
        new = list(dict.fromkeys(n for n in names if n.lower() not in present))
        if new:
            rule = next((r for r in _rules_list(doc) if isinstance(r, dict)
                         and str(r.get(RULE_KEY, "")).upper() == "BROADCAST"), None)
            if rule is None:
                rule = {RULE_KEY: "BROADCAST", "tables": []}
                _rules_list(doc).append(rule)
            rule["tables"] = [*rq.names(rule.get("tables")), *new]
        return Change(doc, summary=", ".join(new))
    if d.kind == "drop_broadcast_table_rule":
        names = _names(body, "table")
        low = {n.lower() for n in names}
        missing = [n for n in names if n.lower() not in _broadcast_lower(doc)]
        if missing and not quiet:
            raise _error(f"Broadcast rule `{', '.join(missing)}` does not exist in database `{name}`")
        rules = _rules_list(doc)
        for rule in list(rules):
            if isinstance(rule, dict) and str(rule.get(RULE_KEY, "")).upper() == "BROADCAST":
                rule["tables"] = [t for t in rq.names(rule.get("tables")) if t.lower() not in low]
                if not rule["tables"]:
                    rules.remove(rule)
        sharding = _sharding(doc, create=False)
        if sharding is not None and sharding.get("broadcastTables") is not None:  # the legacy place
            sharding["broadcastTables"] = [t for t in rq.names(sharding["broadcastTables"]) if t.lower() not in low]
            if not sharding["broadcastTables"]:
                del sharding["broadcastTables"]
        return Change(doc, summary=", ".join(n for n in names if n not in missing))
    if d.kind == "register_storage_unit":
        return _register(doc, db, body, quiet)
    return _unregister(doc, db, m, quiet, single_tables)


_POOL_PROPS = {  # PROPERTIES of a storage unit -> the dataSources key (HikariCP's names are accepted too)
    "maxpoolsize": "maxPoolSize", "maximumpoolsize": "maxPoolSize", "minpoolsize": "minPoolSize",
    "minimumidle": "minPoolSize", "connectiontimeoutmilliseconds": "connectionTimeoutMilliseconds",
    "connectiontimeout": "connectionTimeoutMilliseconds", "idletimeoutmilliseconds": "idleTimeoutMilliseconds",
    "idletimeout": "idleTimeoutMilliseconds", "maxlifetimemilliseconds": "maxLifetimeMilliseconds",
    "maxlifetime": "maxLifetimeMilliseconds",
}


def _register(doc: dict[str, Any], db: LogicalDatabase, body: str, quiet: bool) -> Change:
    sources = doc.get("dataSources")
    if not isinstance(sources, dict):
        sources = doc["dataSources"] = {}
    added: list[str] = []
    for item in parse_items(body):
        if (isinstance(item, Assign) and item.upper == "CHECK_PRIVILEGES") or isinstance(item, Atom):
            continue  # CHECK_PRIVILEGES=SELECT, XA: shardproxy checks the connection by opening it
        if not isinstance(item, Call):
            raise DistSQLError(1064, f"expected a storage unit definition 'name (...)', got {_show(item)}", "42000")
        unit = item.name
        if any(str(n).lower() == unit.lower() for n in sources):
            if quiet:
                continue
            raise _error(f"Duplicate storage unit names `{unit}` in database `{db.name}`")
        values: dict[str, Any] = {}
        conf: dict[str, Any] = {}
        for arg in item.args:
            if isinstance(arg, Assign) and arg.upper in ("HOST", "PORT", "DB", "URL", "USER", "PASSWORD"):
                values[arg.upper] = _literal(arg.value, f"{unit}.{arg.key}")
            elif isinstance(arg, Call) and arg.upper == "PROPERTIES":
                for key, value in _properties(arg, unit).items():
                    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
                        value = int(value)
                    conf[_POOL_PROPS.get(key.lower(), key)] = value
            else:
                raise DistSQLError(1064, f"{unit}: unexpected {_show(arg)} in the storage unit definition", "42000")
        if "URL" in values:
            url = str(values["URL"])
        elif all(k in values for k in ("HOST", "PORT", "DB")):
            url = f"jdbc:mysql://{values['HOST']}:{values['PORT']}/{values['DB']}"
        else:
            raise DistSQLError(1064, f"{unit}: give HOST=..., PORT=..., DB=... or URL=...", "42000")
        if "USER" not in values:
            raise DistSQLError(1064, f"{unit}: USER=... is required", "42000")
        sources[unit] = {"url": url, "username": str(values["USER"]),
                         "password": "" if values.get("PASSWORD") is None else str(values["PASSWORD"]), **conf}
        added.append(unit)
    return Change(doc, added_units=added, summary=", ".join(added))


def _unregister(doc: dict[str, Any], db: LogicalDatabase, m: re.Match[str], quiet: bool,
                single_tables: dict[str, list[str]]) -> Change:
    names = _names(m.group(2), "storage unit")
    ignore = (m.group(3) or "").upper()
    sources = doc.get("dataSources") if isinstance(doc.get("dataSources"), dict) else {}
    assert isinstance(sources, dict)
    by_lower = {str(n).lower(): str(n) for n in sources}
    missing = [n for n in names if n.lower() not in by_lower]
    if missing and not quiet:
        raise _error(f"Storage unit `{', '.join(missing)}` does not exist in database `{db.name}`")
    groups: dict[str, list[str]] = {}
    for rule in rq.rules_of(doc, "READWRITE_SPLITTING"):
        raw = rule.get("dataSourceGroups") or rule.get("dataSources") or {}
        for group, conf in raw.items() if isinstance(raw, Mapping) else []:
            conf = conf if isinstance(conf, Mapping) else {}
            groups[str(group)] = [str(conf.get("writeDataSourceName")), *rq.names(conf.get("readDataSourceNames"))]
    removed: list[str] = []
    for n in names:
        if n.lower() not in by_lower:
            continue
        unit = by_lower[n.lower()]
        users = [f"{kind} rule {t}" for kind, t in rq.rules_used_storage_unit_rows(doc, db.rules, unit, groups)]
        single = next(iter(rq.rules_of(doc, "SINGLE")), None)
        if single is not None:
            if str(single.get("defaultDataSource") or "").lower() == unit.lower():
                users.append("single (defaultDataSource)")
            if any(p.split(".")[0].lower() == unit.lower() for p in rq.names(single.get("tables"))):
                users.append("single (tables)")
        if users:
            raise _error(f"Storage unit `{unit}` is still used by {', '.join(users)} in database `{db.name}`")
        if single_tables.get(unit) and "SINGLE" not in ignore:
            raise _error(f"Storage unit `{unit}` holds single tables ({', '.join(sorted(single_tables[unit])[:5])}); "
                         "move them, or add IGNORE SINGLE TABLES")
        if rq.broadcast_tables(doc) and "BROADCAST" not in ignore:
            raise _error(f"Storage unit `{unit}` holds copies of the broadcast tables; add IGNORE BROADCAST TABLES")
        del sources[unit]
        removed.append(unit)
    if not sources:
        raise _error(f"database `{db.name}` needs at least one storage unit")
    return Change(doc, removed_units=removed, summary=", ".join(removed))
