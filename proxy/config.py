"""Loading `conf/`: `global.yaml` (users, props) and one `database-*.yaml` per logical database.

The format is ShardingSphere-Proxy 5.x's, so users can bring their files over unchanged. Problems are
reported with the file, the key and what is wrong; unknown keys are warnings (ShardingSphere has many
keys we do not need), wrong types are errors.

A rule or setting that would change the data or the security of the proxy, and that shardproxy does not
implement, stops the start (`ConfigError` with the file and the key) instead of being ignored: the rules
`!ENCRYPT`, `!MASK`, `!SHADOW`, `!DB_DISCOVERY` and any other tag but `!SHARDING`, `!BROADCAST`, `!SINGLE`,
`!READWRITE_SPLITTING`; `transaction.defaultType` other than LOCAL or XA; a `mode` other than Standalone or
Cluster over etcd (proxy.cluster.mode);
`props.proxy-frontend-ssl-enabled: true` (no TLS); a frontend protocol other than MySQL; an unknown
`authority.privilege.type` or authenticator type. Settings that change nothing here (`mode: Standalone`,
`transaction: LOCAL`, `sqlParser`, `logging` ...) are accepted.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from proxy.privilege import Privilege, parse_privilege
from proxy.rwconfig import parse_groups

if TYPE_CHECKING:
    from proxy.cluster.mode import ClusterMode
from routing.errors import ConfigError
from routing.model import DatabaseRules

DEFAULT_PORT = 3307

Warn = Callable[[str], None]

_GLOBAL_KEYS = {"authority", "props", "mode", "transaction", "sqlParser", "sqlFederation", "sqlTranslator",
                "logging", "globalClock", "sqlParseCache", "traffic", "cdc", "rules"}
_AUTHORITY_KEYS = {"users", "privilege", "authenticators", "defaultAuthenticator"}
#: database rules the proxy implements; any other tag stops the start (see the module docstring)
IMPLEMENTED_RULES = ("SHARDING", "BROADCAST", "SINGLE", "READWRITE_SPLITTING")
_NOT_IMPLEMENTED = {
    "ENCRYPT": "the proxy would store and return the columns it names in plaintext",
    "MASK": "the proxy would return the columns it names unmasked",
    "SHADOW": "the proxy would send shadow traffic to the production data sources",
    "DB_DISCOVERY": "the proxy would not discover the primary (no failover); use !READWRITE_SPLITTING",
    "COMPATIBLE_ENCRYPT": "the proxy would store and return the columns it names in plaintext",
}
#: ShardingSphere 5.1/5.2 global rules (`rules:` in server.yaml): authority and transaction are read as the
#: keys of the same name; these change nothing here
_HARMLESS_GLOBAL_RULES = {"SQL_PARSER", "SQL_TRANSLATOR", "SQL_FEDERATION", "LOGGING", "GLOBAL_CLOCK", "TRAFFIC",
                          "CDC", "SQL_PARSE_CACHE"}
# ShardingSphere's MySQL authenticator types (MySQLAuthenticatorType) -> the plugin; OLD_PASSWORD,
# WINDOWS_NATIVE and SHA256 are mysql_native_password there too
_AUTHENTICATOR_TYPES = {"NATIVE": "mysql_native_password", "MYSQL_NATIVE_PASSWORD": "mysql_native_password",
                        "OLD_PASSWORD": "mysql_native_password", "WINDOWS_NATIVE": "mysql_native_password",
                        "SHA256": "mysql_native_password", "CLEAR_TEXT": "mysql_clear_password",
                        "MYSQL_CLEAR_PASSWORD": "mysql_clear_password",
                        "CACHING_SHA2_PASSWORD": "caching_sha2_password"}
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
    "proxy-frontend-ssl-cert-file", "proxy-frontend-ssl-key-file",
    "system-log-level", "proxy-meta-data-collector-enabled", "cdc-server-port",
    "proxy-frontend-database-protocol-type", "proxy-merge-memory-rows", "plan-cache-size",
    "proxy-statement-timeout-seconds", "proxy-version-comment", "proxy-backlog",
    "proxy-metrics-port", "proxy-metrics-host",
    # read/write splitting (proxy.backends.readwrite); a group's own keys win
    "max-replication-lag-seconds", "replica-health-check-interval-milliseconds", "gtid-wait-timeout-milliseconds",
    # federation (proxy.federation)
    "proxy-federation-enabled", "proxy-federation-max-rows",
    # MIGRATE TABLE (proxy.migration)
    "migration-batch-rows", "migration-rows-per-second",
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
    # TLS toward the server, from the JDBC URL: None (plain), "required" (encrypt, do not verify),
    # "verify_ca" (verify the certificate), "verify_identity" (and the host name); `ssl_ca`: a CA file
    ssl_mode: str | None = None
    ssl_ca: str | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client SSL context for this data source's connections (None: plain TCP)."""
        if self.ssl_mode is None:
            return None
        if self.ssl_mode == "required":
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx
        ctx = ssl.create_default_context(cafile=self.ssl_ca)
        ctx.check_hostname = self.ssl_mode == "verify_identity"
        return ctx

    def describe(self) -> str:
        return f"{self.name} ({self.username}@{self.host}:{self.port}/{self.database})"


