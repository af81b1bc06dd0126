"""Reading a `conf/` directory: `global.yaml` and each `database-*.yaml`, into a `ProxyConfig`.

The entry points (`load_config`, `database_config`, `load_yaml_file`) and the checks that refuse what the
proxy does not implement (rule tags, global rules, `mode`, frontend TLS). The data source, `authority` and
`transaction` sections are parsed in `sections.py`; what the result is, in `model.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy.privilege import Privilege, parse_privilege
from proxy.rwconfig import parse_groups

if TYPE_CHECKING:
    pass
from proxy.config.model import (
    DatabaseConfig,
    ProxyConfig,
    TransactionConfig,
    UserConfig,
    state_directory,
)
from proxy.config.props import KNOWN_PROPS as _PROPS_TABLE_KEYS
from proxy.config.sections import (
    Warn,
    _data_source,
    _expect,
    _transaction,
    _users,
    _warn_unknown,
)
from routing.config import key_line, refuse_unknown_keys
from routing.encrypt.rule import EncryptRule, load_encrypt_rule
from routing.errors import ConfigError
from routing.model import DatabaseRules

_GLOBAL_KEYS = {"authority", "props", "mode", "transaction", "sqlParser", "sqlFederation", "sqlTranslator",
                "logging", "globalClock", "sqlParseCache", "traffic", "cdc", "rules", "labels"}
#: database rules the proxy implements; any other tag stops the start (see the module docstring)
IMPLEMENTED_RULES = ("SHARDING", "BROADCAST", "SINGLE", "READWRITE_SPLITTING", "ENCRYPT", "MASK", "SHADOW")
_NOT_IMPLEMENTED = {
    "DB_DISCOVERY": "the proxy would not discover the primary (no failover); use !READWRITE_SPLITTING",
    "COMPATIBLE_ENCRYPT": "the proxy would store and return the columns it names in plaintext",
}
#: ShardingSphere 5.1/5.2 global rules (`rules:` in server.yaml): authority and transaction are read as the
#: keys of the same name; these change nothing here
_HARMLESS_GLOBAL_RULES = {"SQL_PARSER", "SQL_TRANSLATOR", "SQL_FEDERATION", "LOGGING", "GLOBAL_CLOCK", "TRAFFIC",
                          "CDC", "SQL_PARSE_CACHE"}
_DATABASE_KEYS = {"databaseName", "schemaName", "dataSources", "rules"}
KNOWN_PROPS = _PROPS_TABLE_KEYS  # every prop of the props table; any other key stops the start


# --- YAML -----------------------------------------------------------------------------------------------


def load_yaml_file(path: Path) -> Any:
    """Safe YAML with ShardingSphere's rule tags (`!SHARDING`, ...) kept as `__rule__` keys."""
    from routing.config import load_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from exc
    return load_yaml(text, str(path))


# --- database files --------------------------------------------------------------------------------------


def load_database_file(path: Path, warn: Warn) -> DatabaseConfig:
    with placed_in(path):
        return database_config(load_yaml_file(path), str(path), warn)


@contextmanager
def placed_in(path: Path) -> Iterator[None]:
    """A `ConfigError` about a key of the file at `path` gains the line the key is on."""
    try:
        yield
    except ConfigError as exc:
        if exc.line is not None or exc.file != str(path):
            raise
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            raise exc from None
        raise exc.at_line(key_line(text, exc.key)) from None


def database_config(doc: Any, file: str, warn: Warn) -> DatabaseConfig:
    """One logical database from its parsed `database-*.yaml` (DistSQL changes build the document anew
    and load it through here, so they are validated exactly as the file is)."""
    _expect(doc, dict, file, "(top level)")
    _warn_unknown(doc, _DATABASE_KEYS, file, "", warn)
    name = doc.get("databaseName", doc.get("schemaName"))
    if not isinstance(name, str) or not name:
        raise ConfigError("needs databaseName", file=file, key="databaseName")
    sources = doc.get("dataSources")
    _expect(sources, dict, file, "dataSources")
    if not sources:
        raise ConfigError("needs at least one data source", file=file, key="dataSources")
    data_sources = {str(n): _data_source(str(n), ds, file, warn) for n, ds in sources.items()}
    rules_doc = doc.get("rules") or []
    _expect(rules_doc, list, file, "rules")
    rules, other = _load_rules(doc, list(data_sources), file, warn)
    return DatabaseConfig(name, file, data_sources, rules, other, doc=doc, encrypt=_encrypt_rule(rules_doc, file))


