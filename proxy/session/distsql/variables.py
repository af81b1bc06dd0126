"""`SHOW DIST VARIABLE(S)` and `SET DIST VARIABLE`: the props of `global.yaml`, by ShardingSphere's names.

A variable is a prop's key in upper-case-underscore form, shown in lower case (`sql_show` is
`props.sql-show`). The list holds ShardingSphere 5.5.2's props (`ConfigurationPropertyKey`,
`TemporaryConfigurationPropertyKey`, `cached_connections`), each with its default where shardproxy does not
read it, plus the props only shardproxy reads: the props table (proxy.config.props, documented in
docs/configuration/props.md). Values shown are the
ones in use: the configured value, or the proxy's default.

`SET DIST VARIABLE` applies a prop the proxy reads for each statement (or each new connection) at once, to
this process (`--workers N` runs N processes, each with its own props): `sql_show`,
`proxy_frontend_max_connections`, `max_connections_size_per_query`, `proxy_merge_memory_rows`,
`proxy_statement_memory_bytes`, `proxy_global_memory_bytes`, `proxy_statement_timeout_seconds`,
`proxy_default_database`, `proxy_digest_max_entries`, `proxy_slow_query_threshold_milliseconds`. A prop read at
start-up only is refused as
read-only (MySQL's ERR 1238), one shardproxy does not use as not supported (1235), so that no SET appears
to work and does nothing. The change lives in memory: `global.yaml` is not rewritten. In Cluster mode
(proxy.cluster) it is validated here, published to the registry, and every proxy of the cluster applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.config.props import LIVE, PROPS, STARTUP, UNUSED
from proxy.session.distsql.errors import DistSQLError

if TYPE_CHECKING:
    from proxy.execution.context import ServerContext as ProxyServer
    from proxy.execution.context import SessionContext as Session

COLUMNS = ("variable_name", "variable_value")

__all__ = ["LIVE", "STARTUP", "UNUSED"]

@dataclass(frozen=True)
class Variable:
    key: str  # the prop's key in global.yaml
    kind: str  # bool | int | float | str | level
    default: str  # shown when the prop is not configured (ShardingSphere's default, or shardproxy's)
    use: str  # LIVE | STARTUP | UNUSED
    minimum: float | None = None
    # the value in use, when the proxy keeps it elsewhere than in props (a default computed at start-up ...)
    current: Callable[[ProxyServer], Any] | None = None
    # applies a validated value to the running proxy (LIVE only)
    apply: Callable[[ProxyServer, Any], None] | None = None
    hint: str = ""  # for read-only ones: where to change it

    @property
    def name(self) -> str:
        return self.key.replace("-", "_").lower()


def _set_attr(attr: str) -> Callable[[ProxyServer, Any], None]:
    def apply(server: ProxyServer, value: Any) -> None:
        setattr(server, attr, value)
    return apply


def _get_attr(attr: str) -> Callable[[ProxyServer], Any]:
    def current(server: ProxyServer) -> Any:
        return getattr(server, attr)
    return current


def _global_memory(server: ProxyServer) -> int:
    return server.global_memory.limit


def _set_global_memory(server: ProxyServer, value: Any) -> None:
    server.global_memory.limit = value


def _check_database(server: ProxyServer, value: Any) -> None:
    if value and server.database(str(value)) is None:
        raise DistSQLError(1049, f"Unknown database '{value}'", "42000")


_RESTART = "change props.{key} in global.yaml and restart the proxy"

# how the running proxy shows and applies the props it keeps elsewhere than in its props (the rest of each
# variable, its type, default and use, is the props table's)
_HOOKS: dict[str, dict[str, Any]] = {
    "system-log-level": {"hint": "start the proxy with --log-level LEVEL"},
    "sql-show": {"current": _get_attr("sql_show"), "apply": _set_attr("sql_show")},
    "max-connections-size-per-query": {"current": _get_attr("max_connections_per_query"),
                                       "apply": _set_attr("max_connections_per_query")},
    "proxy-frontend-max-connections": {"current": _get_attr("max_connections"), "apply": _set_attr("max_connections")},
    "proxy-default-port": {"hint": "start the proxy with --port, or " + _RESTART},
    "proxy-netty-backlog": {"current": _get_attr("backlog")},
    "proxy-backlog": {"current": _get_attr("backlog")},
    "proxy-default-database": {"apply": _check_database},
    "proxy-merge-memory-rows": {"current": _get_attr("merge_memory_rows"), "apply": _set_attr("merge_memory_rows")},
    "proxy-statement-timeout-seconds": {"current": _get_attr("statement_timeout"),
                                        "apply": _set_attr("statement_timeout")},
    "proxy-statement-memory-bytes": {"current": _get_attr("statement_memory_bytes"),
                                     "apply": _set_attr("statement_memory_bytes")},
    "proxy-global-memory-bytes": {"current": _global_memory, "apply": _set_global_memory},
    "proxy-digest-max-entries": {"current": lambda server: server.digests.max_entries,
                                 "apply": lambda server, value: server.digests.resize(value)},
    "proxy-slow-query-threshold-milliseconds": {"current": _get_attr("slow_query_ms"),
                                                "apply": _set_attr("slow_query_ms")},
}

VARIABLES: tuple[Variable, ...] = tuple(
    Variable(p.key, p.kind, p.default, p.use, p.minimum, **_HOOKS.get(p.key, {})) for p in PROPS if not p.legacy
)
BY_NAME = {v.name: v for v in VARIABLES}
CACHED_CONNECTIONS = "cached_connections"


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def value_of(server: ProxyServer, variable: Variable) -> str:
    if variable.current is not None:
        return _show(variable.current(server))
    props = server.config.props
    if variable.key in props:
        return _show(props[variable.key])
    return variable.default


def cached_connections(session: Session) -> int:
    """Backend connections the session holds (ShardingSphere: the connection session's cached connections)."""
    return len(session.backends) + len(session.read_backends)


def rows(session: Session) -> list[tuple[str, str]]:
    """Every variable, sorted by name (SHOW DIST VARIABLES)."""
    out = [(v.name, value_of(session.server, v)) for v in VARIABLES]
    out.append((CACHED_CONNECTIONS, str(cached_connections(session))))
    return sorted(out)


def one(session: Session, name: str) -> tuple[str, str]:
    """SHOW DIST VARIABLE WHERE NAME = name."""
    low = name.lower().replace("-", "_")
    if low == CACHED_CONNECTIONS:
        return low, str(cached_connections(session))
    variable = BY_NAME.get(low)
    if variable is None:
        raise unknown(name)
    return low, value_of(session.server, variable)


def unknown(name: str) -> DistSQLError:
    return DistSQLError(1193, f"Unknown dist variable '{name}' (SHOW DIST VARIABLES lists them)", "HY000")


def _typed(variable: Variable, raw: str) -> Any:
    text = raw.strip()
    bad = DistSQLError(1231, f"Variable '{variable.name}' can't be set to the value of '{raw}'", "42000")
    if variable.kind == "bool":
        if text.lower() not in ("true", "false"):
            raise bad
        return text.lower() == "true"
    if variable.kind in ("int", "float"):
        try:
            value: int | float = int(text) if variable.kind == "int" else float(text)
        except ValueError:
            raise bad from None
        if variable.minimum is not None and value < variable.minimum:
            raise DistSQLError(1231, f"Variable '{variable.name}' can't be set to the value of '{raw}' (at least "
                              f"{variable.minimum:g})", "42000")
        return value
    return text


def set_variable(server: ProxyServer, name: str, raw: str) -> None:
    """SET DIST VARIABLE name = raw: validated, applied to the running proxy, kept in its props."""
    variable, value = check_setting(server, name, raw)
    apply_setting(server, variable, value)


def apply_setting(server: ProxyServer, variable: Variable, value: Any) -> None:
    """A validated value (check_setting, or another proxy's: proxy.cluster) into the running proxy."""
    if variable.apply is not None:
        variable.apply(server, value)
    props = server.config.props
    if isinstance(props, dict):
        props[variable.key] = value


def check_setting(server: ProxyServer, name: str, raw: str) -> tuple[Variable, Any]:
    """The variable and its typed value, or the DistSQLError SET DIST VARIABLE answers; changes nothing."""
    low = name.lower().replace("-", "_")
    variable = BY_NAME.get(low)
    if variable is None:
        if low == CACHED_CONNECTIONS:
            raise DistSQLError(1238, f"Variable '{low}' is a read only variable", "HY000")
        raise unknown(name)
    if variable.use == UNUSED:
        raise DistSQLError(1235, f"SET DIST VARIABLE {variable.name} is not supported by shardproxy: it does not "
                          f"use props.{variable.key}", "42000")
    if variable.use == STARTUP:
        hint = variable.hint or _RESTART.format(key=variable.key)
        raise DistSQLError(1238, f"Variable '{variable.name}' is a read only variable: shardproxy reads "
                          f"props.{variable.key} at start-up ({hint})", "HY000")
    value = _typed(variable, raw)
    if variable.apply is _check_database:
        _check_database(server, value)
    return variable, value
