"""Client text as the bytes it was: decoding and encoding that never raise.

What a client sends (statements, user and database names, plugin names) is bytes, and not always UTF-8.
The proxy decodes it with `decode` (UTF-8, each invalid byte kept as a lone surrogate, U+DC80..U+DCFF)
and turns it back into bytes with `encode`, which gives exactly the bytes that came in: a statement is
relayed as sent, whatever it holds. `encode` accepts any str (lone surrogates that did not come from
`decode` are written as their UTF-8-like three bytes), so no path that builds a packet from client text
can fail on it.

Where MariaDB refuses such bytes (identifiers, database names: ER_INVALID_CHARACTER_STRING) the proxy
refuses them alike (`invalid_string` / `invalid_string_message`).
"""

from __future__ import annotations

import re

# the lone surrogates `decode` leaves for bytes that are not UTF-8 (and any other lone surrogate)
_SURROGATE = re.compile("[\ud800-\udfff]")

INVALID_CHARACTER_STRING = 1300  # ER_INVALID_CHARACTER_STRING, SQLSTATE HY000


def decode(raw: bytes) -> str:
    """UTF-8, lossless: every byte that is not part of a UTF-8 character becomes U+DC80 + byte."""
    return raw.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    """The bytes `text` was decoded from (see `decode`); total on every str."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        # a lone surrogate that is no escaped byte (U+D800..U+DC7F, U+DD00..U+DFFF): its three UTF-8-like bytes
        out = bytearray()
        for ch in text:
            out += bytes((ord(ch) - 0xDC00,)) if "\udc80" <= ch <= "\udcff" else ch.encode("utf-8", "surrogatepass")
        return bytes(out)


def is_valid(text: str) -> bool:
    """True when `text` came from well-formed UTF-8 (no escaped byte, no lone surrogate)."""
    return _SURROGATE.search(text) is None


def shown(text: str) -> str:
    """`text` as MariaDB shows client text in messages: each byte that is not UTF-8 as '?'."""
    return _SURROGATE.sub("?", text)


def escaped(text: str) -> str:
    r"""`text` as MariaDB writes it into ER_INVALID_CHARACTER_STRING: each byte that is not UTF-8 as \xFF."""
    return _SURROGATE.sub(lambda m: "".join(f"\\x{b:02X}" for b in encode(m.group())), text)


def invalid_string_message(text: str, charset: str = "utf8mb4") -> str:
    """ER_INVALID_CHARACTER_STRING's message, as MariaDB words it (the value cut at 64 characters)."""
    return f"Invalid {charset} character string: '{escaped(text)[:64]}'"


def invalid_string(text: str, charset: str) -> str | None:
    """The ER_INVALID_CHARACTER_STRING message for a name that is not valid in the session's character
    set, or None when it is (only UTF-8 character sets can be invalid here: in a single-byte character set
    every byte is a character)."""
    if is_valid(text) or not charset.lower().startswith("utf8"):
        return None
    return invalid_string_message(text, "utf8mb4" if charset.lower() == "utf8mb4" else "utf8mb3")


__all__ = ["INVALID_CHARACTER_STRING", "decode", "encode", "escaped", "invalid_string", "invalid_string_message",
           "is_valid", "shown"]
