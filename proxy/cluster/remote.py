"""SHOW PROCESSLIST and KILL across the compute nodes, through the registry (as ShardingSphere does).

* processlist: the asking node puts `processlist/requests/<req>`; every other node answers under
  `processlist/responses/<req>/<instance>` with its sessions; the asker waits for one answer per live
  compute node (at most PROCESSLIST_WAIT), filters them by MySQL's rule (an admin sees all, others their
  own user's) and deletes the request.
* KILL id: the id's slot names the node that owns the session (proxy.cluster.node: ids are slot + 1 + k *
  MAX_SLOTS); the asker puts `kill/requests/<owner>/<req>` with its user, the owner checks the same rule as a
  local KILL and answers `kill/responses/<req>`: OK, or the errno and message the client gets.
Requests and answers are bound to the writer's lease: a node that dies leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import structlog

from proxy.cluster import registry as reg
from proxy.cluster.etcd import RegistryUnavailable, WatchEvent

if TYPE_CHECKING:
    from proxy.cluster.node import ClusterNode
    from proxy.session.session import Session

log = structlog.get_logger("shardproxy.cluster")

PROCESSLIST_WAIT = 1.5  # seconds an asker waits for the other nodes' sessions
KILL_WAIT = 3.0
_POLL = 0.02


def session_row(s: Session, now: float) -> list[Any]:
    host = f"{s.client_host}:{s.client_port}" if s.client_port else str(s.client_host)  # as MariaDB shows a client
    return [s.id, s.user, host, s.database.name if s.database else None, s.command,
            int(now - s.command_started), "", s.info]


async def _answer_processlist(node: ClusterNode, relative: str, event: WatchEvent) -> None:
    request = json.loads(event.value)
    if request.get("from") == node.instance_id or node.server is None:
        return
    req = relative.removeprefix(reg.PROCESSLIST_REQUESTS)
    now = time.monotonic()
    rows = [session_row(s, now) for s in list(node.server.sessions.values())]
    await node.client.put(node.key(f"{reg.PROCESSLIST_RESPONSES}{req}/{node.instance_id}"), reg.dumps(rows),
                          lease=node.lease)


async def _answer_kill(node: ClusterNode, relative: str, event: WatchEvent) -> None:
    if not relative.startswith(f"{reg.KILL_REQUESTS}{node.instance_id}/") or node.server is None:
        return
    request = json.loads(event.value)
    req = relative.rsplit("/", 1)[1]
    target = node.server.sessions.get(int(request["id"]))
    if target is None:
        answer = {"errno": 1094, "message": f"Unknown thread id: {request['id']}", "sqlstate": "HY000"}
    elif not (request.get("admin") or target.user == request.get("user")):
        answer = {"errno": 1095, "message": f"You are not owner of thread {request['id']}", "sqlstate": "HY000"}
    else:
        await node.server.kill_backend_queries(target)
        if request.get("scope") != "QUERY" and target.task is not None:
            target.task.cancel()
        log.info("cluster_kill", id=request["id"], scope=request.get("scope"), by=request.get("from"))
        answer = {"errno": 0}
    await node.client.put(node.key(reg.KILL_RESPONSES + req), reg.dumps(answer), lease=node.lease)


async def _reload_metadata(node: ClusterNode, relative: str, event: WatchEvent) -> None:
    if json.loads(event.value).get("from") == node.instance_id or node.server is None:
        return
    db = node.server.database(relative.removeprefix(reg.METADATA_REFRESH))
    if db is not None:
        await db.reload_metadata()


def install(node: ClusterNode) -> None:
    node.responders[reg.METADATA_REFRESH] = _reload_metadata
    node.responders[reg.PROCESSLIST_REQUESTS] = _answer_processlist
    node.responders[reg.KILL_REQUESTS] = _answer_kill


async def other_sessions(node: ClusterNode) -> list[list[Any]]:
    """Every other live node's sessions (rows of session_row); raises RegistryUnavailable."""
    nodes = [n for n in await node.compute_nodes() if n["instance_id"] != node.instance_id]
    if not nodes:
        return []
    req = uuid.uuid4().hex
    await node.client.put(node.key(reg.PROCESSLIST_REQUESTS + req), reg.dumps({"from": node.instance_id}),
                          lease=node.lease)
    prefix = node.key(f"{reg.PROCESSLIST_RESPONSES}{req}/")
    deadline = time.monotonic() + PROCESSLIST_WAIT
    try:
        while True:
            kvs, _rev = await node.client.get_prefix(prefix)
            if len(kvs) >= len(nodes) or time.monotonic() > deadline:
                break
            await asyncio.sleep(_POLL)
    finally:
        await node.client.delete(node.key(reg.PROCESSLIST_REQUESTS + req))
        await node.client.delete(prefix, prefix=True)
    if len(kvs) < len(nodes):
        log.warning("cluster_processlist_partial", answered=len(kvs), nodes=len(nodes))
    return [row for kv in kvs for row in json.loads(kv.value)]


async def kill(node: ClusterNode, session: Session, target_id: int, scope: str) -> dict[str, Any] | None:
    """KILL a session of another node: its answer ({"errno": 0} or an error), None when no node owns the id."""
    from proxy.cluster.node import MAX_SLOTS

    if target_id <= 0:
        return None
    slot = (target_id - 1) % MAX_SLOTS
    owner = await node.client.get(node.key(f"{reg.SLOTS}{slot}"))
    if owner is None or owner.value == node.instance_id:
        return None
    req = uuid.uuid4().hex
    config = session.user_config
    request = {"id": target_id, "scope": scope, "from": node.instance_id, "user": session.user,
               "admin": bool(config is not None and config.admin)}
    await node.client.put(node.key(f"{reg.KILL_REQUESTS}{owner.value}/{req}"), reg.dumps(request),
                          lease=node.lease)
    deadline = time.monotonic() + KILL_WAIT
    try:
        while time.monotonic() < deadline:
            answer = await node.client.get(node.key(reg.KILL_RESPONSES + req))
            if answer is not None:
                return dict(json.loads(answer.value))
            await asyncio.sleep(_POLL)
    finally:
        await node.client.delete(node.key(f"{reg.KILL_REQUESTS}{owner.value}/{req}"))
        await node.client.delete(node.key(reg.KILL_RESPONSES + req))
    raise RegistryUnavailable(f"the proxy owning connection {target_id} did not answer the KILL")
