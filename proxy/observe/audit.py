"""The audit log: one JSON object per line for what an operator must be able to trace afterwards: connects,
logins (successful and failed), KILL, DistSQL that changes the proxy, and configuration reloads, each with the
user, the client's address and the connection id.

Why a file of its own and not structlog: the audit trail must not depend on the log level, and a security team
reads it with `jq`, not next to debug output. Written synchronously, line by line (the events are rare next to
statements; a line is whole in the file when the call returns). Never a password: statement texts go through
`redact` (string values after PASSWORD / IDENTIFIED BY and a URL's user:password), and a failed login records the
server's message, which names the user and whether a password was used, never the password.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import threading
from typing import IO, Any

import structlog

log = structlog.get_logger("shardproxy.audit")

# a string (or bare word) given for a password: `PASSWORD='x'`, `PASSWORD 'x'`, `IDENTIFIED BY 'x'`,
# `IDENTIFIED WITH plugin BY 'x'`, `IDENTIFIED BY PASSWORD 'hash'`, and a URL's credentials
_SECRET = re.compile(
    r"""(?P<key>\b(?:[\w-]*password[\w-]*(?:\s+for\s+\S+)?|identified(?:\s+with\s+\S+)?\s+(?:by|as|using)"""
    r"""(?:\s+password)?)\s*[=:]?\s*(?:(?:password\s*)?\(\s*)?)"""
    r"""(?P<value>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'?|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"?|[^\s,)'"(]+(?![^\s,)'"(]|\s*\())""",
    re.I,
)
_URL_CREDENTIALS = re.compile(r"(?P<key>://[^:/@\s'\"]+:)[^@/\s'\"]*(?=@)")
MAX_STATEMENT = 4096  # characters of a statement kept in a line


def redact(sql: str) -> str:
    """`sql` with every password value replaced by '***' (and cut to MAX_STATEMENT characters)."""
    text = _SECRET.sub(lambda m: m.group("key") + "'***'", sql)
    text = _URL_CREDENTIALS.sub(lambda m: m.group("key") + "***", text)
    return text if len(text) <= MAX_STATEMENT else text[:MAX_STATEMENT] + "..."


class AuditLog:
    """Appends events to `path` (None: the audit log is off and every call returns at once)."""

    def __init__(self, path: str | None) -> None:
        self.path = path or None
        self._file: IO[str] | None = None
        self._lock = threading.Lock()  # a reload may run in a thread; lines never interleave
        if self.path is not None:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8", buffering=1)
            except OSError as exc:  # the start stops: an audit trail asked for and not written is no trail
                raise OSError(f"cannot open props.proxy-audit-log-file {self.path}: {exc.strerror or exc}") from exc

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def write(self, event: str, **fields: Any) -> None:
        file = self._file
        if file is None:
            return
        record = {"time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"), "event": event}
        record.update(fields)
        line = json.dumps(record, default=str, ensure_ascii=False)
        try:
            with self._lock:
                file.write(line + "\n")
        except OSError as exc:  # a full disk must not cost the statement; the log says the trail has a hole
            log.error("audit_write_failed", path=self.path, error=str(exc), event=event)

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()


def session_fields(session: Any) -> dict[str, Any]:
    """Who: user, client address, connection id (and the logical database in use)."""
    db = getattr(session, "database", None)
    return {
        "user": session.user or None,
        "client": f"{session.client_host}:{getattr(session, 'client_port', 0)}",
        "conn": session.id,
        "database": db.name if db is not None else None,
    }


def statement_outcome(session: Any) -> dict[str, Any]:
    """The answer the session just gave: ok, or the errno."""
    return {"ok": not session.errored, "errno": session.last_errno if session.errored else None}


def audit_statement(session: Any, event: str, sql: str, outcome: dict[str, Any] | None = None, **fields: Any) -> None:
    """A statement that changed (or tried to change) the proxy: DistSQL, KILL. After its answer (`outcome`: the
    answer when the session has not sent it yet)."""
    audit: AuditLog | None = getattr(session.server, "audit", None)
    if audit is None or not audit.enabled:
        return
    audit.write(
        event, **session_fields(session), statement=redact(sql), **(outcome or statement_outcome(session)), **fields
    )


def config_reload(
    server: Any, *, ok: bool, source: str = "SIGHUP", changes: list[str] | None = None, error: str | None = None
) -> None:
    """For the configuration reload: one line per reload, applied (`ok`, what changed) or refused (`error`: the
    file and the key that made it invalid; nothing was changed)."""
    audit: AuditLog | None = getattr(server, "audit", None)
    if audit is None:
        return
    audit.write("config_reload", source=source, ok=ok, changes=changes or [], error=redact(error) if error else None)


__all__ = ["MAX_STATEMENT", "AuditLog", "audit_statement", "config_reload", "redact", "session_fields"]
