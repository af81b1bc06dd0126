"""Issue 17: writes across nodes run in steps (proxy.stepwise) under the XA transaction rule: the
statement's own transaction is one XA transaction (two-phase, with a logged decision), so its parts commit
on every data source or on none; nothing is left prepared or open afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.test_xa import Env, failing, run, servers  # noqa: F401  (servers: the fixture)

pytestmark = pytest.mark.integration


@pytest.fixture
def env(servers: list[MariaDBServer], tmp_path: Path) -> Iterator[Env]:  # noqa: F811
    e = Env(servers, tmp_path)
    yield e
    e.close()


def test_limited_update_and_insert_select_are_one_xa_transaction(env: Env) -> None:
    conn = env.connect()
    run(conn, "INSERT INTO t_xa (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
    before = len(env.decisions())
    run(conn, "UPDATE t_xa SET v = 'lim' ORDER BY id DESC LIMIT 3")
    assert conn._result is not None and conn._result.affected_rows == 3
    assert env.rows("ds_0") == [(2, "lim"), (4, "lim")] and env.rows("ds_1") == [(1, "a"), (3, "lim")]
    assert len(env.decisions()) == before + 1  # both data sources written: two-phase, one decision
    # a failing row (1062 on ds_1) takes back what the statement wrote on ds_0
    errno, message = failing(conn, "INSERT INTO t_xa (id, v) SELECT IF(id = 3, 1, id + 10), v FROM t_xa")
    assert errno == 1062, message
    assert env.rows("ds_0") == [(2, "lim"), (4, "lim")] and env.rows("ds_1") == [(1, "a"), (3, "lim")]
    run(conn, "INSERT INTO t_xa (id, v) SELECT id + 10, CONCAT(v, '+') FROM t_xa")
    assert conn._result is not None and conn._result.affected_rows == 4
    assert [r[0] for r in env.rows("ds_0")] == [2, 4, 12, 14]
    assert not conn.server_status & 1  # no transaction left open
    env.assert_clean()
    conn.close()
