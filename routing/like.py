"""SQL LIKE patterns as regular expressions, for the names the proxy matches itself (SHOW ... LIKE, SHOW COLUMNS
LIKE over an encrypted table's logical columns).

Why one place: `%` is any run of characters, `_` one, a backslash takes the next character literally, and the
match is case-insensitive and whole (an ``abc`` pattern does not match ``abc`` followed by a newline, as a regex
``$`` would), in every answer the proxy makes instead of a server.
"""

from __future__ import annotations

import functools
import re

__all__ = ["like_to_regex"]


@functools.lru_cache(maxsize=256)
def like_to_regex(pattern: str) -> re.Pattern[str]:
    """The compiled regex that `match`es exactly the strings the LIKE `pattern` matches (case-insensitively)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z", re.I | re.S)
