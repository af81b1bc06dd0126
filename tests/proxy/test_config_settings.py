"""proxy.config without servers (issue 13, item 16): rules and settings that would change data or security
and are not implemented stop the start, naming the file and the key; harmless ones load; authority.privilege
is read as ShardingSphere reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from proxy.cli import main
from proxy.config import load_config
from proxy.config.model import UserConfig
from proxy.privilege import Privilege, denied_message, parse_privilege
from routing.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]

DATABASE = """\
databaseName: app_db
dataSources:
  ds_0:
    url: jdbc:mysql://127.0.0.1:3306/app_ds?useSSL=false
    username: root
    password: ''
"""


def _conf(tmp_path: Path, global_doc: dict | str | None = None, rules: str = "") -> Path:
    conf = tmp_path / "conf"
    conf.mkdir(parents=True)
    if global_doc is not None:
        text = global_doc if isinstance(global_doc, str) else yaml.safe_dump(global_doc)
        (conf / "global.yaml").write_text(text)
    (conf / "database-app.yaml").write_text(DATABASE + (f"rules:\n{rules}" if rules else ""))
    return conf


USERS = {"users": [{"user": "root@%", "password": "root", "admin": True}]}


@pytest.mark.parametrize("conf_dir", ["conf", "docker/conf", "docker/conf-cluster"])
def test_the_shipped_configurations_load(conf_dir: str) -> None:
    config = load_config(REPO / conf_dir)
    assert config.databases and config.privilege == Privilege()
    assert not [w for w in config.warnings if "ignored" in w], config.warnings


@pytest.mark.parametrize(("tag", "body", "words"), [
    ("COMPATIBLE_ENCRYPT", "  tables: {t_user: {columns: {pwd: {cipher: {name: pwd_cipher, encryptorName: aes}}}}}\n"
                           "  encryptors: {aes: {type: AES, props: {aes-key-value: '123456abc'}}}\n", "plaintext"),
    ("DB_DISCOVERY", "  dataSources: {g: {dataSourceNames: [ds_0], discoveryHeartbeatName: h, "
                     "discoveryTypeName: t}}\n", "failover"),
    ("SOMETHING_NEW", "  a: 1\n", "no rule shardproxy knows"),
])
def test_unimplemented_rules_stop_the_start(tmp_path: Path, tag: str, body: str, words: str) -> None:
    conf = _conf(tmp_path, {"authority": USERS}, f"- !{tag}\n{body}")
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    assert info.value.file == str(conf / "database-app.yaml") and info.value.key == "rules[0]"
    assert f"!{tag} is not implemented" in str(info.value) and words in str(info.value)


_MASK = ("- !MASK\n  tables: {t_user: {columns: {phone: {maskAlgorithm: keep}}}}\n"
         "  maskAlgorithms: {keep: {type: KEEP_FIRST_N_LAST_M, props: {first-n: 3, last-m: 4, replace-char: '*'}}}\n")
_SHADOW = ("- !SHADOW\n  dataSources: {g: {productionDataSourceName: ds_0, shadowDataSourceName: ds_1}}\n"
           "  tables: {t_order: {dataSourceNames: [g], shadowAlgorithmNames: [sa]}}\n"
           "  shadowAlgorithms: {sa: {type: VALUE_MATCH, props: {operation: insert, column: user_id, value: 1}}}\n")


@pytest.mark.parametrize(("rules", "key"), [
    (_MASK, None),
    (_SHADOW, None),
    (_MASK.replace("maskAlgorithm: keep", "maskAlgorithm: nope"), "rules[0].tables.t_user.columns.phone.maskAlgorithm"),
    (_MASK.replace("maskAlgorithms:", "maskAlgorithm:"), "rules[0].maskAlgorithm"),
    (_MASK.replace("replace-char: '*'", "replace-char: '**'"), "rules[0].maskAlgorithms.keep.props.replace-char"),
    (_MASK.replace("last-m: 4", "last-m: 0"), "rules[0].maskAlgorithms.keep.props.last-m"),
    (_SHADOW.replace("shadowDataSourceName: ds_1", "shadowDataSourceName: ds_9"),
     "rules[0].dataSources.g.shadowDataSourceName"),
    (_SHADOW.replace("dataSourceNames: [g]", "dataSourceNames: [h]"), "rules[0].tables.t_order.dataSourceNames"),
    (_SHADOW.replace("shadowAlgorithmNames: [sa]", "shadowAlgorithmNames: [sb]"),
     "rules[0].tables.t_order.shadowAlgorithmNames"),
    (_SHADOW.replace("operation: insert", "operation: upsert"), "rules[0].shadowAlgorithms.sa.props.operation"),
    (_SHADOW.replace("type: VALUE_MATCH", "type: COLUMN_MATCH"), "rules[0].shadowAlgorithms.sa.type"),
    (_SHADOW.replace("value: 1", "regex: 1"), "rules[0].shadowAlgorithms.sa.props.value"),
    (_SHADOW + "  defaultShadowAlgorithmName: sa\n", "rules[0].defaultShadowAlgorithmName"),
    (_SHADOW + "  tabels: {}\n", "rules[0].tabels"),
])
def test_mask_and_shadow_rules_load_or_are_refused(tmp_path: Path, rules: str, key: str | None) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "global.yaml").write_text(yaml.safe_dump({"authority": USERS}))
    (conf / "database-app.yaml").write_text(
        "databaseName: app\ndataSources:\n"
        + "".join(f"  ds_{i}: {{url: 'jdbc:mysql://127.0.0.1:3306/app_{i}', username: root, password: ''}}\n"
                  for i in range(2))
        + "rules:\n- !SINGLE\n  tables: ['*.*']\n" + rules.replace("rules[0]", "rules[1]"))
    if key is None:
        rules_of = load_config(conf).databases["app"].rules
        assert rules_of.mask is not None or rules_of.shadow is not None
        return
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    assert info.value.key == key.replace("rules[0]", "rules[1]")


def test_the_cli_names_file_and_key_without_a_traceback(tmp_path: Path) -> None:
    conf = _conf(tmp_path, {"authority": USERS},
                 "- !DB_DISCOVERY\n  dataSources: {g: {dataSourceNames: [ds_0]}}\n")
    res = subprocess.run([sys.executable, "-m", "proxy", "serve", "--conf", str(conf)], capture_output=True,
                         text=True, timeout=60, cwd=REPO)
    assert res.returncode == 2, res
    assert "database-app.yaml" in res.stderr and "rules[0]" in res.stderr and "!DB_DISCOVERY" in res.stderr
    assert "Traceback" not in res.stderr + res.stdout


@pytest.mark.parametrize(("doc", "key", "words"), [
    ({"transaction": {"defaultType": "BASE"}}, "transaction.defaultType", "BASE"),
    ({"mode": {"type": "Cluster", "repository": {"type": "ZooKeeper"}}}, "mode.repository.type", "etcd"),
    ({"mode": {"type": "Federated"}}, "mode.type", "Cluster"),
    ({"props": {"proxy-frontend-database-protocol-type": "PostgreSQL"}},
     "props.proxy-frontend-database-protocol-type", "MySQL"),
    ({"authority": {**USERS, "privilege": {"type": "ROW_LEVEL"}}}, "authority.privilege.type", "ROW_LEVEL"),
    ({"authority": {**USERS, "privilege": {"type": "DATABASE_PERMITTED"}}},
     "authority.privilege.props.user-database-mappings", "needs"),
    ({"authority": {**USERS, "privilege": {"type": "DATABASE_PERMITTED", "props": {
        "user-database-mappings": "root@%=*, nonsense"}}}}, "authority.privilege.props.user-database-mappings",
     "nonsense"),
    ({"authority": {**USERS, "authenticators": {"a": {"type": "KERBEROS"}}}}, "authority.authenticators.a.type",
     "KERBEROS"),
    ({"authority": {**USERS, "defaultAuthenticator": "missing"}}, "authority.defaultAuthenticator", "missing"),
])
def test_unimplemented_settings_stop_the_start(tmp_path: Path, doc: dict, key: str, words: str) -> None:
    conf = _conf(tmp_path, {"authority": USERS, **doc})
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    assert info.value.file == str(conf / "global.yaml") and info.value.key == key, info.value
    assert words in str(info.value)


def test_settings_that_change_nothing_load(tmp_path: Path) -> None:
    conf = _conf(tmp_path, {
        "authority": {**USERS, "privilege": {"type": "ALL_PERMITTED"}},
        "mode": {"type": "Standalone", "repository": {"type": "JDBC"}},
        "transaction": {"defaultType": "LOCAL"},
        "sqlParser": {"sqlStatementCache": {"initialCapacity": 2000}},
        "logging": {"loggers": []},
        "props": {"sql-show": False, "proxy-frontend-ssl-enabled": False,
                  "proxy-frontend-database-protocol-type": "MySQL"},
    })
    config = load_config(conf)
    assert config.privilege == Privilege() and "app_db" in config.databases


def test_server_yaml_global_rules_of_shardingsphere_5_1(tmp_path: Path) -> None:
    """5.1 / 5.2 wrote the global rules as tags: !AUTHORITY is read (not ignored, leaving root/root open),
    !TRANSACTION is checked, an unknown global tag stops the start."""
    text = ("rules:\n- !AUTHORITY\n  users: [{user: app@%, password: secret}]\n  privilege: {type: ALL_PERMITTED}\n"
            "- !TRANSACTION\n  defaultType: LOCAL\n- !SQL_PARSER\n  sqlCommentParseEnabled: true\n")
    config = load_config(_conf(tmp_path, text))
    assert [(u.user, u.password) for u in config.users] == [("app", "secret")]
    with pytest.raises(ConfigError) as info:
        load_config(_conf(tmp_path / "base", text.replace("defaultType: LOCAL", "defaultType: BASE")))
    assert info.value.key == "transaction.defaultType"
    with pytest.raises(ConfigError) as info:
        load_config(_conf(tmp_path / "unknown", text + "- !MYSTERY\n  a: 1\n"))
    assert info.value.key == "rules[3]"


def test_authenticators_name_the_plugin(tmp_path: Path) -> None:
    config = load_config(_conf(tmp_path, {"authority": {
        "users": [{"user": "a@%", "password": "x"}, {"user": "b@%", "password": "y", "authenticationMethodName": "n"}],
        "authenticators": {"sha2": {"type": "CACHING_SHA2_PASSWORD"}, "n": {"type": "NATIVE"}},
        "defaultAuthenticator": "sha2"}}))
    assert [u.auth_plugin for u in config.users] == ["caching_sha2_password", "mysql_native_password"]


# --- privilege ---------------------------------------------------------------------------------------------


def _user(spec: str, admin: bool = False) -> UserConfig:
    name, _, host = spec.partition("@")
    return UserConfig(name, host or "%", "", admin)


def test_database_permitted_as_shardingsphere_matches() -> None:
    """ShardingSphere's own test case (DatabasePermittedPrivilegeProviderTest), then admin and `*`."""
    users = [_user("root@localhost"), _user("user1@127.0.0.1"), _user("user1@%"), _user("user3@%"),
             _user("boss@%", admin=True), _user("user2@%")]
    warnings: list[str] = []
    p = parse_privilege({"type": "DATABASE_PERMITTED", "props": {"user-database-mappings":
                        "root@localhost=*, user1@127.0.0.1=sys_db, user1@=foo_db, user1@=bar_db, user2@=*"}},
                        "global.yaml", users, warnings.append)
    root, u1_local, u1_any, u3, boss, u2 = users
    assert p.permits(root, "sys_db")
    assert p.permits(u1_local, "sys_db") and p.permits(u1_local, "foo_db")
    assert p.permits(u1_any, "bar_db") and not p.permits(u1_any, "sys_db")
    assert not p.permits(u3, "sys_db")
    assert p.permits(boss, "anything")  # admin: every database
    assert p.permits(u2, "x") and p.databases(u2) is None
    assert p.permits(u1_any, "FOO_DB")  # names compare as the proxy looks them up
    assert p.visible(u1_any, ["bar_db", "foo_db", "sys_db"]) == ["bar_db", "foo_db"]
    assert p.visible(u3, ["bar_db"]) == []
    assert warnings == []


