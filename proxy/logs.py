"""structlog setup: one line per event, key=value, bound with connection id and data source."""

from __future__ import annotations

import datetime
import logging
import sys

import structlog


def _timestamp(_logger: object, _name: str, event: dict[str, object]) -> dict[str, object]:
    """Local time with its UTC offset (2026-12-01T10:06:45.123+00:00): unambiguous across machines."""
    event["timestamp"] = datetime.datetime.now().astimezone().isoformat(timespec="milliseconds")
    return event


def configure(level: str = "INFO", *, json: bool = False) -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(level=lvl, stream=sys.stderr, format="%(message)s")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _timestamp,
            structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
