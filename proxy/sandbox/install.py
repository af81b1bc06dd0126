"""What a sandbox server needs before it starts: the MariaDB binaries, a free port, a datadir.

Also the sandbox's errors and `reap_orphans`, which removes the directories of sandboxes whose owner died.
Kept apart from `server.py` so the server's life cycle is not buried under the set-up it builds on.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

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


class SandboxError(RuntimeError):
    """A sandbox server could not be started, reached or configured."""


class SandboxUnavailableError(SandboxError):
    """The MariaDB binaries are not installed; the message says how to install them."""


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
