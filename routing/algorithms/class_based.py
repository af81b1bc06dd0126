"""CLASS_BASED: user-written algorithms, loaded by Python import path instead of a Java class name.

Props: ``strategy`` (STANDARD | COMPLEX | HINT) and ``algorithmClassName`` (``package.module:Class`` or
``package.module.Class``). The class is called with one argument, the algorithm's whole props dict, and the
instance must implement the protocol of its strategy from ``routing.model``:

- STANDARD: ``shard_precise(targets, column, value) -> str | None`` and
  ``shard_range(targets, column, bound: RangeBound) -> list[str]``
- COMPLEX: ``shard(targets, values: Mapping[str, Sequence], ranges: Mapping[str, RangeBound]) -> list[str]``
- HINT: ``shard(targets, values: Sequence) -> list[str]``

Precise routing must be a pure function of its arguments and range routing must widen, never narrow.
The instance is wrapped so the kernel sees the configured name and kind like any built-in algorithm.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from routing.algorithms.base import Algorithm
from routing.model import (
    ComplexShardingAlgorithm,
    HintShardingAlgorithm,
    RangeBound,
    StandardShardingAlgorithm,
)

_PROTOCOLS: dict[str, type] = {
    "STANDARD": StandardShardingAlgorithm,
    "COMPLEX": ComplexShardingAlgorithm,
    "HINT": HintShardingAlgorithm,
}


def load_class(path: str) -> type:
    """Import ``package.module:Class`` or ``package.module.Class``; raises ImportError/AttributeError."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"{path!r} is not 'package.module:Class'")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not isinstance(target, type):
        raise ImportError(f"{path!r} is not a class")
    return target


class _ClassBased(Algorithm):
    type_name: ClassVar[str] = "CLASS_BASED"

    def __init__(self, name: str, props: Mapping[str, Any], delegate: Any, *, file: str | None, key: str | None):
        super().__init__(name, props, file=file, key=key)
        self.delegate = delegate

    def __repr__(self) -> str:
        return f"CLASS_BASED({self.name!r}, {type(self.delegate).__module__}.{type(self.delegate).__qualname__})"


class ClassBasedStandard(_ClassBased):
    strategy_kind: ClassVar[str] = "standard"

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        result: str | None = self.delegate.shard_precise(targets, column, value)
        return result

    def shard_range(self, targets: Sequence[str], column: str, bound: RangeBound) -> list[str]:
        return list(self.delegate.shard_range(targets, column, bound))


class ClassBasedComplex(_ClassBased):
    strategy_kind: ClassVar[str] = "complex"

    def shard(
        self, targets: Sequence[str], values: Mapping[str, Sequence[Any]], ranges: Mapping[str, RangeBound]
    ) -> list[str]:
        return list(self.delegate.shard(targets, values, ranges))


class ClassBasedHint(_ClassBased):
    strategy_kind: ClassVar[str] = "hint"

    def shard(self, targets: Sequence[str], values: Sequence[Any]) -> list[str]:
        return list(self.delegate.shard(targets, values))


_WRAPPERS: dict[str, type[_ClassBased]] = {
    "STANDARD": ClassBasedStandard,
    "COMPLEX": ClassBasedComplex,
    "HINT": ClassBasedHint,
}


def create_class_based(
    name: str, props: Mapping[str, Any], *, file: str | None = None, key: str | None = None
) -> _ClassBased:
    helper = Algorithm(name, props, file=file, key=key)
    helper.type_name = "CLASS_BASED"  # type: ignore[misc]
    strategy = helper.prop_str("strategy").strip().upper()
    if strategy not in _PROTOCOLS:
        raise helper.config_error("strategy", f"strategy must be STANDARD, COMPLEX or HINT, got {strategy!r}")
    path = helper.prop_str("algorithmClassName").strip()
    try:
        cls = load_class(path)
    except (ImportError, AttributeError) as exc:
        raise helper.config_error("algorithmClassName", f"cannot load {path!r}: {exc}") from None
    try:
        instance = cls(dict(props))
    except Exception as exc:
        raise helper.config_error("algorithmClassName", f"{path}({{props}}) failed: {exc!r}") from None
    if not isinstance(instance, _PROTOCOLS[strategy]):
        raise helper.config_error(
            "algorithmClassName",
            f"{path} does not implement {_PROTOCOLS[strategy].__name__} (see routing.algorithms.class_based)",
        )
    return _WRAPPERS[strategy](name, props, instance, file=file, key=key)
