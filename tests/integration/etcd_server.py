"""A throwaway single-node etcd (Debian's `etcd` binary) for the cluster tests: its own data directory and
free ports; stop() and start() again keep the data (a registry outage and its return)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.integration.harness import free_port


def etcd_binary() -> str | None:
    return shutil.which("etcd") or next((p for p in ("/usr/bin/etcd", "/usr/sbin/etcd") if Path(p).exists()), None)


class EtcdServer:
    def __init__(self, data_dir: Path) -> None:
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError("etcd")
        self.binary = binary
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self, timeout: float = 30) -> EtcdServer:
        client = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        log = self._log = open(self.data_dir.parent / f"{self.data_dir.name}.log", "ab")
        self._proc = subprocess.Popen(
            [self.binary, "--name", "test", "--data-dir", str(self.data_dir), "--listen-client-urls", client,
             "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"test={peer}"],
            stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=1) as answer:
                    if b"true" in answer.read():
                        return self
            except OSError:
                pass
            if self._proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self._proc.returncode}")
            time.sleep(0.1)
        raise TimeoutError("etcd did not become healthy")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


def ensure_etcd() -> str:
    """The etcd binary; installed with apt-get when missing and possible (as .ci/run does), else the test
    is skipped, saying so."""
    binary = etcd_binary()
    if binary is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "etcd-server"], capture_output=True, timeout=600)
        binary = etcd_binary()
    if binary is None:
        pytest.skip("etcd is not installed and cannot be installed here (apt-get install etcd-server)")
    return binary


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    """A fresh single-node etcd for one test (its own data directory and ports)."""
    ensure_etcd()
    server = EtcdServer(tmp_path / "etcd-data").start()
    yield server
    server.stop()
    # its data (hundreds of MB over a run) must not stay in pytest's temp directory, which keeps the last runs
    shutil.rmtree(tmp_path / "etcd-data", ignore_errors=True)
