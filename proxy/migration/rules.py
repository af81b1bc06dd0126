"""The configuration change COMMIT MIGRATION makes: the migrated table leaves its resharding window.

The table's own `oldDatabaseStrategy` / `oldTableStrategy` / `dualRouting` go; when the window came from
the rule-level defaults, those move into every other table that still relies on them (so their windows
stay exactly as they were) and leave the rule level."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from routing.config import RULE_KEY

WINDOW_KEYS = ("oldDatabaseStrategy", "oldTableStrategy")


def end_window(doc: Mapping[str, Any], table: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(doc))
    for rule in out.get("rules") or ():
        if not isinstance(rule, dict) or str(rule.get(RULE_KEY, "")).upper() != "SHARDING":
            continue
        tables = rule.get("tables") or {}
        defaults = {k: rule.pop(k) for k in WINDOW_KEYS if k in rule}
        for name, conf in tables.items():
            if not isinstance(conf, dict):
                continue
            if str(name).lower() == table.lower():
                for k in (*WINDOW_KEYS, "dualRouting"):
                    conf.pop(k, None)
                continue
            if any(k in conf for k in WINDOW_KEYS):
                continue  # its own window (the defaults never applied to it)
            for k, v in defaults.items():
                conf[k] = copy.deepcopy(v)
    return out
