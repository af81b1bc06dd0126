"""props.proxy-state-directory: with conf/ read-only (as the compose file mounts it), DistSQL changes and the XA
log go to the state directory, and what DistSQL wrote there is read back at the next start."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import start_proxy, write_conf

RULES = """\
- !SHARDING
  tables:
    t_s:
      actualDataNodes: ds_${0..1}.t_s
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: m}}
  shardingAlgorithms:
    m: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""
NEW_RULE = (
    "CREATE SHARDING TABLE RULE t_new (STORAGE_UNITS(ds_0,ds_1), SHARDING_COLUMN=id, "
    "TYPE(NAME='MOD', PROPERTIES('sharding-count'=2)))"
)
_NAMES = itertools.count()


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """`directory` and its files read-only for this process (chmod; as root, which chmod does not stop, the
    immutable attribute too), as a read-only volume is."""
    paths = [directory, *directory.iterdir()]
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)
    immutable = (
        os.geteuid() == 0 and subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True).returncode == 0
    )
    try:
        probe = directory / ".probe"
        try:
            probe.write_text("")
        except OSError:
            pass
        else:
            probe.unlink()
            pytest.skip("this machine cannot make a directory read-only for this user (root without chattr)")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=False)
        for path in paths:
            path.chmod(0o755 if path.is_dir() else 0o644)


def _conf(servers: list[MariaDBServer], tmp_path: Path, state: Path | None, *, xa: bool = False) -> Path:
    n = next(_NAMES)
    for i, server in enumerate(servers[:2]):
        server.execute(f"CREATE DATABASE IF NOT EXISTS st{n}_{i}")
    props = {"proxy-state-directory": str(state)} if state is not None else {}
    sources = {f"ds_{i}": (s, f"st{n}_{i}") for i, s in enumerate(servers[:2])}
    return write_conf(
        tmp_path / f"conf{n}",
        {"st_db": sources},
        rules_yaml={"st_db": RULES},
        props=props,
        transaction={"defaultType": "XA"} if xa else None,
    )


@pytest.mark.parametrize(
    ("with_state", "error"),
    [
        (False, "cannot write"),  # conf/ read-only and nowhere else to write: refused, nothing changes
        (True, None),
    ],
)
def test_rdl_with_a_read_only_conf(
    mariadb_shards: list[MariaDBServer], tmp_path: Path, with_state: bool, error: str | None
) -> None:
    state = tmp_path / "state" if with_state else None
    conf = _conf(mariadb_shards, tmp_path, state)
    before = {p.name: p.read_text() for p in conf.iterdir()}
    with read_only(conf):
        proxy = start_proxy(conf)
        try:
            with proxy.connect("st_db") as conn, conn.cursor() as cur:
                if error is not None:
                    with pytest.raises(Exception, match=error):
                        cur.execute(NEW_RULE)
                    cur.execute("SHOW SHARDING TABLE RULES")
                    assert [r[0] for r in cur.fetchall()] == ["t_s"]
                    return
                cur.execute(NEW_RULE)
        finally:
            proxy.stop()
        assert {p.name: p.read_text() for p in conf.iterdir()} == before  # conf/ untouched
        assert state is not None
        assert "t_new" in (state / "database-st_db.yaml").read_text()
        again = start_proxy(conf)  # the state directory's copy is what the next start reads
        try:
            rules = sorted(r[0] for r in again.query("SHOW SHARDING TABLE RULES", "st_db"))
            assert rules == ["t_new", "t_s"]
            assert again.server.database("st_db").config.source_file == str(state / "database-st_db.yaml")
        finally:
            again.stop()


@pytest.mark.parametrize(
    ("with_state", "error"),
    [
        (False, "XA log directory"),  # the log would be conf/xa-log: the start stops, saying so
        (True, None),
    ],
)
def test_xa_with_a_read_only_conf(
    mariadb_shards: list[MariaDBServer], tmp_path: Path, with_state: bool, error: str | None
) -> None:
    state = tmp_path / "state" if with_state else None
    conf = _conf(mariadb_shards, tmp_path, state, xa=True)
    with read_only(conf):
        if error is not None:
            with pytest.raises(Exception, match=error):
                start_proxy(conf)
            return
        proxy = start_proxy(conf)
        try:
            proxy.query("CREATE TABLE t_s (id INT PRIMARY KEY, v INT)", "st_db")
            with proxy.connect("st_db") as conn, conn.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute("INSERT INTO t_s VALUES (1, 1), (2, 2)")  # both data sources: an XA commit
                cur.execute("COMMIT")
                cur.execute("SELECT id FROM t_s ORDER BY id")
                assert [r[0] for r in cur.fetchall()] == [1, 2]
                cur.execute("DROP TABLE t_s")
        finally:
            proxy.stop()
    assert state is not None
    assert (state / "xa-log" / "decisions.log").exists()
    assert b"C " in (state / "xa-log" / "decisions.log").read_bytes()
