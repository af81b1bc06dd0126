"""Answering DistSQL: RQL from the configuration in use, RAL on the running proxy, and a clear refusal
for the rest of ShardingSphere's DistSQL (never a backend's syntax error, never sent to a backend).

`execute` is called by `Session._proxy_statement` for the `distsql` / `distsql_unsupported` kinds that
`proxy.session.statements.classify` returns. Errors are raised as `DistSQLError` (a `ServerError`): the session
answers them with their errno and SQLSTATE.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from proxy.backends import table_metadata
from proxy.backends.readwrite import ReadWriteGroup
from proxy.clusterport import port as cluster_port
from proxy.observe.audit import audit_statement
from proxy.session.admin import STORAGE_UNIT_COLUMNS, storage_units
from proxy.session.distsql import encrypt_rules, export, feature_rules, grammar, query_digests, rdl, rules, variables
from proxy.session.distsql.errors import DistSQLError, not_supported
from proxy.session.distsql.targets import tables_by_source, target
from proxy.session.metadata import existing_tables
from proxy.version import version
from routing.like import like_to_regex

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import ServerContext as ProxyServer
    from proxy.execution.context import SessionContext as Session
    from proxy.session.statements import ProxyStatement

COMPUTE_NODE_COLUMNS = ("instance_id", "instance_type", "host", "port", "status", "mode_type", "worker_id",
                        "labels", "version", "database_name")

# statements that change the proxy, write files or print passwords: users with `admin: true` only
_ADMIN_ONLY = (frozenset({"set_dist_variable", "export_database_configuration", "reset_query_digests"})
               | grammar.RDL_KINDS | grammar.MIGRATION_KINDS)
# statements that change the proxy (or write a file): each one, done or refused, is a line of the audit log
_AUDITED = (frozenset({"set_dist_variable", "export_database_configuration", "reset_query_digests",
                       "refresh_table_metadata", "refresh_database_metadata", "migrate_table", "check_migration",
                       "commit_migration", "rollback_migration"}) | grammar.RDL_KINDS)

_INSTANCE_IDS: weakref.WeakKeyDictionary[ProxyServer, str] = weakref.WeakKeyDictionary()


async def execute(session: Session, stmt: ProxyStatement) -> None:
    try:
        kind = await _execute(session, stmt)
    except Exception as exc:  # (its ERR is sent by the session after this: the audit line records the refusal)
        if _changes(stmt):
            audit_statement(session, "distsql", stmt.arg or "", outcome={"ok": False,
                                                                          "errno": getattr(exc, "errno", None)})
        raise
    if kind in _AUDITED:
        audit_statement(session, "distsql", stmt.arg or "")


def _changes(stmt: ProxyStatement) -> bool:
    """A statement refused before its kind was known that would have changed something (an unsupported RDL ...)."""
    d = grammar.parse(stmt.arg or "") if stmt.kind == "distsql" else None
    return d is not None and d.kind in _AUDITED


async def _execute(session: Session, stmt: ProxyStatement) -> str:
    if stmt.kind == "distsql_unsupported":
        raise not_supported(stmt.arg or "this DistSQL statement")
    d = grammar.parse(stmt.arg or "")
    if d is None:  # pragma: no cover - classify() parsed it already
        raise not_supported("this DistSQL statement")
    statement_name = d.kind.upper().replace("_", " ")
    if d.kind in _ADMIN_ONLY and not (session.user_config is not None and session.user_config.admin):
        raise DistSQLError(1227, f"Access denied; {statement_name} needs a user with admin: true in "
                           "global.yaml's authority.users", "42000")
    if d.kind in grammar.RDL_KINDS:

        await rdl.execute(session, d)
        return d.kind
    if d.kind in grammar.MIGRATION_KINDS:  # MIGRATE TABLE, SHOW MIGRATION ..., COMMIT MIGRATION ...
        from proxy.session.distsql.migration import execute as migration

        await migration(session, d)
        return d.kind
    handler = _HANDLERS.get(d.kind)
    if handler is None:  # pragma: no cover - every parsed kind has a handler
        raise not_supported(statement_name)
    await handler(session, d)
    return d.kind


# --- helpers ------------------------------------------------------------------------------------------------


def _doc(db: LogicalDatabase) -> dict[str, object] | None:
    doc = db.config.doc
    return dict(doc) if doc is not None else None


def groups_of(db: LogicalDatabase) -> dict[str, list[str]]:
    """Read/write splitting group -> its members (primary first)."""
    return {name: [s.primary.name, *(r.name for r in s.replicas)]
            for name, s in db.sources.items() if isinstance(s, ReadWriteGroup)}


def _like(rows: Sequence[tuple[object, ...]], pattern: str | None, column: int = 0) -> list[tuple[object, ...]]:
    if pattern is None:
        return list(rows)
    rx = like_to_regex(pattern)
    return [r for r in rows if rx.match(str(r[column]))]


# --- RQL --------------------------------------------------------------------------------------------------


async def _algorithms(session: Session, d: grammar.DistSQL) -> None:
    doc = _doc(target(session, d.database))
    build = {
        "show_sharding_algorithms": rules.sharding_algorithm_rows,
        "show_sharding_key_generators": rules.key_generator_rows,
        "show_sharding_auditors": rules.auditor_rows,
        "show_unused_sharding_algorithms": rules.unused_algorithm_rows,
        "show_unused_sharding_key_generators": rules.unused_key_generator_rows,
        "show_unused_sharding_auditors": rules.unused_auditor_rows,
    }[d.kind]
    session.rows(list(rules.ALGORITHM_COLUMNS), build(doc))


async def _default_strategy(session: Session, d: grammar.DistSQL) -> None:
    session.rows(list(rules.DEFAULT_STRATEGY_COLUMNS), rules.default_strategy_rows(_doc(target(session, d.database))))


async def _references(session: Session, d: grammar.DistSQL) -> None:
    doc = _doc(target(session, d.database))
    session.rows(list(rules.REFERENCE_COLUMNS), rules.reference_rule_rows(doc, d.name))


async def _used(session: Session, d: grammar.DistSQL) -> None:
    db = target(session, d.database)
    doc, name = _doc(db), d.name or ""
    if d.kind == "show_rules_used_algorithm":
        rows = rules.rules_used_algorithm_rows(doc, name)
    elif d.kind == "show_rules_used_key_generator":
        rows = rules.rules_used_key_generator_rows(doc, name)
    elif d.kind == "show_rules_used_auditor":
        rows = rules.rules_used_auditor_rows(doc, name)
    else:
        rows = rules.rules_used_storage_unit_rows(doc, db.rules, name, groups_of(db))
    session.rows(list(rules.USED_COLUMNS), rows)


async def _broadcast(session: Session, d: grammar.DistSQL) -> None:
    session.rows(list(rules.BROADCAST_COLUMNS), rules.broadcast_rows(_doc(target(session, d.database))))


async def _mask_rules(session: Session, d: grammar.DistSQL) -> None:
    session.rows(list(feature_rules.MASK_COLUMNS), feature_rules.mask_rule_rows(target(session, d.database).rules,
                                                                                 d.name))


async def _shadow_rules(session: Session, d: grammar.DistSQL) -> None:
    session.rows(list(feature_rules.SHADOW_COLUMNS),
                 feature_rules.shadow_rule_rows(target(session, d.database).rules, d.name))


async def _shadow_tables(session: Session, d: grammar.DistSQL) -> None:
    session.rows(list(feature_rules.SHADOW_TABLE_COLUMNS),
                 feature_rules.shadow_table_rows(target(session, d.database).rules, d.name))


async def _shadow_algorithms(session: Session, d: grammar.DistSQL) -> None:
    rules_ = target(session, d.database).rules
    if d.kind == "show_shadow_algorithms":
        session.rows(list(feature_rules.SHADOW_ALGORITHM_COLUMNS), feature_rules.shadow_algorithm_rows(rules_))
    else:
        session.rows(list(feature_rules.DEFAULT_SHADOW_ALGORITHM_COLUMNS),
                     feature_rules.default_shadow_algorithm_rows(rules_))


async def _plugins(session: Session, d: grammar.DistSQL) -> None:
    kind = "MASK" if d.kind == "show_mask_algorithm_plugins" else "SHADOW"
    session.rows(list(feature_rules.PLUGIN_COLUMNS), feature_rules.plugin_rows(kind))


async def _single(session: Session, d: grammar.DistSQL) -> None:
    db = target(session, d.database)
    found = rules.single_tables(db.rules, await tables_by_source(db))
    if d.kind == "show_single_table":
        found = [r for r in found if r[0].lower() == (d.name or "").lower()]
    session.rows(list(rules.SINGLE_TABLE_COLUMNS), _like(found, d.like))


async def _default_single(session: Session, d: grammar.DistSQL) -> None:
    db = target(session, d.database)
    session.rows(list(rules.DEFAULT_SINGLE_COLUMNS), rules.default_single_storage_unit_rows(_doc(db)))


async def _count(session: Session, d: grammar.DistSQL) -> None:
    db = target(session, d.database)
    kind = "SINGLE" if d.kind == "count_single_table" else (d.name or "").upper()
    if kind == "ENCRYPT":
        session.rows(list(rules.COUNT_COLUMNS), encrypt_rules.encrypt_count_rows(_doc(db), db.name))
        return
    if kind in ("MASK", "SHADOW"):
        session.rows(list(rules.COUNT_COLUMNS), feature_rules.count_rows(kind, db.rules, db.name))
        return
    single = len(rules.single_tables(db.rules, await tables_by_source(db))) if kind == "SINGLE" else 0
    rows = rules.count_rows(kind, db.name, _doc(db), db.rules, single, len(groups_of(db)))
    session.rows(list(rules.COUNT_COLUMNS), rows)


async def _encrypt_rules(session: Session, d: grammar.DistSQL) -> None:
    db = target(session, d.database)
    rows = encrypt_rules.encrypt_rule_rows(_doc(db), d.name)
    session.rows(list(encrypt_rules.ENCRYPT_COLUMNS), rows)


async def _storage_units(session: Session, d: grammar.DistSQL) -> None:

    db = target(session, d.database)
    session.rows(STORAGE_UNIT_COLUMNS, _like(storage_units(db), d.like))


async def _logical_tables(session: Session, d: grammar.DistSQL) -> None:

    db = target(session, d.database)
    if db.kernel is not None:
        names = existing_tables(db)
    else:
        names = [t for tables in (await tables_by_source(db)).values() for t in tables]
    rows: list[tuple[object, ...]] = [(n, "TABLE") if d.force else (n,) for n in sorted(names)]
    columns = [f"Tables_in_{db.name}"] + (["Table_type"] if d.force else [])
    session.rows(columns, _like(rows, d.like))


async def _table_metadata(session: Session, d: grammar.DistSQL) -> None:
    db = target(session, d.database)
    session.rows(list(table_metadata.SHOW_COLUMNS), table_metadata.show_rows(db, table_metadata.table_names(d.text)))


# --- RAL --------------------------------------------------------------------------------------------------


async def _show_variables(session: Session, d: grammar.DistSQL) -> None:
    if d.kind == "show_dist_variable":
        session.rows(list(variables.COLUMNS), [variables.one(session, d.name or "")])
    else:
        session.rows(list(variables.COLUMNS), _like(variables.rows(session), d.like))


async def _set_variable(session: Session, d: grammar.DistSQL) -> None:
    variable, value = variables.check_setting(session.server, d.name or "", d.value or "")
    # Cluster mode: validated here, published, then applied (by every proxy)
    await cluster_port(session.server).publish_prop(variable.key, value, "SET DIST VARIABLE")
    variables.apply_setting(session.server, variable, value)
    session.log.info("dist_variable_set", variable=d.name, value=d.value)
    session.ok()


def instance_id(server: ProxyServer) -> str:
    """This process's compute node id (ShardingSphere: a UUID made at start-up)."""
    found = _INSTANCE_IDS.get(server)
    if found is None:
        found = _INSTANCE_IDS[server] = str(uuid.uuid4())
    return found


