"""The routable data sources of a logical database whose configuration changes while it runs (DistSQL RDL, or
a change another proxy of the cluster published).

A routable name is not always a storage unit: a `!SHADOW` rule's data source (`shadow_group`) stands for its
production storage unit, which is then routable under that name only, and the shadow storage unit is routable
under its own; a read/write splitting group stands for its members. So a change can make a name point
somewhere else (CREATE SHADOW RULE hides `ds` behind `shadow_group`, DROP SHADOW RULE brings `ds` back, ALTER
SHADOW RULE points `shadow_group` at another unit) without adding or removing any storage unit. This module
says which sources the new configuration keeps, which it needs opened, and which names no longer lead where
they did (the sessions' connections to them go back, and the old sources are closed), as
proxy.backends.readwrite.open_data_sources builds them at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, replace

from proxy.backends.backend import DataSource
from proxy.config.model import DatabaseConfig, DataSourceConfig

__all__ = ["SourcePlan", "plan_sources", "retired"]


@dataclass
class SourcePlan:
    sources: dict[str, DataSource]  # routable name -> source, as LogicalDatabase.sources
    fresh: dict[str, DataSource]  # the sources made for it (not started): start them before use
    replaced: list[str]  # names whose source is not the one they had (gone, or pointing elsewhere)


def _wanted(config: DatabaseConfig) -> dict[str, DataSourceConfig | None]:
    """Routable name -> the storage unit configuration it connects with (None: a group, kept as it is)."""
    shadow = config.rules.shadow.data_sources if config.rules.shadow is not None else {}
    wanted: dict[str, DataSourceConfig | None] = {}
    for name in config.rules.data_sources:
        if name in shadow:  # the production unit, under the shadow data source's name
            wanted[name] = replace(config.data_sources[shadow[name][0]], name=name)
        else:
            wanted[name] = config.data_sources.get(name)
    for _production, shadow_unit in shadow.values():  # where shadow statements' units go, by their own name
        wanted.setdefault(shadow_unit, config.data_sources[shadow_unit])
    return wanted


def plan_sources(config: DatabaseConfig, old: Mapping[str, DataSource], units: Mapping[str, DataSource]) -> SourcePlan:
    """`old`: the database's sources now; `units`: storage units the change opens itself (REGISTER STORAGE UNIT)."""
    sources: dict[str, DataSource] = {}
    fresh: dict[str, DataSource] = {}
    for name, conf in _wanted(config).items():
        current = old.get(name)
        if name in units:
            sources[name] = units[name]
        elif current is not None and (conf is None or current.config == conf):
            sources[name] = current
        elif conf is not None:
            sources[name] = fresh[name] = DataSource(conf)
    replaced = [name for name, source in old.items() if sources.get(name) is not source]
    return SourcePlan(sources, fresh, replaced)


def retired(
    registry: MutableMapping[tuple[str, str], DataSource],
    database: str,
    names: list[str],
    old: Mapping[str, DataSource],
    keep: list[DataSource],
) -> list[DataSource]:
    """After the swap: the sources `names` led to that are not in `keep` (every source in use from now on: the
    new map's and the ones just opened), taken out of the server's registry of open sources (by database and
    name). The caller closes them."""
    kept = {id(s) for s in keep}
    out: dict[int, DataSource] = {}
    for name in names:
        registered = registry.get((database, name))
        if registered is not None and id(registered) not in kept:
            del registry[(database, name)]
        for source in (registered, old.get(name)):
            if source is not None and id(source) not in kept:
                out[id(source)] = source
    return list(out.values())
