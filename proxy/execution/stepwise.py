"""Running a write in steps (routing.stepwise): ORDER BY ... LIMIT over several nodes, an UPDATE that assigns
a sharding column, INSERT ... SELECT into a sharded table.

Every step is an ordinary logic statement, routed by the kernel and run by the executor as a client's
statement would be (merges, collations, key generation, renaming of errors), its answer captured here
instead of going to the client. The steps run inside one transaction: the session's own when one is
open (then inside a savepoint, so that a failing step takes back what the statement did, as InnoDB's
statement atomicity does), else one of the statement's own (BEGIN on every data source it touches,
COMMIT at the end, ROLLBACK when anything fails): nothing is left half-written.

* UPDATE / DELETE: the rows are selected first (key and sharding columns, in the statement's ORDER BY,
  within its LIMIT, FOR UPDATE: concurrent writers wait, and the rows cannot change before they are
  written), then exactly those rows are written by key. Affected rows and the OK's info text are those
  of the write, as one MariaDB counts them.
* UPDATE of a sharding column: after the write, each written row's new values are read back on the node
  that holds it; a row whose new values route to another node moves there (INSERT there, DELETE here,
  as Vitess does); a row that stays (Django's ``save()`` sending the unchanged value) is left alone.
* INSERT ... SELECT: the SELECT runs (merged, within ``proxy-merge-memory-rows``: its rows are all read
  before the first one is written, as MariaDB reads a table it also writes), then the rows go in
  batches of plain ``INSERT ... VALUES``, each row routed (and its key generated) as such an INSERT's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import structlog

from protocol.constants import ColumnType, ServerStatus
from protocol.errors import ServerError
from protocol.packets import ColumnDefinition41, ERRPacket, OKPacket
from protocol.wire import Reader
from proxy.backends.codec import TEXT
from proxy.execution import own_txn, txn
from proxy.execution.atomic import NOTHING_APPLIED, held_whole, rollback_to_savepoint, said, taken_back
from proxy.execution.decide import SessionView, decide
from proxy.execution.errors import answer_error
from proxy.execution.plans import Refused, Run, Strategy
from proxy.execution.units import _merged_info, log_statement
from proxy.execution.upsert import _ok, _rows
from proxy.frontend.wire import CapturedWriter
from routing.errors import RoutingError
from routing.interpolate import interpolate
from routing.model import DataNode, TableRule
from routing.parse import literal_value
from routing.plan import ExecutionUnit, RoutedStatement, SessionHints
from routing.route import precise_group, route_table
from routing.stepwise import (
    COMPUTED,
    INSERT_SELECT,
    StepwiseWrite,
    assignments,
    split_insert_select,
    split_rows_write,
)

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

log = structlog.get_logger(__name__)

_SAVEPOINT = "shardproxy_stepwise"
_BATCH = 500  # rows per written statement
BINARY_CHARSET = 63
_NUMERIC = {ColumnType.TINY, ColumnType.SHORT, ColumnType.LONG, ColumnType.LONGLONG, ColumnType.INT24,
            ColumnType.YEAR, ColumnType.DECIMAL, ColumnType.NEWDECIMAL, ColumnType.FLOAT, ColumnType.DOUBLE}
_BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit"}

# the executor's execute_plan, for the steps (set per statement by execute_stepwise)
RunPlan = Callable[..., Awaitable[None]]
_RUN_PLAN: ContextVar[RunPlan] = ContextVar("shardproxy_stepwise_run_plan")
STEP_HINTS = SessionHints(stepwise_inner=True)  # a step is decided as a statement of its own, never in steps


class StepFailed(ServerError):
    """A step's answer was an ERR: the statement is taken back and the client gets this ERR (as it is: the
    step's answer is in logic names already)."""

    def __init__(self, err: ERRPacket) -> None:
        super().__init__(err.message, errno=err.errno, sqlstate=err.sqlstate)
        self.err = err


