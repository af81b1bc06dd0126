"""A TCP relay that knows nothing of MySQL: the ceiling any proxy on this box runs under.

    python bench/byte_relay.py --listen 3399 --to 127.0.0.1:3306

Each client connection gets its own connection to the server; bytes are forwarded both ways as they arrive
(uvloop, asyncio Protocols, no parsing, no copies beyond the kernel's). The suite runs sysbench through it
next to the direct run and the proxy: the difference between direct and this relay is what the two extra
loopback hops and one more process cost on this machine, which no proxy can avoid; the difference between
this relay and shardproxy is what the proxy's own work costs.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket


class _Backend(asyncio.Protocol):
    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.close()


class _Client(asyncio.Protocol):
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.transport: asyncio.Transport | None = None
        self.backend: asyncio.Transport | None = None
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport subclasses
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        client = self.transport
        try:
            backend, _ = await loop.create_connection(lambda: _Backend(client), self.host, self.port)
        except OSError:
            client.close()
            return
        sock = backend.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.backend = backend
        for data in self.early:
            backend.write(data)
        self.early.clear()

    def data_received(self, data: bytes) -> None:
        if self.backend is None:
            self.early.append(data)
        else:
            self.backend.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.backend is not None:
            self.backend.close()


async def relay(listen: int, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(host, port), "127.0.0.1", listen, reuse_address=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--to", required=True, help="HOST:PORT of the server")
    args = ap.parse_args()
    host, _, port = args.to.rpartition(":")
    try:
        import uvloop

        uvloop.run(relay(args.listen, host, int(port)))
    except ImportError:
        asyncio.run(relay(args.listen, host, int(port)))


if __name__ == "__main__":
    main()
