"""Errors the kernel raises. Each carries the MySQL errno and SQLSTATE the proxy sends to the client, and
a message that names the table, the rule and what the user can do."""

from __future__ import annotations


class RoutingError(Exception):
    """A statement the kernel refuses to route (it would otherwise route wrong)."""

    errno = 1235  # ER_NOT_SUPPORTED_YET
    sqlstate = "42000"

    def __init__(self, message: str, *, errno: int | None = None, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if errno is not None:
            self.errno = errno
        if sqlstate is not None:
            self.sqlstate = sqlstate


class ConfigError(Exception):
    """A configuration problem found while loading rules; names the file and the key."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None) -> None:
        where = ": ".join(p for p in (file, key) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.file = file
        self.key = key
        self.reason = message
