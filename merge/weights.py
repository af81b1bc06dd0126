"""Exact string comparison from the backends' own sort keys (``WEIGHT_STRING``).

Python cannot reproduce MariaDB's collations (UCA tailorings, ``utf8mb4_general_ci`` folding every
character outside the BMP to one weight, ``ß`` = ``s``, expansions, contractions, ...). So for every
string sort/group key the rewrite adds a hidden column computed by the node itself:

    IF(COLLATION(x) = 'binary', NULL,
       CONCAT(COLLATION(x), ':', @@max_sort_length, ':', LENGTH(WEIGHT_STRING(core /*M! LEVEL 1 */)), ':',
              LENGTH(WEIGHT_STRING(core /*M! LEVEL 1, 2 */)), ':', WEIGHT_STRING(core)))
    -- core = IF(x = RTRIM(x), RTRIM(x), x)

(``LEVEL`` is MariaDB's: MySQL 8 has no such clause, and reads ``/*M! ... */`` as a comment — there the
level lengths are the whole length, and MySQL's multi-level ``*_0900_*`` collations are NO PAD: raw
weights compare right.)

(`weight_sql`), i.e. ``<collation>:<max_sort_length>:<level 1 length>:<levels 1-2 length>:<weights>``:
NULL for numbers, temporals and binary strings (their own value is their key), and for text the weights
of the node's collation, so bytewise comparison of weights is comparison by that collation — by
construction, for every collation.

What the weights alone do not give is PAD SPACE (every MariaDB collation but ``*_nopad_*``): ``'a' =
'a '`` and, more subtly, ``'a\\t' < 'a'`` because the shorter string compares as if padded with spaces
and TAB weighs less than SPACE. ``IF(x = RTRIM(x), RTRIM(x), x)`` strips trailing spaces exactly for the
PAD SPACE collations (under NO PAD, ``x = RTRIM(x)`` is false when there are trailing spaces), which makes
equality exact; ordering is made exact here (`WeightProfile.order`) from the collation's space weight:
the weights are compared as if padded with it. ``max_sort_length`` is MariaDB's ORDER BY truncation of
sort keys (it leaves GROUP BY, DISTINCT and MIN/MAX alone), applied to ORDER BY keys only.

Collation profiles (PAD or not, the space weight) come from the collation name (`profile`); the rules
were checked against every collation of MariaDB 10.11 (tests/integration/test_merge_semantics.py checks
them against the server the tests run on). Unknown names keep equality exact and order by raw weights.
Multi-level collations (``uca1400_*_as_*``, ``uca1400_*_ai_cs``, ``thai_520_w2``) concatenate their
levels without separators: the level lengths in the value cut them apart, and each level is compared
padded with its own space weight, level after level, as MariaDB does. (The two Czech 8-bit collations
carry separators of their own: their weights compare as raw bytes.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from merge.errors import MergeError

# ESC / END units: see WeightProfile.order
_RUN_BYTES = 4

UNICODE_CHARSETS = frozenset({"utf8", "utf8mb3", "utf8mb4", "ucs2", "utf16", "utf16le", "utf32"})
_WIDE_BIN = frozenset({"utf8mb4", "utf16", "utf16le", "utf32"})  # *_bin weights are 3-byte code points
_MULTI_LEVEL_8BIT = frozenset({"latin2_czech_cs", "cp1250_czech_cs"})
_SPECIAL_8BIT_SPACE = {"latin7_general_ci": b"\x30", "latin7_general_cs": b"\x30",
                       "latin7_general_nopad_ci": b"\x30", "latin7_estonian_cs": b"\x2c"}


_SIMPLE = re.compile(r"^(?:`(?:[^`]|``)+`|\w+)(?:\.(?:`(?:[^`]|``)+`|\w+))*$")  # a column: no parentheses


def _core(e: list[object]) -> list[object]:
    return ["IF(", *e, " = RTRIM(", *e, "), RTRIM(", *e, "), ", *e, ")"]


def weight_sql_pieces(expr: tuple[object, ...], *, one_level: bool = False) -> tuple[object, ...]:
    """`weight_sql` over template pieces (the expression's text may hold slots).

    `one_level`: the caller knows the expression is a column of a text collation with one weight level (the
    schema says so): then the node computes one WEIGHT_STRING, of the value as it is, and no level lengths
    (``<collation>:<max_sort_length>:::<weights>``: both lengths empty; the general form costs the node three
    WEIGHT_STRINGs per row). Trailing spaces need no RTRIM there: the weights are compared padded with the
    space weight anyway (`WeightProfile.order` and `equal_key` drop trailing space units). Should the node's
    collation turn out to have several levels after all (the schema changed), `WeightDecoder` refuses the
    merge rather than compare the levels as one."""
    e = list(expr) if len(expr) == 1 and _SIMPLE.match(str(expr[0])) else ["(", *expr, ")"]
    if one_level:
        return ("CONCAT(COLLATION(", *e, "), ':', @@max_sort_length, ':::', WEIGHT_STRING(", *e, "))")
    core = _core(e)
    return (
        "IF(COLLATION(", *e, ") = 'binary', NULL, CONCAT(COLLATION(", *e, "), ':', @@max_sort_length, ':', "
        "LENGTH(WEIGHT_STRING(", *core, " /*M! LEVEL 1 */)), ':', LENGTH(WEIGHT_STRING(", *core,
        " /*M! LEVEL 1, 2 */)), ':', WEIGHT_STRING(", *core, ")))",
    )


def weight_sql(expr: str) -> str:
    """The hidden column carrying the node's sort key of `expr` (see the module docstring)."""
    return "".join(str(p) for p in weight_sql_pieces((expr,)))


_UCA_LOWER_LEVELS = (b"\x00\x20", b"\x00\x02")  # the space's secondary and tertiary weights


@dataclass(frozen=True)
class WeightProfile:
    """How to compare the weights of one collation: `space` is its (first-level) space weight, None when
    unknown (weights then compare as raw bytes); `multi_level`: UCA levels 2 and 3 follow level 1."""

    name: str
    pad: bool
    space: bytes | None
    multi_level: bool = False

    def level_orderers(self) -> tuple[Callable[[bytes], bytes], ...]:
        """For a multi-level collation, the comparison of each level: the first padded with the space
        weight (NO PAD: raw, then a terminator below every weight), the others padded with their
        smallest weight, NO PAD or not (as MariaDB compares them)."""
        if self.space is None:
            return (bytes, bytes, bytes)
        first = _orderer(self.space) if self.pad else _terminated
        return (first, *(_orderer(s) for s in _UCA_LOWER_LEVELS))

    @property
    def padded_space(self) -> bytes | None:
        """The unit the (first-level) weights are padded with when compared: None when they compare as
        raw bytes (NO PAD or unknown)."""
        return self.space if self.pad else None

    def equal_key(self, w: bytes) -> bytes:
        """Equal for weights the collation deems equal (trailing pad units ignored under PAD SPACE; the
        node stripped trailing spaces already, this catches characters weighing like a space)."""
        return _equalizer(self.padded_space)(w)

    @property
    def equalizer(self) -> Callable[[bytes], bytes]:
        """`equal_key` as one function of the weights (what a decoder calls per row)."""
        return _equalizer(self.padded_space)

    @property
    def orderer(self) -> Callable[[bytes], bytes]:
        return _orderer(self.padded_space)


@cache
def _equalizer(space: bytes | None) -> Callable[[bytes], bytes]:
    """w -> w without its trailing `space` units (whole units only); w itself when `space` is None."""
    if space is None:
        return bytes
    u = len(space)

    def equal(w: bytes) -> bytes:
        n = len(w)
        if n % u:
            return w
        while n and w.endswith(space, 0, n):
            n -= u
        return w if n == len(w) else w[:n]

    return equal


@cache
def _orderer(space: bytes | None) -> Callable[[bytes], bytes]:
    """w -> bytes whose bytewise order is the PAD SPACE order of weights w (padded with `space`).

    Raw weights already compare right unless a weight unit below the space weight (TAB, LF, ... in
    every collation) follows a common prefix: then the shorter string, padded with spaces, is the
    GREATER one. Encoding (u = unit size, s = space unit): units are copied, except that a unit below s
    together with the run of j spaces before it becomes ESC = <u zero bytes> <j, 4 bytes> <unit>; the
    key ends with END = <s - 1>. Then at the first difference: raw unit > s  >  raw s  >  END  >  ESC,
    and ESCs order by (j, unit), which is the padded comparison. Trailing spaces are dropped. Weights
    without low units (the usual case) cost one regex scan and a concatenation.
    """
    if space is None:
        return bytes
    u = len(space)
    s_int = int.from_bytes(space, "big")
    if s_int < 2:
        return bytes
    end = (s_int - 1).to_bytes(u, "big")
    zero = bytes(u)
    low = re.compile(_below_pattern(space), re.S)
    # A unit below the space has, at the first byte where the space is not zero, a byte below the
    # space's (or equal to it, when more bytes follow): weights with no such byte at that place in any unit
    # (digits, letters: the usual case) skip the regex scan, in one slice and one translate in C
    first = next(i for i, byte in enumerate(space) if byte)
    at_least = bytes(range(space[first] + (first < u - 1), 256))

    def order(w: bytes) -> bytes:
        n = len(w)
        if n % u:
            return w + end  # not whole units (a truncated key): compare as bytes
        while n and w.endswith(space, 0, n):
            n -= u
        if n != len(w):
            w = w[:n]
        if not (w[first::u] if u > 1 else w).translate(None, at_least):
            return w + end
        found = False
        for m in low.finditer(w):
            if m.start() % u == 0:
                found = True
                break
        if not found:
            return w + end
        out = bytearray()
        run = 0
        for i in range(0, len(w), u):
            unit = w[i : i + u]
            if unit == space:
                run += 1
                continue
            if unit < space:
                out += zero
                out += run.to_bytes(_RUN_BYTES, "big")
                out += unit
            else:
                out += space * run
                out += unit
            run = 0
        out += end
        return bytes(out)

    return order


@cache
def _orderer_at(space: bytes | None) -> Callable[[bytes, int, int], bytes]:
    """(run, t, e) -> run[t:t + 1] + `_orderer(space)`(run[t + 1:e]): the tag byte run[t] and the order form of
    the weights after it, read in place (one slice and one concatenation for the usual weights)."""
    order = _orderer(space)
    if order is bytes or space is None:
        return lambda run, t, e: run[t:e]
    u, first, at_least, end = _usual_units(space)

    def order_at(run: bytes, t: int, e: int) -> bytes:
        s = t + 1
        if (e - s) % u:
            return run[t:e] + end
        while e > s and run.endswith(space, s, e):
            e -= u
        if not run[s + first:e:u].translate(None, at_least):
            return run[t:e] + end
        return run[t:s] + order(run[s:e])

    return order_at


@cache
def _usual_units(space: bytes) -> tuple[int, int, bytes, bytes]:
    """How `_orderer_at` (and merge._cframes, from `WeightDecoder._fast`) tells weights that need no padded encoding:
    (unit size, where the space unit's first non-zero byte is, the bytes that may stand there in every unit of such
    weights, the terminator `_orderer` adds)."""
    u = len(space)
    first = next(i for i, byte in enumerate(space) if byte)
    return u, first, bytes(range(space[first] + (first < u - 1), 256)), _orderer(space)(b"")


def _terminated(w: bytes) -> bytes:
    """NO PAD first level: raw weights, a shorter one first; the zero terminator keeps the levels after it
    from being compared with this level's continuation."""
    return w + b"\x00\x00"


def _below_pattern(space: bytes) -> bytes:
    """A regex matching (at any offset) every unit of len(space) bytes that is below `space`."""
    alternatives = []
    for i, byte in enumerate(space):
        if byte == 0:
            continue
        prefix = b"".join(re.escape(bytes([c])) for c in space[:i])
        tail = b"." * (len(space) - i - 1)
        alternatives.append(prefix + b"[\\x00-" + b"\\x%02x" % (byte - 1) + b"]" + tail)
    return b"|".join(alternatives) if alternatives else b"(?!)"


@cache
def profile(name: str) -> WeightProfile:
    """The comparison profile of a collation, from its name (MariaDB and MySQL naming)."""
    low = name.lower()
    if low == "binary":
        return WeightProfile(low, False, None)
    charset = low.split("_", 1)[0]
    pad = "nopad" not in low and "_0900_" not in low and not low.endswith("_0900_bin")
    if charset in UNICODE_CHARSETS:
        rest = low[len(charset) + 1 :]
        multi = ("uca1400" in rest and not rest.endswith("_ai_ci")) or rest.endswith("_w2")
        if "uca1400" in rest:
            space = b"\x02\x09"
        elif "520" in rest or "myanmar" in rest:
            space = b"\x02\x0a"
        elif rest in ("bin", "nopad_bin"):
            space = b"\x00\x00\x20" if charset in _WIDE_BIN else b"\x00\x20"
        elif "general" in rest or "tolower" in rest:
            space = b"\x00\x20"
        elif "0900" in rest:
            space = None  # MySQL 8: NO PAD, raw weights
        else:
            space = b"\x02\x09"  # UCA 4.0.0: unicode_ci and the language tailorings
        return WeightProfile(low, pad, space, multi)
    if low in _MULTI_LEVEL_8BIT:
        return WeightProfile(low, pad, None, True)
    return WeightProfile(low, pad, _SPECIAL_8BIT_SPACE.get(low, b"\x20"))


class WeightDecoder:
    """Parses the values of one hidden weight column (see `weight_sql`); ``<collation>:<max_sort_length>:``
    is the same on every row of a column, so it is remembered."""

    __slots__ = ("_cut", "_eq", "_fast", "_levels", "_order", "_order_at", "_prefix", "_short", "_truncate")

    def __init__(self, truncate: bool) -> None:
        self._prefix = b"\xff"  # never a prefix of a real value
        self._short = b"\xff"  # `_prefix` + "::" (the short form's) once learned, for a one-level collation
        self._order_at: Callable[[bytes, int, int], bytes] = _orderer_at(None)
        # `order_at`'s usual case as merge._cframes does it in one C call: (short, tag, cut, space unit,
        # `_usual_units` of it with the lowest byte allowed in place of the bytes); None: no such case
        self._fast: tuple[bytes, int, int, bytes, int, int, int, bytes] | None = None
        self._truncate = truncate
        self._order: Callable[[bytes], bytes] = bytes
        self._eq: Callable[[bytes], bytes] = bytes
        self._levels: tuple[Callable[[bytes], bytes], ...] | None = None
        self._cut = 0

    def _learn(self, value: bytes) -> bool:
        name, sep, rest = value.partition(b":")
        msl_text, sep2, _ = rest.partition(b":")
        if not sep or not sep2:
            return False
        prof = profile(name.decode("ascii", "replace"))
        if prof.multi_level and value[len(name) + len(msl_text) + 2:].startswith(b":"):
            raise MergeError(  # weight_sql_pieces(one_level=True) of a collation that has several levels
                f"a data node compares this text column by the multi-level collation {prof.name}, not the one the "
                "proxy's table metadata names; run REFRESH TABLE METADATA and send the statement again")
        self._prefix = value[: len(name) + len(msl_text) + 2]
        self._order = prof.orderer
        self._order_at = _orderer_at(prof.padded_space)
        self._short = b"\xff" if prof.multi_level else self._prefix + b"::"
        self._eq = prof.equalizer
        self._levels = prof.level_orderers() if prof.multi_level else None
        try:
            msl = int(msl_text)
        except ValueError:
            msl = 0
        unit = len(prof.padded_space or b"x")
        self._cut = msl - msl % unit if self._truncate and not prof.multi_level and msl > 0 else 0
        space = prof.padded_space
        self._fast = None
        if not prof.multi_level and space is not None and _orderer(space) is not bytes:
            u, first, at_least, end = _usual_units(space)
            self._fast = (self._short, len(self._short) - 1, self._cut, space, u, first,
                          at_least[0] if at_least else 256, end)
        return True

    def _split(self, value: bytes) -> tuple[bytes, int, int]:
        """(weights, length of level 1, length of levels 1-2)."""
        if not value.startswith(self._prefix) and not self._learn(value):
            return value, len(value), len(value)
        start = len(self._prefix)
        c1 = value.find(b":", start)
        c2 = value.find(b":", c1 + 1) if c1 >= 0 else -1
        if c2 < 0:
            w = value[start:]
            return w, len(w), len(w)
        w = value[c2 + 1 :]
        try:
            n1, n12 = int(value[start:c1]), int(value[c1 + 1 : c2])
        except ValueError:
            return w, len(w), len(w)
        n1 = min(n1, len(w))
        return w, n1, min(max(n12, n1), len(w))

    def order(self, value: bytes) -> bytes:
        if self._levels is None and value.startswith(self._prefix):  # one level, no lengths to read
            start = len(self._prefix)
            c1 = value.find(b":", start)
            c2 = value.find(b":", c1 + 1) if c1 >= 0 else -1
            w = value[c2 + 1:] if c2 >= 0 else value[start:]
            cut = self._cut
            if cut and len(w) > cut:
                w = w[:cut]
            return self._order(w)
        w, n1, n12 = self._split(value)
        levels = self._levels
        if levels is not None:
            return levels[0](w[:n1]) + levels[1](w[n1:n12]) + levels[2](w[n12:])
        cut = self._cut
        if cut and len(w) > cut:
            w = w[:cut]
        return self._order(w)

    def order_at(self, run: bytes, ws: int, we: int) -> bytes:
        """b":" + `order`(run[ws:we]), reading a short-form value (``<collation>:<max_sort_length>:::<weights>``,
        `weight_sql_pieces(one_level=True)`) in place: its last ':' is the tag (the per-row key of
        ``ORDER BY <text column>``)."""
        short = self._short
        if run.startswith(short, ws, we):
            t = ws + len(short) - 1
            cut = self._cut
            if cut and we - t - 1 > cut:
                we = t + 1 + cut
            return self._order_at(run, t, we)
        return b":" + self.order(run[ws:we])

    def equal(self, value: bytes) -> bytes:
        if self._levels is None and value.startswith(self._prefix):  # as in `order`
            start = len(self._prefix)
            c1 = value.find(b":", start)
            c2 = value.find(b":", c1 + 1) if c1 >= 0 else -1
            return self._eq(value[c2 + 1:] if c2 >= 0 else value[start:])
        w, n1, n12 = self._split(value)
        levels = self._levels
        if levels is not None:  # prefix-free per level: equal keys are equal weights, padded
            return levels[0](w[:n1]) + levels[1](w[n1:n12]) + levels[2](w[n12:])
        return self._eq(w)


__all__ = ["WeightDecoder", "WeightProfile", "profile", "weight_sql", "weight_sql_pieces"]
