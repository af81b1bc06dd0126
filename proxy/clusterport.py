"""What the rest of the proxy asks of Cluster mode, as one small object per server.

Why its own module, in the configuration room: DistSQL, KILL, the processlist and DDL live in rooms
below the cluster package (which knows the server, the sessions and DistSQL), so they must not import it.
They call `port(server)`, which is `Standalone` (every answer: nothing to do) unless proxy.cluster bound
a `proxy.cluster.hooks.ClusterHooks` to the server at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Standalone:
    """No registry: nothing is published, no other proxy holds sessions or compute nodes."""

    cluster = False  # other proxies share this one's configuration and jobs (proxy.cluster.hooks: True)

    async def publish_database(self, name: str, doc: Mapping[str, Any], file: str, statement: str) -> bool:
        """True once the registry keeps the document (conf/ is then not written); False: write conf/."""
        return False

    async def publish_prop(self, key: str, value: Any, statement: str) -> None:
        return None

    def metadata_changed(self, database: str) -> None:
        return None

    async def publish_transaction_rule(self, before: tuple[str, str, dict[str, Any]]) -> None:
        return None

    async def remote_kill(self, session: Any, target_id: int, scope: str) -> bool:
        """True when another proxy held the session and the answer was sent."""
        return False

    async def other_sessions(self, session: Any, full: bool) -> list[tuple[Any, ...]]:
        return []

    async def claim_job(self, job_id: str) -> bool:
        """True when this proxy is to run the migration job: always in Standalone; in Cluster mode when it
        holds (or just took) the job's claim in the registry, so that one proxy copies at a time."""
        return True

    async def job_elsewhere(self, job_id: str) -> bool:
        """True when another proxy runs the migration job (or the registry cannot say): never in Standalone."""
        return False

    async def release_job(self, job_id: str) -> None:
        """The job is over (committed, rolled back): its claim goes."""
        return None

    async def compute_node_rows(self) -> list[tuple[Any, ...]] | None:
        """SHOW COMPUTE NODES rows of the whole cluster; None: this proxy alone."""
        return None


STANDALONE = Standalone()


def port(server: Any) -> Standalone:
    """The server's cluster port (Standalone unless proxy.cluster.hooks.bind gave it one)."""
    found = getattr(server, "cluster", None)
    return found if isinstance(found, Standalone) else STANDALONE


__all__ = ["STANDALONE", "Standalone", "port"]
