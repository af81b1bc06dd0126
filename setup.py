"""The optional mypyc build of the hot pure-Python modules (issue 15), as sqlglot ships sqlglotc.

Everything else is in pyproject.toml. By default nothing is compiled: `pip install -e .` needs no compiler
and installs pure Python. With SHARDPROXY_MYPYC=1 the modules listed under [tool.shardproxy] mypyc in
pyproject.toml are compiled from the same source (build_support/shardproxy_build.py then adds mypy to the build's
requirements); a module compiled this way is imported instead of its .py, and the .py stays the fallback.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def compiled_modules() -> list[str]:
    with (HERE / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["tool"]["shardproxy"]["mypyc"])


def ext_modules() -> list[object]:
    if os.environ.get("SHARDPROXY_MYPYC") != "1":
        return []
    try:
        from mypyc.build import mypycify  # a build requirement with SHARDPROXY_MYPYC=1 (build_support)
    except ImportError:
        # setuptools runs this file once before the build requirements are installed (to ask for more of
        # them); without mypyc at build time (e.g. --no-build-isolation) the build is pure Python
        print("setup.py: SHARDPROXY_MYPYC=1 but mypyc is not importable: nothing compiled", file=sys.stderr)
        return []

    # only the listed modules are compiled (and type-checked as mypyc needs); what they import is read for
    # its types without being checked itself
    return list(mypycify(["--follow-imports=silent", "--ignore-missing-imports", *compiled_modules()],
                         opt_level="3"))


setup(ext_modules=ext_modules())
