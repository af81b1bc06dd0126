"""The SQL examples of the documentation, read out of its markdown and run against the demo configuration.

The convention (docs/architecture.md, "Documentation examples"): a fenced ```sql block is run, statement after
statement, in one client session per page, in page order. When the next block after it is a fenced ```text
block, that block is what the statements answer, as the `mysql` client prints it (tables, `N rows in set`,
`Query OK, ...`, `ERROR errno (SQLSTATE): message`; no timings). A fenced ```mysql block is shown only; the
line before it must be an HTML comment `<!-- not run: why -->`, so every example that is not checked says
why.

`python3 -m tests.docs.examples --write [page.md ...]` starts the demo servers and rewrites the ```text blocks
from what the statements answer now (review the diff: it is what the pages will claim).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*\S.*-->\s*$")
# the mysql client's IS_NUM: numbers are right-aligned
_NUMERIC_TYPES = {0, 1, 2, 3, 4, 5, 6, 8, 9, 13, 246}


@dataclass(frozen=True)
class Block:
    lang: str
    start: int  # line index of the opening fence
    end: int  # line index of the closing fence
    text: str


@dataclass(frozen=True)
class Example:
    page: Path
    line: int  # 1-based line of the ```sql fence
    sql: str
    expected: str | None  # the ```text block after it, if any
    expected_span: tuple[int, int] | None  # its body's line indexes [first, last)


def blocks(lines: Sequence[str]) -> Iterator[Block]:
    k = 0
    while k < len(lines):
        m = _FENCE.match(lines[k])
        if m is None or not m.group(1):
            k += 1
            continue
        end = k + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"unclosed ``` fence at line {k + 1}")
        yield Block(m.group(1), k, end, "\n".join(lines[k + 1 : end]))
        k = end + 1


def examples(page: Path) -> list[Example]:
    """The page's runnable examples; raises ValueError for a ```mysql block without its `not run` reason."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = list(blocks(lines))
    out: list[Example] = []
    for k, block in enumerate(found):
        if block.lang == "mysql":
            before = next((line for line in reversed(lines[: block.start]) if line.strip()), "")
            if not _NOT_RUN.match(before.strip()):
                raise ValueError(
                    f"{page.name}:{block.start + 1}: a ```mysql block needs <!-- not run: why --> on the line before it"
                )
        if block.lang != "sql":
            continue
        after = found[k + 1] if k + 1 < len(found) else None
        adjacent = (
            after is not None
            and after.lang == "text"
            and not any(line.strip() for line in lines[block.end + 1 : after.start])
        )
        out.append(
            Example(
                page,
                block.start + 1,
                block.text,
                after.text if adjacent and after else None,
                (after.start + 1, after.end) if adjacent and after else None,
            )
        )
    return out


def statements(sql: str) -> list[str]:
    """The statements of a block: lines up to one ending in `;`, with `-- ` comments (outside quotes) cut."""
    out: list[str] = []
    current: list[str] = []
    for raw in sql.splitlines():
        line = _cut_comment(raw).rstrip()
        if not line.strip():
            continue
        current.append(line)
        if line.endswith(";"):
            out.append("\n".join(current)[:-1].strip())
            current = []
    if current:
        raise ValueError(f"a statement without its closing ';': {' '.join(current)!r}")
    return out


def _cut_comment(line: str) -> str:
    quote = ""
    for k, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif line.startswith("-- ", k) or line[k:] == "--":
            return line[:k]
    return line


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def table(description: Sequence[Sequence[Any]], rows: Sequence[Sequence[Any]]) -> str:
    """Rows as the mysql client draws them."""
    names = [str(d[0]) for d in description]
    right = [d[1] in _NUMERIC_TYPES for d in description]
    cells = [
        [
            "NULL" if v is None else (bytes(v).decode("utf-8") if isinstance(v, bytes | bytearray) else str(v))
            for v in row
        ]
        for row in rows
    ]
    widths = [max([len(n), *(len(r[k]) for r in cells)]) for k, n in enumerate(names)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values: Sequence[str], align: Sequence[bool]) -> str:
        return (
            "|"
            + "|".join(f" {v.rjust(w) if a else v.ljust(w)} " for v, w, a in zip(values, widths, align, strict=True))
            + "|"
        )

    body = [line(r, right) for r in cells]
    return "\n".join([rule, line(names, [False] * len(names)), rule, *body, rule])


