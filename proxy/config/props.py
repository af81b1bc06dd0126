"""The props of `global.yaml`: every key the proxy accepts, its type, its default, whether `SET DIST VARIABLE`
changes it at run time, and what it does.

This is the one table: the loader refuses a key it lacks, the code reads defaults from it
(`ProxyConfig.prop_int` and friends), `SHOW DIST VARIABLES` lists it, and the documentation's props page is
generated from it (`python3 -m proxy.config.reference`), so none of them can drift from the others.
ShardingSphere's own props are all accepted, so its files load unchanged; those shardproxy does not read are
marked `unused` and change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LIVE = "live"  # SET DIST VARIABLE applies it at once
STARTUP = "startup"  # read at start-up: change global.yaml and restart
UNUSED = "unused"  # a ShardingSphere prop shardproxy does not read: accepted, changes nothing


@dataclass(frozen=True)
class Prop:
    key: str  # as written in global.yaml's props
    kind: str  # bool | int | float | str | level
    default: str  # as SHOW DIST VARIABLES shows it; "" for none
    use: str  # LIVE | STARTUP | UNUSED
    doc: str  # one sentence or two: what it does, for the documentation
    minimum: float | None = None
    origin: str = "shardproxy"  # "ShardingSphere" for ShardingSphere's ConfigurationPropertyKey ones
    legacy: bool = False  # an older ShardingSphere version's: accepted, not a dist variable (5.5.2 has none)

    @property
    def typed_default(self) -> Any:
        """The default as the code uses it: a bool, int, float or str; None for none."""
        if self.default == "":
            return None
        if self.kind == "bool":
            return self.default == "true"
        if self.kind == "int":
            return int(self.default)
        if self.kind == "float":
            return float(self.default)
        return self.default


_SS = "ShardingSphere"

PROPS: tuple[Prop, ...] = (
    # ShardingSphere's ConfigurationPropertyKey and TemporaryConfigurationPropertyKey
    Prop("system-log-level", "level", "INFO", STARTUP, "The log level; `--log-level` on the command line "
         "sets it.", origin=_SS),
    Prop("sql-show", "bool", "false", LIVE, "Log each logic statement and every actual statement with its data "
         "source.", origin=_SS),
    Prop("sql-simple", "bool", "false", UNUSED, "ShardingSphere's short form of sql-show.", origin=_SS),
    Prop("kernel-executor-size", "int", "0", UNUSED, "ShardingSphere's executor threads.", origin=_SS),
    Prop("max-connections-size-per-query", "int", "4", LIVE, "Connections one statement may use per data "
         "source: a merge needs every node's result open at once, so up to this many actual tables of one data "
         "source are read in parallel (see [How statements run](../statements.md#connections)).",
         minimum=1, origin=_SS),
    Prop("check-table-metadata-enabled", "bool", "false", UNUSED, "ShardingSphere's metadata check at start.",
         origin=_SS),
    Prop("load-table-metadata-batch-size", "int", "1000", UNUSED, "ShardingSphere's metadata batch size.",
         origin=_SS),
    Prop("proxy-frontend-database-protocol-type", "str", "", STARTUP, "The protocol spoken to clients: only "
         "MySQL (or MariaDB) is accepted; any other stops the start.", origin=_SS),
    Prop("proxy-frontend-flush-threshold", "int", "128", UNUSED, "ShardingSphere's flush threshold.", origin=_SS),
    Prop("proxy-backend-query-fetch-size", "int", "-1", UNUSED, "ShardingSphere's fetch size.", origin=_SS),
    Prop("proxy-frontend-executor-size", "int", "0", UNUSED, "ShardingSphere's frontend threads.", origin=_SS),
    Prop("proxy-frontend-max-connections", "int", "0", LIVE, "Refuse clients beyond this many with ERR 1040 "
         "(0: unlimited).", minimum=0, origin=_SS),
    Prop("proxy-default-port", "int", "3307", STARTUP, "The port when `--port` is not given.", origin=_SS),
    Prop("proxy-netty-backlog", "int", "4096", STARTUP, "ShardingSphere's name of `proxy-backlog` (read when "
         "`proxy-backlog` is not set).", origin=_SS),
    Prop("cdc-server-port", "int", "33071", UNUSED, "ShardingSphere's CDC port.", origin=_SS),
    Prop("proxy-frontend-ssl-enabled", "bool", "false", STARTUP, "Offer TLS to clients in the greeting; clients "
         "that do not ask still connect in the clear.", origin=_SS),
    Prop("proxy-frontend-ssl-version", "str", "TLSv1.2,TLSv1.3", STARTUP, "The lowest and highest TLS versions "
         "allowed.", origin=_SS),
    Prop("proxy-frontend-ssl-cipher", "str", "", STARTUP, "An OpenSSL cipher list for client TLS.", origin=_SS),
    Prop("agent-plugins-enabled", "bool", "true", UNUSED, "ShardingSphere's agent plugins.", origin=_SS),
    Prop("proxy-meta-data-collector-enabled", "bool", "false", UNUSED, "ShardingSphere's metadata collector.",
         origin=_SS),
    Prop("system-schema-metadata-assembly-enabled", "bool", "true", UNUSED, "ShardingSphere's system schema "
         "assembly.", origin=_SS),
    # older ShardingSphere versions' props, accepted so their files load
    Prop("proxy-backend-executor-suitable", "str", "OLAP", UNUSED, "ShardingSphere 5.1's executor mode.",
         origin=_SS, legacy=True),
    Prop("check-duplicate-table-enabled", "bool", "false", UNUSED, "ShardingSphere 5.1's duplicate table check.",
         origin=_SS, legacy=True),
    Prop("sql-federation-type", "str", "NONE", UNUSED, "ShardingSphere 5.2's federation switch; shardproxy's is "
         "`proxy-federation-enabled`.", origin=_SS, legacy=True),
    Prop("proxy-hint-enabled", "bool", "false", UNUSED, "ShardingSphere 5.1's hint switch: hints always work "
         "here.", origin=_SS, legacy=True),
    # read by shardproxy only
    Prop("proxy-backlog", "int", "4096", STARTUP, "The listen backlog: connections the kernel completes and "
         "queues until the proxy accepts them, so a burst of clients is greeted, not dropped. Linux caps it at "
         "`net.core.somaxconn` (4096 since kernel 5.4, 128 before: raise it with "
         "`sysctl -w net.core.somaxconn=4096` for bursts of more than 128)."),
    Prop("proxy-mysql-default-version", "str", "", STARTUP, "The server version announced to clients (default: "
         "the first data source's)."),
    Prop("proxy-version-comment", "str", "", UNUSED, "Accepted for compatibility; `@@version_comment` is the "
         "data source's."),
    Prop("proxy-default-database", "str", "", LIVE, "Where table-less statements run before `USE` (default: the "
         "first logical database)."),
    Prop("proxy-merge-memory-rows", "int", "1000000", LIVE, "Rows a merge may hold in memory (GROUP BY without "
         "index order, sorting, DISTINCT); past it the statement ends with ERR 1038.", minimum=1),
    Prop("proxy-statement-timeout-seconds", "float", "0", LIVE, "Past it, KILL QUERY what the statement still "
         "runs on the data sources; one that does not answer even that (a frozen server, a network stall) is "
         "given 1 s more, then the statement ends with ERR 1969 (`Query execution was interrupted`, naming the "
         "silent data source) and its connections are discarded (0: off).", minimum=0),
    Prop("proxy-statement-memory-bytes", "int", str(512 * 1024 * 1024), LIVE, "What one statement may hold in the "
         "proxy's memory (in-memory merge buffers: sorts, groups, DISTINCT keys; units read ahead; federation copies; "
         "the routing of a long text, estimated from its size); past it, ERR 1038 before anything is written (0: no "
         "limit).", minimum=0),
    Prop("proxy-global-memory-bytes", "int", str(2 * 1024 * 1024 * 1024), LIVE, "What all statements together may "
         "hold, counted as for `proxy-statement-memory-bytes`; a statement that would pass it gets ERR 1041 (a retry "
         "when fewer statements run may pass) (0: no limit).", minimum=0),
    Prop("max-replication-lag-seconds", "float", "", STARTUP, "Read/write splitting: the default "
         "`maxReplicationLagSeconds` of every group (none: no limit)."),
    Prop("replica-health-check-interval-milliseconds", "int", "1000", STARTUP, "Read/write splitting: the "
         "default interval of the replica probe."),
    Prop("gtid-wait-timeout-milliseconds", "int", "500", STARTUP, "Read/write splitting: the default wait of "
         "`readAfterWrite: GTID`."),
    Prop("plan-cache-size", "int", "1024", STARTUP, "Statement shapes whose routing plan is kept (LRU), per "
         "logical database; as many prepared statement texts keep their scanned shape."),
    Prop("proxy-metrics-port", "int", "", STARTUP, "Serve Prometheus metrics over HTTP on this port "
         "(`GET /metrics`; 0 picks a free port; none: off); the metrics are listed in "
         "[Operations](../operations.md)."),
    Prop("proxy-metrics-host", "str", "127.0.0.1", STARTUP, "The metrics endpoint's address."),
    Prop("proxy-frontend-ssl-cert-file", "str", "", STARTUP, "The PEM certificate for client TLS (none: a "
         "self-signed one is made at start-up)."),
    Prop("proxy-frontend-ssl-key-file", "str", "", STARTUP, "The PEM key of `proxy-frontend-ssl-cert-file`."),
    Prop("proxy-federation-enabled", "bool", "true", STARTUP, "Run joins, subqueries and set operations that no "
         "one node can answer by copying the rows they need (false: refuse them)."),
    Prop("proxy-federation-max-rows", "int", "", STARTUP, "Rows federation may copy for one statement (none: "
         "`proxy-merge-memory-rows`); past it, ERR 1038."),
    Prop("proxy-digest-max-entries", "int", "10000", LIVE, "Query digests kept (`SHOW QUERY DIGESTS`: one per "
         "fingerprint, logical database and user); past it the least recently seen is dropped (0: digests off).",
         minimum=0),
    Prop("proxy-slow-query-threshold-milliseconds", "int", "0", LIVE, "Log a `slow_query` event for each "
         "statement that takes this long or longer (0: off).", minimum=0),
    Prop("proxy-audit-log-file", "str", "", STARTUP, "Append JSON lines for connects, logins, KILL, DistSQL "
         "changes and configuration reloads to this file (none: off)."),
    Prop("migration-batch-rows", "int", "1000", STARTUP, "MIGRATE TABLE: rows per copy batch (each batch holds "
         "the table's writes while it runs).", minimum=1),
    Prop("migration-rows-per-second", "int", "0", STARTUP, "MIGRATE TABLE: the copy's throttle (0: unlimited).",
         minimum=0),
    Prop("proxy-shutdown-grace-seconds", "float", "30", LIVE, "On SIGTERM: how long running statements and open "
         "transactions may go on (new connections are refused, `/readyz` answers 503) before the rest is closed.",
         minimum=0),
    Prop("proxy-state-directory", "str", "", STARTUP, "A writable directory for what the proxy writes: the "
         "`database-*.yaml` files DistSQL changes (read back at the next start in place of `conf/`'s) and the XA "
         "log (a relative `xa-log-dir` is under it); relative to `conf/` (none: `conf/` itself)."),
)

BY_KEY: dict[str, Prop] = {p.key: p for p in PROPS}
KNOWN_PROPS: frozenset[str] = frozenset(BY_KEY)


def default(key: str) -> Any:
    """The typed default of a prop of the table (KeyError for a key it lacks: a typo in the code)."""
    return BY_KEY[key].typed_default
