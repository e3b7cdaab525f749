"""Replay of a match record through the engine.

A record holds everything needed to re-run a match: the seed (or none, for an explicit deal), the
dealt hands before rotation, every rotation choice and every action in order. `replay` re-runs
it through the engine and checks every action, round end and score, naming the first step that
does not hold. It reads the JSON of format v1 field by field, because a record may come from
anywhere (a file, the wire), and a typed `MatchRecord` through the same path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from scout_rules import (
    Action,
    Card,
    Hand,
    MalformedAction,
    Phase,
    RoundResult,
    ScoutError,
    State,
    deal_match,
    rank_scores,
)

from .json_v1 import (
    RECORD_FORMAT,
    RECORD_VERSION,
    RecordError,
    action_from_json,
    cards_json,
    record_to_json,
)
from .model import JSON, MatchRecord
from .notation import describe_action, seat_labels

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """One step of a replayed match, for printing a move-by-move account."""

    round_index: int
    number: int
    seat: int
    action: Action
    description: str


@dataclass(frozen=True, slots=True)
class ReplayResult:
    state: State
    steps: tuple[ReplayStep, ...]


@dataclass(frozen=True, slots=True)
class ReplayEvent:
    """A moment of a replay worth looking at, so that a viewer can draw the match from the same
    run that checks it: a round's deal (before the rotation choices), the table once every seat
    has chosen, and each action. ``state`` is the replay's own engine state, valid only during
    the call (the run goes on from it); ``round_result`` is set on the action that ended its
    round, whose table the engine has already cleared for the next deal."""

    kind: Literal["deal", "rotation", "action"]
    round_index: int
    state: State
    step: ReplayStep | None = None
    round_result: RoundResult | None = None


def _field(obj: JSON, key: str, kind: type[T], where: str) -> T:
    if key not in obj:
        raise RecordError(f"{where}: missing field '{key}'")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise RecordError(f"{where}: field '{key}' has the wrong type ({value!r})")
    return value


def replay(record: JSON | MatchRecord,
           on_event: Callable[[ReplayEvent], None] | None = None) -> ReplayResult:
    """Re-run a record through the engine, checking every step; RecordError names the first
    step that fails. ``on_event`` sees each step as soon as it has been checked (a record that
    fails later has then been partly reported: discard what it built on RecordError)."""
    if isinstance(record, MatchRecord):
        record = record_to_json(record)
    if record.get("format") != RECORD_FORMAT:
        raise RecordError(f"not a Scout Arena match record (format {record.get('format')!r})")
    if record.get("version") != RECORD_VERSION:
        raise RecordError(f"record version {record.get('version')!r} is not supported "
                          f"(this build reads version {RECORD_VERSION})")
    n = _field(record, "num_players", int, "record")
    players = _field(record, "players", list, "record")
    if len(players) != n:
        raise RecordError(f"record: {len(players)} players listed for {n} seats")
    rounds = _field(record, "rounds", list, "record")
    seed = record.get("seed")
    state = _initial_state(record, n, seed, rounds)
    labels = seat_labels(player_names(players))
    steps: list[ReplayStep] = []
    for i, entry in enumerate(rounds):
        where = f"round {i + 1}"
        if state.is_over or state.round_index != i:
            raise RecordError(f"{where}: the match was already over before this round")
        if on_event is not None:
            on_event(ReplayEvent("deal", i, state))
        rotations = _field(entry, "rotations", list, where)
        if (len(rotations) == n and None in rotations and not record.get("finished")
                and i == len(rounds) - 1 and not entry.get("actions")
                and all(r is None or isinstance(r, bool) for r in rotations)):
            break  # a match stopped while seats were still choosing: nothing more happened
        if len(rotations) != n or not all(isinstance(r, bool) for r in rotations):
            raise RecordError(f"{where}: rotations must be {n} booleans, got {rotations!r}")
        for rotating_seat, rotate in enumerate(rotations):
            state.choose_rotation(rotating_seat, rotate)
        if on_event is not None:
            on_event(ReplayEvent("rotation", i, state))
        actions = _field(entry, "actions", list, where)
        for k, item in enumerate(actions):
            step = f"{where}, action {k + 1}"
            if state.round_index != i or state.is_over:
                raise RecordError(f"{step}: the round had already ended after action {k}")
            if not isinstance(item, dict):
                raise RecordError(f"{step}: an action entry is an object")
            actor = item.get("seat")
            body = {key: v for key, v in item.items() if key != "seat"}
            try:
                action = action_from_json(body)
            except MalformedAction as exc:
                raise RecordError(f"{step}: {exc}") from exc
            seat = state.current_seat
            if actor != seat or seat is None:
                raise RecordError(f"{step}: recorded for seat {actor} but seat {seat} is to act")
            hand, active = state.hand(seat), state.active_set
            try:
                state.apply(action)
            except ScoutError as exc:
                raise RecordError(f"{step} (seat {seat}, {action}): {exc}") from exc
            steps.append(ReplayStep(i, k + 1, seat, action,
                                    describe_action(labels[seat], hand, active, action)))
            if on_event is not None:
                on_event(ReplayEvent("action", i, state, steps[-1], state.round_logs[i].result))
        result = state.round_logs[i].result
        if result is None:
            if i + 1 < len(rounds) or record.get("finished"):
                raise RecordError(f"{where}: the recorded actions stop but the round is still "
                                  f"going (seat {state.current_seat} to act)")
            break
        if "scores" in entry:
            _check_round_result(entry, result.scores, result.end_reason.value,
                                result.exempt_seat, where)
    if record.get("finished"):
        if not state.is_over:
            raise RecordError("record: marked finished but the match is not over")
        forfeits = record.get("forfeits") or []
        if record.get("totals") != list(state.scores):
            raise RecordError(f"record: totals {record.get('totals')} differ from the engine's "
                              f"{list(state.scores)}")
        expected_ranks = list(rank_scores(state.scores, forfeits))
        if record.get("ranks") != expected_ranks:
            raise RecordError(f"record: ranks {record.get('ranks')} differ from the engine's "
                              f"{expected_ranks}")
    elif state.is_over and state.phase is Phase.MATCH_OVER:
        raise RecordError("record: the match is over but the record is not marked finished")
    return ReplayResult(state, tuple(steps))


def player_names(players: list[JSON]) -> list[str]:
    """The players' names by seat, as far as the record says them (a seat without one is
    described by its number)."""
    names = [""] * len(players)
    for k, entry in enumerate(players):
        seat = entry.get("seat", k) if isinstance(entry, dict) else k
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(seat, int) and 0 <= seat < len(names) and isinstance(name, str):
            names[seat] = name
    return names


def _initial_state(record: JSON, n: int, seed: object, rounds: list[JSON]) -> State:
    """The match's start: the seed's deal (checked against the recorded hands) or, for a match
    dealt explicitly, the record's ``explicit_deals``."""
    try:
        if seed is not None:
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise RecordError(f"record: seed must be an integer or null, got {seed!r}")
            deals = deal_match(n, seed)
        else:
            explicit = _field(record, "explicit_deals", list, "record without a seed")
            deals = [[Hand(Card(*card) for card in hand) for hand in r] for r in explicit]
        for i, entry in enumerate(rounds):
            dealt = [[list(c) for c in h] for h in _field(entry, "dealt_hands", list,
                                                        f"round {i + 1}")]
            if i >= len(deals) or dealt != [cards_json(h) for h in deals[i]]:
                raise RecordError(f"round {i + 1}: the recorded dealt hands are not the "
                                  f"match's deal" + (f" for seed {seed}" if seed is not None
                                                     else ""))
        return State(n, deals, seed)
    except RecordError:
        raise
    except (ScoutError, TypeError, ValueError) as exc:
        raise RecordError(f"record: the deal cannot be set up: {exc}") from exc


def _check_round_result(entry: JSON, scores: Sequence[int], reason: str,
                        exempt: int | None, where: str) -> None:
    if entry.get("scores") != list(scores):
        raise RecordError(f"{where}: recorded scores {entry.get('scores')} differ from the "
                          f"engine's {list(scores)}")
    if entry.get("end_reason") != reason:
        raise RecordError(f"{where}: recorded end reason {entry.get('end_reason')!r} differs "
                          f"from the engine's {reason!r}")
    if entry.get("exempt_seat") != exempt:
        raise RecordError(f"{where}: recorded exempt seat {entry.get('exempt_seat')!r} differs "
                          f"from the engine's {exempt!r}")
