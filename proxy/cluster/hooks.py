"""The cluster's side of proxy.clusterport: what DistSQL, KILL, the processlist and DDL ask of Cluster mode.

proxy.serve joins, binds, starts and leaves; `bind` gives the server a `ClusterHooks`, which the lower
rooms reach through `proxy.clusterport.port(server)` without importing this package.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proxy.cluster.etcd import RegistryUnavailable
from proxy.clusterport import Standalone
from proxy.config.model import ProxyConfig
from proxy.session.distsql.errors import DistSQLError

if TYPE_CHECKING:
    from proxy.cluster.node import ClusterNode
    from proxy.server import ProxyServer
    from proxy.session.session import Session

REGISTRY_ERROR = (1105, "HY000")

_NODES: weakref.WeakKeyDictionary[ProxyServer, ClusterNode] = weakref.WeakKeyDictionary()


def node_of(server: ProxyServer) -> ClusterNode | None:
    return _NODES.get(server)


async def join(config: ProxyConfig) -> tuple[ProxyConfig, ClusterNode | None]:
    """Before the server is built: the registry's configuration (seeded from conf/ by the first proxy)."""
    if config.mode is None:
        return config, None
    from proxy.cluster import remote
    from proxy.cluster.node import ClusterNode

    node = await ClusterNode.join(config)
    remote.install(node)
    from proxy.cluster import xa

    await xa.register_owner(node)  # XA: every gtrid of this proxy is under a registered owner
    node.lease_renewed.append(lambda: xa.register_owner(node))
    return node.config, node


def bind(node: ClusterNode | None, server: ProxyServer) -> None:
    if node is not None:
        from proxy.cluster import xa

        node.bind(server)
        _NODES[server] = node
        server.cluster = ClusterHooks(node, server)
        xa.install(node, server)  # XA decisions in the registry, from the log's opening (server start-up)


async def start(node: ClusterNode | None, addrs: list[tuple[str, int]], version: str) -> None:
    if node is not None:
        from proxy.cluster import xa

        host, port = addrs[0] if addrs else ("", 0)
        await node.start(str(host), int(port), version)
        if node.server is not None:  # in-doubt XA branches of proxies that died: one live proxy finishes them
            from proxy.cluster import jobs

            node.takeover = xa.XATakeOver(node, node.server)
            node._tasks.append(node.takeover.start())
            # and what this proxy's local XA log holds from Standalone mode, if anything
            node._tasks.append(asyncio.get_running_loop().create_task(xa.finish_local_log(node.server)))
            # migration jobs of proxies that died: one live proxy resumes each
            node.job_takeover = jobs.MigrationTakeOver(node, node.server)
            node._tasks.append(node.job_takeover.start())


async def leave(node: ClusterNode | None) -> None:
    if node is not None:
        await node.close()


def _refused(node: ClusterNode, statement: str, exc: Exception) -> DistSQLError:
    return DistSQLError(REGISTRY_ERROR[0], f"{statement} refused: the cluster registry (etcd {node.describe()}) "
                        f"cannot be reached ({exc}); nothing was changed on any proxy. The proxies keep serving "
                        "with the configuration they have; retry when etcd is back", REGISTRY_ERROR[1])


