"""Memory budgets: what one statement may hold in the proxy, and what every session of the process may hold together.

Why: a statement's rows mostly stream through (relayed frame by frame, or merged one row ahead per node), but some
of its work is held whole in the proxy: an in-memory merge's sort buffer, groups and DISTINCT keys, the units read
ahead when a data source has more units than connections, federation's copy batches, and the parse of its text.
Rows are counted by `proxy-merge-memory-rows`, but rows of a few bytes and rows of megabytes differ a millionfold;
these budgets count bytes (CPython object sizes, `merge.errors.held_bytes`, so what they compare is what the
process grows by), and refuse a charge *before* what it stands for is kept, never after the process grew:

* per statement, `props.proxy-statement-memory-bytes`: ERR 1038 ER_OUT_OF_SORTMEMORY (SQLSTATE HY001), MySQL's
  answer when one statement outgrows its own sort buffer (`sort_buffer_size`), which is the same situation: this
  statement asks too much, others are not concerned, and it fails the same way on every retry;
* for the whole process, `props.proxy-global-memory-bytes`: ERR 1041 ER_OUT_OF_RESOURCES (SQLSTATE HY000), MySQL's
  answer when the server as a whole has no memory left for a statement; it depends on what the other sessions
  hold at the moment, so a retry later may succeed (1037 ER_OUTOFMEMORY asks to restart the server; 1114 names a
  full table).

Either refusal fails the statement only: the session goes on, and what the statement held is given back when it
ends (`statement`). The refusals happen while reading (a merge, a read-ahead, a federation copy, the routing of a
text), before a write is sent, or inside a statement whose atomicity machinery (proxy.execution.atomic) takes
back what it wrote. 0 turns a budget off.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from protocol.errors import ServerError
from proxy.config.props import default as prop_default
from routing.kernel import first_word_kind
from routing.plan import StatementKind

STATEMENT_PROP = "proxy-statement-memory-bytes"
GLOBAL_PROP = "proxy-global-memory-bytes"
DEFAULT_STATEMENT_BYTES: int = prop_default(STATEMENT_PROP)  # (the props table holds the defaults)
DEFAULT_GLOBAL_BYTES: int = prop_default(GLOBAL_PROP)
# Peak bytes the routing of a text allocates (tracemalloc over ShardingKernel.route, sqlglot 30): per byte of text,
# an INSERT's VALUES rows are parsed whole (~180); other long texts are compiled from their compact form, each long
# list cut to two values, and pay for the values only (~60). A long quoted literal is one token: its copies only.
PARSE_BYTES_PER_INSERT_BYTE = 180
PARSE_BYTES_PER_TEXT_BYTE = 64
PARSE_BYTES_PER_LITERAL_BYTE = 8
# texts shorter than this are routed without a charge: their parse costs at most a few MiB
PARSE_CHARGED_FROM = 16 * 1024


class StatementMemoryError(ServerError):
    """One statement would hold more than props.proxy-statement-memory-bytes."""

    errno = 1038  # ER_OUT_OF_SORTMEMORY
    sqlstate = "HY001"


class GlobalMemoryError(ServerError):
    """Every session together would hold more than props.proxy-global-memory-bytes."""

    errno = 1041  # ER_OUT_OF_RESOURCES
    sqlstate = "HY000"


class GlobalMemory:
    """The process's bytes held on behalf of statements. Charged from the loop and from worker threads (merges
    and routing run in both), hence the lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int, what: str) -> None:
        with self._lock:
            if self.limit and self.used + nbytes > self.limit:
                raise GlobalMemoryError(
                    f"Out of resources: the proxy's statements would hold more than {self.limit} bytes together "
                    f"(props.{GLOBAL_PROP}; this one asked for {nbytes} more bytes of {what}, "
                    f"{self.used} are held); retry when fewer statements run, or raise props.{GLOBAL_PROP}"
                )
            self.used += nbytes

    def give(self, nbytes: int) -> None:
        with self._lock:
            self.used = max(0, self.used - nbytes)


class StatementMemory:
    """One statement's bytes (a `merge.errors.MemoryMeter`): refused past its own limit or the process's."""

    __slots__ = ("limit", "process", "used")

    def __init__(self, limit: int, process: GlobalMemory) -> None:
        self.limit = limit
        self.process = process
        self.used = 0

    def charge(self, nbytes: int, what: str) -> None:
        if self.limit and self.used + nbytes > self.limit:
            raise StatementMemoryError(
                f"Out of memory: this statement would hold more than {self.limit} bytes in the proxy "
                f"(props.{STATEMENT_PROP}; at {what}); add a LIMIT or narrower conditions, or raise "
                f"props.{STATEMENT_PROP}"
            )
        self.process.take(nbytes, what)
        self.used += nbytes

    def release(self, nbytes: int) -> None:
        nbytes = min(nbytes, self.used)
        self.used -= nbytes
        self.process.give(nbytes)

    def close(self) -> None:
        self.release(self.used)


_CURRENT: ContextVar[StatementMemory | None] = ContextVar("statement_memory", default=None)


def current() -> StatementMemory | None:
    """The running statement's budget (None outside one): a context variable, so the tasks and worker threads a
    statement starts charge the same budget without it being handed down through every engine."""
    return _CURRENT.get()


class Budgeted(Protocol):
    """What `statement` reads of the server (proxy.execution.context's ServerContext has it; a Protocol here
    keeps the two modules from importing each other)."""

    statement_memory_bytes: int
    global_memory: GlobalMemory


@contextmanager
def statement(server: Budgeted) -> Iterator[StatementMemory]:
    """The budget of one statement, current while it runs; whatever it still holds is given back at its end
    (a failed statement included), so the process's count never keeps a finished statement's bytes."""
    memory = StatementMemory(server.statement_memory_bytes, server.global_memory)
    token = _CURRENT.set(memory)
    try:
        yield memory
    finally:
        _CURRENT.reset(token)
        memory.close()


def parse_bytes(sql: str) -> int:
    """What routing `sql` may allocate at its peak (0 for a short text): a cost per byte of text, more for an
    INSERT / REPLACE, whose VALUES are parsed whole. A quoted literal costs only its copies (the tokenizer's string
    patterns walk it in one pass of a character class)."""
    if len(sql) < PARSE_CHARGED_FROM:
        return 0
    per = PARSE_BYTES_PER_INSERT_BYTE if first_word_kind(sql) is StatementKind.INSERT else PARSE_BYTES_PER_TEXT_BYTE
    literal = 0
    if "'" in sql or '"' in sql:
        literal = sum(n for m in _LITERAL.finditer(sql) if (n := m.end() - m.start()) >= _LONG)
    return (len(sql) - literal) * per + literal * PARSE_BYTES_PER_LITERAL_BYTE


# quoted literals (the kernel's own string pattern: one pass of a character class between escapes); those of _LONG
# characters or more are charged as literals
_LITERAL = re.compile(r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'" + r'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"', re.S)
_LONG = 4096
