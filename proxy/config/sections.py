"""The sections of the configuration files, each parsed with the file and key of any problem: data sources
(JDBC URL, pool sizes, TLS), `authority` (users, authenticators) and `transaction`; with the type check
and unknown-key refusal every section uses.

Split from `load.py`, which reads whole files and decides what the proxy refuses; this is the field-level
parsing it and the Cluster registry (proxy.cluster.registry) build on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

if TYPE_CHECKING:
    pass
from proxy.config.model import TRANSACTION_TYPES, XA_PROPS, DataSourceConfig, TransactionConfig, UserConfig
from routing.config import refuse_unknown_keys
from routing.errors import ConfigError

Warn = Callable[[str], None]

_AUTHORITY_KEYS = {"users", "privilege", "authenticators", "defaultAuthenticator"}

# ShardingSphere's MySQL authenticator types (MySQLAuthenticatorType) -> the plugin; OLD_PASSWORD,
# WINDOWS_NATIVE and SHA256 are mysql_native_password there too
_AUTHENTICATOR_TYPES = {"NATIVE": "mysql_native_password", "MYSQL_NATIVE_PASSWORD": "mysql_native_password",
                        "OLD_PASSWORD": "mysql_native_password", "WINDOWS_NATIVE": "mysql_native_password",
                        "SHA256": "mysql_native_password", "CLEAR_TEXT": "mysql_clear_password",
                        "MYSQL_CLEAR_PASSWORD": "mysql_clear_password",
                        "CACHING_SHA2_PASSWORD": "caching_sha2_password"}

_DATA_SOURCE_KEYS = {
    "url", "jdbcUrl", "username", "password", "connectionTimeoutMilliseconds", "idleTimeoutMilliseconds",
    "maxLifetimeMilliseconds", "maxPoolSize", "minPoolSize", "dataSourceClassName", "driverClassName",
    "readOnly", "customPoolProps",
}


def _expect(value: Any, kind: type | tuple[type, ...], file: str, key: str) -> Any:
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        got = type(value).__name__ if value is not None else "nothing"
        raise ConfigError(f"expected {names}, got {got}", file=file, key=key)
    return value


def _warn_unknown(doc: Mapping[str, Any], known: set[str], file: str, prefix: str, warn: Warn) -> None:
    """Refuse a key the section does not have (the name is kept for its callers: it warned once)."""
    refuse_unknown_keys(doc, known, file=file, prefix=prefix)


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
