"""RDL: changing a logical database's rules and storage units at run time.

`CREATE / ALTER / DROP SHARDING TABLE RULE`, `CREATE / DROP BROADCAST TABLE RULE`, `REGISTER / UNREGISTER
STORAGE UNIT`, the encrypt, mask and shadow RDL (encrypt_rules.py, mask_rdl.py, shadow_rdl.py), in
ShardingSphere 5.5.2's syntax. Each statement:

1. is parsed into the YAML it stands for, and applied to a copy of the database's document
   (`DatabaseConfig.doc`), as ShardingSphere converts it (`ShardingTableRuleStatementConverter`): a
   table's algorithms are named `<table>_<database|table>_<type>` (auto tables `<table>_<type>`), its key
   generator `<table>_<type>`, types in lower case; algorithms and key generators only the changed or
   dropped table used go with it (`rdl_changes.py`);
2. is validated by loading that document exactly as the file is loaded (`proxy.config.load.database_config`,
   `routing.config`): a change the YAML would refuse is refused, with the same message;
3. opens what it adds (a new storage unit's pool, a name a shadow rule now routes elsewhere:
   proxy.backends.source_plan; an unreachable one is refused and nothing changes);
4. writes the document back to the `database-*.yaml` file, atomically (temporary file, fsync, rename; the
   previous version is kept as `<file>.bak`), so that a restart keeps the change;
5. swaps the database's configuration, rules and kernel in one synchronous step
   (`LogicalDatabase.reconfigure`): statements already routed finish on the old rules, every session's next
   statement uses the new ones; then reloads the metadata and closes what it removed.

Changes to one database are serialised. They apply to this process (`--workers N`: the others take them
at their next start). In Cluster mode (proxy.cluster) step 4 publishes the document to the registry
instead of writing the file, and every proxy of the cluster takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import yaml

from protocol.constants import ServerStatus
from proxy.backends.backend import BackendError, DataSource
from proxy.backends.source_plan import plan_sources, retired
from proxy.clusterport import port
from proxy.config.load import database_config
from proxy.config.model import DatabaseConfig
from proxy.session.distsql import rules as rq
from proxy.session.distsql.definitions import (
    _error,
)
from proxy.session.distsql.errors import DistSQLError
from proxy.session.distsql.export import write_file
from proxy.session.distsql.grammar import DistSQL
from proxy.session.distsql.rdl_changes import RULE_KEY, plan_change
from proxy.session.distsql.targets import tables_by_source, target
from routing.errors import ConfigError

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

log = structlog.get_logger("shardproxy.distsql")

_LOCKS: weakref.WeakKeyDictionary[LogicalDatabase, asyncio.Lock] = weakref.WeakKeyDictionary()


# --- writing the file -----------------------------------------------------------------------------------------


class _Tagged(dict[str, Any]):
    def __init__(self, tag: str, body: Mapping[str, Any]) -> None:
        super().__init__(body)
        self.tag = tag


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Tagged, lambda dumper, data: dumper.represent_mapping("!" + data.tag, dict(data)))


def _tagged(value: Any) -> Any:
    if isinstance(value, Mapping):
        body = {str(k): _tagged(v) for k, v in value.items() if k != RULE_KEY}
        return _Tagged(str(value[RULE_KEY]), body) if RULE_KEY in value else body
    if isinstance(value, list):
        return [_tagged(v) for v in value]
    return value


def document_yaml(doc: Mapping[str, Any], change: str) -> str:
    """The database's document as a `database-*.yaml` file (comments of the original are not kept: the file
    before the change is, as `<file>.bak`)."""
    stamp = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    head = (f"# Written by shardproxy at {stamp} after {change}\n"
            "# (the version before this change is kept next to this file, with .bak appended)\n")
    return head + yaml.dump(_tagged(doc), Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                            allow_unicode=True, width=1000)


def _write(file: str, text: str) -> None:
    path = Path(file)
    with contextlib.suppress(FileNotFoundError):
        write_file(str(path) + ".bak", path.read_text(encoding="utf-8"))
    write_file(str(path), text)


# --- applying ---------------------------------------------------------------------------------------------------


def _mode_change_blocked(session: Session, db: LogicalDatabase, config: DatabaseConfig) -> str | None:
    """A change that turns a pass-through database sharded (or back) while a session has a transaction or
    prepared statements there would leave them half in each mode: the connection that stands in the way."""
    if config.rules.is_pass_through == (db.kernel is None):
        return None
    for other in session.server.sessions.values():
        if other.database is not db or other is session:
            continue
        status = int(other.status)
        if (other.txn.active or status & ServerStatus.IN_TRANS or not status & ServerStatus.AUTOCOMMIT
                or other.statements.by_id or other.sql_statements):
            return f"connection {other.id} has an open transaction or prepared statements there"
    return None


async def execute(session: Session, d: DistSQL) -> None:
    db = target(session, None)
    lock = _LOCKS.get(db)
    if lock is None:
        lock = _LOCKS[db] = asyncio.Lock()
    async with lock:
        singles: dict[str, list[str]] = {}
        if d.kind == "unregister_storage_unit":
            found = rq.single_tables(db.rules, await tables_by_source(db)) if db.kernel is not None else [
                (t, ds) for ds, tables in (await tables_by_source(db)).items() for t in tables]
            for table, ds in found:
                singles.setdefault(ds, []).append(table)
        change = plan_change(d, db, singles)
        _drop_empty_rules(change.doc)
        if change.doc == dict(db.config.doc or {}):  # IF [NOT] EXISTS found nothing to do
            session.ok()
            return
        warnings: list[str] = []
        try:
            config = database_config(change.doc, db.config.file, warnings.append)
        except ConfigError as exc:
            raise _error(f"{_statement(d)} refused: {exc.reason}" + (f" ({exc.key})" if exc.key else "")) from None
        blocked = _mode_change_blocked(session, db, config)
        if blocked:
            raise _error(f"{_statement(d)} would turn {db.name} between pass-through and sharded while {blocked}; "
                         "try again when it is done")
        units = {unit: DataSource(config.data_sources[unit]) for unit in change.added_units}
        plan = plan_sources(config, db.sources, units)  # (a shadow rule renames where a storage unit is routed)
        gone = list(dict.fromkeys([*change.removed_units, *plan.replaced]))
        if gone:
            busy = _detach(session, db, gone)
            if busy:
                raise _error(f"{_statement(d)}: storage unit {', '.join(gone)} is in use ({busy}); "
                             "try again when it is done")
        opened = {**units, **plan.fresh}
        try:
            for name, source in opened.items():
                try:
                    await source.start()
                except BackendError as exc:
                    raise DistSQLError(exc.errno or 2003, f"{_statement(d)} {name}: {exc}", "HY000") from None
            # Cluster mode: the registry keeps the configuration (and every proxy takes it), not conf/
            published = await port(session.server).publish_database(db.name, change.doc, db.config.file,
                                                                     _statement(d))
            text = document_yaml(change.doc, f"{_statement(d)} {change.summary}".strip())
            try:
                if not published:
                    await asyncio.to_thread(_write, db.config.file, text)
            except OSError as exc:
                raise DistSQLError(1105, f"{_statement(d)}: cannot write {db.config.file}: {exc.strerror or exc}; "
                                   "nothing was changed", "HY000") from exc
        except BaseException:
            for source in opened.values():
                await source.close()
            raise
        old_sources = db.sources
        db.reconfigure(config, plan.sources)  # one synchronous step: the next statement of every session sees it
        server = session.server
        for name, source in opened.items():
            server.sources[(db.name, name)] = source
        for source in retired(server.sources, db.name, gone, old_sources, [*plan.sources.values(), *opened.values()]):
            server.track(source.close())
        for warning in warnings:
            log.warning("config_warning", detail=warning)
        log.info("rules_changed", database=db.name, statement=_statement(d), what=change.summary,
                 file=db.config.file)
        await db.reload_metadata()
    session.ok()


def _empty_rule(rule: Any) -> bool:
    """A tagged rule left with nothing in it (its last table dropped): it goes, so that the database is back
    to what it was without it (a pass-through database with no rule at all stays pass-through)."""
    if not isinstance(rule, dict) or RULE_KEY not in rule:
        return False
    tables = rule.get("tables")  # a list of names (BROADCAST, SINGLE) or a mapping (SHARDING, ENCRYPT, MASK, ...)
    if tables if isinstance(tables, Mapping) else rq.names(tables):
        return False
    return all(v in (None, "", [], {}) for k, v in rule.items() if k not in (RULE_KEY, "tables"))


def _drop_empty_rules(doc: dict[str, Any]) -> None:
    rules = doc.get("rules")
    if isinstance(rules, list):
        rules[:] = [r for r in rules if not _empty_rule(r)]
        if not rules:
            del doc["rules"]


def _statement(d: DistSQL) -> str:
    return d.kind.upper().replace("_", " ")


def _detach(session: Session, db: LogicalDatabase, units: list[str]) -> str | None:
    """Give back the idle connections sessions hold to storage units being removed; the connection still
    using one (a statement running, a transaction) is named instead."""
    sessions = [s for s in session.server.sessions.values() if s.database is db]
    for other in sessions:
        for unit in units:
            conn = other.backends.get(unit)
            if conn is not None and other is not session and (other.busy or other.txn.active or other.sticky):
                return f"connection {other.id} holds a connection to it"
    for other in sessions:
        for unit in units:
            conn = other.backends.pop(unit, None)
            if conn is not None:
                other.give_back(conn)
    return None
