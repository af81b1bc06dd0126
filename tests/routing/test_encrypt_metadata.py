"""An encrypted table's metadata in its logical shape (routing.encrypt.metadata): which statements are about one,
and what their physical answers become. Against real servers: tests/integration/test_encrypt_metadata.py."""

from __future__ import annotations

import pytest
import yaml

from routing.encrypt.metadata import (
    logical_columns,
    logical_create_table,
    logical_schema_columns,
    logical_schema_select,
    table_metadata,
)
from routing.encrypt.rule import load_encrypt_rule

RULE = load_encrypt_rule(
    yaml.safe_load("""
tables:
  t_user:
    columns:
      user_name:
        cipher: {name: user_name_cipher, encryptorName: aes}
        assistedQuery: {name: user_name_assisted, encryptorName: md5}
        likeQuery: {name: user_name_like, encryptorName: like}
      password:
        cipher: {name: pwd_cipher, encryptorName: aes}
  t_card:
    columns:
      number:
        cipher: {name: number_cipher, encryptorName: aes}
        assistedQuery: {name: number_assisted, encryptorName: md5}
encryptors:
  aes: {type: AES, props: {aes-key-value: k, digest-algorithm-name: SHA-1}}
  md5: {type: MD5}
  like: {type: CHAR_DIGEST_LIKE}
""")
)
USER = RULE.tables["t_user"]

# statement -> (kind, statement run on the physical table, LIKE, WHERE), or None: answered as it is
STATEMENTS: list[tuple[str, tuple[str, str, str | None, str | None] | None]] = [
    ("DESCRIBE t_user", ("columns", "SHOW COLUMNS FROM `t_user`", None, None)),
    ("desc `T_USER`;", ("columns", "SHOW COLUMNS FROM `T_USER`", None, None)),
    ("EXPLAIN t_user", ("columns", "SHOW COLUMNS FROM `t_user`", None, None)),
    ("DESC t_user user_name", ("columns", "SHOW COLUMNS FROM `t_user`", "user_name", None)),
    ("DESC t_user `pass``x`", ("columns", "SHOW COLUMNS FROM `t_user`", "pass`x", None)),
    ("DESC t_user 'user\\_%'", ("columns", "SHOW COLUMNS FROM `t_user`", "user\\_%", None)),
    ("DESCRIBE db.t_user", ("columns", "SHOW COLUMNS FROM `t_user`", None, None)),
    ("DESCRIBE other.t_user", None),
    ("SHOW COLUMNS FROM t_user", ("columns", "SHOW COLUMNS FROM `t_user`", None, None)),
    ("SHOW FULL FIELDS IN t_user IN db", ("columns", "SHOW FULL COLUMNS FROM `t_user`", None, None)),
    ("SHOW COLUMNS FROM t_user FROM other", None),
    ("show columns from `db`.`t_user` like 'a''b%'", ("columns", "SHOW COLUMNS FROM `t_user`", "a'b%", None)),
    ("SHOW COLUMNS FROM t_user WHERE Field = 'x' ;", ("columns", "SHOW COLUMNS FROM `t_user`", None, "Field = 'x'")),
    ("SHOW COLUMNS FROM t_user LIKE 'a' extra", None),
    ("SHOW CREATE TABLE t_user", ("create", "SHOW CREATE TABLE `t_user`", None, None)),
    ("SHOW CREATE TABLE `db`.`t_user`", ("create", "SHOW CREATE TABLE `t_user`", None, None)),
    ("DESCRIBE t_plain", None),
    ("SHOW CREATE TABLE t_plain", None),
    ("SHOW INDEX FROM t_user", None),
    ("EXPLAIN SELECT * FROM t_user", None),
    ("DESCRIBE SELECT user_name FROM t_user", None),
    ("EXPLAIN FORMAT=JSON SELECT 1", None),
    ("SELECT * FROM t_user", None),
]


@pytest.mark.parametrize(("sql", "expected"), STATEMENTS, ids=[s for s, _e in STATEMENTS])
def test_table_metadata(sql: str, expected: tuple[str, str, str | None, str | None] | None) -> None:
    got = table_metadata(sql, RULE, "db")
    assert (None if got is None else (got.kind, got.sql, got.like, got.where)) == expected
    assert got is None or got.table is USER


def _row(*values: str | None) -> tuple[bytes | None, ...]:
    return tuple(None if v is None else v.encode() for v in values)


