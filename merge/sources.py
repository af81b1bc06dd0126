"""Pull-on-demand sources that combine the node streams into one row sequence.

They are sans-I/O state machines so one implementation serves the async proxy and sync callers/tests:
the driver asks `need()` which stream must deliver its next row, `feed`s that row (None = stream
exhausted), and takes merged rows with `next_row()` once `need()` is None. A source asks for a row only
when it cannot answer otherwise, so the driver never reads ahead more than one row per stream, and a
consumer that stops asking (LIMIT satisfied) stops all reading.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from merge.errors import MergeError
from merge.keys import Row


class Source(Protocol):
    def need(self) -> int | None:
        """The stream whose next row must be fed before `next_row` can answer; None when it can."""
        ...

    def feed(self, stream: int, row: Row | None) -> None:
        """Deliver the next row of `stream` (None: the stream is exhausted)."""
        ...

    def next_row(self) -> Row | None:
        """The next merged row, or None when every stream is exhausted. Only valid when need() is None."""
        ...


class IteratorMerger:
    """Concatenates the streams in order (no ORDER BY): stream 0 to its end, then stream 1, ..."""

    __slots__ = ("_buffered", "_count", "_current")

    def __init__(self, stream_count: int) -> None:
        self._count = stream_count
        self._current = 0
        self._buffered: Row | None = None

    def need(self) -> int | None:
        if self._buffered is None and self._current < self._count:
            return self._current
        return None

    def feed(self, stream: int, row: Row | None) -> None:
        if row is None:
            self._current += 1
        else:
            self._buffered = row

    def next_row(self) -> Row | None:
        row, self._buffered = self._buffered, None
        return row


class OrderByMerger:
    """k-way heap merge of streams that are each sorted by `key`.

    Holds at most one row per stream. Heap entries are (key, stream, row): equal keys fall back to the
    stream number, so ties come out in stream order (stable and deterministic) and rows themselves are
    never compared. The row just returned stays at the heap top until its stream's next row replaces it
    (`heapreplace`), so each row costs one key computation and O(log k) comparisons.
    """

    __slots__ = ("_check", "_count", "_heap", "_key", "_primed", "_refill")

    def __init__(self, stream_count: int, key: Callable[[Row], Any], *, check_sorted: bool = False) -> None:
        self._count = stream_count
        self._key = key
        self._heap: list[tuple[Any, int, Row]] = []
        self._primed = 0
        self._refill: int | None = None
        # keys the merge computes from the nodes' collation weights: a stream out of that order would be
        # merged silently wrong, so it is an error instead
        self._check = check_sorted

    def need(self) -> int | None:
        if self._refill is not None:
            return self._refill
        if self._primed < self._count:
            return self._primed
        return None

    def feed(self, stream: int, row: Row | None) -> None:
        if self._refill is not None:
            self._refill = None
            if row is None:
                heapq.heappop(self._heap)
            else:
                key = self._key(row)
                if self._check and key < self._heap[0][0]:
                    raise MergeError(
                        "a data node returned rows in an order the merge does not reproduce (text sort keys of "
                        "a collation the proxy does not know); the query cannot be merged correctly"
                    )
                heapq.heapreplace(self._heap, (key, stream, row))
            return
        self._primed += 1
        if row is not None:
            heapq.heappush(self._heap, (self._key(row), stream, row))

    def next_row(self) -> Row | None:
        if not self._heap:
            return None
        _, stream, row = self._heap[0]
        self._refill = stream
        return row


def drain(source: Source, iterators: list[Iterator[Row]]) -> Iterator[Row]:
    """Drive a source over synchronous iterators (tests, or callers that already hold the rows)."""
    while True:
        stream = source.need()
        if stream is not None:
            source.feed(stream, next(iterators[stream], None))
            continue
        row = source.next_row()
        if row is None:
            return
        yield row


def heap_merge(streams: Iterable[Iterable[Row]], key: Callable[[Row], Any]) -> Iterator[Row]:
    """Synchronous k-way merge of sorted row iterables (see OrderByMerger)."""
    iterators = [iter(s) for s in streams]
    return drain(OrderByMerger(len(iterators), key), iterators)


def concat(streams: Iterable[Iterable[Row]]) -> Iterator[Row]:
    iterators = [iter(s) for s in streams]
    return drain(IteratorMerger(len(iterators)), iterators)