@dataclass
class _Outcome:
    affected: int = 0
    last_id: int = 0
    warnings: int = 0
    infos: list[bytes] = field(default_factory=list)

    def add(self, ok: OKPacket) -> None:
        self.affected += ok.affected_rows
        self.last_id = self.last_id or ok.last_insert_id
        self.warnings += ok.warnings
        self.infos.append(ok.info)


async def execute_stepwise(session: Session, db: LogicalDatabase, routed: RoutedStatement, run_plan: RunPlan) -> None:
    """Raises RoutingError (the session answers 1235) or UnitFailed / BackendError like the executor's
    write path; a step's own ERR is answered here, after the statement was taken back. `run_plan` is the
    executor's execute_plan (handed down: this module sits below the executor)."""
    _RUN_PLAN.set(run_plan)
    step: StepwiseWrite = routed.stepwise
    sql = interpolate(step.sql, step.params, session.txn.mode_flags) if step.params else step.sql
    implicit = not session.txn.active
    if implicit:
        own_txn.begin(session)  # (under LOCK TABLES not BEGIN, which releases them)
    savepoints: list[Any] = []
    try:
        await _take_and_lock(session, db, step, sql)
        if not implicit:
            savepoints = await _savepoint(session, db, step.table)
        with held_whole():  # the steps are taken back together, by this transaction or savepoint
            if step.kind == INSERT_SELECT:
                outcome, info = await _insert_select(session, db, step, sql)
            else:
                outcome, info = await _rows_write(session, db, step, sql)
    except asyncio.CancelledError:
        if implicit:  # the client went away mid-statement: its connections' state is unknown, none is reused
            txn.abandon(session)
            txn.reset(session)
        raise
    except Exception as exc:
        if implicit:
            await own_txn.end(session, "ROLLBACK")
            note = NOTHING_APPLIED + ": its steps were rolled back on every data source"
        else:
            note = taken_back(await rollback_to_savepoint(session, savepoints, _SAVEPOINT))
        if isinstance(exc, StepFailed):
            answer_error(session, StepFailed(replace(exc.err, message=exc.err.message + note)))
            return
        raise said(exc, note) from None
    if implicit:
        failure = await own_txn.end(session, "COMMIT", label="the COMMIT of this statement's steps")
        if failure is not None:
            raise failure
    else:
        await _release(savepoints)
    session.row_count = outcome.affected
    if outcome.last_id:
        session.last_insert_id = outcome.last_id
    session.wire.send(OKPacket(outcome.affected, outcome.last_id, ServerStatus(session.status),
                               min(outcome.warnings, 0xFFFF), info).encode(session.capabilities))


# --- UPDATE / DELETE of selected rows ---------------------------------------------------------------------


def _key_columns(db: LogicalDatabase, rule: TableRule) -> list[str]:
    """The columns that name one row on its node: the primary key (else a unique key), then the sharding
    columns (a key need not be unique across nodes; with the sharding columns it names one row)."""
    keys = db.metadata.unique_keys(rule.logic_table)
    if not keys:
        raise RoutingError(
            f"this write on sharded table {rule.logic_table} routes to several data nodes and must select "
            "its rows first, by key; the table has no PRIMARY or UNIQUE key the proxy knows of: add sharding "
            "conditions that route it to one data node, or give the table a primary key"
        )
    columns = list(keys[0].columns)
    columns += [c for c in rule.sharding_columns if c not in columns]
    return columns


