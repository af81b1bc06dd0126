"""Pagination after merging: the nodes each returned their first offset+limit rows (the kernel rewrote
``LIMIT o, n`` to ``LIMIT 0, o+n``), so the offset is skipped only here, on the merged sequence.

``FETCH FIRST n ROWS WITH TIES`` (the nodes were asked for their first o+n rows with ties): after the n-th
row, the rows whose ORDER BY key equals its key are part of the page too."""

from __future__ import annotations

from typing import Any

from merge.keys import Row, RowKey

_NONE = object()


class Paginator:
    """Skips `offset` rows, then admits at most `limit` (and, with `ties_key`, the rows tying with the
    last of them); `done` tells the driver to stop pulling. `count_all` (SQL_CALC_FOUND_ROWS): the driver
    keeps offering rows after the page is complete, to count them all in `seen`."""

    __slots__ = ("_count_all", "_full", "_last", "_remaining", "_skip", "_ties", "done", "seen")

    def __init__(
        self, offset: int = 0, limit: int | None = None, ties_key: RowKey | None = None, *, count_all: bool = False
    ) -> None:
        self._skip = max(0, offset)
        self._remaining = limit
        self._ties = ties_key
        self._last: Any = _NONE
        self._count_all = count_all
        self.seen = 0
        self._full = limit is not None and limit <= 0  # the page is complete
        self.done = self._full and not count_all

    def _page_full(self) -> None:
        self._full = True
        self.done = not self._count_all

    def admit(self, row: Row) -> bool:
        """Whether `row` is part of the page (call only while not `done`)."""
        if self._count_all:
            self.seen += 1
        if self._full:
            return False
        if self._skip:
            self._skip -= 1
            return False
        remaining = self._remaining
        if remaining is None:
            return True
        if remaining > 0:
            remaining -= 1
            self._remaining = remaining
            if remaining == 0:
                if self._ties is None:
                    self._page_full()
                else:
                    self._last = self._ties(row)
            return True
        if self._ties(row) == self._last:  # type: ignore[misc]
            return True
        self._page_full()
        return False
