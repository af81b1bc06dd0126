"""One throwaway MariaDB server (`MariaDBServer`): start, stop, restart, clean up; `start_servers` starts several.

Split from the sandbox's groundwork (`install.py`: binaries, ports, datadirs, orphan reaping) so this module
reads as the life of a server process; the registry here is what the interpreter's exit stops.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import pymysql

from proxy.sandbox.install import (
    _SERVER_ARGS,
    DIR_PREFIX,
    SandboxError,
    _free_port,
    _install_datadir,
    _template_datadir,
    find_binary,
    reap_orphans,
)

__all__ = ["MariaDBServer", "start_servers"]


_BINLOG_ARGS: tuple[str, ...] = (
    "--log-bin=mysql-bin",
    "--binlog-format=ROW",
    "--log-slave-updates",
    "--sync-binlog=0",
)

_ROOT_HOSTS = ("localhost", "127.0.0.1", "::1", "%")
_ER_ACCESS_DENIED = 1045
_MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux; leave room for the terminator.
_PORT_ATTEMPTS = 5


# --------------------------------------------------------------------------------------------------
# the registry of live servers


_registry_lock = threading.Lock()
_live: set[MariaDBServer] = set()
_server_ids = itertools.count(1)
_reaped = False


@atexit.register
def _cleanup_all() -> None:
    with _registry_lock:
        servers = list(_live)
    for server in servers:
        with contextlib.suppress(Exception):
            server.cleanup()


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} not readable)"
    return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------------------------------
# server


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is in the stopped state (`T` in /proc; True where /proc cannot tell)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # the thread ended
            continue
        state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
        if state not in (b"T", b"t"):
            return False
    return True


class MariaDBServer:
    """One disposable MariaDB server on 127.0.0.1 with real password authentication.

    Create it with :meth:`start`; use it as a context manager, or call :meth:`cleanup`, to stop it
    and delete its files (interpreter exit does that too).
    """

    host: str
    port: int
    user: str
    password: str
    server_id: int
    binlog: bool
    base_dir: Path
    datadir: Path
    tmpdir: Path
    socket_path: Path
    error_log: Path

    def __init__(
        self,
        *,
        base_dir: Path,
        password: str,
        server_id: int,
        binlog: bool,
        extra_args: Sequence[str],
    ) -> None:
        """Prepare paths only; :meth:`start` is the public way in."""
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "root"
        self.password = password
        self.server_id = server_id
        self.binlog = binlog
        self.base_dir = base_dir
        self.datadir = base_dir / "data"
        # A private tmpdir: with the shared /tmp, concurrent mariadb-install-db runs here failed now
        # and then on a vanished temporary table ("Unknown table 'mysql.tmp_user_sys'").
        self.tmpdir = base_dir / "tmp"
        self.tmpdir.mkdir(exist_ok=True)
        self.error_log = base_dir / "error.log"
        self.pid_file = base_dir / "mysqld.pid"
        self._extra_args = tuple(extra_args)
        self._proc: subprocess.Popen[bytes] | None = None
        self._password_set = False
        self._socket_dir: Path | None = None
        self.socket_path = base_dir / "mysqld.sock"
        if len(str(self.socket_path)) > _MAX_SOCKET_PATH:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="spsock-"))
            self.socket_path = self._socket_dir / "mysqld.sock"

    # -- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        *,
        password: str = "root",
        server_id: int | None = None,
        binlog: bool = False,
        base_dir: Path | None = None,
        databases: Iterable[str] = (),
        extra_args: Sequence[str] = (),
        timeout: float = 60.0,
    ) -> MariaDBServer:
        """Initialise a fresh datadir, start the server and wait until root can log in.

        ``server_id`` defaults to a number unique within this process, so any two sandboxes can be
        paired by :func:`setup_replication`. ``binlog`` turns on the row-based binary log a
        replication primary needs. ``databases`` are created on this server only: setup runs with
        ``sql_log_bin=0`` so it never replicates (a replica set up later would otherwise replay
        ``CREATE USER`` and stop on a duplicate). ``extra_args`` go to mariadbd last, so they win.
        """
        mariadbd = find_binary("mariadbd", "mysqld")
        install_db = find_binary("mariadb-install-db", "mysql_install_db")
        global _reaped
        if base_dir is None and not _reaped:
            _reaped = True
            with contextlib.suppress(OSError):
                reap_orphans()
        parent = Path(base_dir) if base_dir is not None else None
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=parent))
        (path / "owner.pid").write_text(f"{os.getpid()}\n")
        server = cls(
            base_dir=path,
            password=password,
            server_id=server_id if server_id is not None else next(_server_ids),
            binlog=binlog,
            extra_args=extra_args,
        )
        with _registry_lock:
            _live.add(server)
        try:
            server._install(install_db)
            server._launch(mariadbd, timeout=timeout, new_port=True)
            server._bootstrap(list(databases))
        except BaseException:
            server.cleanup()
            raise
        return server

    def _install(self, install_db: Path) -> None:
        if self._extra_args:
            # Options such as --innodb-page-size or --lower-case-table-names must be in force when
            # the system tables are created, so such a server cannot share the template.
            _install_datadir(install_db, self.base_dir, self.datadir, self._extra_args)
        else:
            shutil.copytree(_template_datadir(install_db), self.datadir, symlinks=True)

    def _command(self, mariadbd: Path) -> list[str]:
        args = [
            str(mariadbd),
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--tmpdir={self.tmpdir}",
            f"--socket={self.socket_path}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.error_log}",
            f"--server-id={self.server_id}",
            "--relay-log=relay-bin",  # default name embeds the hostname
            *_SERVER_ARGS,
        ]
        if self.binlog:
            args.extend(_BINLOG_ARGS)
        if os.geteuid() == 0:
            args.append("--user=root")  # mariadbd refuses to run as root otherwise
        args.extend(self._extra_args)
        return args

    def _launch(self, mariadbd: Path, *, timeout: float, new_port: bool) -> None:
        attempts = _PORT_ATTEMPTS if new_port else 1
        for attempt in range(attempts):
            if new_port:
                self.port = _free_port()
            log_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
            self._proc = subprocess.Popen(
                self._command(mariadbd),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
            try:
                self._wait_ready(timeout)
                return
            except SandboxError:
                log = self._log_since(log_offset)
                port_taken = "Address already in use" in log or "Bind on TCP/IP port" in log
                if port_taken and attempt + 1 < attempts:
                    self._reap_process()
                    continue
                self._reap_process()
                raise

    def _log_since(self, offset: int) -> str:
        try:
            with self.error_log.open("rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        password = self.password if self._password_set else ""
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if (rc := self._proc.poll()) is not None:
                raise SandboxError(
                    f"mariadbd exited with code {rc} before accepting connections on port {self.port}; "
                    f"tail of {self.error_log}:\n{_tail(self.error_log)}"
                )
            try:
                conn = pymysql.connect(
                    host=self.host, port=self.port, user=self.user, password=password, connect_timeout=2
                )
            except pymysql.err.OperationalError as exc:
                if exc.args and exc.args[0] == _ER_ACCESS_DENIED:
                    raise SandboxError(
                        f"mariadbd on port {self.port} is up but rejects {self.user!r} with the sandbox "
                        f"password; was it changed? ({exc})"
                    ) from exc
                last_error = exc
                time.sleep(0.05)
                continue
            conn.close()
            return
        raise SandboxError(
            f"mariadbd did not accept connections on {self.host}:{self.port} within {timeout:.0f}s "
            f"(last error: {last_error}); tail of {self.error_log}:\n{_tail(self.error_log)}"
        )

    def _bootstrap(self, databases: list[str]) -> None:
        conn = pymysql.connect(host=self.host, port=self.port, user=self.user, password="", autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")
                # mariadb-install-db also creates root@<hostname>, which --skip-name-resolve ignores
                # (with a warning) and which ALTER USER then cannot find; drop it from the tables.
                cur.execute("DELETE FROM mysql.global_priv WHERE User = 'root' AND Host NOT IN %s", (_ROOT_HOSTS,))
                cur.execute("DELETE FROM mysql.proxies_priv WHERE Host NOT IN %s", (_ROOT_HOSTS,))
                cur.execute("FLUSH PRIVILEGES")
                for host in _ROOT_HOSTS:
                    cur.execute("CREATE USER IF NOT EXISTS 'root'@%s", (host,))
                    cur.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, self.password))
                    cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@%s WITH GRANT OPTION", (host,))
                for db in databases:
                    cur.execute(f"CREATE DATABASE IF NOT EXISTS {_quote_ident(db)}")
                cur.execute("FLUSH PRIVILEGES")
        finally:
            conn.close()
        self._password_set = True

    @property
    def running(self) -> bool:
        """True while the server process is alive (it may still be starting or shutting down)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id of the running server, for tests that want to signal it themselves."""
        return self._proc.pid if self.running and self._proc is not None else None

    def _reap_process(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._proc = None

    def stop(self, timeout: float = 30.0) -> None:
        """Shut down cleanly (SIGTERM); SIGKILL if it takes longer than ``timeout``. Idempotent."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def kill(self) -> None:
        """SIGKILL the server to simulate a crash; :meth:`restart` then runs crash recovery."""
        self._reap_process()

    def freeze(self, timeout: float = 5.0) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing (a hung host, a network stall). Returns once
        every thread of the server is stopped: `kill` returns before they are, and a thread already running (the
        one that answers a connection, woken by a command in the meantime) may answer once more (seen under load:
        a test's statement answered after the freeze)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        pid = self._proc.pid
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not _all_threads_stopped(pid) and time.monotonic() < deadline:
            time.sleep(0.005)

    def thaw(self) -> None:
        """SIGCONT after :meth:`freeze`."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGCONT)

    def restart(self, timeout: float = 60.0) -> None:
        """Start again on the same port and datadir, so clients and proxy configs stay valid.

        Stops the server first if it is running. Fails if someone else took the port meanwhile.
        """
        if not self.base_dir.exists():
            raise SandboxError(f"cannot restart {self!r}: its directory was removed by cleanup()")
        self.stop()
        self._launch(find_binary("mariadbd", "mysqld"), timeout=timeout, new_port=False)

    def cleanup(self) -> None:
        """Stop the server and delete its directory. Idempotent."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            if self._socket_dir is not None:
                shutil.rmtree(self._socket_dir, ignore_errors=True)
            with _registry_lock:
                _live.discard(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<MariaDBServer {self.host}:{self.port} server_id={self.server_id} {state} {self.base_dir}>"

    # -- client helpers ----------------------------------------------------------------------------

    def connect(self, database: str | None = None, **kwargs: Any) -> pymysql.connections.Connection[Any]:
        """Open a PyMySQL connection as root; autocommit is on unless ``autocommit=False`` is given."""
        kwargs.setdefault("autocommit", True)
        kwargs.setdefault("connect_timeout", 5)
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=kwargs.pop("user", self.user),
            password=kwargs.pop("password", self.password),
            database=database,
            **kwargs,
        )

    def execute(self, sql: str, database: str | None = None, *, args: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement on a fresh autocommit connection and return its rows (``[]`` if none).

        ``args`` are PyMySQL parameters (``%s`` placeholders), so values need no quoting by hand.
        """
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall()) if cur.description else []
        finally:
            conn.close()

    def jdbc_url(self, database: str) -> str:
        """The data source URL for a ShardingSphere-style config pointing at this server."""
        return f"jdbc:mysql://{self.host}:{self.port}/{database}?useSSL=false"


def _quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# --------------------------------------------------------------------------------------------------
# several servers


def start_servers(n: int, **kwargs: Any) -> list[MariaDBServer]:
    """Start ``n`` servers concurrently (most of a start is waiting on I/O and on mariadbd).

    Takes the keyword arguments of :meth:`MariaDBServer.start` except ``server_id`` (each server
    gets a unique one). If any server fails, the ones that did start are cleaned up and the first
    error is raised.
    """
    if "server_id" in kwargs:
        raise TypeError("start_servers() assigns unique server ids itself; do not pass server_id")
    if n <= 0:
        return []
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="mariadb-sandbox") as pool:
        # Ids are drawn here, not in the threads, so they follow list order.
        futures = [pool.submit(MariaDBServer.start, server_id=next(_server_ids), **kwargs) for _ in range(n)]
    servers: list[MariaDBServer] = []
    errors: list[BaseException] = []
    for fut in futures:
        if (exc := fut.exception()) is not None:
            errors.append(exc)
        else:
            servers.append(fut.result())
    if errors:
        for s in servers:
            s.cleanup()
        raise errors[0]
    return servers