def _encrypt_rule(rules_doc: list[Any], file: str) -> EncryptRule | None:
    """The database's `!ENCRYPT` rule, checked (routing.encrypt.rule); one at most, as in ShardingSphere."""
    found: EncryptRule | None = None
    for i, rule in enumerate(rules_doc):
        if not isinstance(rule, dict) or str(rule.get("__rule__", "")).upper() != "ENCRYPT":
            continue
        if found is not None:
            raise ConfigError("a second !ENCRYPT rule: put every encrypted table in one", file=file, key=f"rules[{i}]")
        found = load_encrypt_rule(rule, file=file, key=f"rules[{i}]")
    return found


def _refuse_unimplemented_rules(rules_doc: list[Any], file: str) -> None:
    for i, rule in enumerate(rules_doc):
        if not isinstance(rule, dict) or "__rule__" not in rule:
            continue  # (the rule loader names what is wrong with it)
        tag = str(rule["__rule__"]).upper()
        if tag in IMPLEMENTED_RULES:
            continue
        why = _NOT_IMPLEMENTED.get(tag, "it is no rule shardproxy knows, so its effect would be lost")
        raise ConfigError(
            f"!{tag} is not implemented by shardproxy: {why}. Remove the rule to run without it "
            f"(shardproxy implements {', '.join('!' + r for r in IMPLEMENTED_RULES)})",
            file=file, key=f"rules[{i}]")


def _load_rules(
    doc: Mapping[str, Any], data_source_names: list[str], file: str, warn: Warn
) -> tuple[DatabaseRules, tuple[Mapping[str, Any], ...]]:
    _refuse_unimplemented_rules(list(doc.get("rules") or []), file)
    rule_docs = [r for r in doc.get("rules") or [] if isinstance(r, dict)]
    if not any(r.get("__rule__") in ("SHARDING", "BROADCAST", "SINGLE") for r in rule_docs):
        from routing.config import logical_data_sources

        # a read/write splitting group stands for its members: one group alone is a pass-through database
        rules = DatabaseRules(str(doc.get("databaseName")), tuple(logical_data_sources(doc, data_source_names)))
    else:
        from routing import config as rule_config

        rules = rule_config.load_database_rules(dict(doc), data_source_names, file, warn=warn)
    from routing.feature_rules import with_feature_rules  # !MASK, !SHADOW

    rules = with_feature_rules(rules, doc, data_source_names, file)
    other = tuple(r for r in doc.get("rules") or [] if isinstance(r, dict)
                  and r.get("__rule__") not in ("SHARDING", "BROADCAST", "SINGLE"))
    parse_groups(other, data_source_names, file, warn)  # configuration errors at load time, with the key
    return rules, other


def load_config(conf_dir: Path | str) -> ProxyConfig:
    conf = Path(conf_dir)
    if not conf.is_dir():
        raise ConfigError(f"configuration directory {conf} does not exist")
    warnings: list[str] = []
    global_path = conf / "global.yaml"
    if not global_path.exists():
        alt = conf / "server.yaml"  # ShardingSphere 5.1-5.2 name
        global_path = alt if alt.exists() else global_path
    users: tuple[UserConfig, ...] = ()
    props: dict[str, Any] = {}
    transaction = TransactionConfig(file=str(global_path))
    if global_path.exists():
        with placed_in(global_path):
            gdoc = load_yaml_file(global_path) or {}
            gfile = str(global_path)
            _expect(gdoc, dict, gfile, "(top level)")
            _warn_unknown(gdoc, _GLOBAL_KEYS, gfile, "", warnings.append)
            gdoc = _global_rules(gdoc, gfile, warnings.append)
            users = _users(gdoc.get("authority"), gfile, warnings.append)
            raw_props = gdoc.get("props") or {}
            _expect(raw_props, dict, gfile, "props")
            refuse_unknown_keys(raw_props, KNOWN_PROPS, file=gfile, prefix="props.")
            props = dict(raw_props)
            _check_global(gdoc, props, gfile, warnings.append)
            transaction = _transaction(gdoc.get("transaction"), gfile, warnings.append)
    if not users:
        users = (UserConfig("root", "%", "root", True),)
        warnings.append(f"{global_path}: no authority.users; allowing root@% with password 'root'")
    privilege = Privilege()
    if global_path.exists():
        authority = gdoc.get("authority")
        with placed_in(global_path):
            privilege = parse_privilege(authority.get("privilege") if isinstance(authority, dict) else None,
                                        str(global_path), users, warnings.append)
    databases: dict[str, DatabaseConfig] = {}
    for path in database_files(conf, state_directory(conf, props), warnings.append):
        db = load_database_file(path, warnings.append)
        if db.name.lower() in {d.lower() for d in databases}:
            raise ConfigError(f"logical database {db.name!r} is defined twice", file=str(path), key="databaseName")
        databases[db.name] = db
    defined = {d.lower() for d in databases}
    for grant in privilege.mappings:
        if grant.database != "*" and grant.database not in defined:
            warnings.append(f"{global_path}: authority.privilege.props.user-database-mappings: "
                            f"{grant.database!r} is no logical database")
    from proxy.cluster.mode import parse_mode  # cluster hook: in Cluster mode the registry may hold them

    mode = parse_mode(gdoc.get("mode"), str(global_path)) if global_path.exists() else None
    if not databases and mode is None:
        # an empty or mistyped mount must not come up "healthy" serving nothing with a default login
        found = "no files at all" if not any(conf.iterdir()) else "no database-*.yaml"
        raise ConfigError(f"configuration directory {conf.resolve()} has {found}: put global.yaml and one "
                          f"database-<name>.yaml per logical database there (see conf/ in the repository)")
    state = state_directory(conf, props)
    databases = {name: with_state_file(db, state) for name, db in databases.items()}
    return ProxyConfig(users, props, databases, conf, tuple(warnings), privilege, transaction, mode)


