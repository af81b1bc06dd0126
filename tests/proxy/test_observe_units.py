"""Issue 37 without servers: statement fingerprints (one line per case), the digest store's bounds and percentiles,
and the audit log's password redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.observe import fingerprint as fp
from proxy.observe.audit import AuditLog, config_reload, redact
from proxy.observe.digests import DigestStore

FINGERPRINTS = [
    ("SELECT c FROM sbtest1 WHERE id=42", "select c from sbtest1 where id=?"),
    ("select c from sbtest1 where id=7", "select c from sbtest1 where id=?"),
    ("SELECT  c\n\tFROM sbtest1   WHERE id = 1 ;", "select c from sbtest1 where id = ?"),
    ("SELECT * FROM t WHERE a IN (1)", "select * from t where a in (...)"),
    ("SELECT * FROM t WHERE a IN (1, 2, 3, 4, 5, 6)", "select * from t where a in (...)"),
    ("SELECT * FROM t WHERE a in('x','y')", "select * from t where a in (...)"),
    ("SELECT * FROM t WHERE a NOT IN (1, NULL)", "select * from t where a not in (...)"),
    (
        "SELECT * FROM t WHERE a IN (SELECT b FROM u WHERE c = 2)",
        "select * from t where a in (select b from u where c = ?)",
    ),
    ("SELECT * FROM t WHERE a IN (b, 2)", "select * from t where a in (b, ?)"),
    ("SELECT * FROM t WHERE s = 'it''s' AND d = \"q\\\"x\"", "select * from t where s = ? and d = ?"),
    ("SELECT x'1F', b'101', 0xABC, _utf8mb4'z', N'n'", "select ?, ?, ?, ?, ?"),
    ("SELECT 1.5, .5e3, 2e-3, -7, +8", "select ?, ?, ?, ?, ?"),
    ("SELECT a - 1, a-1, a = -1, f(-2)", "select a - ?, a-?, a = ?, f(?)"),
    ("SELECT * FROM t LIMIT 10 OFFSET 20", "select * from t limit ? offset ?"),
    (
        "SELECT * FROM t_1 JOIN `t 2` USING (id) WHERE `col3` = 3",
        "select * from t_1 join `t 2` using (id) where `col3` = ?",
    ),
    ("SELECT /* a comment */ 1 -- tail", "select ?"),
    ("SELECT 1 # hash comment\nFROM dual", "select ? from dual"),
    ("SELECT /*! STRAIGHT_JOIN */ a FROM t", "select straight_join a from t"),
    ("SELECT /*+ MAX_EXECUTION_TIME(5) */ a FROM t", "select a from t"),
    ("INSERT INTO t (a, b) VALUES (1, 'x')", "insert into t (a, b) values (...)"),
    ("INSERT INTO t (a, b) VALUES (1, 'x'), (2, NULL), (3, DEFAULT)", "insert into t (a, b) values (...)"),
    ("INSERT INTO t VALUE (1)", "insert into t value (...)"),
    ("INSERT INTO t (a) VALUES (NOW())", "insert into t (a) values (now())"),
    ("UPDATE t SET k = k + 1 WHERE id = ?", "update t set k = k + ? where id = ?"),
    ("SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 104", "select c from sbtest1 where id between ? and ?"),
    ("SELECT 'unterminated", "select ?"),
    ("SET NAMES utf8mb4", "set names utf8mb4"),
]


@pytest.mark.parametrize(("sql", "expected"), FINGERPRINTS)
def test_fingerprint(sql: str, expected: str) -> None:
    assert fp.fingerprint(sql) == expected
    assert fp.cached(sql) == expected
    assert fp.cached(sql) == expected  # (from the cache)


def test_trailing_number_cache_keeps_identifiers_apart() -> None:
    assert fp.cached("SELECT * FROM t1") == "select * from t1"
    assert fp.cached("SELECT * FROM t2") == "select * from t2"  # digits of a name: not a number token
    assert fp.cached("SELECT a FROM t WHERE b = 'x'||1") == "select a from t where b = ?||?"
    assert fp.cached("SELECT `a 12") != fp.cached("SELECT `a 13")  # (digits of an unterminated name)


def test_store_evicts_the_least_recently_seen() -> None:
    store = DigestStore(max_entries=2)
    store.record("a", "db", "u", "single", 0.001, 0, 1)
    store.record("b", "db", "u", "single", 0.001, 0, 1)
    store.record("a", "db", "u", "single", 0.001, 0, 1)  # a is now the most recent
    store.record("c", "db", "u", "multi", 0.001, 0, 1)
    assert sorted(k[0] for k in store.entries) == ["a", "c"] and store.evicted == 1
    store.record("c", "db", "u", "multi", 0.001, 0, 1)  # c counted since it came; a not since its second chance
    store.resize(1)
    assert [k[0] for k in store.entries] == ["c"]
    store.resize(0)
    assert not store.entries and store.evicted == 3


def test_store_counts_and_percentile() -> None:
    store = DigestStore()
    for i in range(100):
        store.record("q", "db", "u", "single" if i % 4 else "multi", 0.001 if i < 98 else 0.5, 1146 if i < 3 else 0, 2)
    d = store.entries[("q", "db", "u")]
    assert (d.count, d.rows, d.errors, d.routes) == (100, 200, {1146: 3}, {"multi": 25, "single": 75})
    assert d.max == 0.5 and 0.001 <= d.p99() <= 0.5 * 1.0 and d.p99() > 0.4  # the 99th of 100 is a 0.5 s one
    row = dict(zip(("digest", "text", "db", "user", "count", "errors", "by_errno"), store.rows()[0], strict=False))
    assert (row["count"], row["errors"], row["by_errno"]) == (100, 3, "1146:3")
    store.reset()
    assert store.rows() == []


REDACTIONS = [
    ("CREATE USER 'u'@'%' IDENTIFIED BY 'hunter2'", "CREATE USER 'u'@'%' IDENTIFIED BY '***'"),
    (
        "ALTER USER u IDENTIFIED WITH mysql_native_password BY 'pw'",
        "ALTER USER u IDENTIFIED WITH mysql_native_password BY '***'",
    ),
    ("GRANT ALL ON *.* TO u IDENTIFIED BY PASSWORD '*AB12'", "GRANT ALL ON *.* TO u IDENTIFIED BY PASSWORD '***'"),
    ("SET PASSWORD FOR u = PASSWORD('pw')", "SET PASSWORD FOR u = PASSWORD('***')"),
    (
        "REGISTER STORAGE UNIT ds (HOST='h', USER='root', PASSWORD='a,b')",
        "REGISTER STORAGE UNIT ds (HOST='h', USER='root', PASSWORD='***')",
    ),
    (
        "REGISTER STORAGE UNIT ds (URL='jdbc:mysql://root:pw@h:3306/d', password=pw)",
        "REGISTER STORAGE UNIT ds (URL='jdbc:mysql://root:***@h:3306/d', password='***')",
    ),
    ("SET DIST VARIABLE sql_show = true", "SET DIST VARIABLE sql_show = true"),
]


@pytest.mark.parametrize(("sql", "expected"), REDACTIONS)
def test_redact(sql: str, expected: str) -> None:
    assert redact(sql) == expected


def test_audit_lines(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "audit.jsonl"
    audit = AuditLog(str(path))

    class Server:
        pass

    server = Server()
    server.audit = audit  # type: ignore[attr-defined]
    config_reload(server, ok=False, error="global.yaml: authority.users[0].password: 'topsecret' is bad")
    config_reload(server, ok=True, changes=["props.sql-show"])
    audit.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["event"], e["ok"], e["changes"]) for e in lines] == [
        ("config_reload", False, []),
        ("config_reload", True, ["props.sql-show"]),
    ]
    assert "topsecret" not in path.read_text()
    assert not AuditLog(None).enabled


def test_a_sessions_repeated_statement_shape_is_counted_on_its_last_digest() -> None:
    """The session's shortcut (same text, or the same head before a trailing number) counts on the digest the full
    lookup would find, and only then."""
    from types import SimpleNamespace

    from proxy.observe.digests import DigestStore
    from proxy.observe.statement import statement_ended

    store = DigestStore(100)
    db = SimpleNamespace(name="d")
    session = SimpleNamespace(server=SimpleNamespace(digests=store, slow_query_ms=0), route="single", last_errno=0,
                              database=db, user="u", last_digest=None, rows_sent=1)
    for sql in ("SELECT c FROM t WHERE id = 7", "SELECT c FROM t WHERE id = 8", "SELECT c FROM t WHERE id = 123",
                "SELECT c FROM t WHERE id = 7x", "SELECT c FROM t WHERE id = 7\u00b2"):
        statement_ended(session, sql, 0.001, 1.0)
    counts = {d.text: d.count for d in store.entries.values()}
    assert counts["select c from t where id = ?"] == 3
    assert sum(counts.values()) == 5 and len(counts) == 3, counts
