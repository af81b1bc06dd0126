"""Multi-node SELECTs answered inside the socket callbacks (proxy.execution.multipath) against real MariaDB: for
each statement the proxy's answer, byte for byte, is the slow path's (the same statement with the path turned
off, on the same session), text and prepared; a unit that fails stops the others and names its data source; a
large answer read slowly by the client arrives whole."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator

import pymysql
import pytest

from protocol.binary import ComStmtExecute, ComStmtPrepare, ParamType, StmtPrepareOK
from protocol.constants import Capability, ColumnType
from protocol.framing import encode_packet
from protocol.packets import ComQuery, ERRPacket
from protocol.results import ResultRelay
from proxy.execution import multipath
from proxy.execution.fastcommit import FAN_STATS
from proxy.execution.multipath import MULTI_STATS
from tests.integration.sharding_fixtures import ShardedEnv
from tests.integration.test_malformed import CLIENT_CAPS, RawClient

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
    # node warnings (a cast of 'n1' truncated), counted as the slow path counts them, also where a LIMIT stops
    # the merge before a node's end
    "SELECT user_id, CAST(name AS SIGNED) FROM t_user ORDER BY user_id LIMIT 3",
    "SELECT user_id, CAST(name AS SIGNED) FROM t_user",
    "SELECT SUM(CAST(name AS SIGNED)), COUNT(*) FROM t_user",
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


def _answer(client: RawClient, payload: bytes, *, enabled: bool, whole: bool = True) -> list[tuple[int, bytes]]:
    """The packets of one command's answer, with the path on or off (`whole`: its one-step answer on or off, see
    `_answer_ways`); asserts which path answered."""
    MULTI_STATS.enabled = enabled
    MULTI_STATS.whole_enabled = whole
    before = MULTI_STATS.taken
    try:
        packets = client.command(payload)
    finally:
        MULTI_STATS.enabled = MULTI_STATS.whole_enabled = True
    assert MULTI_STATS.taken - before == (1 if enabled else 0), payload
    return packets


def _answer_ways(client: RawClient, payload: bytes, sql: str) -> list[tuple[int, bytes]]:
    """The answer of the slow path, asserted equal to this path's by its coroutine and by its one-step answer
    (`MultiAnswer._whole`, which must have taken it: concatenated, merged on raw frames or on decoded rows)."""
    slow = _answer(client, payload, enabled=False)
    assert _answer(client, payload, enabled=True, whole=False) == slow
    before = MULTI_STATS.whole
    assert _answer(client, payload, enabled=True) == slow
    assert MULTI_STATS.whole - before == 1, sql
    return slow


@pytest.mark.parametrize("sql", STATEMENTS)
def test_text_answer_is_the_slow_paths(users: ShardedEnv, sql: str) -> None:
    client = _client(users)
    try:
        _answer_ways(client, ComQuery(sql.encode()).encode(), sql)
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
        _answer(client, payload, enabled=False)  # prepares the units on the session's connections
        _answer_ways(client, payload, sql)
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
        fast = _read_slowly(client, payload)
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
        assert err.value.args[0] in (1317, 1927, 1158), err.value.args
        assert "ds_1" in err.value.args[1], err.value.args
        if what == "KILL CONNECTION":
            assert elapsed < 4.0  # ds_0's unit was stopped, not waited for
        cur.execute("SELECT COUNT(*) FROM t_user")
        assert cur.fetchall() == ((len(USERS),),)


# --- several units on one data source, pipelined on the session's connection ------------------------------------
# t_log: MOD 4, t_log_0 / t_log_2 on ds_0, t_log_1 / t_log_3 on ds_1 (units in that order, interleaved)

LOGS = [(i, None if i % 9 == 4 else f"m{i % 6}") for i in range(80)]  # (id, msg): t_log_{id % 4}

# taken: rows concatenated (read unit after unit by data source: each connection's order), or each node's rows
# bounded by the rewritten statement (MergeSpec.node_rows <= multipath.PIPELINE_ROWS)
PIPELINED = [
    "SELECT id, msg FROM t_log ORDER BY id LIMIT 10",
    "SELECT id, msg FROM t_log ORDER BY id DESC LIMIT 5 OFFSET 7",
    "SELECT id, msg FROM t_log ORDER BY msg, id LIMIT 3, 4",
    "SELECT msg, id FROM t_log ORDER BY msg DESC, id LIMIT 12",
    "SELECT id, msg FROM t_log WHERE id < 50 ORDER BY id LIMIT 1000",
    "SELECT COUNT(*), SUM(id), MAX(msg), MIN(msg), AVG(id) FROM t_log",
    "SELECT COUNT(*) FROM t_log WHERE msg = 'none'",
    "SELECT msg, COUNT(*), SUM(id) FROM t_log GROUP BY msg LIMIT 3",
    "SELECT msg, COUNT(*) FROM t_log GROUP BY msg ORDER BY msg DESC LIMIT 2 OFFSET 1",
    "SELECT id, msg FROM t_log WHERE id < 30",
    "SELECT id, msg FROM t_log WHERE msg IN ('m1', 'm2')",
    "SELECT id FROM t_log WHERE msg = 'none'",
]

# not taken: a merge over rows no LIMIT bounds on the nodes, or past the bound (the slow path's borrowed connections)
NOT_PIPELINED = [
    "SELECT id, msg FROM t_log ORDER BY id",
    "SELECT id FROM t_log ORDER BY id LIMIT 995, 10",
    "SELECT msg, COUNT(*) FROM t_log GROUP BY msg ORDER BY COUNT(*) DESC, msg LIMIT 2",
    "SELECT DISTINCT msg FROM t_log ORDER BY msg",
    "SELECT COUNT(DISTINCT msg) FROM t_log",
]


@pytest.fixture(scope="module")
def logs(users: ShardedEnv) -> ShardedEnv:
    users.clean("t_log", db=DB)
    values = ", ".join(f"({i}, {'NULL' if m is None else repr(m)})" for i, m in LOGS)
    users.run(f"INSERT INTO t_log (id, msg) VALUES {values}", DB)
    assert users.preview("SELECT id FROM t_log", DB) == [
        ("ds_0", "SELECT id FROM t_log_0"), ("ds_1", "SELECT id FROM t_log_1"),
        ("ds_0", "SELECT id FROM t_log_2"), ("ds_1", "SELECT id FROM t_log_3")]
    return users


def _read_slowly(client: RawClient, payload: bytes) -> list[tuple[int, bytes]]:
    """Send `payload`, read nothing for a second (the proxy stops reading the nodes: its buffers stay bounded),
    then read the whole answer with pauses."""
    client.send(payload)
    time.sleep(1.0)
    packets: list[tuple[int, bytes]] = []
    relay = ResultRelay(backend_deprecate_eof=False, client_deprecate_eof=False)
    while not relay.done:
        seq, packet = client.read()
        packets.append((seq, packet))
        relay.feed(encode_packet(packet, seq)[0])
        if len(packets) % 2000 == 0:
            time.sleep(0.05)
    return packets


def _taken(client: RawClient, payload: bytes, *, taken: bool) -> list[tuple[int, bytes]]:
    """The answer with the path on; asserts whether this path took it."""
    before = MULTI_STATS.taken
    packets = client.command(payload)
    assert MULTI_STATS.taken - before == (1 if taken else 0), payload
    return packets


def _count_is(client: RawClient, count: int) -> None:
    """The session's next statement is answered right (nothing of the last one is left on its connections)."""
    answer = client.command(ComQuery(b"SELECT COUNT(*), SUM(id) FROM t_log").encode())
    total = sum(i for i, _ in LOGS)
    assert answer[-2][1] == bytes((len(str(count)),)) + str(count).encode() + bytes((len(str(total)),)) + \
        str(total).encode(), answer


