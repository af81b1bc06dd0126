"""Upserts into sharded tables whose unique keys do not contain the sharding columns (issue 13, item 11).

MySQL's `INSERT ... ON DUPLICATE KEY UPDATE`, `REPLACE` and `INSERT IGNORE` act on the existing row that
has the new row's value of a PRIMARY or UNIQUE key. The unique index of one actual table only sees that
table's rows: when a key does not contain the sharding columns (t_order's PRIMARY KEY (order_id), sharded
by user_id), an existing row with that key may live on another data node than the one the new row routes
to, and sending the row to its own node inserts a second row with the same key. Such a key is *checked*:

* the kernel knows the table's keys from the data sources' metadata (`SchemaMetadata.unique_keys`) and, for
  each row and checked key, every data node a row with that key value could live on (the key's own
  sharding columns narrow it: order_id routes the table level, not the data source);
* the proxy (`proxy.upsert`) then runs the statement inside a transaction: it takes a named lock per key
  value (GET_LOCK on the first data source, so that two sessions upserting the same value go one after the
  other whatever node each would write to), looks for existing rows with locking reads
  (``SELECT ... FOR UPDATE``), and
  - when no row conflicts on another node and no two rows of the statement with the same key value go to
    different nodes, runs the statement as usual (one batch per node: each node's unique index does the
    rest);
  - otherwise runs it row by row, in order, each row where MySQL would act: ON DUPLICATE KEY UPDATE and
    IGNORE on the node holding the row that conflicts on the first key (in the server's key order), so
    that the node's own statement updates it (``VALUES(col)`` and all) or skips it with MariaDB's warning;
    REPLACE deletes the conflicting rows on other nodes and replaces on the row's own node.

Keys that contain every sharding column (the ordinary case) change nothing: no lookup, no lock. What cannot
be decided exactly is refused with 1235 naming the table, the key and what to do: a key column given an
expression, an ON DUPLICATE KEY UPDATE that assigns a checked key's column (the new value could collide on
another node), a prefix key, a non-integral value for an integer key column.

Everything here is pure: statements are rendered as text (values as the user wrote them, or a parameter's
value as an exact literal: strings as hex with the session's character set introducer, so no escaping mode
matters), the proxy runs them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from protocol.binary import value_to_sql_literal
from routing.conditions import Const, Slot, resolve_value, value_ref
from routing.errors import RoutingError
from routing.model import (
    ColumnInfo,
    ComplexStrategy,
    DataNode,
    HintStrategy,
    NoneStrategy,
    StandardStrategy,
    TableRule,
    UniqueKey,
)
from routing.parse import UNKNOWN, Shape
from routing.plan import ExecutionUnit

MODES = {"update": "INSERT ... ON DUPLICATE KEY UPDATE", "replace": "REPLACE", "ignore": "INSERT IGNORE"}

_INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "varbinary", "tinyblob", "blob",
               "mediumblob", "longblob", "json", "long", "long varchar"}
_BINARY_TYPES = {"varbinary", "tinyblob", "blob", "mediumblob", "longblob"}


@dataclass(frozen=True)
class KeyColumn:
    name: str  # lower case
    kind: str  # "int": compared as the integer it is; "text": CONCAT(v) under the column's collation;
    #            "cast": CAST(v AS <cast>), the value the column stores; "plain": as written
    cast: str | None = None
    rtrim: bool = False  # trailing spaces do not count (PAD SPACE collations; CHAR)
    charset: str | None = None  # None: a binary string
    collation: str | None = None


@dataclass(frozen=True)
class KeyPlan:
    name: str
    columns: tuple[KeyColumn, ...]
    checked: bool  # lacks a sharding column: rows with equal values may sit on different data nodes
    coarse: bool  # one lock for the whole key (some column's equality the proxy cannot name exactly)


# one key column's value in one row: ("slot", value index, negated) | ("const", value) | ("null",) |
# ("free",) (omitted, AUTO_INCREMENT or DEFAULT NULL: no constraint) | ("generated",) (the key generator's) |
# ("expr",) (an expression the proxy cannot evaluate)
ValueSpec = tuple[Any, ...]


@dataclass(frozen=True)
class UpsertSpec:
    """Compiled once per statement shape (kept in the InsertPlan)."""

    mode: str  # update | replace | ignore
    database: str  # the logical database (lock names)
    table: str  # logic table as the rule names it
    keys: tuple[KeyPlan, ...]  # every unique key, in the server's order
    values: tuple[tuple[tuple[ValueSpec, ...], ...], ...]  # [row][key][column]
    lock_source: str


def upsert_spec(
    *,
    mode: str,
    rule: TableRule,
    metadata: Any,
    database: str,
    lock_source: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[exp.Expression]],
    key_column: str | None,
    conflict: exp.Expression | None,
    slot_at: Callable[[int], int | None],
) -> UpsertSpec | None:
    """The check a statement of this shape needs, or None when every key contains the sharding columns."""
    unique_keys = getattr(metadata, "unique_keys", None)
    column_info = getattr(metadata, "column_info", None)
    if unique_keys is None or column_info is None or len(rule.data_nodes) < 2:
        return None
    table = rule.logic_table
    keys: tuple[UniqueKey, ...] = tuple(unique_keys(table) or ())
    verb = MODES[mode]
    plans: list[KeyPlan] = []
    for key in keys:
        checked = not _local(rule, key.columns) and (key_column is None or key_column not in key.columns)
        if checked and key.prefix:
            raise RoutingError(
                f"{verb} into sharded table {table}: unique key {key.name} ({', '.join(key.columns)}) indexes a "
                f"prefix of a column and does not contain the sharding columns "
                f"({', '.join(sorted(rule.sharding_columns))}), so a conflicting row may sit on another data node "
                "and the proxy cannot look it up exactly; use a plain INSERT, or a key on whole columns"
            )
        infos = [column_info(table, c) for c in key.columns]
        if checked and any(i is None for i in infos):
            raise RoutingError(
                f"{verb} into sharded table {table}: the proxy does not know the column types of unique key "
                f"{key.name}, which does not contain the sharding columns; check that the table exists on every "
                "data source"
            )
        kcs = tuple(_key_column(c, i) for c, i in zip(key.columns, infos, strict=True))
        plans.append(KeyPlan(key.name, kcs, checked, any(c.kind in ("cast", "plain") for c in kcs)))
    checked = [p for p in plans if p.checked]
    if not checked:
        return None
    if conflict is not None:
        for assignment in conflict.expressions or ():
            target = assignment.this if isinstance(assignment, exp.EQ) else None
            if not isinstance(target, exp.Column) or is_identity_assignment(assignment):
                continue
            for plan in checked:
                if target.name.lower() in (c.name for c in plan.columns):
                    raise RoutingError(
                        f"INSERT ... ON DUPLICATE KEY UPDATE into sharded table {table} assigns column "
                        f"{target.name} of unique key {plan.name}, which does not contain the sharding columns "
                        f"({', '.join(sorted(rule.sharding_columns))}): the new value could collide with a row on "
                        "another data node; update that column with a separate UPDATE"
                    )
    values: list[tuple[tuple[ValueSpec, ...], ...]] = []
    for i, row in enumerate(rows):
        per_key: list[tuple[ValueSpec, ...]] = []
        for plan in plans:
            specs: list[ValueSpec] = []
            for kc in plan.columns:
                spec = _value_spec(kc.name, columns, row, key_column, column_info(table, kc.name), slot_at)
                if plan.checked and spec[0] in ("expr", "default"):
                    what = "an expression" if spec[0] == "expr" else "no value (its default)"
                    raise RoutingError(
                        f"{verb} into sharded table {table}: row {i + 1} gives column {kc.name} of unique key "
                        f"{plan.name} {what}; that key does not contain the sharding columns "
                        f"({', '.join(sorted(rule.sharding_columns))}), so the proxy must look the value up on "
                        "every data node a conflicting row could be on: give the column a literal value or a "
                        "parameter"
                    )
                specs.append(spec)
            per_key.append(tuple(specs))
        values.append(tuple(per_key))
    return UpsertSpec(mode, database, table, tuple(plans), tuple(values), lock_source)


def is_identity_assignment(assignment: exp.Expression) -> bool:
    """``c = c`` in ON DUPLICATE KEY UPDATE (the "insert or leave as is" idiom), or ``c = LAST_INSERT_ID(c)``
    (the idiom that makes the existing row's id LAST_INSERT_ID()): the column keeps its value."""
    if not isinstance(assignment, exp.EQ):
        return False
    target, value = assignment.this, assignment.expression
    while isinstance(value, exp.Paren):
        value = value.this
    if isinstance(value, exp.Anonymous) and str(value.this).upper() == "LAST_INSERT_ID" and len(value.expressions) == 1:
        value = value.expressions[0]
    return (isinstance(target, exp.Column) and isinstance(value, exp.Column)
            and target.name.lower() == value.name.lower()
            and (not value.table or not target.table or value.table.lower() == target.table.lower()))


def _local(rule: TableRule, columns: Sequence[str]) -> bool:
    """Do equal values of these columns always route to one data node (the key holds every sharding column)?"""
    cols = set(columns)
    for strategy in (rule.database_strategy, rule.table_strategy):
        if isinstance(strategy, NoneStrategy):
            continue
        if isinstance(strategy, StandardStrategy):
            if strategy.column.lower() not in cols:
                return False
        elif isinstance(strategy, ComplexStrategy):
            if not all(c.lower() in cols for c in strategy.columns):
                return False
        elif isinstance(strategy, HintStrategy):
            return False  # hints place rows, not values
    return True


def _key_column(name: str, info: ColumnInfo | None) -> KeyColumn:
    if info is None:
        return KeyColumn(name, "plain")
    t = info.data_type
    if t in _INTEGER_TYPES:
        return KeyColumn(name, "int")
    if t in _TEXT_TYPES:
        binary = t in _BINARY_TYPES or info.charset in (None, "binary")
        nopad = info.collation is not None and ("nopad" in info.collation or "_0900_" in info.collation)
        return KeyColumn(name, "text", rtrim=t == "char" or (not binary and not nopad),
                         charset=None if binary else info.charset, collation=None if binary else info.collation)
    if t == "decimal" and info.precision is not None:
        return KeyColumn(name, "cast", f"DECIMAL({info.precision},{info.scale or 0})")
    if t in ("datetime", "timestamp"):
        return KeyColumn(name, "cast", f"DATETIME({info.datetime_precision or 0})")
    if t == "time":
        return KeyColumn(name, "cast", f"TIME({info.datetime_precision or 0})")
    if t == "date":
        return KeyColumn(name, "cast", "DATE")
    if t in ("double", "float"):
        return KeyColumn(name, "cast", t.upper())
    if t == "binary" and info.length is not None:
        return KeyColumn(name, "cast", f"BINARY({info.length})")  # stored padded with 0x00
    return KeyColumn(name, "plain")


def _value_spec(
    column: str,
    columns: Sequence[str],
    row: Sequence[exp.Expression],
    key_column: str | None,
    info: ColumnInfo | None,
    slot_at: Callable[[int], int | None],
) -> ValueSpec:
    if column in columns:
        node = row[columns.index(column)]
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Null):
            return ("null",)
        if isinstance(node, exp.Var) and node.name.upper() == "DEFAULT":
            return _omitted(info)
        ref = value_ref(node, slot_at)
        if isinstance(ref, Slot):
            return ("slot", ref.index, ref.negate)
        if isinstance(ref, Const):
            return ("const", ref.value)
        return ("expr",)
    if column == key_column:
        return ("generated",)
    return _omitted(info)


