"""A small asyncio client for etcd's v3 JSON gateway (`/v3/kv/*`, `/v3/lease/*`, `/v3/watch`).

Why not gRPC: the gateway ships inside every etcd 3.x server, speaks HTTP/1.1 + JSON, and needs no
dependency beyond the standard library (aetcd pulls grpcio and protobuf). What the registry needs is
small: range / put / delete by prefix, a compare-and-put transaction (seeding), leases with keep-alive,
and one streaming watch. Keys and values are base64 on the wire; this module takes and returns `str`.

Every call tries the endpoints of `server-lists` in turn and raises `RegistryUnavailable` when none
answers within `connectionTimeout`: callers decide whether that refuses a change or only waits.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger("shardproxy.cluster.etcd")


class RegistryUnavailable(Exception):
    """No etcd endpoint answered (or it answered with an error). `maybe_applied`: a request may have
    reached etcd before its answer was lost (so a write may have happened); False when no endpoint could
    even be connected to, or etcd answered with an error."""

    def __init__(self, message: str, *, maybe_applied: bool = True) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str | None) -> str:
    return base64.b64decode(text or "").decode()


def prefix_end(prefix: str) -> str:
    """etcd's range_end for "every key starting with prefix" (the prefix with its last byte + 1)."""
    raw = bytearray(prefix.encode())
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return raw.decode("latin-1")
        raw.pop()
    return "\0"


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: str
    mod_revision: int
    lease: int = 0


@dataclass(frozen=True)
class WatchEvent:
    kind: str  # PUT | DELETE
    key: str
    value: str
    revision: int


def _kv(raw: dict[str, Any]) -> KeyValue:
    return KeyValue(_unb64(raw.get("key")), _unb64(raw.get("value")), int(raw.get("mod_revision", 0)),
                    int(raw.get("lease", 0)))


def parse_endpoints(server_lists: str) -> list[tuple[str, int]]:
    """`host:port[,host:port]`, each with or without `http://` (ShardingSphere's server-lists)."""
    out: list[tuple[str, int]] = []
    for part in str(server_lists).split(","):
        item = part.strip().removeprefix("http://").rstrip("/")
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"expected host:port, got {part.strip()!r}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("names no endpoint")
    return out


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("etcd closed the connection")
    parts = status_line.decode("latin-1").split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        size_line = await reader.readline()
        if not size_line:
            raise ConnectionError("etcd closed the stream")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


