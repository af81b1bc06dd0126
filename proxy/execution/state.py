"""A session's state as plain data: its transaction, what it did on each read/write splitting group, its
prepared statements. No behaviour beyond bookkeeping, no I/O.

Why its own module: the session holds these, and the execution and handler modules read and change them
through proxy.execution.context's `SessionContext`; kept here, at the bottom, every module may name them.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.binary import LAST_STATEMENT_ID, ParamType
from protocol.packets import ColumnDefinition41
from protocol.retarget import ExecuteLayout
from protocol.wire import MalformedPacket
from routing.parse import Shape
from routing.point import PointPlan

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.readwrite import Access
    from proxy.backends.runtime import LogicalDatabase
    from proxy.backends.xa import XATransaction


@dataclass
class TransactionState:
    begin_sql: str | None = None  # the statement that opened the transaction, replayed per data source
    joined: list[str] = field(default_factory=list)  # data sources the transaction has touched
    autocommit: bool = True
    session_sets: list[str] = field(default_factory=list)  # replayed on every newly borrowed connection
    # the status flags the session's sql_mode sets (NO_BACKSLASH_ESCAPES, ANSI_QUOTES), as its backends report them
    # after its SET: every answer the proxy makes itself carries them, as MariaDB's do (clients escape by them)
    mode_flags: int = 0
    # the session's sql_mode flags no status flag says, read from @@sql_mode after a SET of it (routing.parse's
    # PIPES_AS_CONCAT, NO_AUTO_VALUE_ON_ZERO bits)
    sql_mode_bits: int = 0
    next_tx_sets: list[str] = field(default_factory=list)  # SET TRANSACTION: only for the next transaction
    # names as MySQL reads them (no backquotes; proxy.execution.txn_text), oldest first (set again on a join)
    savepoints: list[str] = field(default_factory=list)
    # data sources whose part of the open transaction went with their connection (-> what happened): the
    # transaction can no longer commit atomically; COMMIT rolls back the rest and says so
    lost: dict[str, str] = field(default_factory=dict)
    # named locks proxy.execution.upsert took for the transaction (data source -> names), released when it ends
    upsert_locks: dict[str, list[str]] = field(default_factory=dict)
    # data sources where the session holds LOCK TABLES (proxy.execution.table_locks), released by UNLOCK TABLES, by
    # a LOCK TABLES after them, by BEGIN / START TRANSACTION; USE and the session's end reset their connections
    table_locks: list[str] = field(default_factory=list)
    xa: XATransaction | None = None  # the open transaction is XA (proxy.backends.xa): its xid and branches

    @property
    def text_mode(self) -> int:
        """The sql_mode flags that change how the kernel reads a text or a value (routing.parse: NO_BACKSLASH_ESCAPES,
        ANSI_QUOTES, PIPES_AS_CONCAT, NO_AUTO_VALUE_ON_ZERO); 0 in the default sql_mode."""
        return self.mode_flags | self.sql_mode_bits

    @property
    def active(self) -> bool:
        return self.begin_sql is not None or not self.autocommit

    @property
    def commits_before_begin(self) -> bool:
        """A BEGIN now first commits the open transaction (it touched a data source), as MySQL's does."""
        return self.active and bool(self.joined or self.lost)

    def begin(self, sql: str) -> None:
        """The client's BEGIN / START TRANSACTION (`sql`): nothing starts anywhere yet; each data source joins at the
        transaction's first statement there, with `sql` (proxy.execution.txn.join)."""
        self.begin_sql = sql
        self.joined = []


@dataclass
class GroupSessionState:
    """What one session did on one group, for its read-after-write consistency."""

    wrote: bool = False  # SESSION: pinned to the primary from the first write on
    txn_wrote: bool = False  # a write in the transaction still open
    gtid_pending: bool = False  # GTID: wrote since the position was last read
    gtid: str = ""  # GTID: the primary's position after the session's last write
    caught_up: set[str] = field(default_factory=set)  # replicas known to have applied `gtid`
    fixed_replica: str | None = None  # FIXED: the replica of the open transaction
    # pass-through: the session holds LOCK TABLES on the primary (the replicas are not locked: reads go there)
    locked: bool = False


