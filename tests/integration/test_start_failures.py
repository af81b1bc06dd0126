"""A data source that fails at start names the file it was read from and says why, within
connectionTimeoutMilliseconds (exit 3)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.sandbox.server import MariaDBServer

REPO = Path(__file__).resolve().parents[2]

_GLOBAL = "authority:\n  users: [{user: 'root@%', password: root}]\n"


def _database(name: str, port: int, database: str, password: str = "", timeout_ms: int = 30000) -> str:
    return (f"databaseName: {name}\ndataSources:\n  ds_0:\n    url: jdbc:mysql://127.0.0.1:{port}/{database}\n"
            f"    username: root\n    password: '{password}'\n    connectionTimeoutMilliseconds: {timeout_ms}\n")


def _serve(conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy", "serve", "--conf", str(conf), "--port", "0"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts TCP connections and never says a word."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for s in held:
        s.close()
    listener.close()


def test_the_failing_file_is_named_when_data_source_names_repeat(tmp_path: Path, mariadb: MariaDBServer) -> None:
    """Both files call their data source ds_0; the second has the wrong password."""
    mariadb.execute("CREATE DATABASE IF NOT EXISTS sf_good")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "global.yaml").write_text(_GLOBAL)
    (conf / "database-a.yaml").write_text(_database("a", mariadb.port, "sf_good", mariadb.password or ""))
    (conf / "database-b.yaml").write_text(_database("b", mariadb.port, "sf_good", "wrong-password"))
    out = _serve(conf)
    assert out.returncode == 3, out.stderr
    assert "Access denied" in out.stderr and f"(configured in {conf / 'database-b.yaml'})" in out.stderr, out.stderr


def test_a_server_that_never_greets_fails_within_the_timeout(tmp_path: Path, silent_server: int) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "global.yaml").write_text(_GLOBAL)
    (conf / "database-a.yaml").write_text(_database("a", silent_server, "x", timeout_ms=1500))
    out = _serve(conf)
    assert out.returncode == 3, out.stderr
    assert "no handshake within 1500 ms (connectionTimeoutMilliseconds)" in out.stderr, out.stderr
