"""Taking a change another proxy made (a database document, a prop) into this running proxy.

The proxy that received the DistSQL statement validated it, opened what it adds and published it; here the
document is loaded through the same validation (proxy.config.load.database_config), the storage units it adds
are opened, and the database is swapped in one synchronous step (LogicalDatabase.reconfigure), as RDL does
locally: statements already routed finish on the old rules, the next statement of every session uses the
new ones. Nothing here writes conf/: the registry is the cluster's configuration.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

from proxy.backends.backend import DataSource
from proxy.backends.readwrite import open_data_sources
from proxy.backends.runtime import LogicalDatabase
from proxy.backends.source_plan import plan_sources, retired
from proxy.config.load import database_config
from proxy.config.model import DatabaseConfig

if TYPE_CHECKING:
    from proxy.server import ProxyServer

log = structlog.get_logger("shardproxy.cluster")

_NEW_DATABASE_LOCKS: weakref.WeakKeyDictionary[ProxyServer, asyncio.Lock] = weakref.WeakKeyDictionary()


def database_lock(db: LogicalDatabase) -> asyncio.Lock:
    """The lock RDL takes for this database: a change from the registry and a local one never interleave."""
    from proxy.session.distsql import rdl

    lock = rdl._LOCKS.get(db)
    if lock is None:
        lock = rdl._LOCKS[db] = asyncio.Lock()
    return lock


async def apply_database(server: ProxyServer, name: str, doc: Mapping[str, Any], file: str) -> bool:
    """Make the logical database `name` what `doc` says; False when it already is (or cannot be)."""
    warnings: list[str] = []
    try:
        config = database_config(dict(doc), file, warnings.append)
    except Exception as exc:  # a document this proxy cannot load: keep the last good one, say why
        log.error("cluster_change_not_loadable", database=name, error=str(exc))
        return False
    db = server.database(name)
    if db is None:
        lock = _NEW_DATABASE_LOCKS.setdefault(server, asyncio.Lock())
        async with lock:
            if server.database(name) is None:
                sources = await open_data_sources(config, server.config.props, server.sources)
                logical = LogicalDatabase(config, sources)
                await logical.reload_metadata()
                server.databases_by_name[config.name] = logical
                log.info("cluster_database_added", database=name)
                return True
        return False
    async with database_lock(db):
        if dict(db.config.doc or {}) == dict(doc):
            return False
        await _swap(server, db, config)
    for warning in warnings:
        log.warning("config_warning", detail=warning)
    return True


async def _swap(server: ProxyServer, db: LogicalDatabase, config: DatabaseConfig) -> None:
    old = db.config
    changed = [n for n, ds in old.data_sources.items() if n in config.data_sources and config.data_sources[n] != ds]
    added = [n for n in config.data_sources if n not in old.data_sources or n in changed]
    removed = [n for n in old.data_sources if n not in config.data_sources or n in changed]
    units = {unit: DataSource(config.data_sources[unit]) for unit in added}
    plan = plan_sources(config, db.sources, units)  # (a shadow rule renames where a storage unit is routed)
    opened = {**units, **plan.fresh}
    try:
        for source in opened.values():
            await source.start()
    except BaseException as exc:
        for source in opened.values():
            await source.close()
        log.error("cluster_change_not_applied", database=db.name, error=str(exc),
                  hint="a storage unit the change adds cannot be reached from this proxy")
        return
    old_sources = db.sources
    gone = list(dict.fromkeys([*removed, *plan.replaced]))
    _detach(server, db, gone)
    db.reconfigure(config, plan.sources)
    for unit, source in opened.items():
        server.sources[(db.name, unit)] = source
    for source in retired(server.sources, db.name, gone, old_sources, [*plan.sources.values(), *opened.values()]):
        server.track(source.close())
    log.info("cluster_rules_applied", database=db.name, added=added, removed=removed)
    await db.reload_metadata()


def _detach(server: ProxyServer, db: LogicalDatabase, units: list[str]) -> None:
    """Give back the idle connections sessions hold to units going away (a busy one ends with its pool)."""
    for session in list(server.sessions.values()):
        if session.database is not db or session.busy or session.txn.active or session.sticky:
            continue
        for unit in units:
            conn = session.backends.pop(unit, None)
            if conn is not None:
                session.give_back(conn)


def apply_prop(server: ProxyServer, key: str, value: Any) -> bool:
    """A prop SET DIST VARIABLE changed on another proxy: applied when it is one the proxy reads live."""
    from proxy.session.distsql import variables

    props = server.config.props
    if isinstance(props, dict) and props.get(key) == value:
        return False
    for variable in variables.VARIABLES:
        if variable.key == key and variable.use == variables.LIVE:
            try:
                variables.apply_setting(server, variable, value)
            except Exception as exc:
                log.error("cluster_prop_not_applied", prop=key, value=value, error=str(exc))
                return False
            log.info("cluster_prop_applied", prop=key, value=value)
            return True
    if isinstance(props, dict):
        props[key] = value
    return True


def apply_transaction_rule(server: ProxyServer, doc: Mapping[str, Any]) -> None:
    """ALTER TRANSACTION RULE made on another proxy (XA opens this proxy's own log, in its xa-log-dir)."""
    try:
        server.tm.alter(str(doc.get("defaultType") or "LOCAL"), doc.get("providerType"), doc.get("props") or {})
    except Exception as exc:
        log.error("cluster_transaction_rule_not_applied", rule=dict(doc), error=str(exc),
                  hint="this proxy keeps its transaction rule; fix what the error names and ALTER it again")
