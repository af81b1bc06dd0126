"""The metrics port's pages besides `/metrics` (proxy.metrics.MetricsEndpoint serves them)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from proxy.ops import health, status

if TYPE_CHECKING:
    from proxy.metrics import Route
    from proxy.ops.view import OpsServer as ProxyServer


def routes(server: ProxyServer) -> dict[str, Route]:
    return {
        "/healthz": partial(health.healthz, server),
        "/readyz": partial(health.readyz, server),
        "/status": partial(status.page, server),
        "/status.json": partial(status.json_page, server),
        "/status/main": partial(status.main_part, server),
    }


__all__ = ["routes"]
