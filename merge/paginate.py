"""Pagination after merging: the nodes each returned their first offset+limit rows (the kernel rewrote
``LIMIT o, n`` to ``LIMIT 0, o+n``), so the offset is skipped only here, on the merged sequence."""

from __future__ import annotations

from merge.keys import Row


class Paginator:
    """Skips `offset` rows, then admits at most `limit`; `done` tells the driver to stop pulling."""

    __slots__ = ("_remaining", "_skip")

    def __init__(self, offset: int = 0, limit: int | None = None) -> None:
        self._skip = max(0, offset)
        self._remaining = limit

    @property
    def done(self) -> bool:
        return self._remaining is not None and self._remaining <= 0

    def admit(self, row: Row) -> bool:
        """Whether `row` is part of the page (call only while not `done`)."""
        if self._skip:
            self._skip -= 1
            return False
        if self._remaining is not None:
            self._remaining -= 1
        return True
