"""Proxy CPU per statement, one client, for each statement class of sysbench's oltp_read_only.

Why: sysbench's 4-thread QPS on a 2-core box mixes the proxy's CPU with the servers' and the client's; this
runs one statement class at a time from one client and divides the proxy process's utime+stime by the
statements sent, so a change to one path shows in that path's row. `--tree DIR` (repeatable) runs the proxy
of another checkout against the same servers, alternated `--rounds` times, for before/after tables.

    python bench/statement_cpu.py --count 1000 --rounds 2 [--tree /tmp/before --tree .] [--only "2-node UPDATE"]

Text statements go through PyMySQL, prepared ones through a few lines over PyMySQL's connection that send
COM_STMT_PREPARE once and COM_STMT_EXECUTE per statement as libmysqlclient does; each class is warmed up
before it is timed.

The two "pass-through" classes compare a point select on one pass-through database (`sbtest_pass`, A.sbtest) with
the same select on its twin whose `c` is an `!ENCRYPT` column (`sbtest_enc`: A.sbtest_enc.sbtest1 holds `c_cipher`,
the AES of A.sbtest's `c`): the cost of the decryption (issue 38 asks for at most 1.5x). "point select, sharded,
encrypted c" is the same on `sbtest_encs`, sharded by id as `sbtest` is over A and B (the even and odd rows of
sbtest_enc.sbtest1): compare it with "point select" on `sbtest`.
"""

from __future__ import annotations

import argparse
import random
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH / "sysbench"))
sys.path.insert(0, str(BENCH))

import suite  # noqa: E402
from harness import REPO, cpu_seconds, free_port, wait_listening, write_passthrough_conf  # noqa: E402

from proxy.sandbox import MariaDBServer, start_servers  # noqa: E402

RANGE = 100  # sysbench's --range_size
STATEMENTS: dict[str, str] = {
    "point select": "SELECT c FROM sbtest1 WHERE id=%s",
    "point select, pass-through": "SELECT c FROM sbtest1 WHERE id=%s",
    "point select, pass-through, encrypted c": "SELECT c FROM sbtest1 WHERE id=%s",
    # a select by the value of `c` (a scan: the instructions are the proxy's all the same), on the twins: encrypted,
    # its parameter is encrypted into the backend's statement (proxy.execution.encrypted.mapped_execute)
    "select by c, pass-through": "SELECT id FROM sbtest1 WHERE c=%s",
    "select by c, pass-through, encrypted c": "SELECT id FROM sbtest1 WHERE c=%s",
    "point select, sharded, encrypted c": "SELECT c FROM sbtest1 WHERE id=%s",
    "range (concatenated)": "SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s",
    "range SUM(k)": "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN %s AND %s",
    "range ORDER BY c": "SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s ORDER BY c",
    "range DISTINCT c ORDER BY c": "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN %s AND %s ORDER BY c",
    "scatter ORDER BY order_id LIMIT 10": suite.SCATTER_SQL,
    # writes (issue 33): a point write stays one node's statement; a write over two nodes runs all or nothing
    # (autocommit: BEGIN with each part, COMMIT after: proxy.execution.atomic)
    "point UPDATE": "UPDATE sbtest1 SET k = k + 1 WHERE id=%s",
    "2-node UPDATE (id IN)": "UPDATE sbtest1 SET k = k + 1 WHERE id IN (%s, %s)",
}

# the statement classes that run on another logical database than `arguments`'s choice
DATABASES = {"point select, pass-through": "sbtest_pass", "point select, pass-through, encrypted c": "sbtest_enc",
             "select by c, pass-through": "sbtest_pass", "select by c, pass-through, encrypted c": "sbtest_enc",
             "point select, sharded, encrypted c": "sbtest_encs"}
#: values of sbtest1.c (ids 1..200), for the statements that select by one (`load_c_values`)
C_VALUES: list[str] = []
#: the physical databases of `sbtest_encs` on servers A and B: the even / odd rows of sbtest_enc.sbtest1
ENCRYPTED_SHARDS = ("sbtest_encs_ds_0", "sbtest_encs_ds_1")
AES_PROPS = {"aes-key-value": "123456abc", "digest-algorithm-name": "SHA-1"}
ENCRYPT_RULE = """rules:
- !ENCRYPT
  encryptors:
    aes: {type: AES, props: {aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}
  tables:
    sbtest1:
      columns:
        c: {cipher: {name: c_cipher, encryptorName: aes}}
"""


