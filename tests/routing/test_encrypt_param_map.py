"""The encrypt rewrite of a prepared statement (``?`` kept): how the rewritten text's placeholders are filled from the
client's parameters (``Encrypted.param_map``, ``physical_params``), so that it runs prepared on the backend with the
values encrypted there. Each case: the client's text, the rewritten text, and for each ``?`` of it the client's
parameter it takes and the encryptor applied (``-``: as it is). Filled with values, it must say what the text path
says: the client's text with its values written in, then rewritten."""

from __future__ import annotations

import datetime
import re
from decimal import Decimal
from typing import Any

import pytest

from routing.encrypt.rewrite import _RECIPES, parameter_text, physical_params, rewrite_encrypted
from routing.interpolate import interpolate
from tests.routing.test_encrypt_rewrite import COLUMNS, RULE

#: the fixture encryptors' types, shortened
_SHORT = {"REWRITE.NORMAL.FIXTURE": "c", "REWRITE.ASSISTED_QUERY.FIXTURE": "a", "REWRITE.LIKE_QUERY.FIXTURE": "l",
          "AES": "aes", "IT.ENCRYPT.LIKE.FIXTURE": "like"}  # fmt: skip


def _map(text: str) -> tuple[tuple[int, str], ...]:
    """``"0 1c 1a"`` -> ((0, "-"), (1, "c"), (1, "a"))."""
    found = (re.fullmatch(r"(\d+)(\w*)", item) for item in text.split())
    return tuple((int(m.group(1)), m.group(2) or "-") for m in found if m is not None)


