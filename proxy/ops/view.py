"""What this room reads and changes of the server (proxy.server.ProxyServer, which imports this room, so it is
named through a Protocol, as proxy.execution.context does for the sessions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.backends.xa import TransactionManager
    from proxy.config.model import ProxyConfig
    from proxy.frontend.handshake import Authenticator


class OpsServer(Protocol):
    config: ProxyConfig
    authenticator: Authenticator
    sessions: Mapping[int, Any]  # proxy.session.Session
    databases_by_name: Mapping[str, LogicalDatabase]
    tm: TransactionManager
    server_version: str
    started_monotonic: float
    draining: bool
    readiness: Any  # proxy.ops.health.ReadinessProbe (which names this Protocol)

    def database(self, name: str) -> LogicalDatabase | None: ...

    def stop_accepting(self) -> None: ...


__all__ = ["OpsServer"]
