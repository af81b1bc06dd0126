"""Federation plans: a SELECT the kernel cannot distribute, answered by one MariaDB over copies of its tables.

The kernel refuses a SELECT over several data nodes when it cannot merge the nodes' answers exactly
(subqueries, derived tables, CTEs, set operations, window functions, joins that do not run node by node,
aggregates the merge does not implement). Such a statement can still be answered exactly: copy the rows of
the logic tables it reads into scratch tables on ONE data source (the *host*) and run the user's statement
there, with only the table references spliced to the scratch names. MariaDB computes the answer, with the
tables' own column definitions and collations, so nothing is approximated in the proxy.

This module is the pure part (no I/O): which data source hosts the statement, which tables need a scratch
copy, the read that fills each copy, and the statement text with the scratch names spliced in.

* Broadcast tables exist on every data source and single tables on the host are read where they are: no
  copy (a single table on another data source is copied like a sharded one).
* Every *occurrence* of a copied table gets its own scratch table: MariaDB cannot open a TEMPORARY table
  twice in one statement (ER_CANT_REOPEN_TABLE, 1137), which self joins and subqueries on the statement's
  own table would need. Occurrences whose reads are identical are read once and copied on the host.
* A read carries the occurrence's own single-table conjuncts of its WHERE (or of the ON of an inner join)
  when that is exact: only columns of that occurrence, literals and ``?``, comparison / IN / BETWEEN / IS /
  LIKE / AND / OR / NOT, and never on the null-supplying side of an outer join. The read is routed by the
  kernel like any SELECT, so a condition on the sharding column reads one data node only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp

from routing.cache import PlanCache
from routing.model import DatabaseRules, SchemaMetadata
from routing.parse import Shape, node_span, parse_statement, scan_shape

__all__ = ["SCRATCH_PREFIX", "FederationPlan", "ScratchRead", "federation_plan", "plan_for", "preview_rows"]

SCRATCH_PREFIX = "__shardproxy_fed_"  # scratch (TEMPORARY) table names on the host: prefix + read slot

# sqlglot classes a pushed-down conjunct may consist of (row-local, deterministic, regenerated faithfully)
_PUSHABLE: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.Neg, exp.EQ, exp.NEQ, exp.GT,
    exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.In, exp.Between, exp.Is, exp.Like, exp.And, exp.Or, exp.Not,
    exp.Tuple,
)
_OUTER_SIDES = ("LEFT", "RIGHT", "FULL")
_PARAM_MARK = re.compile(r"/\*\?(\d+)\*/")


@dataclass(frozen=True)
class ScratchRead:
    """One occurrence of a copied table: the read that fills its scratch table.

    ``sql`` is a SELECT of the logic table (routed by the kernel like any statement), with ``?`` whose
    values are the statement's parameters at ``params`` (indexes into the client's parameters).
    ``same_as``: the index of an earlier read with the same ``sql`` *and* the same ``params`` (the same rows
    whatever the values bound), whose scratch table is copied instead. Two reads of one text whose ``?`` are
    different parameters (``... WHERE user_id = ? UNION ALL ... WHERE user_id = ?``) read different rows, unless
    the values bound to them are equal (`FederationPlan.bound`).
    """

    slot: int
    table: str  # logic table, lower case
    sql: str
    params: tuple[int, ...] = ()
    same_as: int | None = None
    pushed: bool = False  # some condition was pushed down into the read


@dataclass(frozen=True)
class FederationPlan:
    """How to answer one statement on the host data source."""

    host: str
    reads: tuple[ScratchRead, ...]
    tables: tuple[str, ...]  # every logic table the statement reads (for logs, PREVIEW)
    _pieces: tuple[str | int, ...]  # statement text pieces; an int is a read's slot (its scratch name)
    movable: bool = False  # no single table pins the host: `placed` may move it to where the rows are

    def render(self, names: Mapping[int, str]) -> str:
        """The statement with each copied occurrence's table reference replaced by its scratch table."""
        return "".join(p if isinstance(p, str) else f"`{names[p]}`" for p in self._pieces)

    def read_params(self, read: ScratchRead, params: Sequence[object] | None) -> list[object] | None:
        if params is None:
            return None
        return [params[i] for i in read.params]

    def bound(self, params: Sequence[object] | None) -> FederationPlan:
        """The plan for these parameter values: a read whose text and values (each of the same type) equal an
        earlier read's reads the same rows, so it shares that read's copy (``same_as``) as reads of one text with
        the same parameters always do. The plan itself is kept for every execution: it knows no values."""
        if params is None:
            return self
        seen: dict[tuple[str, tuple[tuple[type, object], ...]], int] = {}
        reads: list[ScratchRead] = []
        for read in self.reads:
            if read.same_as is None:
                key = (read.sql, tuple((type(params[i]), params[i]) for i in read.params))
                try:
                    same = seen.get(key)
                except TypeError:  # an unhashable value: never shared
                    same = None
                else:
                    if same is None:
                        seen[key] = read.slot
                if same is not None:
                    read = replace(read, same_as=same)
            reads.append(read)
        return self if reads == list(self.reads) else replace(self, reads=tuple(reads))

    def placed(self, kernel: Any, params: Sequence[object] | None = None) -> FederationPlan:
        """The plan on the data source that holds most of the nodes its reads route to (ties: the
        configured first), so that as many rows as possible are copied within one server (``INSERT ...
        SELECT``) instead of through the proxy; a read routed to one data source by its sharding
        condition then moves nothing. Only when no single table pins the host."""
        if not self.movable:
            return self
        counts: dict[str, int] = {}
        for read in self.reads:
            if read.same_as is None:
                for unit in kernel.route(read.sql, self.read_params(read, params), None).execution_units:
                    counts[unit.data_source] = counts.get(unit.data_source, 0) + 1
        if not counts:
            return self
        best = max(counts.values())
        host = self.host if counts.get(self.host) == best else next(ds for ds, c in counts.items() if c == best)
        return self if host == self.host else replace(self, host=host)


