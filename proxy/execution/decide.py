"""The one decision: what to do with a statement on a sharded database (issue 33, "one decision, two engines").

`decide(kernel, sql, params, view)` is a pure function of the statement's text, its parameters and the session's
view (`SessionView`: its routing hints, the node that knows FOUND_ROWS(), whether federation is on); it returns a
`proxy.execution.plans.Plan`. The engines carry plans out and decide nothing: the socket callbacks' fast path
(proxy.execution.fastpath) takes the plans it can relay and hands the others to the session's coroutine as they
are (proxy.execution.preroute); the coroutine runs them (proxy.execution.routed, the executor).

This is the only module of proxy/ that asks the kernel to route (`ShardingKernel.route`, `route_point`,
`prepared_point`) or the federation planner to plan (tests/proxy/test_decision_boundary.py keeps it so).
`route_point` and `prepared_point` are the kernel's own functions under this module's name: the fast path's point
select pays no extra call frame and no allocation for going through here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.config.props import default as prop_default
from proxy.execution.explain_text import check_explain, explained, split_explain, xa_refusal
from proxy.execution.memo import IdentityMemo
from proxy.execution.plans import Explained, Federated, FederatedExplain, Plan, Refused, Run, run_of
from routing.errors import RoutingError
from routing.federation import FederationPlan, plan_for, preview_rows
from routing.kernel import ShardingKernel
from routing.parse import TEXT_MODES
from routing.plan import RoutedStatement, SessionHints
from routing.shadow.decide import shadowed

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session

# the fast path's point routes: the kernel's functions themselves (no wrapper frame on the hot path)
route_point = ShardingKernel.route_point
prepared_point = ShardingKernel.prepared_point


@dataclass(frozen=True, slots=True)
class SessionView:
    """What of the session a decision depends on."""

    hints: SessionHints | None = None  # the session's routing hints (DistSQL / hint manager)
    # the data source whose connection ran the last relayed SELECT, while FOUND_ROWS() is not known otherwise
    found_rows_source: str | None = None
    federation: bool = True  # props.proxy-federation-enabled: a refused SELECT may be federated
    # the session's sql_mode flags that change how text reads (issue 34: NO_BACKSLASH_ESCAPES, ANSI_QUOTES, as the
    # servers' status flags report them, and PIPES_AS_CONCAT; routing.parse): the kernel reads the statement by them
    mode: int = 0


PLAIN = SessionView()
NO_FEDERATION = SessionView(federation=False)
_VIEWS: dict[tuple[str, bool], SessionView] = {}

# SELECT FOUND_ROWS() with no FROM: the proxy cannot answer it (the last SELECT ran on one node, relayed):
# it goes to that node's connection
_FOUND_ROWS_ONLY = re.compile(r"^(?:(?!\bFROM\b).)*\bFOUND_ROWS\s*\(\s*\)(?:(?!\bFROM\b).)*$", re.I | re.S)
# the plan of each route the kernel keeps and hands out again (`RoutedStatement.reused`): a plan is a function of
# its route, and building one (a frozen dataclass) costs several times the kernel's lookup of a kept route
_RUNS: IdentityMemo[Run] = IdentityMemo(1024)
# A text this long (an IN list of some 2,000 values, a bulk write) takes its routing long enough (~10 ms, bench/
# RESULTS.md "Issue 35") that deciding it on the event loop would hold every other session's statements behind it:
# the engines decide it in a worker thread (proxy.execution.routed.decide_fairly), the socket callbacks leave it to
# the session's coroutine. Shorter texts are decided on the loop, where a thread's hand-off would cost more.
OFF_LOOP_TEXT = 16 * 1024
# no EXPLAIN and no XA statement starts with these (SELECT, INSERT, UPDATE, REPLACE, SET, SHOW ...): the regexes are
# not run for them (most statements; an EXPLAIN or XA starts with E, D, A, X, a comment or a space)
_ORDINARY = "SsIiUuRr"


def federation_enabled(props: Mapping[str, Any]) -> bool:
    value = props.get("proxy-federation-enabled", prop_default("proxy-federation-enabled"))
    return str(value).lower() not in ("false", "0", "no", "off")


def view_of(session: Session, *, federation: bool = True, found_rows: bool = True) -> SessionView:
    """The session's view for a decision; `federation=False` for callers that never federate (SET, SHOW ...),
    `found_rows=False` for those whose SELECT FOUND_ROWS() is not sent where the last SELECT ran (SQL EXECUTE)."""
    hints = session.hints()
    source = session.found_rows_source if found_rows and session.found_rows_value is None else None
    fed = federation and federation_enabled(session.server.config.props)
    mode = session.txn.text_mode
    if hints is not None or mode:
        return SessionView(hints, source, fed, mode)
    if source is None:
        return PLAIN if fed else NO_FEDERATION
    key = (source, fed)  # a few values (a data source's name): one object each, not one per statement
    view = _VIEWS.get(key)
    if view is None:
        if len(_VIEWS) >= 256:
            _VIEWS.clear()
        view = _VIEWS[key] = SessionView(None, source, fed)
    return view


def routing_hints(view: SessionView, sql: str) -> SessionHints | None:
    """The session's hints, and for SELECT FOUND_ROWS() the data source that knows the answer."""
    hints = view.hints
    if view.found_rows_source is not None and hints is None and _FOUND_ROWS_ONLY.match(sql):
        return SessionHints(data_source=view.found_rows_source)
    return hints


