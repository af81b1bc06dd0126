"""The encrypt rewrite, case by case as ShardingSphere 5.5.2's rewrite tests state it (test/it/rewriter,
scenario/encrypt, config query-with-cipher.yaml: its fixture encryptors write `encrypt_`, `assisted_query_` and
`like_query_` before the value), plus the real AES and LIKE encryptors of its e2e scenario, and what is refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest
from sqlglot import exp

from routing.config import load_yaml
from routing.encrypt.algorithms import ENCRYPTOR_TYPES
from routing.encrypt.rewrite import _RECIPES, MissingColumns, rewrite_encrypted
from routing.encrypt.rule import load_encrypt_rule
from routing.errors import RoutingError


@dataclass(frozen=True, eq=False)
class _Prefix:
    """ShardingSphere's REWRITE.*.FIXTURE encryptors: the value with a prefix."""

    props: Mapping[str, str]
    key: str = ""
    type: str = ""
    decrypts: bool = True
    equality: bool = True
    like: bool = True

    @property
    def prefix(self) -> str:
        return {"REWRITE.NORMAL.FIXTURE": "encrypt_", "REWRITE.ASSISTED_QUERY.FIXTURE": "assisted_query_"}.get(
            self.type, "like_query_"
        )

    def encrypt(self, value: object) -> str | None:
        return None if value is None else self.prefix + str(value)

    def decrypt(self, value: str) -> str:
        return value.removeprefix(self.prefix)


TYPES = {
    **ENCRYPTOR_TYPES,
    "REWRITE.NORMAL.FIXTURE": _Prefix,
    "REWRITE.ASSISTED_QUERY.FIXTURE": _Prefix,
    "REWRITE.LIKE_QUERY.FIXTURE": _Prefix,
}

ACCOUNT = """
        certificate_number:
          cipher: {name: cipher_certificate_number, encryptorName: normal}
          assistedQuery: {name: assisted_query_certificate_number, encryptorName: assisted}
          likeQuery: {name: like_query_certificate_number, encryptorName: like}
        password:
          cipher: {name: cipher_password, encryptorName: normal}
          assistedQuery: {name: assisted_query_password, encryptorName: assisted}
          likeQuery: {name: like_query_password, encryptorName: like}
        amount:
          cipher: {name: cipher_amount, encryptorName: normal}
"""
RULE = load_encrypt_rule(
    load_yaml(f"""
- !ENCRYPT
  tables:
    t_account:
      columns:{ACCOUNT}
    t_account_bak:
      columns:{ACCOUNT}
    t_account_detail:
      columns:{ACCOUNT}
    t_user:
      columns:
        user_name:
          cipher: {{name: user_name_cipher, encryptorName: aes}}
          likeQuery: {{name: user_name_like, encryptorName: it_like}}
        password:
          cipher: {{name: password_cipher, encryptorName: aes}}
  encryptors:
    normal: {{type: REWRITE.NORMAL.FIXTURE}}
    assisted: {{type: REWRITE.ASSISTED_QUERY.FIXTURE}}
    like: {{type: REWRITE.LIKE_QUERY.FIXTURE}}
    aes: {{type: AES, props: {{aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}}}
    it_like: {{type: IT.ENCRYPT.LIKE.FIXTURE, props: {{mask: 4093}}}}
""")[0],
    types=TYPES,
)

ACCOUNT_COLUMNS = [
    "account_id", "cipher_certificate_number", "assisted_query_certificate_number", "like_query_certificate_number",
    "cipher_password", "assisted_query_password", "like_query_password", "cipher_amount",
]  # fmt: skip
COLUMNS = {"t_account": ACCOUNT_COLUMNS, "t_account_bak": ACCOUNT_COLUMNS, "t_order": ["order_id", "user_id"],
           "t_user": ["user_id", "user_name_cipher", "user_name_like", "password_cipher"]}  # fmt: skip


def _rewrite(sql: str, params: list | None = None):
    return rewrite_encrypted(sql, RULE, params=params, columns_of=lambda t: COLUMNS.get(t.lower()))


