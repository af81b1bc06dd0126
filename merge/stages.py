"""The push-stage protocol shared by the post-merge transformations (group, HAVING, DISTINCT, sort).

A stage receives merged rows one at a time (`push`) and returns the rows it can already release;
`finish` releases the rest once the sources are exhausted. Push (rather than pull) keeps the stages
independent of how rows are read, so the same objects run under the async and the sync driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from merge.keys import Row

NOTHING: tuple[Row, ...] = ()


class Stage(Protocol):
    def push(self, row: Row) -> Sequence[Row]: ...

    def finish(self) -> Iterable[Row]: ...


def push_through(stages: Sequence[Stage], row: Row) -> Sequence[Row]:
    """Feed one row through `stages` in order; the rows that come out of the last one."""
    rows: Sequence[Row] = (row,)
    for stage in stages:
        if len(rows) == 1:
            rows = stage.push(rows[0])
        else:
            out: list[Row] = []
            for r in rows:
                out.extend(stage.push(r))
            rows = out
        if not rows:
            return NOTHING
    return rows


PAUSE: Any = ("pause",)  # `finish_through`: no row, a point where an async consumer may let others run
_QUIET = 256  # rows flushed into a later stage without a row coming out, between two PAUSEs


def finish_through(stages: Sequence[Stage]) -> Iterable[Row]:
    """Flush the stages front to back: each stage's leftovers flow through the stages after it. Flushing one stage
    into another that holds them (groups into the final sort) brings out no row for a long while: every `_QUIET`
    such rows it yields PAUSE, which is not a row, so that an async consumer can let the event loop run."""
    quiet = 0
    for i, stage in enumerate(stages):
        rest = stages[i + 1 :]
        for row in stage.finish():
            if row is PAUSE:
                yield PAUSE
                continue
            out = push_through(rest, row)
            if out:
                quiet = 0
                yield from out
            else:
                quiet += 1
                if quiet >= _QUIET:
                    quiet = 0
                    yield PAUSE
