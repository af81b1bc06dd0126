"""The background loops that sleep on a wake-up event (XA recovery, the cluster's XA and migration take-overs)
end when cancelled, even when the event is set in the same turn of the loop as the cancel (a node leaving
while this one stops). With asyncio.wait_for, Python 3.11 swallowed that cancel: the loop went on and the
proxy never finished stopping (test_cluster_reseed waited out its 30 s thread join)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from proxy.backends.xa import TransactionManager
from proxy.cluster.jobs import MigrationTakeOver
from proxy.cluster.xa import XATakeOver


async def _nothing(*_args: Any) -> None:
    return None


def _xa_recovery() -> tuple[Any, Callable[[], Any]]:
    tm = TransactionManager.__new__(TransactionManager)
    tm._wake = asyncio.Event()
    tm.recover_once = _nothing  # type: ignore[method-assign]
    tm.props = {"xa-recovery-interval-seconds": 30}
    return tm, tm._recovery_loop


def _cluster_xa() -> tuple[Any, Callable[[], Any]]:
    node = SimpleNamespace(mode=SimpleNamespace(ttl=30), node_left=[], lease_renewed=[])
    takeover = XATakeOver(node, SimpleNamespace())  # type: ignore[arg-type]
    takeover.sweep = _nothing  # type: ignore[method-assign]
    return takeover, takeover._loop


def _migration() -> tuple[Any, Callable[[], Any]]:
    node = SimpleNamespace(mode=SimpleNamespace(ttl=30), node_left=[], lease_renewed=[])
    takeover = MigrationTakeOver(node, SimpleNamespace())  # type: ignore[arg-type]
    takeover.sweep = _nothing  # type: ignore[method-assign]
    return takeover, takeover._loop


@pytest.mark.parametrize("make", [_xa_recovery, _cluster_xa, _migration], ids=["xa-recovery", "xa-takeover",
                                                                              "migration-takeover"])
async def test_a_cancel_that_comes_with_the_wake_up_ends_the_loop(make: Callable[[], Any]) -> None:
    owner, loop = make()
    task = asyncio.get_running_loop().create_task(loop())
    await asyncio.sleep(0.01)  # the loop sleeps on its event
    owner._wake.set()
    task.cancel()  # in the same turn
    done, _ = await asyncio.wait({task}, timeout=2)
    if not done:
        task.cancel()  # once more, so that a failure leaves no loop running in the session's event loop
    assert done == {task}, "the loop went on after its cancel"
    assert task.cancelled()
