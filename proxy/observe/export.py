"""The top query digests in Prometheus: the TOP digests by total time, labelled by digest id and logical database.

Why only the top ones: a label per digest would make every fingerprint ever seen a time series; the top 20 by
total time are the ones worth a graph, and their ids lead to the whole row in `SHOW QUERY DIGESTS`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

TOP = 20


def digest_families(digests: Any) -> Iterator[Any]:
    """Metric families of the TOP digests of `digests` (a proxy.observe.digests.DigestStore), built at scrape time."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    labels = ["digest", "database"]
    calls = CounterMetricFamily("shardproxy_digest_statements", "Statements of a top query digest", labels=labels)
    seconds = CounterMetricFamily("shardproxy_digest_seconds", "Total time of a top query digest", labels=labels)
    errors = CounterMetricFamily("shardproxy_digest_errors", "ERR answers of a top query digest", labels=labels)
    rows = CounterMetricFamily("shardproxy_digest_rows_sent", "Rows sent by a top query digest", labels=labels)
    p99 = GaugeMetricFamily("shardproxy_digest_p99_seconds", "p99 time of a top query digest", labels=labels)
    merged: dict[tuple[str, str], list[Any]] = {}  # (one series per digest and database: users summed)
    for d in digests.top():
        key = (d.digest_id, d.database)
        if key not in merged:
            if len(merged) == TOP:
                continue
            merged[key] = [0, 0.0, 0, 0, 0.0]
        m = merged[key]
        m[0] += d.count
        m[1] += d.total
        m[2] += sum(d.errors.values())
        m[3] += d.rows
        m[4] = max(m[4], d.p99())
    for (digest, database), (n, total, errs, sent, p) in merged.items():
        calls.add_metric([digest, database], n)
        seconds.add_metric([digest, database], total)
        errors.add_metric([digest, database], errs)
        rows.add_metric([digest, database], sent)
        p99.add_metric([digest, database], p)
    yield from (calls, seconds, errors, rows, p99)


__all__ = ["TOP", "digest_families"]
