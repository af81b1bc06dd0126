"""A statement over encrypted columns, rewritten to the physical columns that hold them (ShardingSphere's encrypt
rewrite), before the sharding kernel routes it.

What the application writes in terms of a logical column becomes, in the text sent on:

* INSERT column lists and VALUES, UPDATE SET, ON DUPLICATE KEY UPDATE: the cipher, assisted query and LIKE query
  columns, each with the value encrypted by its encryptor (a ``?`` becomes one ``?`` per column, its parameter
  encrypted once per column);
* WHERE / ON / HAVING ``col = v``, ``<>``, ``IN (...)``, ``IS [NOT] NULL``: the assisted query column (else the
  cipher column, when its encryptor is deterministic) against the encrypted values; ``LIKE``: the LIKE query column
  against the pattern encrypted by the LIKE encryptor; ``a.col = b.col`` between two encrypted columns of one
  encryptor: both query columns;
* the select list: the cipher column under the logical name (``cipher AS col``, an alias kept), ``*`` and ``t.*``
  expanded to the table's logical columns (assisted and LIKE columns hidden), with which result column is
  decrypted by which encryptor (``Encrypted.decrypt``), the proxy decrypting them in the answer.

What cannot be answered right over ciphertext (ORDER BY, GROUP BY, a range, a function of an encrypted column, one in
a derived table's select list, INSERT ... SELECT into one) is refused with 1235 naming the column, as ShardingSphere
refuses it. The text is spliced (the user's text kept elsewhere, byte for byte); sqlglot's tree only says where.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp

from protocol.binary import value_to_sql_literal
from routing.encrypt.algorithms import Encryptor, like_pattern
from routing.encrypt.rule import EncryptColumn, EncryptRule, EncryptTable
from routing.errors import RoutingError
from routing.hints import has_hint_comment, parse_hint_comments
from routing.parse import (
    ANSI_QUOTES,
    NO_BACKSLASH_ESCAPES,
    Token,
    ansi_backquoted,
    literal_value,
    node_span,
    parse_statement,
    reading,
    scan_shape,
    tokenize,
)

__all__ = [
    "Encrypted",
    "MissingColumns",
    "ParamMap",
    "parameter_text",
    "physical_params",
    "rewrite_encrypted",
    "touches_encrypted",
]

ColumnsOf = Callable[[str], Sequence[str] | None]

#: how the rewritten statement's placeholders are filled from the client's parameters: for each ``?`` of the
#: rewritten text, in order, the index of the client's parameter and the encryptor applied to it (None: as it is)
ParamMap = tuple[tuple[int, Encryptor | None], ...]


@dataclass(slots=True)
class Encrypted:
    """The rewritten statement, its parameters (None when it had none) and, for a result set, the encryptor that
    decrypts each result column (None: shown as it comes); ``decrypt`` is None when no column is decrypted. (Not
    frozen: the fast path makes one per encrypted SELECT, and a frozen dataclass's ``__init__`` costs five times
    more; nothing changes it.)"""

    sql: str
    params: list[Any] | None
    decrypt: tuple[Encryptor | None, ...] | None
    #: some parameter is encrypted (its value changes, or it is bound to several physical columns)
    encrypts_params: bool = False
    #: the rewritten text's ``?`` from the client's parameters (``physical_params`` fills them); None when the
    #: rewrite could not vouch for it (the rewritten text has another number of ``?`` than the map says)
    param_map: ParamMap | None = None
    #: the rewrite expanded a table's columns (a ``*``, an INSERT without a column list): it holds while they do
    reads_columns: bool = False


class MissingColumns(Exception):
    """``SELECT *`` over a table whose columns the caller must look up first (``columns_of`` did not know)."""

    def __init__(self, table: str) -> None:
        super().__init__(table)
        self.table = table


def _refuse(column: EncryptColumn, where: str, what: str = "") -> RoutingError:
    advice = what or "compare it with = or IN, match it with LIKE, or select it as it is"
    return RoutingError(
        f"encrypted column {column.table}.{column.name} cannot be used in {where}: its physical columns hold "
        f"ciphertext, so the answer would be wrong; {advice}"
    )


@functools.lru_cache(maxsize=64)
def _names_re(rule: EncryptRule) -> re.Pattern[str]:
    names = sorted((re.escape(t) for t in rule.tables), key=len, reverse=True)
    return re.compile(r"(?<![\w$])(?:" + "|".join(names) + r")(?![\w$])", re.I)


def touches_encrypted(sql: str, rule: EncryptRule) -> bool:
    """Whether the text names an encrypted table at all (one regex, no parsing: most statements do not)."""
    return bool(rule.tables) and _names_re(rule).search(sql) is not None


# --- scopes ----------------------------------------------------------------------------------------------------


#: a derived table's result columns: (name, the encrypted column it carries, hidden); the name None when the
#: select list item has none (an expression without an alias), the whole list None when a ``*`` there stayed
Outputs = tuple[tuple[str | None, EncryptColumn | None, bool], ...]


@dataclass(frozen=True, slots=True)
class _Source:
    alias: str  # lower case: the alias, else the table name
    table: str  # the table's name as written (empty for a derived table)
    qualifier: str  # what the expanded columns are qualified with, as written
    encrypted: EncryptTable | None
    derived: bool
    columns: Mapping[str, EncryptColumn]  # lower-case logical name -> the encrypted column it is
    outputs: Outputs | None = None  # a derived table's, see Outputs


def _sources(
    scope: exp.Expression, rule: EncryptRule, derive: Callable[[exp.Subquery], Outputs | None]
) -> list[_Source]:
    """The tables of one SELECT / UPDATE / DELETE / INSERT, in text order (not those of nested queries): every
    table and derived table whose nearest enclosing statement is ``scope``, wherever sqlglot hung it (FROM, JOIN,
    a multi-table UPDATE's joins, DELETE's USING). A derived table's select list is rewritten here (``derive``)."""
    nodes = [n for n in scope.find_all(exp.Table, exp.Subquery) if n is not scope and _scope_of(n) is scope]
    nodes.sort(key=lambda n: _first_offset(n))
    out: list[_Source] = []
    for node in nodes:
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            alias = node.alias
            encrypted = rule.table(node.name)
            columns = encrypted.columns if encrypted is not None else {}
            out.append(_Source((alias or node.name).lower(), node.name, alias or node.name, encrypted, False, columns))
        elif isinstance(node, exp.Subquery) and node.alias:
            outputs = derive(node)
            columns = {n.lower(): c for n, c, hidden in outputs or () if n and c is not None and not hidden}
            out.append(_Source(node.alias.lower(), "", node.alias, None, True, columns, outputs))
    return out


def _first_offset(node: exp.Expression) -> int:
    for n in node.walk():
        start = n.meta.get("start") if n.meta else None
        if isinstance(start, int):
            return start
    return 1 << 30


_SCOPES = (exp.Select, exp.Update, exp.Delete, exp.Insert)