# (id, client's text, rewritten text, its placeholders' map, values for the cross-checks)
CASES = [
    ("eq_assisted", "SELECT account_id, password FROM t_account WHERE password = ?",
     "SELECT account_id, cipher_password AS password FROM t_account WHERE assisted_query_password = ?",
     "0a", ["aaa"]),
    ("eq_cipher_only", "SELECT account_id FROM t_account WHERE amount = ?",
     "SELECT account_id FROM t_account WHERE cipher_amount = ?", "0c", [1000]),
    ("eq_aes_cipher", "SELECT user_id FROM t_user WHERE password = ?",
     "SELECT user_id FROM t_user WHERE password_cipher = ?", "0aes", ["zhangsan"]),
    ("eq_reversed", "SELECT account_id FROM t_account WHERE ? = password",
     "SELECT account_id FROM t_account WHERE ? = assisted_query_password", "0a", ["x"]),
    ("neq", "SELECT account_id FROM t_account WHERE password <> ?",
     "SELECT account_id FROM t_account WHERE assisted_query_password <> ?", "0a", ["x"]),
    ("nothing_encrypted", "SELECT password FROM t_account WHERE account_id = ?",
     "SELECT cipher_password AS password FROM t_account WHERE account_id = ?", "0", [7]),
    ("in_list", "SELECT account_id FROM t_account WHERE password IN (?, ?, ?)",
     "SELECT account_id FROM t_account WHERE assisted_query_password IN (?, ?, ?)", "0a 1a 2a", ["x", "y", "z"]),
    ("in_with_literal_and_null", "SELECT account_id FROM t_account WHERE password IN ('lit', ?, NULL, ?)",
     "SELECT account_id FROM t_account WHERE assisted_query_password IN ('assisted_query_lit', ?, NULL, ?)",
     "0a 1a", ["x", "y"]),
    ("not_in_and_plain_in", "SELECT account_id FROM t_account WHERE account_id IN (?, ?) AND amount NOT IN (?)",
     "SELECT account_id FROM t_account WHERE account_id IN (?, ?) AND cipher_amount NOT IN (?)",
     "0 1 2c", [1, 2, 3]),
    ("like", "SELECT account_id FROM t_account WHERE password LIKE ?",
     "SELECT account_id FROM t_account WHERE like_query_password LIKE ?", "0l", ["ab%"]),
    ("like_concat", "SELECT account_id FROM t_account WHERE password LIKE CONCAT('%', ?, '%')",
     "SELECT account_id FROM t_account WHERE like_query_password LIKE CONCAT('like_query_%', ?, 'like_query_%')",
     "0l", ["mid"]),
    ("like_real_encryptor", "SELECT user_id FROM t_user WHERE user_name LIKE ? AND user_id > ?",
     "SELECT user_id FROM t_user WHERE user_name_like LIKE ? AND user_id > ?", "0like 1", ["zh%", 3]),
    ("mixed_plain_and_encrypted",
     "SELECT account_id FROM t_account WHERE account_id = ? AND password = ? AND status = ? AND amount IN (?, ?) "
     "LIMIT ?",
     "SELECT account_id FROM t_account WHERE account_id = ? AND assisted_query_password = ? AND status = ? AND "
     "cipher_amount IN (?, ?) LIMIT ?", "0 1a 2 3c 4c 5", [1, "pw", "OK", 10, 20, 5]),
    ("is_null_and_param", "SELECT account_id FROM t_account WHERE password IS NULL OR password = ?",
     "SELECT account_id FROM t_account WHERE assisted_query_password IS NULL OR assisted_query_password = ?",
     "0a", ["x"]),
    ("subquery", "SELECT account_id FROM t_account WHERE account_id IN (SELECT account_id FROM t_account_bak "
     "WHERE password = ?) AND amount = ?",
     "SELECT account_id FROM t_account WHERE account_id IN (SELECT account_id FROM t_account_bak WHERE "
     "assisted_query_password = ?) AND cipher_amount = ?", "0a 1c", ["x", 5]),
    ("insert_one_row", "INSERT INTO t_account (account_id, password, amount) VALUES (?, ?, ?)",
     "INSERT INTO t_account (account_id, cipher_password, assisted_query_password, like_query_password, "
     "cipher_amount) VALUES (?, ?, ?, ?, ?)", "0 1c 1a 1l 2c", [1, "pw", 100]),
    ("insert_rows", "INSERT INTO t_account (account_id, password, amount) VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?)",
     "INSERT INTO t_account (account_id, cipher_password, assisted_query_password, like_query_password, "
     "cipher_amount) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)",
     "0 1c 1a 1l 2c 3 4c 4a 4l 5c 6 7c 7a 7l 8c", [1, "a", 10, 2, None, 20, 3, "c", None]),
    ("insert_literals_between",
     "INSERT INTO t_account (password, account_id, amount) VALUES ('lit', ?, ?), (?, 5, NULL)",
     "INSERT INTO t_account (cipher_password, assisted_query_password, like_query_password, account_id, "
     "cipher_amount) VALUES ('encrypt_lit', 'assisted_query_lit', 'like_query_lit', ?, ?), (?, ?, ?, 5, NULL)",
     "0 1c 2c 2a 2l", [1, 10, "p"]),
    ("insert_set", "INSERT INTO t_account SET account_id = ?, password = ?",
     "INSERT INTO t_account SET account_id = ?, cipher_password = ?, assisted_query_password = ?, "
     "like_query_password = ?", "0 1c 1a 1l", [1, "pw"]),
    ("upsert_param", "INSERT INTO t_account (account_id, password) VALUES (?, ?) ON DUPLICATE KEY UPDATE "
     "password = ?, status = ?",
     "INSERT INTO t_account (account_id, cipher_password, assisted_query_password, like_query_password) VALUES "
     "(?, ?, ?, ?) ON DUPLICATE KEY UPDATE cipher_password = ?, assisted_query_password = ?, like_query_password = "
     "?, status = ?", "0 1c 1a 1l 2c 2a 2l 3", [1, "pw", "new", "OK"]),
    ("upsert_values", "INSERT INTO t_account (account_id, amount) VALUES (?, ?) ON DUPLICATE KEY UPDATE "
     "amount = VALUES(amount)",
     "INSERT INTO t_account (account_id, cipher_amount) VALUES (?, ?) ON DUPLICATE KEY UPDATE cipher_amount = "
     "VALUES(cipher_amount)", "0 1c", [1, 5]),
    ("update_set", "UPDATE t_account SET password = ?, amount = ? WHERE account_id = ?",
     "UPDATE t_account SET cipher_password = ?, assisted_query_password = ?, like_query_password = ?, "
     "cipher_amount = ? WHERE account_id = ?", "0c 0a 0l 1c 2", ["pw", 5, 9]),
    ("update_where_encrypted", "UPDATE t_account SET status = ? WHERE password = ? AND amount IN (?, ?)",
     "UPDATE t_account SET status = ? WHERE assisted_query_password = ? AND cipher_amount IN (?, ?)",
     "0 1a 2c 3c", ["OK", "pw", 1, 2]),
    ("insert_ignore", "INSERT IGNORE INTO t_account (account_id, password) VALUES (?, ?)",
     "INSERT IGNORE INTO t_account (account_id, cipher_password, assisted_query_password, like_query_password) "
     "VALUES (?, ?, ?, ?)", "0 1c 1a 1l", [1, "pw"]),
    ("replace", "REPLACE INTO t_account (account_id, amount) VALUES (?, ?)",
     "REPLACE INTO t_account (account_id, cipher_amount) VALUES (?, ?)", "0 1c", [1, 5]),
    ("delete", "DELETE FROM t_account WHERE password = ? AND account_id = ?",
     "DELETE FROM t_account WHERE assisted_query_password = ? AND account_id = ?", "0a 1", ["pw", 3]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "sql", "expected", "placeholders", "values"), CASES, ids=[c[0] for c in CASES])