class ClusterHooks(Standalone):
    """Cluster mode's answers for one server (proxy.clusterport.Standalone's methods, over the registry)."""

    cluster = True

    def __init__(self, node: ClusterNode, server: ProxyServer) -> None:
        self.node = node
        self.server = server

    async def publish_database(self, name: str, doc: Mapping[str, Any], file: str,
                               statement: str) -> bool:
        """A validated database document for every proxy: True once published (the registry keeps it, conf/ is
        not written); False in Standalone; DistSQLError (nothing published) without etcd."""
        node = self.node
        from proxy.cluster import registry as reg
        from proxy.cluster.node import ConcurrentChange

        try:
            await node.publish(reg.DATABASES + name, node.database_value(name, dict(doc), file), expect_unchanged=True)
        except RegistryUnavailable as exc:
            raise _refused(node, statement, exc) from None
        except ConcurrentChange:
            raise DistSQLError(1105, f"{statement} refused: another proxy of the cluster changed database {name} "
                               "at the same moment; nothing was changed here. Its change arrives in a moment: look at "
                               "the rules again and retry", "44000") from None
        return True

    async def publish_prop(self, key: str, value: Any, statement: str) -> None:
        node = self.node
        from proxy.cluster import registry as reg

        try:
            await node.publish(reg.PROPS + key, value)
        except RegistryUnavailable as exc:
            raise _refused(node, statement, exc) from None

    def metadata_changed(self, database: str) -> None:
        """DDL ran through this proxy: the others reload the database's metadata (in the background: a DDL
        answer never waits for the registry, and without it the others reload at their next SHOW TABLES or
        REFRESH DATABASE METADATA)."""
        node, server = self.node, self.server
        if node is not None:
            server.track(node.announce_metadata(database))

    async def publish_transaction_rule(self, before: tuple[str, str, dict[str, Any]]) -> None:
        """ALTER TRANSACTION RULE, applied here (which validated it and opened the XA log if needed), for every
        proxy; without etcd the rule is put back as `before` and DistSQLError raised."""
        node, server = self.node, self.server
        from proxy.cluster import registry as reg

        tm = server.tm
        if tm.props.get("xa-instance-id") is not None:
            tm.alter(*before)
            raise DistSQLError(1235, "ALTER TRANSACTION RULE refused: in Cluster mode every proxy process gets its "
                               "own XA owner id from the registry; leave out 'xa-instance-id'", "42000")
        doc = {"defaultType": tm.default_type, "providerType": tm.provider_type, "props": dict(tm.props)}
        try:
            await node.publish(reg.TRANSACTION, doc)
        except RegistryUnavailable as exc:
            tm.alter(*before)
            raise _refused(node, "ALTER TRANSACTION RULE", exc) from None

    async def remote_kill(self, session: Session, target_id: int, scope: str) -> bool:
        """KILL of a session another proxy holds: answered (OK or its error) and True; False when none does."""
        node = self.node
        from proxy.cluster import remote

        try:
            answer = await remote.kill(node, session, target_id, scope)
        except RegistryUnavailable as exc:
            session.error(1094, f"Unknown thread id: {target_id} (not a connection of this proxy, and the cluster "
                          f"registry cannot be reached to ask the others: {exc})", "HY000")
            return True
        if answer is None:
            return False
        if answer.get("errno"):
            session.error(int(answer["errno"]), str(answer.get("message", "")), str(answer.get("sqlstate", "HY000")))
        else:
            session.ok()
        return True

    async def other_sessions(self, session: Session, full: bool) -> list[tuple[Any, ...]]:
        """The other proxies' sessions `session` may see, as SHOW PROCESSLIST rows (none in Standalone)."""
        node = self.node
        from proxy.cluster import remote

        try:
            rows = await remote.other_sessions(node)
        except RegistryUnavailable:
            return []  # the local sessions still answer; the log says the registry is gone
        config = session.user_config
        admin = config is not None and config.admin
        out = []
        for row in rows:
            if admin or row[1] == session.user:
                info = row[7] if full or row[7] is None else str(row[7])[:100]
                out.append((*row[:7], info, "0.000"))  # Progress, as MariaDB prints it
        return out

    async def claim_job(self, job_id: str) -> bool:
        """This proxy runs the migration job when it holds its claim (taken now if nobody's); False when
        another proxy holds it, or the registry cannot say."""
        from proxy.cluster import jobs

        try:
            return await jobs.claim(self.node, job_id) in (jobs.CLAIMED, jobs.OURS)
        except RegistryUnavailable as exc:
            self.node._mark(False, exc)
            return False

    async def job_elsewhere(self, job_id: str) -> bool:
        from proxy.cluster import jobs

        try:
            return await jobs.owner(self.node, job_id) not in (None, self.node.instance_id)
        except RegistryUnavailable as exc:
            self.node._mark(False, exc)
            return True

    async def release_job(self, job_id: str) -> None:
        from proxy.cluster import jobs

        await jobs.release(self.node, job_id)

    async def compute_node_rows(self) -> list[tuple[Any, ...]] | None:
        """SHOW COMPUTE NODES in Cluster mode (None in Standalone)."""
        node = self.node
        try:
            nodes = await node.compute_nodes()
        except RegistryUnavailable as exc:
            raise DistSQLError(REGISTRY_ERROR[0], f"SHOW COMPUTE NODES: the cluster registry (etcd {node.describe()}) "
                               f"cannot be reached ({exc})", REGISTRY_ERROR[1]) from None
        return [(n["instance_id"], "PROXY", n.get("host", ""), str(n.get("port", "")), "OK", "Cluster",
                 str(n.get("slot", "")), "", n.get("version", ""), "") for n in nodes]