# (id, input, its parameters, expected output, expected parameters); the ids are ShardingSphere's where the case is
# one of its rewrite assertions
CASES = [
    ("select_for_parameters",
     "SELECT account_id, password, amount AS a, status AS s FROM t_account WHERE account_id = ? AND password = ? "
     "AND password like ? AND amount = ? AND status = ?", [1, "aaa", "aaa", 1000, "OK"],
     "SELECT account_id, cipher_password AS password, cipher_amount AS a, status AS s FROM t_account WHERE "
     "account_id = ? AND assisted_query_password = ? AND like_query_password like ? AND cipher_amount = ? AND "
     "status = ?", [1, "assisted_query_aaa", "like_query_aaa", "encrypt_1000", "OK"]),
    ("select_for_literals",
     "SELECT account_id, password, amount AS a, status AS s FROM t_account WHERE account_id = 1 AND password = 'aaa' "
     "AND password like 'aaa' AND amount = 1000 AND status = 'OK'", None,
     "SELECT account_id, cipher_password AS password, cipher_amount AS a, status AS s FROM t_account WHERE "
     "account_id = 1 AND assisted_query_password = 'assisted_query_aaa' AND like_query_password like "
     "'like_query_aaa' AND cipher_amount = 'encrypt_1000' AND status = 'OK'", None),
    ("select_plain_for_literals",
     "SELECT a.account_id, a.password, a.amount AS a, a.status AS s FROM t_account_bak AS a WHERE a.account_id = 1 "
     "AND a.password = 'aaa' AND a.password like 'aaa' AND a.amount = 1000 AND a.status = 'OK'", None,
     "SELECT a.account_id, a.cipher_password AS password, a.cipher_amount AS a, a.status AS s FROM t_account_bak AS a "
     "WHERE a.account_id = 1 AND a.assisted_query_password = 'assisted_query_aaa' AND a.like_query_password like "
     "'like_query_aaa' AND a.cipher_amount = 'encrypt_1000' AND a.status = 'OK'", None),
    ("select_plain_for_parameters_with_in_has_no_left_space",
     "SELECT a.account_id, a.password, a.amount AS a, a.status AS s FROM t_account_bak AS a WHERE a.password in(?, ?) "
     "AND a.amount in (?, ?)", ["aaa", "aaa", 1000, 1000],
     "SELECT a.account_id, a.cipher_password AS password, a.cipher_amount AS a, a.status AS s FROM t_account_bak AS a "
     "WHERE a.assisted_query_password in(?, ?) AND a.cipher_amount in (?, ?)",
     ["assisted_query_aaa", "assisted_query_aaa", "encrypt_1000", "encrypt_1000"]),
    ("select_where_with_predicate_with_in_expr_for_literals",
     "SELECT a.account_id FROM t_account_bak AS a WHERE a.amount in ('1000', '2000')", None,
     "SELECT a.account_id FROM t_account_bak AS a WHERE a.cipher_amount in ('encrypt_1000', 'encrypt_2000')", None),
    ("select_for_parameters_or_operator",
     "SELECT account_id, password FROM t_account WHERE account_id = ? AND password = ? || password = ?",
     [1, "abc", "def"],
     "SELECT account_id, cipher_password AS password FROM t_account WHERE account_id = ? AND assisted_query_password "
     "= ? || assisted_query_password = ?", [1, "assisted_query_abc", "assisted_query_def"]),
    ("select_with_unqualified_shorthand_for_cipher", "SELECT * FROM t_account_bak", None,
     "SELECT t_account_bak.`account_id`, t_account_bak.`cipher_certificate_number` AS `certificate_number`, "
     "t_account_bak.`cipher_password` AS `password`, t_account_bak.`cipher_amount` AS `amount` FROM t_account_bak",
     None),
    ("select_with_mix_qualified_shorthand_and_other_projection", "SELECT a.*, account_id, 1+1 FROM t_account a", None,
     "SELECT a.`account_id`, a.`cipher_certificate_number` AS `certificate_number`, a.`cipher_password` AS "
     "`password`, a.`cipher_amount` AS `amount`, account_id, 1+1 FROM t_account a", None),
    ("select_with_unqualified_shorthand_for_parameters",
     "SELECT * FROM t_account WHERE certificate_number = ? AND certificate_number LIKE ?", [1, 1],
     "SELECT t_account.`account_id`, t_account.`cipher_certificate_number` AS `certificate_number`, "
     "t_account.`cipher_password` AS `password`, t_account.`cipher_amount` AS `amount` FROM t_account WHERE "
     "assisted_query_certificate_number = ? AND like_query_certificate_number LIKE ?",
     ["assisted_query_1", "like_query_1"]),
    ("select_join_on_encrypted_columns",
     "SELECT a.password from t_account a, t_account_bak b where a.certificate_number = b.certificate_number", None,
     "SELECT a.cipher_password AS password from t_account a, t_account_bak b where "
     "a.assisted_query_certificate_number = b.assisted_query_certificate_number", None),
    ("select_star_over_a_join_with_a_plain_table",
     "SELECT * FROM t_user u JOIN t_order o ON o.user_id = u.user_id WHERE u.password = 'x'", None,
     "SELECT u.`user_id`, u.`user_name_cipher` AS `user_name`, u.`password_cipher` AS `password`, o.`order_id`, "
     "o.`user_id` FROM t_user u JOIN t_order o ON o.user_id = u.user_id WHERE u.password_cipher = "
     "'CDP0japQ5a84ZdRG6WnFsg=='", None),
    ("delete_for_parameters",
     "DELETE FROM t_account WHERE account_id = ? AND password = ? AND password like ? AND amount = ? AND status = ?",
     [1, "aaa", "aaa", 1000, "OK"],
     "DELETE FROM t_account WHERE account_id = ? AND assisted_query_password = ? AND like_query_password like ? AND "
     "cipher_amount = ? AND status = ?", [1, "assisted_query_aaa", "like_query_aaa", "encrypt_1000", "OK"]),
    ("mixed_insert_values_with_columns_and_configuration_for_different_sequence_for_literals",
     "INSERT INTO t_account(password, certificate_number, account_id, amount, status) VALUES ('aaa', ?, 1, 1000, "
     "'OK'), ('bbb', '222X', 2, 2000, 'OK')", ["111X"],
     "INSERT INTO t_account(cipher_password, assisted_query_password, like_query_password, cipher_certificate_number, "
     "assisted_query_certificate_number, like_query_certificate_number, account_id, cipher_amount, status) VALUES "
     "('encrypt_aaa', 'assisted_query_aaa', 'like_query_aaa', ?, ?, ?, 1, 'encrypt_1000', 'OK'), ('encrypt_bbb', "
     "'assisted_query_bbb', 'like_query_bbb', 'encrypt_222X', 'assisted_query_222X', 'like_query_222X', 2, "
     "'encrypt_2000', 'OK')", ["encrypt_111X", "assisted_query_111X", "like_query_111X"]),
    ("insert_null_and_negative_values",
     "INSERT INTO t_account (account_id, password, amount) VALUES (1, NULL, -5)", None,
     "INSERT INTO t_account (account_id, cipher_password, assisted_query_password, like_query_password, "
     "cipher_amount) VALUES (1, NULL, NULL, NULL, 'encrypt_-5')", None),
    ("insert_on_duplicate_key_update_values",
     "INSERT INTO t_account(account_id, certificate_number) VALUES (1, '111X') ON DUPLICATE KEY UPDATE "
     "certificate_number = VALUES(certificate_number)", None,
     "INSERT INTO t_account(account_id, cipher_certificate_number, assisted_query_certificate_number, "
     "like_query_certificate_number) VALUES (1, 'encrypt_111X', 'assisted_query_111X', 'like_query_111X') ON "
     "DUPLICATE KEY UPDATE cipher_certificate_number = VALUES(cipher_certificate_number), "
     "assisted_query_certificate_number = VALUES(assisted_query_certificate_number), like_query_certificate_number = "
     "VALUES(like_query_certificate_number)", None),
    ("update_for_parameters",
     "UPDATE t_account SET account_id = ?, certificate_number = ?, password = ?, amount = ?, status = ? WHERE "
     "account_id = ? AND certificate_number = ? AND password = ? AND password like ? AND amount = ? AND status = ?",
     [1, "111X", "aaa", 1000, "OK", 1, "111X", "aaa", "aaa", 1000, "OK"],
     "UPDATE t_account SET account_id = ?, cipher_certificate_number = ?, assisted_query_certificate_number = ?, "
     "like_query_certificate_number = ?, cipher_password = ?, assisted_query_password = ?, like_query_password = ?, "
     "cipher_amount = ?, status = ? WHERE account_id = ? AND assisted_query_certificate_number = ? AND "
     "assisted_query_password = ? AND like_query_password like ? AND cipher_amount = ? AND status = ?",
     [1, "encrypt_111X", "assisted_query_111X", "like_query_111X", "encrypt_aaa", "assisted_query_aaa",
      "like_query_aaa", "encrypt_1000", "OK", 1, "assisted_query_111X", "assisted_query_aaa", "like_query_aaa",
      "encrypt_1000", "OK"]),
    ("update_null_to_clear_plain_where_is_null",
     "UPDATE t_account_bak SET certificate_number = NULL WHERE certificate_number IS NULL", None,
     "UPDATE t_account_bak SET cipher_certificate_number = NULL, assisted_query_certificate_number = NULL, "
     "like_query_certificate_number = NULL WHERE assisted_query_certificate_number IS NULL", None),
    ("update_blank_to_clear_plain_without_skip_sql_rewrite_sql_hint",
     "UPDATE t_account_bak SET certificate_number = '', status = 'OK'", None,
     "UPDATE t_account_bak SET cipher_certificate_number = 'encrypt_', assisted_query_certificate_number = "
     "'assisted_query_', like_query_certificate_number = 'like_query_', status = 'OK'", None),
    ("insert_set_for_parameters", "INSERT INTO t_account SET account_id = ?, password = ?", [1, "p"],
     "INSERT INTO t_account SET account_id = ?, cipher_password = ?, assisted_query_password = ?, "
     "like_query_password = ?", [1, "encrypt_p", "assisted_query_p", "like_query_p"]),
    ("update_with_join",
     "UPDATE t_account a JOIN t_account_bak b ON a.account_id = b.account_id SET a.amount = 'x' WHERE b.password = 'y'",
     None,
     "UPDATE t_account a JOIN t_account_bak b ON a.account_id = b.account_id SET a.cipher_amount = 'encrypt_x' WHERE "
     "b.assisted_query_password = 'assisted_query_y'", None),
    ("delete_by_alias", "DELETE a FROM t_account a WHERE a.password = 'q'", None,
     "DELETE a FROM t_account a WHERE a.assisted_query_password = 'assisted_query_q'", None),
    ("select_where_with_cipher_column_like_concat_for_parameters",
     "SELECT a.account_id FROM t_account_bak a WHERE a.account_id = 1 AND a.certificate_number like "
     "concat ('%', concat(?, '%'))", ["abc"],
     "SELECT a.account_id FROM t_account_bak a WHERE a.account_id = 1 AND a.like_query_certificate_number like "
     "concat ('like_query_%', concat(?, 'like_query_%'))", ["like_query_abc"]),
    ("select_projection_and_where_with_subquery",
     "SELECT u.password, (SELECT o.amount FROM t_account_bak o WHERE o.certificate_number=u.certificate_number) "
     "amount FROM t_account u WHERE u.password = ?", ["1"],
     "SELECT u.cipher_password AS password, (SELECT o.cipher_amount FROM t_account_bak o WHERE "
     "o.assisted_query_certificate_number=u.assisted_query_certificate_number) amount FROM t_account u WHERE "
     "u.assisted_query_password = ?", ["assisted_query_1"]),
    ("select_where_equal_and_in_subquery_of_the_same_encryptor",
     "SELECT user_id FROM t_user WHERE password = (SELECT DISTINCT password FROM t_user WHERE user_id = 1) OR "
     "user_name IN (SELECT password FROM t_user)", None,
     "SELECT user_id FROM t_user WHERE password_cipher = (SELECT DISTINCT password_cipher FROM t_user WHERE "
     "user_id = 1) OR user_name_cipher IN (SELECT password_cipher FROM t_user)", None),
    ("select_from_derived_table_by_alias", "SELECT d.p FROM (SELECT password AS p FROM t_account) d", None,
     "SELECT d.cipher_password AS p FROM (SELECT cipher_password AS p, cipher_password, assisted_query_password, "
     "like_query_password FROM t_account) d", None),
    ("select_with_subquery_in_from_and_where",
     "SELECT u.amount, u.password, o.certificate_number FROM (SELECT certificate_number FROM t_account) o, "
     "t_account u WHERE o.certificate_number=u.certificate_number AND u.password=?", ["1"],
     "SELECT u.cipher_amount AS amount, u.cipher_password AS password, o.cipher_certificate_number AS "
     "certificate_number FROM (SELECT cipher_certificate_number AS certificate_number, cipher_certificate_number, "
     "assisted_query_certificate_number, like_query_certificate_number FROM t_account) o, t_account u WHERE "
     "o.assisted_query_certificate_number=u.assisted_query_certificate_number AND u.assisted_query_password=?",
     ["assisted_query_1"]),
    ("select_star_over_a_derived_star",
     "SELECT * FROM (SELECT * FROM t_user) d WHERE d.user_name LIKE 'zh%'", None,
     "SELECT d.`user_id`, d.`user_name`, d.`password` FROM (SELECT t_user.`user_id`, t_user.`user_name_cipher` AS "
     "`user_name`, t_user.`user_name_cipher`, t_user.`user_name_like`, t_user.`password_cipher` AS `password`, "
     "t_user.`password_cipher` FROM t_user) d WHERE d.user_name_like LIKE 'yi%'", None),
    ("select_distinct_cipher_field_with_parentheses", "SELECT distinct (amount) FROM t_account", None,
     "SELECT distinct (cipher_amount) AS amount FROM t_account", None),
    ("select_with_groupby_deterministic_cipher",
     "SELECT password, COUNT(*) FROM t_account GROUP BY password ORDER BY NULL", None,
     "SELECT cipher_password AS password, COUNT(*) FROM t_account GROUP BY cipher_password ORDER BY NULL", None),
    ("select_with_exists_sub_query",
     "SELECT out_table.amount FROM t_account out_table WHERE EXISTS (SELECT inner_table.amount FROM t_account "
     "inner_table)", None,
     "SELECT out_table.cipher_amount AS amount FROM t_account out_table WHERE EXISTS (SELECT "
     "inner_table.cipher_amount FROM t_account inner_table)", None),
    ("select_not_nested_subquery_in_predicate_left_and_right_equal_condition",
     "SELECT u.amount FROM t_account_bak u WHERE (SELECT certificate_number FROM t_account WHERE password=?)="
     "(SELECT certificate_number FROM t_account_bak WHERE password=?)", ["1", "2"],
     "SELECT u.cipher_amount AS amount FROM t_account_bak u WHERE (SELECT assisted_query_certificate_number FROM "
     "t_account WHERE assisted_query_password=?)=(SELECT assisted_query_certificate_number FROM t_account_bak WHERE "
     "assisted_query_password=?)", ["assisted_query_1", "assisted_query_2"]),
    ("insert_values_without_columns_for_literals",
     "INSERT INTO t_account VALUES (1, 'cert', 'pw', 10), (2, ?, NULL, -1)", ["c2"],
     "INSERT INTO t_account (`account_id`, `cipher_certificate_number`, `assisted_query_certificate_number`, "
     "`like_query_certificate_number`, `cipher_password`, `assisted_query_password`, `like_query_password`, "
     "`cipher_amount`) VALUES (1, 'encrypt_cert', 'assisted_query_cert', 'like_query_cert', 'encrypt_pw', "
     "'assisted_query_pw', 'like_query_pw', 'encrypt_10'), (2, ?, ?, ?, NULL, NULL, NULL, 'encrypt_-1')",
     ["encrypt_c2", "assisted_query_c2", "like_query_c2"]),
    ("insert_select_account_bak_for_literal",
     "INSERT INTO t_account_detail (account_id, certificate_number, password, amount) SELECT 40, "
     "a.certificate_number, password, amount FROM t_account a WHERE a.certificate_number = 'cert1'", None,
     "INSERT INTO t_account_detail (account_id, cipher_certificate_number, assisted_query_certificate_number, "
     "like_query_certificate_number, cipher_password, assisted_query_password, like_query_password, cipher_amount) "
     "SELECT 40, a.cipher_certificate_number, a.assisted_query_certificate_number, a.like_query_certificate_number, "
     "cipher_password, assisted_query_password, like_query_password, cipher_amount FROM t_account a WHERE "
     "a.assisted_query_certificate_number = 'assisted_query_cert1'", None),
    # ON DUPLICATE KEY UPDATE col = VALUES(other): each physical column from the one of `other` encrypted alike
    ("insert_on_duplicate_key_update_values_of_another_column",
     "INSERT INTO t_account (account_id, certificate_number) VALUES (1, 'c') ON DUPLICATE KEY UPDATE password = "
     "VALUES(certificate_number), amount = VALUES(certificate_number)", None,
     "INSERT INTO t_account (account_id, cipher_certificate_number, assisted_query_certificate_number, "
     "like_query_certificate_number) VALUES (1, 'encrypt_c', 'assisted_query_c', 'like_query_c') ON DUPLICATE KEY "
     "UPDATE cipher_password = VALUES(cipher_certificate_number), assisted_query_password = "
     "VALUES(assisted_query_certificate_number), like_query_password = VALUES(like_query_certificate_number), "
     "cipher_amount = VALUES(cipher_certificate_number)", None),
    # a REPLACE after a line comment is read as one (sqlglot alone reads it as a command: it went out unrewritten)
    ("replace_after_a_line_comment", "-- note\nREPLACE INTO t_account (account_id, amount) VALUES (1, 5)", None,
     "-- note\nREPLACE INTO t_account (account_id, cipher_amount) VALUES (1, 'encrypt_5')", None),
    ("replace_after_a_hash_comment", "# note\n/* and */ REPLACE t_account SET account_id = 1, amount = ?", [5],
     "# note\n/* and */ REPLACE t_account SET account_id = 1, cipher_amount = ?", ["encrypt_5"]),
    ("e2e_aes_and_like",
     "SELECT user_id, user_name FROM t_user WHERE user_name = 'zhangsan' OR user_name LIKE 'zhang%'", None,
     "SELECT user_id, user_name_cipher AS user_name FROM t_user WHERE user_name_cipher = 'sVq8Lmm+j6bZE5EKSilJEQ==' "
     "OR user_name_like LIKE 'yi`mh%'", None),
    ("e2e_insert", "INSERT INTO t_user (user_id, user_name, password) VALUES (10, 'zhangsan', '111111')", None,
     "INSERT INTO t_user (user_id, user_name_cipher, user_name_like, password_cipher) VALUES (10, "
     "'sVq8Lmm+j6bZE5EKSilJEQ==', 'yi`mht`m', 'aQol0b6th65d0aXe+zFPsQ==')", None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "sql", "params", "expected", "expected_params"), CASES, ids=[c[0] for c in CASES])
