"""The props table (proxy.config.props) is the one place a prop's default lives: the loader, the code, SHOW DIST
VARIABLES and the documentation's props page all read it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from proxy.config.props import BY_KEY, KNOWN_PROPS, PROPS
from proxy.config.reference import props_page
from proxy.session.distsql.variables import VARIABLES

REPO = Path(__file__).resolve().parents[2]
_READERS = {"prop", "prop_int", "prop_bool", "prop_float", "prop_default"}


@pytest.mark.parametrize("prop", PROPS, ids=[p.key for p in PROPS])
def test_every_prop_is_described_and_its_default_reads(prop: object) -> None:
    p = BY_KEY[prop.key]  # type: ignore[attr-defined]
    assert p.kind in ("bool", "int", "float", "str", "level")
    assert p.use in ("live", "startup", "unused")
    assert p.doc.endswith(".") and len(p.doc) > 20
    p.typed_default  # noqa: B018  (parses)
    assert f"| `{p.key}` |" in props_page()


def test_every_prop_the_code_reads_is_in_the_table() -> None:
    """`config.prop_int("x")` and `prop_default("x")` take their default from the table: a key it lacks would
    be a KeyError at run time, so find them all now."""
    read: set[str] = set()
    for path in (REPO / "proxy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in _READERS and isinstance(node.args[0].value, str):
                read.add(node.args[0].value)
    assert read, "no reader found: the scan is broken"
    assert read <= KNOWN_PROPS, sorted(read - KNOWN_PROPS)


def test_dist_variables_are_the_table() -> None:
    assert {v.key for v in VARIABLES} == {p.key for p in PROPS if not p.legacy}
    assert all((v.kind, v.default, v.use) == (BY_KEY[v.key].kind, BY_KEY[v.key].default, BY_KEY[v.key].use)
               for v in VARIABLES)
