"""One migration job: copy the rows of a windowed table that the new strategy places on another data node,
check source against target, commit (writes paused: old copies deleted, the window ended in the YAML and in
the running rules) or roll back (copies deleted).

Copying walks every data node in key order, a batch at a time (`migration-batch-rows`, throttled to
`migration-rows-per-second`), each batch under the table's write gate (`proxy.migration.gate`) with its
source rows read `LOCK IN SHARE MODE`; a row goes to its new node with an upsert that never replaces a copy
holding a higher `versionColumn` (without one, an existing copy is kept: the new node wins, as in reads).
The position (last key per data node) is saved after every batch, so a restarted proxy resumes the job.
Changes made meanwhile reach both copies through the window's dual writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from protocol.binary import value_to_sql_literal
from protocol.errors import ServerError
from protocol.packets import ERRPacket
from proxy.execution.write_gate import gate_for
from proxy.migration import binlog, store
from routing.dualread import quote_ident, typed_value
from routing.model import DataNode, TableRule
from routing.route import precise_group, route_table

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase

log = structlog.get_logger("shardproxy.migration")

LOCK_WAIT_TIMEOUT = 1  # seconds a copy batch waits for a transaction's row lock before it retries
KEYS_PER_STATEMENT = 1000


class _Server(Protocol):
    """What a job reads of proxy.server.ProxyServer (its props): a Protocol keeps imports one way."""

    config: Any


class MigrationError(ServerError):
    """A migration cannot start or go on: the ERR its MIGRATE statement answers with."""

    def __init__(self, message: str, errno: int = 1105, sqlstate: str = "HY000") -> None:
        super().__init__(message, errno=errno, sqlstate=sqlstate)


class _LockTimeout(Exception):
    pass


def _lit(raw: bytes | None) -> str:
    return value_to_sql_literal(raw)


class Job:
    def __init__(self, server: _Server, db: LogicalDatabase, state: store.JobState) -> None:
        self.server = server
        self.db = db
        self.state = state
        self.task: asyncio.Task[None] | None = None
        self._rate_started = 0.0
        self._rate_rows = 0
        self._homes: dict[tuple[bytes | None, ...], DataNode | None] = {}
        self._homes_rule: TableRule | None = None

    # -- the table --

    def rule(self) -> TableRule:
        sharding = self.db.rules.sharding
        rule = sharding.table(self.state.table) if sharding is not None else None
        if rule is None:
            raise MigrationError(f"table {self.state.table} is not a sharded table of {self.db.name}")
        return rule

    def key_column(self, rule: TableRule) -> str:
        window = rule.window
        if window is not None and window.key_column:
            return window.key_column
        keys = self.db.metadata.unique_keys(rule.logic_table.lower())
        if keys and keys[0].name.upper() == "PRIMARY" and len(keys[0].columns) == 1:
            return keys[0].columns[0]
        raise MigrationError(f"table {rule.logic_table} has no single-column primary key; set "
                             "dualRouting.keyColumn in its rule")

    def columns(self, rule: TableRule) -> list[str]:
        cols = self.db.metadata.columns(rule.logic_table.lower())
        if not cols:
            raise MigrationError(f"the proxy does not know the columns of {rule.logic_table}")
        return list(cols)

    def types(self, rule: TableRule, columns: Sequence[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for c in columns:
            info = self.db.metadata.column_info(rule.logic_table.lower(), c.lower())
            out[c.lower()] = info.data_type if info is not None else None
        return out

    def home(self, rule: TableRule, row: Sequence[bytes | None], index: dict[str, int],
             types: dict[str, str | None]) -> DataNode | None:
        """The row's node under the new strategies (remembered per sharding values: rows share them)."""
        columns = [c for c in sorted(rule.sharding_columns) if c in index]
        raw = tuple(row[index[c]] for c in columns)
        cache = self._homes if self._homes_rule is rule else {}
        if self._homes_rule is not rule:
            self._homes, self._homes_rule = cache, rule
        if raw in cache:
            return cache[raw]
        values = {c: typed_value(v, types.get(c)) for c, v in zip(columns, raw, strict=True)}
        nodes = route_table(rule, [precise_group(values)])
        home = nodes[0] if len(nodes) == 1 else None
        if len(cache) < 100_000:
            cache[raw] = home
        return home

    def old_nodes(self, rule: TableRule) -> list[DataNode]:
        """The data nodes that held rows when the job started (every node, for a job saved without them)."""
        known = set(self.state.sources)
        return [n for n in rule.data_nodes if not known or str(n) in known]

    # -- connections --

    @contextlib.asynccontextmanager
    async def conn(self, data_source: str) -> AsyncIterator[Any]:
        source = self.db.sources[data_source]
        acquire = getattr(source, "acquire", None)
        if acquire is None:
            raise MigrationError(f"data source {data_source} is a read/write splitting group; migrating "
                                 "tables on groups is not supported yet")
        conn = await source.acquire(self)
        broken = False
        try:
            yield conn
        except BaseException:
            broken = True
            raise
        finally:
            if broken:
                with contextlib.suppress(Exception):
                    await conn.execute("ROLLBACK")
            source.release(conn, owner=self)

    async def run(self, conn: Any, sql: str) -> Any:
        answer = await conn.execute(sql)
        if isinstance(answer, ERRPacket):
            if answer.errno == 1205:
                raise _LockTimeout()
            raise MigrationError(f"{answer.message} (while running {sql[:120]}...)", answer.errno,
                                 answer.sqlstate or "HY000")
        return answer

    async def save(self) -> None:
        async with self.conn(self.db.rules.data_sources[0]) as conn:
            await store.save(conn, self.state)

    # -- copy --

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._copy_all())

    async def _copy_all(self) -> None:
        state = self.state
        try:
            rule = self.rule()
            if not state.total and not state.position:
                # nodes empty at the start hold no row to move (only copies, soon): not scanned
                counts = await self._count(rule)
                await binlog.start_positions(self, list(dict.fromkeys(n.data_source for n, c in counts.items()
                                                                      if c)))
                for node, count in counts.items():
                    state.total += count
                    if not count:
                        state.position[str(node)] = "done"
                    else:
                        state.sources.append(str(node))
                await self.save()
            for node in rule.data_nodes:
                while state.position.get(str(node)) != "done":
                    await self._copy_batch(rule, node)
            if state.phase == store.COPYING:
                state.phase = store.CATCHING_UP
                await self.save()
            while True:  # until a pass is short: the lag is then below a second (writes may go on forever)
                began = time.monotonic()
                applied = await binlog.catch_up(self)
                await self.save()
                if applied < 100 or time.monotonic() - began < 0.5:
                    break
            if state.phase == store.CATCHING_UP:
                state.phase = store.READY
                state.finished = time.time()
            await self.save()
            log.info("migration_ready", job=state.id, table=state.table, copied=state.copied,
                     binlog_events=state.applied)
            while any(state.binlog.values()):  # ready: keep applying, so that the lag stays small
                await asyncio.sleep(0.5)
                if await binlog.catch_up(self):
                    await self.save()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            state.phase, state.error = store.FAILED, str(getattr(exc, "message", exc))
            log.error("migration_failed", job=state.id, error=state.error)
            with contextlib.suppress(Exception):
                await self.save()

    async def _count(self, rule: TableRule) -> dict[DataNode, int]:
        counts = {}
        for node in rule.data_nodes:
            async with self.conn(node.data_source) as conn:
                rows = await self.run(conn, f"SELECT COUNT(*) FROM {quote_ident(node.table)}")
                counts[node] = int(rows[0][0])
        return counts

    def _upsert(self, rule: TableRule, node: DataNode, columns: Sequence[str],
                rows: Sequence[Sequence[bytes | None]]) -> str:
        return self.upsert_sql(rule, node, columns, [[_lit(v) for v in row] for row in rows])

    def upsert_sql(self, rule: TableRule, node: DataNode, columns: Sequence[str],
                   rows: Sequence[Sequence[str]]) -> str:
        """Rows (as SQL literals) onto their new node, never replacing a copy with a higher version."""
        cols = ", ".join(quote_ident(c) for c in columns)
        values = ", ".join("(" + ", ".join(row) + ")" for row in rows)
        version = rule.window.version_column if rule.window is not None else None
        if version is None:
            return f"INSERT IGNORE INTO {quote_ident(node.table)} ({cols}) VALUES {values}"
        v = quote_ident(version)
        newer = f"VALUES({v}) > {v}"
        sets = [f"{quote_ident(c)} = IF({newer}, VALUES({quote_ident(c)}), {quote_ident(c)})"
                for c in columns if c.lower() != version.lower()]
        sets.append(f"{v} = IF({newer}, VALUES({v}), {v})")  # last: the others compare with the old version
        return f"INSERT INTO {quote_ident(node.table)} ({cols}) VALUES {values} ON DUPLICATE KEY UPDATE " + ", ".join(
            sets)

    async def _copy_batch(self, rule: TableRule, node: DataNode) -> None:
        state = self.state
        key = self.key_column(rule)
        columns = self.columns(rule)
        index = {c.lower(): i for i, c in enumerate(columns)}
        types = self.types(rule, columns)
        batch = max(1, self.server.config.prop_int("migration-batch-rows"))
        last = state.position.get(str(node))
        where = f" WHERE {quote_ident(key)} > {_lit(bytes.fromhex(last))}" if last else ""
        sql = (f"SELECT {', '.join(quote_ident(c) for c in columns)} FROM {quote_ident(node.table)}{where} "
               f"ORDER BY {quote_ident(key)} LIMIT {batch} LOCK IN SHARE MODE")
        gate = gate_for(self.db.name, rule.logic_table)
        while True:
            try:
                async with gate.exclusive(), self.conn(node.data_source) as src:
                    await self.run(src, f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_TIMEOUT}")
                    await self.run(src, "BEGIN")
                    rows = await self.run(src, sql)
                    moving: dict[DataNode, list[Sequence[bytes | None]]] = {}
                    for row in rows:
                        home = self.home(rule, row, index, types)
                        if home is not None and home != node:
                            moving.setdefault(home, []).append(row)
                    for home, batch_rows in moving.items():
                        async with self.conn(home.data_source) as dst:
                            await self.run(dst, self._upsert(rule, home, columns, batch_rows))
                    await self.run(src, "COMMIT")
                break
            except _LockTimeout:
                await asyncio.sleep(0.05)  # a transaction holds a row of the batch: let it finish, retry
        state.scanned += len(rows)
        state.copied += sum(len(r) for r in moving.values())
        k = index[key.lower()]
        state.position[str(node)] = "done" if len(rows) < batch else rows[-1][k].hex()  # type: ignore[union-attr]
        await self.save()
        await self._throttle(len(rows))

    async def _throttle(self, rows: int) -> None:
        rate = self.server.config.prop_int("migration-rows-per-second")
        if rate <= 0:
            return
        now = time.monotonic()
        if not self._rate_started:
            self._rate_started = now
        self._rate_rows += rows
        ahead = self._rate_rows / rate - (now - self._rate_started)
        if ahead > 0:
            await asyncio.sleep(ahead)

    # -- check --

    def _crc_sql(self, columns: Sequence[str]) -> str:
        parts = ", ".join(f"IFNULL(HEX({quote_ident(c)}), 'N')" for c in columns)
        return f"CRC32(CONCAT_WS(',', {parts}))"

    async def _moved_rows(self, rule: TableRule, node: DataNode, extra: str = ""
                          ) -> AsyncIterator[list[tuple[DataNode, Sequence[bytes | None]]]]:
        """Batches of (new home, row) for the rows on `node` whose new home is elsewhere; a row is
        (key, sharding columns..., `extra` expression)."""
        key = self.key_column(rule)
        sharding = sorted(rule.sharding_columns)
        index = {c: i + 1 for i, c in enumerate(sharding)}
        columns = self.columns(rule)
        types = self.types(rule, columns)
        select = ", ".join([quote_ident(key), *(quote_ident(c) for c in sharding), *([extra] if extra else [])])
        last: bytes | None = None
        while True:
            where = f" WHERE {quote_ident(key)} > {_lit(last)}" if last is not None else ""
            async with self.conn(node.data_source) as conn:
                rows = await self.run(conn, f"SELECT {select} FROM {quote_ident(node.table)}{where} ORDER BY "
                                            f"{quote_ident(key)} LIMIT 5000")
            out = []
            for row in rows:
                home = self.home(rule, row, index, types)
                if home is not None and home != node:
                    out.append((home, row))
            if out:
                yield out
            if len(rows) < 5000:
                return
            last = rows[-1][0]

    async def check(self) -> list[dict[str, Any]]:
        rule = self.rule()
        key = self.key_column(rule)
        crc = self._crc_sql(self.columns(rule))
        ncrc = 1 + len(rule.sharding_columns)
        result: list[dict[str, Any]] = []
        checked = time.time()
        for node in self.old_nodes(rule):
            source: dict[DataNode, dict[bytes, int]] = {}
            async for batch in self._moved_rows(rule, node, crc):
                for home, row in batch:
                    source.setdefault(home, {})[row[0]] = int(row[ncrc])  # type: ignore[index,arg-type]
            for home, expected in source.items():
                target = await self._crcs(home, key, crc, list(expected))
                bad = [k for k in expected if target.get(k) != expected[k]]
                if bad:  # a write in flight can differ for a moment: look again with writes paused
                    await self._binlog_applied_since(checked)  # and writes beside the proxy reach the copy so
                    async with gate_for(self.db.name, rule.logic_table).exclusive():
                        again_src = await self._crcs(node, key, crc, bad)
                        again_dst = await self._crcs(home, key, crc, bad)
                    for k in bad:  # deleted meanwhile (from both copies, by a dual delete): not a row any more
                        if k not in again_src:
                            expected.pop(k, None)
                            target.pop(k, None)
                    expected.update(again_src)
                    target.update(again_dst)
                    bad = [k for k in bad if k in again_src and again_dst.get(k) != again_src[k]]
                keys = sorted(expected)
                result.append({
                    "source": str(node), "target": str(home), "source_rows": len(expected),
                    "target_rows": sum(1 for k in expected if k in target),
                    "source_checksum": zlib.crc32(b"".join(expected[k].to_bytes(4, "big") for k in keys)),
                    "target_checksum": zlib.crc32(b"".join(target.get(k, 0).to_bytes(4, "big") for k in keys)),
                    "mismatches": ", ".join(k.decode(errors="replace") for k in bad[:20])
                                  + (f" (+{len(bad) - 20} more)" if len(bad) > 20 else ""),
                    "result": not bad,
                })
        self.state.check, self.state.check_time = result, time.time()
        await self.save()
        return result

    async def _binlog_applied_since(self, moment: float, timeout: float = 5.0) -> None:
        """Wait (at most `timeout` s) until the job's own loop has applied the binary logs in a pass that began
        after `moment`: a row written beside the proxy before the check began is then on its new node. (Two
        passes ending after `moment`: the second began after it. The loop's passes are the only ones, so no
        event is applied twice.)"""
        if not any(self.state.binlog.values()) or self.task is None or self.task.done():
            return
        deadline = time.monotonic() + timeout
        for _ in range(2):
            while self.state.caught_up_at <= moment and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            moment = self.state.caught_up_at

    async def _crcs(self, node: DataNode, key: str, crc: str, keys: Sequence[bytes]) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        async with self.conn(node.data_source) as conn:
            for i in range(0, len(keys), KEYS_PER_STATEMENT):
                chunk = ", ".join(_lit(k) for k in keys[i : i + KEYS_PER_STATEMENT])
                rows = await self.run(conn, f"SELECT {quote_ident(key)}, {crc} FROM {quote_ident(node.table)} "
                                            f"WHERE {quote_ident(key)} IN ({chunk})")
                out.update({r[0]: int(r[1]) for r in rows})  # type: ignore[arg-type,misc]
        return out

    # -- commit / rollback --

    async def commit(self, switch: Any) -> float:
        """First, with writes paused one batch at a time only, every old copy whose row is on its new node is
        deleted (a copy missing or differing there is copied again first, by the upsert's version rule):
        reads and dual writes are the same before and after. Then, writes paused, the same for what changed
        meanwhile, and `switch()` ends the window. Answers the final pause in milliseconds."""
        if self.state.phase != store.READY:
            raise MigrationError(f"migration {self.state.id} is {self.state.phase}, not ready; wait until "
                                 "SHOW MIGRATION STATUS says ready", 1105)
        rule = self.rule()
        gate = gate_for(self.db.name, rule.logic_table)
        await self._stop_task()
        await binlog.catch_up(self)
        deleted = await self._drain(rule, gate)
        started = time.monotonic()
        async with gate.exclusive():
            await binlog.catch_up(self)  # writes paused: the logs' ends are final
            deleted += await self._drain(rule, None)
            drained = time.monotonic()
            await switch()
            pause = (time.monotonic() - started) * 1000
        log.info("migration_commit_pause", job=self.state.id, drain_ms=round((drained - started) * 1000, 1),
                 switch_ms=round((time.monotonic() - drained) * 1000, 1))
        self.state.phase, self.state.pause_ms, self.state.deleted = store.COMMITTED, pause, deleted
        self.state.finished = time.time()
        await self.save()
        log.info("migration_committed", job=self.state.id, table=self.state.table, pause_ms=round(pause, 1),
                 deleted=deleted)
        return pause

    async def _drain(self, rule: TableRule, gate: Any) -> int:
        """Delete the old copies of moved rows, each batch under `gate` (None: the caller holds it)."""
        key = self.key_column(rule)
        columns = self.columns(rule)
        crc = self._crc_sql(columns)
        deleted = 0
        for node in self.old_nodes(rule):
            async for batch in self._moved_rows(rule, node):
                by_home: dict[DataNode, list[bytes]] = {}
                for home, row in batch:
                    by_home.setdefault(home, []).append(row[0])  # type: ignore[arg-type]
                async with gate.exclusive() if gate is not None else contextlib.nullcontext():
                    for home, keys in by_home.items():
                        source = await self._crcs(node, key, crc, keys)  # as they are now, writes paused
                        target = await self._crcs(home, key, crc, list(source))
                        differing = [k for k, v in source.items() if target.get(k) != v]
                        if differing:
                            await self._recopy(rule, node, home, key, columns, differing)
                        async with self.conn(node.data_source) as conn:
                            gone = list(source)
                            # the old copies' deletion is the move itself, not a change to catch up on
                            logged = bool(self.state.binlog.get(node.data_source))
                            if logged:
                                await self.run(conn, "SET SESSION sql_log_bin = 0")
                            for i in range(0, len(gone), KEYS_PER_STATEMENT):
                                chunk = ", ".join(_lit(k) for k in gone[i : i + KEYS_PER_STATEMENT])
                                ok = await self.run(conn, f"DELETE FROM {quote_ident(node.table)} WHERE "
                                                          f"{quote_ident(key)} IN ({chunk})")
                                deleted += int(getattr(ok, "affected_rows", 0) or 0)
                            if logged:
                                await self.run(conn, "SET SESSION sql_log_bin = 1")
        return deleted

    async def _recopy(self, rule: TableRule, node: DataNode, home: DataNode, key: str, columns: Sequence[str],
                      keys: Sequence[bytes]) -> None:
        cols = ", ".join(quote_ident(c) for c in columns)
        async with self.conn(node.data_source) as conn:
            rows = await self.run(conn, f"SELECT {cols} FROM {quote_ident(node.table)} WHERE {quote_ident(key)} IN "
                                        f"({', '.join(_lit(k) for k in keys)})")
        if rows:
            async with self.conn(home.data_source) as conn:
                await self.run(conn, self._upsert(rule, home, columns, rows))

    async def _stop_task(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task
        self.task = None

    async def rollback(self) -> None:
        if self.state.phase not in store.ACTIVE and self.state.phase != store.FAILED:
            raise MigrationError(f"migration {self.state.id} is {self.state.phase}; only a migration not yet "
                                 "committed can be rolled back")
        await self._stop_task()
        rule = self.rule()
        key = self.key_column(rule)
        removed = 0
        gate = gate_for(self.db.name, rule.logic_table)
        for node in self.old_nodes(rule):
            async for batch in self._moved_rows(rule, node):
                by_home: dict[DataNode, list[bytes]] = {}
                for home, row in batch:
                    by_home.setdefault(home, []).append(row[0])  # type: ignore[arg-type]
                async with gate.exclusive():
                    for home, keys in by_home.items():
                        async with self.conn(home.data_source) as conn:
                            chunk = ", ".join(_lit(k) for k in keys)
                            ok = await self.run(conn, f"DELETE FROM {quote_ident(home.table)} WHERE "
                                                      f"{quote_ident(key)} IN ({chunk})")
                            removed += int(getattr(ok, "affected_rows", 0) or 0)
        self.state.phase, self.state.deleted, self.state.finished = store.ROLLED_BACK, removed, time.time()
        await self.save()


def new_state(database: str, table: str) -> store.JobState:
    return store.JobState(id=f"j{uuid.uuid4().hex[:16]}", database=database, table=table, started=time.time())