@pytest.mark.parametrize("sql", PIPELINED)
def test_pipelined_text_answer_is_the_slow_paths(logs: ShardedEnv, sql: str) -> None:
    client = _client(logs)
    try:
        payload = ComQuery(sql.encode()).encode()
        slow = _answer_ways(client, payload, sql)
        _count_is(client, len(LOGS))
        assert _answer(client, payload, enabled=True) == slow  # again, on the same connections
    finally:
        client.close()


@pytest.mark.parametrize("sql", NOT_PIPELINED)
def test_unbounded_merges_are_left_to_the_slow_path(logs: ShardedEnv, sql: str) -> None:
    client = _client(logs)
    try:
        payload = ComQuery(sql.encode()).encode()
        slow = _answer(client, payload, enabled=False)
        assert _taken(client, payload, taken=False) == slow
        _count_is(client, len(LOGS))
    finally:
        client.close()
    with logs.connect(DB) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, msg FROM t_log ORDER BY id")
        assert cur.fetchall() == tuple(LOGS)


@pytest.mark.parametrize("sql, params", [
    ("SELECT id, msg FROM t_log WHERE id >= ? ORDER BY id LIMIT 10", (5,)),
    ("SELECT id, msg FROM t_log WHERE msg <> ? ORDER BY id DESC LIMIT 4 OFFSET 3", ("m1",)),
    ("SELECT id FROM t_log WHERE id > ? ORDER BY id LIMIT ?", (3, 6)),
    ("SELECT COUNT(*), SUM(id), MAX(msg) FROM t_log WHERE id > ?", (10,)),
    ("SELECT msg, COUNT(*) FROM t_log WHERE id > ? GROUP BY msg LIMIT 3", (3,)),
    ("SELECT id, msg FROM t_log WHERE id < ?", (25,)),
])
def test_pipelined_prepared_answer_is_the_slow_paths(logs: ShardedEnv, sql: str, params: tuple[object, ...]) -> None:
    """The slow path prepares the units on the connections it runs them on (borrowed ones too); this path prepares
    those its own connection lacks first (once), then pipelines the executes."""
    client = _client(logs)
    try:
        ok = _prepare(client, sql)
        payload = ComStmtExecute(ok.statement_id, 0, 1, params, (), True).encode()
        slow = _answer(client, payload, enabled=False)
        assert _answer(client, payload, enabled=True) == slow  # preparing what the session's connections lack
        assert _answer_ways(client, payload, sql) == slow  # every unit prepared there
        _count_is(client, len(LOGS))
    finally:
        client.close()



