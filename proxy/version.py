"""The proxy's version (the installed distribution's, else a checkout's): --version, SHOW DIST VERSION."""

from __future__ import annotations


def version() -> str:
    try:
        from importlib.metadata import version as dist_version

        return dist_version("shardproxy")
    except Exception:
        return "0.1.0+checkout"


__all__ = ["version"]