def _address(server: ProxyServer) -> tuple[str, int]:
    listener = getattr(server, "_server", None)
    sockets = list(getattr(listener, "sockets", None) or ())
    host, port = ("", server.config.port)
    if sockets:
        host, port = sockets[0].getsockname()[:2]
    if host in ("", "0.0.0.0", "::"):
        try:
            host = socket.gethostbyname(socket.gethostname())
        except OSError:
            host = "127.0.0.1"
    return str(host), int(port)


async def _compute_nodes(session: Session, d: grammar.DistSQL) -> None:
    server = session.server
    nodes = await cluster_port(server).compute_node_rows()  # Cluster mode: every live compute node
    if nodes is not None:
        session.rows(list(COMPUTE_NODE_COLUMNS), nodes)
        return
    host, port = _address(server)
    worker = str(server.config.props.get("worker-id", 0))
    row = (instance_id(server), "PROXY", host, str(port), "OK", "Standalone", worker, "", version(), "")
    session.rows(list(COMPUTE_NODE_COLUMNS), [row])


async def _refresh_table(session: Session, d: grammar.DistSQL) -> None:
    db = target(session, None)
    if d.storage_unit is not None:
        units = {n.lower() for n in db.config.data_sources}
        if d.storage_unit.lower() not in units:
            raise DistSQLError(1105, f"storage unit '{d.storage_unit}' does not exist in database {db.name}",
                               "42S02")
    await db.reload_metadata()  # the whole database: narrower is not cheaper enough to be worth a second path
    if d.name is not None:
        known = {t.lower() for tables in (await tables_by_source(db)).values() for t in tables}
        if db.rules.sharding is not None:
            known.update(db.rules.sharding.tables)
        if d.name.lower() not in known:
            raise DistSQLError(1146, f"Table '{db.name}.{d.name}' doesn't exist", "42S02")
    session.log.info("metadata_refreshed", database=db.name, table=d.name, storage_unit=d.storage_unit)
    session.ok()


