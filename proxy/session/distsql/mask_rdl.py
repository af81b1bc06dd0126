"""CREATE / ALTER / DROP MASK RULE, in ShardingSphere 5.5.2's syntax, turned into the `!MASK` rule's YAML.

    CREATE MASK [TABLE] RULE [IF NOT EXISTS] t_user (COLUMNS(
        (NAME=telephone, TYPE(NAME='KEEP_FIRST_N_LAST_M', PROPERTIES('first-n'=3, 'last-m'=4, 'replace-char'='*'))),
        (NAME=password, TYPE(NAME='MD5')))), t_other (COLUMNS(...))
    ALTER MASK [TABLE] RULE t_user (COLUMNS(...))      -- the table's columns replaced
    DROP MASK [TABLE] RULE [IF EXISTS] t_user, t_other

As ShardingSphere converts them (`MaskRuleStatementConverter`): a column's algorithm is named
`<table>_<column>_<type>` in lower case, its props are kept as text; an algorithm no column uses any more goes
with the change. proxy.session.distsql.rdl validates the document as the file is loaded (an unknown type or a
bad property is refused with its key), writes it back and applies it.
"""

from __future__ import annotations

import copy
import re
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
from proxy.session.distsql.rules import RULE_KEY, as_mapping, drop_unused, find_name

__all__ = ["MASK_KINDS", "mask_change"]

MASK_KINDS = frozenset({"create_mask_rule", "alter_mask_rule", "drop_mask_rule"})

# a column definition is a bare parenthesised list: named COLUMN( for the definitions' parser
_BARE = re.compile(r"(COLUMNS\s*\(|\)\s*,)\s*\(", re.I)


_mapping = as_mapping  # (proxy.session.distsql.rules)


def _column(table: str, item: Item, algorithms: dict[str, dict[str, Any]]) -> tuple[str, dict[str, str]]:
    if not isinstance(item, Call) or item.upper != "COLUMN":
        raise DistSQLError(1064, f"{table}: expected (NAME=..., TYPE(NAME='...')), got {_show(item)}", "42000")
    name: str | None = None
    algorithm: dict[str, Any] | None = None
    for arg in item.args:
        if isinstance(arg, Assign) and arg.upper == "NAME" and isinstance(arg.value, Atom):
            name = arg.value.text
        elif isinstance(arg, Call) and arg.upper == "TYPE":
            algorithm = typed_algorithm(arg, f"{table}.{name or '?'}")
        else:
            raise DistSQLError(1064, f"{table}: unexpected {_show(arg)} in a column definition", "42000")
    if not name or algorithm is None:
        raise DistSQLError(1064, f"{table}: a column needs NAME= and TYPE(NAME='...')", "42000")
    algorithm_name = f"{table}_{name}_{algorithm['type']}".lower()
    algorithms[algorithm_name] = algorithm
    return name, {"maskAlgorithm": algorithm_name}


def _definitions(body: str) -> list[tuple[str, dict[str, Any], dict[str, dict[str, Any]]]]:
    """(table, its YAML, its algorithms) of each `t (COLUMNS(...))` of the statement."""
    out = []
    seen: set[str] = set()
    for item in parse_items(_BARE.sub(lambda m: m.group(1) + "COLUMN(", body)):
        if not isinstance(item, Call) or len(item.args) != 1 or not isinstance(item.args[0], Call) or (
                item.args[0].upper != "COLUMNS"):  # fmt: skip
            raise DistSQLError(1064, f"expected table (COLUMNS((NAME=..., TYPE(...)), ...)), got {_show(item)}",
                               "42000")  # fmt: skip
        if item.name.lower() in seen:
            raise _error(f"Duplicate mask rule names `{item.name}` in the statement")
        seen.add(item.name.lower())
        algorithms: dict[str, dict[str, Any]] = {}
        columns = dict(_column(item.name, c, algorithms) for c in item.args[0].args)
        out.append((item.name, {"columns": columns}, algorithms))
    return out


def _used(rule: Mapping[str, Any]) -> set[str]:
    return {str(_mapping(c).get("maskAlgorithm")) for t in _mapping(rule.get("tables")).values()
            for c in _mapping(_mapping(t).get("columns")).values()}  # fmt: skip


def mask_change(kind: str, body: str, doc: dict[str, Any], quiet: bool, database: str) -> tuple[dict[str, Any], str]:
    """The document after CREATE / ALTER / DROP MASK RULE, and what changed."""
    doc = copy.deepcopy(doc)
    rules = doc.setdefault("rules", [])
    rule = next((r for r in rules if isinstance(r, dict) and str(r.get(RULE_KEY, "")).upper() == "MASK"), None)
    changed: list[str] = []
    if kind == "drop_mask_rule":
        names = _names(body, "table")
        tables = _mapping(rule.get("tables")) if rule else {}
        missing = [n for n in names if find_name(tables, n) is None]
        if missing and not quiet:
            raise _error(f"Mask rule `{', '.join(missing)}` does not exist in database `{database}`")
        for n in names:
            key = find_name(tables, n)
            if rule is not None and key is not None:
                del rule["tables"][key]
                changed.append(n)
    else:
        definitions = _definitions(body)
        if rule is None:
            if kind == "alter_mask_rule":
                raise _error(f"Mask rule does not exist in database `{database}`")
            rule = {RULE_KEY: "MASK", "tables": {}, "maskAlgorithms": {}}
            rules.append(rule)
        tables = rule.get("tables") if isinstance(rule.get("tables"), dict) else {}
        rule["tables"] = tables
        algorithms = rule.get("maskAlgorithms") if isinstance(rule.get("maskAlgorithms"), dict) else {}
        rule["maskAlgorithms"] = algorithms
        missing = [t for t, _c, _a in definitions if find_name(tables, t) is None]
        if kind == "alter_mask_rule" and missing:
            raise _error(f"Mask rule `{', '.join(missing)}` does not exist in database `{database}`")
        for table, conf, used in definitions:
            existing = find_name(tables, table)
            if kind == "create_mask_rule" and existing is not None:
                if quiet:
                    continue
                raise _error(f"Duplicate mask rule names `{table}` in database `{database}`")
            if existing is not None and existing != table:  # (ALTER: the table keeps its place)
                tables = rule["tables"] = {table if k == existing else k: v for k, v in tables.items()}
            tables[table] = conf
            algorithms.update(used)
            changed.append(table)
    if rule is not None:
        drop_unused(rule, "maskAlgorithms", _used(rule))
    return doc, ", ".join(changed)