def _omitted(info: ColumnInfo | None) -> ValueSpec:
    if info is not None and (info.auto_increment or (info.nullable and info.default_null)):
        return ("free",)
    return ("default",)


# --- per execution ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyValue:
    key: int  # index in UpsertSpec.keys
    values: tuple[Any, ...]  # per column: the value (an int for integer columns)
    candidates: tuple[DataNode, ...]  # where a row with this value may live (the row's node for unchecked keys)


@dataclass(frozen=True)
class UpsertRow:
    index: int
    home: DataNode  # the node the row routes to
    keys: tuple[KeyValue, ...]  # the keys this row gives a whole non-NULL value
    unknown: tuple[int, ...] = ()  # unchecked keys given an expression (not looked up)


RowRenderer = Callable[[int, DataNode], ExecutionUnit]


@dataclass(frozen=True)
class UpsertCheck:
    """What one execution of a checked upsert needs: its rows with their key values and candidate nodes,
    and the statements the proxy runs (rendered here)."""

    spec: UpsertSpec
    rows: tuple[UpsertRow, ...]
    shape: Shape
    params: tuple[Any, ...] | None
    param_index: tuple[int | None, ...]
    render_row: RowRenderer  # row i alone, for one node (the user's statement with only that row)

    @property
    def mode(self) -> str:
        return self.spec.mode

    @property
    def lock_source(self) -> str:
        return self.spec.lock_source

    # -- locks --

    def lock_names(self, charset: str) -> tuple[list[list[str | None]], str | None]:
        """Per row, per key: the lock name of its value (None for keys that are not checked or not given),
        as far as Python can name them; and a SELECT that names the rest (text values: the collation's
        weight string decides equality), whose one row lists those names in row/key order."""
        names: list[list[str | None]] = []
        sql_parts: list[str] = []
        for row in self.rows:
            per: list[str | None] = [None] * len(self.spec.keys)
            for kv in row.keys:
                plan = self.spec.keys[kv.key]
                if not plan.checked:
                    continue
                if plan.coarse:
                    per[kv.key] = self._name(plan, [])
                elif all(c.kind == "int" for c in plan.columns):
                    per[kv.key] = self._name(plan, [str(v) for v in kv.values])
                else:
                    per[kv.key] = ""  # named by the SELECT
                    sql_parts.append(self._name_sql(row, kv, charset))
            names.append(per)
        return names, ("SELECT " + ", ".join(sql_parts)) if sql_parts else None

    def _prefix(self, plan: KeyPlan) -> list[str]:
        return [self.spec.database.lower(), self.spec.table.lower(), plan.name.lower()]

    def _name(self, plan: KeyPlan, parts: list[str]) -> str:
        """`shp:` + SHA1 of database, table, key and the values, 0x1F apart (what `_name_sql` computes)."""
        text = "\x1f".join([*self._prefix(plan), *parts])
        return "shp:" + hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()

    def _name_sql(self, row: UpsertRow, kv: KeyValue, charset: str) -> str:
        plan = self.spec.keys[kv.key]
        parts = [_quote_string(p) for p in self._prefix(plan)]
        for i, kc in enumerate(plan.columns):
            if kc.kind == "int":
                parts.append(_quote_string(str(kv.values[i])))
                continue
            raw = f"CONCAT({self._raw(row.index, kv.key, i, charset)})"
            if kc.rtrim:
                raw = f"RTRIM({raw})"
            if kc.charset is None:
                parts.append(f"HEX(CAST({raw} AS BINARY))")
            else:
                parts.append(f"HEX(WEIGHT_STRING(CONVERT({raw} USING {kc.charset}) COLLATE {kc.collation}))")
        return f"CONCAT('shp:', SHA1(CONCAT_WS(CHAR(31), {', '.join(parts)})))"

    # -- statements --

    def probe(self, node: DataNode, rows: Sequence[int], charset: str) -> ExecutionUnit:
        """Does any of these rows conflict with a row on `node` (one that is not the row's own node)?"""
        conds: list[str] = []
        for i in rows:
            row = self.rows[i]
            for kv in row.keys:
                if self.spec.keys[kv.key].checked and node in kv.candidates:
                    conds.append(self._cond(row, kv, charset))
        return ExecutionUnit(node.data_source, f"SELECT 1 FROM {_ident(node.table)} WHERE "
                             + " OR ".join(f"({c})" for c in conds) + " LIMIT 1 FOR UPDATE")

    def probe_nodes(self) -> dict[DataNode, list[int]]:
        """Per node: the rows for which it is a candidate of some checked key but not their own node."""
        out: dict[DataNode, list[int]] = {}
        for pos, row in enumerate(self.rows):
            for kv in row.keys:
                if not self.spec.keys[kv.key].checked:
                    continue
                for node in kv.candidates:
                    if node != row.home and pos not in out.setdefault(node, []):
                        out[node].append(pos)
        return {n: rs for n, rs in out.items() if rs}

    def lookup(self, pos: int, node: DataNode, charset: str) -> tuple[ExecutionUnit, tuple[int, ...]] | None:
        """A locking read of the rows on `node` that conflict with row `pos`: one row per conflicting row,
        one flag per key (in the returned key order) saying whether it conflicts on that key."""
        row = self.rows[pos]
        kvs = [kv for kv in row.keys if node in kv.candidates]
        if not kvs:
            return None
        conds = [self._cond(row, kv, charset) for kv in kvs]
        sql = (f"SELECT {', '.join(f'({c}) IS TRUE' for c in conds)} FROM {_ident(node.table)} WHERE "
               + " OR ".join(f"({c})" for c in conds) + " FOR UPDATE")
        return ExecutionUnit(node.data_source, sql), tuple(kv.key for kv in kvs)

    def delete(self, pos: int, node: DataNode, key: int, charset: str) -> ExecutionUnit:
        row = self.rows[pos]
        kv = next(kv for kv in row.keys if kv.key == key)
        return ExecutionUnit(node.data_source,
                             f"DELETE FROM {_ident(node.table)} WHERE {self._cond(row, kv, charset)}")

    def statement(self, pos: int, node: DataNode) -> ExecutionUnit:
        return self.render_row(self.rows[pos].index, node)

    def _cond(self, row: UpsertRow, kv: KeyValue, charset: str) -> str:
        plan = self.spec.keys[kv.key]
        parts = []
        for i, kc in enumerate(plan.columns):
            parts.append(f"{_ident(kc.name)} = {self._value(row, kv, i, charset)}")
        return " AND ".join(parts)

    def _value(self, row: UpsertRow, kv: KeyValue, i: int, charset: str) -> str:
        kc = self.spec.keys[kv.key].columns[i]
        if kc.kind == "int":
            return str(kv.values[i])
        raw = self._raw(row.index, kv.key, i, charset)
        if kc.kind == "text":
            return f"CONCAT({raw})"
        if kc.kind == "cast":
            return f"CAST({raw} AS {kc.cast})"
        return raw

    def _raw(self, index: int, key: int, i: int, charset: str) -> str:
        """The value as the statement gives it: the literal's text, or the parameter as an exact literal."""
        spec = self.spec.values[index][key][i]
        if spec[0] == "const":
            return value_to_sql_literal(spec[1])
        assert spec[0] == "slot", spec
        k, negate = spec[1], spec[2]
        start, end, kind = self.shape.spans[k]
        if kind != "p":
            return ("-" if negate else "") + self.shape.sql[start:end]
        p = self.param_index[k]
        value = self.params[p] if self.params is not None and p is not None and p < len(self.params) else None
        return ("-" if negate else "") + _param_literal(value, charset)