def _scope_of(node: exp.Expression) -> exp.Expression | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, _SCOPES):
        parent = parent.parent
    return parent


class _Resolver:
    def __init__(self, rule: EncryptRule, derive: Callable[[exp.Subquery], Outputs | None]) -> None:
        self.rule = rule
        self.derive = derive
        self._cache: dict[int, list[_Source]] = {}

    def sources(self, scope: exp.Expression) -> list[_Source]:
        key = id(scope)
        found = self._cache.get(key)
        if found is None:
            self._cache[key] = []  # (while its derived tables are read: they cannot see it, as in MySQL)
            found = self._cache[key] = _sources(scope, self.rule, self.derive)
        return found

    def resolve(self, column: exp.Column) -> tuple[_Source, EncryptColumn] | None:
        """The encrypted column a column reference names, None for any other column."""
        name = column.name.lower()
        qualifier = column.table.lower()
        scope = _scope_of(column)
        first = True
        while scope is not None:
            sources = self.sources(scope)
            if qualifier:
                named = [s for s in sources if s.alias == qualifier or s.table.lower() == qualifier]
                if named:
                    for src in named:
                        col = src.columns.get(name)
                        if col is not None:
                            return src, col
                    return None
            else:
                hits = [(s, s.columns[name]) for s in sources if name in s.columns]
                if hits:
                    if not first:
                        raise _refuse(
                            hits[0][1],
                            "a subquery without its table's name",
                            f"qualify it ({hits[0][0].qualifier}.{hits[0][1].name})",
                        )
                    return hits[0]
                if first and sources:
                    first = False
            scope = _scope_of(scope)
        if qualifier and any(name in t.columns for t in self.rule.tables.values()):
            col = next(t.columns[name] for t in self.rule.tables.values() if name in t.columns)
            raise _refuse(
                col,
                f"{column.sql(dialect='mysql')}, whose table {column.table} the proxy cannot place",
                "qualify it with its table's name or alias",
            )
        return None


# --- values ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Dyn:
    """A value written in the rewritten text: the value token ``token`` of the statement's shape, encrypted by
    ``encryptor`` (a literal), or a ``?`` whose parameter is (``param``)."""

    token: int
    negative: bool
    encryptor: Encryptor
    param: int | None


_SENTINEL = re.compile("\x00(\\d+)\x00")


@dataclass(frozen=True, slots=True)
class _Recipe:
    """A statement's rewrite in terms of its shape: the edits (their replacement texts hold sentinels for the
    encrypted values), what each sentinel is, which parameters are encrypted by which encryptors, the decryption
    plan, and the columns each ``*`` was expanded with. Any text of the same shape is rewritten by it."""

    spans: tuple[tuple[int, int, str], ...]
    edits: tuple[tuple[int, int, str], ...]
    dyns: tuple[_Dyn, ...]
    params: dict[int, list[Encryptor]]
    decrypt: tuple[Encryptor | None, ...] | None
    stars: dict[str, tuple[str, ...]]
    param_map: ParamMap | None


class _Text:
    """The statement's text, its parameters and the edits made to it."""

    def __init__(self, sql: str, params: Sequence[Any] | None, spans: tuple[tuple[int, int, str], ...]) -> None:
        self.sql = sql
        self.params = params
        self.spans = spans
        self.token_at = {start: k for k, (start, _e, _kind) in enumerate(spans)}
        # text offset of a `?` -> its parameter's index
        self.param_starts = {s: i for i, (s, _e, _k) in enumerate(sp for sp in spans if sp[2] == "p")}
        self.edits: list[tuple[int, int, str]] = []
        self.dyns: list[_Dyn] = []
        self.param_encryptors: dict[int, list[Encryptor]] = {}
        self._tokens: list[Token] | None = None

    @property
    def tokens(self) -> list[Token]:
        if self._tokens is None:
            self._tokens = tokenize(self.sql)
        return self._tokens

    def edit(self, start: int, end: int, text: str) -> None:
        self.edits.append((start, end, text))

    def value(self, node: exp.Expression) -> tuple[str, int, int, int, bool] | None:
        """A value the proxy can encrypt: (kind, start, end, token index, negative); kind "null", "literal" or
        "param". None for anything else (an expression, a column, a function)."""
        if isinstance(node, exp.Null):
            return "null", -1, -1, -1, False
        negative = False
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            node, negative = node.this, True
        if not isinstance(node, exp.Literal):
            return None
        span = node_span(node)
        if span is None or span[0] not in self.token_at:
            return None
        start, end = span
        token = self.token_at[start]
        if start in self.param_starts:
            index = self.param_starts[start]
            if self.params is not None and index >= len(self.params):
                raise RoutingError("an encrypted column's parameter has no value", errno=1210, sqlstate="HY000")
            return "param", start, end, token, False
        if negative:  # the minus sign is part of the value
            minus = self.sql.rfind("-", 0, start)
            start = minus if minus >= 0 and not self.sql[minus + 1 : start].strip() else start
        return "literal", start, end, token, negative

    def put(self, value: tuple[str, int, int, int, bool], encryptors: Sequence[Encryptor]) -> str:
        """The text that replaces ``value`` by its encrypted forms, joined by commas: sentinels the assembly
        writes the encrypted values in, or one ``?`` per form (the parameter encrypted once per form)."""
        kind, _start, _end, token, negative = value
        if kind == "null":
            return ", ".join("NULL" for _ in encryptors)
        if kind == "param":
            index = self.param_starts[self.spans[token][0]]
            self.param_encryptors.setdefault(index, []).extend(encryptors)
            return ", ".join("?" for _ in encryptors)
        out = []
        for encryptor in encryptors:
            out.append(f"\x00{len(self.dyns)}\x00")
            self.dyns.append(_Dyn(token, negative, encryptor, None))
        return ", ".join(out)

    def recipe(self, decrypt: tuple[Encryptor | None, ...] | None, stars: dict[str, tuple[str, ...]]) -> _Recipe:
        edits = sorted(self.edits, key=lambda e: (e[0], e[1]))
        for (_s0, e0, _t0), (s1, _e1, _t1) in itertools.pairwise(edits):
            if s1 < e0:
                raise RoutingError("encrypt rewrite: overlapping edits (report this statement)")
        count = sum(1 for _s, _e, kind in self.spans if kind == "p")
        param_map = tuple(
            (i, enc)
            for i in range(count)
            for enc in (self.param_encryptors[i] if i in self.param_encryptors else (None,))
        )
        return _Recipe(self.spans, tuple(edits), tuple(self.dyns), self.param_encryptors, decrypt, stars, param_map)


def _quote(value: str | None, backslashes: bool) -> str:
    if value is None:
        return "NULL"
    if backslashes:
        value = value.replace("\\", "\\\\")
    return "'" + value.replace("'", "''") + "'"


