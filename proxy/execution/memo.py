"""What the proxy derives from an object the kernel or the parser hands out again, kept by that object's identity.

Why: the kernel keeps a text's route (`RoutedStatement.reused`), `protocol.results` gives the same column tuple and
definitions back for the same header bytes, so what the answer path derives from them (renames, framed commands,
merge metadata, logic column definitions) need not be derived at every statement. Keyed by `id`, an entry
holds its object, so the id cannot be taken by another object while the entry lives; a memo is bounded (emptied when
full), so objects seen once cost a little memory for a while, never more than `limit` entries.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["IdentityMemo"]

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """Values kept per object, by identity, at most `limit` of them."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int) -> None:
        self._entries: dict[int, tuple[object, V]] = {}
        self.limit = limit

    def get(self, obj: object) -> V | None:
        hit = self._entries.get(id(obj))
        return hit[1] if hit is not None and hit[0] is obj else None

    def put(self, obj: object, value: V) -> V:
        entries = self._entries
        if len(entries) >= self.limit:
            entries.clear()
        entries[id(obj)] = (obj, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
