"""Bytes are bytes: invalid UTF-8 from a client never raises in the proxy. It is relayed as the bytes it
was, or answered with the ERR MariaDB itself gives (MariaDB is the spec: every case here runs against the
proxy and, with the same bytes, against a MariaDB server directly, and the answers are compared).

* handshakes whose user name, database, auth plugin name or connect attributes are not UTF-8;
* statements with invalid UTF-8 in literals, comments, identifiers, SET values, on a pass-through and on
  a sharded database; COM_INIT_DB, COM_FIELD_LIST, COM_STMT_PREPARE, COM_CHANGE_USER;
* SHOW PROCESSLIST while such a statement runs;
* a seeded fuzz over byte mutations of handshake responses and COM_QUERY packets.

No case may log a traceback (`session_failed`, `command_failed`, an asyncio "exception was never
retrieved"): `proxy_logs` fails the test if one does.
"""

from __future__ import annotations

import logging
import random
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from protocol import auth
from protocol.constants import Capability
from protocol.packets import ERRPacket, is_eof, is_err, is_ok
from protocol.wire import Reader, lenenc_str
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy
from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv
from tests.integration.test_malformed import CLIENT_CAPS, RawClient, assert_serving

pytestmark = pytest.mark.integration


# --- log capture ----------------------------------------------------------------------------------------


