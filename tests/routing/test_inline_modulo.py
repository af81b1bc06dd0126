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


# (expression, targets): `targets_by_remainder` must pick what `shard_precise` picks, including remainders that name
# no target, names that differ in case, and more targets than remainders
REMAINDER_CASES: list[tuple[str, tuple[str, ...]]] = [
    ("ds_${id % 2}", ("ds_0", "ds_1")),
    ("ds_${id % 3}", ("ds_0", "ds_1")),  # remainder 2 maps to no target
    ("ds_${id % 2}", ("ds_1", "ds_0", "ds_2")),
    ("DS_${id % 2}", ("ds_0", "ds_1")),
    ("ds${id%4}", ("ds0", "ds1", "ds2", "ds3")),
    ("t_${ID % 5}_x", tuple(f"t_{i}_x" for i in range(5))),
    ("ds_${id % 1}", ("ds_0",)),
]


@pytest.mark.parametrize(("text", "targets"), REMAINDER_CASES)
def test_targets_by_remainder_is_what_shard_precise_picks(text: str, targets: tuple[str, ...]) -> None:
    algorithm = InlineShardingAlgorithm("a", {"algorithm-expression": text})
    table = algorithm.targets_by_remainder(targets, "id")
    assert table is not None and len(table) == algorithm._modulo[2]  # type: ignore[index]
    for value in [*range(40), 2**31 - 1, 2**31, 2**63 - 1, 2**64 + 5, 10**30 + 7]:
        assert table[value % len(table)] == algorithm.shard_precise(targets, "id", value), (text, value)


@pytest.mark.parametrize(("text", "column"), [
    ("ds_${id % 2}", "user_id"),  # the expression's variable is another column
    ("ds_${id % 5000}", "id"),  # a divisor above the table's limit
    ("ds_${id % 2 + 1}", "id"),  # not the modulo form
    ("ds_${(id + 1) % 2}", "id"),
])
def test_targets_by_remainder_declines(text: str, column: str) -> None:
    algorithm = InlineShardingAlgorithm("a", {"algorithm-expression": text})
    assert algorithm.targets_by_remainder(("ds_0", "ds_1"), column) is None
