"""A route the fast path worked out and then handed to the session's coroutine (issue 15).

Why: the fast path (proxy.execution.fastpath) routes every plain SELECT to learn whether one node answers it; when
several do (sysbench's range selects, scatter queries), the session's coroutine used to route the same text
again. The route is kept here, on the session's fast path, and the coroutine takes it instead of routing again
when it is for the very statement it runs: the same text, parameters equal in value and type, the same kernel
that has not been invalidated since, and no routing hints (the fast path routes without any). Anything else
routes as before. The kernel is pure, so a route of the same text and parameters by the same kernel generation
is the route the coroutine would compute.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from routing.kernel import ShardingKernel
    from routing.plan import RoutedStatement


class Prerouted(NamedTuple):
    kernel: ShardingKernel
    generation: int
    sql: str
    params: tuple[Any, ...] | None
    routed: RoutedStatement


def _params(params: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if params is None else tuple(params)


def prerouted(kernel: ShardingKernel, sql: str, params: Sequence[Any] | None, routed: RoutedStatement) -> Prerouted:
    return Prerouted(kernel, kernel.generation, sql, _params(params), routed)


def matches(kept: Prerouted | None, kernel: ShardingKernel, sql: str, params: Sequence[Any] | None) -> bool:
    """Whether `kept` is the route of this statement by this kernel as it is now."""
    if kept is None or kept.kernel is not kernel or kept.generation != kernel.generation or kept.sql != sql:
        return False
    values = _params(params)
    if values is None or kept.params is None:
        return values is None and kept.params is None
    return len(values) == len(kept.params) and all(
        type(a) is type(b) and a == b for a, b in zip(values, kept.params, strict=True))


__all__ = ["Prerouted", "matches", "prerouted"]