async def _rows_write(session: Session, db: LogicalDatabase, step: StepwiseWrite, sql: str
                      ) -> tuple[_Outcome, bytes]:
    assert db.kernel is not None
    rule = db.kernel.rules.sharding.tables[step.table]  # type: ignore[union-attr]
    split = split_rows_write(sql)
    columns = _key_columns(db, rule)
    key = columns[: len(db.metadata.unique_keys(rule.logic_table)[0].columns)]
    assigned = assignments(sql) if step.assigns_sharding else {}
    changed = sorted(set(key) & set(assigned))
    if changed:  # refused whatever the rows: before anything is read
        raise RoutingError(
            f"this UPDATE of {rule.logic_table} assigns key column(s) {', '.join(changed)} and sharding "
            "column(s), so rows may have to move to another data node, and the proxy finds a moved row "
            "by its unchanged key only: add sharding conditions that keep the rows on one data node, or "
            "delete the rows and insert them with their new values"
        )
    header, rows = await _select(session, db, split.select_sql(columns))
    literals = [[_literal(v, c, session.charset) for v, c in zip(row, header, strict=True)] for row in rows]
    outcome = _Outcome()
    if not rows:
        info = b"Rows matched: 0  Changed: 0  Warnings: 0" if split.update and not split.limit_zero else b""
        return outcome, info
    homes: dict[DataNode, list[list[str]]] = {}
    moves_possible = False
    if step.assigns_sharding:
        for row, lits in zip(rows, literals, strict=True):
            values = {c: _routing_value(v, col, session.charset) for c, v, col in zip(columns, row, header, strict=True)
                      if c in rule.sharding_columns}
            home = _node_of(rule, values)
            homes.setdefault(home, []).append(lits[: len(key)])
            new = {c: assigned.get(c, v) for c, v in values.items()}
            # literals the row already routes with (Django's save() sends the unchanged value): it stays
            moves_possible = moves_possible or _may_move(rule, new, home)
    for start in range(0, len(literals), _BATCH):
        ok = await _write(session, db, split.write_sql(columns, literals[start : start + _BATCH]))
        outcome.add(ok)
    if moves_possible:
        await _move_rows(session, db, rule, key, homes)

    return outcome, _merged_info(outcome.infos)


async def _move_rows(session: Session, db: LogicalDatabase, rule: TableRule, keys: list[str],
                     homes: dict[DataNode, list[list[str]]]) -> None:
    """Each written row's new image on the node it was on; the ones whose sharding values now route to
    another node are inserted there and deleted here."""

    all_columns = db.metadata.columns(rule.logic_table)
    if not all_columns:
        raise RoutingError(f"the proxy does not know the columns of {rule.logic_table}, which it needs to "
                           "move rows whose sharding column changed")
    key_positions = [all_columns.index(k) for k in keys]
    names = ", ".join(_quote(c) for c in all_columns)
    for node, key_rows in homes.items():
        conn = await session.backend(node.data_source, record_write=True)
        moves: dict[DataNode, list[tuple[bytes | None, ...]]] = {}
        for start in range(0, len(key_rows), _BATCH):
            cond = _key_condition(keys, key_rows[start : start + _BATCH])
            image = await _rows(conn, ExecutionUnit(conn.name, f"SELECT {names} FROM {_quote(node.table)} "
                                                                f"WHERE {cond}"))
            for row in image:
                values = {c: _image_value(row[all_columns.index(c)], db, rule.logic_table, c, session.charset)
                          for c in rule.sharding_columns}
                target = _node_of(rule, values)
                if target != node:
                    moves.setdefault(target, []).append(row)
        for target, moved in moves.items():
            lits = [[_image_literal(v, db, rule.logic_table, c, session.charset) for v, c in
                     zip(row, all_columns, strict=True)] for row in moved]
            keys_lits = [[lit[p] for p in key_positions] for lit in lits]
            log.info("stepwise_move", conn=session.id, table=rule.logic_table, rows=len(moved),
                     source=f"{node.data_source}.{node.table}", target=f"{target.data_source}.{target.table}")
            await _ok(conn, ExecutionUnit(conn.name, f"DELETE FROM {_quote(node.table)} WHERE "
                                                     f"{_key_condition(keys, keys_lits)}"))
            dest = await session.backend(target.data_source, record_write=True)
            values = ", ".join("(" + ", ".join(lit) + ")" for lit in lits)
            await _ok(dest, ExecutionUnit(dest.name, f"INSERT INTO {_quote(target.table)} ({names}) VALUES {values}"))


