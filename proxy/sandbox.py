"""Throwaway local MariaDB servers for tests and ``shardproxy demo``.

Each server lives in its own temporary directory (datadir, socket, logs) and listens on a free
loopback port, so any number can run beside a system MariaDB on 3306 without touching it. The
settings trade durability for start-up speed and a small footprint: the data is disposable and a
2-core box should be able to run a handful of these at once.

Servers are stopped and their directories removed at interpreter exit. A run that dies without
running ``atexit`` (SIGKILL, a CI timeout) leaves its servers behind; the next process that starts a
sandbox in the default temp directory reaps them (see :func:`reap_orphans`).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import signal
import socket
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

__all__ = [
    "MariaDBServer",
    "SandboxError",
    "SandboxUnavailableError",
    "find_binary",
    "reap_orphans",
    "setup_replication",
    "start_servers",
    "wait_for_replica",
]

DIR_PREFIX = "shardproxy-mariadb-"
"""Prefix of every sandbox directory; :func:`reap_orphans` only ever looks at these."""

SEARCH_DIRS: tuple[str, ...] = ("/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin")
"""Debian puts ``mariadbd`` in /usr/sbin, which is not on a normal user's (or CI's) PATH."""

# Small, fast and disposable. Passed to mariadb-install-db too, so the redo log is created at the
# size the server will use instead of being resized on first start.
_SERVER_ARGS: tuple[str, ...] = (
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=16M",
    "--innodb-log-buffer-size=2M",
    "--innodb-flush-log-at-trx-commit=2",
    "--innodb-doublewrite=0",
    # Native AIO reserves kernel aio slots per instance; several sandboxes can exhaust them.
    "--innodb-use-native-aio=0",
    "--innodb-buffer-pool-dump-at-shutdown=0",
    "--innodb-buffer-pool-load-at-startup=0",
    "--aria-pagecache-buffer-size=8M",
    "--key-buffer-size=1M",
    "--skip-performance-schema",
    "--skip-name-resolve",
    "--max-connections=500",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
)

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


class SandboxError(RuntimeError):
    """A sandbox server could not be started, reached or configured."""


class SandboxUnavailableError(SandboxError):
    """The MariaDB binaries are not installed; the message says how to install them."""


# --------------------------------------------------------------------------------------------------
# binaries, ports, registry


def find_binary(*names: str) -> Path:
    """Locate the first of ``names`` on PATH or in the usual system directories.

    ``SHARDPROXY_MARIADB_BINDIR`` takes precedence so a developer can point at a tarball install.
    """
    dirs: list[str] = []
    if env_dir := os.environ.get("SHARDPROXY_MARIADB_BINDIR"):
        dirs.append(env_dir)
    dirs.extend(os.environ.get("PATH", "").split(os.pathsep))
    dirs.extend(SEARCH_DIRS)
    for name in names:
        for d in dirs:
            if d and os.access(candidate := Path(d) / name, os.X_OK) and candidate.is_file():
                return candidate
    raise SandboxUnavailableError(
        f"cannot find {' or '.join(names)} on PATH or in {', '.join(SEARCH_DIRS)}; "
        "install the MariaDB server (Debian/Ubuntu: apt-get install -y mariadb-server) "
        "or set SHARDPROXY_MARIADB_BINDIR"
    )


_port_lock = threading.Lock()
_handed_out_ports: set[int] = set()


def _free_port() -> int:
    """Ask the kernel for an unused loopback port.

    The port is released before mariadbd binds it, so another process may grab it in between; the
    caller retries on "address in use". Remembering what we handed out stops two threads of this
    process from racing for the same port.
    """
    with _port_lock:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port: int = s.getsockname()[1]
            if port not in _handed_out_ports:
                _handed_out_ports.add(port)
                return port
    raise SandboxError("could not find a free loopback port")


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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphans(parent: Path | None = None) -> int:
    """Kill and remove sandboxes whose owning Python process is gone; return how many.

    Only directories named ``shardproxy-mariadb-*`` that record a dead owner pid are touched, and a
    server process is killed only if its command line names that very directory, so neither other
    users' MariaDB servers nor sandboxes of live test runs are affected.
    """
    parent = Path(parent or tempfile.gettempdir())
    reaped = 0
    for d in parent.glob(DIR_PREFIX + "*"):
        try:
            owner = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if _pid_alive(owner):
            continue
        with contextlib.suppress(OSError, ValueError):
            pid = int((d / "mysqld.pid").read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if str(d) in cmdline:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(d, ignore_errors=True)
        reaped += 1
    return reaped


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} not readable)"
    return "\n".join(text.splitlines()[-lines:])


def _install_datadir(install_db: Path, work_dir: Path, datadir: Path, extra_args: Sequence[str] = ()) -> None:
    args = [
        str(install_db),
        "--no-defaults",
        f"--datadir={datadir}",
        f"--tmpdir={work_dir / 'tmp'}",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        "--skip-name-resolve",
        *_SERVER_ARGS,
        *extra_args,
    ]
    if os.geteuid() == 0:
        args.append("--user=root")
    (work_dir / "tmp").mkdir(exist_ok=True)
    log = work_dir / "install.log"
    with log.open("wb") as out:
        rc = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    if rc != 0:
        # The script ends with a long generic help text; the actual error comes first.
        head = "\n".join(log.read_text(errors="replace").splitlines()[:20])
        raise SandboxError(f"mariadb-install-db failed with exit code {rc}; start of {log}:\n{head}")


_template_lock = threading.Lock()
_template: Path | None = None


def _template_datadir(install_db: Path) -> Path:
    """Return a pristine datadir made once per process, for servers to copy.

    mariadb-install-db takes most of a server's start time; copying its result is about ten times
    faster. Copying a cleanly shut down datadir is a supported way to clone a MariaDB server.
    """
    global _template
    with _template_lock:
        if _template is None or not _template.exists():
            work = Path(tempfile.mkdtemp(prefix=DIR_PREFIX + "template-"))
            (work / "owner.pid").write_text(f"{os.getpid()}\n")
            try:
                _install_datadir(install_db, work, work / "data")
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
            atexit.register(shutil.rmtree, work, ignore_errors=True)
            _template = work
        return _template / "data"


# --------------------------------------------------------------------------------------------------
# server


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

    def freeze(self) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing (a hung host, a network stall)."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGSTOP)

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
# several servers, replication


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


def setup_replication(primary: MariaDBServer, replica: MariaDBServer, timeout: float = 30.0) -> None:
    """Make ``replica`` follow ``primary`` by GTID and wait until both replication threads run.

    The replica starts from an empty ``gtid_slave_pos``, i.e. it replays the primary's whole binary
    log, so rows written before this call are copied too. ``primary`` must be started with
    ``binlog=True``.
    """
    if primary.server_id == replica.server_id:
        raise SandboxError(f"primary and replica share server_id {primary.server_id}; replication needs distinct ids")
    if not primary.execute("SELECT @@log_bin")[0][0]:
        raise SandboxError(f"{primary!r} has no binary log; start it with binlog=True")
    conn = replica.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("STOP SLAVE")
            cur.execute(
                "CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, "
                "MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos",
                (primary.host, primary.port, primary.user, primary.password),
            )
            cur.execute("START SLAVE")
            deadline = time.monotonic() + timeout
            status: dict[str, Any] = {}
            while time.monotonic() < deadline:
                cur.execute("SHOW SLAVE STATUS")
                row = cur.fetchone()
                assert cur.description is not None and row is not None
                status = dict(zip((d[0] for d in cur.description), row, strict=True))
                if status["Slave_IO_Running"] == "Yes" and status["Slave_SQL_Running"] == "Yes":
                    return
                if status["Last_SQL_Error"] or (status["Slave_IO_Running"] == "No" and status["Last_IO_Error"]):
                    break
                time.sleep(0.05)
    finally:
        conn.close()
    raise SandboxError(
        f"replication {primary.port} -> {replica.port} did not start: "
        f"IO={status.get('Slave_IO_Running')} SQL={status.get('Slave_SQL_Running')} "
        f"io_error={status.get('Last_IO_Error')!r} sql_error={status.get('Last_SQL_Error')!r}"
    )


def wait_for_replica(primary: MariaDBServer, replica: MariaDBServer, timeout: float = 30.0) -> None:
    """Block until ``replica`` has applied everything ``primary`` had written when this was called.

    Tests use it instead of sleeping before they read from the replica.
    """
    pos = primary.execute("SELECT @@gtid_binlog_pos")[0][0]
    if not pos:
        return
    result = replica.execute("SELECT MASTER_GTID_WAIT(%s, %s)", args=(pos, timeout))[0][0]
    if result != 0:
        status = replica.execute("SHOW SLAVE STATUS")
        raise SandboxError(f"replica on port {replica.port} did not reach GTID {pos} in {timeout}s: {status}")
