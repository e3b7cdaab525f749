"""The one kind of cache the wire keeps: serialized pieces (and a few messages) by value."""

from __future__ import annotations

from collections.abc import Hashable
from itertools import islice
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(dict[K, V]):
    """A dict that never holds more than ``max_size`` entries.

    Readers use the dict's own ``get`` (a hit costs what a dict's does: the fast path looks up
    a dozen pieces per DecisionRequest) and call `keep` on a miss. When full, the older half
    goes, in insertion order: the values that recur (the running matches' ids, the shapes of a
    round) are the recent ones and come back on their next use, and dropping half at once keeps
    a miss O(1) amortized with no bookkeeping on a hit, which a strict LRU would need.
    """

    __slots__ = ("max_size",)

    def __init__(self, max_size: int) -> None:
        if max_size < 2:
            raise ValueError(f"a BoundedCache holds at least 2 entries, not {max_size}")
        super().__init__()
        self.max_size = max_size

    def keep(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (dropping the older half first if full); returns it."""
        if len(self) >= self.max_size:
            for old in list(islice(self, len(self) // 2)):
                del self[old]
        self[key] = value
        return value
