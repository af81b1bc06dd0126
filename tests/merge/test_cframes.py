"""merge._cframes against the Python steps it mirrors (merge.frames, merge.weights), over generated rows that are
usual, unusual and broken: the same key, the same cut bytes, the same error, row for row."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from merge import frames
from merge.weights import WeightDecoder
from protocol.rowframes import frames_of
from tests.c_helpers import c_helper
from tests.merge.test_weights import short, w


def _c() -> Any:
    return c_helper("merge._cframes")


COLLATIONS = ["utf8mb4_general_ci", "latin1_swedish_ci", "utf8mb4_unicode_ci", "utf8mb4_nopad_bin", "binary",
              "utf8mb4_bin", "utf8mb4_uca1400_ai_ci", "utf8mb4_uca1400_as_cs", "latin7_general_ci", "mystery_ci"]


def _lenenc(value: bytes) -> bytes:
    n = len(value)
    if n < 0xFB:
        return bytes([n]) + value
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + value
    return b"\xfd" + n.to_bytes(3, "little") + value


def _weight(rng: random.Random) -> bytes:
    """A weight column's value: short and long forms of texts with low units, spaces, cuts and odd lengths."""
    # units at the space's edges: 0x1F / 0x20 / 0x21 alone, and as the low byte of a higher unit (U+4E1F, U+4E20)
    text = "".join(rng.choice("aB \t\x01-9:é\x1f!\u4e1f\u4e20\u4e21") for _ in range(rng.choice((0, 1, 3, 12, 130))))
    collation = rng.choice(COLLATIONS)
    msl = rng.choice((1024, 16, 7, 0))
    form = rng.random()
    if collation.startswith("utf8mb4_uca1400_as") and form < 0.5:
        form = 0.9  # a multi-level collation's short form is refused: the long form
    try:
        value = short(text, collation, msl, rng.choice((0, 20))) if form < 0.5 else w(text, collation, msl)
    except Exception:
        value = w("a", "utf8mb4_general_ci", msl)
    if rng.random() < 0.1:
        value = value[: rng.randint(0, len(value))]  # odd units, a cut prefix
    if rng.random() < 0.05:
        value += b"\x00"  # not whole units
    return value


