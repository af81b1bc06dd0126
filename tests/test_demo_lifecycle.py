"""`shardproxy demo` as a person runs it: a busy port is reported at once; Ctrl-C, SIGTERM and SIGHUP (the
terminal closed) at any moment, before or after it listens, leave no MariaDB process and no temporary
directory behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from proxy.sandbox import find_binary

REPO = Path(__file__).resolve().parents[1]

try:
    find_binary("mariadbd", "mysqld")
except Exception:
    pytest.skip("mariadbd is not installed", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(tmp: Path, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-m", "proxy", "--log-level", "WARNING", "demo", "--port", str(port)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _rest_of(proc: subprocess.Popen[str]) -> str:
    """What the demo printed after the lines the test read (for the message of a failed assertion)."""
    assert proc.stderr is not None
    return proc.stderr.read()[-4000:]


def _wait_for(proc: subprocess.Popen[str], needle: str, timeout: float = 120) -> str:
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        if needle in line:
            return seen
    raise AssertionError(f"never saw {needle!r}: {seen}")


def _mariadbd_under(tmp: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "mariadbd" in cmdline and str(tmp) in cmdline:
            pids.append(int(proc.name))
    return pids


def _assert_clean(tmp: Path) -> None:
    deadline = time.monotonic() + 10
    while _mariadbd_under(tmp) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _mariadbd_under(tmp), "mariadbd left running"
    left = [p.name for p in tmp.iterdir()]
    assert not left, f"left in the temporary directory: {left}"


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT], ids=["SIGHUP", "SIGTERM", "SIGINT"])
def test_a_signal_after_it_is_ready_removes_everything(tmp_path: Path, sig: signal.Signals) -> None:
    port = _free_port()
    proc = _start(tmp_path, port)
    try:
        _wait_for(proc, "is ready")
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        proc.send_signal(sig)
        assert proc.wait(60) == 0, _rest_of(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_clean(tmp_path)


def _servers_starting(_port: int) -> None:
    time.sleep(1.5)  # in the middle of installing and starting the servers


def _schema_loading(port: int) -> None:
    """The proxy listens before the demo loads its schema through it: a signal then stops the proxy (its own
    handlers) under the loading thread (the demo exited 1 with the loader's 2013, or waited for ever on a
    connection nobody answered)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.005)


@pytest.mark.parametrize("moment", [_servers_starting, _schema_loading], ids=["servers-start", "schema-loads"])
def test_sighup_while_it_starts_removes_everything(tmp_path: Path, moment: Callable[[int], None]) -> None:
    port = _free_port()
    proc = _start(tmp_path, port)
    try:
        _wait_for(proc, "starting three")
        moment(port)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(60) == 0, _rest_of(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_clean(tmp_path)


def test_a_busy_port_is_reported_at_once(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        proc = _start(tmp_path, port)
        try:
            _out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert time.monotonic() - started < 10
        assert proc.returncode == 4, err
        assert f"cannot listen on 127.0.0.1:{port}" in err and "--port" in err
    _assert_clean(tmp_path)
