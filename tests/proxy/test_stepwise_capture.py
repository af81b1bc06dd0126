"""proxy.execution.stepwise's bounded capture: a step's answer kept within the merge's memory bound."""

from __future__ import annotations

import pytest

from proxy.execution.stepwise import _BoundedCapture


def frame(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


@pytest.mark.parametrize(
    ("limit", "packets", "kept", "over"),
    [
        (0, 5, [b"p0", b"p1", b"p2", b"p3", b"p4"], False),  # no bound
        (5, 5, [b"p0", b"p1", b"p2", b"p3", b"p4"], False),  # exactly the bound
        (3, 5, [b"p0", b"p1", b"p4"], True),  # past it: the first ones, then only the last (the answer's end)
        (1, 3, [b"p2"], True),
    ],
)
def test_bounded(limit: int, packets: int, kept: list[bytes], over: bool) -> None:
    capture = _BoundedCapture(limit)
    data = b"".join(frame(i, f"p{i}".encode()) for i in range(packets))
    capture.write(data[:7])  # split across writes, as a transport delivers
    capture.write(data[7:])
    assert (capture.kept, capture.over) == (kept, over)