def test_rewrites_as_shardingsphere(case: str, sql: str, params, expected: str, expected_params) -> None:
    _RECIPES.clear()
    for _ in range(2):  # read with sqlglot, then from the shape's kept recipe
        out = _rewrite(sql, params)
        assert out is not None
        assert out.sql == expected
        assert out.params == expected_params


@pytest.mark.parametrize(("first", "then", "expected"), [
    ("SELECT * FROM t_user WHERE password = 'x' AND user_id = 1",
     "SELECT * FROM t_user WHERE password = 'zhangsan' AND user_id = 22",
     "SELECT t_user.`user_id`, t_user.`user_name_cipher` AS `user_name`, t_user.`password_cipher` AS `password` FROM "
     "t_user WHERE password_cipher = 'sVq8Lmm+j6bZE5EKSilJEQ==' AND user_id = 22"),
    ("INSERT INTO t_account (account_id, amount, password) VALUES (1, -5, 'a'), (2, 3, NULL)",
     "INSERT INTO t_account (account_id, amount, password) VALUES (100, -12345, 'it''s'), (2000, 7, NULL)",
     "INSERT INTO t_account (account_id, cipher_amount, cipher_password, assisted_query_password, "
     "like_query_password) VALUES (100, 'encrypt_-12345', 'encrypt_it''s', 'assisted_query_it''s', "
     "'like_query_it''s'), (2000, 'encrypt_7', NULL, NULL, NULL)"),
    ("UPDATE t_account SET password = 'a' WHERE amount IN (1, 2)",
     "UPDATE t_account SET password = 'longer value' WHERE amount IN ('x', 22222)",
     "UPDATE t_account SET cipher_password = 'encrypt_longer value', assisted_query_password = "
     "'assisted_query_longer value', like_query_password = 'like_query_longer value' WHERE cipher_amount IN "
     "('encrypt_x', 'encrypt_22222')"),
])  # fmt: skip
def test_a_kept_recipe_encrypts_the_new_values(first: str, then: str, expected: str) -> None:
    _RECIPES.clear()
    assert _rewrite(first) is not None
    assert len(_RECIPES) == 1
    out = _rewrite(then)
    assert len(_RECIPES) == 1 and out is not None and out.sql == expected