def _assemble(
    sql: str, spans: tuple[tuple[int, int, str], ...], recipe: _Recipe, params: Sequence[Any] | None, mode: int
) -> tuple[str, list[Any] | None]:
    """``recipe`` applied to ``sql`` (of the recipe's shape, its value tokens at ``spans``)."""
    old = recipe.spans
    ends = [e for _s, e, _k in old]
    shifts = [0]
    for (s0, e0, _k0), (s1, e1, _k1) in zip(old, spans, strict=True):
        shifts.append(shifts[-1] + (e1 - s1) - (e0 - s0))

    def at(pos: int) -> int:
        return pos + shifts[bisect.bisect_right(ends, pos)]

    backslashes = not mode & NO_BACKSLASH_ESCAPES

    def written(m: re.Match[str]) -> str:
        dyn = recipe.dyns[int(m.group(1))]
        start, end, kind = spans[dyn.token]
        raw = sql[start:end]
        plain = literal_value(raw, "s") if kind == "s" else ("-" if dyn.negative else "") + raw
        return _quote(dyn.encryptor.encrypt(plain), backslashes)

    out: list[str] = []
    pos = 0
    for start, end, text in recipe.edits:
        s, e = at(start), at(end)
        out.append(sql[pos:s])
        out.append(_SENTINEL.sub(written, text) if "\x00" in text else text)
        pos = e
    out.append(sql[pos:])
    new_params = None
    if params is not None:
        new_params = []
        for i, v in enumerate(params):
            encryptors = recipe.params.get(i)
            new_params.extend([v] if encryptors is None else [enc.encrypt(parameter_text(v)) for enc in encryptors])
    return "".join(out), new_params


