"""Key generators: ShardingSphere's snowflake layout, clock handling, thread safety; UUID format."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from routing.errors import ConfigError
from routing.keygen import (
    EPOCH_MILLIS,
    ClockBackwardsError,
    SnowflakeKeyGenerator,
    UUIDKeyGenerator,
    create_key_generator,
)


class FakeClock:
    """A clock the test moves by hand; sleeping advances it."""

    def __init__(self, now: int) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += round(seconds * 1000)


def split(key: int) -> tuple[int, int, int]:
    return (key >> 22) + EPOCH_MILLIS, (key >> 12) & 0x3FF, key & 0xFFF


def make(clock: FakeClock, **props: Any) -> SnowflakeKeyGenerator:
    return SnowflakeKeyGenerator(props, clock=clock, sleep=clock.sleep)


def test_epoch_is_2016_11_01_utc() -> None:
    from datetime import UTC, datetime

    assert datetime.fromtimestamp(EPOCH_MILLIS / 1000, UTC) == datetime(2016, 11, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("props", "steps", "expected"),
    [
        # (ms advance before each key) -> (ms offset, worker, sequence)
        ({}, [0, 0, 0], [(1000, 0, 0), (1000, 0, 1), (1000, 0, 2)]),
        ({"worker-id": 3}, [0, 1, 1, 1], [(1000, 3, 0), (1001, 3, 1), (1002, 3, 0), (1003, 3, 1)]),  # vibration
        ({"max-vibration-offset": 0}, [0, 1, 1], [(1000, 0, 0), (1001, 0, 0), (1002, 0, 0)]),
        ({"max-vibration-offset": 2}, [0, 1, 1, 1], [(1000, 0, 0), (1001, 0, 1), (1002, 0, 2), (1003, 0, 0)]),
        ({"worker-id": "1023"}, [0], [(1000, 1023, 0)]),
    ],
)
def test_snowflake_layout(props: dict[str, Any], steps: list[int], expected: list[tuple[int, int, int]]) -> None:
    clock = FakeClock(EPOCH_MILLIS + 1000)
    generator = make(clock, **props)
    got = []
    for step in steps:
        clock.now += step
        ms, worker, sequence = split(generator.generate())
        got.append((ms - EPOCH_MILLIS, worker, sequence))
    assert got == expected


def test_snowflake_sequence_overflow_waits_for_the_next_millisecond() -> None:
    clock = FakeClock(EPOCH_MILLIS + 5)
    ticks = iter([EPOCH_MILLIS + 5] * 4097 + [EPOCH_MILLIS + 5, EPOCH_MILLIS + 6])
    generator = SnowflakeKeyGenerator({}, clock=lambda: next(ticks), sleep=clock.sleep)
    keys = [generator.generate() for _ in range(4097)]
    assert split(keys[4095]) == (EPOCH_MILLIS + 5, 0, 4095)
    assert split(keys[4096])[0] == EPOCH_MILLIS + 6
    assert keys == sorted(set(keys))


def test_snowflake_tolerates_a_small_clock_step_back() -> None:
    clock = FakeClock(EPOCH_MILLIS + 100)
    generator = make(clock)
    first = generator.generate()
    clock.now -= 5
    second = generator.generate()
    assert clock.slept == [0.005]
    assert second > first


@pytest.mark.parametrize(("back", "tolerance"), [(10, {}), (50, {"max-tolerate-time-difference-milliseconds": 20})])
def test_snowflake_refuses_a_large_clock_step_back(back: int, tolerance: dict[str, Any]) -> None:
    clock = FakeClock(EPOCH_MILLIS + 100)
    generator = make(clock, **tolerance)
    generator.generate()
    clock.now -= back
    with pytest.raises(ClockBackwardsError, match="clock is moving backwards"):
        generator.generate()


def test_snowflake_is_monotonic_with_the_real_clock() -> None:
    generator = SnowflakeKeyGenerator()
    keys = [generator.generate() for _ in range(20000)]
    assert all(a < b for a, b in itertools.pairwise(keys))


def test_snowflake_is_thread_safe() -> None:
    generator = SnowflakeKeyGenerator({"worker-id": 7})
    per_thread: list[list[int]] = [[] for _ in range(8)]

    def work(out: list[int]) -> None:
        for _ in range(2000):
            out.append(generator.generate())

    threads = [threading.Thread(target=work, args=(out,)) for out in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [k for out in per_thread for k in out]
    assert len(set(everything)) == len(everything)
    assert all(out == sorted(out) for out in per_thread)
    assert {split(k)[1] for k in everything} == {7}


@pytest.mark.parametrize(
    ("props", "fragment"),
    [
        ({"worker-id": 1024}, "worker-id must be within [0, 1023]"),
        ({"worker-id": -1}, "worker-id must be within"),
        ({"worker-id": "abc"}, "worker-id must be an integer"),
        ({"max-vibration-offset": 4096}, "max-vibration-offset must be within [0, 4095]"),
        ({"max-tolerate-time-difference-milliseconds": True}, "must be an integer"),
    ],
)
def test_snowflake_props_errors(props: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        create_key_generator("snowflake", "SNOWFLAKE", props, file="db.yaml", key="rules[0].keyGenerators.snowflake")
    assert fragment in info.value.reason
    assert info.value.key == "rules[0].keyGenerators.snowflake.props"


def test_uuid_is_32_lower_hex_version_4_and_unique() -> None:
    generator = create_key_generator("uuid", "uuid", None)
    assert isinstance(generator, UUIDKeyGenerator)
    keys = {generator.generate() for _ in range(1000)}
    assert len(keys) == 1000
    for key in list(keys)[:50]:
        assert len(key) == 32 and key == key.lower() and int(key, 16) >= 0 and key[12] == "4"


@pytest.mark.parametrize(("type_", "cls"), [("SNOWFLAKE", SnowflakeKeyGenerator), ("snowflake", SnowflakeKeyGenerator),
                                           ("UUID", UUIDKeyGenerator)])  # fmt: skip
def test_registry(type_: str, cls: type) -> None:
    assert isinstance(create_key_generator("g", type_), cls)


def test_unknown_key_generator_type() -> None:
    with pytest.raises(ConfigError, match="unknown key generator type 'COSID'") as info:
        create_key_generator("g", "COSID", {}, key="rules[0].keyGenerators.g")
    assert info.value.key == "rules[0].keyGenerators.g.type"