class EtcdClient:
    def __init__(self, endpoints: Sequence[tuple[str, int]], *, timeout: float = 3.0) -> None:
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._preferred = 0  # the endpoint that answered last
        self._connected = 0  # connections made (a request after one may have reached etcd)

    def _order(self) -> list[tuple[str, int]]:
        n = len(self.endpoints)
        return [self.endpoints[(self._preferred + i) % n] for i in range(n)]

    async def _open(self, host: str, port: int, path: str, body: dict[str, Any]
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int, dict[str, str]]:
        # asyncio.timeout rather than wait_for here and below: on Python 3.11 wait_for swallows a cancel that
        # comes as the awaited call completes, and the caller (a background loop being stopped) went on
        async with asyncio.timeout(self.timeout):
            reader, writer = await asyncio.open_connection(host, port)
        self._connected += 1
        try:
            payload = json.dumps(body).encode()
            writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
            await writer.drain()
            async with asyncio.timeout(self.timeout):
                status, headers = await _read_response(reader)
        except BaseException:
            writer.close()
            raise
        return reader, writer, status, headers

    async def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request/response call on the first endpoint that answers."""
        errors: list[str] = []
        connected = self._connected  # another call connecting meanwhile makes this one look sent: the safe side
        for i, (host, port) in enumerate(self._order()):
            try:
                reader, writer, status, headers = await self._open(host, port, path, body)
                try:
                    if "content-length" in headers:
                        async with asyncio.timeout(self.timeout):
                            data = await reader.readexactly(int(headers["content-length"]))
                    else:
                        data = b"".join([c async for c in _chunks(reader)])
                finally:
                    writer.close()
                answer = json.loads(data or b"{}")
                if status != 200:
                    raise RegistryUnavailable(f"etcd {host}:{port} {path}: HTTP {status} "
                                              f"{answer.get('message') or answer.get('error') or ''}".strip(),
                                              maybe_applied=False)
                self._preferred = (self._preferred + i) % len(self.endpoints)
                return dict(answer)
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
        raise RegistryUnavailable("no etcd endpoint answered (" + "; ".join(errors) + ")",
                                  maybe_applied=self._connected != connected)

    # -- kv ---------------------------------------------------------------------------------------------

    async def get_prefix(self, prefix: str) -> tuple[list[KeyValue], int]:
        """Every key under prefix, and the revision they were read at."""
        answer = await self.call("/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))})
        return [_kv(kv) for kv in answer.get("kvs", [])], int(answer.get("header", {}).get("revision", 0))

    async def get(self, key: str) -> KeyValue | None:
        answer = await self.call("/v3/kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs", [])
        return _kv(kvs[0]) if kvs else None

    async def put(self, key: str, value: str, *, lease: int = 0) -> int:
        body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        answer = await self.call("/v3/kv/put", body)
        return int(answer.get("header", {}).get("revision", 0))

    async def delete(self, key: str, *, prefix: bool = False) -> None:
        body = {"key": _b64(key)}
        if prefix:
            body["range_end"] = _b64(prefix_end(key))
        await self.call("/v3/kv/deleterange", body)

    async def put_all_if_absent(self, guard: str, items: Sequence[tuple[str, str]], *, lease: int = 0,
                                guard_value: str = "1") -> bool:
        """In one transaction: when `guard` does not exist, put it and every item; True when they were put."""
        puts = [{"requestPut": {"key": _b64(k), "value": _b64(v), **({"lease": str(lease)} if lease else {})}}
                for k, v in [(guard, guard_value), *items]]
        answer = await self.call("/v3/kv/txn", {
            "compare": [{"key": _b64(guard), "result": "EQUAL", "target": "CREATE", "create_revision": "0"}],
            "success": puts,
        })
        return bool(answer.get("succeeded"))

    async def put_if_revision(self, key: str, value: str, mod_revision: int) -> int | None:
        """Put key when its last change is still mod_revision (0: it does not exist); the new revision, or
        None when another writer changed it first."""
        answer = await self.call("/v3/kv/txn", {
            "compare": [{"key": _b64(key), "result": "EQUAL", "target": "MOD", "mod_revision": str(mod_revision)}],
            "success": [{"requestPut": {"key": _b64(key), "value": _b64(value)}}],
        })
        if not answer.get("succeeded"):
            return None
        return int(answer.get("header", {}).get("revision", 0))

    async def txn(self, compare: Sequence[dict[str, Any]], success: Sequence[dict[str, Any]],
                  failure: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """One etcd transaction, its comparisons built with `exists` / `absent` and its operations with
        `put_op` / `delete_op` / `range_op`; the raw answer (`succeeded`, `responses`)."""
        return await self.call("/v3/kv/txn", {"compare": list(compare), "success": list(success),
                                              "failure": list(failure)})

    # -- leases -----------------------------------------------------------------------------------------

    async def grant(self, ttl: int) -> int:
        answer = await self.call("/v3/lease/grant", {"TTL": str(ttl)})
        return int(answer["ID"])

    async def keepalive(self, lease: int) -> bool:
        """Refresh a lease once; False when it has expired already (its keys are gone)."""
        answer = await self.call("/v3/lease/keepalive", {"ID": str(lease)})
        result = answer.get("result", answer)
        return int(result.get("TTL", 0)) > 0

    async def revoke(self, lease: int) -> None:
        await self.call("/v3/lease/revoke", {"ID": str(lease)})

    # -- watch ------------------------------------------------------------------------------------------

    async def watch_prefix(self, prefix: str, start_revision: int) -> AsyncIterator[WatchEvent]:
        """The changes under prefix from start_revision on, until the stream breaks (ConnectionError /
        RegistryUnavailable: the caller reads the prefix again and watches anew)."""
        body = {"create_request": {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix)),
                                   "start_revision": str(start_revision)}}
        last_error: Exception | None = None
        for host, port in self._order():
            try:
                reader, writer, status, _headers = await self._open(host, port, "/v3/watch", body)
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
                last_error = exc
                continue
            try:
                if status != 200:
                    raise RegistryUnavailable(f"etcd {host}:{port} /v3/watch: HTTP {status}")
                buffer = b""
                async for chunk in _chunks(reader):
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        for event in _events(line):
                            yield event
                    if buffer.strip().endswith(b"}"):
                        with contextlib.suppress(ValueError):
                            events = _events(buffer)
                            buffer = b""
                            for event in events:
                                yield event
                raise ConnectionError("etcd ended the watch")
            finally:
                writer.close()
        raise RegistryUnavailable(f"no etcd endpoint accepted the watch ({last_error})")


def exists(key: str) -> dict[str, Any]:
    """A txn comparison: key is there (its create revision is past 0)."""
    return {"key": _b64(key), "result": "GREATER", "target": "CREATE", "create_revision": "0"}


def absent(key: str) -> dict[str, Any]:
    return {"key": _b64(key), "result": "EQUAL", "target": "CREATE", "create_revision": "0"}


def put_op(key: str, value: str, lease: int = 0) -> dict[str, Any]:
    return {"requestPut": {"key": _b64(key), "value": _b64(value), **({"lease": str(lease)} if lease else {})}}


def delete_op(key: str, *, prefix: bool = False) -> dict[str, Any]:
    body = {"key": _b64(key)}
    if prefix:
        body["range_end"] = _b64(prefix_end(key))
    return {"requestDeleteRange": body}


def range_op(key: str) -> dict[str, Any]:
    return {"requestRange": {"key": _b64(key)}}


def txn_kvs(answer: dict[str, Any]) -> list[KeyValue]:
    """The keys the range operations of a transaction's answer read."""
    out = []
    for response in answer.get("responses") or []:
        for kv in (response.get("response_range") or {}).get("kvs") or []:
            out.append(_kv(kv))
    return out


def _events(line: bytes) -> list[WatchEvent]:
    if not line.strip():
        return []
    message = json.loads(line)
    result = message.get("result") or {}
    if "error" in message:
        raise ConnectionError(f"etcd watch error: {message['error']}")
    if result.get("canceled") or result.get("compact_revision"):
        raise ConnectionError("etcd cancelled the watch (compacted); reading again")
    out = []
    for ev in result.get("events") or []:
        kv = ev.get("kv") or {}
        out.append(WatchEvent(ev.get("type", "PUT"), _unb64(kv.get("key")), _unb64(kv.get("value")),
                              int(kv.get("mod_revision", 0))))
    return out
