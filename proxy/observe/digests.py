"""Query digests: statements grouped by fingerprint (proxy.observe.fingerprint), logical database and user, with
what an operator asks first: how often, how long, how many rows, which errors, how they were routed.

Why a fixed set of histogram buckets per digest and not a reservoir: recording is one `bisect` and one dict
increment on the statement path, memory per digest is bounded by the bucket count, and the p99 is read from the
buckets (at most one bucket's width off, 19 % here). Why an OrderedDict: the least recently seen digest is the
first one, so keeping memory bounded at `max_entries` costs one `move_to_end` per statement and one `popitem` per
new digest past the bound.
"""

from __future__ import annotations

import bisect
import hashlib
import time
from collections import OrderedDict

# histogram bounds in seconds: 10 us to ~150 s in steps of x1.19 (the p99 read is the bucket's upper bound)
_BOUNDS: tuple[float, ...] = tuple(1e-5 * 1.19**i for i in range(96))

# route: how the statements were answered, with counts (`single:10,multi:2`): single (one node), multi (several),
# federated, refused, proxy (answered by the proxy itself), passthrough, replica (read/write splitting)
COLUMNS = (
    "digest",
    "digest_text",
    "database",
    "user",
    "count",
    "errors",
    "errors_by_errno",
    "rows_sent",
    "total_ms",
    "max_ms",
    "p99_ms",
    "route",
    "first_seen",
    "last_seen",
)


class Digest:
    """One fingerprint's counters for one logical database and user."""

    __slots__ = (
        "count",
        "database",
        "digest_id",
        "errors",
        "first_seen",
        "hist",
        "key",
        "last_seen",
        "max",
        "routes",
        "rows",
        "text",
        "total",
        "user",
    )

    def __init__(self, key: tuple[str, str, str], now: float) -> None:
        text, database, user = key
        self.key = key
        self.text = text
        self.database = database
        self.user = user
        # stable across restarts and proxies (as ProxySQL's digest): the fingerprint's hash, 16 hex digits
        self.digest_id = hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
        self.count = 0
        self.errors: dict[int, int] = {}
        self.rows = 0
        self.total = 0.0
        self.max = 0.0
        self.hist: dict[int, int] = {}
        self.routes: dict[str, int] = {}
        self.first_seen = now
        self.last_seen = now

    def p99(self) -> float:
        """Seconds: the upper bound of the bucket holding the 99th percentile (never above the maximum)."""
        want = self.count * 0.99
        seen = 0
        for i in sorted(self.hist):
            seen += self.hist[i]
            if seen >= want:
                return min(_BOUNDS[i] if i < len(_BOUNDS) else self.max, self.max)
        return self.max


class DigestStore:
    """Every digest seen, least recently seen first, at most `max_entries` of them."""

    def __init__(self, max_entries: int = 10000) -> None:
        self.max_entries = max_entries
        self.entries: OrderedDict[tuple[str, str, str], Digest] = OrderedDict()
        self.evicted = 0
        # changes whenever a digest leaves (evicted, reset): a Digest a session kept is still in `entries` while
        # the generation it saw is current
        self.generation = 0

    def record(
        self, fingerprint: str, database: str, user: str, route: str, seconds: float, errno: int, rows: int
    ) -> Digest:
        """Count one statement; returns its Digest, which `count` takes directly while `generation` is unchanged."""
        key = (fingerprint, database, user)
        entries = self.entries
        d = entries.get(key)
        if d is None:
            d = entries[key] = Digest(key, time.time())
            while len(entries) > self.max_entries:
                entries.popitem(last=False)
                self.evicted += 1
                self.generation += 1
            self.count(d, route, seconds, errno, rows, moved=True)
        else:
            self.count(d, route, seconds, errno, rows)
        return d

    def count(self, d: Digest, route: str, seconds: float, errno: int, rows: int, *, moved: bool = False) -> None:
        if not moved:
            self.entries.move_to_end(d.key)
        d.count += 1
        d.total += seconds
        if seconds > d.max:
            d.max = seconds
        i = bisect.bisect_left(_BOUNDS, seconds)
        hist = d.hist
        hist[i] = hist.get(i, 0) + 1
        routes = d.routes
        routes[route] = routes.get(route, 0) + 1
        if errno:
            errors = d.errors
            errors[errno] = errors.get(errno, 0) + 1
        d.rows += rows
        d.last_seen = time.time()

    def resize(self, max_entries: int) -> None:
        self.max_entries = max_entries
        while len(self.entries) > max_entries:
            self.entries.popitem(last=False)
            self.evicted += 1
            self.generation += 1

    def reset(self) -> None:
        self.entries.clear()
        self.generation += 1

    def top(self, limit: int | None = None, user: str | None = None) -> list[Digest]:
        """By total time, the most first (`user`: that user's only)."""
        chosen = self.entries.values() if user is None else [d for d in self.entries.values() if d.user == user]
        ranked = sorted(chosen, key=lambda d: d.total, reverse=True)
        return ranked if limit is None else ranked[:limit]

    def rows(self, limit: int | None = None, user: str | None = None) -> list[tuple[object, ...]]:
        """SHOW QUERY DIGESTS's rows."""
        return [
            (
                d.digest_id,
                d.text,
                d.database,
                d.user,
                d.count,
                sum(d.errors.values()),
                _counts(d.errors),
                d.rows,
                _ms(d.total),
                _ms(d.max),
                _ms(d.p99()),
                _counts(d.routes),
                _stamp(d.first_seen),
                _stamp(d.last_seen),
            )
            for d in self.top(limit, user)
        ]


def _counts(counts: dict[int, int] | dict[str, int]) -> str:
    """`1146:2,1235:1`; for routes `single:10,multi:2` (most first)."""
    return ",".join(f"{k}:{n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


__all__ = ["COLUMNS", "Digest", "DigestStore"]
