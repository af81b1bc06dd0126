"""The migration DistSQL statements (ShardingSphere's words), answered for `proxy.distsql.handler`:

`MIGRATE TABLE t [FROM db]` (answers the job id), `SHOW MIGRATION LIST`, `SHOW MIGRATION STATUS 'id'`,
`CHECK MIGRATION 'id'` (runs the check and answers when it is done), `SHOW MIGRATION CHECK STATUS 'id'`,
`COMMIT MIGRATION 'id'`, `ROLLBACK MIGRATION 'id'`. `resume` restarts, at proxy start, the copies a stopped
proxy left unfinished (their state is in the `shardproxy` schema, see `proxy.migration.store`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
import weakref
from typing import TYPE_CHECKING, Any

import structlog

from proxy.clusterport import port
from proxy.execution.write_gate import _GATES, gate_for
from proxy.migration import store
from proxy.migration.job import Job, MigrationError, new_state
from proxy.migration.rules import end_window
from proxy.session.distsql.errors import DistSQLError
from proxy.session.distsql.targets import target

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import ServerContext as ProxyServer
    from proxy.session.distsql.grammar import DistSQL
    from proxy.session.handle import SessionHandle as Session

log = structlog.get_logger("shardproxy.migration")

LIST_COLUMNS = ("id", "database", "tables", "phase", "create_time", "stop_time")
STATUS_COLUMNS = ("id", "table", "phase", "rows_copied", "rows_scanned", "rows_total", "rows_per_second",
                  "eta_seconds", "replication_lag", "commit_pause_ms", "rows_deleted", "error")
CHECK_COLUMNS = ("source_data_node", "target_data_node", "source_rows", "target_rows", "source_checksum",
                 "target_checksum", "mismatched_keys", "result", "check_time")

_JOBS: weakref.WeakKeyDictionary[ProxyServer, dict[str, Job]] = weakref.WeakKeyDictionary()
_LOADED: weakref.WeakKeyDictionary[ProxyServer, set[str]] = weakref.WeakKeyDictionary()


def _jobs(server: ProxyServer) -> dict[str, Job]:
    jobs = _JOBS.get(server)
    if jobs is None:
        jobs = _JOBS[server] = {}
    return jobs


async def _load(server: ProxyServer, db: LogicalDatabase) -> None:
    """The jobs of `db` saved by this or an earlier proxy (once per database and process)."""
    loaded = _LOADED.setdefault(server, set())
    if db.name in loaded and not port(server).cluster:  # Cluster mode: another proxy may have started one
        return
    jobs = _jobs(server)
    holder = Job(server, db, new_state(db.name, ""))
    async with holder.conn(db.rules.data_sources[0]) as conn:
        states = await store.load(conn, db.name)
    for state in states:
        if state.id not in jobs:
            jobs[state.id] = Job(server, db, state)
            if state.phase in store.ACTIVE:
                gate_for(db.name, state.table)
    loaded.add(db.name)


async def resume(server: ProxyServer) -> None:
    """At start: load every windowed database's jobs and restart the copies left unfinished."""
    for db in server.databases_by_name.values():
        sharding = db.rules.sharding
        if sharding is None or not any(t.window is not None for t in sharding.tables.values()):
            continue
        try:
            await _load(server, db)
        except Exception as exc:  # the store unreadable: the jobs wait for the next statement about them
            log.warning("migration_state_unreadable", database=db.name, error=str(exc))
            continue
        for job in _jobs(server).values():
            # cluster hook: in Cluster mode only the proxy holding the job's claim copies (proxy.cluster.jobs)
            if job.db is db and job.state.phase in store.ACTIVE and job.task is None \
                    and await port(server).claim_job(job.state.id):
                log.info("migration_resumed", job=job.state.id, table=job.state.table,
                         position=job.state.position)
                job.start()


async def stop_all(server: ProxyServer) -> None:
    """At shutdown: stop the copies (they resume from their saved position at the next start)."""
    tasks = [j.task for j in _jobs(server).values() if j.task is not None and not j.task.done()]
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task


def _job(session: Session, d: DistSQL) -> Job:
    job = _jobs(session.server).get(d.name or "")
    if job is None:
        raise DistSQLError(1105, f"migration job {d.name!r} does not exist (SHOW MIGRATION LIST lists them)")
    return job


async def _owned(session: Session, d: DistSQL) -> Job:
    """The job, for a statement that acts on it: in Cluster mode only the proxy running it may (its state
    here is what that proxy saved, maybe long ago)."""
    job = _job(session, d)
    if job.state.phase in store.ACTIVE and await port(session.server).job_elsewhere(job.state.id):
        raise DistSQLError(1105, f"migration {job.state.id} is run by another proxy of the cluster (or the registry "
                           "cannot say which): send this statement to that proxy, the one that ran MIGRATE TABLE or "
                           "took the job over (SHOW COMPUTE NODES lists the proxies)", "HY000")
    return job


def _stamp(t: float) -> str:
    return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S") if t else ""


