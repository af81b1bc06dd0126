"""Cluster mode: many proxies, one configuration, coordinated through etcd (`mode: type: Cluster`).

proxy.cluster.hooks is what the rest of the proxy calls (a few lines each, at start-up, where DistSQL
changes are applied, and in SHOW PROCESSLIST / KILL / SHOW COMPUTE NODES); in Standalone mode every hook
is a no-op. The modules: `mode` (global.yaml's `mode:`), `etcd` (the v3 JSON gateway client), `registry`
(the keys and documents), `node` (joining, lease, watch), `apply` (another proxy's change taken here),
`remote` (processlist and KILL across nodes).
"""
