"""What the cluster keeps in etcd, and turning it into a ProxyConfig (and back).

Every key lives under `/<namespace>/`:

    seeded                                   written with the first proxy's configuration, in one transaction
    metadata/databases/<db>                  {"file": "database-x.yaml", "doc": <the database document>}
    metadata/refresh/<db>                    DDL ran through a proxy: the others reload the tables' metadata
    props/<prop-key>                         the prop's value (JSON)
    authority, transaction                   global.yaml's sections, as documents
    nodes/compute/<instance-id>              a live proxy: host, port, slot, version (bound to its lease)
    nodes/slots/<n>                          the instance holding connection-id slot n (bound to its lease)
    processlist/requests/<req>, processlist/responses/<req>/<instance>
    kill/requests/<instance>/<req>, kill/responses/<req>
    jobs/migration/<instance>/<name>         (hook) long-running work's state kept by a node (ClusterNode.put_state)
    jobs/owners/<job-id>                     the proxy copying a migration job (bound to its lease; proxy.cluster.jobs)
    xa/owners/<owner>, xa/alive/<owner>      an XA owner (one proxy process under one lease; proxy.cluster.xa)
    xa/log/<owner>/<gtrid>                   its commit decisions, for another proxy to recover when it dies
    claims/xa/<owner>                        the live proxy recovering a dead owner (bound to its lease)

Documents are JSON: a database document is the parsed `database-*.yaml` with its rule tags as `__rule__`
keys (proxy.config's own form), so loading it again goes through exactly the validation the file does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from proxy.cluster.etcd import KeyValue
from proxy.config.load import database_config, load_yaml_file
from proxy.config.model import ProxyConfig
from proxy.config.sections import _transaction, _users
from proxy.privilege import parse_privilege
from routing.errors import ConfigError

SEEDED = "seeded"
DATABASES = "metadata/databases/"
METADATA_REFRESH = "metadata/refresh/"
PROPS = "props/"
AUTHORITY = "authority"
TRANSACTION = "transaction"
COMPUTE_NODES = "nodes/compute/"
SLOTS = "nodes/slots/"
PROCESSLIST_REQUESTS = "processlist/requests/"
PROCESSLIST_RESPONSES = "processlist/responses/"
KILL_REQUESTS = "kill/requests/"
KILL_RESPONSES = "kill/responses/"
MIGRATION_JOBS = "jobs/migration/"
XA_LOG = "xa/log/"
XA_OWNERS = "xa/owners/"
XA_ALIVE = "xa/alive/"
XA_CLAIMS = "claims/xa/"


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _global_doc(config: ProxyConfig) -> dict[str, Any]:
    for name in ("global.yaml", "server.yaml"):
        path = Path(config.conf_dir) / name
        if path.exists():
            doc = load_yaml_file(path) or {}
            return dict(doc) if isinstance(doc, dict) else {}
    return {}


def seed_items(config: ProxyConfig) -> list[tuple[str, str]]:
    """The local configuration as registry keys (relative to the namespace), for the first proxy."""
    gdoc = _global_doc(config)
    items = [(DATABASES + name, dumps({"file": Path(db.file).name, "doc": dict(db.doc or {})}))
             for name, db in config.databases.items()]
    items += [(PROPS + str(k), dumps(v)) for k, v in config.props.items()]
    items.append((AUTHORITY, dumps(gdoc.get("authority") or {"users": [
        {"user": f"{u.user}@{u.host}", "password": u.password, "admin": u.admin} for u in config.users]})))
    if gdoc.get("transaction") is not None:
        items.append((TRANSACTION, dumps(gdoc["transaction"])))
    return items


def running_items(config: ProxyConfig, databases: Mapping[str, Any], transaction: Mapping[str, Any] | None
                  ) -> list[tuple[str, str]]:
    """What a running proxy would seed an emptied registry with: its databases as they are now (rules and
    storage units changed since the start included: `databases` maps names to LogicalDatabase), its props and
    its transaction rule (ALTER TRANSACTION RULE's, not global.yaml's)."""
    current = replace(config, databases={name: db.config for name, db in databases.items()})
    items = [item for item in seed_items(current) if item[0] != TRANSACTION]
    if transaction is not None:
        items.append((TRANSACTION, dumps(dict(transaction))))
    return items


def database_file(config: ProxyConfig, name: str, file: str) -> str:
    """Where a database the registry holds would be written on this proxy (RDL writes it there too)."""
    local = config.databases.get(name)
    return local.file if local is not None else str(Path(config.conf_dir) / Path(file).name)


def config_from_registry(config: ProxyConfig, kvs: Iterable[KeyValue], prefix: str) -> ProxyConfig:
    """The registry's configuration in this proxy's ProxyConfig (its conf_dir and mode stay). Raises
    ConfigError when the registry holds something this proxy would not load from a file."""
    values = {kv.key.removeprefix(prefix): json.loads(kv.value) for kv in kvs if kv.key.startswith(prefix)
              and kv.key.removeprefix(prefix).startswith((DATABASES, PROPS, AUTHORITY, TRANSACTION))}
    warnings: list[str] = []
    source = f"etcd /{prefix.strip('/')}"
    databases = {}
    for key, value in values.items():
        if key.startswith(DATABASES):
            name = key.removeprefix(DATABASES)
            file = database_file(config, name, str(value.get("file") or f"database-{name}.yaml"))
            databases[name] = database_config(value["doc"], file, warnings.append)
    if not databases and not config.databases:
        raise ConfigError(f"neither {config.conf_dir} nor the cluster registry ({source}) has a logical database: "
                          "put database-<name>.yaml files in conf/ of the first proxy that starts")
    props = {key.removeprefix(PROPS): value for key, value in values.items() if key.startswith(PROPS)}
    authority = values.get(AUTHORITY)
    users = _users(authority, f"{source}/{AUTHORITY}", warnings.append) or config.users
    privilege = parse_privilege(authority.get("privilege") if isinstance(authority, Mapping) else None,
                                f"{source}/{AUTHORITY}", users, warnings.append)
    transaction = _transaction(values.get(TRANSACTION), f"{source}/{TRANSACTION}", warnings.append)
    if transaction.props.get("xa-instance-id") is not None:
        raise ConfigError("in Cluster mode every proxy process gets its own XA owner id from the registry; "
                          "remove transaction.props.xa-instance-id", file=transaction.file,
                          key="transaction.props.xa-instance-id")
    return replace(config, users=users, props=props, databases=databases or dict(config.databases),
                   privilege=privilege, transaction=transaction,
                   warnings=tuple(config.warnings) + tuple(warnings))