# (LIKE, the logical answer's rows: their names and the physical row each was) over the physical rows of t_user
PHYSICAL_FIELDS = ["id", "user_name_cipher", "user_name_assisted", "user_name_like", "PWD_CIPHER", "note"]
COLUMNS: list[tuple[str | None, list[tuple[str, str]]]] = [
    (None, [("id", "id"), ("user_name", "user_name_cipher"), ("password", "PWD_CIPHER"), ("note", "note")]),
    ("user%", [("user_name", "user_name_cipher")]),
    ("PASS%", [("password", "PWD_CIPHER")]),
    ("%cipher", []),
    ("user\\_name", [("user_name", "user_name_cipher")]),
    ("n_te", [("note", "note")]),
]


@pytest.mark.parametrize(("like", "shown"), COLUMNS, ids=[str(c[0]) for c in COLUMNS])
def test_logical_columns(like: str | None, shown: list[tuple[str, str]]) -> None:
    rows = [_row(f, f"type of {f}") for f in PHYSICAL_FIELDS]
    assert logical_columns(rows, USER, like) == [_row(name, f"type of {was}") for name, was in shown]


def test_logical_schema_columns() -> None:
    labels = ["TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION", "COLUMN_TYPE"]
    rows = [
        _row("db", "t_user", "id", "1", "int"),
        _row("db", "t_user", "user_name_cipher", "2", "varchar(200)"),
        _row("db", "t_user", "user_name_assisted", "3", "varchar(64)"),
        _row("db", "t_user", "user_name_like", "4", "varchar(200)"),
        _row("db", "t_user", "pwd_cipher", "5", "varchar(200)"),
        _row("db", "t_user", "note", "6", "text"),
        _row("db", "t_plain", "user_name_assisted", "2", "int"),  # another table's column of that name
        _row("other", "t_user", "user_name_like", "4", "int"),  # another database's t_user
        _row("information_schema", "COLUMNS", "COLUMN_NAME", "4", "varchar(64)"),
    ]
    assert logical_schema_columns(labels, rows, RULE.tables, "db") == [
        _row("db", "t_user", "id", "1", "int"),
        _row("db", "t_user", "user_name", "2", "varchar(200)"),
        _row("db", "t_user", "password", "3", "varchar(200)"),
        _row("db", "t_user", "note", "4", "text"),
        *rows[6:],
    ]
    # without the columns naming a row's table, nothing can be told: the rows as they are
    assert logical_schema_columns(labels[2:], [r[2:] for r in rows], RULE.tables, "db") == [r[2:] for r in rows]


def _hex(value: str) -> str:
    return "_utf8mb4 X'" + value.encode().hex() + "'"


def test_logical_schema_select() -> None:
    """The select list over information_schema.COLUMNS that renames and renumbers, and the rows left out, for the
    physical table t_user_0 standing for t_user."""
    labels = ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION"]
    rows = [
        _row("def", "phys", "t_user_0", "id", "1"),
        _row("def", "phys", "t_user_0", "user_name_cipher", "2"),
        _row("def", "phys", "t_user_0", "user_name_like", "3"),
        _row("def", "phys", "t_user_0", "PWD_cipher", "4"),
        _row("def", "phys", "t_user_0", "user_name_assisted", "5"),
        _row("def", "phys", "t_user_0", "note", "6"),
    ]
    in_table = f"TABLE_SCHEMA = {_hex('phys')} AND TABLE_NAME = {_hex('t_user_0')}"
    assert logical_schema_select(labels, rows, {"t_user_0": USER}, "phys") == (
        "`TABLE_CATALOG`, `TABLE_SCHEMA`, `TABLE_NAME`, "
        f"CASE WHEN {in_table} AND COLUMN_NAME = {_hex('user_name_cipher')} THEN {_hex('user_name')} "
        f"WHEN {in_table} AND COLUMN_NAME = {_hex('PWD_cipher')} THEN {_hex('password')} "
        "ELSE COLUMN_NAME END AS `COLUMN_NAME`, "
        f"ORDINAL_POSITION - CASE WHEN {in_table} THEN (ORDINAL_POSITION > 3) + (ORDINAL_POSITION > 5) ELSE 0 END "
        "AS `ORDINAL_POSITION`",
        f"({in_table} AND COLUMN_NAME IN ({_hex('user_name_like')}, {_hex('user_name_assisted')}))",
    )
    # no encrypted table's row (not there, another schema's): nothing to change
    assert logical_schema_select(labels, rows, {"t_user_0": USER}, "other") is None
    assert logical_schema_select(labels, [], {"t_user_0": USER}, "phys") is None


