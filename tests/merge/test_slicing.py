"""The async merge lets the event loop run while it works (issue 35): node rows already received are merged without
an await, so a merge of many rows would otherwise hold every other session of the process until it ends. Asserted on
progress: how many times another task ran while the merge ran, never on the merge's own time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from merge import MergeSpec, merge_rows
from merge.spec import AggregateItem, AggregateKind, ColumnMeta, OrderItem
from protocol.constants import ColumnType

ROWS = 200_000
COLUMNS = [ColumnMeta("order_id", ColumnType.LONGLONG, 63), ColumnMeta("c", ColumnType.LONGLONG, 63)]
COUNT = (AggregateItem(AggregateKind.COUNT, 1),)
# (case, spec, what the merge holds)
CASES = [
    (
        "GROUP BY order_id ORDER BY COUNT(*): groups in memory, then sorted",
        MergeSpec(2, order_by=(OrderItem(1), OrderItem(0)), group_by=(0,), aggregates=COUNT, limit=5),
    ),
    ("ORDER BY order_id: a k-way merge of every row", MergeSpec(2, order_by=(OrderItem(0),))),
    ("DISTINCT order_id", MergeSpec(2, distinct=True)),
]


async def _node(first: int) -> AsyncIterator[tuple[bytes, bytes]]:
    for i in range(first, ROWS, 4):  # received already: never waits
        yield (b"%d" % i, b"1")


@pytest.mark.parametrize("spec", [c[1] for c in CASES], ids=[c[0] for c in CASES])
async def test_other_tasks_run_while_a_big_merge_runs(spec: MergeSpec) -> None:
    turns = 0
    merging = True

    async def other_session() -> None:
        nonlocal turns
        while merging:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(other_session())
    await asyncio.sleep(0)
    turns = 0
    rows = 0
    async for _ in merge_rows([_node(s) for s in range(4)], spec, COLUMNS):
        rows += 1
    merging = False
    ran = turns
    await other
    assert rows == (5 if spec.limit else ROWS)
    assert ran >= 3, f"another task ran {ran} times during a merge of {ROWS} rows"


async def test_a_merge_keeps_the_collector_off_what_it_built_and_gives_it_back() -> None:
    """The collector's full passes would scan the merge's millions of objects at each pass (100 ms and more beside
    a big GROUP BY): while a merge runs, what it built is frozen at each slice; once no merge runs, it is not."""
    import gc

    frozen_during: list[int] = []
    spec = MergeSpec(2, order_by=(OrderItem(1), OrderItem(0)), group_by=(0,), aggregates=COUNT, limit=5)

    async def watch() -> None:
        while True:
            frozen_during.append(gc.get_freeze_count())
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    try:
        rows = [r async for r in merge_rows([_node(0), _node(1)], spec, COLUMNS)]
    finally:
        watcher.cancel()
    assert len(rows) == 5
    assert max(frozen_during) > 0
    assert gc.get_freeze_count() == 0
