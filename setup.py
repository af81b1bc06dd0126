"""The compiled parts: the C helpers of merge.frames and protocol.rowframes, and the optional mypyc build
of the hot pure-Python modules, as sqlglot ships sqlglotc.

Everything else is in pyproject.toml. By default only merge/_cframes.c and protocol/_crowframes.c are compiled, and
only when a C compiler and Python's headers are there (optional extensions: `pip install -e .` goes on without them,
and those modules run their Python steps). With SHARDPROXY_MYPYC=1 the modules listed under [tool.shardproxy] mypyc
in pyproject.toml are compiled from the same source too (build_support/shardproxy_build.py then adds mypy to the
build's requirements); a module compiled this way is imported instead of its .py, and the .py stays the fallback.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent


def compiled_modules() -> list[str]:
    with (HERE / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["tool"]["shardproxy"]["mypyc"])


def c_helpers() -> list[object]:
    """merge._cframes and protocol._crowframes, the C form of merge.frames' and protocol.rowframes' per-row steps:
    built whenever a C compiler and Python's headers are there, and optional: without them the install goes on and
    those modules run their Python steps."""
    sources = {"merge._cframes": "merge/_cframes.c", "protocol._crowframes": "protocol/_crowframes.c"}
    return [Extension(name, [path], optional=True, extra_compile_args=["-O2"]) for name, path in sources.items()]


def ext_modules() -> list[object]:
    if os.environ.get("SHARDPROXY_MYPYC") != "1":
        return c_helpers()
    try:
        from mypyc.build import mypycify  # a build requirement with SHARDPROXY_MYPYC=1 (build_support)
    except ImportError:
        # setuptools runs this file once before the build requirements are installed (to ask for more of
        # them); without mypyc at build time (e.g. --no-build-isolation) the build is pure Python
        print("setup.py: SHARDPROXY_MYPYC=1 but mypyc is not importable: nothing compiled", file=sys.stderr)
        return []

    # only the listed modules are compiled (and type-checked as mypyc needs); what they import is read for
    # its types without being checked itself
    return [*c_helpers(), *mypycify(["--follow-imports=silent", "--ignore-missing-imports", *compiled_modules()],
                                    opt_level="3")]


setup(ext_modules=ext_modules())