def database_files(conf: Path, state: Path | None, warn: Warn) -> list[Path]:
    """The `database-*.yaml` files to load: conf/'s, where props.proxy-state-directory holds a file of the
    same name (DistSQL wrote it there, conf/ being read-only) that one instead, and the state directory's
    own. DistSQL writes into the state directory (see `with_state_file`)."""
    patterns = ("database-*.yaml", "config-*.yaml")
    found = {p.name: p for pattern in patterns for p in sorted(conf.glob(pattern))}
    if state is None or state.resolve() == conf.resolve():
        return list(found.values())
    if state.exists() and not state.is_dir():
        raise ConfigError(f"{state} is not a directory", key="props.proxy-state-directory")
    for pattern in patterns:
        for written in sorted(state.glob(pattern)) if state.is_dir() else ():
            original = found.get(written.name)
            if original is not None and original.stat().st_mtime > written.stat().st_mtime:
                warn(f"{original} changed after DistSQL wrote {written}: the state directory's copy is loaded; "
                     f"delete it to load {original}")
            found[written.name] = written
    return [found[name] for name in sorted(found, key=lambda n: (not n.startswith("database-"), n))]


def with_state_file(db: DatabaseConfig, state: Path | None) -> DatabaseConfig:
    """`db` writing its DistSQL changes into the state directory (its messages keep naming the file read)."""
    if state is None:
        return db
    target = state / Path(db.file).name
    if Path(db.file) == target:
        return db
    return replace(db, file=str(target), loaded_from=db.file)


def _true(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _global_rules(gdoc: dict[str, Any], file: str, warn: Warn) -> dict[str, Any]:
    """ShardingSphere 5.1/5.2 `server.yaml` writes the global rules as tagged `rules:` (`- !AUTHORITY`,
    `- !TRANSACTION`): read them as the `authority` / `transaction` keys of 5.3+."""
    rules = gdoc.get("rules")
    if rules is None:
        return gdoc
    _expect(rules, list, file, "rules")
    out = {k: v for k, v in gdoc.items() if k != "rules"}
    for i, rule in enumerate(rules):
        key = f"rules[{i}]"
        if not isinstance(rule, dict) or "__rule__" not in rule:
            raise ConfigError("expected a tagged global rule such as '- !AUTHORITY'", file=file, key=key)
        tag = str(rule["__rule__"]).upper()
        body = {k: v for k, v in rule.items() if k != "__rule__"}
        if tag in ("AUTHORITY", "TRANSACTION"):
            name = tag.lower()
            if name in out:
                raise ConfigError(f"{name} is given twice (as a key and as !{tag})", file=file, key=key)
            out[name] = body
        elif tag in _HARMLESS_GLOBAL_RULES:
            warn(f"{file}: {key}: !{tag} changes nothing in shardproxy, ignored")
        else:
            raise ConfigError(f"!{tag} is no global rule shardproxy knows, so its effect would be lost: remove it",
                              file=file, key=key)
    return out


def _check_global(gdoc: Mapping[str, Any], props: Mapping[str, Any], file: str, warn: Warn) -> None:
    """Settings that would change data or security and are not implemented stop the start."""
    mode = gdoc.get("mode")
    if mode is not None:
        _expect(mode, dict, file, "mode")
        from proxy.cluster.mode import parse_mode  # cluster hook: Standalone or Cluster over etcd

        parse_mode(mode, file, warn)
    protocol = props.get("proxy-frontend-database-protocol-type")
    if protocol is not None and str(protocol).strip().upper() not in ("MYSQL", "MARIADB"):
        raise ConfigError(f"shardproxy speaks the MySQL protocol only, not {protocol}", file=file,
                          key="props.proxy-frontend-database-protocol-type")
    federation = gdoc.get("sqlFederation")
    if isinstance(federation, dict) and _true(federation.get("sqlFederationEnabled", False)):
        warn(f"{file}: sqlFederation.sqlFederationEnabled: shardproxy has no federation; statements it would "
             "federate are refused")
