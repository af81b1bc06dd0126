"""Sharding algorithms: ShardingSphere behaviour, one line per case. Hash goldens come from OpenJDK 17."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from routing.algorithms import (
    AutoTableAlgorithm,
    algorithm_kind,
    create_algorithm,
    match_suffix,
    murmur_hash,
)
from routing.algorithms.java_time import JavaDateTimePattern, add_months
from routing.errors import ConfigError, RoutingError
from routing.inline import JavaLong
from routing.model import (
    ComplexShardingAlgorithm,
    HintShardingAlgorithm,
    RangeBound,
    StandardShardingAlgorithm,
)

T4 = ["t_0", "t_1", "t_2", "t_3"]
DS2 = ["ds_0", "ds_1"]
SEED_NODES = ["datasource-name", "datasource-name-1", "datasource-name-2", "datasource-name-3"]


def rng(lower: Any = None, upper: Any = None, lower_inclusive: bool = True, upper_inclusive: bool = True) -> RangeBound:
    return RangeBound(lower, lower_inclusive, upper, upper_inclusive)


# --- INLINE ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "column", "value", "targets", "expected"),
    [
        ("t_order_${order_id % 2}", "order_id", 3, ["t_order_0", "t_order_1"], "t_order_1"),
        ("t_order_${order_id % 2}", "order_id", -3, ["t_order_0", "t_order_1"], None),  # t_order_-1
        ("t_order_${Math.floorMod(order_id, 2)}", "order_id", -3, ["t_order_0", "t_order_1"], "t_order_1"),
        ("ds_${user_id % 2}", "user_id", 10, DS2, "ds_0"),
        ("ds_${user_id % 2}", "USER_ID", 11, DS2, "ds_1"),  # SQL column names are case-blind
        ("ds_${user_id.intdiv(100) % 2}", "user_id", 250, DS2, "ds_0"),
        ("t_${Math.abs(code.hashCode()) % 4}", "code", "abc", T4, "t_2"),
        ("T_${id % 4}", "id", 1, T4, "t_1"),  # target names match case-insensitively
        ("t_${id % 8}", "id", 7, T4, None),
    ],
)
def test_inline_precise(expression: str, column: str, value: Any, targets: list[str], expected: str | None) -> None:
    algorithm = create_algorithm("alg", "INLINE", {"algorithm-expression": expression})
    assert algorithm.shard_precise(targets, column, value) == expected


def test_inline_range_is_refused_naming_the_algorithm() -> None:
    algorithm = create_algorithm("t_order_inline", "INLINE", {"algorithm-expression": "t_${id % 2}"})
    with pytest.raises(RoutingError, match=r"'t_order_inline'.*allow-range-query-with-inline-sharding"):
        algorithm.shard_range(T4, "id", rng(1, 5))


@pytest.mark.parametrize("allow", [True, "true", "TRUE"])
def test_inline_range_allowed_routes_everywhere(allow: Any) -> None:
    props = {"algorithm-expression": "t_${id % 4}", "allow-range-query-with-inline-sharding": allow}
    assert create_algorithm("a", "INLINE", props).shard_range(T4, "id", rng(1, 2)) == T4


def test_inline_evaluation_error_is_a_routing_error() -> None:
    algorithm = create_algorithm("a", "INLINE", {"algorithm-expression": "t_${id % 2}"})
    with pytest.raises(RoutingError, match="cannot apply"):
        algorithm.shard_precise(T4, "id", "abc")


# --- MOD / HASH_MOD ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "targets", "expected"),
    [
        (0, T4, "t_0"),
        (5, T4, "t_1"),
        (-3, T4, "t_1"),  # BigInteger.mod is never negative
        ("6", T4, "t_2"),
        (Decimal("7"), T4, "t_3"),
        (Decimal("7.0"), T4, "t_3"),
        (7.0, T4, "t_3"),
        (True, T4, "t_1"),
        (12345678901234567890123, T4, "t_3"),
        (Decimal("7.5"), T4, None),  # no integer key equals 7.5
        ("abc", T4, None),
        (None, T4, None),
        (1, ["t_00", "t_01", "t_02", "t_03"], "t_01"),  # zero-padded names
        (2, ["ds0", "ds1", "ds2", "ds3"], "ds2"),
        (5, ["t_0", "t_1", "t_2", "t_3", "t_4"], "t_1"),
    ],
)
def test_mod_precise(value: Any, targets: list[str], expected: str | None) -> None:
    algorithm = create_algorithm("mod", "MOD", {"sharding-count": 4})
    assert algorithm.shard_precise(targets, "id", value) == expected


def test_mod_suffix_never_matches_a_longer_number() -> None:
    targets = [f"t_{i}" for i in range(12)]
    algorithm = create_algorithm("mod", "MOD", {"sharding-count": "12"})
    assert [algorithm.shard_precise(list(reversed(targets)), "id", v) for v in (1, 11, 13)] == ["t_1", "t_11", "t_1"]


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        (rng(1, 2), ["t_1", "t_2"]),
        (rng(3, 4), ["t_0", "t_3"]),
        (rng(0, 10), T4),
        (rng(1, 4, upper_inclusive=False), ["t_1", "t_2", "t_3"]),
        (rng(1, 3, lower_inclusive=False, upper_inclusive=False), ["t_2"]),
        (rng(Decimal("0.5"), Decimal("2.5")), ["t_1", "t_2"]),
        (rng("1", "1"), ["t_1"]),
        (rng(5, 4), []),
        (rng(1, None), T4),
        (rng(None, 1), T4),
        (rng("x", 2), T4),  # not a number: widen
    ],
)
def test_mod_range(bound: RangeBound, expected: list[str]) -> None:
    assert create_algorithm("mod", "MOD", {"sharding-count": 4}).shard_range(T4, "id", bound) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("abc", "t_2"),  # 96354 % 4
        ("polygenelubricants", "t_0"),  # abs((long) Integer.MIN_VALUE) = 2147483648
        ("hello world", "t_0"),
        (-5, "t_1"),  # Integer.hashCode(-5) = -5 -> 5
        (7, "t_3"),
        (JavaLong(-1), "t_0"),  # Long.hashCode(-1) = 0
        (5000000000, "t_1"),  # Long.hashCode = 705032705
        (Decimal("1.50"), "t_0"),  # BigDecimal.hashCode = 4652
    ],
)
def test_hash_mod_precise(value: Any, expected: str) -> None:
    assert create_algorithm("h", "HASH_MOD", {"sharding-count": 4}).shard_precise(T4, "c", value) == expected


def test_hash_mod_range_and_unhashable_values() -> None:
    algorithm = create_algorithm("h", "HASH_MOD", {"sharding-count": 4})
    assert algorithm.shard_range(T4, "c", rng(1, 2)) == T4
    with pytest.raises(RoutingError, match="'h'"):
        algorithm.shard_precise(T4, "c", datetime(2024, 1, 1))


# --- VOLUME_RANGE / BOUNDARY_RANGE ----------------------------------------------------------------------

T6 = [f"t_{i}" for i in range(6)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, "t_0"), (-100, "t_0"), (10, "t_1"), (19, "t_1"), (20, "t_2"), ("25", "t_2"), (Decimal("39.9"), "t_3"),
     (44, "t_4"), (45, "t_5"), (10**12, "t_5"), ("abc", None)],
)  # fmt: skip
def test_volume_range_precise(value: Any, expected: str | None) -> None:
    props = {"range-lower": 10, "range-upper": 45, "sharding-volume": 10}
    assert create_algorithm("v", "VOLUME_RANGE", props).shard_precise(T6, "id", value) == expected


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        (rng(15, 25), ["t_1", "t_2"]),
        (rng(None, 10, upper_inclusive=False), ["t_0"]),
        (rng(None, 10), ["t_0", "t_1"]),
        (rng(45, None), ["t_5"]),
        (rng(20, 20), ["t_2"]),
        (rng(19, 20, lower_inclusive=False, upper_inclusive=False), ["t_1"]),
        (rng(None, None), T6),
    ],
)
def test_volume_range_range(bound: RangeBound, expected: list[str]) -> None:
    props = {"range-lower": "10", "range-upper": "45", "sharding-volume": "10"}
    algorithm = create_algorithm("v", "VOLUME_RANGE", props)
    assert algorithm.auto_tables_amount() == 6
    assert algorithm.shard_range(T6, "id", bound) == expected


@pytest.mark.parametrize(
    ("ranges", "value", "expected"),
    [
        ("1,5,10", 0, "t_0"),
        ("1,5,10", 1, "t_1"),
        ("1,5,10", 4, "t_1"),
        ("1,5,10", 5, "t_2"),
        ("1,5,10", 10, "t_3"),
        ("10, 1, x, 5", 7, "t_2"),  # entries that are not integers are dropped, the rest sorted
        ([1, 5, 10], 11, "t_3"),
    ],
)
def test_boundary_range_precise(ranges: Any, value: int, expected: str) -> None:
    algorithm = create_algorithm("b", "BOUNDARY_RANGE", {"sharding-ranges": ranges})
    assert algorithm.auto_tables_amount() == 4
    assert algorithm.shard_precise(T4, "id", value) == expected


def test_boundary_range_range() -> None:
    algorithm = create_algorithm("b", "BOUNDARY_RANGE", {"sharding-ranges": "1,5,10"})
    assert algorithm.shard_range(T4, "id", rng(3, 7)) == ["t_1", "t_2"]
    assert algorithm.shard_range(T4, "id", rng(None, 0)) == ["t_0"]


# --- AUTO_INTERVAL / INTERVAL ---------------------------------------------------------------------------

T11 = [f"t_{i}" for i in range(11)]
AUTO_INTERVAL = {"datetime-lower": "2020-01-01 00:00:00", "datetime-upper": "2020-01-10 00:00:00",
                 "sharding-seconds": 86400}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2019-06-01 00:00:00", "t_0"),
        ("2020-01-01 00:00:00", "t_0"),
        ("2020-01-01 00:00:01", "t_0"),  # ceil of "0.00": ShardingSphere formats before ceil
        ("2020-01-01 12:00:00", "t_1"),
        ("2020-01-02 00:00:00", "t_1"),
        ("2020-01-02 00:07:12", "t_1"),  # 1.005 as a double is 1.00499..., HALF_EVEN to "1.00"
        ("2020-01-02 00:14:24", "t_2"),  # 1.01
        ("2020-01-05 08:00:00", "t_5"),
        ("2030-01-01 00:00:00", "t_10"),  # clamped to the last table
        (datetime(2020, 1, 3, 6), "t_3"),
        (date(2020, 1, 4), "t_3"),
        ("2020-01-04", "t_3"),
    ],
)
def test_auto_interval_precise(value: Any, expected: str) -> None:
    algorithm = create_algorithm("ai", "AUTO_INTERVAL", AUTO_INTERVAL)
    assert algorithm.auto_tables_amount() == 11
    assert algorithm.shard_precise(T11, "created", value) == expected


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        (rng("2020-01-03 00:00:00", "2020-01-05 00:00:00"), ["t_2", "t_3", "t_4"]),
        (rng(None, "2020-01-02 00:00:00"), ["t_0", "t_1"]),
        (rng("2020-01-09 12:00:00", None), ["t_9", "t_10"]),
        (rng("not a date", "2020-01-01 00:00:00"), ["t_0"]),
    ],
)
def test_auto_interval_range(bound: RangeBound, expected: list[str]) -> None:
    assert create_algorithm("ai", "AUTO_INTERVAL", AUTO_INTERVAL).shard_range(T11, "created", bound) == expected


def test_auto_interval_amount_uses_long_division() -> None:
    props = {"datetime-lower": "2020-01-01 00:00:00", "datetime-upper": "2021-01-01 00:00:00",
             "sharding-seconds": 31536000}  # fmt: skip
    assert create_algorithm("ai", "AUTO_INTERVAL", props).auto_tables_amount() == 3  # 366 days // 365 + 2


MONTHS = [f"t_order_2024{m:02d}" for m in range(1, 13)]
INTERVAL = {
    "datetime-pattern": "yyyy-MM-dd HH:mm:ss",
    "datetime-lower": "2024-01-01 00:00:00",
    "datetime-upper": "2024-12-31 23:59:59",
    "sharding-suffix-pattern": "yyyyMM",
    "datetime-interval-amount": 1,
    "datetime-interval-unit": "MONTHS",
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-03-15 10:00:00", "t_order_202403"),
        ("2024-03-15 10:00:00.123456", "t_order_202403"),
        (datetime(2024, 12, 31, 23, 59, 59), "t_order_202412"),
        (date(2024, 2, 29), "t_order_202402"),
        ("2024-02-01", "t_order_202402"),
        ("2023-12-31 23:59:59", None),
        ("2025-01-01 00:00:00", None),
    ],
)
def test_interval_precise(value: Any, expected: str | None) -> None:
    assert create_algorithm("iv", "INTERVAL", INTERVAL).shard_precise(MONTHS, "created", value) == expected


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        (rng("2024-02-10 00:00:00", "2024-04-01 00:00:00", upper_inclusive=False), MONTHS[1:3]),
        (rng("2024-02-10 00:00:00", "2024-04-01 00:00:00"), MONTHS[1:4]),
        (rng(None, "2024-02-01 00:00:00", upper_inclusive=False), MONTHS[:1]),
        (rng("2024-11-30 23:59:59", None), MONTHS[10:]),
        (rng(None, None), MONTHS),
        (rng("2030-01-01 00:00:00", None), []),
    ],
)
def test_interval_range(bound: RangeBound, expected: list[str]) -> None:
    assert create_algorithm("iv", "INTERVAL", INTERVAL).shard_range(MONTHS, "created", bound) == expected


@pytest.mark.parametrize(
    ("props", "value", "targets", "expected"),
    [
        ({"datetime-interval-amount": 3}, "2024-05-05 00:00:00", ["t_202401", "t_202404", "t_202407"], "t_202404"),
        ({"datetime-interval-unit": "DAYS", "sharding-suffix-pattern": "yyyyMMdd"}, "2024-02-29 23:00:00",
         ["t_20240228", "t_20240229"], "t_20240229"),
        ({"datetime-pattern": "yyyy-MM-dd", "datetime-lower": "2024-01-01", "datetime-upper": "2024-12-31",
          "datetime-interval-unit": "YEARS", "sharding-suffix-pattern": "yyyy"}, "2024-07-01", ["t_2024"], "t_2024"),
        ({"datetime-interval-unit": "HOURS", "sharding-suffix-pattern": "yyyyMMddHH",
          "datetime-upper": "2024-01-02 00:00:00"}, datetime(2024, 1, 1, 13, 30), ["t_2024010113"], "t_2024010113"),
    ],
)  # fmt: skip
def test_interval_variants(props: dict[str, Any], value: Any, targets: list[str], expected: str) -> None:
    assert create_algorithm("iv", "INTERVAL", {**INTERVAL, **props}).shard_precise(targets, "c", value) == expected


@pytest.mark.parametrize(
    ("start", "months", "expected"),
    [
        (datetime(2024, 1, 31), 1, datetime(2024, 2, 29)),  # plusMonths clamps to the month end
        (datetime(2023, 1, 31), 1, datetime(2023, 2, 28)),
        (datetime(2024, 2, 29), 12, datetime(2025, 2, 28)),
        (datetime(2024, 11, 15, 8), 3, datetime(2025, 2, 15, 8)),
    ],
)
def test_add_months(start: datetime, months: int, expected: datetime) -> None:
    assert add_months(start, months) == expected


@pytest.mark.parametrize(
    ("pattern", "moment", "text"),
    [
        ("yyyy-MM-dd HH:mm:ss", datetime(2024, 3, 5, 7, 8, 9), "2024-03-05 07:08:09"),
        ("yyyyMM", datetime(2024, 3, 1), "202403"),
        ("yyyy_MM_dd", datetime(2024, 3, 5), "2024_03_05"),
        ("yyyy-MM-dd HH:mm:ss.SSS", datetime(2024, 3, 5, 1, 2, 3, 45000), "2024-03-05 01:02:03.045"),
        ("'t'yyMMdd", datetime(2024, 3, 5), "t240305"),
    ],
)
def test_java_pattern_formats_and_parses_back(pattern: str, moment: datetime, text: str) -> None:
    compiled = JavaDateTimePattern(pattern)
    assert compiled.format(moment) == text
    assert compiled.parse(text) == moment


# --- COMPLEX_INLINE / HINT_INLINE -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "ranges", "expected"),
    [
        ({"user_id": [1], "order_id": [2]}, {}, ["t_1"]),
        ({"user_id": [1], "order_id": [2, 3]}, {}, ["t_1", "t_0"]),
        ({"USER_ID": [2], "Order_Id": [2]}, {}, ["t_0"]),
        ({"user_id": [1, 2], "order_id": [1, 2]}, {}, ["t_0", "t_1"]),
        ({"user_id": [1]}, {}, ["t_0", "t_1"]),  # a column without a value: every target
    ],
)
def test_complex_inline(values: dict[str, list[Any]], ranges: dict[str, RangeBound], expected: list[str]) -> None:
    props = {"sharding-columns": "user_id,order_id", "algorithm-expression": "t_${(user_id + order_id) % 2}"}
    algorithm = create_algorithm("c", "COMPLEX_INLINE", props)
    assert algorithm.shard(["t_0", "t_1"], values, ranges) == expected


def test_complex_inline_ranges() -> None:
    props = {"sharding-columns": "a,b", "algorithm-expression": "t_${(a + b) % 2}"}
    with pytest.raises(RoutingError, match="'c'"):
        create_algorithm("c", "COMPLEX_INLINE", props).shard(["t_0", "t_1"], {"a": [1]}, {"b": rng(1, 2)})
    allowed = create_algorithm("c", "COMPLEX_INLINE", {**props, "allow-range-query-with-inline-sharding": True})
    assert allowed.shard(["t_0", "t_1"], {"a": [1]}, {"b": rng(1, 2)}) == ["t_0", "t_1"]


@pytest.mark.parametrize(
    ("props", "values", "expected"),
    [
        ({}, ["ds_1"], ["ds_1"]),
        ({}, [], DS2),
        ({}, ["ds_9"], []),
        ({"algorithm-expression": "ds_${value % 2}"}, [1, 2, 3], ["ds_1", "ds_0"]),
        ({"algorithm-expression": "ds_$->{value % 2}"}, ["4"], None),  # Groovy: String % fails
    ],
)
def test_hint_inline(props: dict[str, Any], values: list[Any], expected: list[str] | None) -> None:
    algorithm = create_algorithm("h", "HINT_INLINE", props)
    if expected is None:
        with pytest.raises(RoutingError):
            algorithm.shard(DS2, values)
    else:
        assert algorithm.shard(DS2, values) == expected


# --- CONSISTENT_HASH ------------------------------------------------------------------------------------


def test_consistent_hash_seed_example() -> None:
    """Seed 004: four data sources, four virtual nodes each, key U0000000001 -> datasource-name-1."""
    algorithm = create_algorithm("ch", "CONSISTENT_HASH", {"virtual-nodes": 4})
    assert algorithm.shard_precise(SEED_NODES, "sharding_key", "U0000000001") == "datasource-name-1"
    assert create_algorithm("ch", "CONSISTENT_HASH", {}).shard_precise(SEED_NODES, "k", "U0000000001") == (
        "datasource-name-1"
    )  # the default is the number of targets, as in the seed


@pytest.mark.parametrize(
    ("key", "expected"),
    [("", 931711387), ("a", 2088271954), ("ab", 554594224), ("abc", 91948584), ("abcd", 1343524252),
     ("abcde", 406388421), ("datasource-name", 1309022655), ("datasource-name-1#3", 417923170),
     ("U0000000001", 755260595), ("中文", 244102792), ("😀", 1457794721)],
)  # fmt: skip
def test_murmur_hash_matches_the_java_seed(key: str, expected: int) -> None:
    assert murmur_hash(key) == expected


def test_consistent_hash_is_stable_and_spreads() -> None:
    algorithm = create_algorithm("ch", "CONSISTENT_HASH", {"virtual-nodes": 16})
    first = [algorithm.shard_precise(SEED_NODES, "k", f"U{i:010d}") for i in range(400)]
    assert first == [algorithm.shard_precise(SEED_NODES, "k", f"U{i:010d}") for i in range(400)]
    assert set(first) == set(SEED_NODES)
    assert algorithm.shard_precise(SEED_NODES, "k", 12345) == algorithm.shard_precise(SEED_NODES, "k", "12345")
    assert algorithm.shard_precise(SEED_NODES, "k", None) is None
    assert algorithm.shard_range(SEED_NODES, "k", rng(1, 2)) == SEED_NODES


def test_consistent_hash_moves_few_keys_when_a_node_is_added() -> None:
    algorithm = create_algorithm("ch", "CONSISTENT_HASH", {"virtual-nodes": 32})
    keys = [f"U{i:010d}" for i in range(500)]
    before = {k: algorithm.shard_precise(SEED_NODES, "k", k) for k in keys}
    after = {k: algorithm.shard_precise([*SEED_NODES, "datasource-name-4"], "k", k) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "datasource-name-4" for k in moved)
    assert len(moved) < len(keys) / 2


# --- CLASS_BASED ----------------------------------------------------------------------------------------


class EvenOdd:
    """A user standard algorithm: ds_0 for even values, ds_1 for odd."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.props = props

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        return targets[int(value) % 2]

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        return list(targets)