@dataclass(frozen=True)
class DatabaseConfig:
    name: str
    file: str
    data_sources: Mapping[str, DataSourceConfig]
    rules: DatabaseRules
    other_rules: tuple[Mapping[str, Any], ...] = ()  # rule types handled elsewhere (READWRITE_SPLITTING ...)
    # the parsed file as loaded (rule tags as `__rule__` keys): what DistSQL shows, exports and changes
    doc: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)


TRANSACTION_TYPES = ("LOCAL", "XA")  # ShardingSphere's BASE (Seata) is not implemented
# transaction.props the proxy's XA transaction manager reads (proxy.backends.xa); others (Atomikos / Narayana
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
    privilege: Privilege = field(default_factory=Privilege)
    transaction: TransactionConfig = field(default_factory=TransactionConfig)
    mode: ClusterMode | None = None  # cluster hook: the registry's settings in Cluster mode, None in Standalone

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


_SSL_MODES = {"DISABLED": None, "PREFERRED": None, "REQUIRED": "required", "VERIFY_CA": "verify_ca",
              "VERIFY_IDENTITY": "verify_identity"}


def _url_ssl(url: str, file: str, key: str) -> tuple[str | None, str | None]:
    """TLS settings of a JDBC URL, as MySQL Connector/J and MariaDB Connector/J spell them: `sslMode`
    (DISABLED, PREFERRED: plain; REQUIRED; VERIFY_CA; VERIFY_IDENTITY), or the older `useSSL=true`
    (with `requireSSL`, `verifyServerCertificate=true`: verify_ca); a CA file in `serverSslCert`,
    `sslCa` or `trustCertificateKeyStoreUrl=file:...` (PEM)."""
    query = {k.lower(): v for k, v in parse_qsl(urlsplit(url.strip().removeprefix("jdbc:")).query)}
    mode: str | None = None
    if "sslmode" in query:
        name = query["sslmode"].strip().upper()
        if name not in _SSL_MODES:
            raise ConfigError(f"unknown sslMode {query['sslmode']!r}: one of {', '.join(_SSL_MODES)}", file=file,
                              key=key)
        mode = _SSL_MODES[name]
    elif _truthy(query.get("usessl")) or _truthy(query.get("requiressl")):
        mode = "verify_ca" if _truthy(query.get("verifyservercertificate")) else "required"
    ca = query.get("serversslcert") or query.get("sslca") or query.get("trustcertificatekeystoreurl")
    if ca is not None:
        ca = ca.removeprefix("file://").removeprefix("file:")
    return mode, ca


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("true", "1", "yes")


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
    ssl_mode, ssl_ca = _url_ssl(url, file, f"{key}.url")
    return DataSourceConfig(
        name=name,
        host=host,
        port=port,
        database=database,
        username=username,
        password=password,
        ssl_mode=ssl_mode,
        ssl_ca=ssl_ca,
        min_pool_size=min_size,
        max_pool_size=max_size,
        connect_timeout=_number(ds, "connectionTimeoutMilliseconds", 30000, file, key) / 1000,
        idle_timeout=_number(ds, "idleTimeoutMilliseconds", 60000, file, key) / 1000,
        max_lifetime=_number(ds, "maxLifetimeMilliseconds", 1800000, file, key) / 1000,
    )


