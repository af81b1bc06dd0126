"""merge.raw: an ORDER BY-only merge over raw row frames sends exactly what the general pipeline sends
(same rows, same order, ties in stream order, OFFSET/LIMIT), whatever the runs the nodes' reads deliver, and
whether keys are read in place (text rows) or through a row decoder (the binary protocol's path)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence

import pytest

from merge.frames import frame_key
from merge.pipeline import merge_rows_sync
from merge.raw import raw_mergeable, raw_order_merge, raw_order_merge_whole
from merge.spec import ColumnMeta, MergeSpec, OrderItem
from protocol.binary import binary_row_to_text, text_row_to_binary
from protocol.constants import ColumnType
from protocol.packets import ColumnDefinition41, decode_text_row, encode_text_row
from protocol.rowframes import RowFrames, frames_of, renumber, row_payloads
from tests.merge.support import col, cols, node
from tests.merge.test_weights import short, w

Row = tuple[bytes | None, ...]
ASC0, DESC0 = (OrderItem(0),), (OrderItem(0, True),)
BIG = b"x" * (0xFFFFFF + 10)  # a row of more than 16 MB: continuation frames

# (columns, spec, node streams)
CASES: list[tuple[list[ColumnMeta], MergeSpec, list[list[Row]]]] = [
    (cols("bigint", "ci"), MergeSpec(2, ASC0), [node((1, "a"), (4, "d")), node((2, "b"), (3, "c")), node()]),
    (cols("bigint", "ci"), MergeSpec(2, DESC0), [node((4, "a"), (1, "d")), node((3, "b"), (2, "c"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0, limit=3), [node((1, "a"), (4, "d")), node((2, "b"), (3, "c"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0, offset=1, limit=2), [node((1, "a"), (4, "d")), node((2, "b"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0, offset=9), [node((1, "a")), node((2, "b"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0, limit=0), [node((1, "a")), node((2, "b"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0), [node((1, "x"), (1, "y")), node((1, "z"), (2, "w"))]),  # ties
    (cols("int", "bigint"), MergeSpec(2, (OrderItem(1), OrderItem(0, True))),
     [node((3, 1), (1, 1), (2, 5)), node((2, 1), (9, 4))]),
    (cols("int", "ci"), MergeSpec(2, ASC0), [node((None, "n"), (1, "a")), node((None, "m"), (0, "z"))]),  # NULLs
    (cols("int", "ci"), MergeSpec(2, DESC0), [node((1, "a"), (None, "n")), node((0, "z"), (None, "m"))]),
    (cols("int", "ci"), MergeSpec(2, DESC0), [node((None, "n"), (None, "o")), node((None, "m"))]),  # NULLs only
    (cols("ci", "int"), MergeSpec(2, (OrderItem(1),)),  # one numeric key that is not the first column
     [node(("a", None), ("b", -5), ("c", 7)), node(("d", None), ("e", 0)), node(("f", 9))]),
    (cols("ci", "int"), MergeSpec(2, (OrderItem(1, True),)),
     [node(("a", 7), ("b", -5), ("c", None)), node(("d", 8), ("e", None))]),
    (cols("dec", "int"), MergeSpec(2, ASC0), [node(("1.50", 1), ("10.00", 2)), node(("9.99", 3))]),
    (cols("dec", "int"), MergeSpec(2, DESC0), [node(("10.00", 1), ("-1.50", 2), (None, 0)), node(("9.99", 3))]),
    (cols("uint", "int"), MergeSpec(2, ASC0), [node((18446744073709551615, 1)), node((0, 2), (2**63, 3))]),
    (cols("ci", "int"), MergeSpec(2, ASC0), [node(("a", 1), ("B", 2)), node(("b", 3), ("C", 4))]),
    (cols("ci", "int"), MergeSpec(2, DESC0), [node(("c", 1), ("B", 2), (None, 0)), node(("b", 3), ("A", 4))]),
    (cols("bin", "int"), MergeSpec(2, ASC0), [node(("a", 1), ("b", 2)), node(("B", 3), ("a ", 4))]),
    (cols("cs", "uca1400"), MergeSpec(2, (OrderItem(1), OrderItem(0))),
     [node(("é", "e"), ("a", "É")), node(("b", "e"), ("z", "f"))]),
    (cols("double"), MergeSpec(1, DESC0), [node(1.5, -2, -3e10), node(7, 0)]),
    (cols("datetime", "time"), MergeSpec(2, (OrderItem(1), OrderItem(0, True))),
     [node(("2024-01-01 00:00:00", "-10:00:00"), ("2023-01-01 00:00:00", "100:00:00")),
      node(("2025-01-01 00:00:00", "-10:00:00"), (None, "1:00:00"))]),
    (cols("bigint", "ci"), MergeSpec(2, ASC0), [node((1, "a" * 300), (3, "c" * 70000)), node((2, "b" * 251))]),
    ([ColumnMeta("c0", 3)], MergeSpec(1, ASC0), [node(*range(0, 600, 2)), node(*range(1, 600, 2))]),  # > a batch
    ([ColumnMeta("c0", 3)], MergeSpec(1, ASC0), [node(), node(), node()]),  # empty shards only
    # DISTINCT: the first of equal rows in merge order passes, OFFSET and LIMIT count the rows that pass
    (cols("ci", "int"), MergeSpec(2, ASC0, distinct=True),
     [node(("a", 1), ("a", 1), ("b", 2), ("B", 2)), node(("A", 1), ("b", 2), ("c", None), ("c", None))]),
    (cols("int", "ci"), MergeSpec(2, (OrderItem(1),), distinct=True, offset=1, limit=2),
     [node((1, "a"), (1, "a"), (2, "b")), node((1, "a"), (3, "b"), (2, "c"), (2, "c"))]),
    (cols("int", "int"), MergeSpec(2, DESC0, distinct=True),
     [node((None, None), (None, None)), node((None, 1), (None, None))]),
    (cols("bigint"), MergeSpec(1, ASC0, distinct=True, limit=3), [node(*range(0, 60, 2)), node(*range(0, 60, 3))]),
    # DISTINCT over more columns than the sort key: duplicates apart within a tie group (FrameMerger `tied`)
    (cols("int", "int"), MergeSpec(2, ASC0, distinct=True),
     [node((1, 1), (1, 2), (1, 1), (2, 2), (2, 2)), node((1, 2), (1, 3), (1, 1), (2, 1), (3, None), (3, None))]),
    (cols("int", "ci"), MergeSpec(2, DESC0, distinct=True, offset=1, limit=3),
     [node((3, "a"), (3, "b"), (3, "a"), (1, "x")), node((3, "b"), (2, "c"), (1, "x"), (None, "n"), (None, "n"))]),
    (cols("double", "int"), MergeSpec(2, ASC0, distinct=True),  # a key that is not tied: the seen-set
     [node((1.5, 1), (1.5, 2), (2, 1)), node((1.5, 1), (2, 1), (2, 2))]),
]
# rows of more than 16 MB (continuation frames): slow to build, so one run size only
BIG_CASES: list[tuple[list[ColumnMeta], MergeSpec, list[list[Row]]]] = [
    (cols("bigint", "binary"), MergeSpec(2, ASC0), [node((1, "a"), (3, BIG), (5, "e")), node((2, BIG), (4, "d"))]),
    (cols("ci", "bigint"), MergeSpec(2, DESC0), [node((BIG, 1), ("a", 2)), node(("b", 3))]),  # key of > 16 MB
]


async def _runs(payloads: list[bytes], size: int) -> AsyncIterator[RowFrames]:
    for i in range(0, len(payloads), size):
        yield frames_of(payloads[i:i + size])


def _definitions(columns: Sequence[ColumnMeta]) -> list[ColumnDefinition41]:
    return [ColumnDefinition41(c.name, ColumnType(c.type_code), character_set=c.charset, flags=c.flags,
                               decimals=c.decimals) for c in columns]


def _as_binary(columns: Sequence[ColumnMeta], streams: list[list[Row]]) -> list[list[Row]]:
    """The text values a server would send for these rows through the binary protocol (FLOAT and DOUBLE
    are printed again), so the pipeline's answer can be compared with the binary merge's."""
    defs = _definitions(columns)
    return [[binary_row_to_text(text_row_to_binary(r, defs), defs) for r in s] for s in streams]


async def _raw(columns: Sequence[ColumnMeta], spec: MergeSpec, streams: list[list[Row]], size: int,
               decoded: bool, whole: bool = False) -> list[Row]:
    """`decoded`: binary-protocol rows, whose keys are read through the binary row decoder. `whole`: every node's
    runs at hand, merged by `raw_order_merge_whole` in one call."""
    width = spec.visible_columns
    defs = _definitions(columns)
    encode = (lambda r: text_row_to_binary(r, defs)) if decoded else encode_text_row
    batches = [_runs([encode(r) for r in s], size) for s in streams]
    out = bytearray()
    rows = 0
    seq = 5
    decode = (lambda p, n: binary_row_to_text(p, defs, n)) if decoded else None
    if whole:
        runs = [[run async for run in b] for b in batches]
        merged, ended = raw_order_merge_whole(runs, spec, columns, decode)
        if spec.limit is None and not spec.offset:
            assert ended == [True] * len(runs)  # every node read to its end
        merged_runs = [merged]
    else:
        merged_runs = [run async for run in raw_order_merge(batches, spec, columns, decode, out_bytes=64)]
    for run in merged_runs:
        data = bytearray(run.data)
        seq = renumber(data, seq)
        rows += run.rows
        out += data
    payloads = row_payloads(out)
    assert len(payloads) == rows
    if decoded:
        return [binary_row_to_text(p, defs[:width]) for p in payloads]
    return [decode_text_row(p, width) for p in payloads]


@pytest.mark.parametrize(("columns", "spec", "streams", "size"),
                         [(*c, size) for c in CASES for size in (1, 2, 1000)] + [(*c, 2) for c in BIG_CASES])
@pytest.mark.parametrize("decoded", [False, True], ids=["in-place", "decoded"])
@pytest.mark.parametrize("whole", [False, True], ids=["streamed", "whole"])
def test_raw_merge_sends_what_the_pipeline_sends(frames_impl: str, columns: list[ColumnMeta], spec: MergeSpec,
                                                 streams: list[list[Row]], size: int, decoded: bool,
                                                 whole: bool) -> None:
    assert raw_mergeable(spec, len(columns))
    if decoded:
        streams = _as_binary(columns, streams)
    expected = list(merge_rows_sync(streams, spec, columns))
    assert _raw_sync(columns, spec, streams, size, decoded, whole) == expected


def _raw_sync(columns: Sequence[ColumnMeta], spec: MergeSpec, streams: list[list[Row]], size: int,
              decoded: bool, whole: bool = False) -> list[Row]:
    return asyncio.run(_raw(columns, spec, streams, size, decoded, whole))


WTEXT = [col("ci", "s"), col("int", "n"), col("binary", "w")]  # s, n, WEIGHT_STRING(s) hidden
# text rows whose trailing hidden columns (a derived ORDER BY column, a text key's weights) are cut off
CUT_CASES: list[tuple[list[ColumnMeta], MergeSpec, list[list[Row]]]] = [
    (cols("ci", "int"), MergeSpec(1, (OrderItem(1),)), [node(("a", 3), ("b", 5)), node(("c", 1), ("d", 9)), node()]),
    (cols("ci", "int"), MergeSpec(1, (OrderItem(1, True),), limit=2), [node(("a", 3), ("b", None)), node(("c", 4))]),
    (WTEXT, MergeSpec(2, (OrderItem(0),), weights=((0, 2),)),
     [node(("a", 1, w("a")), ("é", 2, w("é"))), node(("E", 3, w("E")), ("É", 4, w("É")))]),
    (WTEXT, MergeSpec(2, (OrderItem(0, True), OrderItem(1)), weights=((0, 2),), offset=1),
     [node(("b", 1, w("b")), ("a ", 2, w("a ")), ("a", 3, w("a"))), node(("B", 0, w("B")), (None, 5, None))]),
    (WTEXT, MergeSpec(2, (OrderItem(1),), weights=((0, 2),)),  # numeric key: its weight is never read
     [node(("x", 1, None), ("y", 3, None)), node(("z", 2, None))]),
    # SELECT DISTINCT s ... ORDER BY s: duplicates by the weights ('a' = 'A' = 'a '), the first one passes
    (WTEXT[:1] + WTEXT[2:], MergeSpec(1, (OrderItem(0),), weights=((0, 1),), distinct=True),
     [node(("a", w("a")), ("a ", w("a ")), ("b", w("b"))), node(("A", w("A")), ("B", w("B")), ("é", w("é")))]),
    (WTEXT, MergeSpec(2, (OrderItem(0, True),), weights=((0, 2),), distinct=True, limit=3),
     [node(("b", 1, w("b")), ("a", 1, w("a")), ("a", 2, w("a"))), node(("B", 1, w("B")), ("A", 2, w("A")))]),
    # SELECT DISTINCT s, n ... ORDER BY s: ties by the weights ('a' = 'A'), duplicates apart within them
    (WTEXT, MergeSpec(2, (OrderItem(0),), weights=((0, 2),), distinct=True),
     [node(("a", 1, w("a")), ("A", 2, w("A")), ("a", 1, w("a")), ("b", 1, w("b"))),
      node((None, 3, None), (None, 3, None), ("A", 1, w("A")), ("a ", 2, w("a ")), ("B", 1, w("B")))]),
    # SELECT DISTINCT s ... ORDER BY n (n hidden): not tied, duplicates far apart
    (WTEXT, MergeSpec(1, (OrderItem(1),), weights=((0, 2),), distinct=True),
     [node(("a", 1, w("a")), ("b", 2, w("b")), ("A", 3, w("A"))), node(("B", 1, w("B")), ("a", 5, w("a")))]),
    (WTEXT, MergeSpec(2, (OrderItem(0),), weights=((0, 2),)),
     [node(("a", 1, w("a")), (BIG.decode(), 2, w("x" * 20))), node(("b", 3, w("b")))]),  # a row of > 16 MB
]


@pytest.mark.parametrize(("columns", "spec", "streams", "size"),
                         [(*c, size) for c in CUT_CASES[:-1] for size in (1, 2, 1000)] + [(*CUT_CASES[-1], 2)])
def test_raw_merge_cuts_hidden_columns_like_the_pipeline(frames_impl: str, columns: list[ColumnMeta], spec: MergeSpec,
                                                         streams: list[list[Row]], size: int) -> None:
    assert raw_mergeable(spec, len(columns))
    expected = list(merge_rows_sync(streams, spec, columns))
    assert _raw_sync(columns, spec, streams, size, False) == expected


@pytest.mark.parametrize(("columns", "spec", "streams", "size"),
                         [(*c, size) for c in CUT_CASES[:-1] for size in (1, 1000)])
def test_binary_rows_are_cut_like_the_pipeline(frames_impl: str, columns: list[ColumnMeta], spec: MergeSpec,
                                               streams: list[list[Row]], size: int) -> None:
    """Prepared statements' rows: the key read through the binary decoder, the hidden columns cut off the
    NULL bitmap and the values (protocol.rowscan.binary_cut)."""
    streams = _as_binary(columns, streams)
    assert _raw_sync(columns, spec, streams, size, True) == list(merge_rows_sync(streams, spec, columns))


def test_raw_merge_refuses_a_stream_out_of_the_weights_order(frames_impl: str) -> None:
    from merge.errors import MergeError

    streams = [node(("b", 1, w("b")), ("a", 2, w("a"))), node(("c", 3, w("c")))]
    with pytest.raises(MergeError):
        _raw_sync(WTEXT, MergeSpec(2, (OrderItem(0),), weights=((0, 2),)), streams, 1000, False)


@pytest.mark.parametrize(("spec", "mergeable"), [
    (MergeSpec(2, ASC0), True),
    (MergeSpec(2), False),  # nothing to order: concatenation
    (MergeSpec(1, ASC0), True),  # a derived column is cut off
    (MergeSpec(2, ASC0, group_by=(0,)), False),
    (MergeSpec(2, ASC0, distinct=True), True),  # rows dropped, none changed
    (MergeSpec(2, distinct=True), False),  # DISTINCT without ORDER BY: the pipeline's concatenation
    (MergeSpec(2, ASC0, having_sql="c > 1"), False),
    (MergeSpec(2, ASC0, weights=((1, 1),)), True),  # ordered by the nodes' weights
    (MergeSpec(3, ASC0), False),  # more visible columns than the nodes return
    (MergeSpec(2, ASC0, limit=1, with_ties=True), False),
    (MergeSpec(2, ASC0, found_rows="count"), False),
])
def test_raw_mergeable(spec: MergeSpec, mergeable: bool) -> None:
    assert raw_mergeable(spec, 2) is mergeable


async def _distinct_rows(streams: list[list[bytes]], spec: MergeSpec, columns: list[ColumnMeta], budget: int) -> int:
    rows = 0
    async for run in raw_order_merge([_runs(s, 3) for s in streams], spec, columns, memory_row_budget=budget):
        rows += run.rows
    return rows


def test_raw_distinct_keeps_its_keys_within_the_row_budget() -> None:
    from merge.errors import MergeMemoryError

    spec = MergeSpec(1, ASC0, distinct=True)
    streams = [[encode_text_row((str(i).encode(),)) for i in range(0, 20, 2)],
               [encode_text_row((str(i).encode(),)) for i in range(1, 20, 2)]]
    double = [ColumnMeta("c0", 5)]  # a DOUBLE sort key: not `tied`, every key seen is kept
    assert asyncio.run(_distinct_rows(streams, spec, double, 20)) == 20
    with pytest.raises(MergeMemoryError):
        asyncio.run(_distinct_rows(streams, spec, double, 19))


def test_tied_distinct_keeps_only_the_tie_groups_keys(frames_impl: str) -> None:
    """An integer sort key that is the DISTINCT column: duplicates are neighbours, a key is kept only while
    rows tie, so 40 rows of 20 values pass within a budget of one key (the pipeline's DistinctFilter would
    hold 20)."""
    from merge.errors import MergeMemoryError

    spec = MergeSpec(2, ASC0, distinct=True)
    streams = [[encode_text_row((str(i).encode(), b"1")) for i in range(20)],
               [encode_text_row((str(i).encode(), b"1" if i % 2 else b"2")) for i in range(20)]]
    ints = [ColumnMeta("c0", 3), ColumnMeta("c1", 3)]
    assert asyncio.run(_distinct_rows(streams, spec, ints, 2)) == 30
    with pytest.raises(MergeMemoryError):  # a tie group of two distinct rows keeps two keys
        asyncio.run(_distinct_rows(streams, spec, ints, 1))


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("layout", ["c,w", "c,pad,w", "pad,c,w"])
def test_in_place_weighted_keys_are_the_decoded_ones(frames_impl: str, binary: bool, layout: str) -> None:
    """`frame_key`'s in-place key of one ASC text column with a weight column (`_weighted_order_key`,
    `_weighted_binary_order_key`) equals `merge.keys.order_key` of the decoded row, for NULL values and
    weights, short and long weight forms, long values (0xFC lengths) and other columns around them."""
    from merge.keys import order_key

    names = layout.split(",")
    columns = [col("binary" if n == "w" else "ci", n) for n in names]
    index, wi = names.index("c"), names.index("w")
    defs = _definitions(columns)
    rng = random.Random(3)
    key = frame_key((OrderItem(index),), columns, (lambda p, n: binary_row_to_text(p, defs, n)) if binary else None,
                    {index: wi})
    reference = order_key((OrderItem(index),), columns, {index: wi})
    for _ in range(400):
        text = "".join(rng.choice("aB \t-9:") for _ in range(rng.choice((0, 3, 20, 300))))
        row: dict[str, bytes | None] = {
            "c": None if rng.random() < 0.1 else text.encode(),
            "pad": None if rng.random() < 0.3 else b"p" * rng.choice((0, 5, 260)),
            "w": None if rng.random() < 0.1 else rng.choice((short(text), w(text))),
        }
        values = tuple(row[n] for n in names)
        payload = text_row_to_binary(values, defs) if binary else encode_text_row(values)
        run = b"\x07\x07" + frames_of([payload]).data + b"\x07"
        got = key(run, 2, len(run) - 1)
        decoded = binary_row_to_text(payload, defs) if binary else decode_text_row(payload, len(values))
        assert got == reference(decoded), values


_VALUES = {
    "int": lambda r: str(r.randint(-2**31, 2**31 - 1)), "bigint": lambda r: str(r.randint(-2**63, 2**63 - 1)),
    "double": lambda r: repr(r.uniform(-1e6, 1e6)), "dec": lambda r: f"{r.randint(-99999, 99999) / 100:.2f}",
    "date": lambda r: f"20{r.randint(10, 30)}-0{r.randint(1, 9)}-1{r.randint(0, 9)}",
    "datetime": lambda r: f"2024-01-0{r.randint(1, 9)} 0{r.randint(0, 9)}:1{r.randint(0, 9)}:00",
    "time": lambda r: f"{r.randint(-838, 838)}:0{r.randint(0, 9)}:00",
    "ci": lambda r: "x" * r.choice((0, 1, 250, 251, 300, 70000)), "binary": lambda r: "\x00" * r.randint(0, 3),
}


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_the_merge_cuts_rows_as_the_reference_cut(frames_impl: str, binary: bool) -> None:
    """`FrameMerger`'s in-place cut (`_cutter`) of rows of every value shape equals `protocol.rowscan`'s
    `binary_cut` / `text_cut` of the row, at every cut."""
    from merge import frames
    from merge.frames import _cutter
    from protocol.rowscan import binary_cut, text_cut

    rng = random.Random(9)
    kinds = list(_VALUES)
    for _ in range(300):
        columns = [col(rng.choice(kinds), f"c{i}") for i in range(rng.randint(2, 12))]
        defs = _definitions(columns)
        names = [next(k for k in kinds if col(k).type_code == c.type_code and col(k).charset == c.charset)
                 for c in columns]
        values = tuple(None if rng.random() < 0.2 else _VALUES[k](rng).encode() for k in names)
        payload = text_row_to_binary(values, defs) if binary else encode_text_row(values)
        run = b"\x07" + frames_of([payload]).data
        for cut in range(1, len(columns)):
            out = bytearray(b"\x05")
            _cutter(cut, [c.type_code for c in columns] if binary else None, frames.C)(out, run, 1, len(run))
            want = binary_cut(payload, [c.type_code for c in columns], cut) if binary \
                else payload[:text_cut(payload, cut)]
            assert bytes(out) == b"\x05" + frames_of([want]).data, (names, cut)


@pytest.mark.parametrize("kind", ["int", "bigint", "uint"])
@pytest.mark.parametrize("descending", [False, True])
def test_binary_integer_keys_order_as_the_decoded_rows(frames_impl: str, kind: str, descending: bool) -> None:
    """`frame_key` of one integer column of binary rows (`_binary_integer_key`: read in place after columns of
    every value shape, NULLs from the bitmap) orders and ties rows as `merge.keys.order_key` of the rows
    decoded."""
    from merge.keys import order_key

    rng = random.Random(13)
    kinds = list(_VALUES)
    values_of = {"int": lambda r: str(r.randint(-2**31, 2**31 - 1)), "bigint": _VALUES["bigint"],
                 "uint": lambda r: str(r.choice((0, 1, 2**63, 2**64 - 1, r.randint(0, 2**64 - 1))))}
    for _ in range(60):
        before = [col(rng.choice(kinds), f"c{i}") for i in range(rng.randint(0, 5))]
        columns = [*before, col(kind, "k"), col("ci", "z")]
        defs = _definitions(columns)
        names = [next(k for k in kinds if col(k).type_code == c.type_code and col(k).charset == c.charset)
                 for c in before]
        item = (OrderItem(len(before), descending),)
        key = frame_key(item, columns, lambda p, n, defs=defs: binary_row_to_text(p, defs, n))
        reference = order_key(item, columns)
        rows = []
        for _ in range(12):
            cells = [None if rng.random() < 0.2 else _VALUES[k](rng).encode() for k in names]
            value = None if rng.random() < 0.2 else rng.choice((b"7", b"0", values_of[kind](rng).encode()))
            payload = text_row_to_binary((*cells, value, b"z"), defs)
            run = frames_of([payload]).data
            rows.append((key(bytes(run), 0, len(run)), reference(binary_row_to_text(payload, defs))))
        for k1, r1 in rows:
            for k2, r2 in rows:
                assert (k1 < k2, k1 == k2) == (r1 < r2, r1 == r2)


def test_keys_are_kept_for_the_same_spec_header_and_decoder() -> None:
    """A spec over a header keeps its keys (merge.raw._plan); merging with them again answers alike, and
    another spec object, column list or decoder gets keys of its own."""
    from merge import raw

    columns, spec, streams = CUT_CASES[6]
    first = raw._plan(spec, columns, None)
    assert raw._plan(spec, columns, None) is first
    assert raw._plan(MergeSpec(**{**spec.__dict__}), columns, None) is not first
    assert raw._plan(spec, list(columns), None) is not first
    expected = list(merge_rows_sync(streams, spec, columns))
    assert _raw_sync(columns, spec, streams, 2, False) == expected
    assert _raw_sync(columns, spec, streams, 2, False) == expected
