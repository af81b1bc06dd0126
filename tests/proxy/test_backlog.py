"""The listen backlog's props: shardproxy's `proxy-backlog`, ShardingSphere's `proxy-netty-backlog`."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config.model import ProxyConfig
from proxy.server import DEFAULT_BACKLOG, listen_backlog


def config(props: dict[str, object]) -> ProxyConfig:
    return ProxyConfig((), props, {}, Path("."))


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, DEFAULT_BACKLOG),
        ({"proxy-netty-backlog": 2048}, 2048),
        ({"proxy-netty-backlog": "2048"}, 2048),
        ({"proxy-backlog": 1500}, 1500),
        ({"proxy-backlog": 1500, "proxy-netty-backlog": 2048}, 1500),
        ({"proxy-netty-backlog": "bad"}, DEFAULT_BACKLOG),
        ({"proxy-backlog": 0, "proxy-netty-backlog": 512}, 512),
        ({"proxy-backlog": -1}, DEFAULT_BACKLOG),
    ],
)
def test_backlog_prop(props: dict[str, object], expected: int) -> None:
    assert listen_backlog(config(props)) == expected


def test_default_is_well_above_a_thousand_clients() -> None:
    assert DEFAULT_BACKLOG >= 4096
