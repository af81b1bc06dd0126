"""Loading `conf/`: `global.yaml` (users, props) and one `database-*.yaml` per logical database.

The format is ShardingSphere-Proxy 5.x's, so users can bring their files over unchanged. Problems are
reported with the file, the key and what is wrong; unknown keys are warnings (ShardingSphere has many
keys we do not need), wrong types are errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from routing.errors import ConfigError
from routing.model import DatabaseRules

DEFAULT_PORT = 3307

Warn = Callable[[str], None]

_GLOBAL_KEYS = {"authority", "props", "mode", "transaction", "sqlParser", "sqlFederation", "sqlTranslator",
                "logging", "globalClock", "sqlParseCache", "traffic", "cdc"}
_DATABASE_KEYS = {"databaseName", "schemaName", "dataSources", "rules"}
_DATA_SOURCE_KEYS = {
    "url", "jdbcUrl", "username", "password", "connectionTimeoutMilliseconds", "idleTimeoutMilliseconds",
    "maxLifetimeMilliseconds", "maxPoolSize", "minPoolSize", "dataSourceClassName", "driverClassName",
    "readOnly", "customPoolProps",
}
KNOWN_PROPS = {
    "sql-show", "sql-simple", "proxy-default-port", "max-connections-size-per-query", "kernel-executor-size",
    "proxy-frontend-flush-threshold", "proxy-frontend-max-connections", "proxy-backend-query-fetch-size",
    "proxy-frontend-executor-size", "proxy-backend-executor-suitable", "check-table-metadata-enabled",
    "proxy-mysql-default-version", "proxy-default-database", "proxy-netty-backlog", "sql-federation-type",
    "proxy-hint-enabled", "check-duplicate-table-enabled", "load-table-metadata-batch-size",
    "proxy-frontend-ssl-enabled", "proxy-frontend-ssl-version", "proxy-frontend-ssl-cipher",
    "system-log-level", "proxy-meta-data-collector-enabled", "cdc-server-port",
    "proxy-frontend-database-protocol-type", "proxy-merge-memory-rows", "plan-cache-size",
    "proxy-statement-timeout-seconds", "proxy-version-comment", "proxy-backlog",
    # read/write splitting (proxy.readwrite); a group's own keys win
    "max-replication-lag-seconds", "replica-health-check-interval-milliseconds", "gtid-wait-timeout-milliseconds",
}


@dataclass(frozen=True)
class UserConfig:
    user: str
    host: str  # MySQL host pattern: % for any
    password: str
    admin: bool = False
    auth_plugin: str = "mysql_native_password"

    def host_matches(self, client_host: str) -> bool:
        pattern = "^" + re.escape(self.host).replace("%", ".*").replace("_", ".") + "$"
        return bool(re.match(pattern, client_host)) or (
            self.host in ("localhost", "127.0.0.1", "::1") and client_host in ("127.0.0.1", "::1", "localhost")
        )


@dataclass(frozen=True)
class DataSourceConfig:
    name: str
    host: str
    port: int
    database: str
    username: str
    password: str
    min_pool_size: int = 1
    max_pool_size: int = 50
    connect_timeout: float = 30.0
    idle_timeout: float = 60.0
    max_lifetime: float = 1800.0

    def describe(self) -> str:
        return f"{self.name} ({self.username}@{self.host}:{self.port}/{self.database})"


@dataclass(frozen=True)
class DatabaseConfig:
    name: str
    file: str
    data_sources: Mapping[str, DataSourceConfig]
    rules: DatabaseRules
    other_rules: tuple[Mapping[str, Any], ...] = ()  # rule types handled elsewhere (READWRITE_SPLITTING ...)


TRANSACTION_TYPES = ("LOCAL", "XA")  # ShardingSphere's BASE (Seata) is not implemented
# transaction.props the proxy's XA transaction manager reads (proxy.xa); others (Atomikos / Narayana
# settings brought over from ShardingSphere) are warned about and ignored
XA_PROPS = {"xa-log-dir", "xa-instance-id", "xa-recovery-interval-seconds"}


@dataclass(frozen=True)
class TransactionConfig:
    """global.yaml `transaction:` (ShardingSphere's transaction rule): the type of transaction a session
    runs on a sharded database when it spans data sources. `provider_type` is informational (the proxy is
    its own XA transaction manager); `props` are shown by SHOW TRANSACTION RULE and configure it."""

    default_type: str = "LOCAL"
    provider_type: str = ""
    props: Mapping[str, Any] = field(default_factory=dict)
    file: str = ""


@dataclass(frozen=True)
class ProxyConfig:
    users: tuple[UserConfig, ...]
    props: Mapping[str, Any]
    databases: Mapping[str, DatabaseConfig]
    conf_dir: Path
    warnings: tuple[str, ...] = ()
    transaction: TransactionConfig = field(default_factory=TransactionConfig)

    @property
    def port(self) -> int:
        return int(self.props.get("proxy-default-port", DEFAULT_PORT))

    def prop_bool(self, name: str, default: bool = False) -> bool:
        v = self.props.get(name, default)
        if isinstance(v, str):
            return v.strip().lower() in ("true", "1", "yes", "on")
        return bool(v)

    def prop_int(self, name: str, default: int) -> int:
        try:
            return int(self.props.get(name, default))
        except (TypeError, ValueError):
            return default


# --- YAML -----------------------------------------------------------------------------------------------


def load_yaml_file(path: Path) -> Any:
    """Safe YAML with ShardingSphere's rule tags (`!SHARDING`, ...) kept as `__rule__` keys."""
    from routing.config import load_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from exc
    return load_yaml(text, str(path))


# --- pieces ---------------------------------------------------------------------------------------------


def _expect(value: Any, kind: type | tuple[type, ...], file: str, key: str) -> Any:
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        got = type(value).__name__ if value is not None else "nothing"
        raise ConfigError(f"expected {names}, got {got}", file=file, key=key)
    return value


def _warn_unknown(doc: Mapping[str, Any], known: set[str], file: str, prefix: str, warn: Warn) -> None:
    for k in doc:
        if k not in known:
            warn(f"{file}: {prefix}{k}: unknown key, ignored")


def parse_data_source_url(url: str, file: str, key: str) -> tuple[str, int, str, str | None, str | None]:
    """`jdbc:mysql://h:p/db?...`, `jdbc:mariadb://...` or `mysql://user:pass@h:p/db` → (host, port, db,
    user, password); the JDBC query string is ignored."""
    raw = url.strip()
    if raw.startswith("jdbc:"):
        raw = raw[5:]
    parts = urlsplit(raw)
    if parts.scheme not in ("mysql", "mariadb") or not parts.hostname:
        raise ConfigError(
            f"cannot read data source url {url!r}: expected jdbc:mysql://host:port/database or "
            "mysql://user:password@host:port/database",
            file=file,
            key=key,
        )
    try:
        port = parts.port or 3306
    except ValueError as exc:
        raise ConfigError(f"bad port in url {url!r}", file=file, key=key) from exc
    database = unquote(parts.path.lstrip("/").split("/")[0])
    if not database:
        raise ConfigError(f"url {url!r} names no database", file=file, key=key)
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return parts.hostname, port, database, user, password


def _number(ds: Mapping[str, Any], name: str, default: float, file: str, key: str) -> float:
    v = ds.get(name, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ConfigError(f"expected a number, got {v!r}", file=file, key=f"{key}.{name}")
    return float(v)


def _data_source(name: str, ds: Any, file: str, warn: Warn) -> DataSourceConfig:
    key = f"dataSources.{name}"
    _expect(ds, dict, file, key)
    _warn_unknown(ds, _DATA_SOURCE_KEYS, file, f"{key}.", warn)
    url = ds.get("url", ds.get("jdbcUrl"))
    if not isinstance(url, str):
        raise ConfigError("every data source needs a url", file=file, key=f"{key}.url")
    host, port, database, url_user, url_password = parse_data_source_url(url, file, f"{key}.url")
    username = ds.get("username", url_user)
    if not isinstance(username, str) or not username:
        raise ConfigError("every data source needs a username", file=file, key=f"{key}.username")
    password = ds.get("password", url_password)
    password = "" if password is None else str(password)
    min_size = int(_number(ds, "minPoolSize", 1, file, key))
    max_size = int(_number(ds, "maxPoolSize", 50, file, key))
    if max_size < 1 or min_size < 0 or min_size > max_size:
        raise ConfigError(
            f"pool sizes must satisfy 0 <= minPoolSize <= maxPoolSize and maxPoolSize >= 1 "
            f"(got {min_size}, {max_size})",
            file=file,
            key=key,
        )
    return DataSourceConfig(
        name=name,
        host=host,
        port=port,
        database=database,
        username=username,
        password=password,
        min_pool_size=min_size,
        max_pool_size=max_size,
        connect_timeout=_number(ds, "connectionTimeoutMilliseconds", 30000, file, key) / 1000,
        idle_timeout=_number(ds, "idleTimeoutMilliseconds", 60000, file, key) / 1000,
        max_lifetime=_number(ds, "maxLifetimeMilliseconds", 1800000, file, key) / 1000,
    )


def _users(authority: Any, file: str) -> tuple[UserConfig, ...]:
    if authority is None:
        return ()
    _expect(authority, dict, file, "authority")
    users = authority.get("users") or []
    _expect(users, list, file, "authority.users")
    out = []
    for i, u in enumerate(users):
        key = f"authority.users[{i}]"
        _expect(u, dict, file, key)
        spec = u.get("user")
        if not isinstance(spec, str) or not spec:
            raise ConfigError("needs a user name (user: name@host)", file=file, key=f"{key}.user")
        name, _, host = spec.partition("@")
        plugin = str(u.get("authenticationMethodName") or u.get("auth-plugin") or "mysql_native_password")
        if plugin not in ("mysql_native_password", "caching_sha2_password", "mysql_clear_password"):
            raise ConfigError(f"unsupported authentication plugin {plugin!r}", file=file, key=f"{key}")
        pw = u.get("password")
        out.append(UserConfig(name, host or "%", "" if pw is None else str(pw), bool(u.get("admin", False)), plugin))
    return tuple(out)


def parse_transaction_type(value: Any, file: str, key: str) -> str:
    """LOCAL or XA (any case); BASE and anything else are configuration errors naming the key."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"expected LOCAL or XA, got {value!r}", file=file, key=key)
    kind = value.strip().upper()
    if kind == "BASE":
        raise ConfigError("BASE (Seata) transactions are not supported by shardproxy; use LOCAL or XA",
                          file=file, key=key)
    if kind not in TRANSACTION_TYPES:
        raise ConfigError(f"unknown transaction type {value!r}: use LOCAL or XA", file=file, key=key)
    return kind


def _transaction(doc: Any, file: str, warn: Warn) -> TransactionConfig:
    if doc is None:
        return TransactionConfig(file=file)
    _expect(doc, dict, file, "transaction")
    _warn_unknown(doc, {"defaultType", "providerType", "props"}, file, "transaction.", warn)
    kind = parse_transaction_type(doc.get("defaultType", "LOCAL"), file, "transaction.defaultType")
    provider = doc.get("providerType")
    if provider is not None and not isinstance(provider, str):
        raise ConfigError(f"expected a name, got {provider!r}", file=file, key="transaction.providerType")
    props = doc.get("props") or {}
    _expect(props, dict, file, "transaction.props")
    for k in props:
        if k not in XA_PROPS:
            warn(f"{file}: transaction.props.{k}: not used by shardproxy's XA transaction manager, ignored")
    interval = props.get("xa-recovery-interval-seconds")
    if interval is not None and (isinstance(interval, bool) or not isinstance(interval, int | float)
                                 or interval <= 0):
        raise ConfigError(f"expected a positive number of seconds, got {interval!r}", file=file,
                          key="transaction.props.xa-recovery-interval-seconds")
    instance = props.get("xa-instance-id")
    if instance is not None and not re.fullmatch(r"[A-Za-z0-9_]{1,16}", str(instance)):
        raise ConfigError(f"expected 1 to 16 letters, digits or _, got {instance!r}", file=file,
                          key="transaction.props.xa-instance-id")
    log_dir = props.get("xa-log-dir")
    if log_dir is not None and (not isinstance(log_dir, str) or not log_dir):
        raise ConfigError(f"expected a directory, got {log_dir!r}", file=file, key="transaction.props.xa-log-dir")
    return TransactionConfig(kind, provider or "", dict(props), file)


def load_database_file(path: Path, warn: Warn) -> DatabaseConfig:
    file = str(path)
    doc = load_yaml_file(path)
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
    return DatabaseConfig(name, file, data_sources, rules, other)


def _load_rules(
    doc: Mapping[str, Any], data_source_names: list[str], file: str, warn: Warn
) -> tuple[DatabaseRules, tuple[Mapping[str, Any], ...]]:
    rule_docs = [r for r in doc.get("rules") or [] if isinstance(r, dict)]
    if not any(r.get("__rule__") in ("SHARDING", "BROADCAST", "SINGLE") for r in rule_docs):
        from routing.config import logical_data_sources

        # a read/write splitting group stands for its members: one group alone is a pass-through database
        rules = DatabaseRules(str(doc.get("databaseName")), tuple(logical_data_sources(doc, data_source_names)))
    else:
        from routing import config as rule_config

        rules = rule_config.load_database_rules(dict(doc), data_source_names, file, warn=warn)
    other = tuple(r for r in doc.get("rules") or [] if isinstance(r, dict)
                  and r.get("__rule__") not in ("SHARDING", "BROADCAST", "SINGLE"))
    from proxy.readwrite import parse_groups

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
        gdoc = load_yaml_file(global_path) or {}
        gfile = str(global_path)
        _expect(gdoc, dict, gfile, "(top level)")
        _warn_unknown(gdoc, _GLOBAL_KEYS, gfile, "", warnings.append)
        users = _users(gdoc.get("authority"), gfile)
        raw_props = gdoc.get("props") or {}
        _expect(raw_props, dict, gfile, "props")
        for k in raw_props:
            if k not in KNOWN_PROPS:
                warnings.append(f"{gfile}: props.{k}: unknown prop, ignored")
        props = dict(raw_props)
        transaction = _transaction(gdoc.get("transaction"), gfile, warnings.append)
    if not users:
        users = (UserConfig("root", "%", "root", True),)
        warnings.append(f"{global_path}: no authority.users; allowing root@% with password 'root'")
    databases: dict[str, DatabaseConfig] = {}
    for path in sorted(conf.glob("database-*.yaml")) + sorted(conf.glob("config-*.yaml")):
        db = load_database_file(path, warnings.append)
        if db.name.lower() in {d.lower() for d in databases}:
            raise ConfigError(f"logical database {db.name!r} is defined twice", file=str(path), key="databaseName")
        databases[db.name] = db
    return ProxyConfig(users, props, databases, conf, tuple(warnings), transaction)
