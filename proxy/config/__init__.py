"""Loading `conf/`: `global.yaml` (users, props) and one `database-*.yaml` per logical database.

The format is ShardingSphere-Proxy 5.x's, so users can bring their files over unchanged. Problems are
reported with the file, the key and what is wrong; unknown keys are warnings (ShardingSphere has many
keys we do not need), wrong types are errors.

A rule or setting that would change the data or the security of the proxy, and that shardproxy does not
implement, stops the start (`ConfigError` with the file and the key) instead of being ignored: the rules
`!ENCRYPT`, `!MASK`, `!SHADOW`, `!DB_DISCOVERY` and any other tag but `!SHARDING`, `!BROADCAST`, `!SINGLE`,
`!READWRITE_SPLITTING`; `transaction.defaultType` other than LOCAL or XA; a `mode` other than Standalone or
Cluster over etcd (proxy.cluster.mode);
`props.proxy-frontend-ssl-enabled: true` (no TLS); a frontend protocol other than MySQL; an unknown
`authority.privilege.type` or authenticator type. Settings that change nothing here (`mode: Standalone`,
`transaction: LOCAL`, `sqlParser`, `logging` ...) are accepted.

The package: `model.py` (the loaded configuration as frozen dataclasses), `sections.py` (the data source,
`authority` and `transaction` sections, field by field), `load.py` (the files, the refusals, `load_config`).
`load_config` is re-exported here because most tests and the CLI import it from `proxy.config`.
"""

from proxy.config.load import load_config

__all__ = ["load_config"]
