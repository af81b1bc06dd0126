"""Pagination after merging: the nodes each returned their first offset+limit rows (the kernel rewrote
``LIMIT o, n`` to ``LIMIT 0, o+n``), so the offset is skipped only here, on the merged sequence.

``FETCH FIRST n ROWS WITH TIES`` (the nodes were asked for their first o+n rows with ties): after the n-th
row, the rows whose ORDER BY key equals its key are part of the page too."""

from __future__ import annotations

from typing import Any

from merge.keys import Row, RowKey

_NONE = object()


class Paginator:
    """Skips `offset` rows, then admits at most `limit`; `done` tells the driver to stop pulling."""

    __slots__ = ("_remaining", "_skip", "done", "seen")

    def __init__(self, offset: int = 0, limit: int | None = None) -> None:
        self._skip = max(0, offset)
        self._remaining = limit
        self.done = limit is not None and limit <= 0
        self.seen = 0

    def admit(self, row: Row) -> bool:
        """Whether `row` is part of the page (call only while not `done`)."""
        if self._skip:
            self._skip -= 1
            return False
        remaining = self._remaining
        if remaining is not None:
            remaining -= 1
            self._remaining = remaining
            if remaining <= 0:
                self.done = True
        return True


class TiesPaginator(Paginator):
    """FETCH FIRST n ROWS WITH TIES: after the n-th row, the rows whose `ties_key` equals its key too."""

    __slots__ = ("_last", "_ties")

    def __init__(self, offset: int, limit: int, ties_key: RowKey) -> None:
        super().__init__(offset, limit)
        self._ties = ties_key
        self._last: Any = _NONE

    def admit(self, row: Row) -> bool:
        if self._skip:
            self._skip -= 1
            return False
        remaining = self._remaining
        assert remaining is not None
        if remaining > 0:
            self._remaining = remaining - 1
            if remaining == 1:
                self._last = self._ties(row)
            return True
        if self._ties(row) == self._last:
            return True
        self.done = True
        return False


class CountingPaginator:
    """SQL_CALC_FOUND_ROWS: the page of `inner`, while every row is offered and counted in `seen` (the
    driver never stops early: `done` stays False)."""

    __slots__ = ("_inner", "done", "seen")

    def __init__(self, inner: Paginator) -> None:
        self._inner = inner
        self.done = False
        self.seen = 0

    def admit(self, row: Row) -> bool:
        self.seen += 1
        inner = self._inner
        return False if inner.done else inner.admit(row)


def paginator(offset: int = 0, limit: int | None = None, ties_key: RowKey | None = None, *,
              count_all: bool = False) -> Paginator | CountingPaginator:
    page: Paginator = (TiesPaginator(offset, limit, ties_key) if ties_key is not None and limit is not None
                       else Paginator(offset, limit))
    if limit is not None and limit <= 0:
        page.done = True
    return CountingPaginator(page) if count_all else page
