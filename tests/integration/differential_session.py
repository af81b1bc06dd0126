"""Step-by-step differential sessions: the same statements through the proxy and on the unsharded oracle
database (``sht_oracle_db`` of ``sharded_env``), text protocol and prepared (mysql-connector-python's
``cursor(prepared=True)``: COM_STMT_PREPARE / EXECUTE), every answer compared: rows with their Python
types, affected-row counts, LAST_INSERT_ID, warning counts and error numbers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import mysql.connector

from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv

MODES = ("text", "prepared")


@dataclass(frozen=True)
class Outcome:
    kind: str  # "rows" | "ok" | "error"
    rows: tuple[tuple[tuple[str, Any], ...], ...] = ()
    affected: int = 0
    last_id: int = 0
    warnings: int = 0
    errno: int = 0
    message: str = ""

    def __eq__(self, other: object) -> bool:  # an error's text may name a data source: compare the number
        if not isinstance(other, Outcome):
            return NotImplemented
        return (self.kind, self.rows, self.affected, self.last_id, self.warnings, self.errno) == (
            other.kind, other.rows, other.affected, other.last_id, other.warnings, other.errno)

    def __hash__(self) -> int:
        return hash((self.kind, self.rows, self.affected, self.errno))


class Client:
    """One client session (mysql-connector, pure Python), text or prepared."""

    def __init__(self, conn: Any, prepared: bool) -> None:
        self.conn = conn
        self.prepared = prepared

    def run(self, sql: str, params: Sequence[Any] = ()) -> Outcome:
        cur = self.conn.cursor(prepared=True) if self.prepared else self.conn.cursor()
        try:
            try:
                cur.execute(sql, tuple(params) if params or self.prepared else None)
                if cur.description is not None:
                    rows = cur.fetchall()
                    return Outcome("rows", tuple(tuple((type(v).__name__, _plain(v)) for v in r) for r in rows),
                                   warnings=int(cur.warning_count or 0))
                return Outcome("ok", affected=cur.rowcount, last_id=int(cur.lastrowid or 0),
                               warnings=int(cur.warning_count or 0))
            except mysql.connector.Error as exc:
                return Outcome("error", errno=int(exc.errno or 0), message=str(exc.msg))
        finally:
            with contextlib.suppress(Exception):
                cur.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def _plain(v: Any) -> Any:
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def _connect(host: str, port: int, user: str, password: str, database: str) -> Any:
    return mysql.connector.connect(host=host, port=port, user=user, password=password, database=database,
                                   use_pure=True, ssl_disabled=True, autocommit=True, get_warnings=False)


@dataclass
class Pair:
    """The proxy's session and the oracle's, fed the same statements."""

    proxy: Client
    oracle: Client

    def both(self, sql: str, params: Sequence[Any] = ()) -> tuple[Outcome, Outcome]:
        return self.proxy.run(sql, params), self.oracle.run(sql, params)

    def same(self, sql: str, params: Sequence[Any] = ()) -> Outcome:
        got, want = self.both(sql, params)
        assert got == want, f"{sql} {list(params)}:\n proxy  {got}\n oracle {want}"
        return got

    def close(self) -> None:
        self.proxy.close()
        self.oracle.close()


@contextlib.contextmanager
def pair(env: ShardedEnv, mode: str, db: str = "sharding_db") -> Iterator[Pair]:
    server = env.servers[0]
    p = Pair(
        Client(_connect(env.proxy.host, env.proxy.port, "root", "root", db), mode == "prepared"),
        Client(_connect(server.host, server.port, server.user, server.password, ORACLE_DB), mode == "prepared"),
    )
    try:
        yield p
    finally:
        p.close()


def seed(env: ShardedEnv, table: str, columns: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """The same rows in the sharded table (through the proxy) and in the oracle's table."""
    env.clean(table)
    server = env.servers[0]
    server.execute(f"DELETE FROM {table}", ORACLE_DB)
    if not rows:
        return
    marks = ", ".join(["(" + ", ".join(["%s"] * len(rows[0])) + ")"] * len(rows))
    flat = [v for r in rows for v in r]
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {table} ({columns}) VALUES {marks}", flat)
    server.execute(f"INSERT INTO {table} ({columns}) VALUES {marks}", ORACLE_DB, args=flat)


__all__ = ["MODES", "Client", "Outcome", "Pair", "pair", "seed"]