_LONG, _TINY = ParamType(ColumnType.LONG), ParamType(ColumnType.TINY)
_LONGLONG, _STR = ParamType(ColumnType.LONGLONG), ParamType(ColumnType.VAR_STRING)


@pytest.mark.parametrize("sql", [
    "SELECT id, msg FROM t_log WHERE id BETWEEN ? AND ? ORDER BY id LIMIT 5",
    "SELECT id, msg FROM t_log WHERE id BETWEEN ? AND ?",
    "SELECT COUNT(*), SUM(id) FROM t_log WHERE id BETWEEN ? AND ?",
])
@pytest.mark.parametrize("types", [(_LONG, _LONG), (_TINY, _LONGLONG), (_STR, _STR)])
def test_prepared_executes_without_types_answer_as_the_slow_path(logs: ShardedEnv, sql: str,
                                                                  types: tuple[ParamType, ...]) -> None:
    """The units get the client's execute re-addressed (protocol.retarget): bound types on the first
    execute, then executes that bind none (libmysqlclient's), whose types are written in from the ones bound."""
    client = _client(logs)
    try:
        ok = _prepare(client, sql)
        for i, (low, high) in enumerate([(2, 9), (5, 30), (1, 3), (0, 40)]):
            values = (str(low).encode(), str(high).encode()) if types[0] is _STR else (low, high)
            payload = ComStmtExecute(ok.statement_id, 0, 1, values, types, True).encode()
            if i:  # flag 0, no type block
                at = 10 + 1
                payload = payload[:at] + b"\x00" + payload[at + 1 + 2 * len(values):]
            slow = _answer(client, payload, enabled=False)
            assert _answer(client, payload, enabled=True) == slow, (low, high)
        # every unit is prepared on the session's connections now: the path sends the client's execute re-addressed
        # and encodes none of its own (fails if it encoded them: the path would decline, MULTI_STATS unchanged)
        import proxy.execution.multipath as multipath

        def refuse(*_args: object) -> bytes:
            raise AssertionError("a unit's execute was encoded anew")

        original, multipath.execute_payload = multipath.execute_payload, refuse  # type: ignore[assignment]
        try:
            assert _answer(client, payload, enabled=True) == slow
        finally:
            multipath.execute_payload = original
        _count_is(client, len(LOGS))
    finally:
        client.close()