_CACHE: PlanCache[FederationPlan | None] = PlanCache(256)


def plan_for(sql: str, rules: DatabaseRules, metadata: SchemaMetadata) -> FederationPlan | None:
    """`federation_plan`, cached by the statement text and the rules object."""
    key = f"{id(rules)}:{id(metadata)}:{sql}"
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    plan = federation_plan(sql, rules, metadata)
    if plan is not None:
        _CACHE.put(key, plan)
    return plan


def federation_plan(sql: str, rules: DatabaseRules, metadata: SchemaMetadata) -> FederationPlan | None:
    """The plan for a SELECT the proxy may answer by federation, or None when it may not (not a plain
    SELECT / set operation; locking reads; INTO; user variable assignments; tables of other databases;
    no sharded or remote table to copy)."""
    shape = scan_shape(sql)
    ast = parse_statement(shape)
    if not isinstance(ast, exp.Select | exp.SetOperation):
        return None
    if ast.find(exp.Lock, exp.Into, exp.PropertyEQ) is not None:
        return None
    if re.search(r"\bSQL_CALC_FOUND_ROWS\b|\bINTO\b", sql, re.I):
        return None
    return _Planner(shape, ast, rules, metadata).plan()


@dataclass
class _Occurrence:
    table: exp.Table
    name: str
    category: str  # sharded | broadcast | single


