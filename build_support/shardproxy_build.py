"""setuptools' build backend, plus mypy as a build requirement when SHARDPROXY_MYPYC=1 (see setup.py).

Why: build requirements in pyproject.toml are static, and mypy (with mypyc) is needed only for the
optional compiled build; the default build stays setuptools alone, so it works without a compiler.
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import build_meta as _meta
from setuptools.build_meta import *  # noqa: F403  (the PEP 517/660 hooks, unchanged)

MYPY = "mypy==1.19.1"


def _extra() -> list[str]:
    return [MYPY] if os.environ.get("SHARDPROXY_MYPYC") == "1" else []


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_meta.get_requires_for_build_wheel(config_settings), *_extra()]


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_meta.get_requires_for_build_editable(config_settings), *_extra()]
