"""DistSQL of `!ENCRYPT` rules, in ShardingSphere 5.5.2's syntax and columns.

* `SHOW ENCRYPT RULES [FROM db]`, `SHOW ENCRYPT [TABLE] RULE t [FROM db]`: one row per logical column, with
  ShardingSphere's columns (`table`, `logic_column`, `cipher_column`, `assisted_query_column`,
  `like_query_column`, `encryptor_type`, `encryptor_props`, `assisted_query_type`, `assisted_query_props`,
  `like_query_type`, `like_query_props`); `COUNT ENCRYPT RULE [FROM db]`.
* `CREATE ENCRYPT RULE [IF NOT EXISTS] t (COLUMNS((NAME=c, CIPHER=c_cipher [, ASSISTED_QUERY_COLUMN=a]
  [, LIKE_QUERY_COLUMN=l], ENCRYPT_ALGORITHM(TYPE(NAME='AES', PROPERTIES(...))) [, ASSISTED_QUERY_ALGORITHM(...)]
  [, LIKE_QUERY_ALGORITHM(...)]), ...)), ...`, `ALTER ENCRYPT RULE` (same body: the table's columns replaced),
  `DROP ENCRYPT RULE [IF EXISTS] t, ...`: turned into the rule's YAML as ShardingSphere converts them
  (`EncryptRuleStatementConverter`: encryptors named `<table>_<column>`, `assist_<table>_<column>`,
  `like_<table>_<column>`), then validated, written back and applied by proxy.session.distsql.rdl like the
  sharding RDL. An encryptor no column uses any more goes with the change.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from proxy.session.distsql.definitions import Assign, Atom, Call, Item, _error, _literal, _names, _show, parse_items
from proxy.session.distsql.errors import DistSQLError
from proxy.session.distsql.rules import RULE_KEY, Row, as_mapping, drop_unused, find_name, props_text, rules_of

__all__ = ["ENCRYPT_COLUMNS", "ENCRYPT_KINDS", "encrypt_change", "encrypt_count_rows", "encrypt_rule_rows"]

ENCRYPT_COLUMNS = ("table", "logic_column", "cipher_column", "assisted_query_column", "like_query_column",
                   "encryptor_type", "encryptor_props", "assisted_query_type", "assisted_query_props",
                   "like_query_type", "like_query_props")  # fmt: skip
ENCRYPT_KINDS = frozenset({"create_encrypt_rule", "alter_encrypt_rule", "drop_encrypt_rule"})


_mapping = as_mapping  # (proxy.session.distsql.rules)


def encrypt_rule_rows(doc: Mapping[str, Any] | None, table: str | None = None) -> list[Row]:
    rows: list[Row] = []
    for rule in rules_of(doc, "ENCRYPT"):
        encryptors = _mapping(rule.get("encryptors"))
        for tname, tconf in _mapping(rule.get("tables")).items():
            name = str(_mapping(tconf).get("name") or tname)
            if table is not None and name.lower() != table.lower():
                continue
            for cname, cconf in _mapping(_mapping(tconf).get("columns")).items():
                cconf = _mapping(cconf)
                items = [_mapping(cconf.get(k)) for k in ("cipher", "assistedQuery", "likeQuery")]
                algorithms = [_mapping(encryptors.get(i.get("encryptorName"))) if i else {} for i in items]
                rows.append((
                    name, str(cconf.get("name") or cname),
                    *(str(i.get("name") or "") for i in items),
                    *(v for a in algorithms for v in (str(a.get("type") or ""), props_text(a.get("props")))),
                ))  # fmt: skip
    return rows


def encrypt_count_rows(doc: Mapping[str, Any] | None, database: str) -> list[Row]:
    found = rules_of(doc, "ENCRYPT")
    if not found:
        return []
    return [("encrypt", database, str(sum(len(_mapping(r.get("tables"))) for r in found)))]


# --- RDL --------------------------------------------------------------------------------------------------------

# a column definition is a bare parenthesised list: named COLUMN( for the definitions' parser
_BARE = re.compile(r"(COLUMNS\s*\(|\)\s*,)\s*\(", re.I)


def _type(call: Call, where: str) -> dict[str, Any]:
    """ENCRYPT_ALGORITHM(TYPE(NAME='AES', PROPERTIES('k'='v'))) -> {type, props} (the type as written)."""
    inner = call.args[0] if len(call.args) == 1 else None
    if not isinstance(inner, Call) or inner.upper != "TYPE":
        raise DistSQLError(1064, f"{where}: expected {call.name}(TYPE(NAME='...'))", "42000")
    out: dict[str, Any] = {}
    for item in inner.args:
        if isinstance(item, Assign) and item.upper == "NAME":
            out["type"] = str(_literal(item.value, f"{where}.NAME"))
        elif isinstance(item, Call) and item.upper == "PROPERTIES":
            props: dict[str, Any] = {}
            for prop in item.args:
                if not isinstance(prop, Assign):
                    raise DistSQLError(1064, f"{where}: PROPERTIES takes 'key'=value pairs, got {_show(prop)}", "42000")
                props[prop.key] = _literal(prop.value, f"{where}.PROPERTIES({prop.key!r})")
            out["props"] = props
        else:
            raise DistSQLError(1064, f"{where}: unexpected {_show(item)} in TYPE(...)", "42000")
    if "type" not in out:
        raise DistSQLError(1064, f"{where}: TYPE(...) needs NAME='...'", "42000")
    return out


def _column(table: str, item: Item, encryptors: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    if not isinstance(item, Call) or item.upper != "COLUMN":
        raise DistSQLError(1064, f"{table}: expected (NAME=..., CIPHER=..., ENCRYPT_ALGORITHM(...)), got "
                           f"{_show(item)}", "42000")  # fmt: skip
    values: dict[str, str] = {}
    algorithms: dict[str, dict[str, Any]] = {}
    for arg in item.args:
        if isinstance(arg, Assign) and isinstance(arg.value, Atom):
            key = {"ASSISTED_QUERY": "ASSISTED_QUERY_COLUMN", "LIKE_QUERY": "LIKE_QUERY_COLUMN"}.get(
                arg.upper, arg.upper
            )
            if key not in ("NAME", "CIPHER", "ASSISTED_QUERY_COLUMN", "LIKE_QUERY_COLUMN"):
                raise DistSQLError(1064, f"{table}: unknown {arg.key}=", "42000")
            values[key] = arg.value.text
        elif isinstance(arg, Call) and arg.upper in (
            "ENCRYPT_ALGORITHM",
            "ASSISTED_QUERY_ALGORITHM",
            "LIKE_QUERY_ALGORITHM",
        ):
            algorithms[arg.upper] = _type(arg, f"{table}.{arg.name}")
        else:
            raise DistSQLError(1064, f"{table}: unexpected {_show(arg)} in a column definition", "42000")
    name = values.get("NAME")
    if not name or "CIPHER" not in values or "ENCRYPT_ALGORITHM" not in algorithms:
        raise DistSQLError(1064, f"{table}: a column needs NAME=, CIPHER= and ENCRYPT_ALGORITHM(...)", "42000")
    conf: dict[str, Any] = {"cipher": {"name": values["CIPHER"], "encryptorName": f"{table}_{name}"}}
    encryptors[f"{table}_{name}"] = algorithms["ENCRYPT_ALGORITHM"]
    for column_key, algorithm_key, yaml_key, prefix in (
        ("ASSISTED_QUERY_COLUMN", "ASSISTED_QUERY_ALGORITHM", "assistedQuery", "assist"),
        ("LIKE_QUERY_COLUMN", "LIKE_QUERY_ALGORITHM", "likeQuery", "like"),
    ):
        if column_key in values:
            encryptor = f"{prefix}_{table}_{name}"
            conf[yaml_key] = {"name": values[column_key], "encryptorName": encryptor}
            if algorithm_key not in algorithms:
                raise DistSQLError(1064, f"{table}.{name}: {column_key} needs {algorithm_key}(...)", "42000")
            encryptors[encryptor] = algorithms[algorithm_key]
    return name, conf


def _definitions(body: str) -> list[tuple[str, dict[str, Any], dict[str, dict[str, Any]]]]:
    """(table, its YAML, its encryptors) of each `t (COLUMNS(...))` of the statement."""
    out = []
    for item in parse_items(_BARE.sub(lambda m: m.group(1) + "COLUMN(", body)):
        if not isinstance(item, Call) or len(item.args) != 1 or not isinstance(item.args[0], Call) or (
                item.args[0].upper != "COLUMNS"):  # fmt: skip
            raise DistSQLError(1064, f"expected table (COLUMNS(...)), got {_show(item)}", "42000")
        encryptors: dict[str, dict[str, Any]] = {}
        columns = dict(_column(item.name, c, encryptors) for c in item.args[0].args)
        out.append((item.name, {"columns": columns}, encryptors))
    return out


def _used(rule: Mapping[str, Any]) -> set[str]:
    return {str(_mapping(i).get("encryptorName")) for t in _mapping(rule.get("tables")).values()
            for c in _mapping(_mapping(t).get("columns")).values()
            for i in _mapping(c).values() if isinstance(i, Mapping)}  # fmt: skip


def encrypt_change(kind: str, body: str, doc: dict[str, Any], quiet: bool, database: str) -> tuple[dict[str, Any], str]:
    """The document after CREATE / ALTER / DROP ENCRYPT RULE, and what changed."""
    doc = copy.deepcopy(doc)
    rules = doc.setdefault("rules", [])
    found = [r for r in rules if isinstance(r, dict) and str(r.get(RULE_KEY, "")).upper() == "ENCRYPT"]
    rule = found[0] if found else None
    changed: list[str] = []
    if kind == "drop_encrypt_rule":
        names = _names(body, "table")
        tables = _mapping(rule.get("tables")) if rule else {}
        missing = [n for n in names if find_name(tables, n) is None]
        if missing and not quiet:
            raise _error(f"Encrypt rule `{', '.join(missing)}` does not exist in database `{database}`")
        if rule is not None:
            for n in names:
                key = find_name(rule["tables"], n) if isinstance(rule.get("tables"), dict) else None
                if key is not None:
                    del rule["tables"][key]
                    changed.append(n)
    else:
        definitions = _definitions(body)
        if rule is None:
            rule = {RULE_KEY: "ENCRYPT", "tables": {}, "encryptors": {}}
            rules.append(rule)
        tables = rule.setdefault("tables", {})
        encryptors = rule.setdefault("encryptors", {})
        for table, conf, used in definitions:
            existing = find_name(tables, table)
            if kind == "create_encrypt_rule" and existing is not None:
                if quiet:
                    continue
                raise _error(f"Duplicate encrypt rule names `{table}` in database `{database}`")
            if kind == "alter_encrypt_rule":
                if existing is None:
                    raise _error(f"Encrypt rule `{table}` does not exist in database `{database}`")
                del tables[existing]
            tables[table] = conf
            encryptors.update(used)
            changed.append(table)
    if rule is not None:
        drop_unused(rule, "encryptors", _used(rule))
    return doc, ", ".join(changed)
