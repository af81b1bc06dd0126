"""Transaction-control statements read as MySQL reads them (proxy.execution.txn_text), and read alike by both
engines: the session's `classify_session_statement` and the fast path (`plain_statement` + the exact verbs it
answers itself, proxy.execution.fastpath)."""

from __future__ import annotations

import pytest

from proxy.execution.plain import TRANSACTION, plain_statement_uncached
from proxy.execution.txn_control import classify_session_statement
from proxy.execution.txn_text import VERBS, Savepoint, key, parse_savepoint, quote, without_comments

# text -> (the session statement's kind, the savepoint statement it is: verb, name as MySQL reads it)
CASES: list[tuple[str, str | None, tuple[str, str | None] | None]] = [
    ("SAVEPOINT sp8", "savepoint", ("set", "sp8")),
    ("SAVEPOINT `sp x7`", "savepoint", ("set", "sp x7")),
    ("savepoint `Sp X7`", "savepoint", ("set", "Sp X7")),
    ("SAVEPOINT `a``b c`", "savepoint", ("set", "a`b c")),
    ("SAVEPOINT `select`", "savepoint", ("set", "select")),
    ("SAVEPOINT `sp x7`;", "savepoint", ("set", "sp x7")),
    ("  SAVEPOINT\n\t`sp x7` ; \n", "savepoint", ("set", "sp x7")),
    ("SAVEPOINT /* c */ `sp x7` -- trailing\n", "savepoint", ("set", "sp x7")),
    ("/* lead */ SAVEPOINT `sp x7` # hash comment", "savepoint", ("set", "sp x7")),
    ("-- lead\nSAVEPOINT a;", "savepoint", ("set", "a")),
    ("SAVEPOINT /*!50000 `sp x7` */", "savepoint", ("set", "sp x7")),  # executable comment: read as SQL
    ("SAVEPOINT café_1", "savepoint", ("set", "café_1")),
    ("SAVEPOINT $a1", "savepoint", ("set", "$a1")),
    ("ROLLBACK TO `sp x7`", "savepoint", ("rollback", "sp x7")),
    ("ROLLBACK TO SAVEPOINT `sp x7`", "savepoint", ("rollback", "sp x7")),
    ("ROLLBACK WORK TO SAVEPOINT x", "savepoint", ("rollback", "x")),
    ("rollback work to x;", "savepoint", ("rollback", "x")),
    ("ROLLBACK TO savepoint", "savepoint", ("rollback", "savepoint")),
    ("ROLLBACK\nTO\n`a;b`", "savepoint", ("rollback", "a;b")),
    ("RELEASE SAVEPOINT `r s`", "savepoint", ("release", "r s")),
    ("release savepoint R;", "savepoint", ("release", "R")),
    # savepoint statements MySQL refuses as syntax errors: answered as such, never run as something else
    ("SAVEPOINT", "savepoint", ("set", None)),
    ("SAVEPOINT a b", "savepoint", ("set", None)),
    ("SAVEPOINT 123", "savepoint", ("set", None)),
    ("SAVEPOINT ``", "savepoint", ("set", None)),
    ("SAVEPOINT a;;", "savepoint", ("set", None)),
    ("SAVEPOINT 'a'", "savepoint", ("set", None)),
    ("ROLLBACK TO", "savepoint", ("rollback", None)),
    ("SAVEPOINT /* open", None, None),  # a comment that does not end: not read here
    # not savepoint statements
    ("ROLLBACK", "rollback", None),
    ("rollback", "rollback", None),
    ("ROLLBACK WORK", "rollback", None),
    ("ROLLBACK AND NO CHAIN", "rollback", None),
    ("COMMIT", "commit", None),
    ("BEGIN", "begin", None),
    ("begin work", "begin", None),
    ("START TRANSACTION READ ONLY", "begin", None),
    ("COMMIT /* c */", "commit", None),
    ("/* c */ COMMIT;", "commit", None),
    ("COMMIT -- c\n", "commit", None),
    ("ROLLBACK # c", "rollback", None),
    ("BEGIN /* c */", "begin", None),
    ("START TRANSACTION /* c; */ READ ONLY", "begin", None),
    ("COMMIT --x", None, None),  # `--` without a blank after it starts no comment
    ("COMMIT /*! AND CHAIN */", None, None),  # an executable comment is SQL: not read here
    ("RELEASE a", None, None),
    ("SELECT 'SAVEPOINT a'", None, None),
    ("SAVEPOINTS a", None, None),
    ("INSERT INTO t VALUES (1) -- ROLLBACK TO a", None, None),
    ("SELECT '/* x */ COMMIT' -- y", None, None),
]


@pytest.mark.parametrize(("sql", "bare"), [
    ("COMMIT /* c */", "COMMIT  "),
    ("SELECT '/* not a comment */', \"-- nor this\", `# nor this` -- but this\n", \
     "SELECT '/* not a comment */', \"-- nor this\", `# nor this`  "),
    ("SELECT 'it''s', 'a\\' /* in the string */ b'", "SELECT 'it''s', 'a\\' /* in the string */ b'"),
    ("SELECT 'a\\\\' /* c */", "SELECT 'a\\\\'  "),
    ("SELECT 1 /*!50000 + 1 */", "SELECT 1 /*!50000 + 1 */"),
])
def test_without_comments(sql: str, bare: str) -> None:
    assert without_comments(sql) == bare


@pytest.mark.parametrize(("sql", "kind", "savepoint"), CASES)
def test_classification(sql: str, kind: str | None, savepoint: tuple[str, str | None] | None) -> None:
    stmt = classify_session_statement(sql)
    assert (stmt.kind if stmt is not None else None) == kind
    assert parse_savepoint(sql) == (Savepoint(*savepoint) if savepoint is not None else None)


@pytest.mark.parametrize(("sql", "kind", "savepoint"), CASES)
def test_both_engines_read_a_text_alike(sql: str, kind: str | None, savepoint: tuple[str, str | None] | None) -> None:
    """The fast path answers a transaction statement itself only when it is BEGIN, COMMIT or ROLLBACK exactly
    (`fastlocal.local_transaction`); that is the statement the session's coroutine reads it as too, and a savepoint
    statement is never one of them."""
    verb = VERBS.get(sql.upper()) if plain_statement_uncached(sql) is TRANSACTION else None
    if verb is not None:
        assert verb == kind
    if savepoint is not None:
        assert verb is None


@pytest.mark.parametrize("name", ["sp8", "sp x7", "a`b", "``", "select", "Sp X7", "café"])
def test_a_quoted_name_reads_back_as_itself(name: str) -> None:
    for verb in ("set", "rollback", "release"):
        sp = Savepoint(verb, name)
        assert parse_savepoint(sp.sql()) == sp
    assert parse_savepoint(f"SAVEPOINT {quote(name)}") == Savepoint("set", name)


def test_names_compare_case_insensitively() -> None:
    assert key("Sp X7") == key("sP x7") == key("sp x7")
    assert parse_savepoint("SAVEPOINT `ABC`") is not None
    assert Savepoint("set", "ABC").key == Savepoint("rollback", "abc").key
