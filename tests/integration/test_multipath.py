"""Multi-node SELECTs answered inside the socket callbacks (proxy.execution.multipath) against real MariaDB: for
each statement the proxy's answer, byte for byte, is the slow path's (the same statement with the path turned
off, on the same session), text and prepared; a unit that fails stops the others and names its data source; a
large answer read slowly by the client arrives whole."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pymysql
import pytest

from protocol.binary import ComStmtExecute, ComStmtPrepare, StmtPrepareOK
from protocol.framing import encode_packet
from protocol.packets import ComQuery, ERRPacket
from protocol.results import ResultRelay
from proxy.execution.multipath import MULTI_STATS
from tests.integration.sharding_fixtures import ShardedEnv
from tests.integration.test_malformed import RawClient

pytestmark = pytest.mark.integration

DB = "extra_db"
USERS = [(i, None if i % 7 == 3 else f"n{i % 5}") for i in range(40)]  # (user_id, name): ds = user_id % 2

# every shape the slow path's _answer_merged has: concatenated, raw ORDER BY merge (LIMIT, OFFSET), aggregates,
# GROUP BY, DISTINCT, no rows (a node's error: test_a_failing_unit_...)
STATEMENTS = [
    "SELECT user_id, name FROM t_user",
    "SELECT * FROM t_user WHERE name IN ('n1', 'n2')",
    "SELECT user_id, name FROM t_user ORDER BY user_id LIMIT 5",
    "SELECT user_id, name FROM t_user ORDER BY name DESC, user_id LIMIT 3 OFFSET 2",
    "SELECT name FROM t_user ORDER BY user_id DESC",
    "SELECT SUM(user_id), COUNT(*), MAX(name), AVG(user_id) FROM t_user",
    "SELECT name, COUNT(*) FROM t_user GROUP BY name ORDER BY name",
    "SELECT DISTINCT name FROM t_user ORDER BY name",
    "SELECT user_id FROM t_user WHERE name = 'none'",
    "SELECT COUNT(*) FROM t_user WHERE name = 'none'",
]


@pytest.fixture(scope="module")
def users(sharded_env: ShardedEnv) -> Iterator[ShardedEnv]:
    sharded_env.clean("t_user", db=DB)
    values = ", ".join(f"({u}, {'NULL' if n is None else repr(n)})" for u, n in USERS)
    sharded_env.run(f"INSERT INTO t_user (user_id, name) VALUES {values}", DB)
    sharded_env.clean("t_range", db=DB)
    sharded_env.run("INSERT INTO t_range (id) VALUES " + ", ".join(f"({i})" for i in range(20000)), DB)
    yield sharded_env
    MULTI_STATS.enabled = True


def _client(env: ShardedEnv) -> RawClient:
    client = RawClient(env.proxy.host, env.proxy.port)
    client.login(database=DB)
    client.command(ComQuery(b"SELECT user_id FROM t_user").encode())  # the session holds both data sources now
    return client


def _answer(client: RawClient, payload: bytes, *, enabled: bool) -> list[tuple[int, bytes]]:
    """The packets of one command's answer, with the path on or off; asserts which path answered."""
    MULTI_STATS.enabled = enabled
    before = MULTI_STATS.taken
    try:
        packets = client.command(payload)
    finally:
        MULTI_STATS.enabled = True
    assert MULTI_STATS.taken - before == (1 if enabled else 0), payload
    return packets


@pytest.mark.parametrize("sql", STATEMENTS)
def test_text_answer_is_the_slow_paths(users: ShardedEnv, sql: str) -> None:
    client = _client(users)
    try:
        payload = ComQuery(sql.encode()).encode()
        slow = _answer(client, payload, enabled=False)
        fast = _answer(client, payload, enabled=True)
        assert fast == slow
        assert client.command(ComQuery(b"SELECT COUNT(*) FROM t_user").encode())[-2][1] == b"\x0240"
    finally:
        client.close()


def _prepare(client: RawClient, sql: str) -> StmtPrepareOK:
    client.send(ComStmtPrepare(sql.encode()).encode())
    ok = StmtPrepareOK.decode(client.read()[1])
    for count in (ok.num_params, ok.num_columns):
        for _ in range(count + (1 if count else 0)):
            client.read()
    return ok


@pytest.mark.parametrize("sql, params", [
    ("SELECT user_id, name FROM t_user WHERE name <> ?", ("n1",)),
    ("SELECT user_id, name FROM t_user WHERE name < ? ORDER BY user_id DESC LIMIT 4", ("n3",)),
    ("SELECT SUM(user_id), COUNT(name) FROM t_user WHERE name >= ?", ("n2",)),
    ("SELECT DISTINCT name FROM t_user WHERE name >= ? ORDER BY name", ("n2",)),
])
def test_prepared_answer_is_the_slow_paths(users: ShardedEnv, sql: str, params: tuple[str, ...]) -> None:
    client = _client(users)
    try:
        ok = _prepare(client, sql)
        payload = ComStmtExecute(ok.statement_id, 0, 1, params, (), True).encode()
        slow = _answer(client, payload, enabled=False)  # prepares the units on the session's connections
        fast = _answer(client, payload, enabled=True)
        assert fast == slow
    finally:
        client.close()