def _key_condition(keys: list[str], rows: list[list[str]]) -> str:
    if len(keys) == 1:
        return f"{_quote(keys[0])} IN ({', '.join(r[0] for r in rows)})"
    return f"({', '.join(_quote(k) for k in keys)}) IN ({', '.join('(' + ', '.join(r) + ')' for r in rows)})"


def _may_move(rule: TableRule, new: dict[str, Any], home: DataNode) -> bool:
    """Could the row's new sharding values route elsewhere? (Only plain literals are worked out here; the
    rows are read back after the write otherwise.)"""
    if any(v is COMPUTED for v in new.values()):
        return True
    try:
        return _node_of(rule, new) != home
    except Exception:  # a literal the algorithm does not take as it is: read the row back
        return True


def _node_of(rule: TableRule, values: dict[str, Any]) -> DataNode:
    nodes = route_table(rule, [precise_group(values)], None)
    if len(nodes) != 1:
        raise RoutingError(
            f"the sharding rule of {rule.logic_table} does not name one data node for the row with "
            f"{', '.join(f'{k} = {v!r}' for k, v in values.items())}, which this write must place; add "
            "sharding conditions that route the statement to one data node"
        )
    return nodes[0]


# --- INSERT ... SELECT -------------------------------------------------------------------------------------


async def _insert_select(session: Session, db: LogicalDatabase, step: StepwiseWrite, sql: str
                         ) -> tuple[_Outcome, bytes]:
    split = split_insert_select(sql)
    columns = list(split.columns) if split.columns is not None else db.metadata.columns(step.table)
    if not columns:
        raise RoutingError(
            f"INSERT ... SELECT into sharded table {step.table} without a column list: the proxy does not "
            "know the table's columns; name them: INSERT INTO t (a, b, ...) SELECT ..."
        )
    header, rows = await _select(session, db, split.query)
    if len(header) != len(columns):
        session_err = ERRPacket(1136, "Column count doesn't match value count at row 1", "21S01")
        raise StepFailed(session_err)
    outcome = _Outcome()
    for start in range(0, len(rows), _BATCH):
        batch = [[_literal(v, c, session.charset) for v, c in zip(row, header, strict=True)]
                 for row in rows[start : start + _BATCH]]
        outcome.add(await _write(session, db, split.values_sql(columns, batch)))
    duplicates = len(rows) - outcome.affected if split.ignore else 0
    info = f"Records: {len(rows)}  Duplicates: {max(duplicates, 0)}  Warnings: {outcome.warnings}".encode()
    return outcome, info


# --- running one step -------------------------------------------------------------------------------------


