"""Sandbox MariaDB fixtures shared by every test package.

Only throwaway-database fixtures live here; proxy fixtures belong in the conftest of the package that
needs them (e.g. ``tests/integration/conftest.py``). A missing MariaDB install makes the tests that use
these fixtures fail, not skip: CI installs it, and a silently skipped integration suite looks green.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pymysql.connections
import pytest

from proxy.sandbox import MariaDBServer, SandboxUnavailableError, start_servers

SANDBOX_FIXTURES = frozenset({"mariadb", "mariadb_shards", "mariadb_factory"})

T = TypeVar("T")


def _start(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except SandboxUnavailableError as exc:
        pytest.fail(f"MariaDB sandbox unavailable: {exc}", pytrace=False)


def _share_pymysql_preferred_tls_context() -> None:
    """PyMySQL (2.x) gives each connection opened without TLS options (TLS "preferred": used when the server
    offers it) a new default SSLContext, which loads the system's CA certificates: ~45 ms per connection, a
    fifth of this suite's time over its thousands of connections. That context is the same every time and
    verifies nothing (CERT_NONE, no host name check): it is built once here and shared, so every connection
    still negotiates exactly as before. Contexts for explicit TLS options are built as usual."""
    connection = pymysql.connections.Connection
    create = connection._create_ssl_ctx
    shared: list[Any] = []

    def create_ssl_ctx(self: Any, sslp: Any) -> Any:
        if isinstance(sslp, dict) and not sslp:
            if not shared:
                shared.append(create(self, sslp))
            return shared[0]
        return create(self, sslp)

    connection._create_ssl_ctx = create_ssl_ctx  # type: ignore[method-assign]


_share_pymysql_preferred_tls_context()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject.toml's addopts): two workers, whatever the cores. Each worker starts the session's
    servers it needs for itself, and most of a worker's time is spent waiting on them and on the proxies it starts;
    more workers than that on a big machine would mostly start more servers."""
    return 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that start real servers, so ``-m 'not integration'`` gives a quick unit run."""
    for item in items:
        if SANDBOX_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDBServer]:
    """One server for the whole session; tests must not stop it (use ``mariadb_factory`` for that)."""
    server = _start(MariaDBServer.start)
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def mariadb_shards() -> Iterator[list[MariaDBServer]]:
    """Two servers for ``ds_0``/``ds_1``; server *i* holds an empty database ``demo_ds_i``."""
    servers = _start(start_servers, 2)
    try:
        for i, server in enumerate(servers):
            server.execute(f"CREATE DATABASE demo_ds_{i}")
        yield servers
    finally:
        for server in servers:
            server.cleanup()


class ServerFactory:
    """Starts servers that belong to one test and are removed after it, so a test may kill them."""

    def __init__(self) -> None:
        self.servers: list[MariaDBServer] = []

    def __call__(self, **kwargs: Any) -> MariaDBServer:
        server = _start(MariaDBServer.start, **kwargs)
        self.servers.append(server)
        return server

    def many(self, n: int, **kwargs: Any) -> list[MariaDBServer]:
        servers = _start(start_servers, n, **kwargs)
        self.servers.extend(servers)
        return servers

    def cleanup(self) -> None:
        for server in self.servers:
            server.cleanup()
        self.servers.clear()


@pytest.fixture
def mariadb_factory() -> Iterator[ServerFactory]:
    """``mariadb_factory(binlog=True)`` or ``mariadb_factory.many(2)``; cleaned up after the test."""
    factory = ServerFactory()
    yield factory
    factory.cleanup()
