"""One decision (issue 33 section 3): proxy.execution.decide is the only module of proxy/ that asks the kernel to
route a statement (`ShardingKernel.route`, `route_point`, `prepared_point`) or the federation planner to plan one
(`routing.federation.plan_for` / `federation_plan`). Every other module asks proxy.execution.decide.

Read from the source with `ast` (every call, in any function), so a new call site fails here even if no test runs it.
A module may call the decision module's own functions by name or as `decide.route_point(...)`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECISION = ROOT / "proxy" / "execution" / "decide.py"
KERNEL_CALLS = frozenset({"route", "route_point", "prepared_point"})
PLANNER = frozenset({"plan_for", "federation_plan"})


def violations(source: str, name: str = "<source>") -> list[str]:
    """Where `source` asks the kernel to route or the federation planner to plan, other than through
    proxy.execution.decide."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in KERNEL_CALLS | PLANNER:
                owner = func.value
                if not (isinstance(owner, ast.Name) and owner.id == "decide"):
                    found.append(f"{name}:{node.lineno}: .{func.attr}(")
        elif isinstance(node, ast.ImportFrom) and node.module in ("routing.federation", "routing.kernel"):
            for alias in node.names:
                if alias.name in PLANNER or alias.name in KERNEL_CALLS:
                    found.append(f"{name}:{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in KERNEL_CALLS \
                and isinstance(node.value, ast.Name) and node.value.id == "ShardingKernel":
            found.append(f"{name}:{node.lineno}: ShardingKernel.{node.attr}")
    return found


def test_only_the_decision_module_routes() -> None:
    found: list[str] = []
    for path in sorted((ROOT / "proxy").rglob("*.py")):
        if path != DECISION:
            found += violations(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "ask proxy.execution.decide instead:\n" + "\n".join(found)


def test_the_decision_module_is_where_routing_happens() -> None:
    """The rule is about a module that exists and does route (a rename would make the test above vacuous)."""
    assert violations(DECISION.read_text())


def test_the_check_sees_each_form() -> None:
    assert violations("db.kernel.route(sql, params, hints)")
    assert violations("point = kernel.route_point(sql, params)")
    assert violations("found = kernel.prepared_point(sql)")
    assert violations("f = ShardingKernel.route_point")
    assert violations("from routing.federation import plan_for")
    assert violations("plan = federation.plan_for(sql, rules, metadata)")
    assert not violations("point = decide.route_point(kernel, sql, params)")
    assert not violations("point = route_point(kernel, sql, params)")  # imported from proxy.execution.decide
    assert not violations("session.route = 'multi'")
