"""global.yaml `mode:` (proxy.cluster.mode) and the etcd client's pure helpers, one line per case."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.cluster.etcd import parse_endpoints, prefix_end
from proxy.cluster.mode import ClusterMode, parse_mode
from routing.errors import ConfigError

ETCD = {"type": "etcd", "props": {"server-lists": "127.0.0.1:2379"}}


@pytest.mark.parametrize(("mode", "expected"), [
    (None, None),
    ({"type": "Standalone"}, None),
    ({"type": "standalone", "repository": {"type": "JDBC"}}, None),
    ({}, None),
    ({"type": "Cluster", "repository": ETCD}, ClusterMode("shardproxy", (("127.0.0.1", 2379),), 30, 30.0, "g")),
    ({"type": "CLUSTER", "repository": {"type": "Etcd", "props": {
        "namespace": "/prod/", "server-lists": "http://a:1, http://b:2", "timeToLiveSeconds": 5,
        "connectionTimeout": 2}}}, ClusterMode("prod", (("a", 1), ("b", 2)), 5, 2.0, "g")),
])
def test_modes(mode: Any, expected: ClusterMode | None) -> None:
    assert parse_mode(mode, "g") == expected


@pytest.mark.parametrize(("mode", "key", "words"), [
    ({"type": "Federated"}, "mode.type", "Standalone or Cluster"),
    ({"type": "Cluster"}, "mode.repository", "needs a repository"),
    ({"type": "Cluster", "repository": {"type": "ZooKeeper"}}, "mode.repository.type", "use etcd"),
    ({"type": "Cluster", "repository": {"type": "etcd"}}, "mode.repository.props.server-lists", "names no etcd"),
    ({"type": "Cluster", "repository": {"type": "etcd", "props": {"server-lists": "nohost"}}},
     "mode.repository.props.server-lists", "host:port"),
    ({"type": "Cluster", "repository": {"type": "etcd", "props": {"server-lists": "a:1", "timeToLiveSeconds": 0}}},
     "mode.repository.props.timeToLiveSeconds", "positive"),
    ({"type": "Cluster", "repository": {"type": "etcd", "props": {"server-lists": "a:1", "connectionTimeout": "x"}}},
     "mode.repository.props.connectionTimeout", "positive"),
    ({"type": "Cluster", "repository": {"type": "etcd", "props": {"server-lists": "a:1", "namespace": "a b"}}},
     "mode.repository.props.namespace", "without blanks"),
    ("Cluster", "mode", "mapping"),
])
def test_bad_modes(mode: Any, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_mode(mode, "g")
    assert info.value.key == key and words in str(info.value), info.value


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:2379", [("127.0.0.1", 2379)]),
    ("http://etcd:2379", [("etcd", 2379)]),
    ("http://a:1/,b:2, http://c:3", [("a", 1), ("b", 2), ("c", 3)]),
    ("[::1]:2379", [("::1", 2379)]),
])
def test_endpoints(text: str, expected: list[tuple[str, int]]) -> None:
    assert parse_endpoints(text) == expected


@pytest.mark.parametrize("text", ["", "a", "a:b", ":1", " , "])
def test_bad_endpoints(text: str) -> None:
    with pytest.raises(ValueError):
        parse_endpoints(text)


@pytest.mark.parametrize(("prefix", "end"), [
    ("/ns/", "/ns0"),
    ("a", "b"),
    ("/x/props/", "/x/props0"),
])
def test_prefix_end(prefix: str, end: str) -> None:
    assert prefix_end(prefix) == end


def test_unknown_repository_props_are_refused() -> None:
    with pytest.raises(ConfigError) as info:
        parse_mode({"type": "Cluster", "repository": {"type": "etcd", "props": {"serverlists": "a:1"}}}, "g")
    assert str(info.value) == ("g: mode.repository.props.serverlists: unknown key 'serverlists': "
                               "did you mean server-lists?")
