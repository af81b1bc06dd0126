"""The `!SHADOW` rule read from a database's YAML (ShardingSphere 5.5's `YamlShadowRuleConfiguration`).

    - !SHADOW
      dataSources:
        shadowDataSource: {productionDataSourceName: db, shadowDataSourceName: shadow_db}
      tables:
        t_order: {dataSourceNames: [shadowDataSource], shadowAlgorithmNames: [user-id-insert-match, sql-hint]}
      shadowAlgorithms:
        user-id-insert-match: {type: VALUE_MATCH, props: {operation: insert, column: user_id, value: 0}}
        sql-hint: {type: SQL_HINT}
      defaultShadowAlgorithmName: sql-hint

A shadow data source (`shadowDataSource`) is a logical data source the other rules name (a single table lives
on it, a sharding rule's actual data nodes name it); it stands for its production data source, and for its
shadow one when the statement is shadow. The checks are ShardingSphere's (`ShadowRuleConfigurationChecker`),
and every key is checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from routing.config import expect_mapping, refuse_unknown_keys
from routing.errors import ConfigError

_RULE_KEYS = {"dataSources", "tables", "shadowAlgorithms", "defaultShadowAlgorithmName"}
_SOURCE_KEYS = {"productionDataSourceName", "shadowDataSourceName"}
_TABLE_KEYS = {"dataSourceNames", "shadowAlgorithmNames"}
_ALGORITHM_KEYS = {"type", "props"}
OPERATIONS = ("select", "insert", "update", "delete")
TYPES = ("VALUE_MATCH", "REGEX_MATCH", "SQL_HINT")


@dataclass(frozen=True)
class ShadowAlgorithm:
    """VALUE_MATCH / REGEX_MATCH: a column's value in a statement of one operation; SQL_HINT: the statement's
    `/* SHARDINGSPHERE_HINT: SHADOW=true */`."""

    name: str
    type: str
    props: Mapping[str, Any]
    operation: str = ""  # select / insert / update / delete (the column algorithms)
    column: str = ""  # lower case
    value: str = ""  # VALUE_MATCH: compared with the value's text
    regex: re.Pattern[str] | None = None  # REGEX_MATCH: matched against the whole of the value's text

    @property
    def is_hint(self) -> bool:
        return self.type == "SQL_HINT"

    def matches(self, value: object) -> bool:
        """Whether one value of the column makes the statement shadow (the text Java's String.valueOf gives)."""
        text = java_text(value)
        if self.type == "VALUE_MATCH":
            return text == self.value
        assert self.regex is not None
        return self.regex.fullmatch(text) is not None


def java_text(value: object) -> str:
    """`String.valueOf` of the value as ShardingSphere sees it: booleans as true/false, bytes as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "surrogateescape")
    return str(value)


@dataclass(frozen=True)
class ShadowTable:
    name: str
    data_sources: tuple[str, ...]  # shadow data source names
    algorithms: tuple[ShadowAlgorithm, ...]


@dataclass(frozen=True)
class ShadowRule:
    """The rule: shadow data sources (logical name -> (production, shadow)), shadow tables by lower-case name."""

    data_sources: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    tables: Mapping[str, ShadowTable] = field(default_factory=dict)
    algorithms: Mapping[str, ShadowAlgorithm] = field(default_factory=dict)
    default_algorithm: ShadowAlgorithm | None = None
    # read/write splitting group -> the shadow data source that is its write data source: the group's writes
    # (and primary reads) are shadow-decided, its replicas' reads are not (ShardingSphere's router order)
    groups: Mapping[str, str] = field(default_factory=dict)

    def mappings_of(self, table: str) -> dict[str, str]:
        """Production -> shadow data source of the shadow data sources a shadow table names."""
        return {self.data_sources[n][0]: self.data_sources[n][1] for n in self.tables[table].data_sources}

    def all_mappings(self) -> dict[str, str]:
        return {prod: shadow for prod, shadow in self.data_sources.values()}


_mapping = expect_mapping  # (routing.config)


def _names(value: Any, file: str | None, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if not isinstance(value, list):
        raise ConfigError("expected a list of names", file=file, key=key)
    return tuple(str(v) for v in value)


def _prop(props: Mapping[str, Any], name: str) -> str | None:
    value = props.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _algorithm(name: str, body: Mapping[str, Any], file: str | None, where: str) -> ShadowAlgorithm:
    refuse_unknown_keys(body, _ALGORITHM_KEYS, file=file, prefix=f"{where}.")
    kind = str(body.get("type") or "").strip().upper()
    if kind not in TYPES:
        raise ConfigError(
            f"unknown shadow algorithm type {body.get('type')!r} (shardproxy implements {', '.join(TYPES)})",
            file=file,
            key=f"{where}.type",
        )
    props = _mapping(body.get("props"), file, f"{where}.props")
    if kind == "SQL_HINT":
        return ShadowAlgorithm(name, kind, props)
    column = _prop(props, "column")
    if column is None:
        raise ConfigError("Column shadow algorithm column cannot be null", file=file, key=f"{where}.props.column")
    operation = _prop(props, "operation")
    if operation is None or operation.lower() not in OPERATIONS:
        raise ConfigError(
            f"Column shadow algorithm operation must be one of [{', '.join(OPERATIONS)}]",
            file=file,
            key=f"{where}.props.operation",
        )
    if kind == "VALUE_MATCH":
        value = _prop(props, "value")
        if value is None:
            raise ConfigError(
                "Column value match shadow algorithm value cannot be null.", file=file, key=f"{where}.props.value"
            )
        return ShadowAlgorithm(name, kind, props, operation.lower(), column.lower(), value=value)
    regex = _prop(props, "regex")
    if regex is None:
        raise ConfigError(
            "Column regex match shadow algorithm regex cannot be null.", file=file, key=f"{where}.props.regex"
        )
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise ConfigError(f"regex {regex!r} does not compile: {exc}", file=file, key=f"{where}.props.regex") from None
    return ShadowAlgorithm(name, kind, props, operation.lower(), column.lower(), regex=pattern)


def load_shadow_rule(rule: Mapping[str, Any], physical: Sequence[str], file: str | None, key: str) -> ShadowRule:
    """The rule of one `- !SHADOW` entry at `key` of `file`; `physical`: the database's data sources."""
    refuse_unknown_keys(rule, _RULE_KEYS, file=file, prefix=f"{key}.")
    algorithms: dict[str, ShadowAlgorithm] = {}
    for name, body in _mapping(rule.get("shadowAlgorithms"), file, f"{key}.shadowAlgorithms").items():
        where = f"{key}.shadowAlgorithms.{name}"
        algorithms[str(name)] = _algorithm(str(name), _mapping(body, file, where), file, where)
    default = None
    default_name = rule.get("defaultShadowAlgorithmName")
    if default_name is not None:
        default = algorithms.get(str(default_name))
        if default is None or not default.is_hint:
            raise ConfigError(
                "the default shadow algorithm must be a defined SQL_HINT algorithm",
                file=file,
                key=f"{key}.defaultShadowAlgorithmName",
            )
    sources: dict[str, tuple[str, str]] = {}
    for name, body in _mapping(rule.get("dataSources"), file, f"{key}.dataSources").items():
        where = f"{key}.dataSources.{name}"
        body = _mapping(body, file, where)
        refuse_unknown_keys(body, _SOURCE_KEYS, file=file, prefix=f"{where}.")
        pair = []
        for part in ("productionDataSourceName", "shadowDataSourceName"):
            ds = body.get(part)
            if not isinstance(ds, str) or ds not in physical:
                raise ConfigError(
                    f"{part} {ds!r} is no data source of this database (dataSources: {', '.join(physical)})",
                    file=file,
                    key=f"{where}.{part}",
                )
            pair.append(ds)
        sources[str(name)] = (pair[0], pair[1])
    tables: dict[str, ShadowTable] = {}
    for name, body in _mapping(rule.get("tables"), file, f"{key}.tables").items():
        where = f"{key}.tables.{name}"
        body = _mapping(body, file, where)
        refuse_unknown_keys(body, _TABLE_KEYS, file=file, prefix=f"{where}.")
        names = _names(body.get("dataSourceNames"), file, f"{where}.dataSourceNames")
        for ds in names:
            if ds not in sources:
                raise ConfigError(
                    f"{ds!r} is no shadow data source of this rule (dataSources: {', '.join(sources) or 'none'})",
                    file=file,
                    key=f"{where}.dataSourceNames",
                )
        algorithm_names = _names(body.get("shadowAlgorithmNames"), file, f"{where}.shadowAlgorithmNames")
        if not algorithm_names:
            raise ConfigError(
                "a shadow table needs shadowAlgorithmNames", file=file, key=f"{where}.shadowAlgorithmNames"
            )
        for a in algorithm_names:
            if a not in algorithms:
                raise ConfigError(
                    f"shadow algorithm {a!r} is not defined under shadowAlgorithms",
                    file=file,
                    key=f"{where}.shadowAlgorithmNames",
                )
        tables[str(name).lower()] = ShadowTable(str(name), names, tuple(algorithms[a] for a in algorithm_names))
    return ShadowRule(sources, tables, algorithms, default)


def with_groups(rule: ShadowRule, doc_rules: Sequence[Any]) -> ShadowRule:
    """`rule` knowing the `!READWRITE_SPLITTING` groups whose writeDataSourceName is one of its data sources."""
    groups: dict[str, str] = {}
    for other in doc_rules:
        if not isinstance(other, Mapping) or str(other.get("__rule__", "")).upper() != "READWRITE_SPLITTING":
            continue
        raw = other.get("dataSourceGroups", other.get("dataSources"))
        for name, group in raw.items() if isinstance(raw, Mapping) else ():
            g = group.get("staticStrategy", group) if isinstance(group, Mapping) else {}
            write = g.get("writeDataSourceName") if isinstance(g, Mapping) else None
            if isinstance(write, str) and write in rule.data_sources:
                groups[str(name)] = write
    return replace(rule, groups=groups) if groups else rule


__all__ = ["OPERATIONS", "ShadowAlgorithm", "ShadowRule", "ShadowTable", "java_text", "load_shadow_rule", "with_groups"]