class FirstOnly:
    def __init__(self, props: Mapping[str, Any]) -> None:
        pass

    def shard(self, targets: Sequence[str], *args: Any) -> list[str]:
        return list(targets[:1])


@pytest.mark.parametrize(
    ("strategy", "path", "protocol"),
    [
        ("STANDARD", "tests.routing.test_algorithms:EvenOdd", StandardShardingAlgorithm),
        ("standard", "tests.routing.test_algorithms.EvenOdd", StandardShardingAlgorithm),
        ("COMPLEX", "tests.routing.test_algorithms:FirstOnly", ComplexShardingAlgorithm),
        ("HINT", "tests.routing.test_algorithms:FirstOnly", HintShardingAlgorithm),
    ],
)
def test_class_based_loads_user_code(strategy: str, path: str, protocol: type) -> None:
    algorithm = create_algorithm("cb", "CLASS_BASED", {"strategy": strategy, "algorithmClassName": path})
    assert isinstance(algorithm, protocol)
    assert algorithm_kind(algorithm) == strategy.lower()
    if strategy.upper() == "STANDARD":
        assert algorithm.shard_precise(DS2, "id", 3) == "ds_1"
        assert algorithm.delegate.props["strategy"] == strategy


@pytest.mark.parametrize(
    ("props", "fragment", "key"),
    [
        ({"strategy": "STANDARD", "algorithmClassName": "tests.routing.test_algorithms:FirstOnly"},
         "does not implement StandardShardingAlgorithm", "algorithmClassName"),
        ({"strategy": "STANDARD", "algorithmClassName": "no.such.module:X"}, "cannot load", "algorithmClassName"),
        ({"strategy": "STANDARD", "algorithmClassName": "tests.routing.test_algorithms:Nope"}, "cannot load",
         "algorithmClassName"),
        ({"strategy": "STANDARD", "algorithmClassName": "tests.routing.test_algorithms:T4"}, "not a class",
         "algorithmClassName"),
        ({"strategy": "WEIRD", "algorithmClassName": "x:Y"}, "STANDARD, COMPLEX or HINT", "strategy"),
        ({"algorithmClassName": "x:Y"}, "'strategy' is required", "strategy"),
    ],
)  # fmt: skip
def test_class_based_errors(props: dict[str, Any], fragment: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        create_algorithm("cb", "CLASS_BASED", props, file="db.yaml", key="rules[0].shardingAlgorithms.cb")
    assert fragment in str(info.value)
    assert info.value.key == f"rules[0].shardingAlgorithms.cb.props.{key}"
    assert info.value.file == "db.yaml"


# --- registry and props -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "props", "fragment", "key"),
    [
        ("NOPE", {}, "unknown sharding algorithm type 'NOPE'", "algs.a.type"),
        ("MOD", {}, "'sharding-count' is required", "algs.a.props.sharding-count"),
        ("MOD", {"sharding-count": "four"}, "must be an integer", "algs.a.props.sharding-count"),
        ("MOD", {"sharding-count": 0}, "at least 1", "algs.a.props.sharding-count"),
        ("INLINE", {}, "'algorithm-expression' is required", "algs.a.props.algorithm-expression"),
        ("INLINE", {"algorithm-expression": "t_${id %}"}, "position", "algs.a.props.algorithm-expression"),
        ("INLINE", {"algorithm-expression": "t_${id}", "allow-range-query-with-inline-sharding": "yes"},
         "true or false", "algs.a.props.allow-range-query-with-inline-sharding"),
        ("VOLUME_RANGE", {"range-lower": 10, "range-upper": 15, "sharding-volume": 10}, "sharding-volume",
         "algs.a.props.range-upper"),
        ("BOUNDARY_RANGE", {"sharding-ranges": "x,y"}, "no integer boundary", "algs.a.props.sharding-ranges"),
        ("AUTO_INTERVAL", {"datetime-lower": "2020-01-01", "datetime-upper": "2021-01-01 00:00:00",
                           "sharding-seconds": 1}, "yyyy-MM-dd HH:mm:ss", "algs.a.props.datetime-lower"),
        ("INTERVAL", {**INTERVAL, "datetime-interval-unit": "FORTNIGHTS"}, "ChronoUnit",
         "algs.a.props.datetime-interval-unit"),
        ("INTERVAL", {**INTERVAL, "sharding-suffix-pattern": "yyyyMMM"}, "unsupported pattern",
         "algs.a.props.sharding-suffix-pattern"),
        ("INTERVAL", {**INTERVAL, "datetime-lower": "2024/01/01"}, "does not match", "algs.a.props.datetime-lower"),
        ("CONSISTENT_HASH", {"virtual-nodes": -1}, "at least 0", "algs.a.props.virtual-nodes"),
    ],
)  # fmt: skip
def test_algorithm_config_errors(type_: str, props: dict[str, Any], fragment: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        create_algorithm("a", type_, props, file="f.yaml", key="algs.a")
    assert fragment in info.value.reason
    assert info.value.key == key


@pytest.mark.parametrize(
    ("type_", "props", "kind", "auto"),
    [
        ("INLINE", {"algorithm-expression": "t"}, "standard", False),
        ("inline", {"algorithm-expression": "t"}, "standard", False),
        ("COMPLEX_INLINE", {"algorithm-expression": "t"}, "complex", False),
        ("HINT_INLINE", {}, "hint", False),
        ("MOD", {"sharding-count": 2}, "standard", True),
        ("HASH_MOD", {"sharding-count": 2}, "standard", True),
        ("VOLUME_RANGE", {"range-lower": 0, "range-upper": 10, "sharding-volume": 5}, "standard", True),
        ("BOUNDARY_RANGE", {"sharding-ranges": "1"}, "standard", True),
        ("AUTO_INTERVAL", AUTO_INTERVAL, "standard", True),
        ("INTERVAL", INTERVAL, "standard", False),
        ("CONSISTENT_HASH", {"sharding-count": 4}, "standard", True),
    ],
)
def test_algorithm_kinds(type_: str, props: dict[str, Any], kind: str, auto: bool) -> None:
    algorithm = create_algorithm("a", type_, props)
    assert algorithm_kind(algorithm) == kind
    assert isinstance(algorithm, AutoTableAlgorithm) == auto


@pytest.mark.parametrize(
    ("targets", "suffix", "expected"),
    [
        (["t_0", "t_1"], "1", "t_1"),
        (["t_11", "t_1"], "1", "t_1"),
        (["t_01", "t_02"], "2", "t_02"),
        (["0", "1"], "0", "0"),
        (["t_10"], "0", None),
        (["t_a"], "1", None),
    ],
)
def test_match_suffix(targets: list[str], suffix: str, expected: str | None) -> None:
    assert match_suffix(targets, suffix) == expected
