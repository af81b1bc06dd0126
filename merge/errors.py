"""Errors raised while merging. Each carries the MySQL errno and SQLSTATE the proxy sends to the client."""

from __future__ import annotations

from typing import Any, Protocol

from protocol.errors import ServerError


class MergeError(ServerError):
    """A merge the engine cannot finish correctly (resource budget exceeded, inconsistent spec)."""

    errno = 1105  # ER_UNKNOWN_ERROR
    sqlstate = "HY000"


class MergeMemoryError(MergeError):
    """The in-memory part of a merge (groups, sort buffer, DISTINCT set) outgrew its row budget."""

    errno = 1038  # ER_OUT_OF_SORTMEMORY
    sqlstate = "HY001"


class MemoryMeter(Protocol):
    """Bytes held on behalf of one statement (the proxy's statement and process budgets, proxy.execution.budget).
    `charge` raises (a ServerError with its errno) when the bytes do not fit; then nothing was charged."""

    def charge(self, nbytes: int, what: str) -> None: ...

    def release(self, nbytes: int) -> None: ...


_SMALL = {type(None): 0, bool: 0, int: 28, float: 24}


def held_bytes(item: Any) -> int:
    """What a row, key or value costs the process while held, roughly (CPython object sizes): the byte
    budgets compare it with process memory, so object headers count, not just the wire bytes."""
    kind = type(item)
    if kind is tuple:
        try:  # a row of byte strings (no NULL): len() of each at C speed
            return 56 + 41 * len(item) + sum(map(len, item))
        except TypeError:
            pass
    small = _SMALL.get(kind)
    if small is not None:
        return small
    if kind is bytes or kind is bytearray:
        return 33 + len(item)
    if kind is str:
        return 49 + len(item)
    if kind is tuple or kind is list:
        return 56 + 8 * len(item) + sum(held_bytes(v) for v in item)
    return 64


class RowBudget:
    """Counts rows/values the merge holds in memory at once, shared by every stage of one merge.

    Why a shared counter: the groups of a memory GROUP BY, the DISTINCT seen-set and the final sort buffer
    all compete for the same process memory, and the user tunes one knob (`proxy-merge-memory-rows`).
    With a `meter`, what is held is charged in bytes too (`charge_item`): rows of a few bytes and rows of
    megabytes differ a millionfold for the same row count. A release gives back the average bytes of the
    rows it releases (the stages release counts, not the rows themselves). Bytes reach the meter in steps of
    `STEP` (a meter call per row cost a fifth of an in-memory merge's time): at most that much is held uncharged;
    past the first `EXACT` items, one in `SAMPLE` is sized, for all of them.
    """

    STEP = 1 << 16
    EXACT = 1024
    SAMPLE = 16

    __slots__ = ("_bytes", "_pending", "_seen", "_used", "limit", "meter")

    def __init__(self, limit: int, meter: MemoryMeter | None = None) -> None:
        self.limit = limit
        self.meter = meter
        self._used = 0
        self._bytes = 0  # charged to the meter
        self._pending = 0  # held, not yet charged
        self._seen = 0

    def charge_item(self, what: str, item: Any) -> None:
        """One held row / key / value: counted, and its bytes charged to the meter when there is one."""
        if self.meter is not None:
            # the first rows each, then one in SAMPLE for SAMPLE of them: sizing every row cost a tenth of the merge
            self._seen += 1
            if self._seen <= self.EXACT:
                self._pending += held_bytes(item)
            elif self._seen % self.SAMPLE == 0:
                self._pending += held_bytes(item) * self.SAMPLE
            if self._pending >= self.STEP:
                pending, self._pending = self._pending, 0
                self.meter.charge(pending, what)
                self._bytes += pending
        self.charge(what)

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
        if n >= self._used:
            self._pending = 0
        if self._bytes and self._used:
            share = self._bytes if n >= self._used else self._bytes * n // self._used
            self._bytes -= share
            assert self.meter is not None
            self.meter.release(share)
        self._used = max(0, self._used - n)
