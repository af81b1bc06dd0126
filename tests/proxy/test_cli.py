"""The command line an operator uses: --version, configuration errors for people and for log collectors,
timestamps with their UTC offset."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy", *args], capture_output=True, text=True, timeout=60, cwd=REPO)


def test_version() -> None:
    out = _run("--version")
    assert out.returncode == 0
    assert re.fullmatch(r"shardproxy \d+\.\d+\.\d+\S*\n", out.stdout), out.stdout


def _bad_conf(tmp: Path) -> Path:
    (tmp / "global.yaml").write_text("authority:\n  users: [{user: 'root@%', password: root}]\nprops: {}\n")
    (tmp / "database-x.yaml").write_text("databaseName: x\ndataSources: {}\n")
    return tmp


def test_a_configuration_error_in_plain_text_and_as_json(tmp_path: Path) -> None:
    conf = _bad_conf(tmp_path)
    plain = _run("serve", "--conf", str(conf))
    assert plain.returncode == 2 and "configuration error" in plain.stderr and "database-x.yaml" in plain.stderr
    as_json = _run("--log-json", "serve", "--conf", str(conf))
    assert as_json.returncode == 2
    events = [json.loads(line) for line in as_json.stderr.splitlines() if line.startswith("{")]
    err = next(e for e in events if e["event"] == "configuration_error")
    assert err["level"] == "error" and "database-x.yaml" in err["error"]
    # the timestamp says which time zone it is in
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", err["timestamp"]), err["timestamp"]


def test_an_empty_or_missing_configuration_directory_stops_the_start(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = _run("serve", "--conf", str(empty))
    assert out.returncode == 2 and "has no files at all" in out.stderr, out.stderr
    only_global = tmp_path / "only-global"
    only_global.mkdir()
    (only_global / "global.yaml").write_text("props: {}\n")
    out = _run("serve", "--conf", str(only_global))
    assert out.returncode == 2 and "no database-*.yaml" in out.stderr, out.stderr
    out = _run("serve", "--conf", str(tmp_path / "missing"))
    assert out.returncode == 2 and "does not exist" in out.stderr, out.stderr


def test_settings_from_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "SHARDPROXY_CONF": str(tmp_path / "from-env"), "SHARDPROXY_LOG_JSON": "1"}
    out = subprocess.run([sys.executable, "-m", "proxy", "serve"], capture_output=True, text=True, timeout=60,
                         cwd=REPO, env=env)
    assert out.returncode == 2 and "from-env" in out.stderr
    assert any(line.startswith("{") and "configuration_error" in line for line in out.stderr.splitlines())


def test_global_options_after_the_command(tmp_path: Path) -> None:
    """`shardproxy serve --log-json` said "unrecognized arguments": the options work on either side."""
    out = _run("serve", "--conf", str(_bad_conf(tmp_path)), "--log-json", "--log-level", "DEBUG")
    assert out.returncode == 2, out.stderr
    assert any(json.loads(line)["event"] == "configuration_error"
               for line in out.stderr.splitlines() if line.startswith("{")), out.stderr
