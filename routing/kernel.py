"""The SQL kernel's entry point: statement in, `RoutedStatement` out.

``ShardingKernel.route`` scans the statement's shape (cheap, no sqlglot), looks the shape up in the plan
cache and, on a miss, compiles a plan: sqlglot classifies the statement and finds its tables and
conditions, `routing.rewrite` turns the original text into templates. Executing a plan only resolves the
current values, evaluates the sharding algorithms (`routing.route`) and renders the templates, so repeated
shapes never touch the parser. Everything here is a pure function of (SQL, params, rules, metadata, hints).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from typing import Any

from sqlglot import exp

from routing.autoinc import NULL as AUTO_NULL
from routing.autoinc import AutoIncrement, zero_is_value
from routing.cache import PlanCache
from routing.conditions import (
    TRUE,
    ColumnClasses,
    ColumnEq,
    ColumnRef,
    Cond,
    Eq,
    chain,
    conjuncts,
    equivalent_columns,
    extract,
    make_and,
    project,
    value_ref,
)
from routing.distribute import OuterJoins, construct_refusal, replica_refusal, shown
from routing.errors import RoutingError
from routing.hints import CommentHints, merge_hints, parse_comment_hints, parse_hint_comments
from routing.into import IntoClause, find_into
from routing.lists import LIST_MIN, compact
from routing.model import (
    ComplexStrategy,
    DatabaseRules,
    DataNode,
    HintStrategy,
    NoneStrategy,
    SchemaMetadata,
    ShardingStrategy,
    StandardStrategy,
    TableRule,
)
from routing.parse import (
    ANSI_QUOTES,
    NO_AUTO_VALUE_ON_ZERO,
    PIPES_AS_CONCAT,
    TEXT_MODES,
    Shape,
    TextShapes,
    Token,
    ansi_backquoted,
    is_replace,
    node_span,
    node_start,
    parse_statement,
    reading,
    scan_shape,
    tokenize,
)
from routing.pipes import pipes_as_concat
from routing.plan import ExecutionUnit, RoutedStatement, RouteUnit, SessionHints, StatementKind
from routing.point import PointPlan, point_plan
from routing.rewrite import AutoSlot, Edit, InListSlot, KeySlot, TableSlot, Template, build_template
from routing.route import (
    NODE,
    SOURCE,
    FixedPlan,
    InsertPlan,
    InsertRow,
    JoinLayout,
    NodesPlan,
    Plan,
    SetCheck,
    ShardedPlan,
    build_units,
    param_indexes,
)
from routing.upsert import is_identity_assignment, upsert_spec

__all__ = ["ShardingKernel", "parse_comment_hints"]

_SHAPE_TEXT_LIMIT = 4096  # characters: longer prepared texts are scanned at every execute
PER_UNIT_MIN = 32  # values in an IN list from which each unit gets only its own (rewrite.InListSlot)
_ROUTE_KEY_PARAMS = 1024  # parameters: a statement with more has no route kept (ShardingKernel._routes)
_ROUTE_TEXT_LIMIT = 65536  # characters: nor has a longer text
_SKELETON_TEXT_LIMIT = 16384  # characters: longer texts are scanned (routing.parse.TextShapes: shorter ones)

_INTO = re.compile(r"\binto\b", re.I)
_FIRST_WORD = re.compile(r"\s*(?:(?:/\*.*?\*/|--[^\n]*\n|#[^\n]*\n)\s*)*(\w+)", re.S)
_KINDS = {
    "SELECT": StatementKind.SELECT,
    "WITH": StatementKind.SELECT,
    "INSERT": StatementKind.INSERT,
    "REPLACE": StatementKind.INSERT,
    "UPDATE": StatementKind.UPDATE,
    "DELETE": StatementKind.DELETE,
    "CREATE": StatementKind.DDL,
    "ALTER": StatementKind.DDL,
    "DROP": StatementKind.DDL,
    "TRUNCATE": StatementKind.DDL,
    "RENAME": StatementKind.DDL,
}


def first_word_kind(sql: str) -> StatementKind:
    """Classify without parsing (direct routes must work even for SQL sqlglot cannot read)."""
    m = _FIRST_WORD.match(sql)
    return _KINDS.get(m.group(1).upper(), StatementKind.OTHER) if m else StatementKind.OTHER


_GENERATIONS = itertools.count(1)


class ShardingKernel:
    """Routes and rewrites statements of one logical database; thread-compatible, no I/O."""

    def __init__(self, rules: DatabaseRules, metadata: SchemaMetadata, *, plan_cache_size: int = 1024) -> None:
        self.rules = rules
        self.metadata = metadata
        self._cache: PlanCache[Plan] = PlanCache(plan_cache_size)
        # the shapes of prepared statements' texts (parameters as `?`: the text repeats exactly at every
        # execute, so its scan is done once); short texts only
        self._shapes: PlanCache[Shape] = PlanCache(plan_cache_size)
        # the last text statement scanned: the proxy's fast path asks `route_point` and then, for a
        # statement on several nodes, `route` for the same text; one scan serves both
        self._last: Shape | None = None
        self._text_shapes = TextShapes(plan_cache_size)
        # new at `invalidate`: a route worked out before it is stale; unique across kernels, so that a
        # statement's kept plan (`prepared_point`) is never taken for the plan of a kernel that replaced this one
        self.generation = next(_GENERATIONS)
        # Whole routes of multi-node SELECTs whose nodes no value decides (`_route_is_text_bound`), by
        # their text (and typed parameters): a scatter statement repeated is not routed again
        self._routes: PlanCache[RoutedStatement] = PlanCache(plan_cache_size)
        # issue 35: plans of compact texts (routing.lists), kept apart: each expects its lists at execute
        self._compact_plans: PlanCache[Plan] = PlanCache(plan_cache_size)
        # issue 34: a kernel of the same rules per sql_mode that reads text otherwise (`route(..., mode=)`), each with
        # caches of its own (a text reads differently under ANSI_QUOTES or NO_BACKSLASH_ESCAPES)
        self._modes: dict[int, _ModeKernel] = {}
        self._plan_cache_size = plan_cache_size

    @property
    def cache(self) -> PlanCache[Plan]:
        return self._cache

    def invalidate(self) -> None:
        """Drop every cached plan (rules or metadata changed)."""
        self._cache.clear()
        self._shapes.clear()
        self._routes.clear()
        self._compact_plans.clear()
        self._modes = {}
        self._last = None
        self.generation = next(_GENERATIONS)

    def _shape(self, sql: str, params: Sequence[Any] | None) -> Shape:
        if params is not None:
            shape = self._shapes.get(sql)
            if shape is None:
                shape = scan_shape(sql)
                if len(sql) <= _SHAPE_TEXT_LIMIT:
                    self._shapes.put(sql, shape)
            return shape
        last = self._last
        if last is not None and last.sql == sql:
            return last
        # a long text (a list of values, many rows): its digit runs cost more to split and compare than its scan
        shape = self._last = self._text_shapes.shape(sql) if len(sql) <= _SKELETON_TEXT_LIMIT else scan_shape(sql)
        return shape

    def route(
        self, sql: str, params: Sequence[Any] | None = None, hints: SessionHints | None = None, mode: int = 0
    ) -> RoutedStatement:
        """The statement's route; `mode`: the session's sql_mode flags that change how text reads
        (routing.parse.NO_BACKSLASH_ESCAPES, ANSI_QUOTES, PIPES_AS_CONCAT) or what a value means
        (NO_AUTO_VALUE_ON_ZERO); other bits are ignored."""
        if mode & NO_AUTO_VALUE_ON_ZERO:
            with zero_is_value(True):
                return self.route(sql, params, hints, mode & ~NO_AUTO_VALUE_ON_ZERO)
        if mode & TEXT_MODES:
            return self._in_mode(mode & TEXT_MODES).route_text(sql, params, hints)
        comment: CommentHints | None = None
        if "/*" in sql:
            comment = parse_hint_comments(sql)
            if comment.present:
                hints = merge_hints(hints, comment.hints)
        if hints is not None and hints.data_source:
            return self._direct(sql, params, hints)
        key = _route_key(sql, params) if hints is None and comment is None else None
        if key is not None:
            known = self._routes.get(key)
            if known is not None:
                self._cache.hits += 1  # its plan was not made anew (shardproxy_plan_cache_hits_total)
                return known
        shape = self._shape(sql, params)
        cut = self._compact(shape, params, hints) if len(shape.spans) >= LIST_MIN else None  # issue 35
        if cut is not None:
            plan, routed = cut
        else:
            plan = self._cache.get(shape.key)
            if plan is None or not plan.accepts(shape):
                plan = point_plan(compile_plan(shape, self.rules, self.metadata), shape)  # routing.point
                self._cache.put(shape.key, plan)
            routed = plan.execute(shape, params, hints)
        if comment is not None and comment.skip_sql_rewrite:
            routed = _unrewritten(routed, sql, params)
        elif key is not None and self._route_is_text_bound(plan, routed):
            routed = dc_replace(routed, reused=True)
            self._routes.put(key, routed)
        return routed

    def _in_mode(self, mode: int) -> _ModeKernel:
        kernel = self._modes.get(mode)
        if kernel is None:
            kernel = self._modes[mode] = _ModeKernel(self.rules, self.metadata, mode,
                                                     plan_cache_size=self._plan_cache_size)
        return kernel

    def _compact(self, shape: Shape, params: Sequence[Any] | None, hints: SessionHints | None
                 ) -> tuple[Plan, RoutedStatement] | None:
        """A statement with long IN lists routed by the plan of its compact text (`routing.lists`: the plan of a
        text of n values in a list was compiled at ten times sqlglot's parse of it, issue 35); None: compile the
        text itself (no such list, a plan that cannot expand them, or a refusal the text's own plan words)."""
        cut = compact(shape, params)
        if cut is None:
            return None
        try:
            plan = self._compact_plans.get(cut.shape.key)
            if plan is None or not plan.accepts(cut.shape):
                plan = compile_plan(cut.shape, self.rules, self.metadata, frozenset(cut.lists))
                self._compact_plans.put(cut.shape.key, plan)
            if type(plan) is not ShardedPlan or not plan.expands(cut.lists):
                return None
            return plan, plan.execute(cut.shape, cut.params, hints, cut.lists)
        except RoutingError:
            return None

    def _route_is_text_bound(self, plan: Plan, routed: RoutedStatement) -> bool:
        """Is this route a function of the statement's text and parameters alone, so that the same text with the
        same parameters routes the same way until the rules or the metadata change (`invalidate`)? A SELECT over
        several nodes whose sharded tables no condition restricts (every node of each is read: no algorithm is
        asked anything, no session hint was given), outside any resharding window and not run in steps: its units
        and merge spec are the plan's template rendered with the text's values. (A route some value decides is not
        kept: its algorithms, class-based ones included, are asked again each time.)"""
        if type(plan) is not ShardedPlan or plan.kind is not StatementKind.SELECT or len(routed.execution_units) < 2 \
                or plan.stepwise is not None or plan.dual_read is not None or plan.dual_refusal is not None \
                or routed.dual_read is not None or routed.dual_repair is not None or routed.stepwise is not None \
                or plan.sharding is None:
            return False
        tables = plan.sharding.tables
        return all(cond is TRUE and tables[logic].window is None for logic, cond in plan.conditions)

    def route_point(self, sql: str, params: Sequence[Any] | None = None) -> tuple[StatementKind, str, str] | None:
        """(kind, data source, actual SQL) when `route(sql, params)` would route the statement by a cached
        `routing.point.PointPlan` to that one node with the statement's own parameters; None: call `route`.

        Why: the proxy's synchronous relay needs only these three; building the `RoutedStatement` and its units
        for every point select would cost more than routing it."""
        if "/*" in sql:
            return None
        shape = self._shape(sql, params)
        plan = self._cache.get(shape.key)
        if type(plan) is not PointPlan or not plan.accepts(shape):
            return None
        node = plan.single(shape, params)
        return None if node is None else (plan.kind, node[0], node[1])

    def prepared_point(self, sql: str) -> tuple[PointPlan | None, Shape | None] | None:
        """The cached `routing.point.PointPlan` of a prepared statement's text and its shape, when it has one:
        the proxy keeps them with the statement (with `generation`) and asks `PointPlan.single(shape, params)` at
        each execute, what `route_point(sql, params)` would answer, without its lookups. (None, None):
        the text is compiled to another plan (`route_point` would answer None until the rules change); None:
        not compiled yet."""
        if "/*" in sql:
            return None, None
        shape = self._shapes.get(sql)
        if shape is None:
            return None
        plan = self._cache.get(shape.key)
        if plan is None or not plan.accepts(shape):
            return None
        if type(plan) is not PointPlan:
            return None, None
        return plan, shape

    def _direct(self, sql: str, params: Sequence[Any] | None, hints: SessionHints) -> RoutedStatement:
        ds = hints.data_source or ""
        if ds not in self.rules.data_sources:
            raise RoutingError(
                f"hint DATA_SOURCE_NAME={ds} names no data source of database {self.rules.name} "
                f"(known: {', '.join(self.rules.data_sources)})",
                errno=1049,
                sqlstate="42000",
            )
        kind = first_word_kind(sql)
        upper = sql.upper()
        write = (
            kind is not StatementKind.SELECT
            or hints.write_route_only
            or "FOR UPDATE" in upper
            or "LOCK IN SHARE MODE" in upper
            or "FOR SHARE" in upper
        )
        return RoutedStatement(
            kind=kind,
            route_units=(RouteUnit(ds, {}),),
            execution_units=(ExecutionUnit(ds, sql, tuple(params) if params is not None else None),),
            write=write,
        )


class _ModeKernel(ShardingKernel):
    """The kernel's routing of texts read under a sql_mode other than the default (issue 34): an ANSI_QUOTES text
    is routed as its backquoted equivalent (`ansi_backquoted`; the units spliced from it are valid in every mode),
    and every scan, literal and parse of it reads strings under `reading(mode)`."""

    def __init__(self, rules: DatabaseRules, metadata: SchemaMetadata, mode: int, *, plan_cache_size: int) -> None:
        super().__init__(rules, metadata, plan_cache_size=plan_cache_size)
        self.mode = mode

    def route_text(self, sql: str, params: Sequence[Any] | None, hints: SessionHints | None) -> RoutedStatement:
        if self.mode & ANSI_QUOTES:
            sql = ansi_backquoted(sql, self.mode)
        with reading(self.mode):
            if self.mode & PIPES_AS_CONCAT and "||" in sql and not (hints is not None and hints.data_source):
                sql = pipes_as_concat(sql)  # sqlglot reads `||` as OR only; CONCAT means the same
            return ShardingKernel.route(self, sql, params, hints)


def _route_key(sql: str, params: Sequence[Any] | None) -> str | tuple[Any, ...] | None:
    """The route cache's key: the text, and each parameter with its type (1, 1.0 and True are equal and hash alike,
    but are sent to the nodes as different types); None when a parameter cannot be a key."""
    if len(sql) > _ROUTE_TEXT_LIMIT:
        return None  # a route kept holds each unit's text: 1,024 of a 1 MiB statement's would be gigabytes
    if params is None:
        return sql
    if len(params) > _ROUTE_KEY_PARAMS:
        return None  # (a long IN list of parameters: rarely the same values again)
    key = (sql, *((type(p), p) for p in params))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _unrewritten(routed: RoutedStatement, sql: str, params: Sequence[Any] | None) -> RoutedStatement:
    """SKIP_SQL_REWRITE: keep the route, send the user's text as is to every unit."""
    units = tuple(
        ExecutionUnit(u.data_source, sql, tuple(params) if params is not None else None) for u in routed.route_units
    )
    # the user's text as is: no row is moved to another node's table either (routing.upsert)
    return dc_replace(routed, execution_units=units, merge_spec=None if len(units) == 1 else routed.merge_spec,
                      upsert=None)


def shape_of(sql: str) -> Shape:
    """The cache key machinery, exposed for tests and the proxy's statement statistics."""
    return scan_shape(sql)


# --- compiling a statement shape into a plan ---------------------------------------------------------

_SCOPES = (exp.Select, exp.Update, exp.Delete, exp.Insert)
_INNER_JOIN_KINDS = ("", "INNER", "CROSS", "STRAIGHT_JOIN")
_DROPPED_NON_TABLES = {"INDEX", "KEY", "FOREIGN KEY", "CONSTRAINT", "PRIMARY KEY", "CHECK", "PARTITION"}
_UNICAST_SHOWS = {"COLUMNS", "FIELDS", "INDEX", "INDEXES", "KEYS", "CREATE TABLE"}


@dataclass
class Occurrence:
    """One table reference in the statement (a table joined with itself occurs twice)."""

    index: int
    name: str  # lower-case table name
    alias: str | None  # lower-case alias
    table: exp.Table
    scope: exp.Expression
    nested: bool  # inside a subquery, derived table, CTE or the SELECT of INSERT ... SELECT
    category: str  # sharded | broadcast | single | foreign

    @property
    def ref(self) -> str:
        return self.alias or self.name


def compile_plan(shape: Shape, rules: DatabaseRules, metadata: SchemaMetadata,
                 lists: frozenset[int] = frozenset()) -> Plan:
    """Compile one statement shape (the only place sqlglot's parser runs). ``lists``: the shape is a compact text
    (`routing.lists`) whose long IN lists begin at these slots."""
    return _Compiler(shape, rules, metadata, lists).compile()


def _scope_of(node: exp.Expression, root: exp.Expression) -> exp.Expression:
    parent = node.parent
    while parent is not None and not isinstance(parent, _SCOPES):
        parent = parent.parent
    return parent if parent is not None else root


class _Compiler:
    def __init__(self, shape: Shape, rules: DatabaseRules, metadata: SchemaMetadata,
                 lists: frozenset[int] = frozenset()) -> None:
        self.shape = shape
        self.lists = lists
        self.sql = shape.sql
        self.rules = rules
        self.metadata = metadata
        self.sharding = rules.sharding
        self.db_name = rules.name.lower()
        self.first_ds = rules.data_sources[0]
        self.param_index = param_indexes(shape)
        self._slots = {start: k for k, (start, _, _) in enumerate(shape.spans)}
        self._tokens: list[Token] | None = None
        self.occurrences: list[Occurrence] = []
        self.root: exp.Expression | None = None
        self.into: IntoClause | None = None
        self.anchored: set[int] = set()  # nested sharded occurrences co-located with the outer rows
        self.same_columns: Callable[[ColumnRef, ColumnRef], bool] | None = None  # set by anchored_nested

    # -- small helpers --

    @property
    def tokens(self) -> list[Token]:
        if self._tokens is None:
            self._tokens = tokenize(self.sql)
        return self._tokens

    def slot_at(self, start: int) -> int | None:
        return self._slots.get(start)

    def table_rule(self, name: str) -> TableRule | None:
        return self.sharding.table(name) if self.sharding is not None else None

    def single_ds(self, name: str) -> str | None:
        return self.metadata.single_table_data_source(name)

    def full_template(self, edits: list[Edit]) -> Template:
        return build_template(self.shape, 0, len(self.sql), edits)

    def base(self, kind: StatementKind, write: bool, tables: list[str]) -> dict[str, Any]:
        into = self.into
        return {
            "kind": kind,
            "write": write,
            "param_index": self.param_index,
            "logic_tables": tuple(dict.fromkeys(tables)),
            "pins": self.into_pins(),
            "into_variables": into.variables if into is not None and into.kind == "variables" else (),
            "into_trailing": into is not None and into.trailing,
        }

    def fixed(
        self, kind: StatementKind, write: bool, data_sources: list[str], edits: list[Edit], tables: list[str]
    ) -> FixedPlan:
        template = self.full_template(edits)
        return FixedPlan(
            **self.base(kind, write, tables),
            units=tuple(RouteUnit(ds, {}) for ds in data_sources),
            template=template,
            untouched=not edits,
        )

    # -- entry --

    def compile(self) -> Plan:
        ast = parse_statement(self.parse_shape())
        if ast is None or isinstance(ast, exp.Command):
            return self.unparsed()
        self.root = ast
        kind, write = self.classify(ast)
        if isinstance(ast, exp.Describe):
            return self.describe(ast)
        if isinstance(ast, exp.Show):
            return self.show(ast, kind, write)
        self.collect_occurrences(ast)
        if isinstance(ast, exp.Set):
            return self.set_statement(ast)
        ours = [o for o in self.occurrences if o.category != "foreign"]
        edits = self.table_edits(ast)
        names = [o.name for o in ours]
        if self.into is not None:
            write = True  # as every SELECT ... INTO: the primary of a read/write splitting group answers it
        if kind is StatementKind.DDL:
            return self.ddl(kind, write, edits, names)
        if isinstance(ast, exp.Insert) and isinstance(ast.expression, exp.Values):
            target = next((o for o in ours if not o.nested), None)
            if target is not None and target.category == "sharded":
                return self.insert_values(ast, target, edits)
        if not any(o.category == "sharded" for o in ours):
            return self.unsharded(kind, write, edits, ours)
        return self.sharded(ast, kind, write, edits, ours)

    def parse_shape(self) -> Shape:
        """The shape sqlglot reads: the statement, with a SELECT's INTO clause blanked out (same length, so
        offsets stay the user's), which sqlglot reads in one position only."""
        sql = self.sql
        if not _INTO.search(sql):
            return self.shape
        into = find_into(self.tokens)
        if into is None or into.kind == "other":
            return self.shape
        self.into = into
        self._tokens = [t for t in self.tokens if not into.start <= t.start < into.end]
        blanked = sql[: into.start] + " " * (into.end - into.start) + sql[into.end :]
        return Shape(blanked, self.shape.key, self.shape.spans)

    def into_pins(self) -> tuple[tuple[int, str], ...]:
        """Value tokens inside the INTO clause (``@'name'``, the file name): the plan holds them."""
        into = self.into
        if into is None:
            return ()
        return tuple((k, self.shape.text(k)) for k, (s, _e, _kind) in enumerate(self.shape.spans)
                     if into.start <= s < into.end)

    def classify(self, ast: exp.Expression) -> tuple[StatementKind, bool]:
        if isinstance(ast, exp.Select | exp.SetOperation):
            return StatementKind.SELECT, ast.find(exp.Lock) is not None
        if isinstance(ast, exp.Insert):
            return StatementKind.INSERT, True
        if isinstance(ast, exp.Update):
            return StatementKind.UPDATE, True
        if isinstance(ast, exp.Delete):
            return StatementKind.DELETE, True
        if isinstance(ast, exp.Create | exp.Drop | exp.Alter | exp.TruncateTable):
            return StatementKind.DDL, True
        return StatementKind.OTHER, True

    # -- statements sqlglot cannot parse --

    def unparsed(self) -> Plan:
        kind = first_word_kind(self.sql)
        write = kind is not StatementKind.SELECT
        names = [t.name for t in self.tokens if t.kind in ("w", "b")]
        for name in names:
            if self.table_rule(name) is not None:
                raise RoutingError(
                    f"the proxy cannot parse this statement, and it names sharded table {name}; "
                    "rewrite it in plain MySQL syntax the proxy understands, or send it to one data "
                    "source with the hint /* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=<ds> */"
                )
        broadcast = [n for n in names if n in self.rules.broadcast]
        if broadcast:
            targets = list(self.rules.data_sources) if write else [self.first_ds]
            return self.fixed(kind, write, targets, [], broadcast)
        for name in dict.fromkeys(names):
            ds = self.single_ds(name)
            if ds is not None:
                return self.fixed(kind, write, [ds], [], [name])
        return self.fixed(kind, write, [self.first_ds], [], [])

    # -- tables and their text spans --

    def collect_occurrences(self, ast: exp.Expression) -> None:
        skip: set[int] = set()
        if isinstance(ast, exp.Delete):
            skip.update(id(t) for t in ast.args.get("tables") or ())
        for drop in ast.find_all(exp.Drop):
            # DROP INDEX i ON t / ALTER TABLE t DROP INDEX i: sqlglot holds the index name as a Table
            if str(drop.args.get("kind") or "").upper() in _DROPPED_NON_TABLES:
                skip.update(id(t) for t in (drop.this, *(drop.args.get("tables") or ())) if isinstance(t, exp.Table))
        ctes = {c.alias_or_name.lower() for c in ast.find_all(exp.CTE)}
        for table in ast.find_all(exp.Table):
            if id(table) in skip or not isinstance(table.this, exp.Identifier):
                continue
            name = table.name.lower()
            db_ident = table.args.get("db")
            db = db_ident.name.lower() if isinstance(db_ident, exp.Identifier) else None
            if db is None and (name in ctes or name == "dual"):
                continue
            if table.args.get("catalog") is not None or (db is not None and db != self.db_name):
                category = "foreign"
            elif self.table_rule(name) is not None:
                category = "sharded"
            elif name in self.rules.broadcast:
                category = "broadcast"
            else:
                category = "single"
            scope = _scope_of(table, ast)
            nested = _is_nested(table, scope, ast) or (isinstance(ast, exp.Insert) and scope is not ast)
            alias = table.alias.lower() if table.alias else None
            self.occurrences.append(Occurrence(len(self.occurrences), name, alias, table, scope, nested, category))

    def table_edits(self, ast: exp.Expression) -> list[Edit]:
        """Spans to rewrite: sharded table identifiers, their use as qualifiers, the logic schema prefix."""
        edits: list[Edit] = []
        for occ in self.occurrences:
            if occ.category == "foreign":
                continue
            edits.extend(self._identifier_edits(occ.table.this, occ.table.args.get("db"), occ.category == "sharded"))
        aliases = {o.alias for o in self.occurrences if o.alias}
        unaliased = {o.name for o in self.occurrences if o.category == "sharded" and not o.alias}
        qualifiers: list[tuple[exp.Expression, exp.Expression | None]] = []
        for column in ast.find_all(exp.Column):
            ident = column.args.get("table")
            if isinstance(ident, exp.Identifier):
                qualifiers.append((ident, column.args.get("db")))
        if isinstance(ast, exp.Delete):
            for target in ast.args.get("tables") or ():
                if isinstance(target, exp.Table) and isinstance(target.this, exp.Identifier):
                    qualifiers.append((target.this, target.args.get("db")))
        for ident, db in qualifiers:
            name = ident.name.lower()
            sharded = name in unaliased and name not in aliases
            if sharded or (isinstance(db, exp.Identifier) and db.name.lower() == self.db_name):
                edits.extend(self._identifier_edits(ident, db, sharded))
        return edits

    def _identifier_edits(self, ident: exp.Expression, db: Any, sharded: bool) -> list[Edit]:
        span = node_span(ident)
        if span is None:
            return []
        edits: list[Edit] = []
        text = self.sql[span[0] : span[1]]
        if sharded:
            quote = "`" if text.startswith("`") else ""
            edits.append(Edit(span[0], span[1], (TableSlot(ident.name.lower(), quote, text),)))
        if isinstance(db, exp.Identifier) and db.name.lower() == self.db_name:
            db_span = node_span(db)
            if db_span is not None:
                edits.append(Edit(db_span[0], span[0], ()))
        return edits

    # -- statements without sharded tables --

    def unsharded(self, kind: StatementKind, write: bool, edits: list[Edit], ours: list[Occurrence]) -> Plan:
        names = [o.name for o in ours]
        singles = [o for o in ours if o.category == "single"]
        broadcast = [o for o in ours if o.category == "broadcast"]
        single_sources = list(dict.fromkeys(self.single_ds(o.name) or self.first_ds for o in singles))
        if len(single_sources) > 1:
            raise RoutingError(
                f"single tables {', '.join(o.name for o in singles)} live on different data sources "
                f"({', '.join(single_sources)}); a statement can only combine tables of one data source"
            )
        writes_broadcast = kind in (StatementKind.INSERT, StatementKind.UPDATE, StatementKind.DELETE) and any(
            not o.nested for o in broadcast
        )
        if singles:
            if writes_broadcast and broadcast and not broadcast[0].nested and ours[0].category == "broadcast":
                raise RoutingError(
                    f"this statement modifies broadcast table {broadcast[0].name} using single table(s) "
                    f"{', '.join(o.name for o in singles)} that exist on one data source only; the copies "
                    "of the broadcast table would diverge"
                )
            return self.fixed(kind, write, single_sources, edits, names)
        if broadcast and (writes_broadcast or kind is StatementKind.OTHER):
            if writes_broadcast and len(self.rules.data_sources) > 1 and self.root is not None:
                refusal = replica_refusal(self.root)
                if refusal is not None:
                    raise RoutingError(
                        f"{refusal.construct}: {refusal.reason}, so the copies of broadcast table "
                        f"{broadcast[0].name} on the data sources {', '.join(self.rules.data_sources)} would "
                        f"diverge; {refusal.advice or 'compute the value in the client and write it as a literal'}"
                    )
            return self.fixed(kind, write, list(self.rules.data_sources), edits, names)
        return self.fixed(kind, write, [self.first_ds], edits, names)

    # -- DDL --

    def ddl(self, kind: StatementKind, write: bool, edits: list[Edit], names: list[str]) -> Plan:
        ours = [o for o in self.occurrences if o.category != "foreign"]
        sharded = list(dict.fromkeys(o.name for o in ours if o.category == "sharded"))
        if not sharded:
            if any(o.category == "broadcast" for o in ours):
                if any(o.category == "single" for o in ours):
                    raise RoutingError("this DDL mixes broadcast and single tables; run one statement per table kind")
                return self.fixed(kind, write, list(self.rules.data_sources), edits, names)
            sources: list[str] = []
            for o in ours:
                ds = self.single_ds(o.name)
                if ds is None and isinstance(self.root, exp.Create):
                    ds = self.rules.single.default_data_source or self.first_ds
                sources.append(ds or self.first_ds)
            sources = list(dict.fromkeys(sources)) or [self.first_ds]
            if len(sources) > 1:
                raise RoutingError(
                    f"this DDL names single tables on different data sources ({', '.join(sources)}); "
                    "run one statement per data source"
                )
            return self.fixed(kind, write, sources, edits, names)
        assert self.sharding is not None
        others = [o.name for o in ours if o.category != "sharded"]
        if others:
            raise RoutingError(
                f"this DDL mixes sharded table(s) {', '.join(sharded)} with unsharded table(s) "
                f"{', '.join(others)}; run one statement per table"
            )
        if not self.sharding.are_bound(sharded):
            raise RoutingError(
                f"this DDL names sharded tables {', '.join(sharded)} that are not binding tables; "
                "run one statement per table"
            )
        routed = {name: list(self.sharding.tables[name].data_nodes) for name in sharded}
        units = build_units(self.sharding, routed, sharded)
        return NodesPlan(**self.base(kind, write, names), units=tuple(units), template=self.full_template(edits))

    # -- DESCRIBE / SHOW COLUMNS / SHOW CREATE TABLE / SHOW INDEX --

    def describe(self, ast: exp.Describe) -> Plan:
        table = ast.this
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            return self.fixed(StatementKind.OTHER, False, [self.first_ds], [], [])
        return self.unicast(table.this, table.args.get("db"), [])

    def show(self, ast: exp.Show, kind: StatementKind, write: bool) -> Plan:
        what = str(ast.this or "").upper()
        target = ast.args.get("target")
        if what not in _UNICAST_SHOWS or not isinstance(target, exp.Identifier):
            return self.fixed(StatementKind.OTHER, False, [self.first_ds], [], [])
        db = ast.args.get("db")
        extra: list[Edit] = []
        if isinstance(db, exp.Identifier) and db.name.lower() == self.db_name:
            db_span, t_span = node_span(db), node_span(target)
            if db_span is not None and t_span is not None and db_span[0] > t_span[0]:
                # SHOW COLUMNS FROM t FROM sharding_db: drop the "FROM sharding_db" part
                prev = [t for t in self.tokens if t.end <= db_span[0]]
                cut = prev[-1].start if prev and prev[-1].upper in ("FROM", "IN") else db_span[0]
                extra.append(Edit(cut, db_span[1], ()))
                db = None
        return self.unicast(target, db, extra)

    def unicast(self, ident: exp.Identifier, db: Any, extra: list[Edit]) -> Plan:
        name = ident.name.lower()
        if isinstance(db, exp.Identifier) and db.name.lower() != self.db_name:
            return self.fixed(StatementKind.OTHER, False, [self.first_ds], [], [])
        rule = self.table_rule(name)
        edits = self._identifier_edits(ident, db, rule is not None) + extra
        base = self.base(StatementKind.OTHER, False, [name])
        if rule is not None:
            node = rule.data_nodes[0]
            return NodesPlan(
                **base,
                units=(RouteUnit(node.data_source, {name: node.table}),),
                template=self.full_template(edits),
                renames={node.table: rule.logic_table},
            )
        ds = self.first_ds if name in self.rules.broadcast else (self.single_ds(name) or self.first_ds)
        return self.fixed(StatementKind.OTHER, False, [ds], edits, [name])

    # -- SELECT / UPDATE / DELETE / INSERT ... SELECT on sharded tables --

    def sharded(
        self, ast: exp.Expression, kind: StatementKind, write: bool, edits: list[Edit], ours: list[Occurrence]
    ) -> Plan:
        assert self.sharding is not None
        names = [o.name for o in ours]
        sharded = [o for o in ours if o.category == "sharded"]
        singles = [o for o in ours if o.category == "single"]
        single_sources = list(dict.fromkeys(self.single_ds(o.name) or self.first_ds for o in singles))
        if len(single_sources) > 1:
            raise RoutingError(
                f"single tables {', '.join(o.name for o in singles)} live on different data sources "
                f"({', '.join(single_sources)}); a statement can only combine tables of one data source"
            )
        if kind in (StatementKind.UPDATE, StatementKind.DELETE, StatementKind.INSERT):
            target = ours[0]
            if target.category == "broadcast":
                raise RoutingError(
                    f"this statement modifies broadcast table {target.name} using sharded table(s) "
                    f"{', '.join(dict.fromkeys(o.name for o in sharded))}; the copies of the broadcast "
                    "table would diverge"
                )
            if target.category == "single" and kind is StatementKind.INSERT:
                raise RoutingError(
                    f"INSERT ... SELECT into single table {target.name} reads sharded table(s) "
                    f"{', '.join(dict.fromkeys(o.name for o in sharded))} from several data nodes; "
                    "the proxy cannot move rows between data sources"
                )
        self.anchored = self.anchored_nested(ast, sharded)
        conditions = self.conditions(ast, sharded)
        refuse = self.multi_unit_refusal(ast, kind, sharded)
        if refuse is None:
            refuse = self.distribution_refusal(ast, sharded)
        set_checks = self.set_checks(ast, sharded) if isinstance(ast, exp.Update) else ()
        stepwise = self.stepwise_kind(ast, kind, ours, sharded, refuse, set_checks)
        in_edits = self.in_list_edits(ast, sharded)
        single_template = self.full_template(edits + in_edits)
        multi_template, merge, pins = single_template, None, ()
        if kind is StatementKind.SELECT and isinstance(ast, exp.Select) and refuse is None:
            from routing.rewrite import select_rewrite

            multi_edits = list(edits) + in_edits
            if self.into is not None and self.into.kind == "variables":
                # over several nodes the proxy assigns the variables from the merged row (proxy.into)
                multi_edits.append(Edit(self.into.start, self.into.end, ()))
            multi_template, merge, pins, refusal = select_rewrite(
                self.shape, self.tokens, ast, multi_edits, self.metadata, sharded, ours
            )
            refuse = refusal
            self.pins = pins
        if refuse is None and self.into is not None and self.into.kind in ("outfile", "dumpfile"):
            refuse = (
                f"SELECT ... INTO {self.into.kind.upper()} on sharded table(s) "
                f"{', '.join(dict.fromkeys(o.name for o in sharded))} routes to several data nodes, whose "
                "servers would each write a file of their own; add sharding conditions that route it to one "
                "data node, or select the rows and write the file in the client"
            )
        base = self.base(kind, write, names)
        base["pins"] = base["pins"] + tuple(getattr(self, "pins", ()))
        dual_read, dual_refusal = self.window_read(ast, kind, sharded, ours, edits)  # routing.dualread
        return ShardedPlan(
            **base,
            sharding=self.sharding,
            conditions=tuple(conditions),
            order=tuple(dict.fromkeys(o.name for o in sharded)),
            single_data_source=single_sources[0] if single_sources else None,
            single_tables=tuple(dict.fromkeys(o.name for o in singles)),
            single_template=single_template,
            multi_template=multi_template,
            merge=merge,
            refuse_multi=refuse,
            strict=tuple(k for k, o in enumerate(sharded) if o.nested and o.index not in self.anchored),
            set_checks=set_checks,
            layout=self.join_layout(ast, sharded) if len(sharded) > 1 else None,
            stepwise=stepwise,
            stepwise_table=ours[0].name if stepwise else "",
            dual_read=dual_read,
            dual_refusal=dual_refusal,
            in_lists=tuple(e.pieces[0] for e in in_edits),  # type: ignore[misc]
        )

    def in_list_edits(self, ast: exp.Expression, sharded: list[Occurrence]) -> list[Edit]:
        """The IN lists of the statement's own WHERE that each unit may get only its values of
        (`rewrite.InListSlot`): ``col IN (v, ...)`` AND-ed at its top, ``col`` a column of a standard sharding
        strategy of one outer sharded table outside a resharding window, the values `PER_UNIT_MIN` or more literals or
        ``?`` separated by commas only (a shorter list: the whole list to each unit, as before; choosing each unit's
        values cost more than the few values it saves the nodes: +35 us of routing for ``IN (?, ?)``, +30 us
        for 16 values; about even at 40). A list cut short (`self.lists`) gets a slot in any case, a slot that
        writes it whole when it is not such a list, anywhere in this WHERE outside its subqueries."""
        if not isinstance(ast, exp.Select | exp.Update | exp.Delete):
            return []
        where = ast.args.get("where")
        top = {o.index: o for o in sharded if not o.nested and o.scope is ast}
        if not isinstance(where, exp.Where) or not top:
            return []
        resolve: Callable[[exp.Column], list[ColumnRef]] | None = None
        spans = self.shape.spans
        conjuncts = [n for n in chain(where.this, exp.And) if isinstance(n, exp.In)]
        top_level = {id(n) for n in conjuncts}
        # a list cut short anywhere else in this WHERE (under OR or NOT, NOT IN): a slot writing it whole
        others = [n for n in where.this.find_all(exp.In) if id(n) not in top_level and _same_query(n, where)] \
            if self.lists else []
        out: list[Edit] = []
        for node in [*conjuncts, *others]:
            if len(node.expressions) < 2 or node.args.get("query") is not None or node.args.get("unnest") is not None:
                continue
            slots = self._list_slots(node)
            if slots is None:
                continue
            first, last = slots[0], slots[-1]
            logic = column = ""  # no selection: the list as written, a slot only for a list cut short
            database = table = False
            if id(node) in top_level and isinstance(node.this, exp.Column) \
                    and (len(slots) >= PER_UNIT_MIN or first in self.lists):
                resolve = resolve or self.resolver(ast)
                refs = resolve(node.this)
                occ = top.get(refs[0][0]) if len(refs) == 1 else None
                rule = self.table_rule(occ.name) if occ is not None else None
                if occ is not None and rule is not None and rule.window is None:
                    name = refs[0][1]
                    database = not rule.auto and isinstance(rule.database_strategy, StandardStrategy) \
                        and rule.database_strategy.column.lower() == name
                    table = isinstance(rule.table_strategy, StandardStrategy) \
                        and rule.table_strategy.column.lower() == name
                    if database or table:
                        logic, column = occ.name, name
            if not logic and first not in self.lists:
                continue
            piece = InListSlot(logic, column, first, last, database, table)
            out.append(Edit(spans[first][0], spans[last][1], (piece,)))
        return out

    def _list_slots(self, node: exp.In) -> list[int] | None:
        """The value slots of an IN list of literals or ``?`` with only commas between them, in order; else None."""
        spans, sql = self.shape.spans, self.sql
        slots: list[int] = []
        for value in node.expressions:
            start = node_start(value) if isinstance(value, exp.Literal) else None
            slot = self.slot_at(start) if start is not None else None
            if slot is None or (slots and slot != slots[-1] + 1) or spans[slot][0] != start:
                return None
            if slots and sql[spans[slot - 1][1]:start].strip() != ",":
                return None
            slots.append(slot)
        return slots

    def stepwise_kind(self, ast: exp.Expression, kind: StatementKind, ours: list[Occurrence],
                      sharded: list[Occurrence], refuse: str | None, set_checks: tuple[SetCheck, ...]) -> str | None:
        """Can the proxy run this write in steps where one statement per node would not be exact
        (routing.stepwise)? Single-table UPDATE / DELETE with ORDER BY / LIMIT or a sharding column SET,
        INSERT ... SELECT into a sharded table; everything else keeps its refusal."""
        from routing import stepwise

        if any((r := self.table_rule(o.name)) is not None and r.window is not None for o in sharded):
            return None  # inside a resharding window rows may have two copies: the dual write handles it
        if kind is StatementKind.INSERT and isinstance(ast, exp.Insert) and ours[0].category == "sharded" \
                and not ours[0].nested and not is_replace(self.sql) and ast.args.get("conflict") is None:
            return stepwise.INSERT_SELECT
        if kind not in (StatementKind.UPDATE, StatementKind.DELETE) or len(ours) != 1 or len(sharded) != 1:
            return None
        if not isinstance(ast, exp.Update | exp.Delete) or ast.args.get("joins") or ast.args.get("returning"):
            return None
        if isinstance(ast, exp.Delete) and ast.args.get("tables"):
            return None  # DELETE t1 FROM ...: a multi-table form
        limited = ast.args.get("order") is not None or ast.args.get("limit") is not None
        if not limited and not set_checks:
            return None
        if self.distribution_refusal(ast, sharded) is not None:
            return None
        if limited or refuse is None:
            return stepwise.ROWS
        return None

    def window_read(
        self, ast: exp.Expression, kind: StatementKind, sharded: list[Occurrence], ours: list[Occurrence],
        edits: list[Edit],
    ) -> tuple[Any, str | None]:
        """A SELECT on a table inside its resharding window: its dual read (routing.dualread) or why none."""
        windowed = [o for o in sharded if (r := self.table_rule(o.name)) is not None and r.window is not None]
        if not windowed:
            return None, None
        read = [o for o in windowed if o.nested]
        if kind is StatementKind.INSERT and read:
            raise RoutingError(
                f"INSERT ... SELECT reads sharded table {read[0].name} during its resharding window, where a "
                "row may have two copies the proxy cannot de-duplicate inside INSERT ... SELECT; select the rows "
                "and insert them from the client, or finish the migration first"
            )
        if kind not in (StatementKind.SELECT, StatementKind.UPDATE, StatementKind.DELETE):
            return None, None
        from routing.dualread import compile_dual_read

        rule = self.table_rule(windowed[0].name)
        assert rule is not None
        foreign = [o for o in self.occurrences if o.category == "foreign"]
        result = compile_dual_read(self.shape, self.tokens, ast, ours + foreign, edits, rule, self.metadata,
                                   has_into=self.into is not None)
        return (None, result) if isinstance(result, str) else (result, None)

    def multi_unit_refusal(self, ast: exp.Expression, kind: StatementKind, sharded: list[Occurrence]) -> str | None:
        tables = ", ".join(dict.fromkeys(o.name for o in sharded))
        if kind is StatementKind.INSERT:
            return (
                f"INSERT ... SELECT on sharded table(s) {tables} routes to several data nodes; the proxy "
                "only runs INSERT ... SELECT when both parts route to the same single data node (add "
                "sharding conditions) or both tables are single tables on one data source"
            )
        if isinstance(ast, exp.SetOperation):
            return (
                f"UNION / INTERSECT / EXCEPT over sharded table(s) {tables} routes to several data nodes, "
                "which the proxy cannot merge; add sharding conditions that route to one data node or run "
                "the parts separately"
            )
        nested = [o.name for o in sharded if o.nested and o.index not in self.anchored]
        if nested and isinstance(ast, exp.Set):
            return (
                f"the subquery of this SET on sharded table {nested[0]} routes to several data nodes "
                f"({self.rules_text([nested[0]])}); the proxy evaluates a SET's subquery on one data node only: "
                "add sharding conditions that route it to one data node, or SELECT the value and SET it "
                "from the client"
            )
        loose = [o for o in sharded if o.nested and o.index not in self.anchored]
        correlated = next((m for o in loose if (m := self.correlation_refusal(ast, o, sharded)) is not None), None)
        if correlated is not None:
            return correlated
        if nested:
            return (
                f"the subquery on sharded table {nested[0]} routes to several data nodes, which the proxy "
                f"cannot evaluate correctly ({self.rules_text([nested[0]])}; each data node would see only "
                "its own rows of the subquery's table); add sharding conditions that route the whole "
                "statement to one data node, correlate the subquery with the outer table on every sharding "
                "column of binding tables, or use a join"
            )
        if kind in (StatementKind.UPDATE, StatementKind.DELETE) and (
            ast.args.get("order") is not None or ast.args.get("limit") is not None
        ):
            return (
                f"{kind.name} with ORDER BY or LIMIT on sharded table {tables} routes to several data "
                "nodes, where ORDER BY/LIMIT would apply per node; add sharding conditions that route it "
                "to one data node, or remove ORDER BY/LIMIT"
            )
        return None

    def correlation_refusal(self, ast: exp.Expression, x: Occurrence, sharded: list[Occurrence]) -> str | None:
        """Why a correlated subquery on ``x`` cannot run node by node (issue 33): the sharding columns its
        correlation with an outer occurrence of the same table or a binding table leaves unequated, and
        the equalities that would anchor it; None when ``x`` is not in a correlated subquery."""
        if not _correlatable(x.scope) or self.sharding is None or self.same_columns is None:
            return None
        resolve = self.resolver(ast)
        outer: list[Occurrence] = []
        for column in x.scope.find_all(exp.Column):
            if _scope_of(column, ast) is not x.scope:
                continue
            for index, _name in resolve(column):
                occ = self.occurrences[index]
                if occ.scope is not x.scope and occ not in outer:
                    outer.append(occ)
        if not outer:
            return None  # not correlated: the general refusal says what to do
        same = self.same_columns
        rx = self.sharding.tables[x.name]
        candidates: list[tuple[bool, int, Occurrence, list[tuple[str, str]], list[tuple[str, str]]]] = []
        for y in sharded:
            if y.scope is x.scope or (y.nested and y.index not in self.anchored):
                continue
            if y.name != x.name and not self.sharding.are_bound([x.name, y.name]):
                continue
            pairs = _column_pairs(rx, self.sharding.tables[y.name])
            if pairs is None:
                continue
            missing = [(a, b) for a, b in pairs if not same((x.index, a), (y.index, b))]
            have = [(a, b) for a, b in pairs if same((x.index, a), (y.index, b))]
            candidates.append((y not in outer, len(missing), y, missing, have))
        best = min(candidates, key=lambda c: c[:2]) if candidates else None
        tables = list(dict.fromkeys([x.name, *(o.name for o in outer if o.category == "sharded")]))
        rules = self.rules_text(tables)
        if best is None:
            return (
                f"correlated subquery on sharded table {x.name} ({x.ref}) cannot run node by node: the table it is "
                f"correlated with ({', '.join(o.ref for o in outer)}) is neither {x.name} itself nor a binding table "
                f"of it, so the rows the subquery must see for an outer row may live on another data node ({rules}); "
                "add sharding conditions that route the whole statement to one data node, or use a join"
            )
        _, _, y, missing, have = best

        def text(pairs: list[tuple[str, str]], sep: str = " and ") -> str:
            return sep.join(f"{x.ref}.{a} = {y.ref}.{b}" for a, b in pairs)

        equated = f"equates {text(have)} but not " if have else "does not equate "
        trust = " (a subquery does not rely on the binding declaration, as a join does)" if x.name != y.name else ""
        return (
            f"correlated subquery on sharded table {x.name} ({x.ref}) cannot run node by node: its correlation with "
            f"{y.name} ({y.ref}) {equated}{text(missing)}, so the rows it must see for an outer row may live on "
            f"another data node, where it would not find them ({rules}). A correlated subquery is pushed down only "
            f"when its correlation equates every sharding column of {' and '.join(tables)}{trust}, or when its own "
            f"conditions route it to the outer rows' one data node; add AND {text(missing, ' AND ')} to the "
            "subquery's WHERE if that holds for your rows, add sharding conditions that route the whole statement "
            "to one data node, or use a join"
        )

    # -- what may be distributed over several data nodes (routing.distribute) --

    def rules_text(self, tables: Sequence[str]) -> str:
        assert self.sharding is not None
        return "; ".join(_rule_text(self.sharding.tables[t]) for t in dict.fromkeys(tables))

    def distribution_refusal(self, ast: exp.Expression, sharded: list[Occurrence]) -> str | None:
        """Why this statement cannot run on several data nodes (every construct in it must be on the
        kernel's allow-list), or None; it still runs unchanged when it routes to one data node."""
        refusal = construct_refusal(ast)
        if refusal is None:
            by_table = {id(o.table): o for o in self.occurrences}

            def category(table: exp.Table) -> str | None:
                occ = by_table.get(id(table))
                return occ.category if occ is not None else None

            def ref(table: exp.Table) -> str:
                occ = by_table.get(id(table))
                return occ.ref if occ is not None else table.name.lower()

            def columns(table: exp.Table) -> Sequence[str] | None:
                occ = by_table.get(id(table))
                return self.metadata.columns(occ.name) if occ is not None else None

            refusal = OuterJoins(ast, category, ref, columns).refusal()
        if refusal is None:
            return None
        tables = list(dict.fromkeys(o.name for o in sharded))
        assert self.sharding is not None
        columns_text = ", ".join(sorted({c for t in tables for c in self.sharding.tables[t].sharding_columns}))
        advice = f"{refusal.advice}; or " if refusal.advice else ""
        return (
            f"{refusal.construct}: {refusal.reason}. This statement reads sharded table(s) {', '.join(tables)} "
            f"({self.rules_text(tables)}) and routes to several data nodes, where the proxy cannot compute it; "
            f"{advice}add conditions on {columns_text} that route it to one data node, where it runs unchanged"
        )

    def anchored_nested(self, ast: exp.Expression, sharded: list[Occurrence]) -> set[int]:
        """Nested sharded occurrences whose rows live with the outer rows they are compared with: a subquery
        (EXISTS / IN / ANY / ALL / scalar, in any clause; not a derived table or CTE) correlated with an
        outer occurrence of the same table or a binding table on EVERY sharding column, database and table
        level alike. Each data node then holds every row the subquery can see for each of its outer rows.

        Unlike a join, a correlation does not trust the binding declaration for the database level: an item
        whose user_id differs from its order's lives on another data node, and a subquery correlated on
        order_id alone would miss it (issue 33). Such a subquery is not anchored: the statement then runs
        only where every nested occurrence's own route is inside its one route unit (ShardedPlan.strict),
        else it is refused (and a SELECT answered by federation)."""
        assert self.sharding is not None
        candidates = [o for o in sharded if o.nested and _correlatable(o.scope)]
        if not candidates:
            return set()
        resolve = self.resolver(ast)
        classes = ColumnClasses()
        for scope in dict.fromkeys(o.scope for o in self.occurrences):
            for c in conjuncts(self._scope_condition(scope, ast, resolve)):
                if isinstance(c, ColumnEq):
                    classes.union(c.left, c.right)
        same = self.same_columns = classes.same

        anchored = {o.index for o in sharded if not o.nested}
        changed = True
        while changed:
            changed = False
            for x in candidates:
                if x.index in anchored:
                    continue
                rx = self.sharding.tables[x.name]
                for y in sharded:
                    if y.index not in anchored or y.scope is x.scope:
                        continue
                    ry = self.sharding.tables[y.name]
                    if x.name == y.name or self.sharding.are_bound([x.name, y.name]):
                        ok = _node_aligned(rx, x.index, ry, y.index, same, trust_database=False)
                    else:
                        ok = False
                    if ok:
                        anchored.add(x.index)
                        changed = True
                        break
        return {i for i in anchored if self.occurrences[i].nested}

    # -- SET @v = (SELECT ...) --

    def set_statement(self, ast: exp.Set) -> Plan:
        """A SET that reads tables: routed like the SELECT it contains (one data node; the proxy then copies
        the values it assigned to the session's other connections, see proxy.setquery)."""
        ours = [o for o in self.occurrences if o.category != "foreign"]
        names = [o.name for o in ours]
        variables: list[str] = []
        for item in ast.expressions:
            assignment = item.this if isinstance(item, exp.SetItem) else None
            target = assignment.this if isinstance(assignment, exp.EQ | exp.PropertyEQ) else None
            if isinstance(target, exp.Parameter) and isinstance(target.this, exp.Var | exp.Identifier):
                variables.append("@" + _quoted_variable(target.this.name))
            elif ours:
                raise RoutingError(
                    f"this SET assigns {shown(item, 60)} from a query on table(s) {', '.join(dict.fromkeys(names))}; "
                    "the proxy evaluates such a SET only for user variables (SET @v = (SELECT ...)): SELECT the "
                    "value and SET the variable to it"
                )
        edits = self.table_edits(ast)
        if any(o.category == "sharded" for o in ours):
            plan = self.sharded(ast, StatementKind.OTHER, True, edits, ours)
        else:
            singles = [o for o in ours if o.category == "single"]
            sources = list(dict.fromkeys(self.single_ds(o.name) or self.first_ds for o in singles))
            if len(sources) > 1:
                raise RoutingError(
                    f"single tables {', '.join(o.name for o in singles)} live on different data sources "
                    f"({', '.join(sources)}); a statement can only combine tables of one data source"
                )
            plan = self.fixed(StatementKind.OTHER, True, sources or [self.first_ds], edits, names)
        return dc_replace(plan, set_variables=tuple(variables))

    def resolver(self, root: exp.Expression) -> Any:
        """Column → the occurrence columns it may denote (qualified: the nearest scope's table)."""
        by_scope: dict[int, list[Occurrence]] = {}
        for occ in self.occurrences:
            by_scope.setdefault(id(occ.scope), []).append(occ)

        scopes: dict[int, exp.Expression] = {}  # id(node) -> its scope, for the nodes walked through

        def scope_of(column: exp.Column) -> exp.Expression:
            # `_scope_of`, remembering the scope of every node on the way: the columns of a chain `a = 1 OR a = 2
            # ...` sit as deep as the chain is long, and walking up from each was O(n^2) (issue 35)
            walked: list[int] = []
            parent = column.parent
            scope: exp.Expression | None = None
            while parent is not None and not isinstance(parent, _SCOPES):
                known = scopes.get(id(parent))
                if known is not None:
                    scope = known
                    break
                walked.append(id(parent))
                parent = parent.parent
            if scope is None:
                scope = parent if parent is not None else root
            for key in walked:
                scopes[key] = scope
            return scope

        def resolve(column: exp.Column) -> list[ColumnRef]:
            scope = scope_of(column)
            name = column.name.lower()
            qualifier = column.table.lower() if column.table else ""
            if qualifier:
                current: exp.Expression | None = scope
                while current is not None:
                    for occ in by_scope.get(id(current), ()):
                        if occ.ref == qualifier:
                            return [(occ.index, name)]
                    current = None if current is root else _scope_of(current, root)
                return []
            local = by_scope.get(id(scope), [])
            candidates = []
            for occ in local:
                rule = self.table_rule(occ.name) if occ.category == "sharded" else None
                if rule is not None and name in rule.sharding_columns:
                    candidates.append((occ.index, name))
            if candidates:
                return candidates
            return [(local[0].index, name)] if len(local) == 1 else []

        return resolve

    def conditions(self, ast: exp.Expression, sharded: list[Occurrence]) -> list[tuple[str, Cond]]:
        assert self.sharding is not None
        root = ast
        resolve = self.resolver(root)
        scope_conditions: dict[int, Cond] = {}
        for occ in sharded:
            key = id(occ.scope)
            if key not in scope_conditions:
                scope_conditions[key] = self._scope_condition(occ.scope, root, resolve)
        out: list[tuple[str, Cond]] = []
        unnested = {o.name for o in sharded if not o.nested}
        for occ in sharded:
            rule = self.sharding.tables[occ.name]
            cond = scope_conditions[id(occ.scope)]
            if occ.index in self.anchored and occ.name not in unnested:
                # a correlated subquery's own conditions filter the rows it sees, never the outer rows:
                # its binding table must follow the outer table's nodes, not narrow them (a NOT EXISTS
                # whose subquery routes elsewhere keeps every outer row)
                cond = TRUE
            targets: dict[ColumnRef, str] = {}
            for column in rule.sharding_columns:
                for ref in equivalent_columns(cond, (occ.index, column)):
                    targets[ref] = column
            out.append((occ.name, project(cond, targets)))
        return out

    def join_layout(self, ast: exp.Expression, sharded: list[Occurrence]) -> JoinLayout:
        """What the statement's equalities between columns prove about co-located rows (see JoinLayout)."""
        assert self.sharding is not None
        resolve = self.resolver(ast)
        classes = ColumnClasses()
        union = classes.union

        outer = False
        for scope in dict.fromkeys(o.scope for o in self.occurrences):
            parts: list[Cond] = []
            where = scope.args.get("where")
            if isinstance(where, exp.Where):
                parts.append(extract(where.this, resolve, self.slot_at))
            local = [o for o in self.occurrences if o.scope is scope]
            for join in scope.find_all(exp.Join):
                if _scope_of(join, ast) is not scope:
                    continue
                side = str(join.args.get("side") or "").upper()
                if side or str(join.args.get("kind") or "").upper() not in _INNER_JOIN_KINDS:
                    outer = True
                # matched pairs satisfy ON even for an outer join: its equalities prove co-location
                parts.append(extract(join.args.get("on"), resolve, self.slot_at))
                self._using_equalities(join, local, union)
            for c in conjuncts(make_and(parts)):
                if isinstance(c, ColumnEq):
                    union(c.left, c.right)
        same = classes.same

        pairs: dict[tuple[str, str], int] = {}
        unaligned: list[str] = []
        for i, a in enumerate(sharded):
            for b in sharded[i + 1 :]:
                ra, rb = self.sharding.tables[a.name], self.sharding.tables[b.name]
                if a.name == b.name:
                    if not _node_aligned(ra, a.index, rb, b.index, same, trust_database=False):
                        unaligned.append(a.name)
                    continue
                if self.sharding.are_bound([a.name, b.name]) and _node_aligned(
                    ra, a.index, rb, b.index, same, trust_database=True
                ):
                    level = NODE
                elif _source_aligned(ra, a.index, rb, b.index, same, self.sharding.are_bound([a.name, b.name])):
                    level = SOURCE
                else:
                    continue
                key = (a.name, b.name) if a.name <= b.name else (b.name, a.name)
                pairs[key] = max(pairs.get(key, 0), level)
        return JoinLayout(pairs, tuple(dict.fromkeys(unaligned)), outer)

    def _using_equalities(self, join: exp.Join, local: list[Occurrence], union: Any) -> None:
        """JOIN t USING (c): t.c equals c of the one table before it that has c as a sharding column (or the
        only table before it)."""
        using = join.args.get("using") or ()
        right = next((o for o in local if o.table is join.this), None)
        if not using or right is None:
            return
        before = [o for o in local if o.index < right.index]
        for ident in using:
            name = ident.name.lower() if isinstance(ident, exp.Expression) else str(ident).lower()
            owners = [
                o for o in before if (rule := self.table_rule(o.name)) is not None and name in rule.sharding_columns
            ]
            if len(owners) != 1 and len(before) == 1:
                owners = before
            if len(owners) == 1:
                union((owners[0].index, name), (right.index, name))

    def _scope_condition(self, scope: exp.Expression, root: exp.Expression, resolve: Any) -> Cond:
        parts: list[Cond] = []
        where = scope.args.get("where")
        if isinstance(where, exp.Where):
            parts.append(extract(where.this, resolve, self.slot_at))
        for join in scope.find_all(exp.Join):
            if _scope_of(join, root) is not scope:
                continue
            side = str(join.args.get("side") or "").upper()
            join_kind = str(join.args.get("kind") or "").upper()
            if side or join_kind not in _INNER_JOIN_KINDS:
                continue  # outer joins: ON does not filter the preserved side, so it cannot narrow
            parts.append(extract(join.args.get("on"), resolve, self.slot_at))
        return make_and(parts)

    def set_checks(self, ast: exp.Update, sharded: list[Occurrence]) -> tuple[SetCheck, ...]:
        assert self.sharding is not None
        checks: list[SetCheck] = []
        where = ast.args.get("where")
        where_cond: Cond = TRUE
        conditions = dict(self.conditions(ast, sharded)) if where is not None else {}
        for assignment in ast.expressions:
            if not isinstance(assignment, exp.EQ) or not isinstance(assignment.this, exp.Column):
                continue
            column = assignment.this
            qualifier = column.table.lower() if column.table else ""
            name = column.name.lower()
            for occ in sharded:
                if qualifier and qualifier != occ.ref:
                    continue
                rule = self.sharding.tables[occ.name]
                if name not in rule.sharding_columns:
                    continue
                where_cond = conditions.get(occ.name, TRUE)
                pinned = None
                for c in conjuncts(where_cond):
                    if isinstance(c, Eq) and c.column[1] == name and len(c.values) == 1:
                        pinned = c.values[0]
                assigned = value_ref(assignment.expression, self.slot_at)
                checks.append(SetCheck(rule.logic_table, name, assigned, pinned))
        return tuple(checks)

    # -- INSERT ... VALUES / SET into a sharded table --

    def insert_values(self, ast: exp.Insert, target: Occurrence, edits: list[Edit]) -> Plan:
        rule = self.table_rule(target.name)
        assert rule is not None
        schema = ast.this if isinstance(ast.this, exp.Schema) else None
        columns = [c.name.lower() for c in schema.expressions] if schema is not None else None
        if columns is None:
            known = self.metadata.columns(target.name)
            if not known:
                raise RoutingError(
                    f"INSERT into sharded table {target.name} without a column list: the proxy does not "
                    "know the table's columns; list the columns explicitly, e.g. INSERT INTO "
                    f"{target.name} (col1, col2) VALUES (...)",
                    errno=1136,
                    sqlstate="21S01",
                )
            columns = [c.lower() for c in known]
        default_list = _default_key_columns(rule, columns, ast) if schema is None else None
        if default_list is not None:  # the values are for every column but the generated key (ShardingSphere's)
            columns = [c for c in columns if c != default_list[1]]
        conflict = ast.args.get("conflict")
        if conflict is not None:
            for assignment in conflict.expressions or ():
                col = assignment.this if isinstance(assignment, exp.EQ) else None
                if isinstance(col, exp.Column) and col.name.lower() in rule.sharding_columns \
                        and not is_identity_assignment(assignment):
                    raise RoutingError(
                        f"INSERT ... ON DUPLICATE KEY UPDATE assigns sharding column {col.name} of "
                        f"{target.name}; the row would have to move to another data node. Leave the "
                        "sharding column out of the UPDATE part"
                    )
        tuples = list(ast.expression.expressions)
        key_column = None
        if rule.key_generate is not None and schema is not None:
            key = rule.key_generate.column.lower()
            if key not in columns:
                key_column = key
        elif default_list is not None:
            key_column = default_list[1]
        auto = self.auto_increment(rule, columns, tuples)
        rows: list[InsertRow] = []
        for i, row in enumerate(tuples):
            values = row.expressions if isinstance(row, exp.Tuple) else [row]
            if len(values) != len(columns):
                raise RoutingError(
                    f"INSERT into {target.name}: row {i + 1} has {len(values)} values for {len(columns)} columns",
                    errno=1136,
                    sqlstate="21S01",
                )
            sharding_values = tuple(
                (col, value_ref(values[columns.index(col)], self.slot_at))
                for col in sorted(rule.sharding_columns)
                if col in columns
            )
            sets_last_id = any(
                f.name.upper() == "LAST_INSERT_ID" and bool(f.expressions)
                for value in values
                for f in value.find_all(exp.Anonymous)
            )
            rows.append(InsertRow(sharding_values, sets_last_id))
        base = self.base(StatementKind.INSERT, True, [target.name])
        head, row_templates, tail = self.insert_templates(
            target, edits, len(tuples), key_column, default_list[0] if default_list is not None else None,
            columns.index(auto.column) if auto is not None and auto.routes else None)
        mode = ("replace" if is_replace(self.sql) else "update" if conflict is not None
                else "ignore" if ast.args.get("ignore") else None)
        upsert = None
        if mode is not None:
            upsert = upsert_spec(
                mode=mode, rule=rule, metadata=self.metadata, database=self.rules.name, lock_source=self.first_ds,
                columns=columns, rows=[row.expressions if isinstance(row, exp.Tuple) else [row] for row in tuples],
                key_column=key_column, conflict=conflict, slot_at=self.slot_at,
            )
        return InsertPlan(
            **base,
            rule=rule,
            rows=tuple(rows),
            head=head,
            row_templates=row_templates,
            tail=tail,
            key_column=key_column,
            upsert=upsert,
            mode=mode,
            auto=auto,
        )

    def auto_increment(self, rule: TableRule, columns: Sequence[str], tuples: Sequence[exp.Expression]
                       ) -> AutoIncrement | None:
        """The rows' values for the table's AUTO_INCREMENT column (routing.autoinc), when the INSERT names it: they
        route the rows when it is a sharding column or the table's key generator makes its ids (`routes`), and say
        which ids a row generates (the OK's last insert id, proxy.execution.lastid) in any case."""
        column_info = getattr(self.metadata, "column_info", None)
        if column_info is None:
            return None
        column = next((c for c in columns if (info := column_info(rule.logic_table, c)) is not None
                       and info.auto_increment), None)
        generate = rule.key_generate is not None and rule.key_generate.column.lower() == column
        if column is None:
            return None
        at = columns.index(column)
        values: list[Any] = []
        for row in tuples:
            value = (row.expressions if isinstance(row, exp.Tuple) else [row])[at]
            while isinstance(value, exp.Paren):
                value = value.this
            values.append(AUTO_NULL if isinstance(value, exp.Null) else value_ref(value, self.slot_at))
        return AutoIncrement(rule.logic_table, column, tuple(values),
                             rule.key_generate.generator if generate and rule.key_generate else None,
                             column in rule.sharding_columns)

    def auto_edit(self, values: Sequence[tuple[Token, Token]], at: int, edits: list[Edit]) -> Edit:
        """The row's value for the AUTO_INCREMENT column as an `AutoSlot` (its key, when the proxy generates one)."""
        if at >= len(values):
            raise RoutingError("the proxy could not locate the AUTO_INCREMENT value of this INSERT; simplify its "
                               "syntax")
        first, last = values[at]
        pieces = build_template(self.shape, first.start, last.end, edits).pieces
        return Edit(first.start, last.end, (AutoSlot(pieces),))

    def insert_templates(
        self, target: Occurrence, edits: list[Edit], row_count: int, key_column: str | None,
        column_list: str | None = None, auto_at: int | None = None,
    ) -> tuple[Template, tuple[Template, ...], Template]:
        """The INSERT's text cut into head, one template per row and tail; `auto_at`: the position of the
        AUTO_INCREMENT column among the values, whose value each row renders as an `AutoSlot`."""
        tokens = self.tokens
        span = node_span(target.table.this)
        assert span is not None
        i = next(k for k, t in enumerate(tokens) if t.start >= span[1])
        end = len(self.sql)
        if tokens[i].upper == "SET":
            stop = next(
                (t for t in tokens[i:] if t.depth == 0 and t.upper == "ON"),
                None,
            )
            tail_tokens = [t for t in tokens[i:] if (stop is None or t.start < stop.start) and t.text != ";"]
            pos = tail_tokens[-1].end
            row_edits = [Edit(pos, pos, (KeySlot(f", {key_column} = "),))] if key_column else []
            head_edits = list(edits)
            if auto_at is not None:  # (one row: its key is rendered with the head, `InsertPlan._render`)
                head_edits.append(self.auto_edit(_values_of(tail_tokens[1:], "="), auto_at, edits))
            return (
                build_template(self.shape, 0, pos, head_edits),
                (build_template(self.shape, pos, pos, row_edits),),
                build_template(self.shape, pos, end, edits),
            )
        extra = list(edits)
        if column_list is not None and tokens[i].upper in ("VALUES", "VALUE"):
            extra.append(Edit(tokens[i].start, tokens[i].start, (f"{column_list} ",)))  # default columns + key
        if tokens[i].text == "(":
            close = _matching(tokens, i)
            if key_column:
                extra.append(Edit(tokens[close].start, tokens[close].start, (f", {key_column}",)))
            i = close + 1
        while i < len(tokens) and not (tokens[i].depth == 0 and tokens[i].upper in ("VALUES", "VALUE")):
            i += 1
        i += 1
        spans: list[tuple[int, int]] = []
        while i < len(tokens) and tokens[i].text == "(":
            close = _matching(tokens, i)
            spans.append((tokens[i].start, tokens[close].end))
            i = close + 1
            if i < len(tokens) and tokens[i].text == ",":
                i += 1
            else:
                break
        if len(spans) != row_count:
            raise RoutingError("the proxy could not locate the VALUES rows of this INSERT; simplify its syntax")
        rows = []
        for start, stop in spans:
            row_edits = list(edits)
            if auto_at is not None:
                inner = [t for t in tokens if start < t.start and t.end < stop]
                row_edits.append(self.auto_edit(_values_of(inner, None), auto_at, edits))
            if key_column:
                row_edits.append(Edit(stop - 1, stop - 1, (KeySlot(", "),)))
            rows.append(build_template(self.shape, start, stop, row_edits))
        return (
            build_template(self.shape, 0, spans[0][0], extra),
            tuple(rows),
            build_template(self.shape, spans[-1][1], end, edits),
        )


def _values_of(tokens: Sequence[Token], after: str | None) -> list[tuple[Token, Token]]:
    """The first and last token of each comma-separated value among `tokens` (the inside of a VALUES row, or the
    assignments of INSERT ... SET, each value starting after its `after` token)."""
    if not tokens:
        return []
    depth = tokens[0].depth
    out: list[tuple[Token, Token]] = []
    part: list[Token] = []
    for t in [*tokens, None]:
        if t is None or (t.depth == depth and t.text == ","):
            if after is not None:
                part = part[next((k for k, p in enumerate(part) if p.text == after), len(part) - 1) + 1:]
            if part:
                out.append((part[0], part[-1]))
            part = []
        else:
            part.append(t)
    return out


def _default_key_columns(rule: Any, columns: Sequence[str], ast: exp.Insert) -> tuple[str, str] | None:
    """INSERT INTO t VALUES (...) without a column list, whose rows have one value fewer than the table has
    columns, into a table with a generated key: the values are for the other columns, in table order, and
    the proxy adds the key (as ShardingSphere does). Returns (the column list to splice in, the key)."""
    key_generate = getattr(rule, "key_generate", None)
    if key_generate is None or ast.args.get("conflict") is not None:
        return None
    key = key_generate.column.lower()
    tuples = list(ast.expression.expressions) if ast.expression is not None else []
    if key not in columns or not tuples or not all(
            isinstance(row, exp.Tuple) and len(row.expressions) == len(columns) - 1 for row in tuples):
        return None
    names = [c for c in columns if c != key] + [key]
    return "(" + ", ".join("`" + c.replace("`", "``") + "`" for c in names) + ")", key


def _levels_equated(
    sa: ShardingStrategy,
    a: int,
    sb: ShardingStrategy,
    b: int,
    same: Callable[[ColumnRef, ColumnRef], bool],
    bound: bool,
) -> bool:
    """Do equal values reach both strategies: the statement equates their columns, and the algorithms agree
    (the same algorithm, or binding tables, whose algorithms are declared equivalent by position)?"""
    if not bound and getattr(sa, "algorithm_name", None) != getattr(sb, "algorithm_name", None):
        return False
    if isinstance(sa, StandardStrategy) and isinstance(sb, StandardStrategy):
        return same((a, sa.column.lower()), (b, sb.column.lower()))
    if isinstance(sa, ComplexStrategy) and isinstance(sb, ComplexStrategy):
        return (
            len(sa.columns) == len(sb.columns)
            and all(same((a, x.lower()), (b, y.lower())) for x, y in zip(sa.columns, sb.columns, strict=True))
        )
    if isinstance(sa, HintStrategy) and isinstance(sb, HintStrategy):
        return True  # placed by the same hints
    return False


def _source_aligned(
    ra: TableRule, a: int, rb: TableRule, b: int, same: Callable[[ColumnRef, ColumnRef], bool], bound: bool
) -> bool:
    """Joined rows of the two tables always share a data source."""
    if ra.auto or rb.auto:
        return (
            ra.auto
            and rb.auto
            and [n.data_source for n in ra.data_nodes] == [n.data_source for n in rb.data_nodes]
            and _levels_equated(ra.table_strategy, a, rb.table_strategy, b, same, bound)
        )
    if ra.data_sources != rb.data_sources:
        return False
    if len(ra.data_sources) == 1:
        return True
    return _levels_equated(ra.database_strategy, a, rb.database_strategy, b, same, bound)


def _column_pairs(ra: TableRule, rb: TableRule) -> list[tuple[str, str]] | None:
    """The sharding columns of two tables that must be equated, level by level, for their rows to meet on
    one data node (None: a level that no equality decides, such as a hint strategy)."""
    levels = [(ra.table_strategy, rb.table_strategy)] if ra.auto or rb.auto else [
        (ra.database_strategy, rb.database_strategy), (ra.table_strategy, rb.table_strategy)]
    out: list[tuple[str, str]] = []
    for sa, sb in levels:
        if isinstance(sa, NoneStrategy) and isinstance(sb, NoneStrategy):
            continue
        if isinstance(sa, StandardStrategy) and isinstance(sb, StandardStrategy):
            pair = (sa.column.lower(), sb.column.lower())
            if pair not in out:
                out.append(pair)
        elif isinstance(sa, ComplexStrategy) and isinstance(sb, ComplexStrategy) and len(sa.columns) == len(sb.columns):
            out.extend(p for p in zip((c.lower() for c in sa.columns), (c.lower() for c in sb.columns), strict=True)
                       if p not in out)
        else:
            return None
    return out


def _node_aligned(
    ra: TableRule,
    a: int,
    rb: TableRule,
    b: int,
    same: Callable[[ColumnRef, ColumnRef], bool],
    *,
    trust_database: bool,
) -> bool:
    """Joined rows sit at the same data node position (1:1 route).

    Binding tables joined on their table sharding columns trust the binding declaration for the database
    level (ShardingSphere's contract: a child row joined on the parent's key carries the parent's database
    sharding value); joined only on the database columns they share a data source, not a table.
    """
    if ra.auto or rb.auto:
        return ra.auto and rb.auto and _levels_equated(ra.table_strategy, a, rb.table_strategy, b, same, True)
    database = _source_aligned(ra, a, rb, b, same, True)
    if isinstance(ra.table_strategy, NoneStrategy) and isinstance(rb.table_strategy, NoneStrategy):
        return database
    table = _levels_equated(ra.table_strategy, a, rb.table_strategy, b, same, True)
    return table and (database or trust_database)


def _matching(tokens: list[Token], i: int) -> int:
    depth = tokens[i].depth
    for j in range(i + 1, len(tokens)):
        if tokens[j].text == ")" and tokens[j].depth == depth:
            return j
    raise RoutingError("unbalanced parentheses in the statement")


def _rule_text(rule: TableRule) -> str:
    """How a table is sharded, for messages: ``t_order by user_id (data sources), order_id (tables)``."""
    parts = []
    levels = [(rule.table_strategy, "tables")] if rule.auto else [
        (rule.database_strategy, "data sources"), (rule.table_strategy, "tables")]
    for strategy, level in levels:
        if isinstance(strategy, StandardStrategy):
            parts.append(f"{strategy.column} ({level}, {strategy.algorithm_name})")
        elif isinstance(strategy, ComplexStrategy):
            parts.append(f"{', '.join(strategy.columns)} ({level}, {strategy.algorithm_name})")
        elif isinstance(strategy, HintStrategy):
            parts.append(f"hint values ({level}, {strategy.algorithm_name})")
    return f"sharding rule of {rule.logic_table}: by " + (" and ".join(parts) if parts else "no column")


def _quoted_variable(name: str) -> str:
    if re.fullmatch(r"[\w$.]+", name):
        return name
    return "`" + name.replace("`", "``") + "`"


def _correlatable(scope: exp.Expression) -> bool:
    """A SELECT evaluated per outer row (a predicate or scalar subquery), not a derived table or a CTE."""
    if not isinstance(scope, exp.Select):
        return False
    parent = scope.parent
    if isinstance(parent, exp.Exists | exp.Any | exp.All):
        return True
    if isinstance(parent, exp.Subquery):
        return not isinstance(parent.parent, exp.From | exp.Join | exp.CTE | exp.SetOperation) and not any(
            isinstance(p, exp.CTE) for p in _ancestors(parent)
        )
    return False


_NESTING = (exp.Subquery, exp.CTE, exp.Exists, exp.Any, exp.All)


def _is_nested(table: exp.Table, scope: exp.Expression, root: exp.Expression) -> bool:
    """Inside a subquery of any kind (IN / EXISTS / ANY / ALL / scalar), a derived table or a CTE; the
    SELECTs of a top-level UNION are not nested."""
    if any(isinstance(p, _NESTING) for p in _ancestors(table)):
        return True
    current = scope
    while current is not root and current is not None:
        parent = current.parent
        if not isinstance(parent, exp.SetOperation) and parent is not root:
            return True
        current = parent
    return False


def _same_query(node: exp.Expression, where: exp.Expression) -> bool:
    """Is ``node`` in the query of ``where`` itself, not in a subquery of it?"""
    parent = node.parent
    while parent is not None and parent is not where:
        if isinstance(parent, exp.Query):
            return False
        parent = parent.parent
    return parent is where


def _ancestors(node: exp.Expression) -> list[exp.Expression]:
    out = []
    parent = node.parent
    while parent is not None:
        out.append(parent)
        parent = parent.parent
    return out


_UNUSED = (DataNode,)
