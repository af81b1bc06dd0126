"""The errors DistSQL statements answer with (MySQL errnos, so clients show them as they would a server's)."""

from __future__ import annotations

from protocol.errors import ServerError


class DistSQLError(ServerError):
    def __init__(self, errno: int, message: str, sqlstate: str = "HY000") -> None:
        super().__init__(message, errno=errno, sqlstate=sqlstate)


def not_supported(statement: str, why: str = "") -> DistSQLError:
    """ERR 1235 (ER_NOT_SUPPORTED_YET), SQLSTATE 42000, naming the statement."""
    return DistSQLError(1235, f"{statement} is not supported by shardproxy{': ' + why if why else ''}", "42000")
