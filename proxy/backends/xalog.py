"""The XA transaction manager's durable decision log: a local directory, one process at a time.

What is in the directory (`transaction.props.xa-log-dir`, by default `xa-log/` in the state directory,
props.proxy-state-directory, or else in the configuration directory):

* `instance-id` — this proxy's name in every xid it makes (random on first use, or the
  `xa-instance-id` prop); `XA RECOVER` branches whose gtrid starts with `sp-<instance-id>-` are this
  proxy's to finish, every other branch is left alone.
* `boot` — a counter bumped (and fsync'd) at every start, part of every gtrid: sequence numbers restart
  at 1 with each boot and still never repeat an xid.
* `decisions.log` — append-only records, one a line, each ending with its CRC-32 so that a line torn by
  a crash is recognised and ignored:
  `C <gtrid> <branches as JSON> <unix time>` — the commit decision, written and fsync'd after every
  branch is prepared and before any XA COMMIT; `D <gtrid>` — every branch committed, the record is done
  (not fsync'd: losing it only makes recovery look again); `A <gtrid>` — a commit decision whose write
  failed, so it may or may not be on disk: it does not count. No record means roll back (presumed abort:
  nothing is written for transactions that roll back).
  The file is rewritten with only the undone commit records (compacted) at start-up and whenever it grows
  past `COMPACT_BYTES`: write a new file, fsync it, rename it over the old one, fsync the directory.
* `lock` — flock'd while a process uses the directory: two proxies sharing a log would recover each
  other's transactions, so the second one refuses to start.

Commit records are written by one thread, in batches: the sessions committing at the same moment share
one write and one fsync (group commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger("shardproxy.xalog")

LOG_NAME = "decisions.log"
INSTANCE_FILE = "instance-id"
BOOT_FILE = "boot"
LOCK_FILE = "lock"
COMPACT_BYTES = 1 << 20


class LogUnavailable(Exception):
    """The log cannot be used (directory not writable, taken by another process, a failed write)."""


@dataclass(frozen=True)
class Branch:
    data_source: str
    server: str  # host:port of the data source's server: where recovery looks for the branch
    bqual: str


@dataclass(frozen=True)
class CommitRecord:
    gtrid: str
    branches: tuple[Branch, ...]
    logged_at: float  # unix time


def _line(body: str) -> bytes:
    data = body.encode("ascii")
    return data + b" %08x\n" % zlib.crc32(data)


def encode_commit(record: CommitRecord) -> bytes:
    branches = json.dumps([[b.data_source, b.server, b.bqual] for b in record.branches], separators=(",", ":"))
    return _line(f"C {record.gtrid} {branches} {record.logged_at:.3f}")


def decode_line(raw: bytes) -> tuple[str, str, CommitRecord | None] | None:
    """(kind, gtrid, the commit record for C) of one line, or None when it is torn or damaged."""
    body, _, crc = raw.rstrip(b"\n").rpartition(b" ")
    try:
        if not body or int(crc, 16) != zlib.crc32(body):
            return None
        kind, gtrid, *rest = body.decode("ascii").split(" ", 2)
        if kind == "C":
            branches, _, when = rest[0].rpartition(" ")
            items = json.loads(branches)
            return kind, gtrid, CommitRecord(gtrid, tuple(Branch(str(d), str(s), str(q)) for d, s, q in items),
                                             float(when))
        if kind in ("D", "A"):
            return kind, gtrid, None
    except (ValueError, IndexError, TypeError):
        return None
    return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, all or nothing, surviving a crash."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class DecisionLog:
    def __init__(self, directory: Path, *, instance_id: str | None = None) -> None:
        self.directory = directory
        self.path = directory / LOG_NAME
        self._wanted_instance = instance_id
        self.instance_id = ""
        self.boot = 0
        self.committed: dict[str, CommitRecord] = {}  # durable commit decisions not known done
        self.pending: set[str] = set()  # commit decisions being written: as good as in flight
        self.aborted: set[str] = set()  # decisions whose write failed: roll back (see `A` records)
        self.failed: str | None = None  # a write failed: no more commit decisions until a restart
        self._fd = -1
        self._lock_fd = -1
        self._size = 0
        self._queue: list[tuple[bytes, CommitRecord | None, asyncio.Future[None] | None]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.writes = 0  # batches written (each one write, and one fsync if it holds a decision)

    # -- opening ----------------------------------------------------------------------------------------

    def open(self) -> None:
        """Take the directory (synchronously, at start-up or at the first switch to XA): lock it, read the
        instance id and the undone decisions, bump the boot counter, compact."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise LogUnavailable(f"cannot use the XA log directory {self.directory}: {exc.strerror}") from exc
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise LogUnavailable(
                f"the XA log directory {self.directory} is in use by another shardproxy process (two proxies "
                f"must not share one: set transaction.props.xa-log-dir)") from exc
        try:
            self._open_locked()
        except OSError as exc:
            self.close()
            raise LogUnavailable(f"cannot use the XA log directory {self.directory}: {exc}") from exc

    def _open_locked(self) -> None:
        instance_file = self.directory / INSTANCE_FILE
        stored = instance_file.read_text().strip() if instance_file.exists() else ""
        if self._wanted_instance:
            if stored and stored != self._wanted_instance:
                log.warning("xa_instance_id_changed", stored=stored, configured=self._wanted_instance,
                            detail="branches prepared under the old id are no longer recognised as this proxy's")
            self.instance_id = self._wanted_instance
        else:
            self.instance_id = stored or secrets.token_hex(6)
        if stored != self.instance_id:
            _write_durably(instance_file, (self.instance_id + "\n").encode())
        boot_file = self.directory / BOOT_FILE
        try:
            previous = int(boot_file.read_text().strip()) if boot_file.exists() else 0
        except ValueError:
            previous = int(time.time())  # damaged: a value no earlier boot can have had
        self.boot = previous + 1
        _write_durably(boot_file, f"{self.boot}\n".encode())
        damaged = 0
        if self.path.exists():
            lines = self.path.read_bytes().split(b"\n")
            for i, raw in enumerate(lines):
                if not raw:
                    continue
                item = decode_line(raw + b"\n")
                if item is None:
                    if i != len(lines) - 1:  # a torn last line is a crash mid-write; anything else is damage
                        damaged += 1
                    continue
                kind, gtrid, record = item
                if kind == "C" and record is not None:
                    self.committed[gtrid] = record
                else:
                    self.committed.pop(gtrid, None)
        if damaged:
            log.warning("xa_log_damaged_lines", path=str(self.path), lines=damaged)
        self._compact_sync(b"".join(encode_commit(r) for r in self.committed.values()))
        log.info("xa_log_open", directory=str(self.directory), instance=self.instance_id, boot=self.boot,
                 undone_commits=len(self.committed))

    def _compact_sync(self, data: bytes) -> None:
        _write_durably(self.path, data)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = len(data)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                data = b"".join(line for line, _r, _f in self._queue)
                if data:
                    os.write(self._fd, data)
            os.close(self._fd)
            self._fd = -1
        self._queue = []
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    # -- writing ----------------------------------------------------------------------------------------

    async def log_commit(self, record: CommitRecord) -> None:
        """Write the commit decision and return once it is on disk (fsync'd). Raises LogUnavailable when it
        could not be written: then it does not count (an `A` record is written after it if possible)."""
        if self.failed is not None:
            raise LogUnavailable(f"the XA log cannot be written since an earlier failure ({self.failed}); "
                                 f"restart the proxy")
        if self._fd < 0:
            raise LogUnavailable("the XA log is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self.pending.add(record.gtrid)
        self._queue.append((encode_commit(record), record, future))
        self._kick()
        await asyncio.shield(future)  # a cancelled waiter does not stop the write: the flusher settles it

    def forget(self, gtrid: str) -> None:
        """Every branch of a committed transaction is committed: the record is done (written lazily)."""
        if self.committed.pop(gtrid, None) is not None and self._fd >= 0:
            self._queue.append((_line(f"D {gtrid}"), None, None))
            self._kick()

    def _kick(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xa-log")
        while self._queue and self._fd >= 0:
            batch, self._queue = self._queue, []
            data = b"".join(line for line, _r, _f in batch)
            sync = any(record is not None for _l, record, _f in batch)
            try:
                await loop.run_in_executor(self._executor, self._write, data, sync)
            except OSError as exc:
                self._failed(batch, exc)
                continue
            self.writes += 1
            self._size += len(data)
            for _, record, future in batch:
                if record is not None:
                    self.committed[record.gtrid] = record
                    self.pending.discard(record.gtrid)
                if future is not None and not future.done():
                    future.set_result(None)
            if self._size > COMPACT_BYTES:
                snapshot = b"".join(encode_commit(r) for r in self.committed.values())
                try:
                    await loop.run_in_executor(self._executor, self._compact_sync, snapshot)
                except OSError as exc:  # the old file is intact (rename is atomic): keep appending to it
                    log.warning("xa_log_compaction_failed", error=str(exc))

    def _write(self, data: bytes, sync: bool) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if sync:
            os.fdatasync(self._fd)

    def _failed(self, batch: list[tuple[bytes, CommitRecord | None, asyncio.Future[None] | None]],
                exc: OSError) -> None:
        """A write or fsync failed: what reached the disk is unknown. Every decision of the batch is void
        (the callers roll back); an `A` record says so if the disk takes it; no more decisions are taken
        (after a failed fsync Linux may have dropped the dirty pages: nothing written since can be trusted)."""
        self.failed = f"{exc.strerror or exc}"
        log.error("xa_log_write_failed", path=str(self.path), error=self.failed)
        aborts = b""
        for _, record, future in batch:
            if record is not None:
                self.pending.discard(record.gtrid)
                self.aborted.add(record.gtrid)
                aborts += _line(f"A {record.gtrid}")
            if future is not None and not future.done():
                future.set_exception(LogUnavailable(f"the commit decision could not be written to "
                                                    f"{self.path}: {self.failed}"))
        with contextlib.suppress(OSError):
            if aborts:
                self._write(aborts, True)


__all__ = ["Branch", "CommitRecord", "DecisionLog", "LogUnavailable", "decode_line", "encode_commit"]
