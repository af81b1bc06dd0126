"""Throwaway local MariaDB servers for tests and ``shardproxy demo``.

Each server lives in its own temporary directory (datadir, socket, logs) and listens on a free
loopback port, so any number can run beside a system MariaDB on 3306 without touching it. The
settings trade durability for start-up speed and a small footprint: the data is disposable and a
2-core box should be able to run a handful of these at once.

Servers are stopped and their directories removed at interpreter exit. A run that dies without
running ``atexit`` (SIGKILL, a CI timeout) leaves its servers behind; the next process that starts a
sandbox in the default temp directory reaps them (see :func:`reap_orphans`).

The package: `install.py` (binaries, ports, datadirs, orphan reaping), `server.py` (`MariaDBServer`),
`replication.py` (primary/replica pairs). The names below are re-exported because most tests import them
from here.
"""

from proxy.sandbox.install import SandboxError, SandboxUnavailableError, find_binary, reap_orphans
from proxy.sandbox.replication import setup_replication, wait_for_replica
from proxy.sandbox.server import MariaDBServer, start_servers

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
