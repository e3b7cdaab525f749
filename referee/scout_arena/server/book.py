"""Which matches the referee remembers: every running one, and a window of finished ones.

A running match is its `MatchRunner` (engine state, seats, spectator log: 100-200 kB). Once
it ends the runner is dropped and a `KeptMatch` of a few hundred bytes takes its place:
what GetMatch, ListMatches and WatchMatch tell of a finished match. Only the newest
``keep_finished`` of those are kept; records are on disk (the referee's records directory),
and in memory only for the newest ``keep_records`` matches (for a referee without one).
Lookups of running matches touch running matches only.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Iterator, Mapping

from ..record import MatchRecord
from .events import MatchEnded, MatchSnapshot, SpectatorEvent
from .match import MatchRunner

DEFAULT_KEEP_FINISHED = 1000
"""Finished matches GetMatch/ListMatches/WatchMatch still know (a summary each)."""
DEFAULT_KEEP_RECORDS = 100
"""Records kept in memory by a referee that has no records directory."""


class KeptMatch:
    """What is kept of a match that has ended: how it stands, when, and maybe its record."""

    __slots__ = ("_ended", "_snapshot", "created_at", "ended_at", "match_id", "record",
                 "status")

    def __init__(self, runner: MatchRunner, keep_record: bool) -> None:
        self.match_id = runner.match_id
        self.status = runner.status
        self.created_at = runner.created_at
        record = runner.record
        self.ended_at = (record.ended_at if record is not None else None) or time.time()
        self._snapshot = runner.snapshot()
        last = runner.spectators.log[-1] if runner.spectators.log else None
        self._ended = last if isinstance(last, MatchEnded) else None
        self.record: MatchRecord | None = record if keep_record else None
        """None once dropped from memory: the referee reads it from disk (if it has a
        records directory)."""

    def snapshot(self) -> MatchSnapshot:
        return self._snapshot

    async def watch(self) -> AsyncIterator[SpectatorEvent]:
        """How the match ended: its final snapshot, then its MatchEnded (if it finished). The
        move-by-move account of a finished match is its record."""
        yield self._snapshot
        if self._ended is not None:
            yield self._ended


KnownMatch = MatchRunner | KeptMatch


class MatchBook(Mapping[str, KnownMatch]):
    """Matches by id: the running ones, then the finished ones kept, oldest first."""

    def __init__(self, keep_finished: int = DEFAULT_KEEP_FINISHED,
                 keep_records: int = DEFAULT_KEEP_RECORDS) -> None:
        if keep_finished < 0 or keep_records < 0:
            raise ValueError("keep_finished and keep_records cannot be negative")
        self.keep_finished = keep_finished
        self.keep_records = keep_records
        self.running: dict[str, MatchRunner] = {}
        self.finished: OrderedDict[str, KeptMatch] = OrderedDict()
        self._with_record: deque[KeptMatch] = deque()

    def __setitem__(self, match_id: str, runner: MatchRunner) -> None:
        """A match that starts."""
        self.running[match_id] = runner

    def __getitem__(self, match_id: str) -> KnownMatch:
        runner = self.running.get(match_id)
        if runner is not None:
            return runner
        return self.finished[match_id]

    def __contains__(self, match_id: object) -> bool:
        return match_id in self.running or match_id in self.finished

    def __iter__(self) -> Iterator[str]:
        yield from list(self.running)
        yield from list(self.finished)

    def __len__(self) -> int:
        return len(self.running) + len(self.finished)

    @property
    def records_held(self) -> int:
        """Finished matches whose record is still in memory."""
        return len(self._with_record)

    def finish(self, runner: MatchRunner) -> KeptMatch:
        """A match that has ended: drop its runner, keep its summary (and maybe its record),
        and forget the oldest beyond the window."""
        self.running.pop(runner.match_id, None)
        windowed = self.keep_records > 0
        # A record that could not be written stays for as long as its match's summary does.
        entry = KeptMatch(runner, keep_record=windowed or not runner.record_stored)
        self.finished[runner.match_id] = entry
        self.finished.move_to_end(runner.match_id)
        if entry.record is not None and windowed:
            self._with_record.append(entry)
            while len(self._with_record) > self.keep_records:
                self._with_record.popleft().record = None
        while len(self.finished) > self.keep_finished:
            _, old = self.finished.popitem(last=False)
            if old.record is not None:
                old.record = None
                if windowed:
                    self._with_record.remove(old)
        return entry


def is_record_id(match_id: str) -> bool:
    """Whether ``match_id`` can name a record file in the records directory (no path
    separators, no leading dot, a sane length): the ids the referee gives out."""
    return (0 < len(match_id) <= 128 and not match_id.startswith(".")
            and all(c.isascii() and (c.isalnum() or c in "-_") for c in match_id))