def _result(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # the same error from both forms
        return ("error", type(e).__name__)


def _row(rng: random.Random, names: list[str]) -> tuple[bytes | None, ...]:
    out: list[bytes | None] = []
    for n in names:
        if rng.random() < 0.1:
            out.append(None)
        elif n == "w":
            out.append(_weight(rng))
        else:
            out.append("".join(rng.choice("ab ") for _ in range(rng.choice((0, 2, 250, 300)))).encode())
    return tuple(out)


def _text_payload(values: tuple[bytes | None, ...]) -> bytes:
    return b"".join(b"\xfb" if v is None else _lenenc(v) for v in values)


def _binary_payload(values: tuple[bytes | None, ...]) -> bytes:
    bitmap = bytearray((len(values) + 9) // 8)
    for i, v in enumerate(values):
        if v is None:
            bitmap[(i + 2) >> 3] |= 1 << ((i + 2) & 7)
    return b"\x00" + bytes(bitmap) + b"".join(_lenenc(v) for v in values if v is not None)


def _damaged(rng: random.Random, payload: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.05 and payload:
        return payload[: rng.randint(0, len(payload) - 1)]  # ends early
    if roll < 0.1 and payload:
        i = rng.randrange(len(payload))
        return payload[:i] + bytes([rng.choice((0xFB, 0xFC, 0xFD, 0xFE, 0xFF, 0x00))]) + payload[i + 1:]
    return payload


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("layout", ["c,w", "c,p,w", "p,c,w", "c,w,p"])
def test_the_c_order_key_is_the_python_one(binary: bool, layout: str) -> None:
    c = _c()
    names = layout.split(",")
    index, wi = names.index("c"), names.index("w")
    rng = random.Random(hash((binary, layout)) & 0xFFFF)
    general_calls = []

    def general(run: bytes, a: int, b: int) -> Any:
        general_calls.append((a, b))
        return ("general", run[a:b])

    for _ in range(40):
        truncate = rng.random() < 0.7
        d_py, d_c = WeightDecoder(truncate), WeightDecoder(truncate)
        if binary:
            py = frames._weighted_binary_order_key(index, wi, len(names), d_py, general, None)
            cc = frames._weighted_binary_order_key(index, wi, len(names), d_c, general, c)
        else:
            py = frames._weighted_order_key(index, wi, d_py, general, None)
            cc = frames._weighted_order_key(index, wi, d_c, general, c)
        for _ in range(60):
            payload = _damaged(rng, (_binary_payload if binary else _text_payload)(_row(rng, names)))
            head, tail = b"\x07" * rng.randint(0, 3), b"\x07" * rng.randint(0, 3)
            run = head + frames_of([payload]).data + tail
            a, b = len(head), len(run) - len(tail)
            assert _result(cc, run, a, b) == _result(py, run, a, b), (payload, a, b)
            if rng.random() < 0.1:  # frame ends the run does not hold (never so in a merge): C reads nothing past it
                _result(cc, run, a, len(run) + rng.choice((1, 5, 300)))


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_the_c_cut_is_the_python_one(binary: bool) -> None:
    c = _c()
    rng = random.Random(21 + binary)
    # binary column types: strings (length-encoded), tiny/short/long/longlong/float/double, temporals, NULL type
    kinds = [254, 253, 1, 2, 3, 8, 4, 5, 10, 12, 6] if binary else [254]
    fixed = {1: 1, 2: 2, 3: 4, 8: 8, 4: 4, 5: 8}
    for _ in range(400):
        types = [rng.choice(kinds) for _ in range(rng.randint(1, 12))]
        values: list[bytes | None] = []
        for t in types:
            if t == 6 or rng.random() < 0.15:
                values.append(None)
            elif t in fixed:
                values.append(bytes(rng.randrange(256) for _ in range(fixed[t])))
            elif t in (10, 12):
                values.append(bytes(rng.randrange(256) for _ in range(rng.choice((0, 4, 7, 11)))))
            else:
                values.append(b"v" * rng.choice((0, 3, 250, 251, 300, 70000)))
        if binary:
            bitmap = bytearray((len(types) + 9) // 8)
            body = b""
            for i, (t, v) in enumerate(zip(types, values, strict=True)):
                if v is None:
                    bitmap[(i + 2) >> 3] |= 1 << ((i + 2) & 7)
                elif t in fixed:
                    body += v
                elif t in (10, 12):
                    body += bytes([len(v)]) + v
                else:
                    body += _lenenc(v)
            payload = b"\x00" + bytes(bitmap) + body
        else:
            payload = _text_payload(tuple(values))
        payload = _damaged(rng, payload)
        run = b"\x07" + frames_of([payload]).data + b"\x07"
        for cut in range(0 if binary else 1, len(types) + 1):
            outs = []
            for impl in (None, c):
                out = bytearray(b"\x05")
                got = _result(frames._cutter(cut, types if binary else None, impl), out, run, 1, len(run) - 1)
                outs.append((got, bytes(out) if got[0] == "ok" else None))
            assert outs[0] == outs[1], (types, cut)


def _merge(c: Any, streams: list[list[bytes]], spec: Any, columns: Any, run_rows: int) -> tuple[Any, bytes, int]:
    """The whole merge of `streams` (row payloads, each stream in its key order) fed as runs of `run_rows` rows, by
    FrameMerger with `c` as merge.frames.C: (outcome, output bytes, rows)."""
    from merge.errors import RowBudget
    from merge.raw import _plan

    saved = frames.C
    frames.C = c
    try:
        import merge.raw

        merge.raw._PLANS.clear()
        plan = _plan(spec, columns, None)
        runs = [[frames_of(s[i:i + run_rows]).data for i in range(0, len(s), run_rows)] for s in streams]
        merger = frames.FrameMerger(plan.key, len(streams), spec.offset, -1 if spec.limit is None else spec.limit,
                                    cut=plan.cut, check=plan.check, distinct=plan.distinct,
                                    budget=RowBudget(1000), tied=plan.tied)
        # the C loop runs the merges it takes (none with an untied DISTINCT), not the Python one behind a None
        assert (merger.c_loop is not None) == (c is not None and (plan.distinct is None or plan.tied))
        for s, r in enumerate(runs):
            merger.feed(s, bytes(r.pop(0)) if r else None)
        out = bytearray()
        sent = bytearray()
        rows = 0

        def go() -> None:
            nonlocal out, rows
            while (step := merger.merge(out, 700)) != frames.DONE:
                if step == frames.FULL:
                    rows += merger.take_rows()
                    sent.extend(out + b"|")
                    out = bytearray()
                else:
                    merger.feed(step, bytes(runs[step].pop(0)) if runs[step] else None)
            rows += merger.take_rows()

        outcome = _result(go)
        return outcome, bytes(sent + out), rows
    finally:
        frames.C = saved
        import merge.raw

        merge.raw._PLANS.clear()


@pytest.mark.parametrize("seed", range(6))
def test_the_c_merge_loop_is_the_python_one(seed: int) -> None:
    """FrameMerger's loop in C (`merge_loop`, with the C keys and cuts) against the Python loop and steps: the same
    bytes in the same output runs, the same row counts and the same errors, for ORDER BY and tied DISTINCT merges
    of text keys with OFFSET, LIMIT, hidden columns, ties, NULLs, low units and streams out of order."""
    from merge.keys import order_key
    from merge.spec import MergeSpec, OrderItem
    from tests.merge.support import col

    c = _c()
    rng = random.Random(seed)
    columns = [col("ci", "c"), col("int", "n"), col("binary", "w")]
    reference = order_key((OrderItem(0),), columns, {0: 2})
    for _ in range(30):
        streams = []
        for _ in range(rng.randint(1, 4)):
            rows = []
            for _ in range(rng.randint(0, 40)):
                text = "".join(rng.choice("aAb \t\x1f!\u4e1f") for _ in range(rng.randint(0, 4)))
                value = None if rng.random() < 0.05 else text.encode()
                weight = None if value is None else short(text)
                rows.append((value, str(rng.randint(0, 3)).encode(), weight))
            rows.sort(key=reference)
            if rng.random() < 0.1 and len(rows) > 2:
                rows.reverse()  # out of the weights' order: the merge refuses it
            streams.append([_text_payload(r) for r in rows])
        distinct = rng.random() < 0.5
        spec = MergeSpec(1 if distinct else rng.choice((1, 2)), (OrderItem(0),), weights=((0, 2),), distinct=distinct,
                         offset=rng.choice((0, 0, 1, 7, 2**64 - 1)),
                         limit=rng.choice((None, None, 0, 1, 5, 30, 2**64 - 1, 2**63)))  # LIMIT 18446744073709551615
        run_rows = rng.choice((1, 3, 50))
        assert _merge(c, streams, spec, columns, run_rows) == _merge(None, streams, spec, columns, run_rows), spec


@pytest.mark.parametrize("descending", [False, True])
def test_the_c_integer_key_is_the_python_one(descending: bool) -> None:
    """`frame_key` of one integer column of text rows: `text_int_key` (C) against the Python key, for values of every
    length (18 digits in C, more in Python), signs, leading zeros, NULLs, other columns before it and broken rows."""
    from merge.spec import OrderItem
    from tests.merge.support import col

    c = _c()
    rng = random.Random(31 + descending)
    saved = frames.C
    try:
        for _ in range(60):
            before = rng.randint(0, 3)
            columns = [*(col("ci", f"p{i}") for i in range(before)), col("bigint", "k"), col("ci", "z")]
            keys = []
            for impl in (None, c):
                frames.C = impl
                keys.append(frames.frame_key((OrderItem(before, descending),), columns, None))
            for _ in range(40):
                digits = "".join(rng.choice("0123456789") for _ in range(rng.choice((1, 2, 17, 18, 19, 20, 25))))
                value = rng.choice((digits, "-" + digits, "-0", "007", "", "1x", " 5", "+5", "-"))
                cells: list[bytes | None] = [None if rng.random() < 0.2 else b"p" * rng.choice((0, 3, 260))
                                             for _ in range(before)]
                cells += [None if rng.random() < 0.15 else value.encode(), b"z"]
                payload = _damaged(rng, _text_payload(tuple(cells)))
                run = b"\x07" + frames_of([payload]).data + b"\x07"
                got = [_result(k, run, 1, len(run) - 1) for k in keys]
                assert got[1] == got[0], cells
    finally:
        frames.C = saved


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_the_c_keys_answer_the_usual_rows_without_python(binary: bool) -> None:
    """Rows as sysbench's ORDER BY c range gets them (a CHAR value of digits and dashes, its utf8mb4_general_ci weights
    in the short form): after the first row (which teaches the decoder the collation), no row goes to the Python key
    or the decoder's own order_at. (The comparisons above pass whatever share of rows C hands back.)"""
    c = _c()

    class Counting:  # what the C key reads of its decoder (a compiled WeightDecoder takes no subclass)
        def __init__(self) -> None:
            self.inner, self.calls = WeightDecoder(True), 0

        @property
        def _fast(self) -> Any:
            return self.inner._fast

        def order_at(self, run: bytes, ws: int, we: int) -> bytes:
            self.calls += 1
            return self.inner.order_at(run, ws, we)

    general_calls = []
    decoder = Counting()
    general = lambda run, a, b: general_calls.append(a)  # noqa: E731
    key = partial(c.binary_order_key, 0, 1, 2, decoder, general) if binary \
        else partial(c.text_order_key, 0, 1, decoder, general)
    python = (frames._weighted_binary_order_key(0, 1, 2, WeightDecoder(True), general, None) if binary
              else frames._weighted_order_key(0, 1, WeightDecoder(True), general, None))
    rng = random.Random(41)
    for _ in range(50):
        text = "-".join("".join(rng.choice("0123456789") for _ in range(11)) for _ in range(10))
        payload = (_binary_payload if binary else _text_payload)((text.encode(), short(text, pad_to=120)))
        run = bytes(frames_of([payload]).data)
        assert key(run, 0, len(run)) == python(run, 0, len(run))
    assert decoder.calls == 1 and not general_calls


def test_the_c_loops_are_what_the_modules_use() -> None:
    """Where the helpers are built, the merge and the row scan use them (not the Python steps behind a loader that
    returned None)."""
    import os

    from protocol import rowframes

    if os.environ.get("SHARDPROXY_NO_C") == "1":
        pytest.skip("SHARDPROXY_NO_C=1 switches them off")
    frames_c, rows_c = _c(), c_helper("protocol._crowframes")
    assert frames.C is frames_c
    assert rowframes.scan_rows is rows_c.scan_rows and rowframes.renumber is rows_c.renumber
