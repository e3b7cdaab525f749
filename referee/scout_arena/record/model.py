"""The match record as typed values: what the referee produces and the apps consume.

A `MatchRecord` is built from a finished (or stopped) engine `State`; JSON exists only at the
file edge (`scout_arena.record.json_v1`). The per-seat counters the referee keeps and the result
the apps rate (`MatchOutcome`) are typed here, so that no app reads a record by string keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scout_rules import Action, Card, RoundEnd, State, rank_scores

JSON = dict[str, Any]  # Any: JSON values are heterogeneous; every reader narrows them


@dataclass(frozen=True, slots=True)
class SeatStats:
    """What the referee counted for one seat over a match."""

    strikes: int = 0
    timeouts: int = 0
    illegal_actions: int = 0
    forfeited: bool = False
    time_bank_ms: int = 0
    referee_ms: int = 0
    """Decision time that was the referee's: requests queued inside it before their hand-off
    to the transport (never charged to the bot)."""


@dataclass(frozen=True, slots=True)
class Note:
    """A referee event worth keeping (timeout, strike, forfeit, disconnect, ...); it never
    changes the game, whatever the referee played instead is an ordinary action."""

    kind: str
    seat: int
    round: int
    action_index: int
    detail: str
    extra: Mapping[str, object] = field(default_factory=dict)


class RecordStatus(StrEnum):
    """How the match of a record ended: ``finished`` with a result, or ``aborted`` (stopped
    without one: a shutdown, a cancellation, a crash)."""

    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass(frozen=True, slots=True)
class RefereeMeta:
    """The referee's bookkeeping of a match: format v1 keeps it free-form under ``meta``, this is
    the shape the referee writes. ``extra`` holds what the match's creator attached (for
    example a tournament's key); it is written between the bot versions and the timestamps."""

    status: RecordStatus
    decision_ms: int
    time_bank_ms: int
    bot_versions: tuple[str, ...]
    created_at: float
    ended_at: float
    seats: tuple[SeatStats, ...]
    extra: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One round as dealt and played; ``end_reason``/``exempt_seat``/``scores`` only once over."""

    index: int
    starting_seat: int
    dealt_hands: tuple[tuple[Card, ...], ...]
    rotations: tuple[bool | None, ...]
    actions: tuple[tuple[int, Action], ...]
    end_reason: RoundEnd | None = None
    exempt_seat: int | None = None
    scores: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class MatchOutcome:
    """The result of a finished match, as tournaments and the ladder rate and count it."""

    match_id: str | None
    players: tuple[str, ...]
    totals: tuple[int, ...]
    ranks: tuple[int, ...]
    forfeits: frozenset[int]
    seats: tuple[SeatStats, ...]

    @property
    def num_players(self) -> int:
        return len(self.players)

    @property
    def winners(self) -> tuple[int, ...]:
        """The seats that share first place."""
        return tuple(seat for seat, rank in enumerate(self.ranks) if rank == 1)


@dataclass(frozen=True, slots=True)
class MatchRecord:
    """Everything needed to re-run a match, plus the referee's notes and bookkeeping.

    ``meta`` stays free-form (format v1 promises readers nothing about its keys); the typed
    views below read the keys the referee writes and fall back to neutral values otherwise.
    """

    match_id: str | None
    seed: int | None
    players: tuple[str, ...]
    rounds: tuple[RoundRecord, ...]
    finished: bool
    totals: tuple[int, ...] | None
    ranks: tuple[int, ...] | None
    forfeits: tuple[int, ...]
    explicit_deals: tuple[tuple[tuple[Card, ...], ...], ...] | None
    notes: tuple[Note, ...] = ()
    meta: Mapping[str, object] = field(default_factory=dict)

    @property
    def num_players(self) -> int:
        return len(self.players)

    @property
    def seat_stats(self) -> tuple[SeatStats, ...]:
        seats = self.meta.get("seats")
        if not isinstance(seats, list) or len(seats) != self.num_players:
            return tuple(SeatStats(forfeited=s in self.forfeits) for s in range(self.num_players))
        return tuple(_seat_stats(entry) for entry in seats)

    @property
    def status(self) -> RecordStatus | None:
        """None for a record whose meta says no status the referee writes."""
        value = self.meta.get("status")
        try:
            return RecordStatus(value) if isinstance(value, str) else None
        except ValueError:
            return None

    @property
    def ended_at(self) -> float | None:
        value = self.meta.get("ended_at")
        return float(value) if isinstance(value, int | float) else None

    def meta_value(self, key: str) -> object:
        """A key the match's creator attached (see `RefereeMeta.extra`), or None."""
        return self.meta.get(key)

    @property
    def tournament_key(self) -> str | None:
        """The schedule key a tournament attached to its match (None outside tournaments)."""
        value = self.meta.get("tournament_key")
        return value if isinstance(value, str) else None

    @property
    def outcome(self) -> MatchOutcome | None:
        """The rated result, or None for a match that did not finish."""
        if not self.finished or self.totals is None or self.ranks is None:
            return None
        return MatchOutcome(self.match_id, self.players, self.totals, self.ranks,
                            frozenset(self.forfeits), self.seat_stats)


