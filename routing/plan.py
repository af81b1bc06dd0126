"""What the kernel hands the executor: route units (where) and execution units (what SQL, where).

A route is data, not SQL strings: `RouteUnit` maps logic tables to actual tables on one data source;
`ExecutionUnit` is the rewritten SQL for one unit. The proxy executes units and, when a statement spans
several units, merges their results with `merge_spec` (see `merge.spec`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from merge.spec import MergeSpec


class StatementKind(enum.Enum):
    SELECT = "select"  # returns rows
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    DDL = "ddl"
    OTHER = "other"  # SHOW, SET, transaction control, anything passed through


@dataclass(frozen=True)
class RouteUnit:
    data_source: str
    table_map: Mapping[str, str] = field(default_factory=dict)  # logic (lower case) -> actual


@dataclass(frozen=True)
class ExecutionUnit:
    data_source: str
    sql: str
    params: tuple[Any, ...] | None = None  # per-unit parameters for prepared statements (split INSERTs)
    # a split INSERT: the statement's rows (0-based, in the statement's order) this unit writes, so the proxy can
    # tell which unit's OK answers for the statement's last insert id
    rows: tuple[int, ...] = ()


@dataclass(frozen=True)
class SessionHints:
    """Routing input that comes from the session rather than the SQL text."""

    database_values: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)  # logic table or "" (all)
    table_values: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    data_source: str | None = None
    write_route_only: bool = False
    # a step of a write the proxy runs in steps (routing.stepwise): its ORDER BY / sharding-column SET
    # apply to rows the proxy selected and locked, so they are no reason to refuse or mark it again
    stepwise_inner: bool = False


@dataclass(frozen=True)
class RoutedStatement:
    """The kernel's answer for one statement."""

    kind: StatementKind
    route_units: tuple[RouteUnit, ...]
    execution_units: tuple[ExecutionUnit, ...]
    merge_spec: MergeSpec | None = None  # None: single unit, or rows simply concatenated / counts summed
    generated_keys: tuple[Any, ...] = ()  # keys generated for an INSERT, first row first
    # an INSERT into a sharded table: each row's sharding column values (lower-case names), first row first
    row_values: tuple[Mapping[str, Any], ...] = ()
    last_id_rows: tuple[int, ...] = ()  # an INSERT's rows that call LAST_INSERT_ID(expr)
    write: bool = False  # must go to a primary (for read/write splitting)
    logic_tables: tuple[str, ...] = ()
    # For DESCRIBE/SHOW CREATE TABLE answers: actual table name -> logic name to map back in the result.
    result_table_renames: Mapping[str, str] = field(default_factory=dict)
    # SELECT ... INTO @a, @b: the units run the SELECT without its INTO clause; the proxy takes the one row
    # and assigns these user variables for the session (on every backend connection it uses)
    into_variables: tuple[str, ...] = ()
    into_trailing: bool = False  # the INTO clause came after FROM (MariaDB warns 1287)
    # INSERT ... ON DUPLICATE KEY UPDATE / REPLACE / INSERT IGNORE into a sharded table with a unique key
    # that lacks a sharding column: a routing.upsert.UpsertCheck the proxy runs the statement with
    upsert: Any = None
    # INSERT: "replace" (REPLACE), "update" (ON DUPLICATE KEY UPDATE), "ignore" (INSERT IGNORE) or None: how a row
    # that meets an existing key counts in the statement's OK (`Duplicates:`)
    insert_mode: str | None = None
    # SET @v = (SELECT ...) routed to one unit: the user variables it assigns, whose values the proxy copies
    # to the session's other connections
    set_variables: tuple[str, ...] = ()
    # a write the proxy must run in steps (routing.stepwise.StepwiseWrite): the units are not run as they are
    stepwise: Any = None
    # SELECT on a table inside its resharding window over several nodes: a routing.dualread.DualRead the
    # proxy runs instead of the execution units (which show its first step, for PREVIEW)
    dual_read: Any = None
    # UPDATE / DELETE on a table inside its resharding window over several nodes: a routing.dualread.DualRead
    # whose differing copies the proxy reconciles (DualRead.repair_sql) before it runs the execution units
    dual_repair: Any = None
    # the kernel keeps this very object and hands it out again for the same text (ShardingKernel.route's cache of
    # text-bound routes): what the proxy derives from it may be kept with it
    reused: bool = False

    @property
    def first_generated_key(self) -> int | None:
        """The first id the kernel's key generator made for the INSERT (rows that gave their own id have None in
        `generated_keys`): the id one server reports and LAST_INSERT_ID() takes, as the first one it generated."""
        return next((k for k in self.generated_keys if isinstance(k, int) and not isinstance(k, bool)), None)
