"""Small builders so merge test cases fit on one line."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from merge import coltypes as t
from merge.pipeline import merge_rows_sync
from merge.spec import ColumnMeta, MergeSpec
from protocol.constants import ColumnType

Cell = str | bytes | int | None


def b(v: Cell) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return str(v).encode("utf-8")


def rows(*items: Sequence[Cell]) -> list[tuple[bytes | None, ...]]:
    return [tuple(b(v) for v in item) for item in items]


def node(*items: Sequence[Cell] | Cell) -> list[tuple[bytes | None, ...]]:
    """A node stream; bare scalars are one-column rows."""
    return rows(*(item if isinstance(item, list | tuple) else (item,) for item in items))


def col(kind: str, name: str = "c", decimals: int | None = None) -> ColumnMeta:
    """Column shorthands: int, uint, bigint, dec, double, float, ci, bin, binary, cs, date, datetime,
    time, bit, 0900, uca1400, latin1."""
    table: dict[str, tuple[int, int, int, int]] = {
        "int": (ColumnType.LONG, 63, 0, 0),
        "uint": (ColumnType.LONGLONG, 63, t.UNSIGNED_FLAG, 0),
        "bigint": (ColumnType.LONGLONG, 63, 0, 0),
        "dec": (ColumnType.NEWDECIMAL, 63, 0, 2),
        "double": (ColumnType.DOUBLE, 63, 0, t.NOT_FIXED_DEC),
        "float": (ColumnType.FLOAT, 63, 0, t.NOT_FIXED_DEC),
        "ci": (ColumnType.VAR_STRING, 45, 0, 0),
        "bin": (ColumnType.VAR_STRING, 46, 0, 0),
        "binary": (ColumnType.VAR_STRING, 63, t.BINARY_FLAG, 0),
        "cs": (ColumnType.VAR_STRING, 278, 0, 0),
        "0900": (ColumnType.VAR_STRING, 255, 0, 0),
        "uca1400": (ColumnType.VAR_STRING, 2304, 0, 0),
        "latin1": (ColumnType.STRING, 8, 0, 0),
        "date": (ColumnType.DATE, 63, t.BINARY_FLAG, 0),
        "datetime": (ColumnType.DATETIME, 63, t.BINARY_FLAG, 0),
        "time": (ColumnType.TIME, 63, t.BINARY_FLAG, 0),
        "bit": (ColumnType.BIT, 63, t.UNSIGNED_FLAG, 0),
    }
    code, charset, flags, dec = table[kind]
    return ColumnMeta(name, code, charset, flags, dec if decimals is None else decimals)


def cols(*kinds: str) -> list[ColumnMeta]:
    """Columns named c0, c1, ... (a 'kind:name' or 'kind:name:decimals' entry sets the name/scale)."""
    out = []
    for i, kind in enumerate(kinds):
        parts = kind.split(":")
        name = parts[1] if len(parts) > 1 else f"c{i}"
        decimals = int(parts[2]) if len(parts) > 2 else None
        out.append(col(parts[0], name, decimals))
    return out


def run(streams: Sequence[Iterable[tuple[bytes | None, ...]]], spec: MergeSpec, columns: Sequence[ColumnMeta],
        **kw: int) -> list[tuple[str | None, ...]]:
    """Merge synchronously; cells decoded to str for readable expectations."""
    return [
        tuple(None if v is None else v.decode("utf-8", "surrogateescape") for v in row)
        for row in merge_rows_sync(streams, spec, columns, **kw)
    ]


def _text(v: str | bytes | int) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def expect(*items: Sequence[Cell] | Cell) -> list[tuple[str | None, ...]]:
    out = []
    for item in items:
        seq = item if isinstance(item, list | tuple) else (item,)
        out.append(tuple(None if v is None else _text(v) for v in seq))
    return out


class CountingIterator(Iterator[tuple[bytes | None, ...]]):
    """A node stream that counts how many rows were pulled from it."""

    def __init__(self, data: Iterable[tuple[bytes | None, ...]]) -> None:
        self._it = iter(data)
        self.pulled = 0

    def __next__(self) -> tuple[bytes | None, ...]:
        row = next(self._it)
        self.pulled += 1
        return row
