"""The hand-over of a plan the fast path decided and then declined, to the session's coroutine.

Why: the fast path (proxy.execution.fastpath) decides every plain SELECT (proxy.execution.decide) to learn whether
it can relay it; when it cannot (a multi-node SELECT multipath does not take, a node the transaction has not
joined yet ...), the command goes to the session's coroutine, which would decide the same text again. The decided
plan goes with it instead: the fast path puts it in its `declined` field (`Declined`) just before it declines the
command, and the coroutine takes it (`take`) before deciding, when it is the plan of the very statement it runs:
the same text, parameters equal in value and type, the same kernel not invalidated since, and a session view that
decides alike (`decide.same_decision`: the fast path decides with `NO_FEDERATION`, which decides every plan it can
relay as the session's own view would).
Anything else is decided as if nothing had been handed over. The decision is a pure function of these, so a plan
kept for them is the plan the coroutine would decide.

Why a field, and not an argument: the declined bytes reach the coroutine through the client socket's stream (it
reads them in order with everything else), not through a call; the field holds at most one plan, and is emptied
whenever the fast path takes a command or the coroutine decides one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from proxy.execution.decide import same_decision

if TYPE_CHECKING:
    from proxy.execution.decide import SessionView
    from proxy.execution.plans import Plan
    from routing.kernel import ShardingKernel


class Declined(NamedTuple):
    kernel: ShardingKernel
    generation: int
    sql: str
    params: tuple[Any, ...] | None
    view: SessionView
    plan: Plan


def _params(params: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if params is None else tuple(params)


def declined(kernel: ShardingKernel, sql: str, params: Sequence[Any] | None, view: SessionView, plan: Plan
             ) -> Declined:
    return Declined(kernel, kernel.generation, sql, _params(params), view, plan)


def matches(kept: Declined | None, kernel: ShardingKernel, sql: str, params: Sequence[Any] | None,
            view: SessionView) -> bool:
    """Whether `kept` is the plan of this statement by this kernel as it is now, for this session view."""
    if kept is None or kept.kernel is not kernel or kept.generation != kernel.generation or kept.sql != sql \
            or not same_decision(kept.plan, kept.view, view, sql):
        return False
    values = _params(params)
    if values is None or kept.params is None:
        return values is None and kept.params is None
    return len(values) == len(kept.params) and all(
        type(a) is type(b) and a == b for a, b in zip(values, kept.params, strict=True))


def take(fast: object, kernel: ShardingKernel, sql: str, params: Sequence[Any] | None, view: SessionView
         ) -> Plan | None:
    """The plan the session's fast path (`fast`, or None) handed over for this statement, else None; the field is
    emptied either way."""
    kept: Declined | None = getattr(fast, "declined", None)
    if kept is None:
        return None
    fast.declined = None  # type: ignore[attr-defined]
    return kept.plan if matches(kept, kernel, sql, params, view) else None


__all__ = ["Declined", "declined", "matches", "take"]