class _BoundedCapture(CapturedWriter):
    """A capture that keeps at most ``limit`` packets (0: all) and then only the last one (the answer's end:
    EOF/OK or the ERR that stopped it), so a step's rows stay within the merge's memory bound."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.kept: list[bytes] = []
        self.over = False

    def write(self, data: bytes) -> None:
        self.frames.feed(data)
        for _f, _l, payload in self.frames.packets():
            if self.limit and len(self.kept) >= self.limit:
                self.over = True
                self.kept[-1] = payload
            else:
                self.kept.append(payload)


async def _run(session: Session, db: LogicalDatabase, sql: str, limit: int = 0) -> tuple[list[bytes], bool]:
    """One logic statement through the kernel and the executor; its answer's packets (at most ``limit``,
    then the last one), and whether some were dropped."""
    assert db.kernel is not None
    hints = session.hints()
    inner = replace(hints, stepwise_inner=True) if hints is not None else STEP_HINTS
    plan = decide(db.kernel, sql, None, SessionView(inner, federation=False, mode=session.txn.text_mode))
    if isinstance(plan, Refused):
        raise plan.error
    if not isinstance(plan, Run) or plan.strategy is Strategy.STEPWISE:
        raise RoutingError(f"a step of this write would need steps of its own: {sql[:200]}")
    log_statement(session, sql, plan.routed)
    capture = _BoundedCapture(limit)
    saved = session.writer, session.wire.writer, session.wire.seq, session.errored
    session.writer = session.wire.writer = capture  # type: ignore[assignment]
    try:
        await _RUN_PLAN.get()(session, db, plan, TEXT)
    finally:
        session.writer, session.wire.writer, session.wire.seq, session.errored = saved
    capture.write(b"")
    return capture.kept, capture.over


async def _select(session: Session, db: LogicalDatabase, sql: str
                  ) -> tuple[list[ColumnDefinition41], list[tuple[bytes | None, ...]]]:
    budget = session.server.merge_memory_rows
    # the header (column count, definitions, EOF) fits in 4,100 packets: MariaDB allows 4,096 columns
    answer, over = await _run(session, db, sql, budget + 4100 if budget else 0)
    if not answer:
        raise StepFailed(ERRPacket(1105, "no answer to a step of this statement", "HY000"))
    if answer[0][:1] == b"\xff" or answer[-1][:1] == b"\xff":
        raise StepFailed(ERRPacket.decode(answer[-1] if answer[-1][:1] == b"\xff" else answer[0]))
    if answer[0][:1] == b"\x00":
        return [], []
    count = Reader(answer[0]).lenenc_int() or 0
    header = [ColumnDefinition41.decode(p) for p in answer[1 : 1 + count]]
    body = answer[1 + count + (0 if session.deprecate_eof else 1) : -1]
    if over or (budget and len(body) > budget):
        raise StepFailed(ERRPacket(1038, "this write selects its rows first, more than "
                                         f"props.proxy-merge-memory-rows ({budget}) allows: write fewer rows per "
                                         "statement, or raise the limit", "HY001"))
    return header, [TEXT.decode_row(p, header) for p in body]


async def _write(session: Session, db: LogicalDatabase, sql: str) -> OKPacket:
    answer, _over = await _run(session, db, sql)
    if not answer or answer[0][:1] != b"\x00":
        if answer and answer[0][:1] == b"\xff":
            raise StepFailed(ERRPacket.decode(answer[0]))
        raise StepFailed(ERRPacket(1105, "a step of this write answered rows", "HY000"))
    return OKPacket.decode(answer[0], session.capabilities)


# --- one stepwise writer per table at a time -------------------------------------------------------------


def step_data_sources(db: LogicalDatabase, step: StepwiseWrite, sql: str) -> list[str]:
    """Every data source a step of this write may use: the written table's, and for INSERT ... SELECT the
    ones its SELECT reads (a SELECT the kernel refuses adds none: its step fails with that refusal)."""
    assert db.kernel is not None
    rule = db.kernel.rules.sharding.tables[step.table]  # type: ignore[union-attr]
    sources = set(rule.data_sources)
    if step.kind == INSERT_SELECT:
        plan = decide(db.kernel, split_insert_select(sql).query, None, SessionView(STEP_HINTS, federation=False))
        if isinstance(plan, Run):
            sources |= {u.data_source for u in plan.routed.execution_units}
    return sorted(sources)


async def _take_and_lock(session: Session, db: LogicalDatabase, step: StepwiseWrite, sql: str) -> None:
    """The statement's connections first, all at once in sorted order, then the table's lock. The steps
    then never wait for a pool while the lock is held: a holder waiting for a pool whose connections are
    held by sessions waiting for its lock would wait for ever (a cycle no server's deadlock detection
    sees). Before waiting for the lock the session gives back what else it holds idle."""
    await session.backends_for(step_data_sources(db, step, sql), record_write=True)
    session.give_back_idle()
    await _table_lock(session, db, step.table)


async def _table_lock(session: Session, db: LogicalDatabase, table: str) -> None:
    """A named lock per logic table on its first data source, held until the transaction ends (released
    with the upsert locks, proxy.upsert.release_session_locks). Two stepwise writes of one table would
    otherwise take their row locks on several servers in different orders and wait on each other across
    servers, where no deadlock detection sees them, until innodb_lock_wait_timeout; in turn, each selects
    the rows the other left (FOR UPDATE reads the latest committed rows)."""
    from protocol.constants import ErrorCode
    from protocol.errors import ServerError

    assert db.kernel is not None
    rule = db.kernel.rules.sharding.tables[table]  # type: ignore[union-attr]
    source = rule.data_sources[0]
    name = f"shardproxy_stepwise.{db.name}.{table}"[:64]
    held = session.txn.upsert_locks.setdefault(source, [])
    if name in held:
        return
    conn = await session.backend(source, record_write=True)
    rows = await _rows(conn, ExecutionUnit(conn.name, f"SELECT GET_LOCK('{name}', @@innodb_lock_wait_timeout)"))
    if not rows or rows[0][0] != b"1":
        raise ServerError("Lock wait timeout exceeded; try restarting transaction",
                          errno=ErrorCode.LOCK_WAIT_TIMEOUT, sqlstate="HY000")
    held.append(name)


# --- savepoints inside the session's transaction ----------------------------------------------------------


async def _savepoint(session: Session, db: LogicalDatabase, table: str) -> list[Any]:
    """Every data source of the table joins the session's transaction, with a savepoint to go back to."""

    assert db.kernel is not None
    rule = db.kernel.rules.sharding.tables[table]  # type: ignore[union-attr]
    conns = await session.backends_for(sorted(set(rule.data_sources)), record_write=True)
    held = []
    for name in sorted(conns):
        await _ok(conns[name], ExecutionUnit(name, f"SAVEPOINT {_SAVEPOINT}"))
        held.append(conns[name])
    return held