def same_decision(plan: Plan, decided: SessionView, view: SessionView, sql: str) -> bool:
    """Whether `decide(kernel, sql, params, view)` is `plan`, decided for the same kernel, text and parameters in
    `decided`: the decision reads of the view its hints, the routing hints of this text, and the federation flag
    only when the kernel refused (a `Run` or an `Explained` plan does not depend on it)."""
    if decided is view:
        return True
    if decided.mode != view.mode or decided.hints != view.hints \
            or routing_hints(decided, sql) != routing_hints(view, sql):
        return False
    return isinstance(plan, Run | Explained) or decided.federation == view.federation


def decide(kernel: ShardingKernel, sql: str, params: Sequence[object] | None, view: SessionView = PLAIN) -> Plan:
    """The plan for this statement (never raises a RoutingError: a refusal is a `Refused` plan)."""
    if sql[:1] not in _ORDINARY:
        refusal = xa_refusal(sql)
        if refusal is not None:
            return Refused(refusal)
        parts = split_explain(sql)
        if parts is not None:
            return _explain(kernel, parts, params, view)
    try:
        routed = kernel.route(sql, params, view.hints if view.found_rows_source is None else routing_hints(view, sql),
                              view.mode)
    except RoutingError as refusal:  # a SELECT the kernel cannot distribute may be answered by federation
        plan = _federation(kernel, sql, view)
        return Refused(refusal) if plan is None else federated(kernel, plan, params, refusal)
    if kernel.rules.shadow is not None:  # !SHADOW: shadow statements' units on the shadow data sources
        try:
            routed = _shadowed(kernel, routed, sql, params)
        except RoutingError as refusal:
            return Refused(refusal)
    if routed.dual_read is not None and kernel.rules.mask is not None and kernel.rules.mask.touches(
            routed.logic_tables):  # (a dual read's answer is built apart from the executor's masking)
        return Refused(RoutingError(f"a SELECT of a masked table inside a resharding window is not supported "
                                    f"(tables: {', '.join(routed.logic_tables)}); run it after the window"))
    if routed.reused:  # a route the kernel hands out again for this text: its plan too
        run = _RUNS.get(routed)
        return run if run is not None else _RUNS.put(routed, run_of(routed))
    return run_of(routed)


def _explain(kernel: ShardingKernel, parts: tuple[str, str, str], params: Sequence[object] | None,
             view: SessionView) -> Plan:
    lead, words, body = parts
    try:
        check_explain(words, body)
        inner = kernel.route(lead + body, params, view.hints, view.mode)
        if kernel.rules.shadow is not None:
            inner = _shadowed(kernel, inner, lead + body, params)
    except RoutingError as refusal:  # EXPLAIN of a statement federation answers: its federation steps
        plan = _federation(kernel, lead + body, view)
        if plan is None:
            return Refused(refusal)
        try:
            return FederatedExplain(plan, refusal, tuple(preview_rows(plan, kernel, params)))
        except RoutingError as error:  # a copy's read cannot be routed
            return Refused(error)
    return Explained(run_of(explained(inner, words)))


def _federation(kernel: ShardingKernel, sql: str, view: SessionView) -> FederationPlan | None:
    if not view.federation or view.hints is not None or view.mode & TEXT_MODES:
        return None  # (federation's planner reads text in the default sql_mode only)
    if kernel.rules.mask is not None or kernel.rules.shadow is not None:
        return None  # (federation's answer is relayed from its host, unmasked; its copies' reads are not shadowed)
    return federation_plan(kernel, sql)


def federated(kernel: ShardingKernel, plan: FederationPlan, params: Sequence[object] | None,
              refusal: RoutingError) -> Federated | Refused:
    """Federation's `plan` for these parameters: bound, placed on the data source that holds most of what it
    copies, and each copy's read routed; refused when a read cannot be routed."""
    try:
        placed = plan.bound(params).placed(kernel, params)
        reads = {read.slot: kernel.route(read.sql, placed.read_params(read, params), None)
                 for read in placed.reads if read.same_as is None}
    except RoutingError as error:
        return Refused(error)
    return Federated(placed, refusal, reads)


def federation_plan(kernel: ShardingKernel, sql: str) -> FederationPlan | None:
    """Federation's plan of a statement the kernel refused, or None when federation cannot answer it."""
    if "SHARDINGSPHERE_HINT" in sql.upper():
        return None  # the hint routes the statement itself; the copies' reads could not honour it
    return plan_for(sql, kernel.rules, kernel.metadata)


def routed_statement(kernel: ShardingKernel, sql: str, params: Sequence[object] | None = None,
                     hints: SessionHints | None = None) -> RoutedStatement:
    """The kernel's route as it is (raises its RoutingError), for what is not run: PREVIEW shows it. `decide` for
    anything else."""
    routed = kernel.route(sql, params, hints)
    return routed if kernel.rules.shadow is None else _shadowed(kernel, routed, sql, params)


def _shadowed(kernel: ShardingKernel, routed: RoutedStatement, sql: str, params: Sequence[object] | None
              ) -> RoutedStatement:
    return shadowed(kernel.rules.shadow, routed, sql, params, kernel.metadata.columns)


__all__ = [
    "NO_FEDERATION",
    "PLAIN",
    "SessionView",
    "decide",
    "federation_enabled",
    "federation_plan",
    "prepared_point",
    "route_point",
    "routed_statement",
    "routing_hints",
    "same_decision",
    "view_of",
]