# (physical SHOW CREATE TABLE text, its logical shape)
CREATES = [
    (  # MariaDB's own text: keys and constraints over a cipher column renamed, over a hidden one left out
        "CREATE TABLE `t_user` (\n  `id` int(11) NOT NULL,\n"
        "  `user_name_cipher` varchar(200) NOT NULL COMMENT 'a, (b',\n"
        "  `user_name_assisted` varchar(64) DEFAULT NULL,\n  `user_name_like` varchar(200) DEFAULT NULL,\n"
        "  `pwd_cipher` varchar(200) DEFAULT 'x,y' CHECK (`pwd_cipher` <> ''),\n"
        "  `g` varchar(10) GENERATED ALWAYS AS (left(`pwd_cipher`,3)) VIRTUAL,\n  PRIMARY KEY (`id`),\n"
        "  UNIQUE KEY `uk` (`user_name_cipher`),\n  KEY `ka` (`user_name_assisted`),\n"
        "  KEY `kp` (`pwd_cipher`(10),`id`),\n  KEY `kl` (`id`,`user_name_like`),\n"
        "  CONSTRAINT `c1` CHECK (`user_name_cipher` <> `pwd_cipher`),\n"
        "  CONSTRAINT `c2` CHECK (`user_name_like` <> '')\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='t, (x'",
        "CREATE TABLE `t_user` (\n  `id` int(11) NOT NULL,\n  `user_name` varchar(200) NOT NULL COMMENT 'a, (b',\n"
        "  `password` varchar(200) DEFAULT 'x,y' CHECK (`password` <> ''),\n"
        "  `g` varchar(10) GENERATED ALWAYS AS (left(`password`,3)) VIRTUAL,\n  PRIMARY KEY (`id`),\n"
        "  UNIQUE KEY `uk` (`user_name`),\n  KEY `kp` (`password`(10),`id`),\n"
        "  CONSTRAINT `c1` CHECK (`user_name` <> `password`)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='t, (x'",
    ),
    (  # the hidden column last: no comma left dangling
        "CREATE TABLE `t_user` (\n  `id` int(11),\n  `user_name_like` varchar(9)\n) ENGINE=InnoDB",
        "CREATE TABLE `t_user` (\n  `id` int(11)\n) ENGINE=InnoDB",
    ),
    (  # ANSI_QUOTES: double-quoted names
        'CREATE TABLE "t_user" (\n  "pwd_cipher" varchar(9),\n  "user_name_assisted" int,\n  KEY "k" ("pwd_cipher")\n)',
        'CREATE TABLE "t_user" (\n  "password" varchar(9),\n  KEY "k" ("password")\n)',
    ),
    (  # sql_quote_show_create=0: bare names, a key's prefix length, a function called in a CHECK
        "CREATE TABLE t_user (\n  pwd_cipher varchar(9),\n  user_name_like int,\n  KEY k (pwd_cipher(3)),\n"
        "  CONSTRAINT c CHECK (length(pwd_cipher) > 0)\n)",
        "CREATE TABLE t_user (\n  password varchar(9),\n  KEY k (password(3)),\n"
        "  CONSTRAINT c CHECK (length(password) > 0)\n)",
    ),
    (  # a foreign key: this table's columns by its rule, the referenced table's by its own
        "CREATE TABLE `t_user` (\n  `pwd_cipher` varchar(9),\n  `card` varchar(9),\n"
        "  CONSTRAINT `f1` FOREIGN KEY (`card`) REFERENCES `t_card` (`number_cipher`),\n"
        "  CONSTRAINT `f2` FOREIGN KEY (`card`) REFERENCES `db`.`t_card` (`number_assisted`),\n"
        "  CONSTRAINT `f3` FOREIGN KEY (`pwd_cipher`) REFERENCES `t_plain` (`pwd_cipher`) ON DELETE CASCADE\n)",
        "CREATE TABLE `t_user` (\n  `password` varchar(9),\n  `card` varchar(9),\n"
        "  CONSTRAINT `f1` FOREIGN KEY (`card`) REFERENCES `t_card` (`number`),\n"
        "  CONSTRAINT `f3` FOREIGN KEY (`password`) REFERENCES `t_plain` (`pwd_cipher`) ON DELETE CASCADE\n)",
    ),
    (  # not a table's text: as it is
        "CREATE ALGORITHM=UNDEFINED VIEW `t_user` AS select `pwd_cipher` AS `pwd_cipher` from `x`",
        "CREATE ALGORITHM=UNDEFINED VIEW `t_user` AS select `pwd_cipher` AS `pwd_cipher` from `x`",
    ),
]


@pytest.mark.parametrize(("physical", "logical"), CREATES, ids=range(len(CREATES)))
def test_logical_create_table(physical: str, logical: str) -> None:
    assert logical_create_table(physical, RULE, USER) == logical