@dataclass
class ClientStatement:
    id: int
    sql: str
    num_params: int
    columns: tuple[ColumnDefinition41, ...]
    types: tuple[ParamType, ...] | None = None
    long_data: dict[int, bytearray] = field(default_factory=dict)
    # pass-through: the statement on the session's backend connection
    backend: BackendConnection | None = None
    backend_id: int = 0
    # sharded: facts about the text, found once at PREPARE instead of at every EXECUTE
    metadata_statement: bool = False
    session_functions: bool = False
    # KILL, SHOW PROCESSLIST, information_schema.PROCESSLIST ...: answered by the proxy at EXECUTE
    proxy_answered: bool = False
    # sharded, CURSOR_TYPE_READ_ONLY: the rows of the open cursor (binary row payloads), and its columns
    cursor_rows: deque[bytes] | None = None
    # sharded: may proxy.execution.fastpath execute it (None: not known until its first execute)
    fast: bool | None = None
    # sharded, for the fast path: what its executes with the bound `types` have in common, and its
    # point plan (ShardingKernel.prepared_point) with the kernel generation it was taken in
    layout: ExecuteLayout | None = None
    point: tuple[int, PointPlan | None, Shape | None] | None = None
    # pass-through read/write splitting group: how the text is classified (None: not a group), and the
    # connection / backend statement id of the open read-only cursor, when its EXECUTE ran on a replica
    access: Access | None = None
    cursor_conn: BackendConnection | None = None
    cursor_id: int = 0
    kind: str = ""  # its metrics label (plain.statement_kind), found at its first fast execute
    # the logical database current at PREPARE (None: none chosen): it runs there, whatever USE chose since, as on
    # MariaDB (proxy.session.stmt_database)
    database: LogicalDatabase | None = None
    # pass-through, a statement on an !ENCRYPT table: its rewrite, prepared on the backend, executed with the client's
    # parameters mapped and encrypted (proxy.execution.encrypted.PreparedEncrypted)
    encrypted: Any = None

    def remember_types(self, payload: bytes) -> None:
        """Keep the parameter types a relayed COM_STMT_EXECUTE binds (`payload`): a later execute may send none,
        and the statement may have to be prepared again on another connection (run in its database after a USE,
        proxy.session.stmt_database), which needs them."""
        n = self.num_params
        pos = 10 + (n + 7) // 8
        if n and len(payload) >= pos + 1 + 2 * n and payload[pos] == 1:
            with contextlib.suppress(MalformedPacket):  # (the server answers that one)
                at = range(pos + 1, pos + 1 + 2 * n, 2)
                self.types = tuple(ParamType.decode(payload[i], payload[i + 1]) for i in at)


class StatementRegistry:
    """A session's prepared statements; ids are the proxy's own, per session."""

    def __init__(self) -> None:
        self.by_id: dict[int, ClientStatement] = {}
        self._next = 1
        self.last_id: int | None = None

    def new_id(self) -> int:
        sid = self._next
        self._next += 1
        return sid

    def add(self, stmt: ClientStatement) -> None:
        self.by_id[stmt.id] = stmt
        self.last_id = stmt.id

    def get(self, sid: int) -> ClientStatement | None:
        if sid == LAST_STATEMENT_ID and self.last_id is not None:
            sid = self.last_id
        return self.by_id.get(sid)

    def remove(self, sid: int) -> ClientStatement | None:
        """COM_STMT_CLOSE: MariaDB's last-statement id closes the statement prepared last, too."""
        if sid == LAST_STATEMENT_ID and self.last_id is not None:
            sid = self.last_id
        return self.by_id.pop(sid, None)

    def clear(self) -> None:
        self.by_id.clear()
        self.last_id = None


__all__ = ["ClientStatement", "GroupSessionState", "StatementRegistry", "TransactionState"]
