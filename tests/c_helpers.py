"""The C helpers (merge._cframes, protocol._crowframes; docs/installation.md "Compiled parts") for tests that
compare them with the Python steps they mirror."""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest


def c_helper(name: str) -> Any:
    """Extension module `name`: skipped where it is not built (no C compiler at install), a failure where CI means to
    test it (.ci/run sets SHARDPROXY_EXPECT_COMPILED for both of its builds, which build the helpers)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("SHARDPROXY_EXPECT_COMPILED") in ("0", "1"):
            pytest.fail(f"{name} is not built (setup.py builds it where a C compiler and Python's headers are)")
        pytest.skip(f"{name} is not built here (no C compiler at install)")