def test_a_large_answer_read_slowly_arrives_whole(users: ShardedEnv) -> None:
    client = _client(users)
    try:
        sql = "SELECT id, REPEAT('x', 200) FROM t_range"  # 20,000 rows, 4 MB
        payload = ComQuery(sql.encode()).encode()
        slow = _answer(client, payload, enabled=False)
        MULTI_STATS.enabled = True
        before = MULTI_STATS.taken
        client.send(payload)
        time.sleep(1.0)  # the client does not read: the proxy stops reading the nodes, buffers stay bounded
        fast: list[tuple[int, bytes]] = []
        relay = ResultRelay(backend_deprecate_eof=False, client_deprecate_eof=False)
        while not relay.done:
            seq, packet = client.read()
            fast.append((seq, packet))
            relay.feed(encode_packet(packet, seq)[0])
            if len(fast) % 2000 == 0:
                time.sleep(0.05)
        assert MULTI_STATS.taken - before == 1
        assert len(fast) == len(slow) and fast == slow
        assert len(slow) > 15000
    finally:
        client.close()


def test_a_failing_unit_stops_the_other_and_names_its_data_source(users: ShardedEnv) -> None:
    physical = users.physical[DB]["ds_1"]
    client = _client(users)
    try:
        users.backend("ds_1", "ALTER TABLE t_user CHANGE name name1 VARCHAR(10)", DB)
        try:
            before = MULTI_STATS.taken
            started = time.monotonic()
            answer = client.command(ComQuery(b"SELECT user_id, name, SLEEP(1) FROM t_user").encode())
            elapsed = time.monotonic() - started
            assert MULTI_STATS.taken - before == 1
            err = ERRPacket.decode(answer[-1][1])
            assert len(answer) == 1 and err.errno == 1054 and err.message.startswith("[ds_1] "), (err, physical)
            assert elapsed < 3.0  # ds_0's 20 rows would sleep 20 s: it was killed
        finally:
            users.backend("ds_1", "ALTER TABLE t_user CHANGE name1 name VARCHAR(10)", DB)
        answer = client.command(ComQuery(b"SELECT COUNT(*) FROM t_user").encode())
        assert answer[-2][1] == b"\x0240"
    finally:
        client.close()


def _kill_soon(env: ShardedEnv, marker: str, what: str) -> threading.Thread:
    """In 0.5 s, `what` (KILL CONNECTION / KILL QUERY) on ds_1's server for the statement carrying `marker`."""

    def kill() -> None:
        time.sleep(0.5)
        ids = env.backend("ds_1", "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE %s "
                                  "AND INFO NOT LIKE '%%PROCESSLIST%%'", DB, (f"%{marker}%",))
        for (thread_id,) in ids:
            env.backend("ds_1", f"{what} {int(thread_id)}", DB)

    killer = threading.Thread(target=kill)
    killer.start()
    return killer


@pytest.mark.parametrize("what", ["KILL CONNECTION", "KILL QUERY"])
def test_a_node_killed_mid_statement_is_an_error_and_the_session_goes_on(users: ShardedEnv, what: str) -> None:
    """A unit's server ends its connection or its query while the other unit still sleeps: the client gets the
    error, naming the data source, and the session answers its next statement. A lost connection ends the
    statement at once (the other unit is stopped); a node's ERR after its header is met where the answer
    reaches that node's rows, after the other node's rows, as on the slow path."""
    with users.connect(DB) as conn, conn.cursor() as cur:
        cur.execute("SELECT user_id FROM t_user")  # the session holds both data sources
        marker = f"mpkill{time.monotonic_ns()}"
        before = MULTI_STATS.taken
        killer = _kill_soon(users, marker, what)
        started = time.monotonic()
        with pytest.raises(pymysql.err.MySQLError) as err:
            cur.execute(f"SELECT user_id, SLEEP(0.3), '{marker}' FROM t_user")  # 20 rows a node: 6 s
        elapsed = time.monotonic() - started
        killer.join()
        assert MULTI_STATS.taken == before + 1
        assert err.value.args[0] in (1317, 1927, 2013), err.value.args
        assert "ds_1" in err.value.args[1], err.value.args
        if what == "KILL CONNECTION":
            assert elapsed < 4.0  # ds_0's unit was stopped, not waited for
        cur.execute("SELECT COUNT(*) FROM t_user")
        assert cur.fetchall() == ((len(USERS),),)


def test_kill_query_through_the_proxy_stops_a_multi_node_select(users: ShardedEnv) -> None:
    """KILL QUERY <the session's id> from another client ends the statement with 1317; the session goes on."""
    with users.connect(DB) as conn, conn.cursor() as cur, users.connect(DB) as admin:
        cur.execute("SELECT user_id FROM t_user")
        before = MULTI_STATS.taken

        def kill() -> None:
            time.sleep(0.5)
            with admin.cursor() as a:
                a.execute(f"KILL QUERY {conn.thread_id()}")

        killer = threading.Thread(target=kill)
        killer.start()
        started = time.monotonic()
        with pytest.raises(pymysql.err.MySQLError) as err:
            cur.execute("SELECT user_id, SLEEP(0.3) FROM t_user")
        killer.join()
        assert MULTI_STATS.taken == before + 1
        assert err.value.args[0] == 1317, err.value.args
        assert time.monotonic() - started < 4.0
        cur.execute("SELECT COUNT(*) FROM t_user")
        assert cur.fetchall() == ((len(USERS),),)
