"""The one place an exception becomes the client's ERR.

Every error that reaches a client is a `protocol.errors.ServerError` (the kernel's RoutingError, the merge's
MergeError, BackendError, UnitFailed, StepFailed, StatementFailed, ...): it carries its errno, SQLSTATE and
message. What is left to decide is the same for every handler, so it is decided here and nowhere else:

* a unit's ERR (UnitFailed) is said in the client's names (actual tables -> logic tables), with `[ds] ` first
  when the statement had several units, and what became of the rest of the statement (`note`) after it;
* a backend error drops the broken connections and says when the open transaction lost its part on one of
  them (`txn.note_failure`);
* a malformed answer is 1835 "Malformed communication packet: ...";
* anything else is a bug: logged, the broken connections dropped, 1105 "shardproxy internal error: ...".

`error_packet` is the pure part (no session touched): the socket-callback engine (proxy.execution.fastpath)
writes its ERR synchronously from it. `answer_error` is the session's answer, for the coroutine handlers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from protocol.constants import ErrorCode
from protocol.errors import ServerError
from protocol.packets import ERRPacket
from protocol.wire import MalformedPacket
from proxy.backends.backend import BackendError
from proxy.backends.codec import StatementFailed
from proxy.execution import txn
from proxy.execution.units import UnitFailed, _logical_message

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session
    from routing.plan import RoutedStatement

Rename = Callable[[str], str]  # a backend's error text -> the same in the client's names

# Numbers of the client library's range (2000-2999: CR_*) describe what the proxy met on its own connections to the
# data sources; a server never sends them, and client libraries refuse an ERR that carries one (the `mariadb` CLI
# prints "ERROR 2027 (HY000): Received malformed packet"). The client gets the server's numbers for the same
# thing: a data source that cannot be reached is ER_CONNECT_TO_FOREIGN_DATA_SOURCE, a lost one ER_NET_READ_ERROR.
ER_CONNECT_TO_FOREIGN_DATA_SOURCE = 1429
ER_NET_READ_ERROR = 1158
ER_NET_READ_INTERRUPTED = 1159
_CANNOT_CONNECT = frozenset({2002, 2003, 2004, 2005})


def server_errno(errno: int, sqlstate: str, message: str = "") -> tuple[int, str]:
    """The (errno, SQLSTATE) a server would send for this error: client-range numbers mapped (see above)."""
    if not 2000 <= errno < 3000:
        return errno, sqlstate
    if errno in _CANNOT_CONNECT:
        return ER_CONNECT_TO_FOREIGN_DATA_SOURCE, "HY000"
    if "timed out" in message or "timeout" in message.lower():
        return ER_NET_READ_INTERRUPTED, "08S01"
    return ER_NET_READ_ERROR, "08S01"


def error_packet(exc: BaseException, *, rename: Rename | None = None, named: bool = True) -> ERRPacket:
    """The ERR the client gets for `exc`. `rename` turns a backend's text (a unit's or a prepare's ERR) into
    the client's names; `named`: a unit's ERR starts with its data source, `[ds] `."""
    if isinstance(exc, UnitFailed):
        err = exc.err
        message = rename(err.message) if rename is not None else err.message
        prefix = f"[{exc.data_source}] " if named else ""
        return ERRPacket(err.errno, prefix + message + exc.note, err.sqlstate)
    if isinstance(exc, StatementFailed) and rename is not None:
        return ERRPacket(exc.errno, rename(exc.message), exc.sqlstate)
    if isinstance(exc, ServerError):
        return ERRPacket(*_numbers(exc.errno, exc.sqlstate, exc.message))
    if isinstance(exc, MalformedPacket):
        return ERRPacket(ErrorCode.MALFORMED_PACKET, f"Malformed communication packet: {exc}", "HY000")
    return ERRPacket(ErrorCode.UNKNOWN_ERROR, f"shardproxy internal error: {type(exc).__name__}: {exc}", "HY000")


def _numbers(errno: int, sqlstate: str, message: str) -> tuple[int, str, str]:
    """(errno, message, SQLSTATE), ERRPacket's and `session.error`'s order, with the server's numbers."""
    errno, sqlstate = server_errno(errno, sqlstate, message)
    return errno, message, sqlstate


def answer_error(session: Session, exc: BaseException, *, db: LogicalDatabase | None = None,
                 routed: RoutedStatement | None = None, named: bool | None = None,
                 rename: Rename | None = None) -> None:
    """Answer the current statement with `exc`'s ERR (`error_packet`), doing what the session must besides.
    `db` and `routed`: the statement a unit's ERR came from (its names; `named` defaults to "several
    units"). Called from an `except` block (a bug's traceback is logged)."""
    if isinstance(exc, BackendError):
        session.log.warning("backend_error", data_source=exc.data_source, error=str(exc))
        message = txn.note_failure(session, exc)  # drops the broken connections; a lost transaction part is said
        session.error(*_numbers(exc.errno, exc.sqlstate, message))
        return
    if not isinstance(exc, (ServerError, MalformedPacket)):
        # a bug must cost one statement, not the session: report it and keep serving
        session.log.exception("command_failed")
        session.drop_broken()
    if rename is None and db is not None and routed is not None:
        rename = functools.partial(_logical_message, db, routed)
    if named is None:
        named = routed is None or len(routed.execution_units) != 1
    err = error_packet(exc, rename=rename, named=named)
    session.error(err.errno, err.message, err.sqlstate)


__all__ = ["answer_error", "error_packet", "server_errno"]
