"""One proxy as a compute node of a cluster: joining, staying listed, following the registry.

* `join` (before the ProxyServer is built): the first proxy seeds the registry from its conf/ in one
  transaction; every proxy then takes the registry's configuration. A lease is granted and a
  connection-id slot claimed with it, so connection ids are unique across the cluster:
  slot s hands out s+1, s+1+MAX_SLOTS, ...
* `start` (once listening): the node is registered under its lease (SHOW COMPUTE NODES), the lease is kept
  alive, and one watch on the namespace applies what other proxies change (rules, storage units, props)
  and answers their processlist and KILL requests.
* Losing etcd never stops serving: statements never touch the registry. The keep-alive and the watch retry
  with backoff; on reconnection the node reads the whole namespace again (catching up on what it missed),
  and takes a new lease if the old one expired. Changes made while it is gone are refused
  (`publish` raises RegistryUnavailable; proxy.cluster.hooks turns that into the client's error).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from proxy.cluster import registry as reg
from proxy.cluster.apply import apply_database, apply_prop, apply_transaction_rule
from proxy.cluster.etcd import EtcdClient, KeyValue, RegistryUnavailable, WatchEvent
from proxy.cluster.mode import ClusterMode
from proxy.config.model import ProxyConfig

if TYPE_CHECKING:
    from proxy.server import ProxyServer

log = structlog.get_logger("shardproxy.cluster")

MAX_SLOTS = 1024  # compute nodes one cluster can hold at once (connection ids: slot + 1 + k * MAX_SLOTS)
_BACKOFF = (0.1, 0.2, 0.5, 1.0, 2.0)


class ConcurrentChange(Exception):
    """Another proxy changed the same configuration first (its change is on its way here)."""


class ClusterNode:
    def __init__(self, mode: ClusterMode, config: ProxyConfig, client: EtcdClient | None = None) -> None:
        self.mode = mode
        self.config = config
        self.client = client or EtcdClient(mode.endpoints, timeout=mode.timeout)
        self.prefix = f"/{mode.namespace}/"
        self.instance_id = str(uuid.uuid4())
        self.lease = 0
        self.slot = -1
        self.server: ProxyServer | None = None
        self.available = True  # the registry answered last time we asked
        self._tasks: list[asyncio.Task[None]] = []
        self._revision = 0
        # what this node last saw (or published) per key: events carrying it again change nothing
        self._seen: dict[str, tuple[str, int]] = {}
        self._node_info: dict[str, Any] = {}
        self.responders: dict[str, Any] = {}  # key prefix (relative) -> async handler(node, event); remote.py
        # called with a compute node's instance id when it leaves (lease revoked or expired): the place for
        # a migration job's or an XA log's owner to be taken over (see take_over)
        self.node_left: list[Callable[[str], Awaitable[None]]] = []
        self.takeover: Any = None  # proxy.cluster.xa.XATakeOver, once started
        self.job_takeover: Any = None  # proxy.cluster.jobs.MigrationTakeOver, once started
        self.xa_owner: tuple[str, int] | None = None  # proxy.cluster.xa: the XA owner, and its lease
        # awaited after a new lease was taken (the old one expired): proxy.cluster.xa registers a new owner
        self.lease_renewed: list[Callable[[], Awaitable[Any]]] = []

    def key(self, relative: str) -> str:
        return self.prefix + relative

    def describe(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.mode.endpoints)

    # -- joining ----------------------------------------------------------------------------------------

    @classmethod
    async def join(cls, config: ProxyConfig) -> ClusterNode:
        node = cls(config.mode, config)
        deadline = time.monotonic() + node.mode.timeout
        for attempt in itertools.count():
            try:
                await node._join()
                return node
            except RegistryUnavailable:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(_BACKOFF[min(attempt, len(_BACKOFF) - 1)])
        raise AssertionError("unreachable")

    async def _join(self) -> None:
        seeded = bool(self.config.databases) and await self.client.put_all_if_absent(
            self.key(reg.SEEDED), [(self.key(k), v) for k, v in reg.seed_items(self.config)])  # only a full conf/
        kvs, self._revision = await self.client.get_prefix(self.prefix)
        self.config = reg.config_from_registry(self.config, kvs, self.prefix)
        self._remember(kvs)
        log.info("cluster_joined", registry=self.describe(), namespace=self.mode.namespace, seeded=seeded,
                 databases=list(self.config.databases), instance_id=self.instance_id)
        await self._lease_and_slot()

    async def reseed_if_empty(self, kvs: Sequence[KeyValue], revision: int) -> tuple[Sequence[KeyValue], int]:
        """etcd came back without the cluster's keys (its data directory was lost, or the namespace was
        deleted): seed it again from this proxy's running configuration, so that proxies starting now take
        that rather than their conf/ (or nothing). Several proxies race for it as at the first start: one
        transaction wins, the others take its configuration through the watch, as any change."""
        if self.server is None or any(kv.key == self.key(reg.SEEDED) for kv in kvs):
            return kvs, revision
        tm = self.server.tm
        rule = {"defaultType": tm.default_type, "providerType": tm.provider_type, "props": dict(tm.props)}
        items = reg.running_items(self.server.config, self.server.databases_by_name, rule)
        seeded = await self.client.put_all_if_absent(self.key(reg.SEEDED), [(self.key(k), v) for k, v in items])
        log.warning("cluster_registry_reseeded" if seeded else "cluster_registry_reseeded_by_another",
                    registry=self.describe(), namespace=self.mode.namespace,
                    databases=list(self.server.databases_by_name),
                    detail="etcd came back without the cluster's configuration: seeded again from a running proxy's")
        kvs, revision = await self.client.get_prefix(self.prefix)
        # the old revisions mean nothing in a new etcd; the caller applies what it reads (the winner's
        # configuration, when another proxy seeded first), which also records it as seen
        self._seen.clear()
        return kvs, revision  # the lease went with the data: the keep-alive sees it and registers again

    def _remember(self, kvs: Sequence[KeyValue]) -> None:
        for kv in kvs:
            self._seen[kv.key] = (kv.value, kv.mod_revision)

    async def _lease_and_slot(self) -> None:
        self.lease = await self.client.grant(self.mode.ttl)
        wanted = [self.slot] if self.slot >= 0 else []
        for slot in [*wanted, *range(MAX_SLOTS)]:
            if await self.client.put_all_if_absent(self.key(f"{reg.SLOTS}{slot}"), [], lease=self.lease,
                                                   guard_value=self.instance_id):
                if self.slot >= 0 and slot != self.slot:
                    # another node took our slot while our lease was gone: new connections take the new one
                    log.warning("cluster_slot_changed", old=self.slot, new=slot,
                                detail="sessions opened before keep their ids; KILL reaches them here only")
                    if self.server is not None:
                        self.server._ids = itertools.count(slot + 1, MAX_SLOTS)
                    self._node_info["slot"] = slot
                self.slot = slot
                return
        raise RegistryUnavailable(f"all {MAX_SLOTS} compute node slots of the cluster are taken")

    def bind(self, server: ProxyServer) -> None:
        """The server built from `self.config`: cluster-unique connection ids from here on."""
        from proxy.session.distsql.handler import _INSTANCE_IDS

        self.server = server
        server._ids = itertools.count(self.slot + 1, MAX_SLOTS)
        _INSTANCE_IDS[server] = self.instance_id

    # -- running ----------------------------------------------------------------------------------------

    async def start(self, host: str, port: int, version: str) -> None:
        self._node_info = {"instance_id": self.instance_id, "host": host, "port": port, "slot": self.slot,
                           "version": version, "started": time.time()}
        await self._register()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._keepalive_loop()), loop.create_task(self._watch_loop())]

    async def _register(self) -> None:
        await self.client.put(self.key(reg.COMPUTE_NODES + self.instance_id), reg.dumps(self._node_info),
                              lease=self.lease)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                # cancelled again while it runs on: a cancel that comes as an awaited call completes is lost in
                # a library's asyncio.wait_for on Python 3.11, and the task's loop would go on (no stop ended)
                while not (await asyncio.wait({task}, timeout=0.5))[0]:
                    task.cancel()
                await task
        if self.lease:
            with contextlib.suppress(RegistryUnavailable):
                await asyncio.wait_for(self.client.revoke(self.lease), 2)  # leaves the list at once

    def _mark(self, available: bool, error: Exception | None = None) -> None:
        if available != self.available:
            if available:
                log.info("cluster_registry_back", registry=self.describe())
            else:
                log.warning("cluster_registry_lost", registry=self.describe(), error=str(error),
                            detail="serving with the last configuration; DistSQL changes are refused")
        self.available = available

    async def _keepalive_loop(self) -> None:
        interval = max(0.2, self.mode.ttl / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self.client.keepalive(self.lease):
                    log.warning("cluster_lease_expired", detail="registering again")
                    await self._lease_and_slot()
                    await self._register()
                    for hook in list(self.lease_renewed):
                        await hook()
                self._mark(True)
            except RegistryUnavailable as exc:
                self._mark(False, exc)

    async def _watch_loop(self) -> None:
        attempt = 0
        while True:
            try:
                async for event in self.client.watch_prefix(self.prefix, self._revision + 1):
                    attempt = 0
                    self._mark(True)
                    self._revision = max(self._revision, event.revision)
                    await self._dispatch(event)
            except asyncio.CancelledError:
                raise
            except (RegistryUnavailable, ConnectionError, OSError, ValueError) as exc:
                self._mark(False, exc)
            await asyncio.sleep(_BACKOFF[min(attempt, len(_BACKOFF) - 1)])
            attempt += 1
            with contextlib.suppress(RegistryUnavailable, ConnectionError, OSError):
                await self._catch_up()

    async def _catch_up(self) -> None:
        """Read the whole namespace again after the watch broke: apply what changed meanwhile (or seed the
        registry again when it came back empty)."""
        kvs, revision = await self.client.get_prefix(self.prefix)
        self._mark(True)
        kvs, revision = await self.reseed_if_empty(kvs, revision)
        for kv in kvs:
            if kv.key.startswith((self.key("metadata/"), self.key(reg.PROPS), self.key(reg.TRANSACTION))):
                await self._dispatch(WatchEvent("PUT", kv.key, kv.value, kv.mod_revision))
        self._revision = revision

    async def _dispatch(self, event: WatchEvent) -> None:
        relative = event.key.removeprefix(self.prefix)
        try:
            if relative.startswith(reg.DATABASES) and event.kind != "DELETE":
                if self._seen.get(event.key, ("", 0))[0] == event.value:
                    self._seen[event.key] = (event.value, event.revision)
                    return
                self._seen[event.key] = (event.value, event.revision)
                await self._apply_database(relative.removeprefix(reg.DATABASES), event.value)
            elif relative == reg.TRANSACTION and event.kind != "DELETE":
                if self._seen.get(event.key, ("", 0))[0] != event.value and self.server is not None:
                    apply_transaction_rule(self.server, json.loads(event.value))
                self._seen[event.key] = (event.value, event.revision)
            elif relative.startswith(reg.PROPS) and event.kind != "DELETE":
                if self._seen.get(event.key, ("", 0))[0] != event.value and self.server is not None:
                    apply_prop(self.server, relative.removeprefix(reg.PROPS), json.loads(event.value))
                self._seen[event.key] = (event.value, event.revision)
            elif relative.startswith(reg.COMPUTE_NODES) and event.kind == "DELETE":
                left = relative.removeprefix(reg.COMPUTE_NODES)
                if left != self.instance_id:
                    log.info("cluster_node_left", instance_id=left)
                    for callback in list(self.node_left):
                        await callback(left)
            else:
                for start, handler in self.responders.items():
                    if relative.startswith(start) and event.kind != "DELETE":
                        await handler(self, relative, event)
        except Exception:
            log.exception("cluster_event_failed", key=event.key)

    async def _apply_database(self, name: str, value: str) -> None:
        if self.server is None:
            return
        body = json.loads(value)
        file = reg.database_file(self.config, name, str(body.get("file") or f"database-{name}.yaml"))
        await apply_database(self.server, name, body["doc"], file)

    # -- publishing -------------------------------------------------------------------------------------

    async def publish(self, relative: str, value: Any, *, expect_unchanged: bool = False) -> None:
        """Put a configuration key for every proxy; raises RegistryUnavailable (nothing changed then), or
        ConcurrentChange when `expect_unchanged` and another proxy changed the key since this one saw it."""
        key = self.key(relative)
        text = reg.dumps(value)
        before = self._seen.get(key)
        self._seen[key] = (text, before[1] if before else 0)  # our own watch event must not apply it again
        try:
            if expect_unchanged:
                revision = await self.client.put_if_revision(key, text, before[1] if before else 0)
                if revision is None:
                    raise ConcurrentChange(key)
            else:
                revision = await self.client.put(key, text)
        except BaseException as exc:
            if before is None:
                self._seen.pop(key, None)
            else:
                self._seen[key] = before
            if isinstance(exc, RegistryUnavailable):
                self._mark(False, exc)
            raise
        self._mark(True)
        self._seen[key] = (text, revision)

    async def announce_metadata(self, database: str) -> None:
        try:
            await self.client.put(self.key(reg.METADATA_REFRESH + database),
                                  reg.dumps({"from": self.instance_id, "at": time.time()}))
        except RegistryUnavailable as exc:
            self._mark(False, exc)
            log.warning("cluster_metadata_not_announced", database=database, error=str(exc),
                        detail="other proxies reload it at their next SHOW TABLES / REFRESH DATABASE METADATA")

    def database_value(self, name: str, doc: Any, file: str) -> dict[str, Any]:
        from pathlib import Path

        return {"file": Path(file).name, "doc": doc}

    async def compute_nodes(self) -> list[dict[str, Any]]:
        kvs, _rev = await self.client.get_prefix(self.key(reg.COMPUTE_NODES))
        return sorted((json.loads(kv.value) for kv in kvs), key=lambda n: (n.get("slot", 0), n["instance_id"]))

    # -- state of long-running work (hooks: migration jobs, the XA log) ------------------------------------

    async def put_state(self, area: str, name: str, value: Any) -> None:
        """Keep `value` as this node's `name` in `area` (reg.MIGRATION_JOBS, reg.XA_LOG): not bound to the
        lease, so it outlives the node for another to take over. Raises RegistryUnavailable."""
        await self.client.put(self.key(f"{area}{self.instance_id}/{name}"), reg.dumps(value))

    async def delete_state(self, area: str, name: str, *, owner: str | None = None) -> None:
        await self.client.delete(self.key(f"{area}{owner or self.instance_id}/{name}"))

    async def states(self, area: str) -> dict[str, dict[str, Any]]:
        """Every node's states in `area`: owner instance id -> name -> value."""
        kvs, _rev = await self.client.get_prefix(self.key(area))
        out: dict[str, dict[str, Any]] = {}
        for kv in kvs:
            owner, _, name = kv.key.removeprefix(self.key(area)).partition("/")
            out.setdefault(owner, {})[name] = json.loads(kv.value)
        return out

    async def take_over(self, area: str, owner: str) -> dict[str, Any] | None:
        """The states a node that left kept in `area`, for exactly one surviving node: the first to claim
        them (an etcd transaction, bound to its lease) gets them, every other gets None."""
        claim = self.key(f"claims/{area}{owner}")
        if not await self.client.put_all_if_absent(claim, [], lease=self.lease):
            return None
        return (await self.states(area)).get(owner, {})
