"""INLINE's ``prefix${column % N}suffix`` shortcut gives exactly what the general inline evaluator gives."""

from __future__ import annotations

from typing import Any

import pytest

from routing.algorithms.inline_based import InlineShardingAlgorithm, modulo_form

EXPRESSIONS = ["ds_${id % 2}", "t_order_${order_id % 16}", "ds${id%3}", "ds_$->{ id % 4 }", "${id % 7}_x",
               "ds_${ID % 2}"]
VALUES: list[Any] = [0, 1, 2, 7, -1, -7, -8, 2**31 - 1, -(2**31), 2**31, 2**63 - 1, -(2**63), 2**64 + 5,
                     -(2**70) - 3, "7", "-7", 7.0, True]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_shortcut_matches_the_general_evaluator(text: str) -> None:
    fast = InlineShardingAlgorithm("a", {"algorithm-expression": text})
    slow = InlineShardingAlgorithm("a", {"algorithm-expression": text})
    slow._modulo = None
    assert fast._modulo is not None
    for column in ("id", "order_id", "ID"):
        for value in VALUES:
            try:
                expected: object = slow.evaluate(column, value)
            except Exception as exc:
                expected = type(exc)
            try:
                got: object = fast.evaluate(column, value)
            except Exception as exc:
                got = type(exc)
            assert got == expected, (text, column, value)


@pytest.mark.parametrize(("text", "form"), [
    ("ds_${id % 2}", ("ds_", "id", 2, "")),
    ("ds_${id % 0}", None),
    ("ds_${id % 2 + 1}", None),
    ("ds_${(id % 2)}", None),
    ("ds_${id.hashCode() % 2}", None),
    ("ds_${id % 2}_${id % 3}", None),
    ("ds_'${id % 2}'", None),
])
def test_modulo_form(text: str, form: tuple[str, str, int, str] | None) -> None:
    assert modulo_form(text) == form
