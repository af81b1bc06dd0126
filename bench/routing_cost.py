"""The kernel's routing cost of statements with long IN lists next to sqlglot's own parse of them (issue 35).

Why: 50,000 ids in ``WHERE order_id IN (...)`` took 11.8 s through the proxy where sqlglot parses the text in
0.19 s (a list scan per value). This routes ``SELECT COUNT(*), SUM(order_id) FROM t_order WHERE <col> IN (<n ids>)``
with the shipped rules (conf/database-sharding.yaml: t_order over 2 data sources by user_id x 2 tables by order_id)
by a fresh `ShardingKernel` (nothing cached: the statement's plan is compiled in the time), and prints per list
length the best of `--repeat` runs of sqlglot's parse of the same text, of the kernel's route (route + rewrite:
every execution unit's SQL), and their ratio, on the table key (order_id), the database key (user_id), off the
keys (status), and prepared on the table key (``?`` with the ids as parameters; up to MySQL's 65,535).

    python bench/routing_cost.py [--sizes 1000 4000 16000 64000 200000 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import sqlglot  # noqa: E402

from routing.config import load_database_rules, load_yaml  # noqa: E402
from routing.kernel import ShardingKernel  # noqa: E402

COLUMNS = {"t_order": ["order_id", "user_id", "address_id", "status"]}
MODES = {  # name: (column, prepared)
    "order_id (table key)": ("order_id", False),
    "user_id (database key)": ("user_id", False),
    "status (off the keys)": ("status", False),
    "order_id, prepared": ("order_id", True),
}
PLACEHOLDER_LIMIT = 65535  # MySQL's limit of parameters in one prepared statement


class Metadata:
    def columns(self, logic_table: str) -> list[str] | None:
        return COLUMNS.get(logic_table.lower())

    def column_type(self, logic_table: str, column: str) -> str | None:
        return None

    def single_table_data_source(self, table: str) -> str | None:
        return None


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def statement(column: str, n: int, prepared: bool) -> tuple[str, list[int] | None]:
    ids = list(range(1, n + 1))
    values = ", ".join("?" * n) if prepared else ", ".join(map(str, ids))
    return f"SELECT COUNT(*), SUM(order_id) FROM t_order WHERE {column} IN ({values})", ids if prepared else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000, 64000, 200000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args(argv)
    doc = load_yaml((REPO / "conf" / "database-sharding.yaml").read_text(), "database-sharding.yaml")
    rules = load_database_rules(doc, warn=lambda message: None)
    print(f"python {sys.version.split()[0]}, sqlglot {sqlglot.__version__}; best of {args.repeat}")
    print(f"| {'statement':24} | {'values':>9} | {'text KiB':>8} | {'sqlglot parse s':>15} | {'kernel route s':>14} |"
          f" {'ratio':>5} | units: values each |")
    print(f"|{'-' * 26}|{'-' * 11}|{'-' * 10}|{'-' * 17}|{'-' * 16}|{'-' * 7}|{'-' * 20}|")
    worst = 0.0
    for mode in args.modes:
        column, prepared = MODES[mode]
        for n in args.sizes:
            if prepared and n > PLACEHOLDER_LIMIT:
                continue
            sql, params = statement(column, n, prepared)
            # sqlglot reads the text as the kernel hands it over (a `?` as a literal: routing.parse)
            parse_text = sql.replace("?", "0") if prepared else sql
            parse = best(lambda: sqlglot.parse_one(parse_text, read="mysql"), args.repeat)  # noqa: B023
            routed: list[Any] = []

            def route() -> None:
                routed[:] = [ShardingKernel(rules, Metadata()).route(sql, params)]  # noqa: B023

            kernel = best(route, args.repeat)
            units = routed[0].execution_units
            each = "/".join(str(u.sql.count(",") if params is None else len(u.params or ())) for u in units)
            ratio = kernel / parse
            worst = max(worst, ratio)
            print(f"| {mode:24} | {n:>9,} | {len(sql) / 1024:>8.0f} | {parse:>15.3f} | {kernel:>14.3f} |"
                  f" {ratio:>5.2f} | {len(units)}: {each} |", flush=True)
    print(f"worst ratio {worst:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
