"""The push-stage protocol shared by the post-merge transformations (group, HAVING, DISTINCT, sort).

A stage receives merged rows one at a time (`push`) and returns the rows it can already release;
`finish` releases the rest once the sources are exhausted. Push (rather than pull) keeps the stages
independent of how rows are read, so the same objects run under the async and the sync driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

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


def finish_through(stages: Sequence[Stage]) -> Iterable[Row]:
    """Flush the stages front to back: each stage's leftovers flow through the stages after it."""
    for i, stage in enumerate(stages):
        rest = stages[i + 1 :]
        for row in stage.finish():
            yield from push_through(rest, row)
