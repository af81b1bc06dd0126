"""RDL's definitions: the syntax inside CREATE/ALTER SHARDING TABLE RULE ... (NAME(args), KEY=value,
'strings', numbers) parsed into items, and a table's definition turned into the YAML rule it stands for.

Why its own module: parsing a definition needs no proxy state and is checked on its own; proxy.session.session
.distsql.rdl plans and applies the change to the database's configuration file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from proxy.session.distsql.errors import DistSQLError, not_supported
from proxy.session.distsql.grammar import unquote

RULE_ERROR = (1105, "44000")  # ShardingSphere's rule errors are SQLSTATE 44000 (check option violation)


def _error(message: str) -> DistSQLError:
    return DistSQLError(RULE_ERROR[0], message, RULE_ERROR[1])


# --- the definitions' syntax: NAME(args), KEY=value, 'strings', numbers -----------------------------------------


@dataclass(frozen=True)
class Atom:
    text: str
    kind: str  # word | string | number

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


@dataclass(frozen=True)
class Call:
    name: str
    args: list[Item] = field(default_factory=list)

    @property
    def upper(self) -> str:
        return self.name.upper()


@dataclass(frozen=True)
class Assign:
    key: str
    value: Item

    @property
    def upper(self) -> str:
        return self.key.upper()


Item = Atom | Call | Assign

_TOKEN = re.compile(r"""\s*(?:(?P<string>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")"""
                    r"""|(?P<quoted>`(?:[^`]|``)+`)"""
                    r"""|(?P<number>-?\d+(?:\.\d+)?(?![\w$]))|(?P<word>[A-Za-z0-9_$]+)|(?P<symbol>[(),=;]))""", re.S)


def _tokens(text: str) -> list[tuple[str, str]]:

    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise DistSQLError(1064, f"You have an error in your DistSQL syntax near '{text[pos:pos + 40].strip()}'",
                               "42000")
        pos = m.end()
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind in ("string", "quoted"):
            out.append(("string" if kind == "string" else "word", unquote(value) or ""))
        else:
            out.append((kind, value))
    while out and out[-1] == ("symbol", ";"):
        out.pop()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _syntax(self) -> DistSQLError:
        rest = " ".join(t[1] for t in self.tokens[self.pos:self.pos + 6]) or "the end"
        return DistSQLError(1064, f"You have an error in your DistSQL syntax near '{rest}'", "42000")

    def items(self) -> list[Item]:
        out = [self.item()]
        while self._peek() == ("symbol", ","):
            self.pos += 1
            out.append(self.item())
        return out

    def item(self) -> Item:
        first = self.primary()
        if self._peek() == ("symbol", "="):
            self.pos += 1
            if isinstance(first, Call):
                raise self._syntax()
            return Assign(first.text, self.item())
        return first

    def primary(self) -> Atom | Call:
        token = self._peek()
        if token is None or token[0] == "symbol":
            raise self._syntax()
        self.pos += 1
        kind, text = token
        if kind == "word" and self._peek() == ("symbol", "("):
            self.pos += 1
            args = [] if self._peek() == ("symbol", ")") else self.items()
            if self._peek() != ("symbol", ")"):
                raise self._syntax()
            self.pos += 1
            return Call(text, args)
        return Atom(text, kind)

    def done(self) -> None:
        if self._peek() is not None:
            raise self._syntax()


def parse_items(text: str) -> list[Item]:
    parser = _Parser(text)
    items = parser.items()
    parser.done()
    return items


def _names(text: str, what: str) -> list[str]:
    out = []
    for item in parse_items(text):
        if not isinstance(item, Atom) or item.kind not in ("word", "string"):
            raise DistSQLError(1064, f"expected {what} names, got {_show(item)}", "42000")
        out.append(item.text)
    return out


def _show(item: Item) -> str:
    if isinstance(item, Atom):
        return item.text
    if isinstance(item, Assign):
        return f"{item.key}=..."
    return f"{item.name}(...)"


def _literal(item: Item, where: str) -> Any:
    if not isinstance(item, Atom):
        raise DistSQLError(1064, f"{where}: expected a value, got {_show(item)}", "42000")
    if item.kind == "number":
        return int(item.text) if re.fullmatch(r"-?\d+", item.text) else item.text
    if item.kind == "word" and item.upper in ("TRUE", "FALSE"):
        return item.upper == "TRUE"
    return item.text


def _word(item: Item, where: str) -> str:
    if not isinstance(item, Atom) or (item.kind == "number" and not item.text.isdigit()):
        raise DistSQLError(1064, f"{where}: expected a name, got {_show(item)}", "42000")
    return item.text


def _properties(call: Call, where: str) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for item in call.args:
        if not isinstance(item, Assign):
            raise DistSQLError(1064, f"{where}: PROPERTIES takes 'key'=value pairs, got {_show(item)}", "42000")
        props[item.key] = _literal(item.value, f"{where}.PROPERTIES({item.key!r})")
    return props


def _algorithm(call: Call, where: str) -> tuple[str, dict[str, Any]]:
    """TYPE(NAME='inline', PROPERTIES('k'='v', ...)) -> (type in lower case, props), as ShardingSphere keeps it."""
    name: str | None = None
    props: dict[str, Any] = {}
    for item in call.args:
        if isinstance(item, Assign) and item.upper == "NAME":
            name = str(_literal(item.value, f"{where}.NAME"))
        elif isinstance(item, Call) and item.upper == "PROPERTIES":
            props = _properties(item, where)
        else:
            raise DistSQLError(1064, f"{where}: unexpected {_show(item)} in TYPE(...)", "42000")
    if not name:
        raise DistSQLError(1064, f"{where}: TYPE(...) needs NAME='...'", "42000")
    return name.lower(), props


def typed_algorithm(call: Call, where: str) -> dict[str, Any]:
    """TYPE(NAME='MD5', PROPERTIES('k'=v, ...)) -> {type, props} as the mask and shadow RDL keep it: the type
    as written, the props as ShardingSphere's `Properties` hold them (text: `'from-x'=1` is "1"), no props
    key when there are none."""
    if call.upper != "TYPE":
        raise DistSQLError(1064, f"{where}: expected TYPE(NAME='...'), got {_show(call)}", "42000")
    out: dict[str, Any] = {}
    for item in call.args:
        if isinstance(item, Assign) and item.upper == "NAME" and isinstance(item.value, Atom):
            out["type"] = item.value.text
        elif isinstance(item, Call) and item.upper == "PROPERTIES":
            props: dict[str, str] = {}
            for prop in item.args:
                if not isinstance(prop, Assign) or not isinstance(prop.value, Atom):
                    raise DistSQLError(1064, f"{where}: PROPERTIES takes 'key'=value pairs, got {_show(prop)}",
                                       "42000")
                props[prop.key] = prop.value.text
            if props:
                out["props"] = props
        else:
            raise DistSQLError(1064, f"{where}: unexpected {_show(item)} in TYPE(...)", "42000")
    if not out.get("type"):
        raise DistSQLError(1064, f"{where}: TYPE(...) needs NAME='...'", "42000")
    return out


def _type_call(items: list[Item], where: str) -> tuple[str, dict[str, Any]] | None:
    for item in items:
        if isinstance(item, Call) and item.upper == "TYPE":
            return _algorithm(item, where)
    return None


# --- sharding table rules -------------------------------------------------------------------------------------


@dataclass
class TableDefinition:
    name: str
    auto: bool
    conf: dict[str, Any]
    algorithms: dict[str, dict[str, Any]]
    generators: dict[str, dict[str, Any]]


def _algorithm_conf(type_: str, props: dict[str, Any]) -> dict[str, Any]:
    return {"type": type_, "props": props} if props else {"type": type_}


def _strategy(table: str, level: str, call: Call, algorithms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """DATABASE_STRATEGY(TYPE='standard', SHARDING_COLUMN=c, SHARDING_ALGORITHM(TYPE(NAME='inline', ...)))"""
    where = f"{table}.{call.name}"
    kind: str | None = None
    columns: list[str] = []
    algorithm: tuple[str, dict[str, Any]] | None = None
    collecting = False
    for item in call.args:
        if isinstance(item, Assign) and item.upper == "TYPE":
            kind, collecting = str(_literal(item.value, f"{where}.TYPE")).lower(), False
        elif isinstance(item, Assign) and item.upper in ("SHARDING_COLUMN", "SHARDING_COLUMNS"):
            columns, collecting = [_word(item.value, f"{where}.{item.key}")], item.upper == "SHARDING_COLUMNS"
        elif isinstance(item, Atom) and collecting:  # SHARDING_COLUMNS=a, b, c
            columns.append(_word(item, f"{where}.SHARDING_COLUMNS"))
        elif isinstance(item, Call) and item.upper == "SHARDING_ALGORITHM":
            algorithm, collecting = _type_call(item.args, where), False
            if algorithm is None:
                raise DistSQLError(1064, f"{where}: SHARDING_ALGORITHM(...) needs TYPE(NAME='...')", "42000")
        else:
            raise DistSQLError(1064, f"{where}: unexpected {_show(item)}", "42000")
    if kind not in ("standard", "complex", "hint", "none"):
        raise DistSQLError(1064, f"{where}: TYPE must be 'standard', 'complex', 'hint' or 'none'", "42000")
    if kind == "none":
        return {"none": None}
    if algorithm is None:
        raise DistSQLError(1064, f"{where}: a {kind} strategy needs SHARDING_ALGORITHM(TYPE(...))", "42000")
    name = f"{table}_{level}_{algorithm[0]}".lower()
    algorithms[name] = _algorithm_conf(*algorithm)
    body: dict[str, Any] = {}
    if kind == "standard":
        if len(columns) != 1:
            raise DistSQLError(1064, f"{where}: a standard strategy needs SHARDING_COLUMN=column", "42000")
        body["shardingColumn"] = columns[0]
    elif kind == "complex":
        if len(columns) < 2:
            raise DistSQLError(1064, f"{where}: a complex strategy needs SHARDING_COLUMNS=a, b[, ...]", "42000")
        body["shardingColumns"] = ",".join(columns)
    body["shardingAlgorithmName"] = name
    return {kind: body}


def table_definition(item: Item) -> TableDefinition:
    """`t (DATANODES(...), DATABASE_STRATEGY(...), TABLE_STRATEGY(...), KEY_GENERATE_STRATEGY(...))` or the
    auto-table form `t (STORAGE_UNITS(...), SHARDING_COLUMN=c, TYPE(NAME='mod', ...), KEY_GENERATE_STRATEGY(...))`."""
    if not isinstance(item, Call):
        raise DistSQLError(1064, f"expected a table definition 'name (...)', got {_show(item)}", "42000")
    table = item.name
    conf: dict[str, Any] = {}
    algorithms: dict[str, dict[str, Any]] = {}
    generators: dict[str, dict[str, Any]] = {}
    auto: bool | None = None
    column: str | None = None
    auto_algorithm: tuple[str, dict[str, Any]] | None = None
    for arg in item.args:
        key = arg.upper
        if isinstance(arg, Call) and key == "STORAGE_UNITS":
            auto = True
            conf["actualDataSources"] = ",".join(_word(a, f"{table}.STORAGE_UNITS") for a in arg.args)
        elif isinstance(arg, Call) and key == "DATANODES":
            auto = False
            nodes = [str(_literal(a, f"{table}.DATANODES")) for a in arg.args]
            conf["actualDataNodes"] = ",".join(nodes)
        elif isinstance(arg, Assign) and key == "SHARDING_COLUMN":
            column = _word(arg.value, f"{table}.SHARDING_COLUMN")
        elif isinstance(arg, Call) and key == "TYPE":
            auto_algorithm = _algorithm(arg, table)
        elif isinstance(arg, Call) and key in ("DATABASE_STRATEGY", "TABLE_STRATEGY"):
            level = "database" if key == "DATABASE_STRATEGY" else "table"
            conf["databaseStrategy" if level == "database" else "tableStrategy"] = _strategy(table, level, arg,
                                                                                              algorithms)
        elif isinstance(arg, Call) and key == "KEY_GENERATE_STRATEGY":
            kcolumn: str | None = None
            generator: tuple[str, dict[str, Any]] | None = None
            for k in arg.args:
                if isinstance(k, Assign) and k.upper == "COLUMN":
                    kcolumn = _word(k.value, f"{table}.KEY_GENERATE_STRATEGY.COLUMN")
                elif isinstance(k, Call) and k.upper == "TYPE":
                    generator = _algorithm(k, f"{table}.KEY_GENERATE_STRATEGY")
                else:
                    raise DistSQLError(1064, f"{table}.KEY_GENERATE_STRATEGY: unexpected {_show(k)}", "42000")
            if kcolumn is None or generator is None:
                raise DistSQLError(1064, f"{table}: KEY_GENERATE_STRATEGY needs COLUMN=... and TYPE(NAME='...')",
                                   "42000")
            name = f"{table}_{generator[0]}".lower()
            generators[name] = _algorithm_conf(*generator)
            conf["keyGenerateStrategy"] = {"column": kcolumn, "keyGeneratorName": name}
        elif key == "AUDIT_STRATEGY":
            raise not_supported("AUDIT_STRATEGY", "shardproxy has no sharding auditors")
        else:
            raise DistSQLError(1064, f"{table}: unexpected {_show(arg)} in the table definition", "42000")
    if auto is None:
        raise DistSQLError(1064, f"{table}: a table definition needs DATANODES(...) or STORAGE_UNITS(...)", "42000")
    if auto:
        if column is None or auto_algorithm is None:
            raise DistSQLError(1064, f"{table}: an auto table needs SHARDING_COLUMN=... and TYPE(NAME='...')", "42000")
        name = f"{table}_{auto_algorithm[0]}".lower()
        algorithms[name] = _algorithm_conf(*auto_algorithm)
        conf["shardingStrategy"] = {"standard": {"shardingColumn": column, "shardingAlgorithmName": name}}
        # ShardingSphere's key order: data sources, strategy, key generation
        conf = {k: conf[k] for k in ("actualDataSources", "shardingStrategy", "keyGenerateStrategy") if k in conf}
    elif column is not None or auto_algorithm is not None:
        raise DistSQLError(1064, f"{table}: SHARDING_COLUMN and TYPE(...) belong to the STORAGE_UNITS form; "
                           "with DATANODES use DATABASE_STRATEGY / TABLE_STRATEGY", "42000")
    else:
        conf = {k: conf[k] for k in ("actualDataNodes", "databaseStrategy", "tableStrategy", "keyGenerateStrategy")
                if k in conf}
    return TableDefinition(table, bool(auto), conf, algorithms, generators)


__all__ = ["Assign", "Atom", "Call", "Item", "TableDefinition", "parse_items", "table_definition"]
