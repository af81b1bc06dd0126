"""executor._merge_readers opens the readers `readers._open_merge_readers` opens, without its tasks,
and declines every layout it does not cover (a data source with several units)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from proxy.backends.codec import TEXT
from proxy.execution.executor import _merge_readers
from proxy.execution.readers import _open_merge_readers
from routing.plan import ExecutionUnit, RoutedStatement, StatementKind

# data source of each unit, in unit order
LAYOUTS: list[tuple[str, ...]] = [("ds_0",), ("ds_0", "ds_1"), ("ds_1", "ds_0"), ("ds_0", "ds_1", "ds_2"),
                                  ("ds_0", "ds_0"), ("ds_0", "ds_1", "ds_0")]


def _session(active: bool) -> Any:
    async def no_extra(ds: str, like: object) -> None:
        return None

    return SimpleNamespace(server=SimpleNamespace(max_connections_per_query=1, merge_memory_rows=100),
                           txn=SimpleNamespace(active=active), try_extra_backend=no_extra)


@pytest.mark.parametrize("active", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_same_readers_as_the_general_path(layout: tuple[str, ...], active: bool) -> None:
    units = tuple(ExecutionUnit(ds, f"SELECT {i}", None) for i, ds in enumerate(layout))
    routed = RoutedStatement(kind=StatementKind.SELECT, route_units=(), execution_units=units)
    conns: dict[str, Any] = {ds: SimpleNamespace(name=ds) for ds in layout}
    session = _session(active)
    got = _merge_readers(session, routed, TEXT, conns)
    if len(set(layout)) != len(layout):
        assert got is None
        return
    assert got is not None
    expected = asyncio.run(_open_merge_readers(session, routed, TEXT, conns))
    shape = [(type(r), r.conn, r.unit, r.borrowed, r.started) for r in expected]  # type: ignore[union-attr]
    assert [(type(r), r.conn, r.unit, r.borrowed, r.started) for r in got] == shape  # type: ignore[union-attr]
