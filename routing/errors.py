"""Errors the kernel raises. Each carries the MySQL errno and SQLSTATE the proxy sends to the client, and
a message that names the table, the rule and what the user can do."""

from __future__ import annotations

from protocol.errors import ServerError


class RoutingError(ServerError):
    """A statement the kernel refuses to route (it would otherwise route wrong)."""

    errno = 1235  # ER_NOT_SUPPORTED_YET
    sqlstate = "42000"


class ConfigError(Exception):
    """A configuration problem found while loading rules; names the file, the line when known, and the key."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None,
                 line: int | None = None) -> None:
        place = f"{file}, line {line}" if file and line else file
        where = ": ".join(p for p in (place, key) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.file = file
        self.key = key
        self.line = line
        self.reason = message

    def at_line(self, line: int | None) -> ConfigError:
        """The same error, placed on a line of its file (found once the file's text is at hand)."""
        return self if line is None else ConfigError(self.reason, file=self.file, key=self.key, line=line)
