"""The `!READWRITE_SPLITTING` rule read from a database's YAML: groups, load balancers, read-after-write.

Why its own module: proxy.config checks these keys at load time (errors with the file and key) and the
running group (proxy.backends.readwrite) is built from the result; neither then imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from routing.config import refuse_unknown_keys
from routing.errors import ConfigError

LOAD_BALANCER_TYPES = ("ROUND_ROBIN", "RANDOM", "WEIGHT")
TRANSACTIONAL_STRATEGIES = ("PRIMARY", "FIXED", "DYNAMIC")
READ_AFTER_WRITE_MODES = ("SESSION", "TRANSACTION", "GTID")

_GROUP_KEYS = {
    "writeDataSourceName", "readDataSourceNames", "transactionalReadQueryStrategy", "loadBalancerName",
    "readAfterWrite", "maxReplicationLagSeconds", "healthCheckIntervalMilliseconds", "gtidWaitTimeoutMilliseconds",
    "staticStrategy",
}  # fmt: skip
_RULE_KEYS = {"dataSourceGroups", "dataSources", "loadBalancers", "__rule__"}

DEFAULT_HEALTH_INTERVAL = 1.0
DEFAULT_GTID_WAIT = 0.5

Warn = Callable[[str], None]


# --- configuration --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupConfig:
    """One `dataSourceGroups` entry, checked. Durations in seconds; None = take the global prop / default."""

    name: str
    write: str
    reads: tuple[str, ...]
    load_balancer_type: str = "ROUND_ROBIN"
    load_balancer_props: Mapping[str, Any] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)
    transactional_read_query_strategy: str = "PRIMARY"
    read_after_write: str = "SESSION"
    max_lag_seconds: float | None = None
    health_interval: float | None = None
    gtid_wait: float | None = None


def _seconds(value: Any, scale: float, file: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"expected a number, got {value!r}", file=file, key=key)
    try:
        number = float(value)
    except ValueError as exc:
        raise ConfigError(f"expected a number, got {value!r}", file=file, key=key) from exc
    if number < 0:
        raise ConfigError(f"must not be negative, got {value!r}", file=file, key=key)
    return number * scale


def _choice(value: Any, allowed: Sequence[str], default: str, file: str, key: str) -> str:
    if value is None:
        return default
    text = str(value).strip().upper()
    if text not in allowed:
        raise ConfigError(f"expected one of {', '.join(allowed)}, got {value!r}", file=file, key=key)
    return text


def _shadow_sources(rules: Sequence[Mapping[str, Any]]) -> set[str]:
    """The `!SHADOW` rule's data source names: a group's write data source may be one (ShardingSphere splits
    reads from writes first, then the shadow rule picks production or shadow for the write side)."""
    out: set[str] = set()
    for rule in rules:
        if str(rule.get("__rule__", "")).upper() == "SHADOW" and isinstance(rule.get("dataSources"), Mapping):
            out |= {str(name) for name in rule["dataSources"]}
    return out


def parse_groups(
    rules: Sequence[Mapping[str, Any]], data_sources: Sequence[str], file: str, warn: Warn
) -> list[GroupConfig]:
    """The read/write splitting groups of one logical database; `ConfigError` names the key at fault."""
    groups: list[GroupConfig] = []
    seen: dict[str, str] = {}
    shadow = _shadow_sources(rules)
    for index, rule in enumerate(rules):
        if str(rule.get("__rule__", "")).upper() != "READWRITE_SPLITTING":
            continue
        key = f"rules[{index}]"
        refuse_unknown_keys(rule, _RULE_KEYS, file=file, prefix=f"{key}.")
        raw_groups = rule.get("dataSourceGroups", rule.get("dataSources")) or {}
        if not isinstance(raw_groups, Mapping):
            raise ConfigError("expected a mapping of group name to group", file=file, key=f"{key}.dataSourceGroups")
        balancers = rule.get("loadBalancers") or {}
        if not isinstance(balancers, Mapping):
            raise ConfigError("expected a mapping of name to load balancer", file=file, key=f"{key}.loadBalancers")
        for name, raw in raw_groups.items():
            gkey = f"{key}.dataSourceGroups.{name}"
            if not isinstance(raw, Mapping):
                raise ConfigError("expected a mapping", file=file, key=gkey)
            g: Mapping[str, Any] = raw.get("staticStrategy") if isinstance(raw.get("staticStrategy"), Mapping) else raw
            refuse_unknown_keys(raw, _GROUP_KEYS, file=file, prefix=f"{gkey}.")
            write = g.get("writeDataSourceName")
            if not isinstance(write, str) or not write:
                raise ConfigError("needs writeDataSourceName", file=file, key=f"{gkey}.writeDataSourceName")
            reads_raw = g.get("readDataSourceNames") or []
            if isinstance(reads_raw, str):
                reads = tuple(p.strip() for p in reads_raw.split(",") if p.strip())
            elif isinstance(reads_raw, list):
                reads = tuple(str(r) for r in reads_raw)
            else:
                raise ConfigError("expected a list of data source names", file=file, key=f"{gkey}.readDataSourceNames")
            for member in reads:
                if member in shadow:  # ShardingSphere would shadow a replica's reads: not implemented
                    raise ConfigError(
                        f"read data source {member!r} is a !SHADOW data source, which shardproxy "
                        "supports as the group's writeDataSourceName only",
                        file=file,
                        key=gkey,
                    )
            for member in (write, *reads):
                if member not in data_sources and member not in shadow:
                    raise ConfigError(f"data source {member!r} is not defined in dataSources", file=file, key=gkey)
                if member in seen:
                    raise ConfigError(f"data source {member!r} is already a member of group {seen[member]}",
                                      file=file, key=gkey)
                seen[member] = str(name)
            if str(name) in data_sources:
                raise ConfigError(f"group name {name!r} is also the name of a data source", file=file, key=gkey)
            if not reads:
                warn(f"{file}: {gkey}: no readDataSourceNames; every statement goes to {write}")
            lb_type, lb_props, weights = "ROUND_ROBIN", {}, {}
            lb_name = g.get("loadBalancerName")
            if lb_name is not None:
                lb = balancers.get(lb_name)
                if not isinstance(lb, Mapping):
                    raise ConfigError(f"load balancer {lb_name!r} is not defined in loadBalancers", file=file,
                                      key=f"{gkey}.loadBalancerName")
                lb_type = _choice(lb.get("type"), LOAD_BALANCER_TYPES, "ROUND_ROBIN", file,
                                  f"{key}.loadBalancers.{lb_name}.type")
                lb_props = dict(lb.get("props") or {})
                if lb_type == "WEIGHT":
                    for r in reads:
                        if r not in lb_props:
                            raise ConfigError(f"WEIGHT needs a weight for read data source {r!r} in props",
                                              file=file, key=f"{key}.loadBalancers.{lb_name}.props")
                        weights[r] = _seconds(lb_props[r], 1, file, f"{key}.loadBalancers.{lb_name}.props.{r}")
            max_lag = g.get("maxReplicationLagSeconds")
            interval = g.get("healthCheckIntervalMilliseconds")
            wait = g.get("gtidWaitTimeoutMilliseconds")
            groups.append(GroupConfig(
                name=str(name),
                write=write,
                reads=reads,
                load_balancer_type=lb_type,
                load_balancer_props=lb_props,
                weights=weights,
                transactional_read_query_strategy=_choice(
                    g.get("transactionalReadQueryStrategy"), TRANSACTIONAL_STRATEGIES, "PRIMARY", file,
                    f"{gkey}.transactionalReadQueryStrategy"),
                read_after_write=_choice(g.get("readAfterWrite"), READ_AFTER_WRITE_MODES, "SESSION", file,
                                         f"{gkey}.readAfterWrite"),
                max_lag_seconds=None if max_lag is None else _seconds(max_lag, 1, file,
                                                                      f"{gkey}.maxReplicationLagSeconds"),
                health_interval=None if interval is None else _seconds(
                    interval, 0.001, file, f"{gkey}.healthCheckIntervalMilliseconds"),
                gtid_wait=None if wait is None else _seconds(wait, 0.001, file, f"{gkey}.gtidWaitTimeoutMilliseconds"),
            ))
    return groups
