"""The encryptors of ShardingSphere's ``!ENCRYPT`` rule, byte for byte compatible with ShardingSphere 5.5.

Data an existing ShardingSphere deployment encrypted must decrypt here, and what this proxy writes must decrypt
there, so each algorithm reproduces ShardingSphere's exact output:

* ``AES``: the key is the first 16 bytes of the digest (``digest-algorithm-name``, e.g. SHA-1) of the UTF-8 bytes of
  ``aes-key-value``; the plaintext's UTF-8 bytes are enciphered with AES-128 in ECB mode with PKCS#5 padding (what
  Java's ``Cipher.getInstance("AES")`` means) and written in standard Base64. Deterministic: equal plaintexts give
  equal ciphertexts, so the cipher column itself serves equality conditions.
* ``MD5`` (assisted query): the lower-case hex MD5 of the plaintext followed by the ``salt`` prop. One-way.
* ``CHAR_DIGEST_LIKE`` (ShardingSphere 5.3's LIKE encryptor; ShardingSphere 5.5's e2e fixture
  ``IT.ENCRYPT.LIKE.FIXTURE`` is the same algorithm): each UTF-16 code unit is replaced by one character, so a
  LIKE pattern's ``%`` and ``_`` keep their places. One-way.

A plaintext is written as Java's ``String.valueOf`` would (see :func:`plain_text`): the SQL literal's own text for
numbers, the string for strings.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from protocol.errors import ServerError
from routing.errors import ConfigError

__all__ = [
    "ENCRYPTOR_TYPES",
    "AESEncryptor",
    "CharDigestLikeEncryptor",
    "Encryptor",
    "LikePattern",
    "MD5Encryptor",
    "bytes_decryptor",
    "create_encryptor",
    "like_pattern",
    "plain_text",
]


class Encryptor(Protocol):
    """What the rule and the rewrite need of an encryptor (ShardingSphere's ``EncryptAlgorithm``)."""

    type: str
    props: Mapping[str, str]
    decrypts: bool  # may serve as a cipher column's encryptor
    equality: bool  # equal plaintexts give equal ciphertexts: may serve = and IN
    like: bool  # may serve a LIKE query column

    def encrypt(self, value: object) -> str | None: ...

    def decrypt(self, value: str) -> str: ...


def plain_text(value: object) -> str | None:
    """The text ShardingSphere encrypts for a value (Java's ``String.valueOf`` of what its parser read)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="surrogateescape")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


def _prop(props: Mapping[str, Any], name: str, what: str, key: str) -> str:
    value = props.get(name)
    if value is None or str(value) == "":
        raise ConfigError(f"{what} needs the prop {name!r}", key=f"{key}.props.{name}")
    return str(value)


_PADS = [bytes((n,)) * n for n in range(17)]


@dataclass(frozen=True, eq=False)
class AESEncryptor:
    props: Mapping[str, str]
    key: str = "encryptors"
    type: str = "AES"
    decrypts: bool = True
    equality: bool = True
    like: bool = False
    _secret: bytes = field(init=False, repr=False)
    _cipher: Cipher[modes.ECB] = field(init=False, repr=False)
    _ecb: Any = field(init=False, repr=False)
    _ecb_encrypt: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        value = _prop(self.props, "aes-key-value", "AES", self.key)
        digest_name = _prop(self.props, "digest-algorithm-name", "AES", self.key)
        name = digest_name.upper().replace("-", "").replace("_", "")
        try:
            digest = hashlib.new(name.lower(), _utf8(value)).digest()
        except ValueError:
            raise ConfigError(
                f"unknown digest algorithm {digest_name!r} (SHA-1, SHA-256, MD5 ...)",
                key=f"{self.key}.props.digest-algorithm-name",
            ) from None
        if len(digest) < 16:
            raise ConfigError(
                f"the digest {digest_name!r} is shorter than an AES-128 key",
                key=f"{self.key}.props.digest-algorithm-name",
            )
        object.__setattr__(self, "_secret", digest[:16])
        # one Cipher for the key; each encryption or decryption takes a context of its own from it
        object.__setattr__(self, "_cipher", Cipher(algorithms.AES(digest[:16]), modes.ECB()))
        # one decryption context kept for the answers' values (`decrypt_bytes`): ECB deciphers each block on its own
        # and no padding is buffered, so a context fed only whole blocks and never finalized holds no state between
        # values; making a context per value costs more than deciphering it
        object.__setattr__(self, "_ecb", self._cipher.decryptor())
        # and one encryption context, for the same reason: fed only whole blocks (the padding is added here), never
        # finalized, it keeps nothing of one value for the next
        object.__setattr__(self, "_ecb_encrypt", self._cipher.encryptor())

    def encrypt(self, value: object) -> str | None:
        text = plain_text(value)
        if text is None:
            return None
        data = _utf8(text)
        pad = 16 - len(data) % 16  # PKCS#5/7: 1..16 bytes, each the count
        return binascii.b2a_base64(self._ecb_encrypt.update(data + _PADS[pad]), newline=False).decode("ascii")

    def decrypt(self, value: str) -> str:
        raw = base64.b64decode(value.strip(), validate=True)
        dec = self._cipher.decryptor()
        padded = dec.update(raw) + dec.finalize()
        pad = padded[-1] if padded else 0
        if not 1 <= pad <= 16 or padded[-pad:] != bytes((pad,)) * pad:
            raise ValueError("bad padding: not this key's ciphertext")
        return padded[:-pad].decode("utf-8", errors="surrogateescape")

    def decrypt_bytes(self, value: bytes) -> bytes:
        """`decrypt` of a value as the answer's bytes hold it, to bytes: a strict Base64 of whole blocks is
        deciphered by the kept context; anything else (spaces around it, bad Base64, a partial block) goes through
        `decrypt`, which answers it (or refuses it) as it always has."""
        try:
            raw = binascii.a2b_base64(value, strict_mode=True)
        except binascii.Error:
            raw = b""
        if not raw or len(raw) & 15:
            return _utf8(self.decrypt(value.decode("utf-8", errors="surrogateescape")))
        padded = self._ecb.update(raw)
        pad = padded[-1]
        if not 1 <= pad <= 16 or not padded.endswith(_PADDINGS[pad]):
            raise ValueError("bad padding: not this key's ciphertext")
        return padded[:-pad]


#: PKCS#5/7 padding of each length (1..16): `decrypt_bytes` checks a value's end against one
_PADDINGS = tuple(bytes((n,)) * n for n in range(17))


@dataclass(frozen=True, eq=False)
class MD5Encryptor:
    props: Mapping[str, str]
    key: str = "encryptors"
    type: str = "MD5"
    decrypts: bool = False
    equality: bool = True
    like: bool = False

    def encrypt(self, value: object) -> str | None:
        text = plain_text(value)
        if text is None:
            return None
        return hashlib.md5(_utf8(text + str(self.props.get("salt", ""))), usedforsecurity=False).hexdigest()

    def decrypt(self, value: str) -> str:
        raise ValueError("MD5 cannot decrypt")


_DEFAULT_DELTA = 1
_DEFAULT_MASK = 0b1111_0111_1101
_DEFAULT_START = 0x4E00
_MAX_NUMERIC_LETTER_CHAR = 255


@dataclass(frozen=True, eq=False)
class CharDigestLikeEncryptor:
    props: Mapping[str, str]
    key: str = "encryptors"
    type: str = "CHAR_DIGEST_LIKE"
    decrypts: bool = False
    equality: bool = True
    like: bool = True
    _delta: int = field(init=False, repr=False)
    _mask: int = field(init=False, repr=False)
    _start: int = field(init=False, repr=False)
    _indexes: dict[int, int] = field(init=False, repr=False)
    _has_dict: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, default in (("delta", _DEFAULT_DELTA), ("mask", _DEFAULT_MASK), ("start", _DEFAULT_START)):
            raw = self.props.get(name)
            try:
                value = default if raw is None else int(str(raw).strip())
            except ValueError:
                raise ConfigError(f"{name} can only be a decimal number", key=f"{self.key}.props.{name}") from None
            object.__setattr__(self, f"_{name}", value)
        # ShardingSphere's default dictionary (its common_chinese_character.dict resource) is not shipped here:
        # without props.dict, only characters no dictionary maps (ASCII digits and letters) can be digested as
        # ShardingSphere digests them, and any other is refused rather than digested differently
        text = str(self.props.get("dict") or "")
        object.__setattr__(self, "_has_dict", bool(text))
        indexes: dict[int, int] = {}
        for i, unit in enumerate(_utf16_units(text)):
            indexes.setdefault(unit, i)  # the first index of a repeated character, as ShardingSphere keeps
        object.__setattr__(self, "_indexes", indexes)

    def encrypt(self, value: object) -> str | None:
        text = plain_text(value)
        if text is None:
            return None
        delta, mask, start, indexes = self._delta, self._mask, self._start, self._indexes
        out: list[int] = []
        for unit in _utf16_units(text):  # Java's chars: UTF-16 code units
            if unit in (0x25, 0x5F):  # % and _ stay, so a LIKE pattern keeps its meaning
                out.append(unit)
                continue
            if unit <= _MAX_NUMERIC_LETTER_CHAR:
                masked = ((unit + delta) & mask) & 0xFFFF
            elif not self._has_dict:
                raise NoDictionary(
                    f"CHAR_DIGEST_LIKE cannot digest {chr(unit)!r} as ShardingSphere would without props.dict: set "
                    "props.dict of the LIKE encryptor to the dictionary your ShardingSphere deployment used (its "
                    "default is ShardingSphere's common_chinese_character.dict), or to any characters for new data"
                )
            elif unit in indexes:
                masked = (((indexes[unit] + delta) & mask) + start) & 0xFFFF
            else:
                masked = (((unit + delta) & mask) + start) & 0xFFFF
            out.append(unit if masked in (0x25, 0x5F) else masked)
        return b"".join(u.to_bytes(2, "big") for u in out).decode("utf-16-be", errors="surrogatepass")

    def decrypt(self, value: str) -> str:
        raise ValueError("CHAR_DIGEST_LIKE cannot decrypt")

    def encrypt_pattern(self, value: object) -> str | None:
        """A LIKE pattern digested to match the digest of every value the plaintext pattern matches: its wildcards
        kept, a character it escapes (``\\%``, ``\\_``, ``\\\\``, ``\\x``: MariaDB's default LIKE
        escape) digested as the character it stands for, and every ``%``, ``_`` or backslash of the digests escaped
        (a stored ``%`` digests to itself, ``[`` to a backslash). ShardingSphere digests the pattern as one value:
        its escapes would be digested as characters, and a pattern holding ``[`` would escape what follows."""
        text = plain_text(value)
        if text is None:
            return None
        if "\\" not in text:
            whole = self.encrypt(text)
            if whole is None or "\\" not in whole:
                return whole  # (no escape on either side: the value's digest)
        out: list[str] = []
        i, end = 0, len(text)
        while i < end:
            ch = text[i]
            if ch in "%_":
                out.append(ch)
                i += 1
                continue
            if ch == "\\":
                ch = text[i + 1] if i + 1 < end else "\\"  # (a backslash last in the pattern stands for itself)
                i += 1
            i += 1
            digest = self.encrypt(ch) or ""
            out.append("".join("\\" + d if d in "%_\\" else d for d in digest))
        return "".join(out)


@dataclass(frozen=True, eq=False)
class LikePattern:
    """A LIKE query column's encryptor as the rewrite applies it to a LIKE pattern: its ``encrypt_pattern`` (the
    pattern's escapes read), else its ``encrypt``. ``part``: a part of a ``CONCAT`` pattern other than its last,
    refused when it ends with a backslash that escapes the next part's first character."""

    encryptor: Encryptor
    part: bool = False
    column: str = ""  # (the encrypted column, for the refusal)
    type: str = field(init=False)  # the encryptor's (a LIKE pattern is digested by it)
    props: Mapping[str, str] = field(init=False)
    decrypts: bool = False
    equality: bool = False
    like: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", self.encryptor.type)
        object.__setattr__(self, "props", self.encryptor.props)

    def encrypt(self, value: object) -> str | None:
        if self.part:
            text = plain_text(value) or ""
            if (len(text) - len(text.rstrip("\\"))) % 2:
                raise UnsupportedPattern(
                    f"encrypted column {self.column} cannot be matched by a LIKE CONCAT(...) pattern a part of which "
                    "ends with a backslash that escapes the next part's first character: the parts are digested one "
                    "by one; escape the character in the part that holds it"
                )
        encrypt_pattern = getattr(self.encryptor, "encrypt_pattern", None)
        return encrypt_pattern(value) if encrypt_pattern is not None else self.encryptor.encrypt(value)

    def decrypt(self, value: str) -> str:
        raise ValueError("a LIKE pattern cannot be decrypted")


@functools.lru_cache(maxsize=64)
def like_pattern(encryptor: Encryptor, part: bool = False, column: str = "") -> LikePattern:
    """The one `LikePattern` of an encryptor (of its patterns' parts but the last, with ``part``) for a column."""
    return LikePattern(encryptor, part, column)


class NoDictionary(ServerError):
    """A character CHAR_DIGEST_LIKE needs its dictionary for, and none is configured."""

    errno = 1235  # ER_NOT_SUPPORTED_YET
    sqlstate = "42000"


class UnsupportedPattern(ServerError):
    """A LIKE pattern over an encrypted column whose digest cannot match what the plaintext pattern matches."""

    errno = 1235  # ER_NOT_SUPPORTED_YET
    sqlstate = "42000"


def _utf16_units(text: str) -> list[int]:
    raw = text.encode("utf-16-be", errors="surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


#: encryptor type (upper case) -> its class; IT.ENCRYPT.LIKE.FIXTURE is ShardingSphere's e2e name of CHAR_DIGEST_LIKE
ENCRYPTOR_TYPES: dict[str, Callable[..., Encryptor]] = {
    "AES": AESEncryptor,
    "MD5": MD5Encryptor,
    "CHAR_DIGEST_LIKE": CharDigestLikeEncryptor,
    "IT.ENCRYPT.LIKE.FIXTURE": CharDigestLikeEncryptor,
}


def bytes_decryptor(encryptor: Encryptor) -> Callable[[bytes], bytes]:
    """`encryptor`'s decryption of a value as an answer's bytes hold it (UTF-8, undecodable bytes kept as they are):
    its own `decrypt_bytes` when it has one, else its `decrypt` around the text."""
    fast = getattr(encryptor, "decrypt_bytes", None)
    if fast is not None:
        return fast  # type: ignore[no-any-return]

    def decrypt(value: bytes) -> bytes:
        return _utf8(encryptor.decrypt(value.decode("utf-8", errors="surrogateescape")))

    return decrypt


def create_encryptor(
    type_name: str, props: Mapping[str, Any], *, key: str, types: Mapping[str, Callable[..., Encryptor]] | None = None
) -> Encryptor:
    """The encryptor of a configured type; ``types`` replaces the known types (tests bring fixtures)."""
    known = ENCRYPTOR_TYPES if types is None else types
    make = known.get(str(type_name).upper())
    if make is None:
        raise ConfigError(
            f"unknown encryptor type {type_name!r}; shardproxy implements {', '.join(sorted(known))}", key=f"{key}.type"
        )
    return make(props={str(k): str(v) for k, v in props.items()}, key=key, type=str(type_name).upper())