@pytest.fixture
def proxy_logs(caplog: pytest.LogCaptureFixture) -> Iterator[list[dict[str, Any]]]:
    """Every structlog event of the sessions this test starts (and asyncio's own error logging); after the
    test, none of them may be an error or carry a traceback."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    with structlog.testing.capture_logs() as events:
        yield events
    bad = [e for e in events if e.get("exc_info") or e.get("log_level") in ("error", "critical", "exception")]
    bad += [{"event": r.getMessage(), "logger": r.name} for r in caplog.records if r.levelno >= logging.ERROR]
    assert not bad, f"the proxy logged errors/tracebacks: {bad[:3]}"


# --- raw answers ----------------------------------------------------------------------------------------


def column_name(payload: bytes) -> bytes:
    r = Reader(payload)
    for _ in range(4):
        r.lenenc_str()
    return r.lenenc_str() or b""


def summarize(packets: list[bytes]) -> tuple[Any, ...]:
    """An answer as comparable values: ("ERR", errno, sqlstate, raw message), ("OK", affected) or
    ("ROWS", column names, raw row payloads)."""
    first = packets[0]
    if is_err(first):
        e = ERRPacket.decode(first)
        return ("ERR", e.errno, e.sqlstate, first[9:])
    if is_ok(first):
        return ("OK", Reader(first, 1).lenenc_int())
    n = Reader(first).lenenc_int() or 0
    names = [column_name(p) for p in packets[1 : 1 + n]]
    rows = [p for p in packets[1 + n :] if not is_eof(p)]
    return ("ROWS", names, rows)


def login(host: str, port: int, database: str | None, password: str = "root") -> RawClient:
    c = RawClient(host, port)
    assert is_ok(c.login("root", password, database=database))
    return c


def run(c: RawClient, payload: bytes) -> tuple[Any, ...]:
    return summarize([p for _, p in c.command(payload)])


def still_works(c: RawClient) -> None:
    assert run(c, b"\x03SELECT 'still here'")[2] == [b"\x0astill here"]


# --- handshakes -----------------------------------------------------------------------------------------


def handshake_response(scramble: bytes, password: str, *, user: bytes = b"root", database: bytes | None = None,
                       plugin: bytes = b"mysql_native_password", attrs: bytes | None = None,
                       charset: int = 45) -> bytes:
    caps = CLIENT_CAPS
    if database is not None:
        caps |= Capability.CONNECT_WITH_DB
    if attrs is not None:
        caps |= Capability.CONNECT_ATTRS
    parts = [struct.pack("<IIB", int(caps), 1 << 24, charset), b"\x00" * 23, user + b"\x00",
             lenenc_str(auth.native_password_response(password, scramble))]
    if database is not None:
        parts.append(database + b"\x00")
    parts.append(plugin + b"\x00")
    if attrs is not None:
        parts.append(lenenc_str(attrs))
    return b"".join(parts)


def handshake_answer(host: str, port: int, password: str, **fields: Any) -> tuple[Any, ...]:
    """What the server answers a handshake response; an auth switch is followed through (with the right
    password) to its end."""
    c = RawClient(host, port)
    try:
        c.send(handshake_response(c.greeting.auth_data, password, **fields), 1)
        seq, answer = c.read()
        if answer[:1] == b"\xfe":  # AuthSwitchRequest: answer it as mysql_native_password would
            plugin, _, data = answer[1:].partition(b"\x00")
            assert plugin == b"mysql_native_password"
            c.send(auth.native_password_response(password, data.rstrip(b"\x00")), seq + 1)
            return ("switch", plugin, *summarize([c.read()[1]]))
        return summarize([answer])
    finally:
        c.close()


HANDSHAKES: list[Any] = [
    pytest.param({"plugin": b"mysql_native_password\xff"}, id="plugin-suffix"),
    pytest.param({"plugin": b"\xff\xfe"}, id="plugin-binary"),
    pytest.param({"plugin": b"caching_sha2_password\xc3"}, id="plugin-truncated-utf8"),
    pytest.param({"user": b"r\xffoot"}, id="user"),
    # MariaDB decodes an encoded surrogate and shows it as '\D800' in the message; the proxy, as '???'
    pytest.param({"user": b"\xed\xa0\x80", "errno_only": True}, id="user-surrogate"),
    pytest.param({"database": b"de\xffmo"}, id="database"),
    pytest.param({"database": b"\xff"}, id="database-one-byte"),
    # in latin1 every byte is a character: an unknown database (whose name MariaDB writes back in latin1)
    pytest.param({"database": b"de\xffmo", "charset": 8, "errno_only": True}, id="database-latin1-client"),
    pytest.param({"attrs": lenenc_str(b"_client_name\xff") + lenenc_str(b"\xfe\xfd")}, id="attributes"),
    pytest.param({"attrs": lenenc_str(b"k") + b"\xfc\xff"}, id="attributes-bad-length"),
]


@pytest.mark.parametrize("fields", HANDSHAKES)
def test_handshake_with_invalid_utf8(passthrough_proxy: RunningProxy, mariadb: MariaDBServer,
                                     proxy_logs: list[dict[str, Any]], fields: dict[str, Any]) -> None:
    errno_only = fields.pop("errno_only", False)
    direct = handshake_answer(mariadb.host, mariadb.port, mariadb.password, **fields)
    proxied = handshake_answer(passthrough_proxy.host, passthrough_proxy.port, "root", **fields)
    if errno_only:
        direct, proxied = direct[:3], proxied[:3]
    assert proxied == direct
    assert_serving(passthrough_proxy)


# --- statements -----------------------------------------------------------------------------------------

# sequences of statements, each answered like MariaDB answers it, on one connection
COMMON: list[Any] = [
    pytest.param([b"SELECT '\xff\xfe'"], id="literal"),
    pytest.param([b"SELECT '\xff' AS x, 'ok'"], id="literal-aliased"),
    pytest.param([b"SELECT 1 /* \xff */"], id="comment"),
    pytest.param([b"/* \xfe\xff */ SELECT 2"], id="leading-comment"),
    pytest.param([b"SELECT 1 -- \xff\n"], id="line-comment"),
    pytest.param([b"SELECT `a\xffb`"], id="identifier"),
    pytest.param([b"SELECT 1 AS `a\xffb`"], id="alias"),
    pytest.param([b"SELECT * FROM t\xff"], id="bare-identifier"),
    pytest.param([b"SET @v = '\xff'", b"SELECT @v, HEX(@v)"], id="set-user-variable"),
    pytest.param([b"SELECT @`v\xff`"], id="variable-name"),
    pytest.param([b"SET sql_mode = '\xff'", b"SELECT @@sql_mode = @@global.sql_mode"], id="set-sql-mode"),
    pytest.param([b"SET NAMES '\xff'"], id="set-names"),
    pytest.param([b"SET autocommit = '\xff'"], id="set-autocommit"),
    pytest.param([b"SELECT HEX('\xff\xfe'), _binary'\xff', 'a' LIKE '\xff'"], id="functions"),
    pytest.param([b"SELECT '\xed\xa0\x80', '\xf4\x90\x80\x80', '\xc3\xa9', '\xc3'"], id="non-characters"),
    pytest.param([b"SELECT 1 FROM DUAL WHERE 'a\xff' = 'a'"], id="where"),
    pytest.param([b"SELECT CONNECTION_ID() > 0 AS c, '\xff', DATABASE() IS NOT NULL AS d"], id="session-function"),
    pytest.param([b"USE `de\xffmo`"], id="use-quoted"),
    pytest.param([b"SHOW CREATE DATABASE `\xff`"], id="show-create-database"),
    pytest.param([b"SHOW TABLES LIKE '\xff'"], id="show-tables-like"),
    pytest.param([b"BEGIN", b"SELECT '\xff'", b"COMMIT"], id="in-transaction"),
    pytest.param([b"PREPARE s FROM 'SELECT ''\xff'', HEX(?) AS h'", b"SET @p = '\xfe'", b"EXECUTE s USING @p",
                  b"DEALLOCATE PREPARE s"], id="sql-prepare"),
]
SHARDED: list[Any] = [
    pytest.param([b"SELECT order_id FROM t_order WHERE status = '\xff' ORDER BY order_id"], id="scatter"),
    pytest.param([b"SELECT order_id, '\xff' FROM t_order WHERE user_id = 1 AND status <> '\xfe' ORDER BY order_id"],
                 id="one-node"),
    pytest.param([b"SELECT status, COUNT(*) FROM t_order WHERE status <> '\xff' GROUP BY status ORDER BY status"],
                 id="merge"),
    pytest.param([b"SELECT `status\xff` FROM t_order"], id="column-identifier"),
    pytest.param([b"INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, '\xff')"], id="insert"),
    pytest.param([b"UPDATE t_order SET status = 'x' WHERE status = '\xff'"], id="update"),
]


def compare(proxied: RawClient, direct: RawClient, statements: list[bytes], *, messages: bool,
            renames: tuple[bytes, bytes] = (b"", b"")) -> None:
    """Each statement's answer from the proxy equals MariaDB's (`renames`: the direct database's name, in
    column names, as the proxy's logical one)."""
    for sql in statements:
        want = run(direct, b"\x03" + sql)
        if want[0] == "ROWS" and renames[0]:
            want = ("ROWS", [n.replace(*renames) for n in want[1]], want[2])
        got = run(proxied, b"\x03" + sql)
        if not messages and want[0] == "ERR":  # names of actual tables and databases differ
            want, got = want[:3], got[:3]
        assert got == want, sql
    still_works(proxied)


@pytest.mark.parametrize("statements", COMMON)
def test_statement_pass_through(passthrough_proxy: RunningProxy, mariadb: MariaDBServer,
                                proxy_logs: list[dict[str, Any]], statements: list[bytes]) -> None:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS demo_ds")
    proxied = login(passthrough_proxy.host, passthrough_proxy.port, "demo")
    direct = login(mariadb.host, mariadb.port, "demo_ds", mariadb.password)
    try:
        # the logical database `demo` is `demo_ds` on the server: the proxy shows its logical name
        compare(proxied, direct, statements, messages=True, renames=(b"demo_ds", b"demo"))
    finally:
        proxied.close()
        direct.close()


@pytest.mark.parametrize("statements", COMMON + SHARDED)
def test_statement_sharded(sharded_env: ShardedEnv, proxy_logs: list[dict[str, Any]],
                           statements: list[bytes]) -> None:
    """Against the unsharded oracle database, which has the same t_order (other modules may leave rows in
    both, so the statements order what they read and the warm-up counts no rows). A first statement has the
    session hold connections to both data sources (so that a SET is tried on them at once: a session
    holding none only records it, to apply it to the connections it takes later)."""
    proxy, server = sharded_env.proxy, sharded_env.servers[0]
    proxied = login(proxy.host, proxy.port, "sharding_db")
    direct = login(server.host, server.port, ORACLE_DB, server.password)
    try:
        warm_up = [b"SELECT COUNT(*) FROM t_order WHERE status = 'shardproxy warm-up'"]
        # a failed SET names the data source it failed on; t_order's messages name the actual tables
        messages = not any(b"t_order" in s or s.startswith(b"SET ") for s in statements)
        compare(proxied, direct, warm_up + statements, messages=messages, renames=(ORACLE_DB.encode(), b"sharding_db"))
    finally:
        proxied.close()
        direct.close()


# --- other commands -------------------------------------------------------------------------------------

COMMANDS: list[Any] = [
    pytest.param(b"\x02de\xffmo", id="init-db"),
    pytest.param(b"\x02\xff", id="init-db-one-byte"),
    pytest.param(b"\x04t\xff\x00", id="field-list"),
]


def command_answer(c: RawClient, payload: bytes) -> tuple[Any, ...]:
    return summarize([p for _, p in c.simple(payload)])


@pytest.mark.parametrize("payload", COMMANDS)
def test_command_pass_through(passthrough_proxy: RunningProxy, mariadb: MariaDBServer,
                              proxy_logs: list[dict[str, Any]], payload: bytes) -> None:
    proxied = login(passthrough_proxy.host, passthrough_proxy.port, "demo")
    direct = login(mariadb.host, mariadb.port, "demo_ds", mariadb.password)
    try:
        want, got = command_answer(direct, payload), command_answer(proxied, payload)
        if payload[:1] == b"\x04":  # the message names the database: demo_ds vs demo
            want, got = want[:3], got[:3]
        assert got == want
        still_works(proxied)
    finally:
        proxied.close()
        direct.close()


@pytest.mark.parametrize("payload", COMMANDS)
def test_command_sharded(sharded_env: ShardedEnv, proxy_logs: list[dict[str, Any]], payload: bytes) -> None:
    proxy, server = sharded_env.proxy, sharded_env.servers[0]
    proxied = login(proxy.host, proxy.port, "sharding_db")
    direct = login(server.host, server.port, ORACLE_DB, server.password)
    try:
        want, got = command_answer(direct, payload)[:3], command_answer(proxied, payload)[:3]
        assert got == want
        still_works(proxied)
    finally:
        proxied.close()
        direct.close()


def prepare_answer(c: RawClient, sql: bytes) -> tuple[Any, ...]:
    """COM_STMT_PREPARE then, when it worked, COM_STMT_EXECUTE without parameters: the rows."""
    c.send(b"\x16" + sql, 0)
    _seq, first = c.read()
    if is_err(first):
        return summarize([first])
    statement_id, columns, params = struct.unpack_from("<IHH", first, 1)
    for _ in range(columns + (1 if columns else 0) + params + (1 if params else 0)):
        c.read()
    packets = [p for _, p in c.command(b"\x17" + struct.pack("<IBI", statement_id, 0, 1))]
    c.send(b"\x19" + struct.pack("<I", statement_id), 0)
    return summarize(packets)


@pytest.mark.parametrize("sql", [b"SELECT '\xff\xfe'", b"SELECT `a\xff`", b"SELECT 1 /* \xff */"],
                         ids=["literal", "identifier", "comment"])
@pytest.mark.parametrize("where", ["pass-through", "sharded"])
def test_prepared_statement(passthrough_proxy: RunningProxy, mariadb: MariaDBServer, sharded_env: ShardedEnv,
                            proxy_logs: list[dict[str, Any]], sql: bytes, where: str) -> None:
    if where == "pass-through":
        proxied = login(passthrough_proxy.host, passthrough_proxy.port, "demo")
        direct = login(mariadb.host, mariadb.port, "demo_ds", mariadb.password)
    else:
        server = sharded_env.servers[0]
        proxied = login(sharded_env.proxy.host, sharded_env.proxy.port, "sharding_db")
        direct = login(server.host, server.port, ORACLE_DB, server.password)
    try:
        assert prepare_answer(proxied, sql) == prepare_answer(direct, sql)
        still_works(proxied)
    finally:
        proxied.close()
        direct.close()


def change_user_answer(c: RawClient, user: bytes, database: bytes, password: str) -> tuple[Any, ...]:
    response = auth.native_password_response(password, c.greeting.auth_data)
    c.send(b"\x11" + user + b"\x00" + bytes((len(response),)) + response + database + b"\x00"
           + struct.pack("<H", 45) + b"mysql_native_password\x00", 0)
    seq, answer = c.read()
    if answer[:1] == b"\xfe":
        plugin, _, data = answer[1:].partition(b"\x00")
        c.send(auth.native_password_response(password, data.rstrip(b"\x00")), seq + 1)
        return ("switch", plugin, *summarize([c.read()[1]]))
    return summarize([answer])


@pytest.mark.parametrize(("user", "database"), [(b"r\xffoot", b""), (b"root", b"de\xffmo")],
                         ids=["user", "database"])
def test_change_user(passthrough_proxy: RunningProxy, mariadb: MariaDBServer, proxy_logs: list[dict[str, Any]],
                     user: bytes, database: bytes) -> None:
    """COM_CHANGE_USER with a user or database that is not UTF-8: the same ERR as MariaDB's (after which
    both close the connection)."""
    proxied = login(passthrough_proxy.host, passthrough_proxy.port, "demo")
    direct = login(mariadb.host, mariadb.port, "demo_ds", mariadb.password)
    try:
        want = change_user_answer(direct, user, database, mariadb.password)
        got = change_user_answer(proxied, user, database, "root")
        assert got[-3:] == want[-3:]  # the ERR (errno, SQLSTATE, message) at the end of the exchange
    finally:
        proxied.close()
        direct.close()
    assert_serving(passthrough_proxy)


# --- SHOW PROCESSLIST while such a statement runs -------------------------------------------------------


@pytest.mark.parametrize("where", ["pass-through", "sharded"])
def test_processlist_while_invalid_utf8_runs(passthrough_proxy: RunningProxy, sharded_env: ShardedEnv,
                                             proxy_logs: list[dict[str, Any]], where: str) -> None:
    proxy, db = (passthrough_proxy, "demo") if where == "pass-through" else (sharded_env.proxy, "sharding_db")
    sql = b"SELECT SLEEP(2), '\xff' /* \xfe */"
    sleeper = login(proxy.host, proxy.port, db)
    watcher = login(proxy.host, proxy.port, db)
    outcome: dict[str, Any] = {}
    t = threading.Thread(target=lambda: outcome.update(answer=run(sleeper, b"\x03" + sql)))
    t.start()
    try:
        deadline = time.monotonic() + 1.5
        seen = False
        while time.monotonic() < deadline and not seen:
            for statement in (b"SHOW PROCESSLIST", b"SHOW FULL PROCESSLIST"):
                kind, names, rows = run(watcher, b"\x03" + statement)
                assert kind == "ROWS" and names[7] == b"Info"
                seen = any(lenenc_str(sql) in row for row in rows)  # the Info, byte for byte, as MariaDB shows it
            time.sleep(0.05)
        assert seen
    finally:
        t.join(10)
    assert outcome["answer"][2] == [b"\x010\x01\xff"]
    still_works(sleeper)
    sleeper.close()
    watcher.close()


# --- fuzz -----------------------------------------------------------------------------------------------

HIGH_BYTES = bytes(range(0x80, 0x100))


def mutate(rng: random.Random, data: bytes, start: int) -> bytes:
    """Replace, insert or delete a few bytes at or after `start` (mostly bytes that are not UTF-8)."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(start, max(start, len(out) - 1))
        byte = rng.choice(HIGH_BYTES) if rng.random() < 0.8 else rng.randrange(256)
        op = rng.random()
        if op < 0.5 and pos < len(out):
            out[pos] = byte
        elif op < 0.85:
            out.insert(pos, byte)
        elif pos < len(out):
            del out[pos]
    return bytes(out)


def read_or_closed(c: RawClient) -> bytes | None:
    try:
        return c.read()[1]
    except (ConnectionError, OSError):
        return None


def test_fuzz_handshake(passthrough_proxy: RunningProxy, proxy_logs: list[dict[str, Any]]) -> None:
    rng = random.Random(12)
    for _ in range(200):
        c = RawClient(passthrough_proxy.host, passthrough_proxy.port, timeout=5)
        try:
            fields = {"database": b"demo"} if rng.random() < 0.5 else {}
            if rng.random() < 0.5:
                fields["attrs"] = lenenc_str(b"_client_name") + lenenc_str(b"fuzz")
            good = handshake_response(c.greeting.auth_data, "root", **fields)
            c.send(mutate(rng, good, 4), 1)  # not the capability flags: those only pick other code paths
            answer = read_or_closed(c)
            # an OK, an ERR, an auth switch, caching_sha2's more-data, or a close; never a hang
            assert answer is None or answer[:1] in (b"\x00", b"\xff", b"\xfe", b"\x01"), answer
        finally:
            c.close()
    assert_serving(passthrough_proxy)


@pytest.mark.parametrize("where", ["pass-through", "sharded"])
def test_fuzz_query(passthrough_proxy: RunningProxy, sharded_env: ShardedEnv,
                    proxy_logs: list[dict[str, Any]], where: str) -> None:
    proxy, db = (passthrough_proxy, "demo") if where == "pass-through" else (sharded_env.proxy, "sharding_db")
    bases = [b"SELECT 'abc', `x` FROM t_order WHERE status = 'def' /* ghi */",
             b"SELECT 1 AS `one`, 'two' LIKE 'tw%'", b"SET @v = 'value'", b"SHOW FULL PROCESSLIST",
             b"USE `sharding_db`", b"SELECT DATABASE(), USER(), 'x'", b"KILL QUERY 987654321",
             b"SELECT order_id FROM t_order WHERE user_id = 1 ORDER BY order_id LIMIT 2",
             b"INSERT INTO t_order (order_id, user_id, status) VALUES (7, 7, 'x')"]
    rng = random.Random(1212)
    c = login(proxy.host, proxy.port, db)
    try:
        for _ in range(150):
            sql = mutate(rng, rng.choice(bases), 0)
            try:
                answer = run(c, b"\x03" + sql)
            except (TimeoutError, ConnectionError, OSError):
                answer = None
            if answer is None:  # the connection is gone (a mutated KILL may name a real session): a new one
                c.close()
                c = login(proxy.host, proxy.port, db)
            else:
                assert answer[0] in ("ERR", "OK", "ROWS")
        still_works(c)
    finally:
        c.close()
    if where == "sharded":
        sharded_env.clean("t_order")


@pytest.mark.parametrize(
    "sql",
    [b"PREVIEW SELECT '\xff' FROM t_order WHERE user_id = 1", b"PREVIEW SELECT `\xff` FROM t_order",
     b"SHOW SHARDING TABLE RULES t\xff", b"SHOW SHARDING TABLE NODES FROM `\xff`", b"SHOW STORAGE UNITS FROM \xff",
     b"SHOW READWRITE_SPLITTING RULES FROM \xff", b"SHOW DATABASES LIKE '\xff%'", b"SHOW FULL TABLES FROM `\xff`",
     b"SHOW TABLE STATUS LIKE '\xff'", b"DESCRIBE t_order '\xff'", b"SELECT DATABASE()  /* \xff */",
     b"KILL \xff", b"KILL QUERY 1\xff"],
    ids=["preview", "preview-identifier", "rules", "nodes", "units", "rw-rules", "databases", "tables", "status",
         "describe", "database", "kill", "kill-query"],
)
def test_statements_the_proxy_answers(sharded_env: ShardedEnv, proxy_logs: list[dict[str, Any]], sql: bytes) -> None:
    """What only the proxy answers (no MariaDB to compare with): an answer or an ERR, and the session goes on."""
    c = login(sharded_env.proxy.host, sharded_env.proxy.port, "sharding_db")
    try:
        answer = run(c, b"\x03" + sql)
        assert answer[0] in ("ROWS", "ERR", "OK")
        if answer[0] == "ERR":
            assert answer[1] != 1105, answer  # not "internal error"
        still_works(c)
    finally:
        c.close()
