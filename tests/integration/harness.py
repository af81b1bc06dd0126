"""Running the real proxy inside the test process, on its own event loop thread, so that ordinary
blocking drivers (PyMySQL, mysqlclient, the mariadb CLI) can talk to it from the test body."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pymysql
import yaml

from proxy.cli import serve
from proxy.config import load_config
from proxy.sandbox import MariaDBServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_conf(
    conf_dir: Path,
    databases: Mapping[str, Mapping[str, Any]],
    *,
    users: Sequence[Mapping[str, Any]] = ({"user": "root@%", "password": "root", "admin": True},),
    props: Mapping[str, Any] | None = None,
    rules_yaml: Mapping[str, str] | None = None,
    max_pool_size: int = 20,
    data_source_props: Mapping[str, Any] | None = None,
    transaction: Mapping[str, Any] | None = None,
) -> Path:
    """`databases`: logical name -> {data source name: (server, physical database)}; `rules_yaml`: logical
    name -> the YAML text of its `rules:` list (with ShardingSphere tags), appended verbatim; `transaction`:
    global.yaml's transaction rule ({defaultType: XA, props: {...}})."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"authority": {"users": [dict(u) for u in users]}, "props": dict(props or {})}
    if transaction is not None:
        doc["transaction"] = dict(transaction)
    (conf_dir / "global.yaml").write_text(yaml.safe_dump(doc))
    for name, sources in databases.items():
        doc = {
            "databaseName": name,
            "dataSources": {
                ds: {
                    "url": f"jdbc:mysql://{server.host}:{server.port}/{physical}?useSSL=false",
                    "username": server.user,
                    "password": server.password,
                    "maxPoolSize": max_pool_size,
                    "minPoolSize": 1,
                    **(data_source_props or {}),
                }
                for ds, (server, physical) in sources.items()
            },
        }
        text = yaml.safe_dump(doc, sort_keys=False)
        if rules_yaml and name in rules_yaml:
            text += "rules:\n" + rules_yaml[name]
        (conf_dir / f"database-{name}.yaml").write_text(text)
    return conf_dir


class RunningProxy:
    def __init__(self, conf_dir: Path, *, use_uvloop: bool = False) -> None:
        """`use_uvloop`: the event loop `shardproxy serve` runs on (its transports differ from asyncio's in
        how they end and flow-control); by default asyncio's own."""
        self.conf_dir = conf_dir
        self.host = "127.0.0.1"
        self.port = free_port()
        if use_uvloop:
            import uvloop

            self._loop = uvloop.new_event_loop()
        else:
            self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._server: Any = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shardproxy-test", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._stop = asyncio.Event()
            ready = asyncio.Event()
            task = asyncio.create_task(serve(load_config(self.conf_dir), self.host, self.port, ready=ready,
                                             stop=self._stop, started=self._started))
            waiter = asyncio.create_task(ready.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():  # the start failed: its error must be stored before start() sees ready
                waiter.cancel()
                await task
            self._ready.set()
            await task

        try:
            self._loop.run_until_complete(main())
        except BaseException as exc:  # reported to the test through start()
            self._error = exc
            self._ready.set()
        finally:
            self._loop.close()

    def start(self, timeout: float = 60) -> RunningProxy:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("proxy did not start")
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _started(self, server: Any) -> None:
        self._server = server

    def block_loop(self, seconds: float) -> None:
        """Make the proxy's event loop busy for `seconds` (as a long merge or a GC pause would), from now."""
        self._loop.call_soon_threadsafe(time.sleep, seconds)

    @property
    def server(self) -> Any:
        """The ProxyServer (for white-box assertions only; it lives on the proxy's loop thread)."""
        return self._server

    def call(self, fn: Any, timeout: float = 10) -> Any:
        """Run `fn()` on the proxy's event loop thread and return its result (white-box inspection
        without racing the loop)."""
        import concurrent.futures

        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result(timeout)

    def connect(self, database: str | None = None, user: str = "root", password: str = "root",
                **kw: Any) -> pymysql.connections.Connection[Any]:
        kw.setdefault("autocommit", True)  # PyMySQL's default (False) would leave every test in a transaction
        return pymysql.connect(host=self.host, port=self.port, user=user, password=password, database=database,
                               **kw)

    def query(self, sql: str, database: str | None = None) -> list[tuple[Any, ...]]:
        with self.connect(database) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())


def start_proxy(conf_dir: Path, *, use_uvloop: bool = False) -> RunningProxy:
    return RunningProxy(conf_dir, use_uvloop=use_uvloop).start()


__all__ = ["MariaDBServer", "RunningProxy", "free_port", "start_proxy", "write_conf"]
