"""Errors raised while merging. Each carries the MySQL errno and SQLSTATE the proxy sends to the client."""

from __future__ import annotations

from protocol.errors import ServerError


class MergeError(ServerError):
    """A merge the engine cannot finish correctly (resource budget exceeded, inconsistent spec)."""

    errno = 1105  # ER_UNKNOWN_ERROR
    sqlstate = "HY000"


class MergeMemoryError(MergeError):
    """The in-memory part of a merge (groups, sort buffer, DISTINCT set) outgrew its row budget."""

    errno = 1038  # ER_OUT_OF_SORTMEMORY
    sqlstate = "HY001"


class RowBudget:
    """Counts rows/values the merge holds in memory at once, shared by every stage of one merge.

    Why a shared counter: the groups of a memory GROUP BY, the DISTINCT seen-set and the final sort buffer
    all compete for the same process memory, and the user tunes one knob (`proxy-merge-memory-rows`).
    """

    __slots__ = ("_used", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0

    @property
    def used(self) -> int:
        return self._used

    def charge(self, what: str, n: int = 1) -> None:
        self._used += n
        if self._used > self.limit:
            raise MergeMemoryError(
                f"Out of merge memory: the merge would hold more than {self.limit} {what} in memory; "
                "raise the proxy property proxy-merge-memory-rows or add a LIMIT / narrower WHERE"
            )

    def release(self, n: int) -> None:
        self._used = max(0, self._used - n)
