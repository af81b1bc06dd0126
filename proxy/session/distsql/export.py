"""`EXPORT DATABASE CONFIGURATION`: a logical database's configuration as YAML, the way ShardingSphere
prints it (`databaseName`, `dataSources` with each one's url, username, password and pool settings, then
`rules` with their tags, inner keys sorted, each table's `logicTable`, `none: ''`), from the
configuration in use. The text loads back as a `database-*.yaml` file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from proxy.config.model import DatabaseConfig

RULE_KEY = "__rule__"
COLUMNS = ("result",)

# mappings whose keys are names the user chose (kept in their order); every other mapping is a
# configuration object, whose keys ShardingSphere prints sorted
_NAMED = frozenset({
    "tables", "autoTables", "shardingAlgorithms", "keyGenerators", "auditors", "dataSourceGroups", "dataSources",
    "loadBalancers", "props", "encryptors", "maskAlgorithms", "shadowAlgorithms", "columns",
})  # fmt: skip
_TABLE_LISTS = frozenset({"tables", "autoTables"})


class _Tagged(dict[str, Any]):
    def __init__(self, tag: str, body: Mapping[str, Any]) -> None:
        super().__init__(body)
        self.tag = tag


class _Dumper(yaml.SafeDumper):
    pass


def _represent_tagged(dumper: yaml.SafeDumper, data: _Tagged) -> yaml.Node:
    return dumper.represent_mapping("!" + data.tag, dict(data))


_Dumper.add_representer(_Tagged, _represent_tagged)


def _normalise(value: Any, parent: str | None = None) -> Any:
    if isinstance(value, Mapping):
        if RULE_KEY in value:
            tag = str(value[RULE_KEY])
            body = _normalise_body({k: v for k, v in value.items() if k != RULE_KEY}, None)
            if tag.upper() == "SHARDING":  # ShardingSphere prints each table's logicTable
                for key in _TABLE_LISTS:
                    if isinstance(body.get(key), dict):
                        body[key] = {name: dict(sorted({**conf, "logicTable": name}.items()))
                                     if isinstance(conf, dict) else conf for name, conf in body[key].items()}
            return _Tagged(tag, body)
        return _normalise_body(value, parent)
    if isinstance(value, list):
        return [_normalise(v, parent) for v in value]
    return value


def _normalise_body(value: Mapping[str, Any], parent: str | None) -> dict[str, Any]:
    keys = list(value) if parent in _NAMED else sorted(value, key=str)
    out: dict[str, Any] = {}
    for key in keys:
        item = value[key]
        if key == "none" and item is None:
            out[key] = ""  # `none:` as ShardingSphere prints it
            continue
        out[str(key)] = _normalise(item, str(key))
    return out


def _data_source(config: DatabaseConfig, name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    c = config.data_sources[name]
    url = raw.get("url", raw.get("jdbcUrl")) or f"jdbc:mysql://{c.host}:{c.port}/{c.database}"
    out: dict[str, Any] = {"password": c.password, "url": str(url), "username": c.username}
    for key, value in raw.items():
        if key not in ("url", "jdbcUrl", "username", "password") and value is not None:
            out[str(key)] = value
    return out


def database_yaml(config: DatabaseConfig) -> str:
    doc = config.doc or {}
    raw_sources = doc.get("dataSources") if isinstance(doc.get("dataSources"), Mapping) else {}
    out: dict[str, Any] = {"databaseName": config.name}
    if config.data_sources:
        out["dataSources"] = {name: _data_source(config, name, raw_sources.get(name) or {})
                              for name in config.data_sources}
    rules = [_normalise(r) for r in doc.get("rules") or [] if isinstance(r, Mapping) and _non_empty(r)]
    if rules:
        out["rules"] = rules
    if isinstance(doc.get("props"), Mapping) and doc["props"]:
        out["props"] = dict(doc["props"])
    return yaml.dump(out, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)


def _non_empty(rule: Mapping[str, Any]) -> bool:
    return any(v not in (None, "", [], {}) for k, v in rule.items() if k != RULE_KEY)


def write_file(path: str, text: str) -> Path:
    """Write `text` to `path` (relative to the proxy's working directory, as ShardingSphere does), through a
    temporary file in the same directory and a rename, so that no reader sees half a file."""
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target
