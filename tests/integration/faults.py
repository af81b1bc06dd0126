"""What fault tests share: a table spread over two data sources and two tables each, and a client that
leaves without saying goodbye."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

# t_big: id % 2 picks the data source, (id / 2) % 2 the table: ids 0..3 reach all four nodes
T_BIG_RULES = """\
- !SHARDING
  tables:
    t_big:
      actualDataNodes: ds_${0..1}.t_big_${0..1}
      databaseStrategy:
        standard: {shardingColumn: id, shardingAlgorithmName: db_mod}
      tableStrategy:
        standard: {shardingColumn: id, shardingAlgorithmName: t_mod}
  shardingAlgorithms:
    db_mod: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
    t_mod: {type: INLINE, props: {algorithm-expression: 't_big_${id.intdiv(2) % 2}'}}
"""


def abort(conn: Any) -> None:
    """Close a PyMySQL connection's socket with a RST, without COM_QUIT, and make PyMySQL forget it."""
    sock = conn._sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.shutdown(socket.SHUT_RDWR)  # the makefile() PyMySQL reads through keeps the fd open past close()
    sock.close()
    conn._sock = None
    conn._rfile = None
    conn._result = None
    conn._closed = True


class RelayPair:
    """One client connection through a TcpRelay and its connection to the server."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.swallow = False  # the server's answers are not passed on any more
        self.closed = False

    def close(self) -> None:
        self.closed = True
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


class TcpRelay:
    """A TCP relay on loopback in front of one MariaDB server, for a data source to connect through: each
    connection accepted is paired with one to the server, and `pump(pair)` (a subclass's) moves the bytes,
    where a fault test can act on them. `cut_all()` closes every pair (the server going away, to the proxy)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.host, self.user, self.password = "127.0.0.1", server.user, server.password
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._pairs: list[RelayPair] = []
        self._lock = threading.Lock()
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def pump(self, pair: RelayPair) -> None:
        raise NotImplementedError

    def cut_all(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.close()

    def close(self) -> None:
        self._stopped = True
        self._listener.close()
        self.cut_all()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection((self.server.host, self.server.port), timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            pair = RelayPair(client, server)
            with self._lock:
                self._pairs.append(pair)
            self.pump(pair)


class CuttingRelay(TcpRelay):
    """A TCP relay in front of one MariaDB server, for the proxy's data source to connect through.

    `cut_all()` closes every connection it carries (to the proxy this looks like the server going away;
    the server sees its clients leave and rolls back their transactions). `cut_at(command)` cuts the next
    connection that sends exactly that SQL text as one COM_QUERY, `cut_at_text(marker)` the next one whose
    write holds `marker` anywhere (a statement pipelined behind another, a prepared statement's parameter):
    `forward=False` before the server sees it, `forward=True` after the server ran it but before its answer
    reaches the proxy (a COMMIT whose OK is lost)."""

    def __init__(self, server: Any) -> None:
        self._cut: tuple[Callable[[bytes], bool], bool] | None = None
        self.cuts = 0
        super().__init__(server)

    def cut_at(self, sql: str, *, forward: bool = False) -> None:
        command = b"\x03" + sql.encode()
        self._cut = (lambda data: data[4:] == command, forward)

    def cut_at_text(self, marker: str, *, forward: bool = False) -> None:
        needle = marker.encode()
        self._cut = (lambda data: needle in data, forward)

    def uncut(self) -> None:
        self._cut = None

    def pump(self, pair: RelayPair) -> None:
        threading.Thread(target=self._pump, args=(pair, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(pair, False), daemon=True).start()

    def _pump(self, pair: RelayPair, upstream: bool) -> None:
        src, dst = (pair.client, pair.server) if upstream else (pair.server, pair.client)
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                cut = self._cut
                if upstream and cut is not None and cut[0](data):
                    self._cut = None
                    self.cuts += 1
                    if cut[1]:
                        pair.swallow = True
                        dst.sendall(data)
                        time.sleep(0.5)  # the server runs it; its answer is swallowed
                    break
                if not upstream and pair.swallow:
                    continue
                dst.sendall(data)
        except OSError:
            pass
        pair.close()
