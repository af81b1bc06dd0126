"""The base of the errors the proxy's layers raise for the client: a message with the MySQL errno and
SQLSTATE the proxy sends in the ERR packet. The kernel (`routing.errors.RoutingError`) and the merge
engine (`merge.errors.MergeError`) set their own defaults."""

from __future__ import annotations


class ServerError(Exception):
    errno = 1105  # ER_UNKNOWN_ERROR
    sqlstate = "HY000"

    def __init__(self, message: str, *, errno: int | None = None, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if errno is not None:
            self.errno = errno
        if sqlstate is not None:
            self.sqlstate = sqlstate