def test_prepared_unbounded_merge_is_left_to_the_slow_path(logs: ShardedEnv) -> None:
    client = _client(logs)
    try:
        ok = _prepare(client, "SELECT id, msg FROM t_log WHERE id > ? ORDER BY id")
        payload = ComStmtExecute(ok.statement_id, 0, 1, (3,), (), True).encode()
        slow = _answer(client, payload, enabled=False)
        assert _taken(client, payload, taken=False) == slow
    finally:
        client.close()


def _broken_column(env: ShardedEnv, table: str) -> contextlib.AbstractContextManager[None]:
    ds = f"ds_{int(table[-1]) % 2}"

    @contextlib.contextmanager
    def broken() -> Iterator[None]:
        env.backend(ds, f"ALTER TABLE {table} CHANGE msg msg1 VARCHAR(10)", DB)
        try:
            yield
        finally:
            env.backend(ds, f"ALTER TABLE {table} CHANGE msg1 msg VARCHAR(10)", DB)

    return broken()


@pytest.mark.parametrize("table", ["t_log_0", "t_log_2"])  # the first / the second unit on ds_0's connection
@pytest.mark.parametrize("sql", ["SELECT id, msg FROM t_log ORDER BY id LIMIT 10",
                                 "SELECT id, msg FROM t_log WHERE id < 30"])
def test_a_failing_pipelined_unit_is_the_slow_paths_error(logs: ShardedEnv, table: str, sql: str) -> None:
    """A unit's ERR (text and prepared) answers as on the slow path (merged: the error alone; concatenated: after
    the rows relayed before that unit); every answer pipelined behind it on its connection is read, so the session's
    next statements there are answered right."""
    client = _client(logs)
    try:
        ok = _prepare(client, sql)
        execute = ComStmtExecute(ok.statement_id, 0, 1, (), (), True).encode()
        _answer(client, execute, enabled=True)  # prepared on the session's connections while they work
        with _broken_column(logs, table):
            for payload in (ComQuery(sql.encode()).encode(), execute):
                # (this path first: after a unit's ERR the slow path leaves that unit's connection marked busy until
                # its next command there, and this path declines a busy connection)
                fast = _answer(client, payload, enabled=True)
                slow = _answer(client, payload, enabled=False)
                assert fast == slow
                err = ERRPacket.decode(fast[-1][1])
                assert err.errno == 1054 and err.message.startswith("[ds_0] "), err
                _count_is(client, len(LOGS))
        assert _answer(client, ComQuery(sql.encode()).encode(), enabled=True) == \
            _answer(client, ComQuery(sql.encode()).encode(), enabled=False)
        _count_is(client, len(LOGS))
    finally:
        client.close()


def test_a_failing_unit_stops_the_pipelined_others(logs: ShardedEnv) -> None:
    """ds_1's first unit fails at once: ds_0's two units, one behind the other on its connection (4 s each), are
    stopped (KILL QUERY until the last answer there has ended), not waited for."""
    client = _client(logs)
    try:
        with _broken_column(logs, "t_log_1"):
            before = MULTI_STATS.taken
            started = time.monotonic()
            answer = client.command(ComQuery(b"SELECT id, msg, SLEEP(0.2) FROM t_log ORDER BY id LIMIT 40").encode())
            elapsed = time.monotonic() - started
            assert MULTI_STATS.taken - before == 1
            err = ERRPacket.decode(answer[-1][1])
            assert len(answer) == 1 and err.errno == 1054 and err.message.startswith("[ds_1] "), err
            assert elapsed < 3.0
        _count_is(client, len(LOGS))
    finally:
        client.close()


@pytest.mark.parametrize("what", ["KILL CONNECTION", "KILL QUERY"])
@pytest.mark.parametrize("sql", ["SELECT id, SLEEP(0.3), '{marker}' FROM t_log ORDER BY id LIMIT 40",
                                 "SELECT id, SLEEP(0.3), '{marker}' FROM t_log WHERE id % 4 = 1 OR id < 4"])