def _param_literal(value: Any, charset: str) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"_{charset} X'{bytes(value).hex()}'"  # the client's bytes, in its character set
    if isinstance(value, str):
        return f"_utf8mb4 X'{value.encode('utf-8', 'surrogateescape').hex()}'"
    return value_to_sql_literal(value)


def _quote_string(text: str) -> str:
    return "_utf8mb4 X'" + text.encode("utf-8", "surrogateescape").hex() + "'"


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def check_rows(
    spec: UpsertSpec,
    rule: TableRule,
    homes: Sequence[DataNode],
    values: Sequence[Any],
    route: Callable[[dict[str, Any]], list[DataNode]],
) -> tuple[UpsertRow, ...]:
    """Each row's key values and candidate nodes (`route` routes a partial row: the key's sharding columns)."""
    verb = MODES[spec.mode]
    out: list[UpsertRow] = []
    for index, (home, per_key) in enumerate(zip(homes, spec.values, strict=True)):
        kvs: list[KeyValue] = []
        unknown: list[int] = []
        for k, (plan, specs) in enumerate(zip(spec.keys, per_key, strict=True)):
            if any(s[0] in ("null", "free", "generated") for s in specs):
                continue
            if any(s[0] in ("expr", "default") for s in specs):
                unknown.append(k)  # (only unchecked keys get here: checked ones are refused at compile time)
                continue
            resolved: list[Any] = []
            for kc, s in zip(plan.columns, specs, strict=True):
                v = s[1] if s[0] == "const" else resolve_value(Slot(s[1], s[2]), values)
                if v is UNKNOWN:
                    v = None  # a NULL parameter (or a missing one): no constraint
                if v is None:
                    break
                if kc.kind == "int":
                    v = _integer(v, spec, plan, kc, index, verb)
                resolved.append(v)
            else:
                if plan.checked:
                    sharding = {kc.name: resolved[i] for i, kc in enumerate(plan.columns)
                                if kc.name in rule.sharding_columns}
                    candidates = tuple(route(sharding))
                    if home not in candidates:
                        candidates = (*candidates, home)
                else:
                    candidates = (home,)
                kvs.append(KeyValue(k, tuple(resolved), candidates))
        out.append(UpsertRow(index, home, tuple(kvs), tuple(unknown)))
    return tuple(out)


def _integer(v: Any, spec: UpsertSpec, plan: KeyPlan, kc: KeyColumn, index: int, verb: str) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    try:
        if isinstance(v, bytes | bytearray):
            v = bytes(v).decode("ascii")
        d = Decimal(str(v).strip())
        if d.is_finite() and d == d.to_integral_value():
            return int(d)
    except (InvalidOperation, UnicodeDecodeError, ValueError):
        pass
    raise RoutingError(
        f"{verb} into sharded table {spec.table}: row {index + 1} gives integer column {kc.name} of unique key "
        f"{plan.name} the value {v!r}, which is not an integer; the proxy looks that key up on other data nodes "
        "by its exact value: give an integer"
    )


__all__ = ["MODES", "KeyPlan", "KeyValue", "UpsertCheck", "UpsertRow", "UpsertSpec", "check_rows",
           "is_identity_assignment", "upsert_spec"]
