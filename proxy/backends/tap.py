"""The tap on a backend socket: `BackendTap` sits in front of the socket's own protocol so that the fast path
(proxy.execution.fastpath) can take a backend's bytes straight to the client while it relays an answer.

Apart from `backend.py` (one connection's commands and results): this is the transport-level hook only the
fast path uses. It names the connection it marks broken through `TappedConnection`, not the class.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class TappedConnection(Protocol):
    """What the tap knows of the connection behind it: that it can be marked broken (backend.BackendConnection)."""

    broken: bool


class BackendRelay(Protocol):
    """What a backend socket hands its bytes to while a fast-path answer is relayed (proxy.execution.fastpath's
    FastPath; named by this Protocol so that the backends never import the session's relay)."""

    def backend_data(self, data: bytes) -> None: ...

    def backend_lost(self) -> None: ...


class BackendTap(asyncio.Protocol):
    """Sits in front of a backend socket's own protocol (aiomysql's StreamReaderProtocol): while a
    proxy.execution.fastpath command is answered the bytes go to the fast path, otherwise everything goes through
    unchanged."""

    __slots__ = ("conn", "inner", "relay", "transport")

    def __init__(self, inner: Any, conn: TappedConnection, transport: Any) -> None:
        self.inner = inner
        self.transport = transport
        self.conn = conn  # marked broken when its socket closes
        self.relay: BackendRelay | None = None  # the session's fast path while it relays an answer from here

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # pragma: no cover - installed later
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        relay = self.relay
        if relay is not None:
            relay.backend_data(data)
        else:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        self._lost()
        result: bool | None = self.inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()
        self.inner.connection_lost(exc)

    def _lost(self) -> None:
        # killed, timed out or restarted between commands: the session's next command borrows another
        # connection instead of failing on this one
        self.conn.broken = True
        relay = self.relay
        if relay is not None:
            relay.backend_lost()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def install_tap(transport: asyncio.BaseTransport | None, conn: TappedConnection) -> BackendTap | None:
    """Put a BackendTap in front of a backend connection's protocol (None when the transport cannot)."""
    if transport is None or not hasattr(transport, "set_protocol"):
        return None
    inner = transport.get_protocol()
    if isinstance(inner, BackendTap):
        inner.conn, inner.transport = conn, transport
        return inner
    tap = BackendTap(inner, conn, transport)
    transport.set_protocol(tap)
    return tap
