"""Key generators for INSERTs that omit the key column: SNOWFLAKE and UUID, as ShardingSphere builds them.

SNOWFLAKE keys are ``(ms since 2016-11-01T00:00:00Z) << 22 | worker-id << 12 | sequence``, so keys made
here interleave correctly with keys ShardingSphere made for the same tables. A new millisecond starts its
sequence at a "vibrating" offset (0, 1, …, max-vibration-offset, 0, …) so low-traffic tables do not put
every key on an even value (which would defeat ``id % 2`` sharding). If the clock goes backwards by less
than ``max-tolerate-time-difference-milliseconds`` the generator waits it out; further back is an error.
Generators are thread-safe and strictly increasing per instance.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from routing.errors import ConfigError, RoutingError

__all__ = [
    "EPOCH_MILLIS",
    "KEY_GENERATOR_TYPES",
    "ClockBackwardsError",
    "SnowflakeKeyGenerator",
    "UUIDKeyGenerator",
    "create_key_generator",
]

EPOCH_MILLIS = 1_477_958_400_000  # 2016-11-01T00:00:00Z
SEQUENCE_BITS = 12
WORKER_ID_BITS = 10
SEQUENCE_MASK = (1 << SEQUENCE_BITS) - 1
WORKER_ID_SHIFT = SEQUENCE_BITS
TIMESTAMP_SHIFT = SEQUENCE_BITS + WORKER_ID_BITS
MAX_WORKER_ID = (1 << WORKER_ID_BITS) - 1


class ClockBackwardsError(RoutingError):
    """The system clock moved back further than the generator tolerates."""


def _int_prop(props: Mapping[str, Any], prop: str, default: int, low: int, high: int, where: dict[str, Any]) -> int:
    value = props.get(prop, default)
    try:
        if isinstance(value, bool):
            raise ValueError
        result = value if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{prop} must be an integer, got {value!r}", **where) from None
    if not low <= result <= high:
        raise ConfigError(f"{prop} must be within [{low}, {high}], got {result}", **where)
    return result


class SnowflakeKeyGenerator:
    """SNOWFLAKE: props ``worker-id`` (0), ``max-vibration-offset`` (1),
    ``max-tolerate-time-difference-milliseconds`` (10). ``clock``/``sleep`` are injectable for tests."""

    def __init__(
        self,
        props: Mapping[str, Any] | None = None,
        *,
        clock: Callable[[], int] | None = None,
        sleep: Callable[[float], None] | None = None,
        file: str | None = None,
        key: str | None = None,
    ) -> None:
        props = props or {}
        where: dict[str, Any] = {"file": file, "key": f"{key}.props" if key else None}
        self.worker_id = _int_prop(props, "worker-id", 0, 0, MAX_WORKER_ID, where)
        self.max_vibration_offset = _int_prop(props, "max-vibration-offset", 1, 0, SEQUENCE_MASK, where)
        self.max_tolerate_millis = _int_prop(
            props, "max-tolerate-time-difference-milliseconds", 10, 0, 2**31 - 1, where
        )
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._sleep = sleep or time.sleep
        self._lock = threading.Lock()
        self._last_millis = 0
        self._sequence = 0
        self._sequence_offset = -1

    def _wait_if_clock_went_back(self, now: int) -> int:
        while now < self._last_millis:
            behind = self._last_millis - now
            if behind >= self.max_tolerate_millis:
                raise ClockBackwardsError(
                    f"clock is moving backwards: last key at {self._last_millis} ms, now {now} ms "
                    f"(tolerance {self.max_tolerate_millis} ms)"
                )
            self._sleep(behind / 1000)
            now = self._clock()
        return now

    def generate(self) -> int:
        with self._lock:
            now = self._wait_if_clock_went_back(self._clock())
            if now == self._last_millis:
                self._sequence = (self._sequence + 1) & SEQUENCE_MASK
                if self._sequence == 0:  # 4096 keys this millisecond: move on to the next one
                    while now <= self._last_millis:
                        now = self._clock()
            else:
                self._sequence_offset = (
                    0 if self._sequence_offset >= self.max_vibration_offset else self._sequence_offset + 1
                )
                self._sequence = self._sequence_offset
            self._last_millis = now
            return ((now - EPOCH_MILLIS) << TIMESTAMP_SHIFT) | (self.worker_id << WORKER_ID_SHIFT) | self._sequence


class UUIDKeyGenerator:
    """UUID: a random (version 4) UUID as 32 lower-case hex digits without dashes."""

    def __init__(self, props: Mapping[str, Any] | None = None, **_: Any) -> None:
        self.props = dict(props or {})

    def generate(self) -> str:
        return uuid.uuid4().hex


KEY_GENERATOR_TYPES: dict[str, Callable[..., Any]] = {
    "SNOWFLAKE": SnowflakeKeyGenerator,
    "UUID": UUIDKeyGenerator,
}


def create_key_generator(
    name: str, type_: str, props: Mapping[str, Any] | None = None, *, file: str | None = None, key: str | None = None
) -> Any:
    """Build the key generator ``name`` of ``type_`` (SNOWFLAKE or UUID, case-insensitive)."""
    factory = KEY_GENERATOR_TYPES.get(str(type_).strip().upper())
    if factory is None:
        raise ConfigError(
            f"unknown key generator type {type_!r} for {name!r} (known: {', '.join(KEY_GENERATOR_TYPES)})",
            file=file,
            key=f"{key}.type" if key else "type",
        )
    if props is not None and not isinstance(props, Mapping):
        raise ConfigError(f"props of {name!r} must be a mapping", file=file, key=f"{key}.props" if key else None)
    return factory(props or {}, file=file, key=key)
