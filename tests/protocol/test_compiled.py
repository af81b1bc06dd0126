"""Which build of the mypyc-compiled modules (pyproject.toml [tool.shardproxy] mypyc) the tests run on.

.ci/run runs the suite on the pure-Python build and tests/protocol + tests/merge again on the compiled one;
SHARDPROXY_EXPECT_COMPILED says which build a run means to test, so that a build that fell back to pure
Python (or a stale compiled module left next to its source) cannot pass for the other."""

from __future__ import annotations

import importlib
import os
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPECT = os.environ.get("SHARDPROXY_EXPECT_COMPILED")


def _modules() -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        paths = tomllib.load(f)["tool"]["shardproxy"]["mypyc"]
    return [p.removesuffix(".py").replace("/", ".") for p in paths]


@pytest.mark.skipif(EXPECT not in ("0", "1"), reason="SHARDPROXY_EXPECT_COMPILED is not set")
@pytest.mark.parametrize("name", _modules())
def test_the_build_under_test(name: str) -> None:
    path = str(importlib.import_module(name).__file__)
    assert path.endswith(".so") == (EXPECT == "1"), path


def test_compiled_modules_exist() -> None:
    for name in _modules():
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name