async def execute(session: Session, d: DistSQL) -> None:

    try:
        if d.kind == "migrate_table":
            db = target(session, d.database)
            await _load(session.server, db)
            session.rows(["id"], [(await _migrate(session.server, db, d.name or ""),)])
            return
        for db in session.server.databases_by_name.values():
            if db.rules.sharding is not None and any(t.window is not None for t in db.rules.sharding.tables.values()):
                await _load(session.server, db)
        if d.kind == "show_migration_list":
            session.rows(list(LIST_COLUMNS), [
                (j.state.id, j.state.database, j.state.table, j.state.phase, _stamp(j.state.started),
                 _stamp(j.state.finished)) for j in _jobs(session.server).values()])
        elif d.kind == "show_migration_status":
            session.rows(list(STATUS_COLUMNS), [_status(_job(session, d))])
        elif d.kind == "check_migration":
            await (await _owned(session, d)).check()
            session.ok()
        elif d.kind == "show_migration_check_status":
            job = _job(session, d)
            session.rows(list(CHECK_COLUMNS), [
                (r["source"], r["target"], r["source_rows"], r["target_rows"], r["source_checksum"],
                 r["target_checksum"], r["mismatches"], "true" if r["result"] else "false",
                 _stamp(job.state.check_time))
                for r in job.state.check])
        elif d.kind == "commit_migration":
            job = await _owned(session, d)
            await job.commit(lambda: _end_window(job))
            _GATES.pop((job.db.name.lower(), job.state.table.lower()), None)
            await port(session.server).release_job(job.state.id)  # cluster hook
            session.ok(info=f"write pause {job.state.pause_ms:.1f} ms".encode())
        elif d.kind == "rollback_migration":
            job = await _owned(session, d)
            await job.rollback()
            _GATES.pop((job.db.name.lower(), job.state.table.lower()), None)
            await port(session.server).release_job(job.state.id)  # cluster hook
            session.ok()
    except MigrationError as exc:
        raise DistSQLError(exc.errno, exc.message, exc.sqlstate) from None


async def _migrate(server: ProxyServer, db: LogicalDatabase, table: str) -> str:
    sharding = db.rules.sharding
    rule = sharding.table(table) if sharding is not None else None
    if rule is None or rule.window is None:
        raise MigrationError(
            f"MIGRATE TABLE {table}: {table} has no resharding window in {db.name}'s !SHARDING rule; configure "
            "oldDatabaseStrategy / oldTableStrategy (where its rows are now) next to the new strategies first",
            1105)
    for job in _jobs(server).values():
        if job.db is db and job.state.table.lower() == table.lower() and job.state.phase in store.ACTIVE:
            raise MigrationError(f"MIGRATE TABLE {table}: migration {job.state.id} of {table} is already "
                                 f"{job.state.phase}; COMMIT or ROLLBACK it first")
    job = Job(server, db, new_state(db.name, rule.logic_table))
    job.key_column(rule)  # refuses a table without a usable key now, not in the background
    job.columns(rule)
    if not await port(server).claim_job(job.state.id):  # cluster hook: this proxy runs the job it creates
        raise MigrationError(f"MIGRATE TABLE {table}: the cluster registry cannot be reached to record which proxy "
                             "runs the job (another would copy it too); retry when etcd is back", 1105)
    gate_for(db.name, rule.logic_table)
    await job.save()
    _jobs(server)[job.state.id] = job
    job.start()
    log.info("migration_started", job=job.state.id, database=db.name, table=rule.logic_table)
    return job.state.id


def _status(job: Job) -> tuple[Any, ...]:
    s = job.state
    elapsed = (s.finished or time.time()) - s.started
    rate = s.scanned / elapsed if elapsed > 0 else 0.0
    eta = (s.total - s.scanned) / rate if s.phase == store.COPYING and rate > 0 else 0.0
    if not any(s.binlog.values()):
        lag = "no binary log (writes through the proxy only)"
    elif s.phase in store.ACTIVE:
        lag = f"{max(0.0, time.time() - s.caught_up_at):.1f} s" if s.caught_up_at else "not caught up yet"
    else:
        lag = ""
    return (s.id, s.table, s.phase, s.copied, s.scanned, s.total, round(rate, 1), round(max(eta, 0.0), 1),
            lag, "" if s.pause_ms is None else round(s.pause_ms, 1), s.deleted, s.error)


async def _end_window(job: Job) -> None:
    """The rule switch: the table's window leaves the YAML file and the running rules."""
    from proxy.config.load import database_config
    from proxy.session.distsql.rdl import _write, document_yaml

    db = job.db
    doc = end_window(dict(db.config.doc or {}), job.state.table)
    warnings: list[str] = []
    config = database_config(doc, db.config.file, warnings.append)
    text = document_yaml(doc, f"COMMIT MIGRATION '{job.state.id}' ({job.state.table} leaves its resharding window)")
    # cluster hook: in Cluster mode every proxy ends the window (through the registry), conf/ is not written
    if not await port(job.server).publish_database(db.name, doc, db.config.file, "COMMIT MIGRATION"):
        await asyncio.to_thread(_write, db.config.file, text)
    db.reconfigure(config, db.sources)