class _Cursor:
    """mysql.connector's raw buffered cursor, keeping the OK packet's info text (`Records: 2  Duplicates: 0`)."""

    def __new__(cls, conn: Any) -> Any:
        from mysql.connector.cursor import MySQLCursorBufferedRaw

        class Cursor(MySQLCursorBufferedRaw):
            info = ""

            def _handle_noresultset(self, res: Any) -> None:
                self.info = str(res.get("info_msg") or "") if isinstance(res, dict) else ""
                super()._handle_noresultset(res)

        return Cursor(conn)


def answer(conn: Any, sql: str) -> str:
    """What the mysql client would print for one statement (without timings)."""
    import mysql.connector

    cur = _Cursor(conn)
    try:
        cur.execute(sql)
    except mysql.connector.Error as exc:
        return f"ERROR {exc.errno} ({exc.sqlstate}): {exc.msg}"
    try:
        warnings = int(getattr(cur, "_warning_count", 0) or 0)
        tail = f", {_plural(warnings, 'warning')}" if warnings else ""
        if cur.description:
            rows = cur.fetchall()
            if not rows:
                return f"Empty set{tail}"
            return f"{table(cur.description, rows)}\n{_plural(len(rows), 'row')} in set{tail}"
        if re.match(r"(?is)use\s", sql):
            return "Database changed"
        text = f"Query OK, {_plural(max(cur.rowcount, 0), 'row')} affected{tail}"
        return f"{text}\n{cur.info}" if cur.info else text
    finally:
        cur.close()


def run(conn: Any, example: Example) -> str:
    return "\n\n".join(answer(conn, sql) for sql in statements(example.sql))


# --- the demo: two throwaway MariaDB servers, the shipped conf/ moved onto them, its sample rows -----------------


@dataclass
class Demo:
    servers: list[Any]
    proxy: Any
    user: str
    password: str
    databases: list[str]

    def connect(self, database: str | None = None) -> Any:
        import mysql.connector

        return mysql.connector.connect(
            host=self.proxy.host,
            port=self.proxy.port,
            user=self.user,
            password=self.password,
            database=database,
            use_pure=True,
            autocommit=True,
        )

    def reset(self) -> None:
        """The sample rows as `shardproxy demo` leaves them, whatever a page changed."""
        from proxy.demo import load_schema

        for database, tables in (
            ("sharding_db", ("t_order", "t_order_item", "t_address")),
            ("demo_db", ("t_user",)),
            ("readwrite_db", ("t_user",)),
        ):
            conn = self.connect(database)
            try:
                cur = conn.cursor()
                for name in tables:
                    cur.execute(f"DELETE FROM {name}")
                cur.close()
            finally:
                conn.close()
        load_schema(self.proxy.host, self.proxy.port, self.user, self.password, self.databases)

    def stop(self) -> None:
        self.proxy.stop()
        for server in self.servers:
            server.cleanup()


def start_demo(work: Path) -> Demo:
    """`shardproxy demo` without its replica: read/write splitting's read data source is its primary."""
    from proxy.config import load_config
    from proxy.demo import load_schema, write_demo_conf
    from proxy.sandbox import start_servers
    from tests.integration.harness import start_proxy

    servers = start_servers(2)
    try:
        conf = work / "conf"
        write_demo_conf(REPO / "conf", conf, servers)
        config = load_config(conf)
        proxy = start_proxy(conf)
    except BaseException:
        for server in servers:
            server.cleanup()
        raise
    user = config.users[0]
    demo = Demo(servers, proxy, user.user, user.password, list(config.databases))
    try:
        load_schema(proxy.host, proxy.port, demo.user, demo.password, demo.databases)
    except BaseException:
        demo.stop()
        raise
    return demo


def run_page(demo: Demo, page: Path) -> list[tuple[Example, str]]:
    """Every example of the page, in one session, after the sample rows were put back."""
    demo.reset()
    conn = demo.connect()
    try:
        return [(example, run(conn, example)) for example in examples(page)]
    finally:
        conn.close()


def _write(demo: Demo, page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    for example, actual in reversed(run_page(demo, page)):
        if example.expected_span is not None:
            first, last = example.expected_span
            lines[first:last] = actual.splitlines()
    page.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: Sequence[str]) -> int:
    import tempfile

    if not argv or argv[0] != "--write":
        print(__doc__, file=sys.stderr)
        return 2
    pages = [Path(p).resolve() for p in argv[1:]] or PAGES
    with tempfile.TemporaryDirectory(prefix="shardproxy-docs-") as work:
        demo = start_demo(Path(work))
        try:
            for page in pages:
                _write(demo, page)
        finally:
            demo.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
