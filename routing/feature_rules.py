"""`!MASK` and `!SHADOW` read from a database's rules into its `DatabaseRules` (one of each at most).

Apart from routing.config, whose loader reads the routing rules: these two change what a route's answer shows
(mask) or where its units run (shadow), and the kernel routes without them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from routing.errors import ConfigError
from routing.mask.config import load_mask_rule
from routing.model import DatabaseRules
from routing.shadow.config import load_shadow_rule, with_groups


def with_feature_rules(
    rules: DatabaseRules, doc: Mapping[str, Any], physical: Sequence[str], file: str | None
) -> DatabaseRules:
    """`rules` with the document's `!MASK` and `!SHADOW` rules (unchanged without them)."""
    mask = shadow = None
    for i, rule in enumerate(doc.get("rules") or []):
        if not isinstance(rule, Mapping):
            continue
        tag = str(rule.get("__rule__", "")).upper()
        key = f"rules[{i}]"
        if tag == "MASK":
            if mask is not None:
                raise ConfigError("only one !MASK rule is allowed per database", file=file, key=key)
            mask = load_mask_rule(rule, file, key)
        elif tag == "SHADOW":
            if shadow is not None:
                raise ConfigError("only one !SHADOW rule is allowed per database", file=file, key=key)
            shadow = with_groups(load_shadow_rule(rule, physical, file, key), doc.get("rules") or [])
    if mask is None and shadow is None:
        return rules
    return replace(rules, mask=mask, shadow=shadow)


__all__ = ["with_feature_rules"]
