"""The mariadb command-line client through the proxy: batch mode (`-B -e`, and a script on stdin) for DDL,
CRUD, transactions and metadata, and an interactive session on a terminal with `--auto-rehash`, whose start-up
runs COM_INIT_DB, `show databases`, `show tables` and COM_FIELD_LIST per table to build the completion list
(the client skips that when its input is not a terminal, hence the pty)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

from tests.compat.conftest import SPREAD, T_ADDRESS_DDL, T_ORDER_DDL, CompatEnv
from tests.compat.scenario import assert_logical

CLIENT_NAME = "cli"


def _args(env: CompatEnv) -> list[str]:
    d = env.dsn(CLIENT_NAME)
    return ["mariadb", "--no-defaults", "-h", d["host"], "-P", str(d["port"]), "-u", d["user"],
            f"-p{d['password']}", "--default-character-set=utf8mb4"]


def _batch(env: CompatEnv, *args: str, stdin: str | None = None) -> str:
    res = subprocess.run([*_args(env), env.database(CLIENT_NAME), "-B", *args], input=stdin,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _inserts(status: str) -> str:
    return "".join(f"INSERT INTO t_order (order_id, user_id, status) VALUES ({o}, {u}, '{status}');"
                   for u, o in SPREAD)


def test_cli_batch(compat: CompatEnv) -> None:
    out = _batch(compat, "-e", "select @@version_comment limit 1; SELECT DATABASE();")
    assert out.startswith("@@version_comment\n") and out.endswith(f"DATABASE()\n{compat.database(CLIENT_NAME)}\n")
    _batch(compat, "-e", f"DROP TABLE IF EXISTS t_order; DROP TABLE IF EXISTS t_address; {T_ORDER_DDL}; "
                         f"{T_ADDRESS_DDL}; INSERT INTO t_address VALUES (1, 'home')")
    _batch(compat, "-e", _inserts("new"))
    compat.assert_spread(CLIENT_NAME)
    out = _batch(compat, "-e", "SELECT order_id, user_id, status FROM t_order ORDER BY order_id")
    assert out == "order_id\tuser_id\tstatus\n" + "".join(f"{o}\t{u}\tnew\n" for u, o in sorted(
        SPREAD, key=lambda p: p[1]))
    out = _batch(compat, "-N", "-e", "UPDATE t_order SET status = 'paid' WHERE user_id = 11; "
                                     "DELETE FROM t_order WHERE order_id = 100 AND user_id = 10; "
                                     "SELECT status, COUNT(*) FROM t_order GROUP BY status ORDER BY status")
    assert out == "new\t1\npaid\t2\n"
    _batch(compat, "-e", "DELETE FROM t_order")
    assert compat.all_backend_rows(CLIENT_NAME) == []


def test_cli_script_on_stdin_transactions(compat: CompatEnv) -> None:
    """A script on stdin: one session, a cross-shard transaction rolled back and one committed."""
    script = (f"BEGIN;\n{_inserts('tx')}\nSELECT COUNT(*) AS n FROM t_order;\nROLLBACK;\n"
              f"SELECT COUNT(*) AS n FROM t_order;\n")
    assert _batch(compat, stdin=script) == "n\n4\nn\n0\n"
    assert compat.all_backend_rows(CLIENT_NAME) == []
    script = f"SET autocommit=0;\n{_inserts('new')}\nCOMMIT;\nSET autocommit=1;\n"
    _batch(compat, stdin=script)
    compat.assert_spread(CLIENT_NAME)


def test_cli_metadata(compat: CompatEnv) -> None:
    script = ("SHOW TABLES;\nSHOW FULL TABLES;\nSHOW COLUMNS FROM t_order;\nSHOW INDEX FROM t_order;\n"
              "SHOW CREATE TABLE t_order\\G\nSHOW TABLE STATUS LIKE 't_order'\\G\n")
    out = _batch(compat, stdin=script)
    assert_logical(out)
    assert out.startswith(f"Tables_in_{compat.database(CLIENT_NAME)}\nt_address\nt_order\n")
    assert "t_address\tBASE TABLE\nt_order\tBASE TABLE\n" in out
    assert "t_order\t0\tPRIMARY\t1\torder_id" in out and "t_order\t1\tidx_user\t1\tuser_id" in out
    assert "CREATE TABLE `t_order` (" in out and "Name: t_order\n" in out and "Rows: " in out


def _interactive(env: CompatEnv, keystrokes: list[bytes], timeout: float = 30) -> str:
    """Run the client on a pseudo-terminal, typing each line once the prompt is back; the whole screen."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*_args(env), "--auto-rehash", env.database(CLIENT_NAME)], stdin=slave, stdout=slave,
                            stderr=slave, close_fds=True, env={**os.environ, "TERM": "dumb", "HOME": "/nonexistent"})
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + timeout

    def read_until(marker: bytes) -> None:
        nonlocal screen
        while marker not in screen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return
                if not data:
                    return
                screen += data

    try:
        for keys in keystrokes:
            read_until(b"]> ")
            screen = screen.replace(b"]> ", b"]>\x00", 1)  # this prompt is used up: wait for the next one
            os.write(master, keys)
        read_until(b"Bye")
    finally:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        os.close(master)
    return screen.replace(b"]>\x00", b"]> ").decode("utf-8", "replace")


def test_cli_auto_rehash_completes_logical_names(compat: CompatEnv) -> None:
    """The completion list is built from the proxy's answers: typing a prefix and TAB completes a column
    of a sharded table (COM_FIELD_LIST of t_order, answered from its first actual table in logic names)
    and a logic table name; `use` (COM_INIT_DB) rebuilds it."""
    screen = _interactive(compat, [
        b"SELECT COUNT(stat\t) AS n FROM t_ord\t WHERE user_\t IN (10, 11);\n",
        b"use " + compat.database(CLIENT_NAME).encode() + b"\n",
        b"SELECT address_na\t FROM t_addr\t;\n",
        b"quit\n",
    ])
    assert "Reading table information for completion" in screen, screen
    assert "ERROR" not in screen, screen
    assert "SELECT COUNT(status ) AS n FROM t_order WHERE user_id  IN (10, 11);" in screen and "| n |" in screen
    assert "| address_name |" in screen and "| home         |" in screen, screen
    assert_logical(screen)
