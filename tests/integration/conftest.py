"""Proxy fixtures: the real proxy, in process, in front of sandbox MariaDB servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.sharding_fixtures import sharded_env

__all__ = ["sharded_env"]  # the session fixture, imported here so that every module shares one


@pytest.fixture(scope="session")
def passthrough_proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    """Logical database `demo` passed through to `demo_ds` on one server; users root/root and a
    caching_sha2_password user sha/sha2pw."""
    mariadb.execute("CREATE DATABASE IF NOT EXISTS demo_ds")
    conf = write_conf(
        tmp_path_factory.mktemp("passthrough-conf"),
        {"demo": {"ds_0": (mariadb, "demo_ds")}},
        users=(
            {"user": "root@%", "password": "root", "admin": True},
            {"user": "sha@%", "password": "sha2pw", "authenticationMethodName": "caching_sha2_password"},
            {"user": "nopw@%", "password": ""},
        ),
    )
    proxy = start_proxy(Path(conf))
    yield proxy
    proxy.stop()