def load_encrypted_twin(a: MariaDBServer, b: MariaDBServer) -> None:
    """A.sbtest_enc.sbtest1: A.sbtest.sbtest1 with `c` stored as ShardingSphere's AES in `c_cipher`; its even rows
    in A.sbtest_encs_ds_0.sbtest1, its odd ones in B.sbtest_encs_ds_1.sbtest1 (`sbtest_encs`, sharded by id as
    `sbtest` is)."""
    from routing.encrypt.algorithms import create_encryptor

    aes = create_encryptor("AES", AES_PROPS, key="bench")
    a.execute("CREATE DATABASE sbtest_enc")
    a.execute("CREATE TABLE sbtest1 (id INT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0, "
              "c_cipher VARCHAR(255) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '')", "sbtest_enc")
    rows = a.execute("SELECT id, k, c, pad FROM sbtest1", "sbtest")
    conn = a.connect("sbtest_enc")
    try:
        with conn.cursor() as cur:
            for i in range(0, len(rows), 1000):
                cur.executemany("INSERT INTO sbtest1 VALUES (%s, %s, %s, %s)",
                                [(r[0], r[1], aes.encrypt(r[2]), r[3]) for r in rows[i:i + 1000]])
        conn.commit()
    finally:
        conn.close()
    dump = a.execute("SELECT id, k, c_cipher, pad FROM sbtest1", "sbtest_enc")
    for parity, (server, physical) in enumerate(zip((a, b), ENCRYPTED_SHARDS, strict=True)):
        server.execute(f"CREATE DATABASE {physical}")
        server.execute("CREATE TABLE sbtest1 (id INT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0, "
                       "c_cipher VARCHAR(255) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '')", physical)
        mine = [r for r in dump if r[0] % 2 == parity]
        conn = server.connect(physical)
        try:
            with conn.cursor() as cur:
                for i in range(0, len(mine), 1000):
                    cur.executemany("INSERT INTO sbtest1 VALUES (%s, %s, %s, %s)", mine[i:i + 1000])
            conn.commit()
        finally:
            conn.close()


def write_encrypted_shards_conf(conf: Path, a: MariaDBServer, b: MariaDBServer) -> None:
    """`sbtest_encs`: sbtest1 sharded over ENCRYPTED_SHARDS by id (bench/sysbench/conf/database-sbtest.yaml's
    rule), with ENCRYPT_RULE."""
    sources = "".join(
        f"  ds_{i}:\n    url: {s.jdbc_url(p)}\n    username: {s.user}\n    password: {s.password}\n"
        "    maxPoolSize: 64\n    minPoolSize: 1\n"
        for i, (s, p) in enumerate(zip((a, b), ENCRYPTED_SHARDS, strict=True)))
    (conf / "database-sbtest_encs.yaml").write_text(
        f"databaseName: sbtest_encs\ndataSources:\n{sources}" + ENCRYPT_RULE + """- !SHARDING
  tables:
    sbtest1:
      actualDataNodes: ds_${0..1}.sbtest1
  defaultDatabaseStrategy:
    standard:
      shardingColumn: id
      shardingAlgorithmName: id_mod_2
  defaultTableStrategy:
    none:
  shardingAlgorithms:
    id_mod_2:
      type: INLINE
      props:
        algorithm-expression: ds_${id % 2}
        allow-range-query-with-inline-sharding: true
""")


@contextmanager
def proxy_in(tree: Path, conf: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "proxy", "--log-level", "WARNING", "serve", "--conf",
                                 str(conf), "--port", str(port)], cwd=tree, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(proc, port, "proxy", timeout=60, log=log)
        yield proc
    finally:
        proc.terminate()
        proc.wait(15)


@contextmanager
def bench_layout(work: Path, table_size: int, stream_rows: int) -> Iterator[Path]:
    """Two sandbox servers with bench/suite.py's layouts loaded; the proxy configuration's folder."""
    servers = start_servers(2)
    a, b = servers
    try:
        suite.load_sbtest(a, b, 1, table_size)
        suite.load_streams(a, servers, stream_rows)
        load_encrypted_twin(a, b)
        conf = suite.write_conf(work / "conf", a, b)
        write_passthrough_conf(conf, a, "sbtest_enc", name="sbtest_enc")
        with (conf / "database-sbtest_enc.yaml").open("a") as f:
            f.write(ENCRYPT_RULE)
        write_encrypted_shards_conf(conf, a, b)
        yield conf
    finally:
        for server in servers:
            server.stop()


def load_c_values(port: int) -> None:
    """C_VALUES read through the proxy (sbtest_pass), once."""
    import pymysql

    if C_VALUES:
        return
    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="root", database="sbtest_pass")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 200 ORDER BY id")
            C_VALUES.extend(r[0] for r in cur.fetchall())
    finally:
        conn.close()


def arguments(sql: str, rng: random.Random, size: int) -> tuple[int | str, ...]:
    if "c=%s" in sql:
        return (rng.choice(C_VALUES),)
    n = sql.count("%s")
    first = rng.randint(1, size - RANGE)
    return (first,) if n == 1 else (first, first + RANGE - 1) if n == 2 else ()