def test_a_pipelined_node_killed_mid_statement(logs: ShardedEnv, what: str, sql: str) -> None:
    """ds_1's server ends its connection or its running query (the first of the two pipelined there): the client
    gets the error naming ds_1, and the session's next statements are answered right."""
    with logs.connect(DB) as conn, conn.cursor() as cur:
        cur.execute("SELECT user_id FROM t_user")  # the session holds both data sources
        marker = f"mpkill{time.monotonic_ns()}"
        before = MULTI_STATS.taken
        killer = _kill_soon(logs, marker, what)
        started = time.monotonic()
        with pytest.raises(pymysql.err.MySQLError) as err:
            cur.execute(sql.format(marker=marker))
        elapsed = time.monotonic() - started
        killer.join()
        assert MULTI_STATS.taken == before + 1
        assert err.value.args[0] in (1317, 1927, 1158), err.value.args
        assert "ds_1" in err.value.args[1], err.value.args
        if what == "KILL CONNECTION" or "ORDER BY" not in sql:
            assert elapsed < 4.0  # the other units were stopped, not waited for
        # (a merge: waits for every unit's header, as the slow path does; ds_1's unit pipelined behind the killed one
        # starts only then and is read to its end, as the slow path's would run beside it)
        for _ in range(2):
            cur.execute("SELECT id, msg FROM t_log ORDER BY id LIMIT 100")
            assert cur.fetchall() == tuple(LOGS)


@pytest.mark.parametrize(("layout", "statement", "check"), [
    ("users", "SELECT user_id, SLEEP(0.3) FROM t_user", "SELECT COUNT(*) FROM t_user"),
    ("logs", "SELECT id, SLEEP(0.3) FROM t_log ORDER BY id LIMIT 40",
     "SELECT id, msg FROM t_log ORDER BY id LIMIT 100"),
], ids=["one-unit-per-source", "pipelined"])
def test_kill_query_through_the_proxy_stops_a_multi_node_select(request: pytest.FixtureRequest, layout: str,
                                                                statement: str, check: str) -> None:
    """KILL QUERY <the session's id> from another client ends the statement with 1317; the session goes on. With
    units pipelined, each connection's running unit is killed, then the unit behind it (which starts once the
    first has ended) by the statement's own KILL QUERY loop."""
    env: ShardedEnv = request.getfixturevalue(layout)
    expected = ((len(USERS),),) if layout == "users" else tuple(LOGS)
    with env.connect(DB) as conn, conn.cursor() as cur, env.connect(DB) as admin:
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
            cur.execute(statement)
        killer.join()
        assert MULTI_STATS.taken == before + 1
        assert err.value.args[0] == 1317, err.value.args
        assert time.monotonic() - started < 4.0
        cur.execute(check)
        assert cur.fetchall() == expected


def test_a_large_pipelined_answer_read_slowly_arrives_whole(logs: ShardedEnv) -> None:
    """Concatenated rows of two units per connection (20,000 rows, 4 MB), the client not reading at first: each
    connection's socket stops being read while its current unit's rows wait, and the answer arrives whole."""
    for k in range(4):
        logs.backend(f"ds_{k % 2}", f"INSERT INTO t_ring_{k} (code, n) SELECT CONCAT('r{k}-', seq), seq "
                                   "FROM seq_1_to_5000", DB)
    client = _client(logs)
    try:
        payload = ComQuery(b"SELECT code, n, REPEAT('x', 200) FROM t_ring").encode()
        slow = _answer(client, payload, enabled=False)
        before = MULTI_STATS.taken
        fast = _read_slowly(client, payload)
        assert MULTI_STATS.taken - before == 1
        assert len(fast) == len(slow) and fast == slow
        assert len(slow) > 20000
        _count_is(client, len(LOGS))
    finally:
        client.close()
        logs.clean("t_ring", db=DB)


def test_pipelined_select_inside_a_transaction_sees_its_rows(logs: ShardedEnv) -> None:
    """Inside a transaction both data sources joined, the pipelined units run on the transaction's connections:
    they see its uncommitted rows, as the slow path (which reads them one after another there) does."""
    client = _client(logs)
    try:
        assert client.command(ComQuery(b"BEGIN").encode())[-1][1][:1] == b"\x00"
        client.command(ComQuery(b"SELECT COUNT(*) FROM t_log WHERE id = 1 OR id = 2").encode())  # joins both
        assert client.command(ComQuery(b"INSERT INTO t_log (id, msg) VALUES (200, 'new'), (203, 'new3')").encode()
                              )[-1][1][:1] == b"\x00"
        for sql in ("SELECT id, msg FROM t_log ORDER BY id DESC LIMIT 3", "SELECT id FROM t_log WHERE msg LIKE 'new%'",
                    "SELECT COUNT(*), MAX(id) FROM t_log"):
            payload = ComQuery(sql.encode()).encode()
            slow = _answer(client, payload, enabled=False)
            assert _answer(client, payload, enabled=True) == slow
            assert b"new" in b"".join(p for _, p in slow) or b"203" in b"".join(p for _, p in slow)
        assert client.command(ComQuery(b"ROLLBACK").encode())[-1][1][:1] == b"\x00"
        _count_is(client, len(LOGS))
    finally:
        client.close()


