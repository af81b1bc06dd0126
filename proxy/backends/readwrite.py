"""Read/write splitting: a `!READWRITE_SPLITTING` data source group is one primary and its replicas.

ShardingSphere's rule (seed 002): writes, locking reads, hinted reads and reads inside a transaction (per
`transactionalReadQueryStrategy`) go to the primary; other reads are balanced over the replicas. The
seed's per-thread "DML flag" becomes per session (the client connection is the proxy's thread), per group,
and is configurable with the group key `readAfterWrite`:

* ``SESSION`` (default, the seed's behaviour): after a write, every later read of the session goes to the
  primary;
* ``TRANSACTION``: reads go to the primary while the transaction that wrote is open, and back to the
  replicas once it has ended (an autocommit write is a transaction of its own);
* ``GTID``: after a write, the primary's GTID position is remembered for the session; a later read uses a
  replica only once the replica has applied it (MariaDB ``MASTER_GTID_WAIT``, MySQL
  ``WAIT_FOR_EXECUTED_GTID_SET``, with a short bounded wait), else the primary. Read-your-writes without
  pinning the session to the primary.

Whatever the mode, a read after a write in a still open transaction goes to the primary: the write is
visible nowhere else yet.

Replica health: a replica whose connections fail is taken out of rotation; a background task probes every
replica (``SHOW SLAVE STATUS``) and puts it back once it answers. A replica whose SQL or IO thread is
stopped (``Seconds_Behind_Master`` NULL), or that lags more than ``maxReplicationLagSeconds``, is skipped.
With no usable replica, reads go to the primary (logged once per change of state).

`ReadWriteGroup` stands in for a `DataSource` under the group's name (so the kernel, the pass-through path,
metadata loading and transactions keep working with the primary); replicas are reached only through
`group_backend`, which `Session.backend(..., read=True)` calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import random
import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import aiomysql
import pymysql
import structlog

from protocol.packets import ColumnDefinition41, ERRPacket, OKPacket
from proxy.backends.backend import BackendConnection, BackendError, DataSource, Holder

if TYPE_CHECKING:
    from proxy.config.model import DatabaseConfig

from proxy.rwconfig import (
    DEFAULT_GTID_WAIT,
    DEFAULT_HEALTH_INTERVAL,
    GroupConfig,
    parse_groups,
)

log = structlog.get_logger("shardproxy.readwrite")

# --- which statements are reads (pass-through path) ------------------------------------------------------


class Access(enum.Enum):
    READ = "read"  # may use a replica
    WRITE = "write"  # primary; counts as the session's write
    SESSION = "session"  # primary, not a write: SET, transaction control, locking / hinted reads, SHOW WARNINGS


_MASK = re.compile(r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\"|`[^`]*(?:``[^`]*)*`", re.S)
_COMMENTS = re.compile(r"/\*(?!!).*?\*/|--[ \t][^\n]*(?:\n|$)|#[^\n]*(?:\n|$)", re.S)
_WRITE_HINT = re.compile(r"SHARDINGSPHERE_HINT:[^*]*\bWRITE_ROUTE_ONLY\s*=\s*true", re.I)
_FIRST_WORD = re.compile(r"^[\s(]*([A-Za-z_]+)")
_LOCKING = re.compile(r"\bFOR\s+UPDATE\b|\bLOCK\s+IN\s+SHARE\s+MODE\b|\bFOR\s+SHARE\b|\bINTO\b", re.I)
# functions whose answer lives in the session of the connection that ran the previous statements
_SESSION_FUNCTIONS = re.compile(
    r"\b(?:LAST_INSERT_ID|FOUND_ROWS|ROW_COUNT|GET_LOCK|RELEASE_LOCK|RELEASE_ALL_LOCKS|IS_FREE_LOCK|IS_USED_LOCK"
    r"|NEXTVAL|SETVAL|LASTVAL|MASTER_POS_WAIT|MASTER_GTID_WAIT|WAIT_FOR_EXECUTED_GTID_SET)\s*\(|"
    r"\bNEXT\s+VALUE\s+FOR\b|\bPREVIOUS\s+VALUE\s+FOR\b|@@(?:SESSION\.)?(?:last_insert_id|identity|last_gtid"
    r"|warning_count|error_count|in_transaction)\b",
    re.I,
)
_DML_IN_CTE = re.compile(r"\b(?:INSERT|UPDATE|DELETE|REPLACE)\b", re.I)
_SHOW_READS = re.compile(
    r"^\s*SHOW\s+(?:FULL\s+|EXTENDED\s+)*(?:TABLES|COLUMNS|FIELDS|INDEX|INDEXES|KEYS|CREATE|TABLE\s+STATUS|"
    r"DATABASES|SCHEMAS|TRIGGERS|EVENTS|FUNCTION|PROCEDURE|CHARACTER\s+SET|CHARSET|COLLATION|ENGINES|PLUGINS)\b",
    re.I,
)
# PREPARE / DEALLOCATE PREPARE keep a statement on the primary connection (its EXECUTE runs there): no write
# LOCK / UNLOCK TABLES: no write either (reads go to the primary while the locks hold: proxy.execution.replicas)
_SESSION_WORDS = {"SET", "BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "SHOW", "PREPARE",
                  "DEALLOCATE", "LOCK", "UNLOCK"}
_DROP_PREPARE = re.compile(r"^\s*DROP\s+PREPARE\b", re.I)
_EXPLAIN_ANALYZE = re.compile(r"^[\s(]*(?:EXPLAIN|DESCRIBE|DESC)\s+ANALYZE\b", re.I)  # MySQL: runs the statement
_READ_WORDS = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN"}


def classify_access(sql: str) -> Access:
    """Cheap classification of a client's statement text for the pass-through path (no parsing).

    Anything unsure counts as a write: a wrong "write" costs a replica read, a wrong "read" could run a
    write on a replica or read stale data."""
    if "/*" in sql and _WRITE_HINT.search(sql):
        return Access.SESSION
    masked = _COMMENTS.sub(" ", _MASK.sub("''", sql))
    body = masked.strip().rstrip(";").rstrip()
    if ";" in body:  # several statements in one COM_QUERY
        return Access.WRITE
    m = _FIRST_WORD.match(body)
    if m is None:
        return Access.WRITE
    word = m.group(1).upper()
    if word == "SHOW":
        return Access.READ if _SHOW_READS.match(body) else Access.SESSION
    if word in _READ_WORDS:
        if _EXPLAIN_ANALYZE.match(body):
            return Access.WRITE
        if word == "WITH" and _DML_IN_CTE.search(body):
            return Access.WRITE
        if _LOCKING.search(body) or _SESSION_FUNCTIONS.search(body):
            return Access.SESSION
        return Access.READ
    if word in _SESSION_WORDS or (word == "DROP" and _DROP_PREPARE.match(body)):
        return Access.SESSION
    return Access.WRITE


def is_read(sql: str) -> bool:
    """True when `sql` may be answered by a replica (a plain read, no lock, no write hint)."""
    return classify_access(sql) is Access.READ


# --- the group ------------------------------------------------------------------------------------------


@dataclass
class ReplicaState:
    """A read member: whether it answers, how far behind it is, and why it is out of rotation."""

    name: str
    source: DataSource
    weight: float = 1.0
    reachable: bool = True
    lag: float | None = None  # Seconds_Behind_Master at the last probe
    replicating: bool | None = None  # False: SQL or IO thread stopped; None: not known / not a replica
    reason: str = ""

    def usable(self, max_lag: float | None) -> bool:
        if not self.reachable or self.replicating is False:
            return False
        return max_lag is None or self.lag is None or self.lag <= max_lag

    def status(self, max_lag: float | None) -> tuple[str, str]:
        """(enabled | disabled, why) for SHOW STORAGE UNITS / SHOW READWRITE_SPLITTING RULES."""
        if not self.reachable:
            return "disabled", self.reason or "unreachable"
        if self.replicating is False:
            return "disabled", self.reason or "replication stopped"
        if max_lag is not None and self.lag is not None and self.lag > max_lag:
            return "disabled", f"lag {self.lag:g}s > maxReplicationLagSeconds {max_lag:g}"
        return "enabled", ""


def _prop_float(props: Mapping[str, Any], name: str) -> float | None:
    value = props.get(name)
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        log.warning("bad_prop", prop=name, value=value)
        return None


class ReadWriteGroup(DataSource):
    """A primary and its replicas under one data source name.

    As a `DataSource` it is the primary (acquire/release/kill_query/stats/config), so every path that does
    not know about replicas keeps working; connections it lends carry the group as their source (their
    `name` is the group's, as the transaction bookkeeping expects). Replica connections come from
    `acquire_read` / `pick_replica`."""

    fast_relay = False  # every statement is classified read or write first (no proxy.execution.fastpath)

    def __init__(
        self, config: GroupConfig, primary: DataSource, replicas: Sequence[DataSource], props: Mapping[str, Any],
        *, twin_of: ReadWriteGroup | None = None,
    ) -> None:
        # no super().__init__: the group has no pool of its own, every method below delegates
        self.group_config = config
        self.name = config.name
        self.primary = primary
        self.config = primary.config
        self.replicas = [ReplicaState(r.name, r, config.weights.get(r.name, 1.0)) for r in replicas]
        # a shadow twin (open_data_sources): another primary over `twin_of`'s replicas, whose health `twin_of`
        # watches and whose pools `twin_of` opens and closes
        self.twin_of = twin_of
        if twin_of is not None:
            self.replicas = twin_of.replicas
        self.max_lag = config.max_lag_seconds if config.max_lag_seconds is not None else _prop_float(
            props, "max-replication-lag-seconds")
        interval = config.health_interval
        if interval is None:
            ms = _prop_float(props, "replica-health-check-interval-milliseconds")
            interval = ms / 1000 if ms is not None else DEFAULT_HEALTH_INTERVAL
        self.health_interval = max(0.05, interval)
        wait = config.gtid_wait
        if wait is None:
            ms = _prop_float(props, "gtid-wait-timeout-milliseconds")
            wait = ms / 1000 if ms is not None else DEFAULT_GTID_WAIT
        self.gtid_wait = wait
        self.mariadb = True
        self._rr = 0
        self._rng = random.Random()
        self._monitor: asyncio.Task[None] | None = None
        self._monitor_conns: dict[str, aiomysql.Connection] = {}
        self._all_down_logged = False
        self.log = log.bind(group=self.name, primary=primary.name)

    # -- DataSource protocol (the primary) ---------------------------------------------------------------

    async def start(self) -> None:
        """The primary must answer (as any data source at start-up); a replica that does not is started
        out of rotation and probed until it answers, so one dead replica does not keep the proxy down."""
        await self.primary.start()
        if self.twin_of is not None:
            self.mariadb = self.twin_of.mariadb
            return
        for r in self.replicas:
            try:
                await r.source.start()
            except BackendError as exc:
                self.mark_down(r.name, str(exc))
        conn = await self.primary.acquire(self)
        try:
            rows = await conn.execute("SELECT VERSION()")
        finally:
            self.primary.release(conn, owner=self, reset=False)
        if isinstance(rows, list) and rows and rows[0][0]:
            self.mariadb = "mariadb" in rows[0][0].decode().lower()
        if self.replicas:
            await self._probe_all()
            self._monitor = asyncio.get_running_loop().create_task(self._monitor_loop(), name=f"rw-{self.name}")
        self.log.info("readwrite_group_ready", replicas=[r.name for r in self.replicas],
                      read_after_write=self.group_config.read_after_write,
                      transactional=self.group_config.transactional_read_query_strategy,
                      load_balancer=self.group_config.load_balancer_type)

    async def acquire(self, owner: object, *, found_rows: bool = False, holder: Holder | None = None
                      ) -> BackendConnection:
        conn = await self.primary.acquire(owner, found_rows=found_rows, holder=holder)
        conn.source = self
        return conn

    async def try_acquire(self, owner: object, *, found_rows: bool = False, holder: Holder | None = None
                          ) -> BackendConnection | None:
        conn = await self.primary.try_acquire(owner, found_rows=found_rows, holder=holder)
        if conn is not None:
            conn.source = self
        return conn

    @property
    def waiters(self) -> int:
        return self.primary.waiters

    async def admin_execute(self, sql: str) -> OKPacket | ERRPacket | list[tuple[bytes | None, ...]] | None:
        return await self.primary.admin_execute(sql)

    async def admin_answer(
        self, sql: str, names: str = "utf8mb4"
    ) -> tuple[tuple[ColumnDefinition41, ...], list[tuple[bytes | None, ...]]] | ERRPacket | None:
        return await self.primary.admin_answer(sql, names)

    def release(self, conn: BackendConnection, *, owner: object, reset: bool = True) -> None:
        if conn.source is self:
            conn.source = self.primary
        conn.source.release(conn, owner=owner, reset=reset)

    async def kill_query(self, thread_id: int) -> None:
        await self.primary.kill_query(thread_id)

    async def close(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._monitor
            self._monitor = None
        for conn in self._monitor_conns.values():
            conn.close()
        self._monitor_conns.clear()
        await self.primary.close()
        if self.twin_of is None:
            for r in self.replicas:
                await r.source.close()

    def stats(self) -> dict[str, int]:
        return self.primary.stats()

    # -- choosing a replica --------------------------------------------------------------------------------

    @property
    def gtid_position_sql(self) -> str:
        return "SELECT @@gtid_current_pos" if self.mariadb else "SELECT @@global.gtid_executed"

    def gtid_wait_sql(self, position: str) -> str:
        pos = position.replace("\\", "\\\\").replace("'", "\\'")
        if self.mariadb:
            return f"SELECT MASTER_GTID_WAIT('{pos}', {self.gtid_wait:g})"
        return f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{pos}', {self.gtid_wait:g})"

    def usable_replicas(self) -> list[ReplicaState]:
        return [r for r in self.replicas if r.usable(self.max_lag)]

    def pick_replica(self, exclude: Sequence[str] = (), prefer: str | None = None) -> ReplicaState | None:
        """The replica the load balancer picks among the usable ones (`prefer` first when usable), or None:
        then reads go to the primary, which is logged once until a replica is usable again."""
        candidates = [r for r in self.usable_replicas() if r.name not in exclude]
        if not candidates:
            if self.replicas and not self._all_down_logged and not exclude:
                self._all_down_logged = True
                self.log.warning("no_usable_replica", detail="reads go to the primary",
                                 replicas={r.name: r.status(self.max_lag)[1] for r in self.replicas})
            return None
        if self._all_down_logged and not exclude:
            self._all_down_logged = False
            self.log.info("replicas_usable_again", replicas=[r.name for r in candidates])
        if prefer is not None:
            for r in candidates:
                if r.name == prefer:
                    return r
        kind = self.group_config.load_balancer_type
        if kind == "RANDOM":
            return self._rng.choice(candidates)
        if kind == "WEIGHT":
            weights = [max(r.weight, 0.0) for r in candidates]
            if sum(weights) <= 0:
                return candidates[0]
            return self._rng.choices(candidates, weights=weights, k=1)[0]
        self._rr += 1
        return candidates[(self._rr - 1) % len(candidates)]

    async def acquire_read(self, owner: object, *, found_rows: bool = False, exclude: Sequence[str] = ()
                           ) -> BackendConnection | None:
        """A pooled connection to a usable replica (the load balancer's pick), or None when none answers.
        A replica whose connection fails is taken out of rotation before the next one is tried."""
        tried = list(exclude)
        while (replica := self.pick_replica(tried)) is not None:
            try:
                return await replica.source.acquire(owner, found_rows=found_rows)
            except BackendError as exc:
                self.mark_down(replica.name, str(exc))
                tried.append(replica.name)
        return None

    def replica(self, name: str) -> ReplicaState | None:
        return next((r for r in self.replicas if r.name == name), None)

    # -- health ----------------------------------------------------------------------------------------------

    def mark_down(self, name: str, reason: str) -> None:
        """Out of rotation until the monitor's probe answers again."""
        r = self.replica(name)
        if r is None:
            return
        if r.reachable:
            self.log.warning("replica_down", data_source=name, reason=reason)
        r.reachable = False
        r.reason = reason

    async def _monitor_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self._probe_all()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug in a probe must not end the monitoring
                self.log.exception("replica_probe_failed")

    async def _probe_all(self) -> None:
        await asyncio.gather(*(self._probe(r) for r in self.replicas))

    async def _probe(self, r: ReplicaState) -> None:
        """Connect (a connection of the monitor's own, outside the pool) and read SHOW SLAVE STATUS."""
        timeout = max(1.0, min(5.0, self.health_interval * 5))
        try:
            status = await asyncio.wait_for(self._slave_status(r), timeout=timeout)
        except (pymysql.err.MySQLError, OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            conn = self._monitor_conns.pop(r.name, None)
            if conn is not None:
                conn.close()
            self.mark_down(r.name, f"probe failed: {exc}")
            return
        was = r.usable(self.max_lag)
        if not r.reachable:
            self.log.info("replica_answers_again", data_source=r.name)
        r.reachable = True
        r.reason = ""
        if status is None:  # not a replica (or no privilege to ask): lag unknown, used as is
            r.replicating, r.lag = None, None
        else:
            running = status.get("Slave_SQL_Running", status.get("Replica_SQL_Running")) == "Yes" and status.get(
                "Slave_IO_Running", status.get("Replica_IO_Running")) == "Yes"
            lag = status.get("Seconds_Behind_Master", status.get("Seconds_Behind_Source"))
            r.replicating = running and lag is not None
            r.lag = float(lag) if lag is not None else None
            if not r.replicating:
                r.reason = (f"replication stopped (SQL thread {status.get('Slave_SQL_Running')}, IO thread "
                            f"{status.get('Slave_IO_Running')}, Seconds_Behind_Master NULL)")
        now = r.usable(self.max_lag)
        if now != was:
            _state, why = r.status(self.max_lag)
            (self.log.info if now else self.log.warning)(
                "replica_enabled" if now else "replica_disabled", data_source=r.name, reason=why, lag=r.lag)

    async def _slave_status(self, r: ReplicaState) -> dict[str, Any] | None:
        conn = self._monitor_conns.get(r.name)
        if conn is None or conn.closed:
            c = r.source.config
            conn = await aiomysql.connect(host=c.host, port=c.port, user=c.username, password=c.password,
                                          autocommit=True, connect_timeout=min(c.connect_timeout, 5.0),
                                          ssl=r.source.ssl)
            self._monitor_conns[r.name] = conn
        async with conn.cursor(aiomysql.DictCursor) as cur:
            try:
                await cur.execute("SHOW SLAVE STATUS")
            except pymysql.err.ProgrammingError:  # MySQL 8.4 dropped the old name
                await cur.execute("SHOW REPLICA STATUS")
            except pymysql.err.OperationalError as exc:
                if exc.args and exc.args[0] in (1227, 1045, 1142):  # no REPLICATION CLIENT privilege
                    return None
                raise
            row = await cur.fetchone()
        return dict(row) if row else None

    # -- admin rows --------------------------------------------------------------------------------------

    def member_status(self, name: str) -> tuple[str, str, float | None]:
        """(enabled | disabled, detail, lag seconds) of a member, for SHOW STORAGE UNITS."""
        r = self.replica(name)
        if r is None:
            return "enabled", "primary", None
        state, why = r.status(self.max_lag)
        return state, why or "replica", r.lag

    def rule_row(self) -> tuple[object, ...]:
        c = self.group_config
        props = ",".join(f"{k}={v}" for k, v in c.load_balancer_props.items())
        states = ",".join(f"{r.name}:{r.status(self.max_lag)[0]}" for r in self.replicas)
        return (c.name, c.write, ",".join(c.reads), c.transactional_read_query_strategy, c.load_balancer_type,
                props, c.read_after_write, states)


RULE_COLUMNS = (
    "name", "write_storage_unit_name", "read_storage_unit_names", "transactional_read_query_strategy",
    "load_balancer_type", "load_balancer_props", "read_after_write", "read_storage_unit_status",
)


async def open_data_sources(
    db: DatabaseConfig, props: Mapping[str, Any], opened: MutableMapping[tuple[str, str], DataSource]
) -> dict[str, DataSource]:
    """The logical database's routable data sources (groups under their group name, in the order the
    rules list them), opening every pool. Each opened source is put in `opened` (keyed by database and
    name) as soon as it is open, so that a failure later on can still close it."""
    groups = {g.name: g for g in parse_groups(db.other_rules, list(db.data_sources), db.file, log.warning)}
    members = {m for g in groups.values() for m in (g.write, *g.reads)}
    shadow = db.rules.shadow.data_sources if db.rules.shadow is not None else {}
    members |= {production for production, _shadow in shadow.values()}  # served under its shadow source's name
    twins = {g.name: shadow[g.write] for g in groups.values() if g.write in shadow}
    members |= {shadow_unit for _production, shadow_unit in twins.values()}  # the twins' primaries
    physical = {name: DataSource(cfg) for name, cfg in db.data_sources.items()}
    for name, source in physical.items():
        if name not in members:
            await source.start()
            opened[(db.name, name)] = source
    result: dict[str, DataSource] = {}
    for name in db.rules.data_sources:
        if name in groups:
            g = groups[name]
            primary = physical[twins[name][0]] if name in twins else physical[g.write]
            group = ReadWriteGroup(g, primary, [physical[r] for r in g.reads], props)
            opened[(db.name, name)] = group  # closing the group closes its members and stops its monitor
            await group.start()
            result[name] = group
            if name in twins:  # !SHADOW as the write data source: shadow statements' units go to the twin, by
                # the shadow unit's name (routing.shadow.decide); reads still go to the group's replicas
                shadow_unit = twins[name][1]
                twin = ReadWriteGroup(
                    replace(g, name=shadow_unit, write=shadow_unit), physical[shadow_unit], [], props, twin_of=group
                )
                opened[(db.name, shadow_unit)] = twin
                await twin.start()
                result[shadow_unit] = twin
        elif name in shadow:  # !SHADOW: the logical name stands for production (routing.shadow.decide), its
            # connections named by it (the session keys them, and its transaction, by the routed name)
            source = DataSource(replace(db.data_sources[shadow[name][0]], name=name))
            await source.start()
            opened[(db.name, name)] = source
            result[name] = source
        else:
            result[name] = physical[name]
    for _production, shadow_name in shadow.values():  # where shadow statements' units go, by their own name
        result.setdefault(shadow_name, physical[shadow_name])
    return result





def storage_unit_rows(group: ReadWriteGroup) -> list[tuple[str, DataSource, tuple[str, str, float | None]]]:
    """(name, data source, status) of every member, primary first."""
    out = [(group.primary.name, group.primary, group.member_status(group.primary.name))]
    for r in group.replicas:
        out.append((r.name, r.source, group.member_status(r.name)))
    return out


__all__ = [
    "RULE_COLUMNS",
    "Access",
    "GroupConfig",
    "ReadWriteGroup",
    "classify_access",
    "is_read",
    "open_data_sources",
    "parse_groups",
]
