"""The sandbox is what every integration test stands on, so its promises are checked directly."""

from __future__ import annotations

from pathlib import Path

import pymysql
import pytest

from proxy.sandbox import MariaDBServer, SandboxUnavailableError, install, setup_replication, wait_for_replica
from tests.conftest import ServerFactory

ACCESS_DENIED = 1045


def test_server_accepts_password_over_tcp(mariadb: MariaDBServer) -> None:
    assert mariadb.host == "127.0.0.1"
    assert mariadb.port not in (0, 3306)
    conn = pymysql.connect(host="127.0.0.1", port=mariadb.port, user="root", password="root")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@character_set_server, CURRENT_USER()")
            version, charset, _user = cur.fetchone()
    finally:
        conn.close()
    assert "MariaDB" in version
    assert charset == "utf8mb4"


@pytest.mark.parametrize("password", ["wrong", ""])
def test_wrong_password_is_rejected(mariadb: MariaDBServer, password: str) -> None:
    with pytest.raises(pymysql.err.OperationalError) as info:
        mariadb.connect(password=password)
    assert info.value.args[0] == ACCESS_DENIED


def test_execute_returns_rows(mariadb: MariaDBServer) -> None:
    assert mariadb.execute("SELECT 1, 'a'") == [(1, "a")]
    assert mariadb.execute("DO 1") == []


def test_shards_are_separate_servers(mariadb_shards: list[MariaDBServer]) -> None:
    ds0, ds1 = mariadb_shards
    assert ds0.port != ds1.port
    assert ds0.server_id != ds1.server_id
    assert ds0.execute("SHOW DATABASES LIKE 'demo_ds_%'") == [("demo_ds_0",)]
    assert ds1.execute("SHOW DATABASES LIKE 'demo_ds_%'") == [("demo_ds_1",)]


def test_kill_and_restart_keep_port_and_data(mariadb_factory: ServerFactory) -> None:
    server = mariadb_factory(databases=["d"])
    port = server.port
    server.execute("CREATE TABLE t (id INT PRIMARY KEY)", database="d")
    server.execute("INSERT INTO t VALUES (1)", database="d")

    server.kill()
    assert not server.running
    with pytest.raises(pymysql.err.OperationalError):
        server.connect(connect_timeout=1)

    server.restart()
    assert server.port == port
    assert server.execute("SELECT id FROM t", database="d") == [(1,)]

    server.stop()
    server.stop()  # idempotent
    server.restart()
    assert server.execute("SELECT COUNT(*) FROM d.t") == [(1,)]


def test_cleanup_removes_everything(mariadb_factory: ServerFactory) -> None:
    server = mariadb_factory()
    pid = server.pid
    assert pid is not None
    server.cleanup()
    server.cleanup()
    assert not server.base_dir.exists()
    assert not Path(f"/proc/{pid}").exists() or b"mariadbd" not in Path(f"/proc/{pid}/cmdline").read_bytes()


def test_replication_copies_rows(mariadb_factory: ServerFactory) -> None:
    primary, replica = mariadb_factory.many(2, binlog=True)
    primary.execute("CREATE DATABASE r")
    primary.execute("CREATE TABLE r.t (id INT PRIMARY KEY, v VARCHAR(10))")
    primary.execute("INSERT INTO r.t VALUES (1, 'before')")

    setup_replication(primary, replica)
    primary.execute("INSERT INTO r.t VALUES (2, 'after')")
    wait_for_replica(primary, replica)

    assert replica.execute("SELECT id, v FROM r.t ORDER BY id") == [(1, "before"), (2, "after")]
    # The sandbox's own user setup must stay out of the binlog, or the replica would stop on it.
    conn = replica.connect(cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SLAVE STATUS")
            status = cur.fetchone()
    finally:
        conn.close()
    assert status["Slave_SQL_Running"] == "Yes", status["Last_SQL_Error"]
    assert status["Using_Gtid"] == "Slave_Pos"


def test_missing_binaries_give_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("SHARDPROXY_MARIADB_BINDIR", raising=False)
    monkeypatch.setattr(install, "SEARCH_DIRS", (str(tmp_path),))
    with pytest.raises(SandboxUnavailableError, match="apt-get install"):
        MariaDBServer.start()


def test_finds_mariadbd_outside_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Debian ships mariadbd in /usr/sbin, which CI's PATH may not include.
    real = install.find_binary("mariadbd")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("SHARDPROXY_MARIADB_BINDIR", raising=False)
    monkeypatch.setattr(install, "SEARCH_DIRS", (str(real.parent),))
    assert install.find_binary("mariadbd") == real
