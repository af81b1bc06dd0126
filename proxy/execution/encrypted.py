"""Statements on a database with an `!ENCRYPT` rule: rewritten over the physical columns, results decrypted.

The rewrite itself is the kernel's (routing.encrypt.rewrite): a statement naming an encrypted table is rewritten
before anything else sees it, then runs on the ordinary path (pass-through, read/write splitting or the sharding
kernel) as if the client had sent the rewritten text. When its result set has columns to decrypt, the ordinary
path's answer is captured instead of sent (as a cursor's rows are, proxy.session.prepared), the named columns are
decrypted, and the answer goes out. A prepared statement on an encrypted table of a sharded database runs the same
way with its parameters written into the text, answered in binary rows; on a pass-through database its rewrite is
prepared on the backend connection and each execute runs it there, the client's parameters mapped onto the
rewrite's `?` and encrypted (`PreparedEncrypted`, `mapped_execute`), its binary rows decrypted.

Why capture rather than a merge stage: one place decrypts whatever answered (a relayed single node, a merge of
several, federation), in text and binary rows alike; the cost (the rows held once) is paid only by statements that
read encrypted columns. The socket callbacks' fast path (proxy.execution.fastpath) takes the SELECTs it can rewrite
from the text alone, and the executes of `PreparedEncrypted` statements, decrypting rows as they pass
(`DecryptingRelay`); anything else naming an encrypted table is left to the session's coroutine.

With `!MASK` beside `!ENCRYPT` a masked logical column that is encrypted is masked here, after decryption (as
ShardingSphere shows it: the mask of the plaintext): the ordinary path masks by the column's origin, which for a
decrypted column is its cipher column, which no mask names.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from protocol.binary import (
    ParamType,
    binary_cell_spans,
    binary_cell_widths,
    binary_null_bitmap_size,
    encode_execute,
    text_row_to_binary,
)
from protocol.cellswap import swap_cells
from protocol.constants import ColumnType, ErrorCode
from protocol.errors import ServerError
from protocol.framing import encode_packet
from protocol.packets import ColumnDefinition41, ERRPacket, decode_text_row, encode_text_row
from protocol.results import ResultSummary
from protocol.wire import Reader, lenenc_str
from proxy.execution.masking import Masks, mask_row, masked_definitions
from proxy.frontend.wire import CapturedWriter
from routing.encrypt.algorithms import Encryptor, bytes_decryptor
from routing.encrypt.rewrite import (
    Encrypted,
    MissingColumns,
    ParamMap,
    physical_params,
    rewrite_encrypted,
    touches_encrypted,
)

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

__all__ = [
    "REWRITTEN",
    "DecryptingRelay",
    "OtherStatement",
    "PreparedEncrypted",
    "captured",
    "decrypted_binary_answer",
    "encrypted_statement",
    "fast_encrypted_execute",
    "fast_encrypted_select",
    "mapped_execute",
    "physical_binding",
    "prepared_encrypted",
    "prepared_rewrite",
    "relay_prepared_encrypted",
    "run_encrypted",
    "run_encrypted_prepared",
]

log = structlog.get_logger("shardproxy.encrypt")

#: set while a rewritten statement runs: its text is physical already, not to be rewritten again
REWRITTEN: ContextVar[bool] = ContextVar("shardproxy_encrypt_rewritten", default=False)

# (id of the logical database, lower-case table) -> its physical columns, for `SELECT *` over a table the
# kernel's metadata does not hold (a pass-through database loads none); dropped at any DDL through here
_COLUMNS: dict[tuple[int, str], list[str]] = {}
_MAX_LOOKUPS = 16
#: the statements the rewrite reads; any other naming an encrypted table (CREATE, ALTER, DROP, TRUNCATE, SHOW ...)
#: runs as written: it is about the physical table
_DATA_STATEMENTS = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH", "("})
_FIRST_WORD = re.compile(r"(?:\s+|/\*(?!!).*?\*/|(?:--(?=\s)|#)[^\n]*(?:\n|$))*([A-Za-z]+|\()", re.S)


def _first_word(sql: str) -> str:
    m = _FIRST_WORD.match(sql)
    return m.group(1).upper() if m else ""


def encrypted_statement(db: LogicalDatabase, sql: str) -> bool:
    """Whether `sql` on `db` must go through the encrypt rewrite (it names an encrypted table)."""
    rule = db.config.encrypt
    return rule is not None and not REWRITTEN.get() and touches_encrypted(sql, rule)


async def _rewrite(
    session: Session, db: LogicalDatabase, sql: str, params: Sequence[Any] | None, first: str | None = None
) -> Encrypted | None:
    rule = db.config.encrypt
    assert rule is not None
    key = id(db)
    if first is None:
        first = _first_word(sql)
    if not first:
        raise ServerError(
            "a statement on an encrypted table that starts with an executable comment (/*! ... */): "
            "the proxy cannot tell what it does; write it without the comment",
            errno=ErrorCode.NOT_SUPPORTED_YET,
            sqlstate="42000",
        )
    if first not in _DATA_STATEMENTS:
        for k in [k for k in _COLUMNS if k[0] == key]:
            del _COLUMNS[k]  # (a DDL may change a table's columns)
        return None

    def columns_of(table: str) -> Sequence[str] | None:
        return _COLUMNS.get((key, table.lower())) or db.metadata.columns(table)

    for _ in range(_MAX_LOOKUPS):
        try:
            return rewrite_encrypted(sql, rule, params=params, columns_of=columns_of, mode=session.txn.mode_flags)
        except MissingColumns as missing:
            _COLUMNS[(key, missing.table.lower())] = await _load_columns(db, missing.table)
    raise ServerError(
        "SELECT * over too many tables with encrypted columns; name the columns",
        errno=ErrorCode.NOT_SUPPORTED_YET,
        sqlstate="42000",
    )


async def _load_columns(db: LogicalDatabase, table: str) -> list[str]:
    name = table.replace("\\", "\\\\").replace("'", "''")
    sql = (
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = "
        f"'{name}' ORDER BY ORDINAL_POSITION"
    )
    sources = [db.pass_through_source] if db.pass_through_source is not None else list(db.sources.values())
    for source in sources:
        res = await source.admin_execute(sql)
        if isinstance(res, list) and res:
            return [(v or b"").decode("utf-8", errors="surrogateescape") for v, *_ in res]
    raise ServerError(f"Table '{db.name}.{table}' doesn't exist", errno=1146, sqlstate="42S02")


async def prepared_rewrite(session: Session, db: LogicalDatabase, sql: str) -> Encrypted | None:
    """The rewrite of a statement being prepared, `?` kept (one per physical column), to describe it (None: it
    runs as written)."""
    return await _rewrite(session, db, sql, None)


@dataclass(slots=True, eq=False)
class PreparedEncrypted:
    """A prepared statement on an encrypted table that runs prepared on the backend, as the statement of its
    rewrite (`sql`, prepared on the connection at PREPARE): the client's parameters go through unchanged when none is
    bound to an encrypted column (`params` None: the client's COM_STMT_EXECUTE is only re-addressed), else each
    `?` of the rewrite takes the client's parameter `params` names, encrypted by its encryptor (`mapped_execute`);
    a SELECT's binary rows are decrypted as they pass (`DecryptingRelay`, `decrypted_binary_answer`). Kept with the
    rule and sql_mode it was rewritten under: another of either, and it runs as text (its values written in)."""

    rule: object
    mode: int
    sql: str
    decrypt: tuple[Encryptor | None, ...] | None
    params: ParamMap | None = None
    select: bool = True  # a SELECT (the fast path runs it); else INSERT / UPDATE / DELETE / REPLACE
    # the client's parameter types last mapped, the rewrite's types for them and their encoding (`mapped_execute`)
    types: Sequence[ParamType] | None = None
    physical_types: tuple[ParamType, ...] = ()
    type_block: bytes = b""


#: what runs prepared as its rewrite (the statements whose rewrite reads only the text)
_PREPARED_STATEMENTS = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE"})


def prepared_encrypted(
    session: Session, db: LogicalDatabase, sql: str, encrypted: Encrypted | None, num_params: int, physical: int
) -> PreparedEncrypted | None:
    """What is kept of a statement prepared on a database with an `!ENCRYPT` rule (`encrypted`: its rewrite,
    `num_params` the client's placeholders, `physical` the rewrite's) to run it prepared as its rewrite: on a
    pass-through database prepared on the backend; on a sharded one a SELECT, its rewrite routed and prepared on the
    node's connection at each execute; either way its parameters mapped and encrypted when some are bound to an
    encrypted column (`physical_binding`). None when its executes run as text: `!MASK` to apply after decryption, a
    read/write splitting group (each execute classified), no SELECT / INSERT / UPDATE / DELETE / REPLACE, a rewrite
    that read a table's columns (a `*`), a text the fast relay does not take, placeholders the rewrite cannot map."""
    source = db.pass_through_source
    first = _first_word(sql)
    if (
        encrypted is None
        or (source is not None and not source.fast_relay)
        or (source is None and (db.kernel is None or first != "SELECT"))
        or db.rules.mask is not None
        or first not in _PREPARED_STATEMENTS
        or encrypted.reads_columns
        or _COMMENT.search(sql) is not None
    ):
        return None
    params = encrypted.param_map if encrypted.encrypts_params else None
    if physical != (num_params if params is None else len(params)):
        return None  # (None too for a map the rewrite could not vouch for)
    return PreparedEncrypted(
        db.config.encrypt, session.txn.mode_flags, encrypted.sql, encrypted.decrypt, params, first == "SELECT"
    )


def fast_encrypted_execute(session: Session, db: LogicalDatabase, kept: PreparedEncrypted) -> bool:
    """Whether the rewrite `kept` at PREPARE still holds for an execute now (same rule, same sql_mode)."""
    return kept.rule is db.config.encrypt and kept.mode == session.txn.mode_flags and db.rules.mask is None


#: an encrypted parameter's type: a string (the ciphertext's text)
_CIPHERTEXT = ParamType(ColumnType.VAR_STRING)


def mapped_execute(
    kept: PreparedEncrypted, statement_id: int, values: Sequence[object], types: Sequence[ParamType]
) -> bytes:
    """The COM_STMT_EXECUTE payload of the backend's `statement_id` (`kept`'s rewrite) for the client's `values` of
    `types`: each `?` of the rewrite takes its client parameter, as it came or encrypted (sent as a string); NULL
    stays NULL. No cursor (a cursor's rows are the proxy's). Raises what the encryptors raise (ServerError: a LIKE
    encryptor's character without its dictionary) and ValueError / TypeError for a value its type does not hold."""
    if kept.params is None:
        return encode_execute(statement_id, values, types)
    physical, bound, block = physical_binding(kept, values, types)
    return encode_execute(statement_id, physical, bound, block)


def physical_binding(
    kept: PreparedEncrypted, values: Sequence[object], types: Sequence[ParamType]
) -> tuple[tuple[object, ...], tuple[ParamType, ...], bytes]:
    """The values of the rewrite's parameters (`kept.params`, not None) for the client's `values` of `types`, as it
    came or encrypted, their types (an encrypted value a string) and the encoding of those types. Raises what the
    encryptors raise (ServerError: a LIKE encryptor's character without its dictionary)."""
    params = kept.params
    assert params is not None
    if types is not kept.types:  # (the fast path's decoder gives back the types it was given when none are bound)
        kept.physical_types = tuple(types[i] if encryptor is None else _CIPHERTEXT for i, encryptor in params)
        kept.type_block = b"".join(t.encode() for t in kept.physical_types)
        kept.types = types
    return tuple(physical_params(params, values)), kept.physical_types, kept.type_block


#: what answers a statement that is no data statement (SHOW, DESCRIBE ...): (session, database, text, the session's
#: text path, binary rows) -> whether it answered (else the statement runs as written)
OtherStatement = Callable[["Session", "LogicalDatabase", str, Callable[[str], Awaitable[None]], bool], Awaitable[bool]]


async def run_encrypted(
    session: Session,
    db: LogicalDatabase,
    sql: str,
    run_text: Callable[[str], Awaitable[None]],
    *,
    binary: bool = False,
    other: OtherStatement | None = None,
) -> None:
    """Run `sql` (which names an encrypted table) rewritten, through `run_text` (the session's ordinary text path),
    and answer with its encrypted columns decrypted; `binary`: in binary rows (an executed prepared statement);
    `other`: what may answer a statement the rewrite does not read (proxy.session.encrypt_metadata's)."""
    first = _first_word(sql)
    if other is not None and first and first not in _DATA_STATEMENTS:
        if await other(session, db, sql, run_text, binary):
            return
    try:
        encrypted = await _rewrite(session, db, sql, None, first)
    except ServerError as exc:
        session.error(exc.errno, exc.message, exc.sqlstate)
        return
    text = sql if encrypted is None else encrypted.sql
    decrypt = None if encrypted is None else encrypted.decrypt
    token = REWRITTEN.set(True)
    try:
        if decrypt is None and not binary:
            await run_text(text)
            return
        packets = await captured(session, lambda: run_text(text))
    finally:
        REWRITTEN.reset(token)
    session.wire.send_many(_answer(session, db, packets, decrypt, binary))


async def run_encrypted_prepared(
    session: Session, kept: PreparedEncrypted, run_prepared: Callable[[str], Awaitable[None]]
) -> None:
    """Execute a prepared SELECT whose rewrite `kept` holds (`fast_encrypted_execute`) on a sharded database as the
    socket callbacks' fast path does: its rewrite executed as a prepared statement with the client's parameters
    (`run_prepared`: the session's binary path, which leaves each node's connection with it prepared, for the fast
    path's next execute), the cipher cells of its binary rows decrypted, the same answer either path gives."""
    token = REWRITTEN.set(True)
    try:
        decrypt = kept.decrypt
        if decrypt is None:  # nothing to decrypt: answered as it comes
            await run_prepared(kept.sql)
            return
        packets = await captured(session, lambda: run_prepared(kept.sql))
    finally:
        REWRITTEN.reset(token)
    session.wire.send_many(decrypted_binary_answer(session, packets, decrypt))


async def captured(session: Session, run: Callable[[], Awaitable[object]]) -> list[bytes]:
    """The packets `run` answers the client with, kept instead of sent."""
    capture = CapturedWriter()
    saved = session.writer, session.wire.writer, session.wire.seq
    session.writer = session.wire.writer = capture  # type: ignore[assignment]
    try:
        await run()
    finally:
        session.writer, session.wire.writer, session.wire.seq = saved
    return [p for _f, _l, p in capture.frames.packets()]


def _decrypted_masks(
    db: LogicalDatabase, columns: Sequence[ColumnDefinition41], decrypt: tuple[Encryptor | None, ...]
) -> Masks:
    """(index, algorithm) of each decrypted column whose logical column `!MASK` masks (found by its cipher
    column's origin, which the answer's definition names)."""
    mask, rule = db.rules.mask, db.config.encrypt
    if mask is None or rule is None:
        return ()
    out = []
    for i, encryptor in enumerate(decrypt):
        col = columns[i]
        if encryptor is None or not col.org_table or not col.org_name:
            continue
        table = rule.table(col.org_table)
        logical = None if table is None else table.ciphers.get(col.org_name.lower())
        algorithm = None if logical is None else mask.algorithm(col.org_table, logical.name)
        if algorithm is not None:
            out.append((i, algorithm))
    return tuple(out)


def _answer(
    session: Session,
    db: LogicalDatabase,
    packets: list[bytes],
    decrypt: tuple[Encryptor | None, ...] | None,
    binary: bool,
) -> list[bytes]:
    """The captured answer with its encrypted columns decrypted (and its rows made binary for `binary`)."""
    if not packets or packets[0][:1] in (b"\x00", b"\xff", b"\xfe"):
        return packets  # OK, ERR: no result set
    count = Reader(packets[0]).lenenc_int() or 0
    head = packets[: 1 + count]
    start = 1 + count + (0 if session.deprecate_eof else 1)
    rows, tail = packets[start:-1], packets[-1:]
    if any(r[:1] == b"\xff" for r in rows):  # an error in the middle of the rows: as it came
        return packets
    if decrypt is not None and len(decrypt) != count:
        return [
            _error(
                session,
                f"the result has {count} columns where the encrypt rewrite expected {len(decrypt)} "
                "(did the table change?); run the statement again",
            )
        ]
    columns = [ColumnDefinition41.decode(p) for p in head[1:]] if binary or decrypt else []
    masks = _decrypted_masks(db, columns, decrypt) if decrypt is not None else ()
    out = list(packets[:start])
    if masks:
        shown = masked_definitions(columns, masks)
        for i, _algorithm in masks:
            if shown[i] != columns[i]:
                out[1 + i] = shown[i].encode()
        columns = shown
    for payload in rows:
        values = list(decode_text_row(payload, count))
        if decrypt is not None:
            for i, encryptor in enumerate(decrypt):
                value = values[i]
                if encryptor is None or value is None:
                    continue
                try:
                    values[i] = encryptor.decrypt(value.decode("utf-8", errors="surrogateescape")).encode(
                        "utf-8", errors="surrogateescape"
                    )
                except Exception as exc:  # not this encryptor's ciphertext (wrong key, plaintext left in place)
                    log.warning("decrypt_failed", column=columns[i].name, error=str(exc))
                    return [
                        _error(
                            session,
                            f"the value of column {columns[i].name} cannot be decrypted by its encryptor "
                            f"({encryptor.type}): it was not written by it (another key, or plaintext)",
                        )
                    ]
        if masks:
            values = mask_row(values, masks)
        out.append(text_row_to_binary(values, columns) if binary else encode_text_row(values))
    out.extend(tail)
    return out


def _error(session: Session, message: str) -> bytes:
    return ERRPacket(ErrorCode.UNKNOWN_ERROR, message, "HY000").encode(session.capabilities)


# --- the socket callbacks' fast path ------------------------------------------------------------------------------


#: what the fast path runs for an encrypted SELECT: its rewritten text and the encryptor of each result column (None:
#: nothing to decrypt); a plain tuple, made for every point select
FastRewrite = tuple[str, "tuple[Encryptor | None, ...] | None"]


def kept_encrypted_select(session: Session, db: LogicalDatabase, sql: str) -> FastRewrite | None:
    """The kept rewrite of a SELECT that differs from one rewritten before only by its last number (see
    `_TRAILING_NUMBER`): one dict lookup that also answers `encrypted_statement` (only a text naming an encrypted
    table is kept), so the fast path's usual statement skips its regex; None when none is kept."""
    rule = db.config.encrypt
    if rule is None or db.rules.mask is not None or REWRITTEN.get():
        return None
    cut = _trailing_number(sql)
    if cut < 0:
        return None
    known = _BY_PREFIX.get((rule, session.txn.mode_flags, sql[:cut]))
    return None if known is None else (known[0] + sql[cut:], known[1])


def fast_encrypted_select(session: Session, db: LogicalDatabase, sql: str) -> FastRewrite | None:
    """The rewrite of a SELECT on an encrypted table for the socket callbacks' relay (proxy.execution.fastpath),
    when it needs nothing the session's coroutine does: a kept recipe or one compiled from the text alone (no
    column lookup), no `!MASK` to apply after decryption; None otherwise (and for anything the rewrite refuses:
    the coroutine answers it with the refusal)."""
    rule = db.config.encrypt
    if rule is None or db.rules.mask is not None:
        return None
    mode = session.txn.mode_flags
    cut = _trailing_number(sql)
    if cut >= 0:  # (a kept prefix is a SELECT's)
        known = _BY_PREFIX.get((rule, mode, sql[:cut]))
        if known is not None:
            return known[0] + sql[cut:], known[1]
    if _first_word(sql) != "SELECT":
        return None
    key = id(db)

    def columns_of(table: str) -> Sequence[str] | None:
        return _COLUMNS.get((key, table.lower())) or db.metadata.columns(table)

    try:
        encrypted = rewrite_encrypted(sql, rule, params=None, columns_of=columns_of, mode=mode)
    except Exception:  # MissingColumns (a lookup to await), a refusal: the coroutine's
        return None
    if encrypted is None:
        return None
    if (
        cut >= 0
        and encrypted.sql.endswith(tail := sql[cut:])
        and _PREFIX_UNSAFE.search(sql) is None
    ):
        if len(_BY_PREFIX) >= _BY_PREFIX_MAX:
            _BY_PREFIX.clear()
        _BY_PREFIX[(rule, mode, sql[:cut])] = (
            encrypted.sql[: len(encrypted.sql) - len(tail)],
            encrypted.decrypt,
        )
    return encrypted.sql, encrypted.decrypt


#: a text's last token when it is a number (``... WHERE id = 42``): the rewrite of the text before it, kept, serves
#: every number (it is not one the rewrite encrypts: its text came through unchanged). Not for a text whose rewrite
#: reads more than the shape: a position in ORDER BY / GROUP BY (refused or not by its value), a ``*`` (its table's
#: columns now)
_TRAILING_NUMBER = re.compile(r"\s*;?\s*\d+(?![\w$.`'\"])")  # matched on the text reversed: anchored at its end


def _trailing_number(sql: str) -> int:
    """Where the text's last token starts when it is a number, else -1 (a search from the start would try every
    position)."""
    m = _TRAILING_NUMBER.match(sql[::-1])
    return -1 if m is None else len(sql) - m.end()


_PREFIX_UNSAFE = re.compile(r"\*|\b(?:ORDER|GROUP)\b|/\*|--|#", re.I)
#: a prepared statement's text is rewritten once, at PREPARE, for every execute (its values are parameters): only a
#: comment keeps it on the text path (what a comment holds the rewrite does not read); a `*` that the rewrite expanded
#: into the table's columns is `Encrypted.reads_columns`
_COMMENT = re.compile(r"/\*|--|#")
_BY_PREFIX: dict[tuple[object, int, str], tuple[str, tuple[Encryptor | None, ...] | None]] = {}
_BY_PREFIX_MAX = 256


#: each decrypt tuple (a rewrite's, kept by the rewrite caches) -> its encryptors' decryptions of bytes
_DECODERS: dict[tuple[Encryptor | None, ...], tuple[Callable[[bytes], bytes] | None, ...]] = {}
_DECODERS_MAX = 256


def _decoders(decrypt: tuple[Encryptor | None, ...]) -> tuple[Callable[[bytes], bytes] | None, ...]:
    known = _DECODERS.get(decrypt)
    if known is None:
        if len(_DECODERS) >= _DECODERS_MAX:
            _DECODERS.clear()
        known = _DECODERS[decrypt] = tuple(None if e is None else bytes_decryptor(e) for e in decrypt)
    return known


def _changed(count: int, expected: int) -> str:
    return (
        f"the result has {count} columns where the encrypt rewrite expected {expected} "
        "(did the table change?); run the statement again"
    )


class _Undecryptable(Exception):
    """The cell of column `index` is not its encryptor's ciphertext."""

    def __init__(self, index: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.index = index


def _undecryptable(name: str, decrypt: tuple[Encryptor | None, ...], exc: _Undecryptable) -> str:
    encryptor = decrypt[exc.index]
    assert encryptor is not None
    log.warning("decrypt_failed", column=name, error=str(exc))
    return (
        f"the value of column {name} cannot be decrypted by its encryptor ({encryptor.type}): it was not written by "
        "it (another key, or plaintext)"
    )


def _decrypted_binary_row(
    payload: bytes, widths: tuple[int, ...], decoders: tuple[Callable[[bytes], bytes] | None, ...]
) -> bytes:
    """A binary row (cells laid out by `widths`) with the cells of the columns that have a decoder decrypted in
    place, the bytes around them as they came; _Undecryptable for a value its encryptor did not write,
    MalformedPacket for a row that does not hold its cells."""
    spans = binary_cell_spans(payload, widths)
    out: list[bytes] = []
    done = 0
    for i, decoder in enumerate(decoders):
        span = spans[i]
        if decoder is None or span is None:
            continue
        start, stop = span
        first = payload[start]
        if widths[i] == -2 and first < 0xFB:
            value = payload[start + 1 : stop]
        else:
            value = Reader(payload[start:stop]).lenenc_str() or b""
        try:
            plain = decoder(value)
        except Exception as exc:  # not this encryptor's ciphertext (wrong key, plaintext left in place)
            raise _Undecryptable(i, exc) from exc
        out.append(payload[done:start])
        out.append(lenenc_str(plain))
        done = stop
    if not out:
        return payload
    out.append(payload[done:])
    return b"".join(out)


def decrypted_binary_answer(
    session: Session, packets: list[bytes], decrypt: tuple[Encryptor | None, ...]
) -> list[bytes]:
    """A captured answer in binary rows (an executed prepared statement's) with its encrypted columns decrypted:
    what `DecryptingRelay` makes of it on the fast path, a lone ERR for a value its encryptor did not write."""
    if not packets or packets[0][:1] in (b"\x00", b"\xff", b"\xfe"):
        return packets  # OK, ERR: no result set
    count = Reader(packets[0]).lenenc_int() or 0
    start = 1 + count + (0 if session.deprecate_eof else 1)
    rows = packets[start:-1]
    if any(r[:1] == b"\xff" for r in rows):  # an error in the middle of the rows: as it came
        return packets
    if len(decrypt) != count:
        return [_error(session, _changed(count, len(decrypt)))]
    columns = [ColumnDefinition41.decode(p) for p in packets[1 : 1 + count]]
    widths = binary_cell_widths(columns)
    decoders = _decoders(decrypt)
    out = list(packets[:start])
    for payload in rows:
        try:
            out.append(_decrypted_binary_row(payload, widths, decoders))
        except _Undecryptable as exc:
            return [_error(session, _undecryptable(columns[exc.index].name, decrypt, exc))]
    out.extend(packets[-1:])
    return out


async def relay_prepared_encrypted(
    session: Session, conn: BackendConnection, kept: PreparedEncrypted, payload: bytes
) -> None:
    """The session's coroutine's execute of `kept` (`payload`: its COM_STMT_EXECUTE for `conn`): relayed as it
    comes when nothing is decrypted, else captured and answered decrypted."""
    decrypt = kept.decrypt
    if decrypt is None:
        await session.relay_on(conn, payload)
        return
    packets = await captured(session, lambda: session.relay_on(conn, payload))
    session.wire.send_many(decrypted_binary_answer(session, packets, decrypt))


class _Head(NamedTuple):
    """An answer's head as it came, walked: its column definitions' payloads (and the cell layout, for binary rows)."""

    raw: bytes
    columns: list[bytes]
    count: int
    widths: tuple[int, ...] | None  # binary rows: protocol.binary.binary_cell_widths of the definitions
    # `_whole`'s lane (protocol.cellswap): the one decrypted column's index (-1: none or several; the walk), and for
    # binary rows where its cell starts when every cell before it has a fixed width and the `nulls`-byte NULL
    # bitmap is all zero (-1: text rows)
    single: int = -1
    fixed: int = -1
    nulls: int = 0


def _single(
    decrypt: tuple[Encryptor | None, ...], count: int, widths: tuple[int, ...] | None
) -> tuple[int, int, int]:
    """`_Head.single`, `.fixed` and `.nulls` of an answer of `count` columns decrypted by `decrypt` (binary rows:
    its cells' `widths`); single is -1 where `DecryptingRelay._whole` does not apply: the walk answers."""
    found = [i for i, e in enumerate(decrypt) if e is not None]
    if len(found) != 1 or count != len(decrypt):
        return -1, -1, 0
    i = found[0]
    if widths is None:
        return i, -1, 0
    nulls = binary_null_bitmap_size(len(widths))
    before = widths[:i]
    if not all(w >= 0 for w in before):
        return -1, -1, 0
    return i, 1 + nulls + sum(before), nulls


#: (decrypt tuple, EOF after the definitions, binary rows) -> the latest heads of answers decrypted by it
_HEADS: dict[tuple[object, bool, bool], list[_Head]] = {}
_HEADS_MAX = 256
_HEADS_PER_KEY = 4


#: answer bytes held back, at most, so that a value that cannot be decrypted ends the answer with only an ERR
_HOLD_LIMIT = 1 << 16


class DecryptingRelay:
    """The fast path's relay of an encrypted SELECT's answer: the relay the fast path would use (`inner`: framing,
    the summary, names) followed by a walk of its output frames that decrypts the named columns of each text row, in
    place of the captured answer of `run_encrypted`. A row keeps its sequence id (only its length changes).

    The answer is held until it ends (up to `_HOLD_LIMIT` bytes), so that a value its encryptor cannot decrypt
    answers the same lone ERR as the coroutine's path; past that, such a value raises (the fast path ends the
    command with an ERR after the rows sent)."""

    __slots__ = (
        "_binary",
        "_capabilities",
        "_columns",
        "_count",
        "_decoders",
        "_decrypt",
        "_eof",
        "_failure",
        "_head_key",
        "_held",
        "_inner",
        "_pending",
        "_phase",
        "_widths",
        "done",
        "rows",
        "summary",
    )

    def __init__(
        self, session: Session, decrypt: tuple[Encryptor | None, ...], inner: Any, *, binary: bool = False
    ) -> None:
        self._decrypt: tuple[Encryptor | None, ...] | None = None
        self._binary = self._eof = False
        self.restart(session, decrypt, inner, binary=binary)

    def restart(
        self, session: Session, decrypt: tuple[Encryptor | None, ...], inner: Any, *, binary: bool = False
    ) -> None:
        """Ready for the next answer: one relay per session serves each of its encrypted SELECTs in turn (what
        depends on the statement alone is worked out again only for another one)."""
        eof = not session.deprecate_eof  # an EOF after the column definitions
        if decrypt is not self._decrypt or binary is not self._binary or eof is not self._eof:
            self._decrypt = decrypt
            self._decoders = _decoders(decrypt)
            self._binary = binary  # an executed prepared statement's answer: binary rows
            self._eof = eof
            self._head_key = (decrypt, eof, binary)
        self._widths: tuple[int, ...] | None = None
        self._capabilities = session.capabilities
        self._inner = inner
        self._columns: list[bytes] = []
        self._count = 0
        self._phase = 0  # 0: the column count, 1: definitions, 2: their EOF, 3: rows, 4: the rest as it is
        self._pending = b""
        self._failure: str | None = None
        self._held: list[bytes] | None = []
        self.done = False
        self.rows = 0
        self.summary: ResultSummary = inner.summary  # (the inner relay's, read by the fast path at the end)

    def feed(self, data: bytes) -> bytes:
        inner = self._inner
        framed = inner.feed(data)
        self.rows = inner.rows
        if inner.done and self._phase == 0 and not self._pending and self._held == []:
            whole = self._whole(framed)  # the usual answer: all of it in one read, its head known
            if whole is not None:
                self.done = True
                self._held = None
                return whole
        out = self._walk(framed)
        if self._failure is not None:  # what was held and what comes is dropped: the answer is the ERR
            self._held = []
            if not inner.done:
                return b""
            self.done = True
            err = ERRPacket(ErrorCode.UNKNOWN_ERROR, self._failure, "HY000")
            inner.summary.error = err
            inner.summary.result_sets = 0
            return encode_packet(err.encode(self._capabilities), 1)[0]
        held = self._held
        if inner.done:
            self.done = True
            if held:
                held.append(out)
                out = b"".join(held)
            self._held = None
            return out
        if held is not None:
            held.append(out)
            if sum(map(len, held)) <= _HOLD_LIMIT:
                return b""
            self._held = None
            out = b"".join(held)
        return out

    def _whole(self, buf: bytes) -> bytes | None:
        """A whole answer whose head is known and whose one decrypted column's value is found without walking the
        rest of each row: each row's value replaced, the bytes around it as they came. None for anything else
        (another head, a NULL, a value that does not decrypt, a frame that does not fit): `_walk` answers it from
        the start, as if this had not looked."""
        heads = _HEADS.get(self._head_key)
        if heads is None:
            return None
        for head in heads:
            if buf.startswith(head.raw):
                break
        else:
            return None
        i = head.single
        if i < 0:
            return None
        decoder = self._decoders[i]
        assert decoder is not None
        rest = swap_cells(buf, len(head.raw), head.fixed, head.nulls, i, decoder)
        return None if rest is None else head.raw + rest

    def _walk(self, data: bytes) -> bytes:
        """`data` (the client's frames, maybe the start of one more) with each row's encrypted values decrypted."""
        buf = self._pending + data if self._pending else data
        if self._phase == 4:
            self._pending = b""
            return buf
        out = []
        pos, end = 0, len(buf)
        fresh = self._phase == 0  # the answer's head starts this buffer: known, or to be remembered
        if fresh:
            for head in _HEADS.get(self._head_key, ()):
                if buf.startswith(head.raw):
                    pos, fresh = len(head.raw), False
                    self._count, self._columns, self._phase = head.count, head.columns, 3
                    self._widths = head.widths
                    out.append(head.raw)
                    break
        while end - pos >= 4:
            length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
            if end - pos < 4 + length:
                break
            stop = pos + 4 + length
            phase = self._phase
            first = buf[pos + 4] if length else 0
            if length == 0xFFFFFF:  # a packet of 16 MB or more: not decrypted here
                self._fail("a row of 16 MB or more in an encrypted SELECT's answer; select fewer columns")
                phase = self._phase = 4
            if phase == 3:
                if (first == 0xFE and length < 9) or first == 0xFF:
                    self._phase = 4
                    out.append(buf[pos:])
                    pos = end
                    break
                payload = self._row(buf[pos + 4 : stop])
                n = len(payload)
                out.append(bytes((n & 0xFF, (n >> 8) & 0xFF, n >> 16, buf[pos + 3])) + payload)
                pos = stop
                continue
            if phase == 0:
                if first in (0x00, 0xFF, 0xFB):  # OK, ERR, LOCAL INFILE: no result set
                    self._phase = 4
                    out.append(buf[pos:])
                    pos = end
                    break
                self._count = Reader(buf[pos + 4 : stop]).lenenc_int() or 0
                self._phase = 1
            elif phase == 1:
                self._columns.append(buf[pos + 4 : stop])
                if len(self._columns) == self._count:
                    self._phase = 2 if self._eof else 3
            elif phase == 2:
                self._phase = 3
            out.append(buf[pos:stop])
            pos = stop
            if fresh and self._phase == 3:
                self._remember(buf[:pos])
                fresh = False
        self._pending = buf[pos:]
        return b"".join(out)

    def _remember(self, raw: bytes) -> None:
        """Keep the answer's head (column count, definitions, their EOF) as it came: the same statement's next
        answer starts with the same bytes, and its walk starts at the rows."""
        if self._binary and self._widths is None:
            self._widths = binary_cell_widths([ColumnDefinition41.decode(c) for c in self._columns])
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        heads = _HEADS.setdefault(self._head_key, [])
        lane = _single(self._decrypt, self._count, self._widths)
        heads.insert(0, _Head(raw, self._columns, self._count, self._widths, *lane))
        del heads[_HEADS_PER_KEY:]

    def _row(self, payload: bytes) -> bytes:
        if self._failure is not None:
            return payload
        if self._binary:
            return self._binary_row(payload)
        decrypt = self._decrypt
        n = len(decrypt)
        if self._count != n:
            return self._fail(_changed(self._count, n))
        # the row's values read in place: a value is a length-encoded string or 0xFB (NULL)
        values: list[bytes | None] = []
        pos, end = 0, len(payload)
        try:
            for _ in range(n):
                first = payload[pos]
                if first < 0xFB:
                    start, pos = pos + 1, pos + 1 + first
                elif first == 0xFB:
                    values.append(None)
                    pos += 1
                    continue
                else:
                    width = 2 if first == 0xFC else 3 if first == 0xFD else 8 if first == 0xFE else -1
                    if width < 0:
                        raise IndexError
                    start = pos + 1 + width
                    pos = start + int.from_bytes(payload[pos + 1 : start], "little")
                if pos > end:
                    raise IndexError
                values.append(payload[start:pos])
        except IndexError:  # fewer values than the rewrite expected
            pos = -1
        if pos != end:
            return self._fail(_changed(self._count, n))
        for i, decoder in enumerate(self._decoders):
            value = values[i]
            if decoder is None or value is None:
                continue
            try:
                values[i] = decoder(value)
            except Exception as exc:  # not this encryptor's ciphertext (wrong key, plaintext left in place)
                encryptor = decrypt[i]
                assert encryptor is not None
                name = ColumnDefinition41.decode(self._columns[i]).name
                log.warning("decrypt_failed", column=name, error=str(exc))
                return self._fail(
                    f"the value of column {name} cannot be decrypted by its encryptor ({encryptor.type}): it was "
                    "not written by it (another key, or plaintext)"
                )
        return encode_text_row(values)

    def _binary_row(self, payload: bytes) -> bytes:
        """A binary row with its encrypted cells decrypted in place: the bytes around them as they came."""
        decrypt = self._decrypt
        if self._count != len(decrypt):
            return self._fail(_changed(self._count, len(decrypt)))
        widths = self._widths
        if widths is None:
            widths = self._widths = binary_cell_widths([ColumnDefinition41.decode(c) for c in self._columns])
        try:
            return _decrypted_binary_row(payload, widths, self._decoders)
        except _Undecryptable as exc:
            return self._fail(_undecryptable(ColumnDefinition41.decode(self._columns[exc.index]).name, decrypt, exc))

    def _fail(self, message: str) -> bytes:
        if self._held is None:  # part of the answer is sent already: the fast path ends it with this ERR
            raise ServerError(message, errno=ErrorCode.UNKNOWN_ERROR, sqlstate="HY000")
        self._failure = message
        return b""