def test_schema_privileges_permitted_is_an_alias_and_all_permitted_the_default() -> None:
    users = [_user("a@%")]
    p = parse_privilege({"type": "schema_privileges_permitted", "props": {"user-database-mappings": "a@%=db1"}},
                        "g.yaml", users, lambda _m: None)
    assert p.permits(users[0], "db1") and not p.permits(users[0], "db2")
    assert parse_privilege(None, "g.yaml", users, lambda _m: None).permits(users[0], "db2")
    assert parse_privilege({"type": "ALL_PERMITTED"}, "g.yaml", users, lambda _m: None).permits(users[0], "db2")


def test_mappings_naming_unknown_users_or_databases_warn(tmp_path: Path) -> None:
    config = load_config(_conf(tmp_path, {"authority": {**USERS, "privilege": {"type": "DATABASE_PERMITTED", "props": {
        "user-database-mappings": "root@%=app_db, ghost@%=app_db, root@%=nowhere_db"}}}}))
    assert any("'ghost@%=app_db' names no user" in w for w in config.warnings), config.warnings
    assert any("'nowhere_db' is no logical database" in w for w in config.warnings), config.warnings


def test_denied_message_is_mysqls() -> None:
    assert denied_message(_user("app@10.0.0.%"), "sharding_db") == \
        "Access denied for user 'app'@'10.0.0.%' to database 'sharding_db'"


def test_cli_help_still_works() -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--help"])
    assert info.value.code == 0


def test_the_compose_cluster_configuration_is_cluster_mode() -> None:
    mode = load_config(REPO / "docker/conf-cluster").mode
    assert mode is not None and mode.endpoints == (("etcd", 2379),) and mode.namespace == "shardproxy-demo"
