"""The merge of per-shard results must equal what one server returns for the whole table.

Three shard tables (t_0..t_2) and their union (t_all) live on one sandbox MariaDB; each query runs on
every shard (as the kernel would rewrite it), the raw text rows are merged with `merge_rows_sync`, and the
result is compared with the same logical query on t_all, byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from merge.numfmt import gcvt
from merge.pipeline import merge_rows_sync
from merge.spec import AggregateItem, AggregateKind, ColumnMeta, MergeSpec, OrderItem

K = AggregateKind
DB = "merge_check"
SHARDS = 3
ROWS: list[tuple[Any, ...]] = [
    # id, grp (general_ci), name_bin (utf8mb4_bin), name_uca (uca1400_ai_ci), price, score, d
    (1, "a", "apple", "éclair", "1.10", 0.5, "2020-01-03"),
    (2, "A", "Apple", "Eclair", "2.25", 1.25, "2020-01-01"),
    (3, "b", "banana", "ecole", None, -3.0, None),
    (4, "B ", "Banana", "ÉCOLE", "0.05", 1e20, "2019-12-31"),
    (5, "c", "cherry", "fig", "10.00", None, "2021-05-05"),
    (6, "a", "apple ", "f", "3.33", 2.5, "2020-01-02"),
    (7, None, None, None, "7.77", 0.25, "2020-01-01"),
    (8, "b", "b", "F", "4.00", 100.0, "2022-02-02"),
    (9, "C", "Cherry", "d", "5.55", -0.125, "2018-08-08"),
    (10, "a", "APPLE", "e", "0.01", 8.0, "2020-01-01"),
    (11, "d", "date", "z", "6.66", 1.5, "2020-06-06"),
]
DDL = """CREATE TABLE {t} (
  id INT PRIMARY KEY,
  grp VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci,
  name_bin VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  name_uca VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci,
  price DECIMAL(10,2),
  score DOUBLE,
  d DATE
)"""


@pytest.fixture(scope="module")
def server(mariadb: Any) -> Iterator[Any]:
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute(f"CREATE DATABASE {DB}")
    ddl = DDL
    if mariadb.execute("SELECT COUNT(*) FROM information_schema.collations "
                       "WHERE collation_name LIKE 'utf8mb4_uca1400_ai_ci'")[0][0] == 0:
        ddl = DDL.replace("utf8mb4_uca1400_ai_ci", "utf8mb4_unicode_ci")
    for table in [f"t_{i}" for i in range(SHARDS)] + ["t_all"]:
        mariadb.execute(ddl.format(t=table), DB)
    for row in ROWS:
        for table in (f"t_{row[0] % SHARDS}", "t_all"):
            mariadb.execute(f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s, %s)", DB, args=row)
    yield mariadb
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")


def query(server: Any, sql: str) -> tuple[list[tuple[bytes | None, ...]], list[ColumnMeta]]:
    conn = server.connect(DB, conv={}, use_unicode=False)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = [tuple(r) for r in cur.fetchall()]
            fields = cur._result.fields  # raw column definitions: charset and flags included
            meta = [ColumnMeta(f.name, f.type_code, f.charsetnr, f.flags, f.scale) for f in fields]
            return rows, meta
    finally:
        conn.close()


def check(server: Any, node_sql: str, logic_sql: str, spec: MergeSpec, *, casefold: tuple[int, ...] = ()) -> None:
    streams, columns = [], None
    for i in range(SHARDS):
        rows, columns = query(server, node_sql.format(t=f"t_{i}"))
        streams.append(rows)
    assert columns is not None
    merged = list(merge_rows_sync(streams, spec, columns))
    expected, _ = query(server, logic_sql.format(t="t_all"))

    def norm(rows: list[tuple[bytes | None, ...]]) -> list[tuple[bytes | None, ...]]:
        # under a _ci collation a group shows "some" row's value: compare those columns case-folded
        return [tuple(v.lower().rstrip() if i in casefold and v is not None else v for i, v in enumerate(r))
                for r in rows]

    assert norm(merged) == norm(expected)


Ob = OrderItem

CASES = [
    ("order ci then id desc", "SELECT id, grp FROM {t} ORDER BY grp, id DESC", None,
     MergeSpec(2, order_by=(Ob(1), Ob(0, True))), ()),
    ("order bin", "SELECT name_bin, id FROM {t} ORDER BY name_bin, id", None,
     MergeSpec(2, order_by=(Ob(0), Ob(1))), ()),
    ("order uca1400 accents", "SELECT name_uca, id FROM {t} ORDER BY name_uca, id", None,
     MergeSpec(2, order_by=(Ob(0), Ob(1))), ()),
    ("order double desc", "SELECT score FROM {t} ORDER BY score DESC", None, MergeSpec(1, order_by=(Ob(0, True),)), ()),
    ("order decimal nulls", "SELECT price FROM {t} ORDER BY price", None, MergeSpec(1, order_by=(Ob(0),)), ()),
    ("order date desc then id", "SELECT d, id FROM {t} ORDER BY d DESC, id", None,
     MergeSpec(2, order_by=(Ob(0, True), Ob(1))), ()),
    ("limit offset", "SELECT id FROM {t} ORDER BY id LIMIT 0, 7", "SELECT id FROM {t} ORDER BY id LIMIT 3, 4",
     MergeSpec(1, order_by=(Ob(0),), offset=3, limit=4), ()),
    ("aggregates no group by",
     "SELECT COUNT(*), SUM(price), MIN(name_bin), MAX(score), AVG(price), MAX(grp), AVG(id), SUM(price), COUNT(price),"
     " SUM(id), COUNT(id) FROM {t}",
     "SELECT COUNT(*), SUM(price), MIN(name_bin), MAX(score), AVG(price), MAX(grp), AVG(id) FROM {t}",
     MergeSpec(7, aggregates=(AggregateItem(K.COUNT, 0), AggregateItem(K.SUM, 1), AggregateItem(K.MIN, 2),
                              AggregateItem(K.MAX, 3), AggregateItem(K.AVG, 4, sum_index=7, count_index=8),
                              AggregateItem(K.MAX, 5), AggregateItem(K.AVG, 6, sum_index=9, count_index=10))), ()),
    ("group by stream ci",
     "SELECT grp, COUNT(*), SUM(price), AVG(price), MIN(name_bin), SUM(price), COUNT(price) FROM {t} "
     "GROUP BY grp ORDER BY grp",
     "SELECT grp, COUNT(*), SUM(price), AVG(price), MIN(name_bin) FROM {t} GROUP BY grp ORDER BY grp",
     MergeSpec(5, order_by=(Ob(0),), group_by=(0,), groups_sorted=True,
               aggregates=(AggregateItem(K.COUNT, 1), AggregateItem(K.SUM, 2),
                           AggregateItem(K.AVG, 3, sum_index=5, count_index=6), AggregateItem(K.MIN, 4))), (0,)),
    ("group by implicit order (memory)", "SELECT grp, SUM(id) FROM {t} GROUP BY grp",
     "SELECT grp, SUM(id) FROM {t} GROUP BY grp",
     MergeSpec(2, group_by=(0,), aggregates=(AggregateItem(K.SUM, 1),)), (0,)),
    ("group by order by aggregate", "SELECT grp, COUNT(*) FROM {t} GROUP BY grp",
     "SELECT grp, COUNT(*) FROM {t} GROUP BY grp ORDER BY COUNT(*) DESC, grp",
     MergeSpec(2, order_by=(Ob(1, True), Ob(0)), group_by=(0,), aggregates=(AggregateItem(K.COUNT, 1),)), (0,)),
    ("group by uca accents", "SELECT name_uca, COUNT(*) FROM {t} GROUP BY name_uca ORDER BY name_uca",
     "SELECT name_uca, COUNT(*) FROM {t} GROUP BY name_uca ORDER BY name_uca",
     MergeSpec(2, order_by=(Ob(0),), group_by=(0,), aggregates=(AggregateItem(K.COUNT, 1),), groups_sorted=True), (0,)),
    ("having", "SELECT grp, COUNT(*) AS c FROM {t} GROUP BY grp ORDER BY grp",
     "SELECT grp, COUNT(*) AS c FROM {t} GROUP BY grp HAVING c > 2 ORDER BY grp",
     MergeSpec(2, order_by=(Ob(0),), group_by=(0,), aggregates=(AggregateItem(K.COUNT, 1),), groups_sorted=True,
               having_sql="c > 2"), (0,)),
    ("count distinct", "SELECT COUNT(DISTINCT grp), grp FROM {t} GROUP BY grp",
     "SELECT COUNT(DISTINCT grp) FROM {t}",
     MergeSpec(1, aggregates=(AggregateItem(K.COUNT_DISTINCT, 0, distinct_index=1),)), ()),
    ("distinct ordered", "SELECT DISTINCT grp FROM {t} ORDER BY grp", None,
     MergeSpec(1, order_by=(Ob(0),), distinct=True), (0,)),
    ("bit and group_concat", "SELECT BIT_OR(id), BIT_XOR(id), BIT_AND(id), GROUP_CONCAT(id ORDER BY id) FROM {t}",
     "SELECT BIT_OR(id), BIT_XOR(id), BIT_AND(id) FROM {t}",
     MergeSpec(3, aggregates=(AggregateItem(K.BIT_OR, 0), AggregateItem(K.BIT_XOR, 1), AggregateItem(K.BIT_AND, 2))),
     ()),
]


@pytest.mark.parametrize(("node_sql", "logic_sql", "spec", "casefold"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_merge_equals_single_server(server: Any, node_sql: str, logic_sql: str | None, spec: MergeSpec,
                                    casefold: tuple[int, ...]) -> None:
    check(server, node_sql, logic_sql or node_sql, spec, casefold=casefold)


@pytest.mark.parametrize("value", ["0.1e0 + 0.2e0", "1e15", "1e14", "1e-15", "1e-16", "-1.2345678901234567e-5",
                                   "123456789012345.6e0", "1.5e20", "2.5e-5", "1e0/3", "100e0", "-0.5e0",
                                   "-1.2345678901234568e-15", "-1.2345678901234568e-16", "9.999999999999999e14"])
def test_double_text_matches_server(server: Any, value: str) -> None:
    rows, _ = query(server, f"SELECT {value}")
    text = rows[0][0]
    assert text is not None
    assert gcvt(float(text)) == text
