"""What a loaded configuration is: `ProxyConfig` and its parts (users, data sources, logical databases,
the transaction rule), frozen dataclasses the rest of the proxy reads.

Apart from the loader so that the many modules that only name these types do not depend on YAML parsing.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy.config.props import default as prop_default
from proxy.privilege import Privilege

if TYPE_CHECKING:
    from proxy.cluster.mode import ClusterMode
from routing.encrypt.rule import EncryptRule
from routing.model import DatabaseRules


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
    # the `!ENCRYPT` rule (routing.encrypt), checked at load; None without one
    encrypt: EncryptRule | None = field(default=None, compare=False, repr=False)
    # props.proxy-state-directory: `file` is where DistSQL writes (the state directory), this is the file the
    # configuration was read from (conf/'s until a change was written); "" when it is `file`
    loaded_from: str = field(default="", compare=False)

    @property
    def source_file(self) -> str:
        """The file this configuration was read from, for messages that point at what to fix."""
        return self.loaded_from or self.file


def state_directory(conf_dir: Path | str, props: Mapping[str, Any]) -> Path | None:
    """Where the proxy writes what it changes (props.proxy-state-directory, relative to `conf_dir`)."""
    raw = props.get("proxy-state-directory")
    if raw is None or str(raw).strip() == "":
        return None
    path = Path(str(raw).strip()).expanduser()
    return path if path.is_absolute() else Path(conf_dir) / path


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
        return self.prop_int("proxy-default-port")

    @property
    def state_dir(self) -> Path | None:
        """props.proxy-state-directory, relative to conf/ (None: the proxy writes into conf/ itself)."""
        return state_directory(self.conf_dir, self.props)

    def prop(self, name: str) -> Any:
        """The prop's configured value, else its default from the props table (None where it has none)."""
        value = self.props.get(name)
        return prop_default(name) if value is None else value

    def prop_bool(self, name: str) -> bool:
        v = self.prop(name)
        if isinstance(v, str):
            return v.strip().lower() in ("true", "1", "yes", "on")
        return bool(v)

    def prop_int(self, name: str) -> int:
        """An integer prop; a value that is no integer counts as absent (the table's default)."""
        try:
            return int(self.prop(name))
        except (TypeError, ValueError):
            return int(prop_default(name) or 0)

    def prop_float(self, name: str) -> float:
        try:
            return float(self.prop(name) or 0)
        except (TypeError, ValueError):
            return float(prop_default(name) or 0)
