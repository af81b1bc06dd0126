"""Text keys compared by the nodes' weights (merge.weights), and the merge parts issue 13 added around
them: WITH TIES, SQL_CALC_FOUND_ROWS counting, GROUP_CONCAT cut at group_concat_max_len, AVG's
truncated quotients. (Against real MariaDB: tests/integration/test_merge_semantics.py.)"""

from __future__ import annotations

import random

import pytest

from merge.aggregate import MergeStats
from merge.pipeline import decoded_width, merge_rows_sync
from merge.spec import AggregateItem, AggregateKind, MergeSpec, OrderItem
from merge.weights import WeightDecoder, _orderer, profile, weight_sql
from tests.merge.support import col, cols, node

K = AggregateKind


def w(text: str, collation: str = "utf8mb4_general_ci", msl: int = 1024) -> bytes:
    """A weight column value as a node sends it, for utf8mb4_general_ci-like weights (2 bytes a
    character: the code point, upper-cased for letters) — enough to check the merge's handling."""
    weights = b"".join(ord(c.upper() if c.isalpha() else c).to_bytes(2, "big") for c in text.rstrip(" "))
    return f"{collation}:{msl}:{len(weights)}:{len(weights)}:".encode() + weights


@pytest.mark.parametrize(("name", "pad", "space", "multi"), [
    ("utf8mb4_general_ci", True, b"\x00\x20", False),
    ("utf8mb4_bin", True, b"\x00\x00\x20", False),
    ("utf8mb3_bin", True, b"\x00\x20", False),
    ("utf8mb4_nopad_bin", False, b"\x00\x00\x20", False),
    ("utf8mb4_unicode_ci", True, b"\x02\x09", False),
    ("utf8mb4_unicode_520_ci", True, b"\x02\x0a", False),
    ("utf8mb4_uca1400_ai_ci", True, b"\x02\x09", False),
    ("utf8mb4_uca1400_as_cs", True, b"\x02\x09", True),
    ("utf8mb4_uca1400_nopad_ai_cs", False, b"\x02\x09", True),
    ("latin1_swedish_ci", True, b"\x20", False),
    ("latin7_general_ci", True, b"\x30", False),
    ("utf8mb4_0900_ai_ci", False, None, False),
])
def test_profiles(name: str, pad: bool, space: bytes | None, multi: bool) -> None:
    p = profile(name)
    assert (p.pad, p.space, p.multi_level) == (pad, space, multi)