def parameter_text(value: Any) -> str | None:
    """The plaintext an encryptor is given for a prepared statement's parameter value: the text of the literal the
    value would be written as (``routing.interpolate``, the text path), read back: a string as it is, bytes as their
    UTF-8 text (undecodable bytes kept, as ``plain_text`` keeps them), a number as its literal, a date or time as
    its quoted text; None for NULL."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="surrogateescape")
    literal = value_to_sql_literal(value)
    return literal[1:-1] if literal[:1] == "'" else literal


def physical_params(param_map: ParamMap, values: Sequence[Any]) -> list[Any]:
    """The rewritten statement's parameter values from the client's ``values`` (``Encrypted.param_map``): each as
    it is, or its ``parameter_text`` encrypted (NULL stays NULL). Raises what an encryptor raises (a LIKE
    encryptor's character without its dictionary)."""
    out: list[Any] = []
    for index, encryptor in param_map:
        value = values[index]
        out.append(value if encryptor is None or value is None else encryptor.encrypt(parameter_text(value)))
    return out


def _name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][\w$]*", name) else "`" + name.replace("`", "``") + "`"


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _qualifier(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][\w$]*", name) else _quoted(name)


def _ident_span(column: exp.Column) -> tuple[int, int]:
    span = node_span(column.this) if isinstance(column.this, exp.Identifier) else None
    if span is None:
        raise RoutingError(f"encrypt rewrite: cannot place column {column.sql()}")
    return span


# --- the rewrite -----------------------------------------------------------------------------------------------


#: (rule, shape key, mode, whether parameters are given) -> the shape's recipe; a statement of a known shape is
#: rewritten without sqlglot (its literals encrypted into the recipe's places)
_RECIPES: OrderedDict[tuple[EncryptRule, str, int, bool], _Recipe] = OrderedDict()
_RECIPES_MAX = 2048


def rewrite_encrypted(
    sql: str,
    rule: EncryptRule,
    *,
    params: Sequence[Any] | None = None,
    columns_of: ColumnsOf | None = None,
    mode: int = 0,
) -> Encrypted | None:
    """``sql`` rewritten over the physical columns; None when it names no encrypted table (sent as it is).
    Raises RoutingError (1235) for what cannot be rewritten, MissingColumns for a ``*`` whose table's columns
    ``columns_of`` did not know."""
    if not touches_encrypted(sql, rule):
        return None
    if has_hint_comment(sql) and parse_hint_comments(sql).skip_sql_rewrite:
        return None  # /* SHARDINGSPHERE_HINT: SKIP_SQL_REWRITE=true */: the statement as written, as ShardingSphere
    text = ansi_backquoted(sql, mode) if mode & ANSI_QUOTES else sql
    with reading(mode):
        shape = scan_shape(text)
        key = (rule, shape.key, mode, params is not None)
        recipe = _RECIPES.get(key)
        fresh = False
        if recipe is not None and _still_valid(recipe, shape.spans, params, columns_of):
            _RECIPES.move_to_end(key)
        else:
            recipe, keep = _compile(text, shape, rule, params, columns_of)
            fresh = True
        if not recipe.edits:
            out, new_params = sql, (list(params) if params is not None else None)
        else:
            out, new_params = _assemble(text, shape.spans, recipe, params, mode)
        if fresh:
            if recipe.param_map is not None and _placeholders(out) != len(recipe.param_map):
                recipe = replace(recipe, param_map=None)  # (a `?` the edits moved otherwise: not vouched for)
            if keep:
                _RECIPES[key] = recipe
                if len(_RECIPES) > _RECIPES_MAX:
                    _RECIPES.popitem(last=False)
    return Encrypted(out, new_params, recipe.decrypt, bool(recipe.params), recipe.param_map, bool(recipe.stars))


def _placeholders(sql: str) -> int:
    """The ``?`` placeholders of a text (read in the sql_mode being read)."""
    return sum(1 for _s, _e, kind in scan_shape(sql).spans if kind == "p")


def _still_valid(
    recipe: _Recipe, spans: tuple[tuple[int, int, str], ...], params: Sequence[Any] | None, columns_of: ColumnsOf | None
) -> bool:
    """A kept recipe fits this text: as many values, every parameter given, each ``*``'s table unchanged."""
    if len(spans) != len(recipe.spans):
        return False
    if params is not None and len(params) < sum(1 for _s, _e, k in spans if k == "p"):
        return False
    for table, names in recipe.stars.items():
        now = columns_of(table) if columns_of is not None else None
        if now is None or tuple(now) != names:
            return False
    return True


def _compile(
    text: str, shape: Any, rule: EncryptRule, params: Sequence[Any] | None, columns_of: ColumnsOf | None
) -> tuple[_Recipe, bool]:
    """The recipe of ``text``'s shape (read with sqlglot), and whether it may be kept for other texts of the shape
    (not when an ORDER BY or GROUP BY holds a position: its value decides what is refused)."""
    tree = parse_statement(shape)
    if not isinstance(tree, exp.Query | exp.Insert | exp.Update | exp.Delete):  # (None, or sqlglot's Command)
        raise RoutingError(
            "a statement on an encrypted table that shardproxy cannot read: it cannot tell which values to "
            "encrypt; write it in plain SELECT / INSERT / UPDATE / DELETE"
        )
    state = _Text(text, params, shape.spans)
    rewriter = _Rewriter(rule, state, columns_of)
    try:
        decrypt = rewriter.run(tree)
    except (ValueError, IndexError, KeyError, AttributeError, TypeError) as exc:
        raise RoutingError(
            f"a statement on an encrypted table that shardproxy cannot rewrite ({type(exc).__name__}: {exc}); "
            "write it in plain SELECT / INSERT ... VALUES / UPDATE / DELETE"
        ) from exc
    positional = any(
        isinstance(n, exp.Literal)
        for clause in tree.find_all(exp.Order, exp.Group)
        for n in clause.find_all(exp.Literal)
    )
    return state.recipe(decrypt, rewriter.stars), not positional


def _scalar_column(node: exp.Expression | None) -> exp.Column | None:
    """The one column a scalar subquery selects, ``(SELECT col FROM ...)``; None for anything else."""
    if isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Subquery):
        node = node.this
    if not isinstance(node, exp.Select) or len(node.expressions) != 1:
        return None
    item = node.expressions[0]
    target = item.this if isinstance(item, exp.Alias) else item
    return target if isinstance(target, exp.Column) and not isinstance(target.this, exp.Star) else None


def _in_select_list(column: exp.Column) -> bool:
    return isinstance(column.parent, exp.Select) or (
        isinstance(column.parent, exp.Alias) and isinstance(column.parent.parent, exp.Select)
    )


def _under_exists(column: exp.Column) -> bool:
    select = column.find_ancestor(exp.Select)
    parent = select.parent if select is not None else None
    if isinstance(parent, exp.Subquery):
        parent = parent.parent
    return isinstance(parent, exp.Exists)


def _same(a: Encryptor, b: Encryptor) -> bool:
    return a is b or (a.type == b.type and dict(a.props) == dict(b.props))


def _effective(plan: tuple[Encryptor | None, ...]) -> tuple[Encryptor | None, ...]:
    return plan if any(p is not None for p in plan) else ()


_RANGE = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)


def _context(column: exp.Column) -> str:
    node: exp.Expression = column
    parent = column.parent
    while parent is not None:
        if isinstance(parent, exp.Ordered | exp.Order):
            return "ORDER BY"
        if isinstance(parent, exp.Group):
            return "GROUP BY"
        if isinstance(parent, _RANGE):
            return "a range condition"
        if isinstance(parent, exp.Func):
            return f"the function {parent.sql_name() if not isinstance(parent, exp.Anonymous) else parent.name}()"
        if isinstance(parent, exp.Binary):
            return f"the expression {parent.sql(dialect='mysql')}"
        if isinstance(parent, (*_SCOPES, exp.Where, exp.Having, exp.Join)):
            break
        node, parent = parent, parent.parent
    del node
    return "this place"


class _Rewriter:
    def __init__(self, rule: EncryptRule, text: _Text, columns_of: ColumnsOf | None) -> None:
        self.rule = rule
        self.text = text
        self.columns_of = columns_of
        self.resolver = _Resolver(rule, self._derive)
        self.done: set[int] = set()  # ids of column nodes already rewritten
        self.stars: dict[str, tuple[str, ...]] = {}  # table -> the columns a * was expanded with

    def run(self, tree: exp.Expression) -> tuple[Encryptor | None, ...] | None:
        for scope in [tree, *tree.find_all(*_SCOPES)]:  # derived tables' select lists first, inner before outer
            if isinstance(scope, _SCOPES):
                self.resolver.sources(scope)
        decrypt: tuple[Encryptor | None, ...] | None = None
        if isinstance(tree, exp.Insert):
            self._insert(tree)
        elif isinstance(tree, exp.Update):
            self._assignments(tree.expressions, tree)
        if isinstance(tree, exp.Select | exp.Union):
            decrypt = self._top(tree)
        self._conditions(tree)
        return decrypt if decrypt is not None and any(d is not None for d in decrypt) else None

    # -- select lists --

    def _top(self, node: exp.Expression) -> tuple[Encryptor | None, ...]:
        if isinstance(node, exp.Union):
            left, right = _effective(self._top(node.left)), _effective(self._top(node.right))
            if left != right:
                raise RoutingError(
                    "a UNION whose parts select encrypted columns at different places (or by different encryptors): "
                    "the proxy could not tell which values to decrypt; select them at the same place in every part"
                )
            self._order(node, left)
            return left
        if isinstance(node, exp.Subquery):
            return self._top(node.this)
        if not isinstance(node, exp.Select):
            return ()
        out = self._projection(node)
        self._order(node, out)
        return out

    def _projection(self, select: exp.Select) -> tuple[Encryptor | None, ...]:
        items = select.expressions
        plan: list[Encryptor | list[Encryptor | None] | None] = []
        stars: list[tuple[exp.Expression, list[_Source]]] = []
        for item in items:
            target = item.this if isinstance(item, exp.Alias) else item
            parens = 0
            while isinstance(target, exp.Paren):  # SELECT DISTINCT (col)
                target, parens = target.this, parens + 1
            if isinstance(target, exp.Star) or (isinstance(target, exp.Column) and isinstance(target.this, exp.Star)):
                sources = self.resolver.sources(select)
                if isinstance(target, exp.Column):
                    sources = [
                        s for s in sources if s.alias == target.table.lower() or s.table.lower() == target.table.lower()
                    ]
                stars.append((target, sources))
                plan.append([])  # filled below
                continue
            if isinstance(target, exp.Column):
                hit = self.resolver.resolve(target)
                if hit is not None:
                    _src, col = hit
                    start, end = _ident_span(target)
                    self.text.edit(start, end, _name(col.cipher))
                    if not isinstance(item, exp.Alias):
                        after = self._closing(end, parens)
                        self.text.edit(after, after, f" AS {_name(target.name)}")  # (the name as written)
                    self.done.add(id(target))
                    plan.append(col.cipher_encryptor)
                    continue
            inner = _scalar_column(target)
            if inner is not None and (hit := self.resolver.resolve(inner)) is not None:
                # (SELECT col FROM t ...) [AS x]: the subquery's cipher, decrypted in the answer
                start, end = _ident_span(inner)
                self.text.edit(start, end, _name(hit[1].cipher))
                self.done.add(id(inner))
                plan.append(hit[1].cipher_encryptor)
                continue
            plan.append(None)
        if stars:
            plain = not any(p is not None and not isinstance(p, list) for p in plan)
            if plain and not any(s.columns for _t, srcs in stars for s in srcs):
                return ()  # nothing to decrypt: the stars stay as written
            slots = [i for i, p in enumerate(plan) if isinstance(p, list)]
            for slot, (target, sources) in zip(slots, stars, strict=True):
                plan[slot] = self._expand(target, sources)
        flat: list[Encryptor | None] = []
        for p in plan:
            if isinstance(p, list):
                flat.extend(p)
            else:
                flat.append(p)
        return tuple(flat)

    def _expand(self, star: exp.Expression, sources: list[_Source]) -> list[Encryptor | None]:
        parts: list[str] = []
        plan: list[Encryptor | None] = []
        for src in sources:
            if src.derived:
                q = _qualifier(src.qualifier)
                for name, col, hidden in self._outputs(src):
                    if not hidden:
                        parts.append(f"{q}.{_quoted(name)}")
                        plan.append(col.cipher_encryptor if col is not None else None)
                continue
            names = self.columns_of(src.table) if self.columns_of is not None else None
            if names is None:
                raise MissingColumns(src.table)
            self.stars[src.table] = tuple(names)
            q = _qualifier(src.qualifier)
            for name in names:
                low = name.lower()
                enc = src.encrypted
                if enc is not None and low in enc.hidden:
                    continue
                if enc is not None and low in enc.ciphers:
                    col = enc.ciphers[low]
                    parts.append(f"{q}.{_quoted(name)} AS {_quoted(col.name)}")
                    plan.append(col.cipher_encryptor)
                else:
                    parts.append(f"{q}.{_quoted(name)}")
                    plan.append(None)
        spans = [s for s in (node_span(n) for n in star.walk() if isinstance(n, exp.Identifier | exp.Star)) if s]
        if not spans:
            raise RoutingError("encrypt rewrite: cannot place *")
        self.text.edit(min(s[0] for s in spans), max(s[1] for s in spans), ", ".join(parts))
        return plan

    def _closing(self, pos: int, parens: int) -> int:
        """The end of the ``parens``-th closing parenthesis after ``pos`` (``pos`` itself for none)."""
        if not parens:
            return pos
        for tok in self.text.tokens:
            if tok.start >= pos and tok.text == ")":
                parens -= 1
                if not parens:
                    return tok.end
        raise RoutingError("encrypt rewrite: cannot find the closing parenthesis")

    def _outputs(self, src: _Source) -> list[tuple[str, EncryptColumn | None, bool]]:
        """A derived table's named result columns, for a ``*`` over it; refused when some are not known."""
        outputs = src.outputs
        if outputs is None or any(name is None for name, _c, _h in outputs):
            raise RoutingError(
                f"SELECT * over the derived table {src.qualifier}, whose columns the proxy cannot all name, together "
                "with encrypted columns; name the columns (and give its expressions aliases)"
            )
        return [(name, col, hidden) for name, col, hidden in outputs if name is not None]

    def _derive(self, subquery: exp.Subquery) -> Outputs | None:
        """A derived table's select list rewritten as ShardingSphere does: an encrypted column gives its cipher
        under the logical name (decrypted where the outer query selects it) and its cipher, assisted and LIKE
        columns under their own names (for the outer query's conditions); the result columns it then has."""
        select = subquery.this
        if not isinstance(select, exp.Select):
            return None
        outputs: list[tuple[str | None, EncryptColumn | None, bool]] = []
        for item in select.expressions:
            target = item.this if isinstance(item, exp.Alias) else item
            if isinstance(target, exp.Star) or (isinstance(target, exp.Column) and isinstance(target.this, exp.Star)):
                sources = self.resolver.sources(select)
                if isinstance(target, exp.Column):
                    low = target.table.lower()
                    sources = [s for s in sources if s.alias == low or s.table.lower() == low]
                if not any(s.columns for s in sources):
                    return None  # (no encrypted column under it: the * stays, its columns unknown)
                outputs.extend(self._expand_derived(target, sources))
                continue
            name = item.alias if isinstance(item, exp.Alias) else (target.name if isinstance(target, exp.Column)
                                                                     else None)  # fmt: skip
            hit = self.resolver.resolve(target) if isinstance(target, exp.Column) else None
            if hit is None:
                outputs.append((name, None, False))
                continue
            col = hit[1]
            start, end = _ident_span(target)
            qual_node = target.args.get("table")
            qual_span = node_span(qual_node) if qual_node is not None else None
            qualifier = self.text.sql[qual_span[0] : start] if qual_span else ""
            self.text.edit(
                start,
                end,
                _name(col.cipher) + ("" if isinstance(item, exp.Alias) else f" AS {_name(name or col.name)}"),
            )
            item_end = node_span(item.args["alias"])[1] if isinstance(item, exp.Alias) else end  # type: ignore[index]
            self.text.edit(item_end, item_end, "".join(f", {qualifier}{_name(p)}" for p in col.physical()))
            self.done.add(id(target))
            outputs.append((name or col.name, col, False))
            outputs.extend((p, col, True) for p in col.physical())
        return tuple(outputs)

    def _expand_derived(
        self, star: exp.Expression, sources: list[_Source]
    ) -> list[tuple[str | None, EncryptColumn | None, bool]]:
        """A ``*`` in a derived table's select list over encrypted tables: every column, a cipher column also
        under its logical name."""
        parts: list[str] = []
        outputs: list[tuple[str | None, EncryptColumn | None, bool]] = []
        for src in sources:
            q = _qualifier(src.qualifier)
            if src.derived:
                for name, col, hidden in self._outputs(src):
                    parts.append(f"{q}.{_quoted(name)}")
                    outputs.append((name, col, hidden))
                continue
            names = self.columns_of(src.table) if self.columns_of is not None else None
            if names is None:
                raise MissingColumns(src.table)
            self.stars[src.table] = tuple(names)
            enc = src.encrypted
            owner = {p.lower(): c for c in enc.columns.values() for p in c.physical()} if enc is not None else {}
            for name in names:
                col = owner.get(name.lower())
                if col is not None and name.lower() == col.cipher.lower():
                    parts.append(f"{q}.{_quoted(name)} AS {_quoted(col.name)}")
                    outputs.append((col.name, col, False))
                parts.append(f"{q}.{_quoted(name)}")
                outputs.append((name, col, col is not None))
        spans = [s for s in (node_span(n) for n in star.walk() if isinstance(n, exp.Identifier | exp.Star)) if s]
        if not spans:
            raise RoutingError("encrypt rewrite: cannot place *")
        self.text.edit(min(s[0] for s in spans), max(s[1] for s in spans), ", ".join(parts))
        return outputs

    def _order(self, select: exp.Expression, plan: tuple[Encryptor | None, ...]) -> None:
        """ORDER BY an alias or position of a decrypted column: refused (it would sort ciphertext); GROUP BY one:
        refused unless its cipher is deterministic."""
        aliases: dict[str, int] = {}
        if isinstance(select, exp.Select):
            for i, item in enumerate(select.expressions):
                if isinstance(item, exp.Alias) and i < len(plan) and plan[i] is not None:
                    aliases[item.alias.lower()] = i
        for clause in ("order", "group"):
            node = select.args.get(clause)
            if node is None:
                continue
            for ref in node.expressions:
                key = ref.this if isinstance(ref, exp.Ordered) else ref
                index = None
                if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
                    index = aliases[key.name.lower()]
                elif isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
                    index = int(key.this) - 1
                decrypted = plan[index] if index is not None and 0 <= index < len(plan) else None
                if decrypted is not None and clause == "group" and decrypted.equality and select.args.get("order"):
                    continue  # (equal plaintexts, equal ciphertexts: grouping by the cipher groups alike)
                if decrypted is not None:
                    word = "ORDER BY" if clause == "order" else "GROUP BY"
                    raise RoutingError(
                        f"{word} {key.sql(dialect='mysql')} names an encrypted column: its physical column holds "
                        f"ciphertext, so the rows would come in the wrong order; sort in the application"
                    )

    # -- writes --

    def _insert(self, insert: exp.Insert) -> None:
        target = insert.this.this if isinstance(insert.this, exp.Schema) else insert.this
        table = self.rule.table(target.name) if isinstance(target, exp.Table) else None
        if table is None:
            return
        positions: list[tuple[int, EncryptColumn]] = []
        if not isinstance(insert.this, exp.Schema) or not insert.this.expressions:
            # no column list: the table's logical columns, in order (a cipher column stands for its logical one)
            physical = self.columns_of(target.name) if self.columns_of is not None else None
            if physical is None:
                raise MissingColumns(target.name)
            self.stars[target.name] = tuple(physical)
            logical = self._logical(physical, table)
            positions = [(i, c) for i, (_n, c) in enumerate(logical) if c is not None]
            listed = [p for name, c in logical for p in (c.physical() if c is not None else (name,))]
            span = node_span(target.this)
            if span is None:
                raise RoutingError("encrypt rewrite: cannot place the table")
            self.text.edit(span[1], span[1], " (" + ", ".join(_quoted(n) for n in listed) + ")")
            column_end = span[1]
        else:
            names = insert.this.expressions
            if self._set_form(target):
                self._insert_set(insert, table)
                return
            for i, ident in enumerate(names):
                col = table.columns.get(ident.name.lower()) if isinstance(ident, exp.Identifier) else None
                if col is None:
                    continue
                span = node_span(ident)
                if span is None:
                    raise RoutingError(f"encrypt rewrite: cannot place column {ident.sql()}")
                self.text.edit(span[0], span[1], ", ".join(_name(p) for p in col.physical()))
                positions.append((i, col))
            end_span = node_span(names[-1])
            assert end_span is not None
            column_end = end_span[1]
        if positions:
            source = insert.expression
            if isinstance(source, exp.Select):
                self._insert_select(source, positions)
                source = None
            elif not isinstance(source, exp.Values):
                raise _refuse(positions[0][1], "INSERT ... SELECT", "insert the values themselves (INSERT ... VALUES)")
        if positions and isinstance(insert.expression, exp.Values):
            source = insert.expression
            tuples = self._tuple_spans(column_end, len(source.expressions))
            for row, (tup, spans) in enumerate(zip(source.expressions, tuples, strict=True)):
                values = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
                if len(values) != len(spans):
                    raise RoutingError(f"encrypt rewrite: cannot read row {row + 1} of the VALUES")
                for i, col in positions:
                    if i >= len(values):
                        raise RoutingError(
                            f"Column count doesn't match value count at row {row + 1}", errno=1136, sqlstate="21S01"
                        )
                    value = self.text.value(values[i])
                    if value is None:
                        raise _refuse(
                            col,
                            f"an INSERT value that is an expression ({values[i].sql(dialect='mysql')})",
                            "write the value itself",
                        )
                    start, end = spans[i]
                    self.text.edit(start, end, self.text.put(value, col.encryptors()))
        conflict = insert.args.get("conflict")
        if conflict is not None:
            self._assignments(conflict.expressions, insert)

    @staticmethod
    def _logical(physical: Sequence[str], table: EncryptTable) -> list[tuple[str, EncryptColumn | None]]:
        """A table's logical columns from its physical ones, in order (assisted and LIKE columns hidden)."""
        out: list[tuple[str, EncryptColumn | None]] = []
        for name in physical:
            low = name.lower()
            if low in table.hidden:
                continue
            col = table.ciphers.get(low)
            out.append((col.name, col) if col is not None else (name, None))
        return out

    def _insert_select(self, select: exp.Select, positions: list[tuple[int, EncryptColumn]]) -> None:
        """INSERT INTO t (.., enc, ..) SELECT .., other_enc, .. : the physical columns copied as they are, when the
        source column is encrypted exactly as the target (ShardingSphere's rule); refused otherwise."""
        items = select.expressions
        for i, col in positions:
            item = items[i] if i < len(items) else None
            source = item if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star) else None
            hit = self.resolver.resolve(source) if source is not None else None
            other = hit[1] if hit is not None else None
            if (
                other is None
                or len(other.physical()) != len(col.physical())
                or not all(_same(a, b) for a, b in zip(other.encryptors(), col.encryptors(), strict=True))
                or [p is None for p in (other.assisted, other.like)] != [p is None for p in (col.assisted, col.like)]
            ):
                raise _refuse(
                    col,
                    "INSERT ... SELECT from anything but a column encrypted the same way",
                    "insert the values themselves (INSERT ... VALUES)",
                )
            assert source is not None
            start, end = _ident_span(source)
            qual_node = source.args.get("table")
            qual_span = node_span(qual_node) if qual_node is not None else None
            qualifier = self.text.sql[qual_span[0] : start] if qual_span else ""
            self.text.edit(
                start, end, ", ".join((qualifier if k else "") + _name(p) for k, p in enumerate(other.physical()))
            )
            self.done.add(id(source))

    def _set_form(self, target: exp.Table) -> bool:
        """INSERT ... SET a = 1 (sqlglot reads it as a column list with one row of VALUES)."""
        span = node_span(target.this)
        if span is None:
            return False
        after = [t for t in self.text.tokens if t.start >= span[1]]
        return bool(after) and after[0].upper == "SET"

    def _insert_set(self, insert: exp.Insert, table: EncryptTable) -> None:
        source = insert.expression
        values = source.expressions[0].expressions if isinstance(source, exp.Values) else []
        for ident, node in zip(insert.this.expressions, values, strict=True):
            col = table.columns.get(ident.name.lower()) if isinstance(ident, exp.Identifier) else None
            span = node_span(ident)
            if col is None or span is None:
                continue
            value = self.text.value(node)
            if value is None:
                raise _refuse(col, f"SET {col.name} = {node.sql(dialect='mysql')}", "set it to a value")
            end = self._value_end(span[1])
            pieces = [
                f"{_name(p)} = {self.text.put(value, [enc])}"
                for p, enc in zip(col.physical(), col.encryptors(), strict=True)
            ]
            self.text.edit(span[0], end, ", ".join(pieces))
        conflict = insert.args.get("conflict")
        if conflict is not None:
            self._assignments(conflict.expressions, insert)

    def _tuple_spans(self, after: int, count: int) -> list[list[tuple[int, int]]]:
        """The text spans of each value of each VALUES row, read from the tokens after ``after``."""
        tokens = [t for t in self.text.tokens if t.start >= after]
        i = 0
        while i < len(tokens) and tokens[i].upper not in ("VALUES", "VALUE"):
            i += 1
        i += 1
        rows: list[list[tuple[int, int]]] = []
        while i < len(tokens) and len(rows) < count:
            if tokens[i].text != "(":
                raise RoutingError("encrypt rewrite: cannot read the VALUES rows")
            depth = tokens[i].depth + 1
            i += 1
            row: list[tuple[int, int]] = []
            first: Token | None = None
            last: Token | None = None
            while i < len(tokens):
                tok = tokens[i]
                if (tok.text == "," and tok.depth == depth) or (tok.text == ")" and tok.depth == depth - 1):
                    if first is not None and last is not None:
                        row.append((first.start, last.end))
                    first = last = None
                    i += 1
                    if tok.text == ")":
                        break
                    continue
                if first is None:
                    first = tok
                last = tok
                i += 1
            rows.append(row)
            if i < len(tokens) and tokens[i].text == ",":
                i += 1
        return rows

    def _value_end(self, after: int) -> int:
        """The end of the value of an assignment whose ``=`` is the first token after ``after``."""
        tokens = [t for t in self.text.tokens if t.start >= after]
        if not tokens or tokens[0].text != "=":
            raise RoutingError("encrypt rewrite: cannot read an assignment")
        base = tokens[0].depth
        end = tokens[0].end
        for tok in tokens[1:]:
            if tok.depth < base or (
                tok.depth == base
                and (tok.text in (",", ";") or tok.upper in ("WHERE", "ORDER", "LIMIT", "ON", "RETURNING"))
            ):
                break
            end = tok.end
        return end

    def _assignments(self, assignments: Sequence[exp.Expression], scope: exp.Expression) -> None:
        for eq in assignments:
            if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
                continue
            hit = self.resolver.resolve(eq.this)
            if hit is None:
                self._plain_values(eq.expression, scope)
                continue
            _src, col = hit
            start, ident_end = _ident_span(eq.this)
            qual_span = node_span(eq.this.args["table"]) if eq.this.args.get("table") is not None else None
            qualifier = self.text.sql[qual_span[0] : start] if qual_span else ""
            lead = qual_span[0] if qual_span else start
            end = self._value_end(ident_end)
            self.done.add(id(eq.this))
            value_node = eq.expression
            if (
                isinstance(value_node, exp.Anonymous)
                and value_node.name.upper() == "VALUES"
                and isinstance(scope, exp.Insert)
            ):
                sources = self._values_of(col, value_node)
                parts = [f"{qualifier}{_name(p)} = VALUES({_name(q)})" for p, q in zip(col.physical(), sources,
                                                                                      strict=True)]
                self.text.edit(lead, end, ", ".join(parts))
                for n in value_node.walk():
                    if isinstance(n, exp.Column):
                        self.done.add(id(n))
                continue
            value = self.text.value(value_node)
            if value is None:
                raise _refuse(col, f"SET {col.name} = {value_node.sql(dialect='mysql')}", "set it to a value")
            pieces = []
            for physical, enc in zip(col.physical(), col.encryptors(), strict=True):
                pieces.append(f"{qualifier}{_name(physical)} = {self.text.put(value, [enc])}")
            self.text.edit(lead, end, ", ".join(pieces))

    def _plain_values(self, value: exp.Expression, scope: exp.Expression) -> None:
        """A plain column's ON DUPLICATE KEY UPDATE value naming ``VALUES(col)`` of an encrypted column: refused
        (the plaintext is nowhere; the physical table has no such column)."""
        target = scope.this.this if isinstance(scope, exp.Insert) and isinstance(scope.this, exp.Schema) else None
        table = self.rule.table(target.name) if isinstance(target, exp.Table) else None
        if table is None:
            return
        for call in value.find_all(exp.Anonymous):
            if call.name.upper() != "VALUES":
                continue
            for arg in call.expressions:
                col = table.columns.get(arg.name.lower()) if isinstance(arg, exp.Identifier | exp.Column) else None
                if col is not None:
                    raise _refuse(col, f"{call.sql(dialect='mysql')} assigned to another column",
                                  "assign VALUES() of an encrypted column to a column encrypted the same way")

    def _values_of(self, col: EncryptColumn, call: exp.Anonymous) -> tuple[str, ...]:
        """``col = VALUES(other)`` in ON DUPLICATE KEY UPDATE: the physical columns of ``other`` each of ``col``'s
        takes its value from (``other`` is ``col`` itself, or a column encrypted the same way for each of ``col``'s
        physical columns); refused for anything else (a plain column's plaintext, another encryption)."""
        arg = call.expressions[0] if len(call.expressions) == 1 else None
        other = None
        table = self.rule.table(col.table)
        if isinstance(arg, exp.Identifier) and table is not None:  # (sqlglot's VALUES(col)): of the INSERT's table
            other = table.columns.get(arg.name.lower())
        elif isinstance(arg, exp.Column) and not isinstance(arg.this, exp.Star):
            hit = self.resolver.resolve(arg)
            other = hit[1] if hit is not None else None
        if other is col:
            return col.physical()
        pairs = (
            ((col.cipher, col.cipher_encryptor), (other.cipher, other.cipher_encryptor)),
            ((col.assisted, col.assisted_encryptor), (other.assisted, other.assisted_encryptor)),
            ((col.like, col.like_encryptor), (other.like, other.like_encryptor)),
        ) if other is not None else ()
        out = [theirs for (mine, enc), (theirs, their_enc) in pairs if mine is not None]
        if other is None or any(
            mine is not None and (theirs is None or enc is None or their_enc is None or not _same(enc, their_enc))
            for (mine, enc), (theirs, their_enc) in pairs
        ):
            raise _refuse(
                col,
                f"SET {col.name} = {call.sql(dialect='mysql')}",
                "set it to a value, or to VALUES() of a column encrypted the same way",
            )
        return tuple(name for name in out if name is not None)

    # -- conditions and every other column --

    def _conditions(self, tree: exp.Expression) -> None:
        for cmp in tree.find_all(exp.EQ, exp.NEQ, exp.NullSafeEQ):  # (SELECT a ...) = (SELECT b ...)
            left, right = _scalar_column(cmp.this), _scalar_column(cmp.expression)
            hits = [self.resolver.resolve(c) for c in (left, right) if c is not None]
            if len(hits) != 2 or hits[0] is None or hits[1] is None:
                continue
            queries = [h[1].equality() for h in hits]
            if queries[0] is None or queries[1] is None or not _same(queries[0][1], queries[1][1]):
                raise _refuse(hits[0][1], "a comparison of subqueries", "compare columns of one encryptor")
            for c, q in ((left, queries[0]), (right, queries[1])):
                assert c is not None
                start, end = _ident_span(c)
                self.text.edit(start, end, _name(q[0]))
                self.done.add(id(c))
        columns = list(tree.find_all(exp.Column))
        columns.sort(key=_in_select_list)  # a subquery's select list after the comparisons that may take it
        for column in columns:
            if id(column) in self.done or isinstance(column.this, exp.Star):
                continue
            hit = self.resolver.resolve(column)
            if hit is None:
                continue
            _src, col = hit
            parent = column.parent
            if isinstance(parent, exp.Paren):
                parent = parent.parent
            if _in_select_list(column) and _under_exists(column):
                start, end = _ident_span(column)  # (EXISTS looks at no value: the cipher does)
                self.text.edit(start, end, _name(col.cipher))
                continue
            if isinstance(parent, exp.Group):
                query = (col.cipher, col.cipher_encryptor) if col.cipher_encryptor.equality else col.equality()
                if query is None:
                    raise _refuse(col, "GROUP BY", "configure an assistedQuery column for it")
                if parent.parent is not None and parent.parent.args.get("order") is None:
                    raise _refuse(
                        col,
                        "GROUP BY without ORDER BY (MariaDB returns the groups in the column's order, "
                        "they would come in ciphertext order)",
                        "add an ORDER BY, or ORDER BY NULL",
                    )
                start, end = _ident_span(column)
                self.text.edit(start, end, _name(query[0]))
                continue
            if _in_select_list(column):
                raise _refuse(
                    col,
                    "the select list of a subquery or derived table",
                    "select it in the outermost query, where the proxy decrypts it",
                )
            if column.find_ancestor(exp.Having) is not None:  # (a select alias there holds the ciphertext)
                raise _refuse(col, "HAVING", "filter it in WHERE")
            if isinstance(parent, exp.EQ | exp.NEQ | exp.NullSafeEQ) and not isinstance(parent.parent, exp.Update):
                self._equality(column, col, parent)
            elif isinstance(parent, exp.In) and parent.this is column:
                if parent.args.get("query") is not None:
                    self._compare_subquery(column, col, parent.args["query"], "IN (SELECT ...)")
                else:
                    self._in(column, col, parent)
            elif isinstance(parent, exp.Like) and parent.this is column:
                self._like(column, col, parent)
            elif isinstance(parent, exp.Is) and parent.this is column and isinstance(parent.expression, exp.Null):
                query = col.equality()
                name = query[0] if query else col.cipher
                start, end = _ident_span(column)
                self.text.edit(start, end, _name(name))
            else:
                raise _refuse(col, _context(column))

    def _equality(self, column: exp.Column, col: EncryptColumn, parent: exp.Expression) -> None:
        other = parent.expression if parent.this is column else parent.this
        query = col.equality()
        if query is None:
            raise _refuse(col, "an equality condition", "configure an assistedQuery column for it")
        name, encryptor = query
        if _scalar_column(other) is not None:
            self._compare_subquery(column, col, other, "a comparison with a subquery")
            return
        if isinstance(other, exp.Column):
            hit = self.resolver.resolve(other)
            if hit is None:
                raise _refuse(col, f"a comparison with the plain column {other.sql(dialect='mysql')}")
            other_query = hit[1].equality()
            if (
                other_query is None
                or other_query[1].type != encryptor.type
                or dict(other_query[1].props) != dict(encryptor.props)
            ):
                raise _refuse(
                    col,
                    f"a comparison with {other.sql(dialect='mysql')}, encrypted otherwise",
                    "compare columns of one encryptor",
                )
            for c, n in ((column, name), (other, other_query[0])):
                start, end = _ident_span(c)
                self.text.edit(start, end, _name(n))
                self.done.add(id(c))
            return
        value = self.text.value(other)
        if value is None:
            raise _refuse(col, f"a comparison with {other.sql(dialect='mysql')}", "compare it with a value")
        start, end = _ident_span(column)
        self.text.edit(start, end, _name(name))
        if value[0] != "null":
            self.text.edit(value[1], value[2], self.text.put(value, [encryptor]))

    def _compare_subquery(self, column: exp.Column, col: EncryptColumn, subquery: exp.Expression, where: str) -> None:
        """``col = (SELECT other ...)`` / ``col IN (SELECT other ...)``, ``other`` encrypted alike: both query
        columns compared (ShardingSphere's rewrite); anything else is refused."""
        inner = _scalar_column(subquery)
        hit = self.resolver.resolve(inner) if inner is not None else None
        query = col.equality()
        other = hit[1].equality() if hit is not None else None
        if inner is None or query is None or other is None or not _same(query[1], other[1]):
            raise _refuse(col, where, "compare it with values, or with a column of the same encryptor")
        for c, n in ((column, query[0]), (inner, other[0])):
            start, end = _ident_span(c)
            self.text.edit(start, end, _name(n))
            self.done.add(id(c))

    def _in(self, column: exp.Column, col: EncryptColumn, parent: exp.In) -> None:
        query = col.equality()
        if query is None:
            raise _refuse(col, "IN (...)", "configure an assistedQuery column for it")
        name, encryptor = query
        start, end = _ident_span(column)
        self.text.edit(start, end, _name(name))
        for item in parent.expressions:
            value = self.text.value(item)
            if value is None:
                raise _refuse(col, f"IN with {item.sql(dialect='mysql')}", "list values")
            if value[0] != "null":
                self.text.edit(value[1], value[2], self.text.put(value, [encryptor]))

    def _like(self, column: exp.Column, col: EncryptColumn, parent: exp.Like) -> None:
        if col.like is None or col.like_encryptor is None:
            raise _refuse(col, "LIKE", "configure a likeQuery column for it")
        if isinstance(parent.parent, exp.Escape):
            raise _refuse(col, "LIKE ... ESCAPE", "use the default escape")
        values = self._pattern(parent.expression)
        if values is None:
            raise _refuse(col, f"LIKE {parent.expression.sql(dialect='mysql')}", "match it with a pattern value")
        start, end = _ident_span(column)
        self.text.edit(start, end, _name(col.like))
        for k, value in enumerate(values):  # (the LIKE encryptors digest character by character: each part on its own)
            if value[0] != "null":
                pattern = like_pattern(col.like_encryptor, k < len(values) - 1, f"{col.table}.{col.name}")
                self.text.edit(value[1], value[2], self.text.put(value, [pattern]))

    def _pattern(self, node: exp.Expression) -> list[tuple[str, int, int, int, bool]] | None:
        """A LIKE pattern's values: the value itself, or every value of a CONCAT of values (nested too)."""
        if isinstance(node, exp.Concat) or (isinstance(node, exp.Anonymous) and node.name.upper() == "CONCAT"):
            out: list[tuple[str, int, int, int, bool]] = []
            for part in node.expressions:
                found = self._pattern(part)
                if found is None:
                    return None
                out.extend(found)
            return out
        value = self.text.value(node)
        return None if value is None else [value]
