"""What the proxy does with one statement on a sharded database: the closed set of plans the decision returns.

Why: a statement used to be decided in many places (the session, the fast path, PREPARE, stepwise, federation,
...), each routing it again and re-reading the route's fields to pick how to run it. Now one pure function
(proxy.execution.decide) turns (text, parameters, session view) into one of these frozen values, and the
engines (the socket callbacks' fast path, the session's coroutine with the executor) only carry it out:

* `Refused`: the statement is answered with the error (the session turns it into an ERR);
* `Explained`: EXPLAIN of a statement, its units' SQL behind the EXPLAIN words (proxy.execution.explain);
* `FederatedExplain`: EXPLAIN of a statement federation answers: its federation steps;
* `Federated`: a SELECT the kernel refused, answered by copying its tables to one node (proxy.execution.federation);
* `Run`: a routed statement and the `Strategy` that runs it (proxy.execution.executor.execute_plan dispatches on it).

`run_of` is the one classification of a route into a strategy; the decision uses it, and so do the few places
that derive a route from a decided one (the merged SELECT of a SELECT ... INTO, a prepared statement's units
rendered as text), so a derived route is classified by the same rule.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from routing.plan import RoutedStatement, StatementKind

if TYPE_CHECKING:
    from routing.errors import RoutingError
    from routing.federation import FederationPlan


class Strategy(enum.Enum):
    """How a routed statement runs (the executor's `execute_plan` has one branch per member)."""

    STEPWISE = "stepwise"  # a write over several nodes run in steps (proxy.execution.stepwise)
    SELECT_INTO = "select_into"  # SELECT ... INTO @v (proxy.execution.into)
    DDL = "ddl"  # the open transaction committed first, the units run (`Run.units`), the metadata reloaded
    DUAL_READ = "dual_read"  # a read inside a resharding window: copies de-duplicated (proxy.execution.dualread)
    UPSERT = "upsert"  # a unique key without the sharding columns: looked up first (proxy.execution.upsert)
    RELAY = "relay"  # one unit: the backend's answer relayed frame by frame
    SCATTER_SELECT = "scatter_select"  # several units: rows concatenated, or merged (`RoutedStatement.merge_spec`)
    RENAMED_METADATA = "renamed_metadata"  # DESCRIBE / SHOW CREATE TABLE ...: actual table names mapped back
    FAN_OUT_WRITE = "fan_out_write"  # writes (one unit with generated keys, or several): affected rows summed


@dataclass(frozen=True, slots=True)
class Refused:
    error: RoutingError


@dataclass(frozen=True, slots=True)
class Run:
    """`strategy` runs `routed`; `units` is how its execution units run (the strategy itself, but for DDL:
    RELAY or FAN_OUT_WRITE)."""

    strategy: Strategy
    units: Strategy
    routed: RoutedStatement


@dataclass(frozen=True, slots=True)
class Explained:
    """EXPLAIN of a statement: `run.routed`'s units are the explained statement's, behind the EXPLAIN words."""

    run: Run


@dataclass(frozen=True, slots=True)
class FederatedExplain:
    """EXPLAIN of a statement the kernel refused and federation answers: `refusal` is the kernel's; `steps` the
    answer's rows, (federation step, data source, SQL) per copy read and the answer on the host."""

    plan: FederationPlan
    refusal: RoutingError
    steps: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class Federated:
    """A SELECT the kernel refused (`refusal`), answered by federation's `plan` (bound to the statement's parameters
    and placed on its host); `reads`: each copy's read as the kernel routes it, by slot."""

    plan: FederationPlan
    refusal: RoutingError
    reads: Mapping[int, RoutedStatement]


Plan = Refused | Run | Explained | FederatedExplain | Federated


# the members as module constants: an Enum member's lookup on its class costs more than the whole classification
# (Python 3.11); the fast path classifies every multi-node SELECT it decides
_STEPWISE, _SELECT_INTO, _DDL = Strategy.STEPWISE, Strategy.SELECT_INTO, Strategy.DDL
_DUAL_READ, _UPSERT, _RELAY = Strategy.DUAL_READ, Strategy.UPSERT, Strategy.RELAY
_SCATTER_SELECT, _RENAMED_METADATA, _FAN_OUT_WRITE = (
    Strategy.SCATTER_SELECT, Strategy.RENAMED_METADATA, Strategy.FAN_OUT_WRITE)
_SELECT, _DDL_KIND = StatementKind.SELECT, StatementKind.DDL


def unit_strategy(routed: RoutedStatement) -> Strategy:
    """How a route's execution units run, once nothing else is to be done first."""
    if routed.dual_read is not None:
        return _DUAL_READ
    if routed.upsert is not None:
        return _UPSERT
    if routed.result_table_renames:
        return _RENAMED_METADATA
    if len(routed.execution_units) == 1 and not routed.generated_keys:
        return _RELAY
    if routed.kind is _SELECT:
        return _SCATTER_SELECT
    return _FAN_OUT_WRITE


def run_of(routed: RoutedStatement) -> Run:
    """The one classification of a route into the strategy that runs it."""
    units = unit_strategy(routed)
    if routed.stepwise is not None:
        return Run(_STEPWISE, units, routed)
    if routed.into_variables:
        return Run(_SELECT_INTO, units, routed)
    if routed.kind is _DDL_KIND:
        return Run(_DDL, units, routed)
    return Run(units, units, routed)


__all__ = ["Explained", "Federated", "FederatedExplain", "Plan", "Refused", "Run", "Strategy", "run_of",
           "unit_strategy"]
