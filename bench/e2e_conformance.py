"""ShardingSphere 5.5.2's own e2e SQL cases through the proxy: pass/fail figures per scenario.

Run by hand (not part of CI, and it needs the resources, which are not in this repository):

    git -C <mirror of rhz1949/shardingsphere-5.5.2> archive HEAD test/e2e/sql/src/test/resources | tar -x -C /tmp/ss
    python3 bench/e2e_conformance.py /tmp/ss/test/e2e/sql/src/test/resources [--scenarios tbl,db,db_tbl_sql_federation]
        [--modes literal,prepared] [--kinds dql,dml] [--show-failures N] [--json FILE]

For each scenario (``env/scenario/<name>/``): one throwaway MariaDB server gets the scenario's actual and
expected databases (``data/*/init-sql/mysql/*.sql``) and rows (``data/*/dataset.xml``); the proxy serves
the scenario's logic database from its ``proxy/conf/mysql/*.yaml``, translated where the proxy has no
equivalent of a ShardingSphere test fixture:

* ``IT.STANDARD.FIXTURE`` (precise: the target whose name ends with ``value % 10``; ranges: every target
  unless the range is narrower than 10) becomes one INLINE algorithm per table and level,
  ``<prefix>${column % 10}`` with ``allow-range-query-with-inline-sharding`` (ranges to every target);
* ``IT.AUTO_INCREMENT.FIXTURE`` (keys 1, 2, 3, ...) and ``IT.FIXTURE`` (every key 1) become SNOWFLAKE:
  cases that check generated key values fail as the "generated keys differ" class; auditors
  (``IT.AUDITOR.FIXTURE``) are dropped;
* ``IT.ENCRYPT.LIKE.FIXTURE`` is ShardingSphere 5.3's ``CHAR_DIGEST_LIKE``, which the proxy knows under both
  names (without ShardingSphere's default dictionary: values outside ASCII are refused unless ``dict`` is
  given).

Cases: the DQL cases (``cases/dql/*.xml`` and ``cases/dql/cases/<scenario>/``) and the DML cases
(``cases/dml/*.xml``) whose ``scenario-types`` name the scenario and whose ``db-types`` (when given) include
MySQL, each assertion run literal (``?`` replaced by SQL literals, text protocol) and
prepared (COM_STMT_PREPARE / EXECUTE). A DQL assertion with ``expected-data-file`` is compared with that
dataset; otherwise with the same statement on the scenario's expected (unsharded) database, the rows in
order when the statement has an ORDER BY, as multisets otherwise. A DML assertion starts from the
scenario's rows, and its update count and the rows of every data node its dataset lists (read on the
backend itself) must be the dataset's.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import mysql.connector
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from proxy.sandbox import MariaDBServer  # noqa: E402
from routing.parse import scan_shape  # noqa: E402
from tests.integration.harness import start_proxy, write_conf  # noqa: E402

DEFAULT_SCENARIOS = ("tbl", "db", "db_tbl_sql_federation")


# --- resources -----------------------------------------------------------------------------------------------


@dataclass
class Case:
    kind: str  # dql | dml
    sql: str
    source: str  # the case file's name
    params: list[tuple[str, str]]  # (value, type)
    expected_file: str | None
    expected_source: str | None = None  # which of the scenario's expected databases answers (default: the first)


@dataclass
class Scenario:
    name: str
    root: Path
    resources: Path
    database: str = ""
    sources: dict[str, str] = field(default_factory=dict)  # data source -> physical database
    rules: str = ""
    expected_db: str = ""  # the first of expected_dbs
    expected_dbs: list[str] = field(default_factory=list)
    generated: set[str] = field(default_factory=set)  # columns a key generator fills
    proxy_addr: tuple[str, int] = ("", 0)


def _expand(nodes: str) -> list[tuple[str, str]]:
    """``ds_${0..1}.t_${0..9}`` -> every (data source, table)."""
    out = []
    for part in _split_top(nodes):
        ds, table = _node_split(part.strip())
        for d in _inline(ds):
            for t in _inline(table):
                out.append((d, t))
    return out


def _node_split(text: str) -> tuple[str, str]:
    """``ds_${0..9}.t_${0..9}`` -> (``ds_${0..9}``, ``t_${0..9}``): the dot outside ``${...}``."""
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "." and depth == 0:
            return text[:i], text[i + 1 :]
    return text, ""


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [*parts, cur]


def _inline(text: str) -> list[str]:
    m = re.search(r"\$\{(\d+)\.\.(\d+)\}", text)
    if m is None:
        m2 = re.search(r"\$\{\[([^\]]*)\]\}", text)
        if m2 is None:
            return [text]
        return [
            y
            for v in m2.group(1).split(",")
            for y in _inline(text[: m2.start()] + v.strip().strip("'\"") + text[m2.end() :])
        ]
    return [
        y
        for i in range(int(m.group(1)), int(m.group(2)) + 1)
        for y in _inline(text[: m.start()] + str(i) + text[m.end() :])
    ]


class _Tagged(dict):  # type: ignore[type-arg]
    tag = ""


class _Loader(yaml.SafeLoader):
    pass


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        d = _Tagged(loader.construct_mapping(node, deep=True))
    else:
        d = _Tagged()
    d.tag = suffix
    return d


_Loader.add_multi_constructor("!", _tagged)


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Tagged, lambda d, data: d.represent_mapping("!" + data.tag, dict(data)))


def load_scenario(resources: Path, name: str) -> Scenario:
    root = resources / "env" / "scenario" / name
    sc = Scenario(name, root, resources)
    conf = next((root / "proxy" / "conf" / "mysql").glob("*.yaml"))
    doc = yaml.load(conf.read_text(), Loader=_Loader)  # SafeLoader + ShardingSphere's tags
    sc.database = doc["databaseName"]
    for ds, props in doc["dataSources"].items():
        m = re.match(r"jdbc:mysql://[^/]+/([^?]+)", props["url"])
        sc.sources[ds] = m.group(1) if m else ds
    for rule in doc.get("rules") or []:
        for spec in (rule.get("tables") or {}).values() if getattr(rule, "tag", "") == "SHARDING" else ():
            column = ((spec or {}).get("keyGenerateStrategy") or {}).get("column")
            if column:
                sc.generated.add(str(column))
    sc.rules = yaml.dump(_translate_rules(doc.get("rules") or []), Dumper=_Dumper, sort_keys=False)
    expected = ET.parse(root / "data" / "expected" / "databases.xml").getroot()
    sc.expected_dbs = [(e.text or "").strip() for e in expected.iter("database")]
    sc.expected_db = sc.expected_dbs[0]
    return sc


def _translate_rules(rules: list[Any]) -> list[Any]:
    """The scenario's rules with ShardingSphere's test fixtures replaced (module docstring)."""
    out = []
    for rule in rules:
        if getattr(rule, "tag", "") != "SHARDING":
            out.append(rule)
            continue
        algorithms = dict(rule.get("shardingAlgorithms") or {})
        fixtures = {n for n, a in algorithms.items() if (a or {}).get("type") == "IT.STANDARD.FIXTURE"}
        for table, spec in (rule.get("tables") or {}).items():
            spec.pop("auditStrategy", None)
            nodes = str(spec.get("actualDataNodes", ""))
            first = _split_top(nodes)[0].strip()
            ds_part, table_part = _node_split(first)
            for key, part in (("databaseStrategy", ds_part), ("tableStrategy", table_part)):
                std = ((spec.get(key) or {}).get("standard")) or None
                if not std or std.get("shardingAlgorithmName") not in fixtures:
                    continue
                prefix = part.split("${", 1)[0]
                name = f"it_{table}_{'db' if key == 'databaseStrategy' else 'tbl'}"
                algorithms[name] = {
                    "type": "INLINE",
                    "props": {
                        "algorithm-expression": f"{prefix}${{{std['shardingColumn']} % 10}}",
                        "allow-range-query-with-inline-sharding": True,
                    },
                }
                std["shardingAlgorithmName"] = name
        for n in fixtures:
            algorithms.pop(n, None)
        rule["shardingAlgorithms"] = algorithms
        rule.pop("auditors", None)
        for gen in (rule.get("keyGenerators") or {}).values():
            if gen.get("type") in ("IT.AUTO_INCREMENT.FIXTURE", "IT.FIXTURE"):
                gen["type"] = "SNOWFLAKE"
        out.append(rule)
    return out


def load_cases(sc: Scenario, kinds: tuple[str, ...]) -> list[Case]:
    res = sc.resources / "cases"
    files: list[tuple[str, Path]] = []
    if "dql" in kinds:
        files += [("dql", p) for p in sorted((res / "dql").glob("*.xml"))]
        files += [("dql", p) for p in sorted((res / "dql" / "cases" / sc.name).rglob("*.xml"))]
    if "dml" in kinds:
        files += [("dml", p) for p in sorted((res / "dml").glob("*.xml"))]
    cases = []
    for kind, path in files:
        for tc in ET.parse(path).getroot().iter("test-case"):
            scenarios = [s.strip() for s in (tc.get("scenario-types") or "").split(",")]
            dbs = [s.strip() for s in (tc.get("db-types") or "MySQL").split(",")]
            if sc.name not in scenarios or "MySQL" not in dbs:
                continue
            for a in tc.iter("assertion"):
                params = []
                for p in _split_params(a.get("parameters") or ""):
                    value, _, typ = p.rpartition(":")
                    params.append((value, typ))
                cases.append(
                    Case(
                        kind,
                        tc.get("sql") or "",
                        path.name,
                        params,
                        a.get("expected-data-file"),
                        a.get("expected-data-source-name"),
                    )
                )
    return cases


def _split_params(text: str) -> list[str]:
    """``10:int, a,b:String`` -> ["10:int", "a,b:String"] (a comma inside a value stays)."""
    out: list[str] = []
    cur = ""
    for piece in text.split(","):
        cur = f"{cur},{piece}" if cur else piece
        if re.search(r":[\w#]*\s*$", cur):  # (types such as enum#season)
            out.append(cur.strip())
            cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


# --- values --------------------------------------------------------------------------------------------------

_NUMBERS = {"int", "long", "smallint", "tinyint", "decimal", "double", "float", "bigint", "integer"}


def _param_value(value: str, typ: str) -> Any:
    t = typ.lower()
    if value == "NULL" or value == "null":
        return None
    if t in ("int", "long", "smallint", "tinyint", "bigint", "integer"):
        return int(value)
    if t == "decimal":
        return Decimal(value)
    if t in ("double", "float"):
        return float(value)
    if t == "boolean":
        return value.lower() == "true"
    return value


def _literal(value: str, typ: str) -> str:
    v = _param_value(value, typ)
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int | float | Decimal):
        return str(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "''") + "'"


def literal_sql(sql: str, params: list[tuple[str, str]]) -> str:
    spans = [(s, e) for s, e, k in scan_shape(sql).spans if k == "p"]
    if len(spans) != len(params):
        raise ValueError(f"{len(spans)} placeholders, {len(params)} parameters")
    out, pos = [], 0
    for (s, e), (v, t) in zip(spans, params, strict=True):
        out += [sql[pos:s], _literal(v, t)]
        pos = e
    return "".join(out) + sql[pos:]


def norm(v: Any) -> str:
    """A value as the datasets write it."""
    if v is None:
        return "null"
    if isinstance(v, bytes | bytearray):
        try:
            return bytes(v).decode()
        except UnicodeDecodeError:
            return bytes(v).hex()
    if isinstance(v, dt.datetime):
        return (
            v.strftime("%Y-%m-%d %H:%M:%S")
            if (v.hour, v.minute, v.second, v.microsecond) != (0, 0, 0, 0)
            else v.strftime("%Y-%m-%d")
        )
    if isinstance(v, dt.timedelta):
        total = int(v.total_seconds())
        return f"{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"
    if isinstance(v, Decimal | float):
        try:
            d = Decimal(str(v))
        except InvalidOperation:
            return str(v)
        return format(d.normalize(), "f") if d == d.to_integral_value() or True else str(d)
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _same_value(got: str, want: str) -> bool:
    if got == want or want == "NOT_VERIFY":
        return True
    if want in ("true", "false") and got in ("1", "0"):  # a boolean column, read as the TINYINT it is
        return (got == "1") == (want == "true")
    try:
        return Decimal(got) == Decimal(want)
    except InvalidOperation:
        pass
    return _moment(got) is not None and _moment(got) == _moment(want)


def _moment(text: str) -> dt.datetime | None:
    """A date or datetime as the datasets write it (``2017-08-08 18:30:30.0``), or None."""
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d"):
        with contextlib.suppress(ValueError):
            return dt.datetime.strptime(text, fmt)
    return None


def _same_rows(got: list[list[str]], want: list[list[str]], ordered: bool) -> bool:
    if len(got) != len(want):
        return False
    if not ordered:
        got, want = sorted(got), sorted(want)
        if all(
            len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
            for a, b in zip(got, want, strict=True)
        ):
            return True
        # numbers written differently sort differently: match greedily
        pool = list(want)
        for row in got:
            hit = next(
                (
                    i
                    for i, w in enumerate(pool)
                    if len(w) == len(row) and all(_same_value(x, y) for x, y in zip(row, w, strict=True))
                ),
                None,
            )
            if hit is None:
                return False
            pool.pop(hit)
        return True
    return all(
        len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
        for a, b in zip(got, want, strict=True)
    )


# --- the environment -----------------------------------------------------------------------------------------


def _statements(text: str) -> list[str]:
    text = "\n".join(line for line in text.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in text.split(";\n") if s.strip() and not s.strip().startswith("/*")]


def _run_sql_file(server: MariaDBServer, path: Path) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for stmt in _statements(path.read_text()):
                stmt = stmt.rstrip(";")
                try:
                    cur.execute(stmt)
                except Exception as exc:  # e.g. MySQL-only syntax: report, go on
                    print(f"  init {path.name}: {stmt[:80]}...: {exc}", file=sys.stderr)
    finally:
        conn.close()


@dataclass
class DatasetTable:
    columns: list[tuple[str, bool]]  # (name, assert it)
    types: list[str]  # the dataset's column types (``boolean`` values are written true / false)
    nodes: list[tuple[str, str]]
    rows: dict[tuple[str, str], list[list[str]]]


def _dataset(path: Path) -> tuple[dict[str, DatasetTable], int | None]:
    root = ET.parse(path).getroot()
    tables: dict[str, DatasetTable] = {}
    order: list[DatasetTable] = []
    for meta in root.iter("metadata"):
        cols = [(c.get("name") or "", c.get("ignore-assert-data") != "true") for c in meta.iter("column")]
        nodes = _expand(meta.get("data-nodes") or "") if meta.get("data-nodes") else []
        types = [(c.get("type") or "").lower() for c in meta.iter("column")]
        t = DatasetTable(cols, types, nodes, {n: [] for n in nodes})
        order.append(t)
        for n in nodes:
            tables[f"{n[0]}.{n[1]}"] = t
    for row in root.iter("row"):
        values = [v.strip() for v in (row.get("values") or "").split(",")] if row.get("values") else []
        node = row.get("data-node")
        t = tables.get(node) if node else (order[0] if order else None)
        if t is None:
            continue
        key = tuple(node.split(".", 1)) if node else ("", "")
        t.rows.setdefault(key, []).append(values)  # type: ignore[arg-type]
    count = root.get("update-count")
    return {k: v for k, v in tables.items()}, int(count) if count is not None else None


def _stored(value: str, typ: str) -> Any:
    """A dataset value as the server takes it (a boolean column is a TINYINT in MariaDB)."""
    if typ == "boolean" and value.lower() in ("true", "false"):
        return int(value.lower() == "true")
    return value


def _load_rows(server: MariaDBServer, sources: dict[str, str], dataset: Path) -> None:
    tables, _ = _dataset(dataset)
    seen: set[int] = set()
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for t in tables.values():
                if id(t) in seen:
                    continue
                seen.add(id(t))
                names = ", ".join(f"`{c}`" for c, _ in t.columns)
                for ds, table in t.nodes:
                    db = sources.get(ds, ds)
                    cur.execute(f"DELETE FROM `{db}`.`{table}`")
                    rows = t.rows.get((ds, table), [])
                    for values in rows:
                        args = [
                            None if v == "null" else _stored(v, typ)
                            for v, typ in zip(values, t.types + [""] * len(values), strict=False)
                        ]
                        marks = ", ".join(["%s"] * len(args))
                        cur.execute(f"INSERT INTO `{db}`.`{table}` ({names}) VALUES ({marks})", args)
    finally:
        conn.close()


# --- running cases -------------------------------------------------------------------------------------------


@dataclass
class Result:
    ok: bool
    cls: str = ""
    detail: str = ""


def _connect(host: str, port: int, user: str, password: str, db: str) -> Any:
    # CLIENT_FOUND_ROWS: Connector/J's default (useAffectedRows=false), which ShardingSphere's counts assume
    return mysql.connector.connect(
        host=host,
        port=port,
        user=user,
        password=password,
        database=db,
        use_pure=True,
        ssl_disabled=True,
        autocommit=True,
        get_warnings=False,
        client_flags=[mysql.connector.constants.ClientFlag.FOUND_ROWS],
    )


def _execute(conn: Any, sql: str, params: list[tuple[str, str]], prepared: bool) -> tuple[str, Any]:
    """("rows", (columns, rows)) | ("ok", affected) | ("error", (errno, message))."""
    cur = conn.cursor(prepared=True) if prepared else conn.cursor()
    try:
        if prepared:
            cur.execute(sql, tuple(_param_value(v, t) for v, t in params))
        else:
            cur.execute(literal_sql(sql, params) if params else sql)
        if cur.description is not None:
            return "rows", ([d[0] for d in cur.description], [list(map(norm, r)) for r in cur.fetchall()])
        return "ok", cur.rowcount
    except mysql.connector.Error as exc:
        return "error", (int(exc.errno or 0), str(exc.msg))
    except Exception as exc:  # a client-side failure (decoding, parameter conversion)
        return "error", (0, f"{type(exc).__name__}: {exc}")
    finally:
        with contextlib.suppress(Exception):
            cur.close()


def classify_error(errno: int, message: str) -> str:
    if errno == 1235:
        text = re.sub(r"`[^`]*`|'[^']*'|\b\d+\b", "…", message)
        text = re.sub(r"\b(t_\w+|ds_\w+|sql_federation\w*)\b", "…", text)
        return "refused: " + " ".join(text.split()[:9])
    return f"error {errno}: " + " ".join(re.sub(r"'[^']*'", "…", message).split()[:8])


def _dataset_file(sc: Scenario, kind: str, name: str) -> Path | None:
    base = sc.resources / "cases" / kind / "dataset"
    for p in (base / sc.name / "mysql" / name, base / sc.name / name, base / name):
        if p.exists():
            return p
    return None


def run_dql(sc: Scenario, case: Case, proxy: Any, expected: dict[str, Any], prepared: bool) -> Result:
    kind, got = _execute(proxy, case.sql, case.params, prepared)
    if kind == "error":
        return Result(False, classify_error(*got), got[1])
    if kind != "rows":
        return Result(False, "no result set")
    columns, rows = got
    ordered = "order by" in case.sql.lower()
    if case.expected_file:
        path = _dataset_file(sc, "dql", case.expected_file)
        if path is None:
            return Result(False, "expected dataset file missing", case.expected_file)
        tables, _ = _dataset(path)
        table = next(iter(tables.values()), None)
        root = ET.parse(path).getroot()
        cols = [(c.get("name") or "", c.get("ignore-assert-data") != "true") for c in root.iter("column")]
        # ShardingSphere's BaseDQLE2EIT.assertRow splits an expected file's row on "|"
        want = [[v.strip() for v in (r.get("values") or "").split("|")] for r in root.iter("row")]
        del table
        keep = [i for i, (_n, a) in enumerate(cols) if a]
        if len(columns) != len(cols):
            return Result(False, "wrong column count", f"{len(columns)} vs {len(cols)}")
        rows = [[r[i] for i in keep] for r in rows]
        want = [[w[i] for i in keep if i < len(w)] for w in want]
        if _same_rows(rows, want, ordered):
            return Result(True)
        return Result(False, "wrong rows", f"{rows[:3]} vs {want[:3]}")
    # (a name the scenario's expected databases do not list: its only expected database, as ShardingSphere's runner
    # falls back to)
    oracle = expected.get(case.expected_source or sc.expected_db) or expected[sc.expected_db]
    ekind, egot = _execute(oracle, case.sql, case.params, prepared)
    if ekind != "rows":
        return Result(False, "expected database fails too (not comparable)", str(egot))
    ecolumns, erows = egot
    if len(columns) != len(ecolumns):
        return Result(False, "wrong column count", f"{columns} vs {ecolumns}")
    if not _same_rows(rows, erows, ordered):
        if ordered and _same_rows(rows, erows, False):  # e.g. ORDER BY a column with ties: both orders valid
            return Result(False, "same rows, another order (is the ORDER BY total?)", f"{rows[:3]} vs {erows[:3]}")
        return Result(False, "wrong rows", f"{rows[:3]} vs {erows[:3]}")
    return Result(True)


def _clear(server: MariaDBServer, sources: dict[str, str], dataset: Path) -> None:
    """Empty every data node a dataset lists (tables the scenario's rows do not cover, e.g. single tables)."""
    tables, _ = _dataset(dataset)
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for node in {n for t in tables.values() for n in t.nodes}:
                cur.execute(f"DELETE FROM `{sources.get(node[0], node[0])}`.`{node[1]}`")
    finally:
        conn.close()


def _execute_multi(sc: Scenario, sql: str) -> tuple[str, Any]:
    """Several statements in one text (literal mode): every answer read, affected rows summed."""
    import pymysql
    from pymysql.constants import CLIENT

    conn = pymysql.connect(
        host=sc.proxy_addr[0],
        port=sc.proxy_addr[1],
        user="root",
        password="root",
        database=sc.database,
        client_flag=CLIENT.MULTI_STATEMENTS | CLIENT.FOUND_ROWS,
        autocommit=True,
    )
    try:
        with conn.cursor() as cur:
            first = cur.execute(sql)  # JDBC's executeUpdate answers the first statement's count
            while cur.nextset():
                pass
            return "ok", first
    except pymysql.MySQLError as exc:
        return "error", (int(exc.args[0]), str(exc.args[1]) if len(exc.args) > 1 else "")
    finally:
        conn.close()


def run_dml(sc: Scenario, server: MariaDBServer, case: Case, proxy: Any, prepared: bool) -> Result:
    path = _dataset_file(sc, "dml", case.expected_file) if case.expected_file else None
    if path is not None:
        _clear(server, sc.sources, path)
    _load_rows(server, sc.sources, sc.root / "data" / "actual" / "dataset.xml")
    if len([s for s in case.sql.split(";") if s.strip()]) > 1:
        # several statements: Connector/J prepares on the client side by default (useServerPrepStmts=false),
        # so ShardingSphere's "prepared" run of them is a text query too
        kind, got = _execute_multi(sc, case.sql)
    else:
        kind, got = _execute(proxy, case.sql, case.params, prepared)
    if kind == "error":
        return Result(False, classify_error(*got), got[1])
    if not case.expected_file:
        return Result(kind == "ok", "" if kind == "ok" else "answered rows")
    if path is None:
        return Result(False, "expected dataset file missing", case.expected_file)
    tables, count = _dataset(path)
    if count is not None and kind == "ok" and got != count:
        return Result(False, "wrong update count", f"{got} vs {count}")
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            seen: set[int] = set()
            for t in tables.values():
                if id(t) in seen:
                    continue
                seen.add(id(t))
                names = ", ".join(f"`{c}`" for c, _ in t.columns)
                keep = [i for i, (_n, a) in enumerate(t.columns) if a]
                for node in t.nodes:
                    cur.execute(f"SELECT {names} FROM `{sc.sources.get(node[0], node[0])}`.`{node[1]}`")
                    rows = [[norm(r[i]) for i in keep] for r in cur.fetchall()]
                    want = [[w[i] for i in keep if i < len(w)] for w in t.rows.get(node, [])]
                    if not _same_rows(rows, want, False):
                        generated = any(c in sc.generated for c, _ in t.columns) and "insert" in case.sql.lower()
                        return Result(
                            False,
                            "generated keys differ (fixture key generator)" if generated else "wrong data on a node",
                            f"{node}: {rows[:3]} vs {want[:3]}",
                        )
    finally:
        conn.close()
    return Result(True)


def run_scenario(
    resources: Path,
    name: str,
    server: MariaDBServer,
    modes: tuple[str, ...],
    kinds: tuple[str, ...],
    workdir: Path,
    show: int,
) -> dict[str, Any]:
    sc = load_scenario(resources, name)
    for side in ("actual", "expected"):
        for f in sorted((sc.root / "data" / side / "init-sql" / "mysql").glob("*.sql")):
            if side == "actual" and "logic" in f.name:
                continue  # statements for the logic database (through the proxy), not the data sources
            _run_sql_file(server, f)
    _load_rows(server, sc.sources, sc.root / "data" / "actual" / "dataset.xml")
    _load_rows(server, {db: db for db in sc.expected_dbs}, sc.root / "data" / "expected" / "dataset.xml")
    conf = write_conf(
        workdir / name,
        {sc.database: {ds: (server, db) for ds, db in sc.sources.items()}},
        rules_yaml={sc.database: sc.rules},
        max_pool_size=4,
    )
    try:
        proxy = start_proxy(conf)
    except Exception as exc:  # the configuration refused: the scenario's every case fails
        print(f"\n== {name}: the proxy does not start: {str(exc)[-300:]}")
        return {"scenario": name, "error": str(exc)}
    sc.proxy_addr = (proxy.host, proxy.port)
    cases = load_cases(sc, kinds)
    report: dict[str, Any] = {"scenario": name, "cases": len(cases), "modes": {}}
    try:
        for mode in modes:
            prepared = mode == "prepared"
            pconn = _connect(proxy.host, proxy.port, "root", "root", sc.database)
            econn = {db: _connect(server.host, server.port, server.user, server.password, db) for db in sc.expected_dbs}
            figures: dict[str, Counter[str]] = {k: Counter() for k in kinds}
            classes: Counter[str] = Counter()
            failures: list[tuple[str, str, str]] = []
            for case in cases:
                with contextlib.suppress(Exception):
                    pconn.close()  # a fresh session per case: nothing one case leaves reaches the next
                pconn = _connect(proxy.host, proxy.port, "root", "root", sc.database)
                try:
                    if case.kind == "dql":
                        r = run_dql(sc, case, pconn, econn, prepared)
                    else:
                        r = run_dml(sc, server, case, pconn, prepared)
                except Exception as exc:
                    r = Result(False, f"runner: {type(exc).__name__}", str(exc))
                    with contextlib.suppress(Exception):
                        pconn.close()
                    pconn = _connect(proxy.host, proxy.port, "root", "root", sc.database)
                figures[case.kind]["pass" if r.ok else "fail"] += 1
                if not r.ok:
                    classes[f"{case.kind} {r.cls}"] += 1
                    failures.append((r.cls, case.sql, r.detail))
            _load_rows(server, sc.sources, sc.root / "data" / "actual" / "dataset.xml")
            report["modes"][mode] = {"figures": {k: dict(v) for k, v in figures.items()}, "classes": dict(classes)}
            print(
                f"\n== {name} / {mode}: "
                + ", ".join(f"{k.upper()} {v['pass']}/{v['pass'] + v['fail']} pass" for k, v in figures.items() if v)
            )
            for cls, n in classes.most_common():
                print(f"   {n:4d}  {cls}")
            for cls, sql, detail in failures[:show]:
                print(f"   - [{cls}] {sql[:160]}\n       {detail[:300]}")
            pconn.close()
            for conn in econn.values():
                conn.close()
    finally:
        proxy.stop()
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("resources", type=Path, help="ShardingSphere 5.5.2 test/e2e/sql/src/test/resources")
    ap.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS))
    ap.add_argument("--modes", default="literal,prepared")
    ap.add_argument("--kinds", default="dql,dml")
    ap.add_argument("--show-failures", type=int, default=0, help="print this many failing cases per run")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    if not (args.resources / "env" / "scenario").is_dir():
        print(f"{args.resources}: not ShardingSphere's e2e resources (no env/scenario)", file=sys.stderr)
        return 2
    started = time.monotonic()
    reports = []
    with tempfile.TemporaryDirectory() as tmp, MariaDBServer.start(base_dir=Path(tmp) / "mariadb") as server:
        for name in args.scenarios.split(","):
            reports.append(
                run_scenario(
                    args.resources,
                    name,
                    server,
                    tuple(args.modes.split(",")),
                    tuple(args.kinds.split(",")),
                    Path(tmp),
                    args.show_failures,
                )
            )
    print(f"\n({time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
