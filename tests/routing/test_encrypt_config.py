"""`!ENCRYPT` rules as ShardingSphere 5.5 writes them: loaded, and every mistake refused at start with its key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from proxy.config.load import load_config
from routing.config import load_yaml
from routing.encrypt.rule import load_encrypt_rule
from routing.errors import ConfigError

RULE = """
- !ENCRYPT
  tables:
    t_user:
      columns:
        user_name:
          cipher: {name: user_name_cipher, encryptorName: aes}
          assistedQuery: {name: user_name_assisted, encryptorName: md5}
          likeQuery: {name: user_name_like, encryptorName: like}
        password:
          cipher: {name: password_cipher, encryptorName: aes}
  encryptors:
    aes: {type: AES, props: {aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}
    md5: {type: MD5, props: {salt: s}}
    like: {type: CHAR_DIGEST_LIKE, props: {mask: 4093}}
"""


def _rule_doc() -> dict:
    return load_yaml(RULE)[0]


def test_a_rule_loads() -> None:
    rule = load_encrypt_rule(_rule_doc())
    table = rule.table("T_USER")
    assert table is not None and set(table.columns) == {"user_name", "password"}
    name = table.columns["user_name"]
    assert name.physical() == ("user_name_cipher", "user_name_assisted", "user_name_like")
    assert name.equality() is not None and name.equality()[0] == "user_name_assisted"
    assert table.columns["password"].equality()[0] == "password_cipher"  # AES is deterministic
    assert table.hidden == {"user_name_assisted", "user_name_like"}
    assert rule.encryptors["md5"] == ("MD5", {"salt": "s"})


def _edit(path: str, value: object) -> dict:
    doc = _rule_doc()
    node = doc
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part]
    if value is None:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "key", "words"),
    [
        ("tablez", {}, "rules[0].tablez", "did you mean tables"),
        (
            "tables.t_user.columns.password.cipher.encryptorNam",
            "aes",
            "rules[0].tables.t_user.columns.password.cipher.encryptorNam",
            "did you mean encryptorName",
        ),
        (
            "tables.t_user.columns.password.plain",
            {"name": "p"},
            "rules[0].tables.t_user.columns.password.plain",
            "unknown key",
        ),
        (
            "tables.t_user.columns.password.cipher",
            None,
            "rules[0].tables.t_user.columns.password.cipher",
            "needs a cipher",
        ),
        (
            "tables.t_user.columns.password.cipher.encryptorName",
            "nope",
            "rules[0].tables.t_user.columns.password.cipher.encryptorName",
            "names no configured encryptor",
        ),
        (
            "tables.t_user.columns.password.cipher.encryptorName",
            "md5",
            "rules[0].tables.t_user.columns.password.cipher.encryptorName",
            "cannot decrypt",
        ),
        (
            "tables.t_user.columns.user_name.likeQuery.encryptorName",
            "md5",
            "rules[0].tables.t_user.columns.user_name.likeQuery.encryptorName",
            "cannot serve LIKE",
        ),
        ("encryptors.aes.type", "SM4", "rules[0].encryptors.aes.type", "unknown encryptor type"),
        (
            "encryptors.aes.props",
            {"aes-key-value": "k"},
            "rules[0].encryptors.aes.props.digest-algorithm-name",
            "needs the prop",
        ),
        (
            "encryptors.aes.props",
            {"aes-key-value": "k", "digest-algorithm-name": "NOPE-9"},
            "rules[0].encryptors.aes.props.digest-algorithm-name",
            "unknown digest",
        ),
        ("encryptors.like.props", {"mask": "x"}, "rules[0].encryptors.like.props.mask", "decimal number"),
        ("encryptors.md5.tipe", "MD5", "rules[0].encryptors.md5.tipe", "did you mean type"),
        (
            "tables.t_user.columns.password.cipher.name",
            "user_name_cipher",
            "rules[0].tables.t_user.columns.password",
            "used twice",
        ),
    ],
)
def test_mistakes_are_refused_with_their_key(path: str, value: object, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_encrypt_rule(_edit(path, value), file="f.yaml")
    assert info.value.key == key and words in str(info.value), str(info.value)


DATABASE = """databaseName: app
dataSources:
  ds_0: {url: "jdbc:mysql://127.0.0.1:3306/app", username: root, password: ""}
rules:
"""


def test_the_proxy_starts_with_an_encrypt_rule(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "global.yaml").write_text(yaml.safe_dump({"authority": {"users": [{"user": "root@%", "password": "r"}]}}))
    (conf / "database-app.yaml").write_text(DATABASE + RULE)
    config = load_config(conf)
    db = config.databases["app"]
    assert db.encrypt is not None and db.encrypt.table("t_user") is not None


def test_a_broken_encrypt_rule_stops_the_start_with_file_and_line(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "global.yaml").write_text(yaml.safe_dump({"authority": {"users": [{"user": "root@%", "password": "r"}]}}))
    (conf / "database-app.yaml").write_text(DATABASE + RULE.replace("encryptorName: md5", "encryptorName: md6"))
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    assert info.value.key == "rules[0].tables.t_user.columns.user_name.assistedQuery.encryptorName"
    assert info.value.line is not None
