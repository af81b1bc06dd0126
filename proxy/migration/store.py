"""Migration job state, kept in a `shardproxy` schema on the logical database's first data source, so that
a restarted proxy resumes a copy where it stopped (the position is the last key copied per data node)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from protocol.binary import value_to_sql_literal
from protocol.packets import ERRPacket

SCHEMA = "shardproxy"
TABLE = f"{SCHEMA}.migration_job"
DDL = (
    f"CREATE DATABASE IF NOT EXISTS {SCHEMA}",
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id VARCHAR(64) NOT NULL PRIMARY KEY, database_name VARCHAR(128) NOT "
    "NULL, table_name VARCHAR(128) NOT NULL, state LONGTEXT NOT NULL, updated DATETIME(3) NOT NULL)",
)

#: phases, as SHOW MIGRATION STATUS prints them
COPYING, CATCHING_UP, READY = "copying", "catching up", "ready"
COMMITTED, ROLLED_BACK, FAILED = "committed", "rolled back", "failed"
ACTIVE = (COPYING, CATCHING_UP, READY)


@dataclass
class JobState:
    id: str
    database: str
    table: str
    phase: str = COPYING
    total: int = 0  # rows on every data node when the job started
    scanned: int = 0  # rows looked at
    copied: int = 0  # rows written to their new node
    position: dict[str, str | None] = field(default_factory=dict)  # data node -> last key done (hex), "done"
    sources: list[str] = field(default_factory=list)  # data nodes holding rows at the start (the old ones)
    started: float = 0.0
    finished: float = 0.0
    error: str = ""
    pause_ms: float | None = None  # COMMIT's write pause
    deleted: int = 0  # rows COMMIT removed from their old nodes (ROLLBACK: copies removed)
    check: list[dict[str, Any]] = field(default_factory=list)  # CHECK MIGRATION's rows
    check_time: float = 0.0
    binlog: dict[str, list[Any]] = field(default_factory=dict)  # source data source -> [file, position], [] off
    gtid: dict[str, str] = field(default_factory=dict)  # source data source -> @@gtid_binlog_pos applied up to
    applied: int = 0  # binlog row events applied
    caught_up_at: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobState:
        data = json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


async def _run(conn: Any, sql: str) -> Any:
    answer = await conn.execute(sql)
    if isinstance(answer, ERRPacket):
        raise RuntimeError(f"{answer.message} ({sql[:80]})")
    return answer


async def save(conn: Any, state: JobState) -> None:
    for sql in DDL:
        await _run(conn, sql)
    await _run(conn, f"REPLACE INTO {TABLE} (id, database_name, table_name, state, updated) VALUES ("
                     f"{value_to_sql_literal(state.id)}, {value_to_sql_literal(state.database)}, "
                     f"{value_to_sql_literal(state.table)}, {value_to_sql_literal(state.to_json())}, NOW(3))")


async def load(conn: Any, database: str) -> list[JobState]:
    for sql in DDL:
        await _run(conn, sql)
    rows = await _run(conn, f"SELECT state FROM {TABLE} WHERE database_name = {value_to_sql_literal(database)} "
                            "ORDER BY updated")
    return [JobState.from_json(r[0].decode()) for r in rows or ()]