def text_runner(port: int, db: str) -> Callable[[str, tuple[int | str, ...]], None]:
    import pymysql
    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="root", database=db, autocommit=True)
    cur = conn.cursor()

    def run(sql: str, args: tuple[int | str, ...]) -> None:
        cur.execute(sql, args)
        cur.fetchall()

    return run


def prepared_runner(port: int, db: str) -> Callable[[str, tuple[int | str, ...]], None]:
    """COM_STMT_PREPARE once per statement, then COM_STMT_EXECUTE as libmysqlclient sends it (sysbench's
    client): parameter types on the first execute only (LONGLONG, or VAR_STRING for a string). (mysql-connector's
    prepared cursor sends a COM_STMT_RESET before every execute, and prepares again for every new string object.)"""
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="root", database=db, autocommit=True)
    prepared: dict[str, tuple[int, int]] = {}

    def read_until_eof() -> None:
        while not conn._read_packet().is_eof_packet():
            pass

    def value(v: int | str) -> bytes:
        if isinstance(v, int):
            return struct.pack("<q", v)
        raw = v.encode()
        assert len(raw) < 251
        return bytes((len(raw),)) + raw

    def run(sql: str, args: tuple[int | str, ...]) -> None:
        first = sql not in prepared
        if first:
            conn._execute_command(0x16, sql.replace("%s", "?"))
            ok = conn._read_packet()
            stmt_id, ncols, nparams = struct.unpack_from("<IHH", ok.get_all_data(), 1)
            if nparams:
                read_until_eof()
            if ncols:
                read_until_eof()
            prepared[sql] = (stmt_id, nparams)
        stmt_id, nparams = prepared[sql]
        body = struct.pack("<IBI", stmt_id, 0, 1)
        if nparams:
            types = b"".join(b"\x08\x00" if isinstance(v, int) else b"\xfd\x00" for v in args)
            body += bytes((nparams + 7) // 8) + (b"\x01" + types if first else b"\x00")
            body += b"".join(value(v) for v in args)
        conn._execute_command(0x17, body)
        head = conn._read_packet()
        if head.is_ok_packet():
            return
        read_until_eof()  # column definitions
        read_until_eof()  # rows

    return run


def measure(pid: int, port: int, count: int, size: int, protocols: list[str]
            ) -> dict[tuple[str, str], tuple[float, float]]:
    """(protocol, statement) -> (proxy CPU, client wall time) per statement, in microseconds."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    load_c_values(port)
    for proto in protocols:
        make = text_runner if proto == "text" else prepared_runner
        runners = {db: make(port, db) for db in ("sbtest", "sharding_db", *DATABASES.values())}
        for name, sql in STATEMENTS.items():
            run = runners[DATABASES.get(name) or ("sharding_db" if "t_order" in sql else "sbtest")]
            rng = random.Random(7)
            for _ in range(max(50, count // 10)):
                run(sql, arguments(sql, rng, size))
            before, started = cpu_seconds(pid), time.perf_counter()
            for _ in range(count):
                run(sql, arguments(sql, rng, size))
            wall = time.perf_counter() - started
            out[(proto, name)] = ((cpu_seconds(pid) - before) / count * 1e6, wall / count * 1e6)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000, help="statements per class and round")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tree", type=Path, action="append", help="a checkout whose proxy to run (default: this one)")
    ap.add_argument("--protocols", nargs="+", default=["text", "prepared"], choices=["text", "prepared"])
    ap.add_argument("--table-size", type=int, default=10000)
    ap.add_argument("--only", action="append", help="statements whose name starts with this (repeatable)")
    args = ap.parse_args()
    if args.only:
        for name in [n for n in STATEMENTS if not any(n.startswith(o) for o in args.only)]:
            del STATEMENTS[name]
    trees = [t.resolve() for t in (args.tree or [REPO])]
    with tempfile.TemporaryDirectory(prefix="shardproxy-stmtcpu-") as tmp:
        return _run(args, trees, Path(tmp))


def _run(args: argparse.Namespace, trees: list[Path], work: Path) -> int:
    with bench_layout(work, args.table_size, 10000) as conf:
        results: dict[Path, list[dict[tuple[str, str], tuple[float, float]]]] = {t: [] for t in trees}
        for r in range(args.rounds):
            for tree in trees:
                port = free_port()
                with proxy_in(tree, conf, port, work / "proxy.log") as proc:
                    results[tree].append(measure(proc.pid, port, args.count, args.table_size, args.protocols))
                print(f"round {r + 1}: {tree} done", flush=True)
        head = " | ".join(f"{t.name} proxy CPU us/stmt | {t.name} wall us/stmt" for t in trees)
        print(f"\n| protocol | statement | {head} |\n|---|---|" + "---|---|" * len(trees))
        for proto in args.protocols:
            for name in STATEMENTS:
                cells = [" / ".join(f"{run[(proto, name)][i]:.0f}" for run in results[t])
                         for t in trees for i in (0, 1)]
                print(f"| {proto} | {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