def test_the_rewrite_says_how_its_placeholders_are_filled(
    case: str, sql: str, expected: str, placeholders: str, values: list[Any]
) -> None:
    _RECIPES.clear()
    for _ in range(2):  # read with sqlglot, then from the shape's kept recipe
        out = rewrite_encrypted(sql, RULE, columns_of=lambda t: COLUMNS.get(t.lower()))
        assert out is not None and out.sql == expected
        assert out.param_map is not None
        got = tuple((i, "-" if e is None else _SHORT[e.type]) for i, e in out.param_map)
        assert got == _map(placeholders)
        assert out.encrypts_params == any(e is not None for _i, e in out.param_map)


@pytest.mark.parametrize(("case", "sql", "expected", "placeholders", "values"), CASES, ids=[c[0] for c in CASES])
def test_filled_it_says_what_the_text_path_says(
    case: str, sql: str, expected: str, placeholders: str, values: list[Any]
) -> None:
    """The rewrite filled with `physical_params` == the client's text with its values written in, rewritten (how
    the session ran it before), == the rewrite given the values (`params=`)."""
    out = rewrite_encrypted(sql, RULE, columns_of=lambda t: COLUMNS.get(t.lower()))
    assert out is not None and out.param_map is not None
    physical = physical_params(out.param_map, values)
    text_path = rewrite_encrypted(interpolate(sql, values), RULE, columns_of=lambda t: COLUMNS.get(t.lower()))
    assert text_path is not None
    assert interpolate(out.sql, physical) == text_path.sql
    given = rewrite_encrypted(sql, RULE, params=values, columns_of=lambda t: COLUMNS.get(t.lower()))
    assert given is not None and given.sql == out.sql and given.params == physical


@pytest.mark.parametrize(("value", "text"), [
    (None, None),
    ("it's", "it's"),
    (b"abc", "abc"),
    ("王五".encode(), "王五"),
    (42, "42"),
    (-7, "-7"),
    (1.5, "1.5"),
    (1e20, "1e20"),
    (Decimal("12.50"), "12.50"),
    (datetime.date(2017, 8, 9), "2017-08-09"),
    (datetime.datetime(2017, 8, 9, 10, 11, 12), "2017-08-09 10:11:12"),
    (datetime.timedelta(hours=1, minutes=2, seconds=3), "01:02:03"),
])  # fmt: skip
def test_a_parameter_is_encrypted_as_the_text_of_its_literal(value: Any, text: str | None) -> None:
    assert parameter_text(value) == text


@pytest.mark.parametrize(("values", "expected"), [
    (["pw", 5, 9], ["encrypt_pw", "assisted_query_pw", "like_query_pw", "encrypt_5", 9]),
    ([None, None, 9], [None, None, None, None, 9]),  # NULL stays NULL in every physical column
    ([b"bytes", Decimal("1.50"), None], ["encrypt_bytes", "assisted_query_bytes", "like_query_bytes", "encrypt_1.50",
                                         None]),
])  # fmt: skip
def test_physical_params(values: list[Any], expected: list[Any]) -> None:
    out = rewrite_encrypted(
        "UPDATE t_account SET password = ?, amount = ? WHERE account_id = ?", RULE, columns_of=lambda t: None
    )
    assert out is not None and out.param_map is not None
    assert physical_params(out.param_map, values) == expected


@pytest.mark.parametrize(("sql", "reads_columns"), [
    ("SELECT * FROM t_account WHERE password = ?", True),
    ("INSERT INTO t_account VALUES (?, ?, ?, ?, ?)", True),
    ("SELECT account_id FROM t_account WHERE password = ?", False),
])  # fmt: skip
def test_a_rewrite_that_read_a_tables_columns_says_so(sql: str, reads_columns: bool) -> None:
    out = rewrite_encrypted(sql, RULE, columns_of=lambda t: COLUMNS.get(t.lower()))
    assert out is not None and out.reads_columns is reads_columns
