"""Relaying runs of row frames to the client: one write per run, sequence ids rewritten in place.

Why: rows a scatter read only concatenates or interleaves arrive as `protocol.rowframes.RowFrames` (the
backend's framing kept); the client's sequence ids continue from the answer's header, so each run is
renumbered (`protocol.rowframes.renumber`) and written whole, instead of a payload object and a new frame
header per row: per-row Python steps would be most of a relayed range's cost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from protocol.rowframes import RowFrames, renumber
from proxy.frontend.wire import ClientPackets

__all__ = ["relay_frames"]


async def relay_frames(wire: ClientPackets, runs: AsyncIterator[RowFrames]) -> int:
    """Write every run to the client with its next sequence ids (waiting while the client reads slowly);
    returns how many rows were sent."""
    count = 0
    async for frames in runs:
        data = frames.data
        buf = data if isinstance(data, bytearray) else bytearray(data)
        wire.seq = renumber(buf, wire.seq)
        count += frames.rows
        wire.writer.write(buf)
        await wire.flush()
    return count