def _seat_stats(entry: object) -> SeatStats:
    if not isinstance(entry, dict):
        return SeatStats()
    return SeatStats(strikes=int(entry.get("strikes", 0)), timeouts=int(entry.get("timeouts", 0)),
                     illegal_actions=int(entry.get("illegal_actions", 0)),
                     forfeited=bool(entry.get("forfeited", False)),
                     time_bank_ms=int(entry.get("time_bank_ms", 0)),
                     referee_ms=int(entry.get("referee_ms", 0)))


def referee_meta_json(match_id: str, meta: RefereeMeta) -> JSON:
    """``meta`` as the referee writes it (the key order is part of byte-for-byte stability)."""
    return {
        "match_id": match_id, "status": meta.status,
        "time_control": {"decision_ms": meta.decision_ms, "time_bank_ms": meta.time_bank_ms},
        "bot_versions": list(meta.bot_versions),
        **meta.extra,
        "created_at": meta.created_at, "ended_at": meta.ended_at,
        "seats": [{"strikes": s.strikes, "timeouts": s.timeouts,
                   "illegal_actions": s.illegal_actions, "forfeited": s.forfeited,
                   "time_bank_ms": s.time_bank_ms, "referee_ms": s.referee_ms}
                  for s in meta.seats],
    }


def build_record(
    state: State,
    players: Sequence[str],
    *,
    match_id: str | None = None,
    forfeits: Sequence[int] = (),
    notes: Sequence[Note] = (),
    meta: RefereeMeta | Mapping[str, object] | None = None,
) -> MatchRecord:
    """The record of a match (finished or not) as it stands in ``state``."""
    if len(players) != state.num_players:
        raise ValueError(f"{len(players)} player names for {state.num_players} seats")
    rounds = tuple(
        RoundRecord(
            index=log.round_index, starting_seat=log.starting_seat,
            dealt_hands=tuple(tuple(h) for h in log.dealt_hands),
            rotations=tuple(log.rotations), actions=tuple(log.actions),
            end_reason=None if log.result is None else log.result.end_reason,
            exempt_seat=None if log.result is None else log.result.exempt_seat,
            scores=None if log.result is None else tuple(log.result.scores),
        )
        for log in state.round_logs
    )
    finished = state.is_over
    if isinstance(meta, RefereeMeta):
        meta_json = referee_meta_json(match_id or "", meta)
    else:
        meta_json = dict(meta or {})
    return MatchRecord(
        match_id=match_id, seed=state.seed, players=tuple(players), rounds=rounds,
        finished=finished,
        totals=tuple(state.scores) if finished else None,
        ranks=tuple(rank_scores(state.scores, forfeits)) if finished else None,
        forfeits=tuple(sorted(forfeits)),
        explicit_deals=None if state.seed is not None
        else tuple(tuple(tuple(h) for h in r) for r in state.deals),
        notes=tuple(notes), meta=meta_json,
    )
