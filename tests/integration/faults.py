"""What fault tests share: a table spread over two data sources and two tables each, and a client that
leaves without saying goodbye."""

from __future__ import annotations

import socket
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
