"""`charset_for_collation`: the character set a client's handshake collation id belongs to, which the
proxy sets on the backend connections it lends that client (SET NAMES).

A table lookup the frontend, the session and federation need; on its own so that naming it does not
pull in the connection code of `backend.py`.
"""

from __future__ import annotations

from protocol.constants import Collation


def charset_for_collation(collation_id: int) -> str:
    """The character set a client's handshake collation id belongs to (for SET NAMES on backends)."""
    if collation_id in (Collation.UTF8MB4_GENERAL_CI, Collation.UTF8MB4_BIN, 255) or 224 <= collation_id <= 247:
        return "utf8mb4"
    if collation_id in (33, 83) or 192 <= collation_id <= 215:
        return "utf8mb3"
    return {8: "latin1", 47: "latin1", 48: "latin1", 5: "latin1", 63: "binary", 28: "gbk", 87: "gbk",
            24: "gb2312", 11: "ascii", 65: "ascii", 1: "big5", 84: "big5", 95: "cp932", 97: "eucjpms",
            13: "sjis", 88: "sjis", 12: "ujis", 91: "ujis", 35: "ucs2", 54: "utf16", 60: "utf32",
            9: "latin2", 57: "cp1256", 51: "cp1251", 7: "koi8r", 22: "koi8u", 19: "euckr", 36: "cp866",
            }.get(collation_id, "utf8mb4")