@pytest.mark.parametrize("space", [b"\x20", b"\x00\x20", b"\x02\x09", b"\x00\x00\x20"])
def test_orderer_is_the_padded_comparison(space: bytes) -> None:
    """Bytewise order of the encoded weights = comparing the weights padded with the space weight."""
    u, s = len(space), int.from_bytes(space, "big")
    units = [(s + d).to_bytes(u, "big") for d in (-2, -1, 0, 0, 1, 2, 200)] + [bytes(u)]
    order = _orderer(space)
    rng = random.Random(7)
    for _ in range(4000):
        x = b"".join(rng.choice(units) for _ in range(rng.randint(0, 5)))
        y = b"".join(rng.choice(units) for _ in range(rng.randint(0, 5)))
        n = max(len(x), len(y)) + u
        px, py = (x + space * (n // u + 1))[:n], (y + space * (n // u + 1))[:n]
        assert (order(x) < order(y), order(x) == order(y)) == (px < py, px == py), (x.hex(), y.hex())


def test_decoder_pads_truncates_and_equates() -> None:
    d, eq = WeightDecoder(True), WeightDecoder(False)
    # 'a\t' < 'a' under PAD SPACE: TAB weighs less than the space 'a' is padded with
    assert d.order(w("a\t")) < d.order(w("a")) < d.order(w("a b"))
    assert eq.equal(w("a")) == eq.equal(w("a  "))
    # max_sort_length (64 bytes = 32 characters here) cuts ORDER BY keys only
    long_a, long_b = w("x" * 40 + "a", msl=64), w("x" * 40 + "b", msl=64)
    assert d.order(long_a) == d.order(long_b)
    assert eq.equal(long_a) != eq.equal(long_b)
    assert WeightDecoder(False).order(long_a) < WeightDecoder(False).order(long_b)


def test_weight_sql_reads_the_value_once_per_use() -> None:
    sql = weight_sql("c")
    assert sql.startswith("IF(COLLATION(c) = 'binary', NULL, CONCAT(COLLATION(c), ':', @@max_sort_length")
    assert "/*M! LEVEL 1 */" in sql and "RTRIM(c)" in sql


TEXT = [col("ci", "s"), col("binary", "w")]


def test_order_and_group_by_weights() -> None:
    """'ß' and 's' are one value under general_ci (weight 0053), 'ẞ' is another: the merge follows the
    weights, not Python's casefold."""
    s = [("ß", b"utf8mb4_general_ci:1024:2:2:\x00\x53"), ("s", b"utf8mb4_general_ci:1024:2:2:\x00\x53"),
         ("ẞ", b"utf8mb4_general_ci:1024:2:2:\x1e\x9e"), ("ss", b"utf8mb4_general_ci:1024:4:4:\x00\x53\x00\x53")]
    streams = [node(s[0], s[3]), node(s[1], s[2])]
    spec = MergeSpec(1, order_by=(OrderItem(0),), weights=((0, 1),))
    assert [r[0] for r in merge_rows_sync(streams, spec, TEXT)] == [b"\xc3\x9f", b"s", b"ss", "ẞ".encode()]
    group = MergeSpec(1, group_by=(0,), groups_sorted=True, weights=((0, 1),))
    assert len(list(merge_rows_sync(streams, group, TEXT))) == 3
    distinct = MergeSpec(1, distinct=True, weights=((0, 1),))
    assert len(list(merge_rows_sync([node(s[0], s[2]), node(s[1])], distinct, TEXT))) == 2


def test_stream_group_by_groups_ties_of_cut_keys() -> None:
    """Nodes sort by keys cut at max_sort_length: two groups tying there may come interleaved."""
    a, b = "x" * 40 + "a", "x" * 40 + "b"
    columns = [col("ci", "s"), col("int", "n"), col("binary", "w")]
    streams = [node((a, 1, w(a, msl=64)), (b, 1, w(b, msl=64))), node((b, 2, w(b, msl=64)), (a, 3, w(a, msl=64)))]
    spec = MergeSpec(2, group_by=(0,), aggregates=(AggregateItem(K.SUM, 1),), groups_sorted=True, weights=((0, 2),))
    assert sorted(merge_rows_sync(streams, spec, columns)) == [(a.encode(), b"4"), (b.encode(), b"3")]


def test_stream_out_of_the_merge_order_is_an_error() -> None:
    from merge.errors import MergeError

    streams = [node(("b", w("b")), ("a", w("a"))), node(("c", w("c")))]
    with pytest.raises(MergeError):
        list(merge_rows_sync(streams, MergeSpec(1, order_by=(OrderItem(0),), weights=((0, 1),)), TEXT))


def test_min_max_carry_their_weight() -> None:
    columns = [col("int", "k"), col("ci", "m"), col("binary", "w")]
    streams = [node((1, "b", w("b")), (2, "A", w("A"))), node((1, "a", w("a")), (2, "c", w("c")))]
    spec = MergeSpec(2, order_by=(OrderItem(1),), group_by=(0,), aggregates=(AggregateItem(K.MAX, 1),),
                     weights=((1, 2),))
    assert list(merge_rows_sync(streams, spec, columns)) == [(b"1", b"b"), (b"2", b"c")]


def test_weights_of_numeric_keys_are_not_decoded() -> None:
    spec = MergeSpec(1, order_by=(OrderItem(0),), weights=((0, 1),))
    assert decoded_width(spec, [col("int"), col("binary")]) == 1
    assert decoded_width(spec, [col("ci"), col("binary")]) == 2


def test_with_ties_and_found_rows() -> None:
    columns = cols("int", "int")
    streams = [node((1, 10), (2, 20), (2, 21)), node((1, 11), (2, 22), (3, 30))]
    ties = MergeSpec(2, order_by=(OrderItem(0),), offset=1, limit=2, with_ties=True)
    assert [r[1] for r in merge_rows_sync(streams, ties, columns)] == [b"11", b"20", b"21", b"22"]
    stats = MergeStats()
    counting = MergeSpec(2, order_by=(OrderItem(0),), limit=1, found_rows="count")
    assert len(list(merge_rows_sync(streams, counting, columns, warnings=stats))) == 1
    assert stats.found_rows == 6
    # each node's first row carries COUNT(*) OVER (): 40 and 2, one of them never needed for the page
    windowed = MergeSpec(1, limit=1, found_rows="window", found_rows_index=1)
    stats = MergeStats()
    assert list(merge_rows_sync([node((5, 40)), node((6, 2))], windowed, columns, warnings=stats)) == [(b"5",)]
    assert stats.found_rows == 42


def test_group_concat_cut_at_group_concat_max_len() -> None:
    columns = [col("ci", "g"), col("ci", "limit")]
    spec = MergeSpec(1, aggregates=(AggregateItem(K.GROUP_CONCAT, 0, limit_index=1),))
    stats = MergeStats()
    # the nodes' parts 'éé,éé' (9 bytes, cut from 12) and 'x': cut at 10 bytes (MariaDB keeps a separator)
    streams = [node(("éé,éé", "10:utf8mb4:12")), node(("x", "10:utf8mb4:1"))]
    assert list(merge_rows_sync(streams, spec, columns, warnings=stats)) == [("éé,éé,".encode(),)]
    # ... and never in the middle of a character
    streams = [node(("éé,é", "8:utf8mb4:7")), node(("éé", "8:utf8mb4:4"))]
    assert list(merge_rows_sync(streams, spec, columns)) == [("éé,é,".encode(),)]
    assert (stats.cut, stats.node_cut) == (1, 1)
    # latin1 result: the limit counts latin1 bytes (one a character), the wire carries utf8
    streams = [node(("éé", "4:latin1:2")), node(("éé", "4:latin1:2"))]
    assert list(merge_rows_sync(streams, spec, columns)) == [("éé,é".encode(),)]
    streams = [node(("ab", "9:utf8mb4:2")), node(("cd", "9:utf8mb4:2"))]
    assert list(merge_rows_sync(streams, spec, columns)) == [(b"ab,cd",)]


@pytest.mark.parametrize(("scale", "expected"), [(0, b"2"), (4, b"2.6667"), (9, b"2.666666666")])
def test_avg_quotient_truncated_on_whole_words(scale: int, expected: bytes) -> None:
    """MariaDB keeps whole 9-digit words of the quotient: at scale 0 or 9 it is truncated."""
    columns = [col("dec", "a", decimals=scale), col("int", "c"), col("dec", "s", decimals=0)]
    spec = MergeSpec(1, aggregates=(AggregateItem(K.AVG, 0, sum_index=2, count_index=1),))
    assert list(merge_rows_sync([node((None, 2, 5)), node((None, 1, 3))], spec, columns)) == [(expected,)]


def short(text: str, collation: str = "utf8mb4_general_ci", msl: int = 1024, pad_to: int = 0) -> bytes:
    """The short form of a weight column (`weight_sql_pieces(one_level=True)`): no level lengths, and the
    value's trailing spaces weighed too (a CHAR column's weights padded to its length: `pad_to` characters)."""
    long = w(text, collation, msl)
    weights = long.split(b":", 4)[4] + b"\x00\x20" * (len(text) - len(text.rstrip(" ")))
    weights += b"\x00\x20" * max(0, pad_to - len(weights) // 2)
    return f"{collation}:{msl}:::".encode() + weights


@pytest.mark.parametrize("truncate", [True, False])
def test_the_short_form_orders_and_equates_as_the_long_form(truncate: bool) -> None:
    """One-level collations: the short form's trailing space units are what RTRIM took off the long form's."""
    rng = random.Random(5)
    texts = ["", " ", "a", "a ", "a\t", "A", "b", "ab", "a b", ":", "a:b"]
    texts += ["x" * 40 + "a", "x" * 40 + "b", "x" * 40 + " " * 30]
    texts += ["".join(rng.choice("aB \t-9") for _ in range(rng.randint(0, 8))) for _ in range(200)]
    for msl in (1024, 64):
        long_d, short_d = WeightDecoder(truncate), WeightDecoder(truncate)
        for t in texts:
            pad = rng.choice((0, 50))
            assert short_d.order(short(t, msl=msl, pad_to=pad)) == long_d.order(w(t, msl=msl)), t
            assert short_d.equal(short(t, msl=msl, pad_to=pad)) == long_d.equal(w(t, msl=msl)), t


def test_the_short_form_of_a_multi_level_collation_is_refused() -> None:
    """The schema named a one-level collation, the node weighs by several levels (the table changed since):
    comparing the levels as one would order wrongly, so the merge stops with an error."""
    from merge.errors import MergeError

    with pytest.raises(MergeError, match="REFRESH TABLE METADATA"):
        WeightDecoder(True).order(b"utf8mb4_uca1400_as_cs:1024:::\x20\x21")


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "latin1_swedish_ci", "utf8mb4_unicode_ci",
                                       "utf8mb4_nopad_bin", "binary", "utf8mb4_0900_ai_ci"])
@pytest.mark.parametrize("truncate", [True, False])
def test_order_at_reads_in_place_what_order_reads(collation: str, truncate: bool) -> None:
    """`WeightDecoder.order_at` (the raw merge's key: the value read in place, its last ':' the tag) is
    b":" + `order` of the value cut out, for short and long forms, low units, trailing spaces and cuts."""
    rng = random.Random(11)
    texts = ["", " ", "a", "a ", "a\t", "a\t ", "\t", "ab", ":", "a:b", "x" * 40 + " " * 30]
    texts += ["".join(rng.choice("aB \t\x01-9:") for _ in range(rng.randint(0, 12))) for _ in range(300)]
    for msl in (1024, 16, 7):
        at, cut_out = WeightDecoder(truncate), WeightDecoder(truncate)
        for t in texts:
            value = rng.choice((short(t, collation, msl, rng.choice((0, 20))), w(t, collation, msl)))
            pad = b"\x05" * rng.randint(0, 3)
            run = pad + value + pad
            assert at.order_at(run, len(pad), len(pad) + len(value)) == b":" + cut_out.order(value), (t, value)