class _Planner:
    def __init__(self, shape: Shape, ast: exp.Expression, rules: DatabaseRules, metadata: SchemaMetadata) -> None:
        self.shape = shape
        self.sql = shape.sql
        self.ast = ast
        self.rules = rules
        self.metadata = metadata
        self.db_name = rules.name.lower()
        # parameter index of each `?` by its text offset
        self.param_at: dict[int, int] = {}
        for start, _end, kind in shape.spans:
            if kind == "p":
                self.param_at[start] = len(self.param_at)

    def plan(self) -> FederationPlan | None:
        occurrences = self.occurrences()
        if occurrences is None or not occurrences:
            return None
        singles = [o for o in occurrences if o.category == "single"]
        single_sources = list(dict.fromkeys(self.metadata.single_table_data_source(o.name) or self.rules.data_sources[0]
                                            for o in singles))
        host = single_sources[0] if len(single_sources) == 1 else self.rules.data_sources[0]
        copied = [o for o in occurrences if o.category == "sharded" or (
            o.category == "single" and (self.metadata.single_table_data_source(o.name) or host) != host)]
        if not copied:
            return None  # nothing spans data sources: the kernel's refusal stands
        edits: list[tuple[int, int, str | int]] = []
        reads: list[ScratchRead] = []
        seen: dict[tuple[str, tuple[int, ...]], int] = {}
        copied_ids = {id(o.table) for o in copied}
        for occ in occurrences:
            span = self.table_span(occ.table)
            if span is None:
                return None
            start, end = span
            if id(occ.table) not in copied_ids:
                db = occ.table.args.get("db")
                if isinstance(db, exp.Identifier):  # `sharding_db`.t: the host knows only its own database
                    ident = node_span(occ.table.this)
                    if ident is None:
                        return None
                    edits.append((start, ident[0], ""))
                continue
            slot = len(reads)
            read_sql, params, pushed = self.read(occ)
            same = seen.get((read_sql, params))
            if same is None:
                seen[(read_sql, params)] = slot
            reads.append(ScratchRead(slot, occ.name, read_sql, params, same, pushed))
            edits.append((start, end, slot))
            if not occ.table.alias:
                edits.append((end, end, f" AS `{occ.name}`"))
        if not self.qualifier_edits(edits):
            return None
        pieces: list[str | int] = []
        pos = 0
        for start, end, what in sorted(edits, key=lambda e: (e[0], e[1])):
            if start < pos:
                return None  # overlapping edits: not a statement shape this planner understands
            pieces.append(self.sql[pos:start])
            pieces.append(what)
            pos = end
        pieces.append(self.sql[pos:])
        return FederationPlan(host, tuple(reads), tuple(dict.fromkeys(o.name for o in occurrences)),
                              tuple(p for p in pieces if p != ""), movable=not singles)

    # -- tables --

    def occurrences(self) -> list[_Occurrence] | None:
        ctes = {c.alias_or_name.lower() for c in self.ast.find_all(exp.CTE)}
        out: list[_Occurrence] = []
        sharding = self.rules.sharding
        for table in self.ast.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier):
                return None  # a table function or an unusual reference: not copied
            name = table.name.lower()
            db_ident = table.args.get("db")
            db = db_ident.name.lower() if isinstance(db_ident, exp.Identifier) else None
            if db is None and (name in ctes or name == "dual"):
                continue
            if table.args.get("catalog") is not None or (db is not None and db != self.db_name):
                return None  # another database's table: the host may not have it
            if table.args.get("partition") is not None or table.args.get("hints"):
                return None
            if sharding is not None and (rule := sharding.table(name)) is not None:
                if rule.window is not None:
                    return None  # inside a resharding window a row may have two copies: copying both is wrong
                category = "sharded"
            elif name in self.rules.broadcast:
                category = "broadcast"
            else:
                category = "single"
            out.append(_Occurrence(table, name, category))
        return out

    def table_span(self, table: exp.Table) -> tuple[int, int] | None:
        """Offsets of ``[db.]name`` of a table reference."""
        ident = node_span(table.this)
        if ident is None:
            return None
        db = table.args.get("db")
        if isinstance(db, exp.Identifier):
            db_span = node_span(db)
            if db_span is None:
                return None
            return db_span[0], ident[1]
        return ident

    def qualifier_edits(self, edits: list[tuple[int, int, str | int]]) -> bool:
        """`sharding_db.t.col`: the logic database prefix of a column is dropped (the host does not know it)."""
        for column in self.ast.find_all(exp.Column):
            db = column.args.get("db")
            if not isinstance(db, exp.Identifier):
                continue
            if column.args.get("catalog") is not None or db.name.lower() != self.db_name:
                return False
            db_span, table = node_span(db), column.args.get("table")
            t_span = node_span(table) if isinstance(table, exp.Identifier) else None
            if db_span is None or t_span is None:
                return False
            edits.append((db_span[0], t_span[0], ""))
        return True

    # -- reads and what they may push down --

    def read(self, occ: _Occurrence) -> tuple[str, tuple[int, ...], bool]:
        ref = (occ.table.alias or occ.name)
        alias = f" AS `{occ.table.alias}`" if occ.table.alias else ""
        base = f"SELECT * FROM `{occ.name}`{alias}"
        conjuncts = self.pushable(occ)
        if not conjuncts:
            return base, (), False
        texts: list[str] = []
        params: list[int] = []
        for conj in conjuncts:
            text, ps = self.render(conj, ref)
            texts.append(f"({text})")
            params.extend(ps)
        return f"{base} WHERE {' AND '.join(texts)}", tuple(params), True

    def pushable(self, occ: _Occurrence) -> list[exp.Expression]:
        table = occ.table
        scope = table.parent
        join: exp.Join | None = None
        if isinstance(scope, exp.Join):
            join = scope
            scope = scope.parent
        elif isinstance(scope, exp.From):
            scope = scope.parent
        else:
            return []
        if not isinstance(scope, exp.Select):
            return []
        joins = scope.args.get("joins") or []
        sides = [str(j.args.get("side") or "").upper() for j in joins]
        kinds = [str(j.args.get("kind") or "").upper() for j in joins]
        if any(k not in ("", "INNER", "CROSS", "STRAIGHT_JOIN") for k in kinds):
            return []
        if join is None:
            if any(s in ("RIGHT", "FULL") for s in sides):
                return []
        elif any(s in _OUTER_SIDES for s in sides):
            return []
        candidates: list[exp.Expression] = []
        where = scope.args.get("where")
        if where is not None:
            candidates.extend(_conjuncts(where.this))
        if not any(s in _OUTER_SIDES for s in sides):
            for j in joins:
                on = j.args.get("on")
                if on is not None:
                    candidates.extend(_conjuncts(on))
        ref = (table.alias or occ.name).lower()
        sources = self.scope_sources(scope)
        known = self.metadata.columns(occ.name)
        known_lower = {c.lower() for c in known} if known else None
        out: list[exp.Expression] = []
        for conj in candidates:
            if self.only_this(conj, ref, sources, known_lower):
                out.append(conj)
        return out

    def scope_sources(self, scope: exp.Select) -> int:
        sources = 0
        from_ = scope.args.get("from_") or scope.args.get("from")
        if from_ is not None:
            sources += 1
        sources += len(scope.args.get("joins") or [])
        return sources

    def only_this(self, conj: exp.Expression, ref: str, sources: int, known: set[str] | None) -> bool:
        columns = 0
        for node in conj.walk():
            if not isinstance(node, _PUSHABLE):
                return False
            if isinstance(node, exp.In) and node.args.get("query") is not None:
                return False
            if isinstance(node, exp.Literal) and node_span(node) is None:
                return False
            if isinstance(node, exp.Column):
                columns += 1
                if node.args.get("db") is not None:
                    return False
                qualifier = node.args.get("table")
                if qualifier is not None:
                    if not isinstance(qualifier, exp.Identifier) or qualifier.name.lower() != ref:
                        return False
                elif sources != 1 or known is None or node.name.lower() not in known:
                    return False  # unqualified: may belong to another table of the scope or an outer one
                elif not isinstance(node.this, exp.Identifier):
                    return False
        return columns > 0

    def render(self, conj: exp.Expression, ref: str) -> tuple[str, list[int]]:
        """The conjunct as SQL for the read: literals verbatim from the user's text (``?`` kept, its
        parameter index remembered), identifiers quoted."""
        copy = conj.copy()
        # the literals of a list (IN) are replaced in one pass over it: one by one, each replace looked its node up
        # in the list, O(n^2) for an IN list of n values (issue 35)
        lists: dict[int, tuple[exp.Expression, str]] = {}
        replaced: dict[int, exp.Expression] = {}
        for lit in list(copy.find_all(exp.Literal)):
            span = node_span(lit)
            assert span is not None
            text = self.sql[span[0]:span[1]]
            if text == "?":
                text = f"/*?{self.param_at[span[0]]}*/?"
            parent, key = lit.parent, lit.arg_key
            if parent is not None and isinstance(parent.args.get(key), list):
                replaced[id(lit)] = exp.var(text)
                lists.setdefault(id(parent.args[key]), (parent, key))
            else:
                lit.replace(exp.var(text))
        for parent, key in lists.values():
            parent.set(key, [replaced.get(id(child), child) for child in parent.args[key]])
        rendered = copy.sql(dialect="mysql", identify=True)
        params = [int(m.group(1)) for m in _PARAM_MARK.finditer(rendered)]
        return _PARAM_MARK.sub("", rendered), params


def scratch_names(plan: FederationPlan) -> dict[int, str]:
    return {read.slot: f"{SCRATCH_PREFIX}{read.slot}" for read in plan.reads}


def preview_rows(plan: FederationPlan, kernel: Any, params: Sequence[object] | None = None
                 ) -> list[tuple[str, str, str]]:
    """PREVIEW / EXPLAIN of a federated statement: (step, data source, SQL) per copy read and the answer.
    `kernel`: the routing.kernel.ShardingKernel that routes the reads."""
    plan = plan.bound(params).placed(kernel, params)
    names = scratch_names(plan)
    rows: list[tuple[str, str, str]] = []
    for read in plan.reads:
        target = names[read.slot]
        if read.same_as is not None:
            rows.append(("copy", plan.host, f"INSERT INTO `{target}` SELECT * FROM `{names[read.same_as]}`"))
            continue
        routed = kernel.route(read.sql, plan.read_params(read, params), None)
        for unit in routed.execution_units:
            where = "" if unit.data_source == plan.host else f" (streamed to {plan.host})"
            rows.append(("copy", unit.data_source, f"/* into {target}{where} */ {unit.sql}"))
    rows.append(("answer", plan.host, plan.render(names)))
    return rows


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]
