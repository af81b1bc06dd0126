"""Query digests: statements grouped by fingerprint (proxy.observe.fingerprint), logical database and user, with
what an operator asks first: how often, how long, how many rows, which errors, how they were routed.

Why a fixed set of histogram buckets per digest and not a reservoir: recording is one `bisect` and one dict
increment on the statement path, memory per digest is bounded by the bucket count, and the p99 is read from the
buckets (at most one bucket's width off, 19 % here). Why an OrderedDict in CLOCK order (`DigestStore`): memory
stays bounded at `max_entries` with no reordering on the statement path, only when a new digest must make room.
"""

from __future__ import annotations

import hashlib
import time
from bisect import bisect_left
from collections import OrderedDict, defaultdict

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
        "placed",
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
        self.placed = 0  # `count` when it was last put at the store's recent end (the eviction's second chance)
        self.errors: dict[int, int] = {}
        self.rows = 0
        self.total = 0.0
        self.max = 0.0
        self.hist: defaultdict[int, int] = defaultdict(int)
        self.routes: defaultdict[str, int] = defaultdict(int)
        self.first_seen = now  # time.monotonic()
        self.last_seen = now

    def add(self, route: str, seconds: float, errno: int, rows: int, now: float) -> None:
        """One statement (`now`: time.monotonic() at its end)."""
        self.count += 1
        self.total += seconds
        if seconds > self.max:
            self.max = seconds
        self.hist[bisect_left(_BOUNDS, seconds)] += 1
        self.routes[route] += 1
        if errno:
            self.errors[errno] = self.errors.get(errno, 0) + 1
        self.rows += rows
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
    """Every digest seen, at most `max_entries` of them; the least recently seen leaves first.

    The order is kept as a CLOCK keeps it, not by moving a digest on every statement: a new digest goes to the end,
    and when one must leave, the first one that was counted since it was put there goes to the end again instead
    (its second chance); the first one that was not leaves."""

    def __init__(self, max_entries: int = 10000) -> None:
        self.max_entries = max_entries
        self.entries: OrderedDict[tuple[str, str, str], Digest] = OrderedDict()
        self.evicted = 0
        # changes whenever a digest leaves (evicted, reset): a Digest a session kept is still in `entries` while
        # the generation it saw is current
        self.generation = 0

    def record(
        self,
        fingerprint: str,
        database: str,
        user: str,
        route: str,
        seconds: float,
        errno: int,
        rows: int,
        now: float | None = None,
    ) -> Digest:
        """Count one statement (`now`: time.monotonic() at its end); returns its Digest, whose `add` may be called
        directly while `generation` is unchanged."""
        if now is None:
            now = time.monotonic()
        key = (fingerprint, database, user)
        entries = self.entries
        d = entries.get(key)
        if d is None:
            d = entries[key] = Digest(key, now)
            d.add(route, seconds, errno, rows, now)
            d.placed = 1
            self._bound(self.max_entries, key)
        else:
            d.add(route, seconds, errno, rows, now)
        return d

    def _bound(self, max_entries: int, keep: tuple[str, str, str] | None = None) -> None:
        """Down to `max_entries`, never evicting `keep` (the digest just made)."""
        entries = self.entries
        while len(entries) > max_entries:
            first = next(iter(entries.values()))
            if (first.count > first.placed or first.key == keep) and max_entries > 0:
                first.placed = first.count
                entries.move_to_end(first.key)
                continue
            entries.popitem(last=False)
            self.evicted += 1
            self.generation += 1

    def resize(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._bound(max_entries)

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


def _stamp(monotonic: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(monotonic + time.time() - time.monotonic()))


__all__ = ["COLUMNS", "Digest", "DigestStore"]
