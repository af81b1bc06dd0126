"""`protocol/` is sans-IO: no module imports asyncio, socket, or anything that does I/O."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (ROOT / "protocol").glob("*.py") if p.stem != "__init__")
FORBIDDEN = {"asyncio", "socket", "ssl", "selectors", "select", "threading", "aiomysql", "pymysql", "proxy",
             "uvloop"}


@pytest.mark.parametrize("module", MODULES)
def test_source_imports_nothing_io(module: str) -> None:
    tree = ast.parse((ROOT / "protocol" / f"{module}.py").read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN


def test_importing_every_module_loads_no_io_module() -> None:
    code = (
        "import sys, json\n"
        f"for m in {MODULES!r}: __import__('protocol.' + m)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in json.loads(out.stdout)}
    assert not loaded & {"asyncio", "socket", "ssl", "selectors", "aiomysql", "pymysql", "proxy", "uvloop"}
