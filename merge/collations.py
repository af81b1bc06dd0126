"""Collation ids -> how to compare strings of that collation, approximated in Python.

This is the fallback: multi-node SELECTs compare text keys by the nodes' own weights (`merge.weights`,
exact for every collation). The approximation below serves keys without a weight column (HAVING
comparisons with literals, expressions the rewrite does not duplicate: RAND(), subqueries, ...).

MySQL sorts and groups text by the column's collation, and the merge must agree with the nodes (which
already sorted their rows) or a k-way merge interleaves wrongly and GROUP BY splits groups. Full
UCA/tailoring weights are out of scope; the approximation is:

* ``binary`` (63): raw bytes, NO PAD.
* ``*_bin``: code point order (bytes for ASCII-compatible charsets, where byte order is code point
  order for UTF-8 and trivially for single-byte charsets); trailing spaces ignored unless NO PAD.
* ``*_cs`` / ``*_as_cs``: decoded text, code point order (case-sensitive tailorings not modelled).
* ``*_ci``: decoded text, ``str.casefold()``; accent-insensitive collations (all ``_ci`` except
  ``_as_ci``) also drop combining marks after NFKD decomposition, so ``é`` sorts and groups with ``e``
  as in ``utf8mb4_general_ci`` / ``unicode_ci`` / ``0900_ai_ci`` / ``uca1400_ai_ci``. Language
  tailorings (Swedish ``å`` after ``z``, Spanish ``ñ``, German ``ß`` = ``ss`` vs general_ci ``ß`` = ``s``,
  contractions, expansions) are NOT modelled, nor ``ENUM`` ordinal order.
* PAD SPACE collations (everything but MySQL 8 ``*_0900_*``, ``binary`` and MariaDB ``*_nopad_*`` /
  UCA-14 ``nopad``) ignore trailing spaces: ``'a' = 'a  '``. Approximated by stripping trailing
  spaces, which differs from MySQL only for strings ending in characters below space (e.g. tab).

Unknown collation ids are treated as case-insensitive UTF-8 (PAD SPACE): the safest guess for a text
column of a modern server.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

BINARY_COLLATION_ID = 63

# id -> collation name, for the single-byte-id collations shared by MySQL and MariaDB.
_NAMES: dict[int, str] = {
    1: "big5_chinese_ci",
    2: "latin2_czech_cs",
    3: "dec8_swedish_ci",
    4: "cp850_general_ci",
    5: "latin1_german1_ci",
    6: "hp8_english_ci",
    7: "koi8r_general_ci",
    8: "latin1_swedish_ci",
    9: "latin2_general_ci",
    10: "swe7_swedish_ci",
    11: "ascii_general_ci",
    12: "ujis_japanese_ci",
    13: "sjis_japanese_ci",
    14: "cp1251_bulgarian_ci",
    15: "latin1_danish_ci",
    16: "hebrew_general_ci",
    18: "tis620_thai_ci",
    19: "euckr_korean_ci",
    20: "latin7_estonian_cs",
    21: "latin2_hungarian_ci",
    22: "koi8u_general_ci",
    23: "cp1251_ukrainian_ci",
    24: "gb2312_chinese_ci",
    25: "greek_general_ci",
    26: "cp1250_general_ci",
    27: "latin2_croatian_ci",
    28: "gbk_chinese_ci",
    29: "cp1257_lithuanian_ci",
    30: "latin5_turkish_ci",
    31: "latin1_german2_ci",
    32: "armscii8_general_ci",
    33: "utf8mb3_general_ci",
    34: "cp1250_czech_cs",
    36: "cp866_general_ci",
    37: "keybcs2_general_ci",
    38: "macce_general_ci",
    39: "macroman_general_ci",
    40: "cp852_general_ci",
    41: "latin7_general_ci",
    42: "latin7_general_cs",
    43: "macce_bin",
    44: "cp1250_croatian_ci",
    45: "utf8mb4_general_ci",
    46: "utf8mb4_bin",
    47: "latin1_bin",
    48: "latin1_general_ci",
    49: "latin1_general_cs",
    50: "cp1251_bin",
    51: "cp1251_general_ci",
    52: "cp1251_general_cs",
    53: "macroman_bin",
    57: "cp1256_general_ci",
    58: "cp1257_bin",
    59: "cp1257_general_ci",
    63: "binary",
    64: "armscii8_bin",
    65: "ascii_bin",
    66: "cp1250_bin",
    67: "cp1256_bin",
    68: "cp866_bin",
    69: "dec8_bin",
    70: "greek_bin",
    71: "hebrew_bin",
    72: "hp8_bin",
    73: "keybcs2_bin",
    74: "koi8r_bin",
    75: "koi8u_bin",
    76: "utf8mb3_tolower_ci",
    77: "latin2_bin",
    78: "latin5_bin",
    79: "latin7_bin",
    80: "cp850_bin",
    81: "cp852_bin",
    82: "swe7_bin",
    83: "utf8mb3_bin",
    84: "big5_bin",
    85: "euckr_bin",
    86: "gb2312_bin",
    87: "gbk_bin",
    88: "sjis_bin",
    89: "tis620_bin",
    91: "ujis_bin",
    92: "geostd8_general_ci",
    93: "geostd8_bin",
    94: "latin1_spanish_ci",
    95: "cp932_japanese_ci",
    96: "cp932_bin",
    97: "eucjpms_japanese_ci",
    98: "eucjpms_bin",
    99: "cp1250_polish_ci",
    192: "utf8mb3_unicode_ci",
    193: "utf8mb3_icelandic_ci",
    194: "utf8mb3_latvian_ci",
    195: "utf8mb3_romanian_ci",
    196: "utf8mb3_slovenian_ci",
    197: "utf8mb3_polish_ci",
    198: "utf8mb3_estonian_ci",
    199: "utf8mb3_spanish_ci",
    200: "utf8mb3_swedish_ci",
    201: "utf8mb3_turkish_ci",
    202: "utf8mb3_czech_ci",
    203: "utf8mb3_danish_ci",
    204: "utf8mb3_lithuanian_ci",
    205: "utf8mb3_slovak_ci",
    206: "utf8mb3_spanish2_ci",
    207: "utf8mb3_roman_ci",
    208: "utf8mb3_persian_ci",
    209: "utf8mb3_esperanto_ci",
    210: "utf8mb3_hungarian_ci",
    211: "utf8mb3_sinhala_ci",
    212: "utf8mb3_german2_ci",
    213: "utf8mb3_croatian_ci",
    214: "utf8mb3_unicode_520_ci",
    215: "utf8mb3_vietnamese_ci",
    223: "utf8mb3_general_mysql500_ci",
    224: "utf8mb4_unicode_ci",
    225: "utf8mb4_icelandic_ci",
    226: "utf8mb4_latvian_ci",
    227: "utf8mb4_romanian_ci",
    228: "utf8mb4_slovenian_ci",
    229: "utf8mb4_polish_ci",
    230: "utf8mb4_estonian_ci",
    231: "utf8mb4_spanish_ci",
    232: "utf8mb4_swedish_ci",
    233: "utf8mb4_turkish_ci",
    234: "utf8mb4_czech_ci",
    235: "utf8mb4_danish_ci",
    236: "utf8mb4_lithuanian_ci",
    237: "utf8mb4_slovak_ci",
    238: "utf8mb4_spanish2_ci",
    239: "utf8mb4_roman_ci",
    240: "utf8mb4_persian_ci",
    241: "utf8mb4_esperanto_ci",
    242: "utf8mb4_hungarian_ci",
    243: "utf8mb4_sinhala_ci",
    244: "utf8mb4_german2_ci",
    245: "utf8mb4_croatian_ci",
    246: "utf8mb4_unicode_520_ci",
    247: "utf8mb4_vietnamese_ci",
    248: "gb18030_chinese_ci",
    249: "gb18030_bin",
    250: "gb18030_unicode_520_ci",
    35: "ucs2_general_ci",
    54: "utf16_general_ci",
    55: "utf16_bin",
    56: "utf16le_general_ci",
    60: "utf32_general_ci",
    61: "utf32_bin",
    62: "utf16le_bin",
    90: "ucs2_bin",
    159: "ucs2_general_mysql500_ci",
}

# UCA-4.0.0 language collations that exist for ucs2 / utf16 / utf32 at these id ranges (all ``_ci``).
_UCA_RANGES: tuple[tuple[int, int, str], ...] = (
    (128, 151, "ucs2"),
    (101, 124, "utf16"),
    (160, 183, "utf32"),
)
# MariaDB 10.2+ extra UCA collations (croatian/myanmar/thai_520_w2): all case-insensitive.
_MARIADB_EXTRA: tuple[tuple[int, int, str], ...] = (
    (576, 578, "utf8mb3"),
    (608, 610, "utf8mb4"),
    (640, 642, "ucs2"),
    (672, 674, "utf16"),
    (736, 738, "utf32"),
)
# MySQL 8 utf8mb4 0900 family (255..323): all NO PAD. Sensitivity by id.
_MYSQL_0900_FIRST, _MYSQL_0900_LAST = 255, 323
_MYSQL_0900_BIN = 309
_MYSQL_0900_AS_CI = 305
_MYSQL_0900_AI_CI = frozenset({*range(255, 278), 306, 310, 312, 314, 316, 318, 320, 322})
# MariaDB: id + 1024 is the NO PAD twin of a base collation (e.g. 1069 utf8mb4_general_nopad_ci).
_MARIADB_NOPAD_OFFSET = 1024
# MariaDB 10.10+ UCA-14.0.0: id = 2048 + (charset << 8) + (tailoring << 3) + (nopad << 2)
#                                  + (accent-sensitive << 1) + case-sensitive
_UCA1400_FIRST, _UCA1400_LAST = 2048, 4095
_UCA1400_CHARSETS = ("utf8mb3", "utf8mb4", "ucs2", "utf16", "utf32")

# MySQL charset name -> Python codec (approximate where Python lacks the exact code page).
_CODECS: dict[str, str] = {
    "big5": "big5",
    "latin2": "iso8859_2",
    "dec8": "latin_1",
    "cp850": "cp850",
    "latin1": "cp1252",  # MySQL latin1 is Windows-1252
    "hp8": "latin_1",
    "koi8r": "koi8_r",
    "swe7": "ascii",
    "ascii": "ascii",
    "ujis": "euc_jp",
    "sjis": "shift_jis",
    "cp1251": "cp1251",
    "hebrew": "iso8859_8",
    "tis620": "tis_620",
    "euckr": "euc_kr",
    "latin7": "iso8859_13",
    "koi8u": "koi8_u",
    "gb2312": "gb2312",
    "greek": "iso8859_7",
    "cp1250": "cp1250",
    "gbk": "gbk",
    "cp1257": "cp1257",
    "latin5": "iso8859_9",
    "armscii8": "latin_1",
    "utf8": "utf_8",
    "utf8mb3": "utf_8",
    "utf8mb4": "utf_8",
    "ucs2": "utf_16_be",
    "cp866": "cp866",
    "keybcs2": "cp437",
    "macce": "mac_latin2",
    "macroman": "mac_roman",
    "cp852": "cp852",
    "cp1256": "cp1256",
    "geostd8": "latin_1",
    "cp932": "cp932",
    "eucjpms": "euc_jp",
    "gb18030": "gb18030",
    "utf16": "utf_16_be",
    "utf16le": "utf_16_le",
    "utf32": "utf_32_be",
}
_NOT_ASCII_COMPATIBLE = frozenset({"ucs2", "utf16", "utf16le", "utf32"})


@dataclass(frozen=True)
class Collation:
    """How strings of one collation compare: `sensitivity` is "binary", "bin", "cs" or "ci"."""

    id: int
    charset: str
    codec: str | None  # None for the binary pseudo charset
    sensitivity: str
    pad_space: bool
    accent_insensitive: bool

    @property
    def ascii_compatible(self) -> bool:
        return self.charset not in _NOT_ASCII_COMPATIBLE


def _from_name(cid: int, name: str, *, pad_space: bool = True) -> Collation:
    if name == "binary":
        return Collation(cid, "binary", None, "binary", False, False)
    charset = name.split("_", 1)[0]
    codec = _CODECS.get(charset, "utf_8")
    if name.endswith("_bin"):
        return Collation(cid, charset, codec, "bin", pad_space, False)
    if name.endswith("_cs"):
        return Collation(cid, charset, codec, "cs", pad_space, False)
    return Collation(cid, charset, codec, "ci", pad_space, not name.endswith("_as_ci"))


@cache
def collation(cid: int) -> Collation:
    """The comparison rules for a collation id (see the module docstring for the approximations)."""
    if _MYSQL_0900_FIRST <= cid <= _MYSQL_0900_LAST:
        if cid == _MYSQL_0900_BIN:
            return Collation(cid, "utf8mb4", "utf_8", "bin", False, False)
        if cid == _MYSQL_0900_AS_CI:
            return Collation(cid, "utf8mb4", "utf_8", "ci", False, False)
        if cid in _MYSQL_0900_AI_CI:
            return Collation(cid, "utf8mb4", "utf_8", "ci", False, True)
        return Collation(cid, "utf8mb4", "utf_8", "cs", False, False)
    name = _NAMES.get(cid)
    if name is not None:
        return _from_name(cid, name)
    for first, last, charset in _UCA_RANGES + _MARIADB_EXTRA:
        if first <= cid <= last:
            return _from_name(cid, f"{charset}_unicode_ci")
    if _MARIADB_NOPAD_OFFSET < cid < _UCA1400_FIRST:
        base = _NAMES.get(cid - _MARIADB_NOPAD_OFFSET)
        if base is not None:
            return _from_name(cid, base, pad_space=False)
    if _UCA1400_FIRST <= cid <= _UCA1400_LAST:
        cs_index = (cid - _UCA1400_FIRST) >> 8
        charset = _UCA1400_CHARSETS[cs_index] if cs_index < len(_UCA1400_CHARSETS) else "utf8mb4"
        nopad, accent_sensitive, case_sensitive = cid & 4, cid & 2, cid & 1
        return Collation(
            cid,
            charset,
            _CODECS[charset],
            "cs" if case_sensitive else "ci",
            not nopad,
            not accent_sensitive,
        )
    return Collation(cid, "utf8mb4", "utf_8", "ci", True, True)


def _strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def string_key(coll: Collation) -> Callable[[bytes], bytes | str]:
    """A function mapping a raw text-protocol value to a key that orders/equates like `coll`.

    Keys of one column are all bytes or all str, so they compare with each other directly; computed once
    per row so the heap merge never decodes during comparisons.
    """
    if coll.sensitivity == "binary":
        return bytes
    codec = coll.codec or "utf_8"
    pad = coll.pad_space
    if coll.sensitivity == "bin" and coll.ascii_compatible:
        if pad:
            return lambda v: v.rstrip(b" ")
        return bytes
    if coll.sensitivity in ("bin", "cs"):

        def cs_key(v: bytes) -> str:
            text = v.decode(codec, "surrogateescape")
            return text.rstrip(" ") if pad else text

        return cs_key

    accents = coll.accent_insensitive

    def ci_key(v: bytes) -> str:
        text = v.decode(codec, "surrogateescape")
        if pad:
            text = text.rstrip(" ")
        if text.isascii():
            return text.lower()
        if accents:
            text = _strip_accents(text)
        return text.casefold()

    return ci_key
