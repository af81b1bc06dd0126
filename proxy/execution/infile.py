"""LOAD DATA LOCAL INFILE through the proxy: the data source asks for the client's file (a 0xFB packet with its
name), the proxy relays the request to the client, the client's file content back to the data source up to its
empty packet, and then the rest of the answer (the OK with `Records: ...`, or an ERR).

The proxy reads no file of its own: the request reaches the client, whose library sends only a file it agreed to
send. A client without CLIENT_LOCAL_FILES gets MariaDB's own refusal before anything is sent (`refused`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.constants import Capability
from protocol.results import ResultSummary

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.execution.context import SessionContext as Session

_LOAD_LOCAL = re.compile(r"^\s*LOAD\s+(?:DATA|XML)\s+(?:(?:LOW_PRIORITY|CONCURRENT)\s+)?LOCAL\b", re.I)
NOT_ALLOWED = 4166  # ER_LOAD_INFILE_CAPABILITY_DISABLED
NOT_ALLOWED_MESSAGE = (
    "The used command is not allowed because the MariaDB server or client has disabled the local infile capability"
)


def refused(session: Session, sql: str) -> bool:
    """A LOAD DATA LOCAL from a client that did not offer CLIENT_LOCAL_FILES: answered with MariaDB's ERR (True)."""
    if session.capabilities & Capability.LOCAL_FILES or not _LOAD_LOCAL.match(sql):
        return False
    session.error(NOT_ALLOWED, NOT_ALLOWED_MESSAGE, "HY000")
    return True


async def local_infile(
    session: Session, conn: BackendConnection, writer: Any, error_rewriter: Callable[[bytes], bytes] | None
) -> ResultSummary:
    """After the file request was relayed: the client's packets to the data source, up to and with the empty one
    that ends the file, each with the sequence id it came with; then the answer that follows, relayed."""
    while True:
        payload = await session.wire.read()
        conn.send_frame(payload, (session.wire.seq - 1) & 0xFF)
        if not payload:
            break
    return await conn.relay(
        b"",
        writer,
        first_seq=session.wire.seq,
        client_deprecate_eof=session.deprecate_eof,
        more_results=session.more_results,
        error_rewriter=error_rewriter,
        send=False,
    )


__all__ = ["local_infile", "refused"]
