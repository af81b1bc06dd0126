"""Replication between two sandbox servers: `setup_replication` (GTID-based) and `wait_for_replica`.

Only the tests of read/write splitting and replicas need it; it builds on a started `MariaDBServer`.
"""

from __future__ import annotations

import time
from typing import Any

from proxy.sandbox.install import SandboxError
from proxy.sandbox.server import MariaDBServer


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
