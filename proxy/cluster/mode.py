"""global.yaml `mode:` as ShardingSphere-Proxy 5.x writes it.

    mode:
      type: Cluster            # or Standalone (the default: conf/ only, nothing new)
      repository:
        type: etcd
        props:
          namespace: shardproxy           # every key of this cluster lives under /<namespace>/
          server-lists: 127.0.0.1:2379    # host:port[,host:port], with or without http://
          timeToLiveSeconds: 30           # a compute node's lease: how long a dead proxy stays listed
          connectionTimeout: 30           # seconds per registry request

Kept apart from proxy.config so that Standalone loading stays what it was; a wrong mode stops the start
with the file and the key (ConfigError).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.cluster.etcd import parse_endpoints
from routing.config import refuse_unknown_keys
from routing.errors import ConfigError

_REPOSITORY_PROPS = {"namespace", "server-lists", "timeToLiveSeconds", "connectionTimeout",
                     "retryIntervalMilliseconds", "maxRetries", "operationTimeoutMilliseconds"}


@dataclass(frozen=True)
class ClusterMode:
    namespace: str
    endpoints: tuple[tuple[str, int], ...]
    ttl: int = 30
    timeout: float = 30.0
    file: str = ""


def _positive(props: Mapping[str, Any], name: str, default: float, file: str) -> float:
    value = props.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"expected a positive number, got {value!r}", file=file,
                          key=f"mode.repository.props.{name}")
    return float(value)


def parse_mode(mode: Any, file: str, warn: Any = None) -> ClusterMode | None:
    """None for Standalone (or no `mode:`); the cluster's registry settings for Cluster."""
    if mode is None:
        return None
    if not isinstance(mode, Mapping):
        raise ConfigError(f"expected a mapping, got {type(mode).__name__}", file=file, key="mode")
    kind = str(mode.get("type") or "Standalone").strip()
    if kind.upper() == "STANDALONE":
        return None
    if kind.upper() != "CLUSTER":
        raise ConfigError(f"unknown mode type {kind!r}: use Standalone or Cluster", file=file, key="mode.type")
    repo = mode.get("repository")
    if not isinstance(repo, Mapping):
        raise ConfigError("Cluster mode needs a repository (type: etcd, props: {server-lists: ...})", file=file,
                          key="mode.repository")
    rtype = str(repo.get("type") or "").strip()
    if rtype.upper() != "ETCD":
        raise ConfigError(f"repository type {rtype or '(none)'} is not implemented by shardproxy: use etcd",
                          file=file, key="mode.repository.type")
    props = repo.get("props") or {}
    if not isinstance(props, Mapping):
        raise ConfigError("expected a mapping", file=file, key="mode.repository.props")
    refuse_unknown_keys(props, _REPOSITORY_PROPS, file=file, prefix="mode.repository.props.")
    servers = props.get("server-lists")
    if not servers:
        raise ConfigError("names no etcd server (server-lists: host:port[,host:port])", file=file,
                          key="mode.repository.props.server-lists")
    try:
        endpoints = tuple(parse_endpoints(str(servers)))
    except ValueError as exc:
        raise ConfigError(str(exc), file=file, key="mode.repository.props.server-lists") from None
    namespace = str(props.get("namespace") or "shardproxy").strip("/")
    if not namespace or any(c in namespace for c in " \t\n"):
        raise ConfigError(f"expected a name without blanks, got {props.get('namespace')!r}", file=file,
                          key="mode.repository.props.namespace")
    ttl = int(_positive(props, "timeToLiveSeconds", 30, file))
    timeout = _positive(props, "connectionTimeout", 30, file)
    return ClusterMode(namespace, endpoints, max(ttl, 1), timeout, file)