def test_positions_in_order_by_are_read_every_time() -> None:
    _RECIPES.clear()
    assert _rewrite("SELECT account_id, password FROM t_account ORDER BY 1") is not None
    with pytest.raises(RoutingError):
        _rewrite("SELECT account_id, password FROM t_account ORDER BY 2")


def test_a_star_is_expanded_again_when_its_table_changed() -> None:
    _RECIPES.clear()
    columns = {"t_order": ["order_id"], "t_user": ["user_id", "password_cipher"]}
    out = rewrite_encrypted("SELECT * FROM t_user", RULE, columns_of=lambda t: columns.get(t))
    assert out is not None and out.decrypt is not None and len(out.decrypt) == 2
    columns["t_user"] = ["user_id", "password_cipher", "extra"]
    out = rewrite_encrypted("SELECT * FROM t_user", RULE, columns_of=lambda t: columns.get(t))
    assert out is not None and out.decrypt is not None and len(out.decrypt) == 3 and "`extra`" in out.sql


@pytest.mark.parametrize(("sql", "decrypted"), [
    ("SELECT account_id, password, amount AS a, status FROM t_account", [None, "normal", "normal", None]),
    ("SELECT * FROM t_account", [None, "normal", "normal", "normal"]),
    ("SELECT account_id FROM t_account WHERE password = 'x'", None),
    ("SELECT * FROM t_order", None),
    ("SELECT user_name FROM t_user UNION ALL SELECT password FROM t_user", ["aes"]),
])  # fmt: skip
def test_which_result_columns_are_decrypted(sql: str, decrypted: list | None) -> None:
    out = _rewrite(sql)
    plan = out.decrypt if out is not None else None
    if decrypted is None:
        assert plan is None
        return
    assert plan is not None
    assert [None if d is None else ("aes" if d.type == "AES" else "normal") for d in plan] == decrypted


