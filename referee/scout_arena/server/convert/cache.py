"""The one kind of cache the wire keeps: serialized pieces (and a few messages) by value."""

from __future__ import annotations

from collections.abc import Hashable
from itertools import islice
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A cache that never holds more than ``max_size`` entries.

    Readers look values up in `entries`, a plain dict, and call `keep` on a miss: a hit then
    costs exactly a dict lookup (the fast path makes a dozen per DecisionRequest, and a dict
    subclass's ``get`` measured a third slower). When full, the older half goes, in insertion
    order: the values that recur (the running matches' ids, the shapes of a round) are the
    recent ones and come back on their next use, and dropping half at once keeps a miss O(1)
    amortized with no bookkeeping on a hit, which a strict LRU would need.
    """

    __slots__ = ("entries", "max_size")

    def __init__(self, max_size: int) -> None:
        if max_size < 2:
            raise ValueError(f"a BoundedCache holds at least 2 entries, not {max_size}")
        self.entries: dict[K, V] = {}
        """Read it directly; write only through `keep` (it is never replaced)."""
        self.max_size = max_size

    def __len__(self) -> int:
        return len(self.entries)

    def keep(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (dropping the older half first if full); returns it."""
        entries = self.entries
        if len(entries) >= self.max_size:
            for old in list(islice(entries, len(entries) // 2)):
                del entries[old]
        entries[key] = value
        return value
