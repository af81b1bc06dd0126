"""The packages' imports run one way: no cycle anywhere, and protocol/routing/merge never import proxy.

Every import counts: module level, inside functions, and under `if TYPE_CHECKING:` (a type is a dependency
too). A lower module that must name a higher one's object declares a small `typing.Protocol` of its own
(proxy.execution.context for the session and the server). The graph is read from the source with `ast`, so a cycle
hidden in a function body fails here even if no test ever runs that function.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "routing", "merge", "proxy")
LOWER = ("protocol", "routing", "merge")  # never import proxy


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _known(name: str) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in MODULES:
            return ".".join(parts)
        parts.pop()
    return None


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules an import statement depends on. `from pkg import sub` depends on pkg.sub (a module),
    not on pkg's __init__, unless it also takes a name defined there."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join([*base, *([node.module] if node.module else [])])
        else:
            prefix = node.module or ""
        subs = [f"{prefix}.{alias.name}" for alias in node.names if f"{prefix}.{alias.name}" in MODULES]
        names = subs if len(subs) == len(node.names) else [*subs, prefix]
    return {target for name in names if (target := _known(name)) is not None and target != module}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _targets(module, path, node)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & members))}" for m in component)


# --- the checker itself, on small graphs (one line per case) ------------------------------------------------

@pytest.mark.parametrize(("graph", "expected"), [
    ({"a": {"b"}, "b": set()}, []),
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ({"a": {"a"}}, []),  # a module naming itself is no cycle
])  # fmt: skip
def test_cycles_finds_every_strongly_connected_component(graph: dict[str, set[str]],
                                                          expected: list[list[str]]) -> None:
    assert sorted(cycles(graph)) == expected


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("proxy.execution.executor", "from proxy.execution.units import UnitFailed", {"proxy.execution.units"}),
    ("proxy.execution.executor", "import proxy.execution.units", {"proxy.execution.units"}),
    ("proxy.session.distsql.rdl", "from proxy.session.distsql import grammar", {"proxy.session.distsql.grammar"}),
    ("proxy.session.distsql.rdl", "from . import grammar", {"proxy.session.distsql.grammar"}),
    ("proxy.session.distsql.rdl", "from .targets import target", {"proxy.session.distsql.targets"}),
    ("merge.keys", "from merge import coltypes as t", {"merge.coltypes"}),
    ("proxy.session.session", "from merge import MergeError", {"merge"}),
    ("proxy.session.session", "import asyncio", set()),
])  # fmt: skip
def test_an_import_depends_on_the_modules_it_names(module: str, source: str, expected: set[str]) -> None:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.Import | ast.ImportFrom)
    assert _targets(module, MODULES[module], node) == expected


# --- the repository ------------------------------------------------------------------------------------------

def test_the_graph_sees_imports_inside_functions_and_type_checking_blocks() -> None:
    graph = import_graph()
    assert "proxy.session.session" in graph["proxy.server"]  # module level
    assert "proxy.server" in graph["proxy.serve"]
    assert "proxy.execution.context" in graph["proxy.execution.executor"]  # under `if TYPE_CHECKING:`


def test_no_import_cycle_anywhere() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles: " + " | ".join(_describe(graph, c) for c in found)


@pytest.mark.parametrize("package", LOWER)
def test_lower_packages_never_import_proxy(package: str) -> None:
    graph = import_graph()
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.split(".")[0] == package
                 for t in targets if t.split(".")[0] == "proxy")
    assert not bad


# --- the rooms: each imports only its own room and the rooms below it --------------------------------------

ROOMS = (  # lowest first
    ("configuration", ("proxy.config", "proxy.privilege", "proxy.rwconfig", "proxy.logs", "proxy.version",
                       "proxy.sandbox", "proxy.clusterport", "proxy.cluster.mode", "proxy.cluster.etcd")),
    ("observe", ("proxy.observe",)),  # digests, slow-query and audit logs: leaves the rooms above report to
    ("backends", ("proxy.backends",)),
    ("frontend", ("proxy.frontend",)),
    ("execution", ("proxy.execution",)),
    ("migration", ("proxy.migration",)),  # the resharding job: below the DistSQL that starts it
    ("session", ("proxy.session",)),
    # proxy.server (the composition root), proxy.metrics, proxy.serve, proxy.cli, ...
    ("edges", ("proxy", "proxy.migration.cli")),
)  # fmt: skip


def room_of(module: str) -> int:
    best = (-1, -1)  # (prefix length, rank)
    for rank, (_name, prefixes) in enumerate(ROOMS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), rank)
    return best[1]


@pytest.mark.parametrize(("module", "room"), [
    ("proxy.config", "configuration"),
    ("proxy.backends.pool", "backends"),
    ("proxy.frontend.wire", "frontend"),
    ("proxy.execution.executor", "execution"),
    ("proxy.session.distsql.rdl", "session"),
    ("proxy.server", "edges"),
    ("proxy.cli", "edges"),
])  # fmt: skip
def test_room_of(module: str, room: str) -> None:
    assert ROOMS[room_of(module)][0] == room


def test_rooms_import_only_downward() -> None:
    graph = import_graph()
    upward = sorted(f"{m} ({ROOMS[room_of(m)][0]}) -> {t} ({ROOMS[room_of(t)][0]})"
                    for m, targets in graph.items() if m.startswith("proxy")
                    for t in targets if t.startswith("proxy") and room_of(t) > room_of(m))
    assert not upward