# a concatenation, a merge on raw frames, a merge on decoded rows
ONE_OF_EACH = ["SELECT user_id, name FROM t_user",
               "SELECT user_id, name FROM t_user ORDER BY name DESC, user_id LIMIT 3 OFFSET 2",
               "SELECT SUM(user_id), COUNT(*) FROM t_user"]


@pytest.mark.parametrize("sql", ONE_OF_EACH)
def test_an_answer_leaves_nothing_to_the_garbage_collector(users: ShardedEnv, sql: str) -> None:
    """A multi-node SELECT (and a COMMIT fanned out) is freed by reference counting when it ends: its objects made
    cycles (a chain's legs and each leg's chain) that only the garbage collector's passes would free."""
    client = _client(users)
    try:
        payload = ComQuery(sql.encode()).encode()
        client.command(payload)
        gc.collect()
        gc.disable()
        try:
            before = MULTI_STATS.whole
            for _ in range(50):
                client.command(payload)
            assert MULTI_STATS.whole - before == 50
            assert gc.collect() < 50  # (what the test's own client and the server threads leave, if anything)
            before = FAN_STATS.taken
            for _ in range(50):
                client.command(ComQuery(b"BEGIN").encode())
                client.command(payload)  # (joins both data sources: the session's coroutine)
                client.command(payload)
                client.command(ComQuery(b"COMMIT").encode())
            assert FAN_STATS.taken - before == 50
            assert gc.collect() < 50
        finally:
            gc.enable()
    finally:
        client.close()


def test_a_bug_in_the_one_step_answer(users: ShardedEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug met before `MultiAnswer._whole` writes anything leaves the statement to the coroutine (the right
    answer); one met while it writes ends the answer with an ERR that names it; the session goes on either way."""
    client = _client(users)
    try:
        sql = "SELECT user_id, name FROM t_user ORDER BY user_id LIMIT 5"
        payload = ComQuery(sql.encode()).encode()
        slow = _answer(client, payload, enabled=False)

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("planted")

        monkeypatch.setattr(multipath, "raw_order_merge_whole", broken)
        before = MULTI_STATS.whole
        assert _answer(client, payload, enabled=True) == slow
        assert MULTI_STATS.whole == before
        monkeypatch.undo()
        monkeypatch.setattr(multipath, "renumber", broken)
        answer = _answer(client, payload, enabled=True)
        assert answer[-1][1][0] == 0xFF and b"shardproxy internal error: RuntimeError: planted" in answer[-1][1]
        monkeypatch.undo()
        assert _answer(client, payload, enabled=True) == slow
    finally:
        client.close()


@pytest.mark.parametrize("sql", ONE_OF_EACH)
def test_a_deprecate_eof_clients_answer_is_the_slow_paths(users: ShardedEnv, sql: str) -> None:
    """A client that asked for CLIENT_DEPRECATE_EOF gets no EOF after the column definitions and an OK at the end,
    from the one-step answer (its header is kept framed) as from the slow path."""
    client = RawClient(users.proxy.host, users.proxy.port)
    try:
        client.login(database=DB, caps=CLIENT_CAPS | Capability.DEPRECATE_EOF)
        client.command(ComQuery(b"SELECT user_id FROM t_user").encode(), deprecate_eof=True)
        payload = ComQuery(sql.encode()).encode()
        MULTI_STATS.enabled = False
        try:
            slow = client.command(payload, deprecate_eof=True)
        finally:
            MULTI_STATS.enabled = True
        before = MULTI_STATS.whole
        assert client.command(payload, deprecate_eof=True) == slow
        assert MULTI_STATS.whole - before == 1
        assert not any(p[:1] == b"\xfe" and len(p) < 9 for _seq, p in slow[:-1])  # no EOF packet before the end
    finally:
        client.close()
