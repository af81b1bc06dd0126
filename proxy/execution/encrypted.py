"""Statements on a database with an `!ENCRYPT` rule: rewritten over the physical columns, results decrypted.

The rewrite itself is the kernel's (routing.encrypt.rewrite): a statement naming an encrypted table is rewritten
before anything else sees it, then runs on the ordinary path (pass-through, read/write splitting or the sharding
kernel) as if the client had sent the rewritten text. When its result set has columns to decrypt, the ordinary
path's answer is captured instead of sent (as a cursor's rows are, proxy.session.prepared), the named columns are
decrypted, and the answer goes out. A prepared statement on an encrypted table runs as its rewrite, prepared once
(on a pass-through database's connection at PREPARE, on a sharded one on the node's connection at its first
execute), each execute binding the client's parameters onto the rewrite's `?`, encrypted where the rewrite says
(`PreparedEncrypted`, `physical_binding`), its binary rows decrypted; what `prepared_encrypted` does not keep runs
as text, its values written in.

Why capture rather than a merge stage: one place decrypts whatever answered (a relayed single node, a merge of
several, federation), in text and binary rows alike; the cost (the rows held once) is paid only by statements that
read encrypted columns. The socket callbacks' fast path (proxy.execution.fastpath) takes the SELECTs it can rewrite
from the text alone, and the executes of `PreparedEncrypted` statements, decrypting rows as they pass
(proxy.execution.decrypting, which also decrypts the coroutine's held answers); anything else naming an encrypted
table is left to the session's coroutine.

With `!MASK` beside `!ENCRYPT` a masked logical column that is encrypted is masked here, after decryption (as
ShardingSphere shows it: the mask of the plaintext): the ordinary path masks by the column's origin, which for a
decrypted column is its cipher column, which no mask names.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from protocol.binary import (
    ParamType,
    encode_execute,
    text_row_to_binary,
)
from protocol.constants import ColumnType, ErrorCode
from protocol.errors import ServerError
from protocol.packets import ColumnDefinition41, decode_text_row, encode_text_row
from protocol.wire import Reader
from proxy.execution.decrypting import decrypted_binary_answer, error_payload
from proxy.execution.masking import Masks, mask_row, masked_definitions
from proxy.frontend.wire import CapturedWriter
from routing.encrypt.algorithms import Encryptor
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
    "OtherStatement",
    "PreparedEncrypted",
    "captured",
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
            error_payload(
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
                        error_payload(
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
