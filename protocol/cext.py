"""Loading the optional C helpers: `protocol._crowframes`, `merge._cframes`.

Why one place: each is an optional extension (setup.py builds it where a C compiler and Python's headers are), so
its Python module must run without it, and `SHARDPROXY_NO_C=1` must switch every one of them off alike (benchmarks
measure the Python steps that way; tests compare both forms).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["load_c"]


def load_c(name: str) -> Any:
    """The extension module `name` when it was built and C helpers are not switched off (SHARDPROXY_NO_C=1); None:
    the caller's Python steps, which define what it computes."""
    if os.environ.get("SHARDPROXY_NO_C") == "1":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