async def _refresh_database(session: Session, d: grammar.DistSQL) -> None:
    server = session.server
    dbs = [target(session, d.name)] if d.name else list(server.databases_by_name.values())
    await asyncio.gather(*(db.reload_metadata() for db in dbs))
    session.log.info("metadata_refreshed", databases=[db.name for db in dbs])
    session.ok()


async def _export(session: Session, d: grammar.DistSQL) -> None:
    db = target(session, d.database)
    text = export.database_yaml(db.config)
    if d.file is None:
        session.rows(list(export.COLUMNS), [(text,)])
        return
    try:
        path = await asyncio.to_thread(export.write_file, d.file, text)
    except OSError as exc:
        raise DistSQLError(1105, f"cannot write {d.file}: {exc.strerror or exc}", "HY000") from exc
    session.log.info("database_configuration_exported", database=db.name, file=os.fspath(path))
    session.rows(list(export.COLUMNS), [(f"Successfully exported to: '{d.file}'",)])


_HANDLERS = {
    "show_sharding_algorithms": _algorithms,
    "show_sharding_key_generators": _algorithms,
    "show_sharding_auditors": _algorithms,
    "show_unused_sharding_algorithms": _algorithms,
    "show_unused_sharding_key_generators": _algorithms,
    "show_unused_sharding_auditors": _algorithms,
    "show_default_sharding_strategy": _default_strategy,
    "show_sharding_table_reference_rules": _references,
    "show_rules_used_algorithm": _used,
    "show_rules_used_key_generator": _used,
    "show_rules_used_auditor": _used,
    "show_rules_used_storage_unit": _used,
    "count_rule": _count,
    "show_encrypt_rules": _encrypt_rules,
    "count_single_table": _count,
    "show_broadcast_table_rules": _broadcast,
    "show_mask_rules": _mask_rules,
    "show_shadow_rules": _shadow_rules,
    "show_shadow_table_rules": _shadow_tables,
    "show_shadow_algorithms": _shadow_algorithms,
    "show_default_shadow_algorithm": _shadow_algorithms,
    "show_mask_algorithm_plugins": _plugins,
    "show_shadow_algorithm_plugins": _plugins,
    "show_single_tables": _single,
    "show_single_table": _single,
    "show_default_single_table_storage_unit": _default_single,
    "show_storage_units_like": _storage_units,
    "show_logical_tables": _logical_tables,
    "show_dist_variable": _show_variables,
    "show_dist_variables": _show_variables,
    "set_dist_variable": _set_variable,
    "show_compute_nodes": _compute_nodes,
    "refresh_table_metadata": _refresh_table,
    "show_table_metadata": _table_metadata,
    "refresh_database_metadata": _refresh_database,
    "export_database_configuration": _export,
    "show_query_digests": query_digests.show,
    "reset_query_digests": query_digests.reset,
}
