"""Pausing the writes to one table: while a migration copies a batch or commits, statements that write the
table wait (reads never do).

Why a gate and not only row locks: a dual UPDATE runs on the target node and on the source node at the same
time; a copy batch between the two would copy the row before the UPDATE reaches the source and after it ran
(finding nothing) on the target, leaving a stale copy. Holding the gate, a batch sees no write statement in
flight; its `LOCK IN SHARE MODE` read then waits for the transactions whose finished statements changed the
rows (a wait bounded by a short lock timeout, so that such a transaction's next write cannot deadlock with it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from routing.plan import StatementKind

_WRITES = (StatementKind.INSERT, StatementKind.UPDATE, StatementKind.DELETE)


class WriteGate:
    def __init__(self) -> None:
        self._active = 0
        self._closed = False
        self._cond = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._closed)
            self._active += 1
        try:
            yield
        finally:
            async with self._cond:
                self._active -= 1
                self._cond.notify_all()

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._closed)
            self._closed = True
            await self._cond.wait_for(lambda: self._active == 0)
        try:
            yield
        finally:
            async with self._cond:
                self._closed = False
                self._cond.notify_all()


_GATES: dict[tuple[str, str], WriteGate] = {}


def gate_for(database: str, table: str) -> WriteGate:
    """The gate of one logic table (created when a migration of it starts)."""
    key = (database.lower(), table.lower())
    gate = _GATES.get(key)
    if gate is None:
        gate = _GATES[key] = WriteGate()
    return gate


def write_gate(database: str, routed: Any) -> WriteGate | None:
    """The gate a routed write statement must pass, or None (no migration of a table it names)."""
    if not _GATES or routed.kind not in _WRITES:
        return None
    db = database.lower()
    for table in routed.logic_tables:
        gate = _GATES.get((db, table.lower()))
        if gate is not None:
            return gate
    return None