async def _release(conns: list[Any]) -> None:

    for conn in conns:
        await _ok(conn, ExecutionUnit(conn.name, f"RELEASE SAVEPOINT {_SAVEPOINT}"))


# --- values -----------------------------------------------------------------------------------------------


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _introduced(value: bytes, binary: bool, charset: str) -> str:
    """A string literal with the value's exact bytes, whatever sql_mode says of backslashes."""
    if not value:
        return "''"
    return f"_{'binary' if binary else charset} X'{value.hex()}'"


def _literal(value: bytes | None, col: ColumnDefinition41, charset: str) -> str:
    """A SQL literal for a value as the text protocol sent it, for a column of this definition."""
    if value is None:
        return "NULL"
    if col.type in _NUMERIC:
        return value.decode("ascii")
    if col.type == ColumnType.BIT:
        return str(int.from_bytes(value, "big"))
    return _introduced(value, col.character_set == BINARY_CHARSET, charset)


def _routing_value(value: bytes | None, col: ColumnDefinition41, charset: str) -> Any:
    """The Python value the sharding algorithms see for this column value (as for an INSERT's literal)."""
    if value is None:
        return None
    if col.type in _NUMERIC:
        return literal_value(value.decode("ascii"), "n")
    return value.decode(_python_charset(charset), "surrogateescape")


def _image_value(value: bytes | None, db: LogicalDatabase, table: str, column: str, charset: str) -> Any:
    if value is None:
        return None
    kind = (db.metadata.column_type(table, column) or "").lower()
    if kind in ("tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "year"):
        return literal_value(value.decode("ascii"), "n")
    return value.decode(_python_charset(charset), "surrogateescape")


def _image_literal(value: bytes | None, db: LogicalDatabase, table: str, column: str, charset: str) -> str:
    if value is None:
        return "NULL"
    kind = (db.metadata.column_type(table, column) or "").lower()
    if kind == "bit":
        return str(int.from_bytes(value, "big"))
    return _introduced(value, kind in _BINARY_TYPES, charset)


def _python_charset(charset: str) -> str:
    return {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "binary": "latin1"}.get(charset, charset)


__all__ = ["execute_stepwise"]
