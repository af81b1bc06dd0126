"""The first mistakes a user makes in `conf/`, each stopping the start (exit 2) with the file, the line, the
key and what to do: a misspelt key used to be a warning, and what it configured (a binding, a strategy, a
prop) was silently dropped."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# (file in the shipped conf/, text replaced, its replacement, what the error says)
CASES = [
    ("database-sharding.yaml", "  bindingTables:", "  bindingTablez:",
     "database-sharding.yaml, line {line}: rules[0].bindingTablez: unknown key 'bindingTablez': "
     "did you mean bindingTables?"),
    ("database-sharding.yaml", "      actualDataNodes: ds_${0..1}.t_order_${0..1}",
     "      actualDataNode: ds_${0..1}.t_order_${0..1}",
     "database-sharding.yaml, line {line}: rules[0].tables.t_order.actualDataNode: unknown key 'actualDataNode': "
     "did you mean actualDataNodes?"),
    ("database-sharding.yaml", "          shardingColumn: order_id\n          shardingAlgorithmName: t_order_inline",
     "          shardingColum: order_id\n          shardingAlgorithmName: t_order_inline",
     "database-sharding.yaml, line {line}: rules[0].tables.t_order.tableStrategy.standard.shardingColum: "
     "unknown key 'shardingColum': did you mean shardingColumn?"),
    ("database-sharding.yaml", "    maxPoolSize: 50\n    minPoolSize: 1\n  ds_1:",
     "    maxPoolSise: 50\n    minPoolSize: 1\n  ds_1:",
     "database-sharding.yaml, line {line}: dataSources.ds_0.maxPoolSise: unknown key 'maxPoolSise': "
     "did you mean maxPoolSize?"),
    ("database-sharding.yaml", "databaseName: sharding_db", "databasename: sharding_db",
     "database-sharding.yaml, line {line}: databasename: unknown key 'databasename': did you mean databaseName?"),
    ("global.yaml", "\nprops:", "\nprop:", "global.yaml, line {line}: prop: unknown key 'prop': did you mean props?"),
    ("global.yaml", "  sql-show:", "  sql-shw:",
     "global.yaml, line {line}: props.sql-shw: unknown key 'sql-shw': did you mean sql-show?"),
]


def _line_of(text: str, fragment: str) -> int:
    return text[: text.index(fragment.lstrip("\n"), text.index(fragment))].count("\n") + 1


@pytest.mark.parametrize(("file", "old", "new", "message"), CASES, ids=[c[2].strip().split(":")[0] for c in CASES])
def test_a_misspelt_key_stops_the_start(tmp_path: Path, file: str, old: str, new: str, message: str) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(REPO / "conf", conf)
    text = (conf / file).read_text()
    assert text.count(old) >= 1, f"the shipped {file} changed: update this case"
    (conf / file).write_text(text.replace(old, new, 1))
    out = subprocess.run([sys.executable, "-m", "proxy", "serve", "--conf", str(conf)], capture_output=True,
                         text=True, timeout=60, cwd=REPO)
    assert out.returncode == 2, out.stderr
    expected = message.format(line=_line_of(text, old))
    assert f"shardproxy: configuration error: {conf / expected}" in out.stderr, out.stderr