def test_a_skip_sql_rewrite_hint_leaves_the_statement_as_written() -> None:
    sql = "/* SHARDINGSPHERE_HINT: SKIP_SQL_REWRITE=true */ UPDATE t_account_bak SET certificate_number = ''"
    assert _rewrite(sql) is None
    assert _rewrite(sql.replace("true", "false")) is not None


@pytest.mark.parametrize("sql", [
    "SELECT 1", "SELECT * FROM t_order WHERE user_id = 1", "INSERT INTO t_order (order_id) VALUES (1)",
    "SELECT * FROM t_users",
])  # fmt: skip
def test_statements_without_encrypted_tables_are_left_alone(sql: str) -> None:
    assert _rewrite(sql) is None


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT * FROM t_account ORDER BY password", "t_account.password cannot be used in ORDER BY"),
    ("SELECT password AS p FROM t_account ORDER BY p", "ORDER BY p"),
    ("SELECT account_id, password FROM t_account ORDER BY 2", "ORDER BY 2"),
    ("SELECT user_id FROM t_account GROUP BY amount + 1", "the expression"),
    ("SELECT password, COUNT(*) FROM t_account GROUP BY password", "GROUP BY without ORDER BY"),
    ("SELECT password AS p, COUNT(*) FROM t_account GROUP BY p", "GROUP BY p names an encrypted column"),
    ("SELECT password FROM t_account HAVING password = 'a'", "cannot be used in HAVING"),
    ("SELECT * FROM t_account WHERE amount > 10", "a range condition"),
    ("SELECT * FROM t_account WHERE amount BETWEEN 1 AND 10", "a range condition"),
    ("SELECT UPPER(password) FROM t_account", "the function UPPER()"),
    ("SELECT * FROM t_account WHERE amount LIKE 'a%'", "likeQuery"),
    ("SELECT * FROM t_user WHERE password = account_id", "plain column"),
    ("INSERT INTO t_account (account_id, password) SELECT 1, 'x'", "INSERT ... SELECT"),
    ("INSERT INTO t_account (account_id, password) SELECT user_id, password FROM t_user", "INSERT ... SELECT"),
    ("INSERT INTO t_account (account_id, password) VALUES (1, CONCAT('a', 'b'))", "expression"),
    ("UPDATE t_account SET amount = amount + 1", "SET amount"),
    ("INSERT INTO t_account (account_id, amount) VALUES (1, 2) ON DUPLICATE KEY UPDATE password = VALUES(amount)",
     "t_account.password cannot be used in SET password = VALUES(amount)"),  # (no assisted or LIKE query column)
    ("INSERT INTO t_account (account_id, amount) VALUES (1, 2) ON DUPLICATE KEY UPDATE amount = VALUES(status)",
     "t_account.amount cannot be used in SET amount = VALUES(status)"),  # (a plaintext)
    ("INSERT INTO t_account (account_id, amount) VALUES (1, 2) ON DUPLICATE KEY UPDATE status = VALUES(amount)",
     "t_account.amount cannot be used in VALUES(amount) assigned to another column"),
    ("SELECT * FROM (SELECT account_id, password, amount + 1 FROM t_account) d", "cannot all name"),
    ("SELECT * FROM (SELECT amount + 1 AS a FROM t_account) d", "the expression"),
    ("SELECT * FROM t_account WHERE password = (SELECT password FROM t_user)", "comparison with a subquery"),
    ("SELECT * FROM t_account WHERE password IN (SELECT account_id FROM t_account)", "IN (SELECT ...)"),
    ("SELECT password FROM t_account UNION SELECT status FROM t_account", "UNION"),
    ("SELECT * FROM t_order WHERE user_id IN (SELECT account_id FROM t_account WHERE password > 'a')", "range"),
])  # fmt: skip
def test_what_cannot_be_rewritten_is_refused_naming_the_column(sql: str, words: str) -> None:
    with pytest.raises(RoutingError) as info:
        _rewrite(sql)
    assert info.value.errno == 1235 and words in str(info.value), str(info.value)


@pytest.mark.parametrize("tree", [exp.Command(this="REPLACE", expression=exp.Literal.string("INTO t_account ...")),
                                  exp.Anonymous(this="VALUES")])
def test_a_statement_read_as_no_query_or_write_is_refused_not_sent_as_written(monkeypatch, tree) -> None:
    """sqlglot reads what it does not know as a command (a REPLACE after a line comment was one): nothing of it would
    be rewritten, its plaintext sent on."""
    _RECIPES.clear()
    monkeypatch.setattr("routing.encrypt.rewrite.parse_statement", lambda shape: tree)
    with pytest.raises(RoutingError) as info:
        _rewrite("REPLACE INTO t_account (account_id, amount) VALUES (1, 5)")
    assert info.value.errno == 1235 and "cannot read" in str(info.value)


def test_a_star_over_a_table_of_unknown_columns_asks_for_them() -> None:
    with pytest.raises(MissingColumns) as info:
        rewrite_encrypted("SELECT * FROM t_account", RULE, columns_of=lambda t: None)
    assert info.value.table == "t_account"