def _authenticators(authority: Mapping[str, Any], file: str) -> dict[str, str]:
    """`authority.authenticators` (name -> {type: ...}) as name -> plugin."""
    raw = authority.get("authenticators") or {}
    _expect(raw, dict, file, "authority.authenticators")
    out: dict[str, str] = {}
    for name, spec in raw.items():
        key = f"authority.authenticators.{name}"
        kind = str((spec or {}).get("type", "") if isinstance(spec, dict) else spec).strip().upper()
        plugin = _AUTHENTICATOR_TYPES.get(kind)
        if plugin is None:
            raise ConfigError(f"unknown MySQL authenticator type {kind!r}: expected one of "
                              f"{', '.join(sorted(_AUTHENTICATOR_TYPES))}", file=file, key=f"{key}.type")
        out[str(name)] = plugin
    return out


def _users(authority: Any, file: str, warn: Warn = lambda _m: None) -> tuple[UserConfig, ...]:
    if authority is None:
        return ()
    _expect(authority, dict, file, "authority")
    _warn_unknown(authority, _AUTHORITY_KEYS, file, "authority.", warn)
    authenticators = _authenticators(authority, file)
    default = authority.get("defaultAuthenticator")
    if default is not None and str(default) not in authenticators:
        raise ConfigError(f"names no authenticator of authority.authenticators ({default!r})", file=file,
                          key="authority.defaultAuthenticator")
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
        method = u.get("authenticationMethodName") or u.get("auth-plugin") or default or "mysql_native_password"
        plugin = authenticators.get(str(method), str(method))
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
    return database_config(load_yaml_file(path), str(path), warn)


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
    return DatabaseConfig(name, file, data_sources, rules, other, doc=doc)


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
        gdoc = load_yaml_file(global_path) or {}
        gfile = str(global_path)
        _expect(gdoc, dict, gfile, "(top level)")
        _warn_unknown(gdoc, _GLOBAL_KEYS, gfile, "", warnings.append)
        gdoc = _global_rules(gdoc, gfile, warnings.append)
        users = _users(gdoc.get("authority"), gfile, warnings.append)
        raw_props = gdoc.get("props") or {}
        _expect(raw_props, dict, gfile, "props")
        for k in raw_props:
            if k not in KNOWN_PROPS:
                warnings.append(f"{gfile}: props.{k}: unknown prop, ignored")
        props = dict(raw_props)
        _check_global(gdoc, props, gfile, warnings.append)
        transaction = _transaction(gdoc.get("transaction"), gfile, warnings.append)
    if not users:
        users = (UserConfig("root", "%", "root", True),)
        warnings.append(f"{global_path}: no authority.users; allowing root@% with password 'root'")
    privilege = Privilege()
    if global_path.exists():
        authority = gdoc.get("authority")
        privilege = parse_privilege(authority.get("privilege") if isinstance(authority, dict) else None,
                                    str(global_path), users, warnings.append)
    databases: dict[str, DatabaseConfig] = {}
    for path in sorted(conf.glob("database-*.yaml")) + sorted(conf.glob("config-*.yaml")):
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
    return ProxyConfig(users, props, databases, conf, tuple(warnings), privilege, transaction, mode)


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
