"""What the fuzzing bot of tests/test_fuzz_bot_messages.py knows of its matches, kept from the
referee's own messages, and the oracle's verdict on every AnswerResult it gets."""

from __future__ import annotations

import random
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from scout.v1 import arena_pb2, game_pb2

from support.fuzz_oracle import (
    FUZZ_BANK_MS,
    FUZZ_DECISION_MS,
    TOKENS,
    decision_problems,
    judge_action,
    scout_and_shows,
    status_name,
    wire_scout_and_show,
)
from support.rawbot import (
    ACCEPTED,
    ILLEGAL,
    LOCAL_POOL,
    MALFORMED,
    STALE,
    TIMED_OUT,
    UNKNOWN_MATCH,
    RawCall,
    action_choice,
    kind_of,
    rotation_choice,
)

if TYPE_CHECKING:
    from support.fuzz_live import Live


@dataclass
class SeatView:
    """What the fuzzing bot knows of one of its matches."""

    match_id: str
    seat: int
    bots: list[str]
    started: bool = False
    open: arena_pb2.RefereeMessage | None = None  # the open rotation/decision request
    strikes: int = 0
    forfeited: bool = False
    ended: bool = False
    ended_while_away: bool = False

    @property
    def open_kind(self) -> str | None:
        return None if self.open is None else kind_of(self.open)

    @property
    def open_id(self) -> int:
        if self.open is None:
            return 0
        request: Any = getattr(self.open, kind_of(self.open) or "")
        return int(request.request_id)


class Failure(AssertionError):
    pass


class FuzzBotBook:
    """What the fuzzing bot knows: its seats and open requests, kept from the referee's own
    messages, its recent history, and the oracle that judges each AnswerResult."""

    def __init__(self, live: Live, name: str) -> None:
        self.live = live
        self.name = name
        self.token = TOKENS[name]
        self.channel = grpc.aio.insecure_channel(live.address, options=LOCAL_POOL)
        self.seats: dict[str, SeatView] = {}
        self.call: RawCall | None = None
        self.history: deque[str] = deque(maxlen=40)
        self.outcomes: Counter[str] = Counter()
        self.phase = ""  # which test is running, for the tallies
        self.reconnects = 0
        self.resumed_matches = 0
        self.rng = random.Random(20260101)
        self._tables = 0

    def note(self, text: str) -> None:
        self.history.append(text if len(text) < 300 else text[:297] + "...")

    def fail(self, text: str) -> Failure:
        recent = "\n  ".join(self.history)
        return Failure(f"{text}\n recent history of the fuzzing bot:\n  {recent}")

    def running(self) -> list[SeatView]:
        return [s for s in self.seats.values() if not s.ended]

    def open_seats(self) -> list[SeatView]:
        return [s for s in self.running() if s.open is not None]

    def ended_ids(self) -> list[str]:
        return [s.match_id for s in self.seats.values() if s.ended]

    def _take_request(self, message: arena_pb2.RefereeMessage, resent: bool = False) -> None:
        """A new open request; ``resent``: sent again by a resync, with the time left (§10)."""
        kind = kind_of(message)
        request: Any = getattr(message, kind or "")
        seat = self.seats.get(request.match_id)
        if seat is None or seat.ended or seat.forfeited:
            raise self.fail(f"{kind} for match {request.match_id!r} ({seat})")
        if seat.open is not None:
            raise self.fail(
                f"{kind} {request.request_id} while {seat.open_kind} {seat.open_id} is open"
            )
        if kind == "decision_request":
            problems = decision_problems(request, seat.seat)
            if problems:
                raise self.fail(
                    f"{request.match_id} request {request.request_id}: " + "; ".join(problems)
                )
        want_hand = {2: 11, 3: 12}[len(seat.bots)]
        if kind == "rotation_request" and len(request.hand) != want_hand:
            raise self.fail(f"rotation hand of {len(request.hand)} cards")
        clock = (request.deadline_ms, request.time_bank_ms)
        if clock != (FUZZ_DECISION_MS, FUZZ_BANK_MS) and not (
            resent and clock[0] <= FUZZ_DECISION_MS and clock[1] == FUZZ_BANK_MS
        ):
            raise self.fail(f"request clock {request.deadline_ms}/{request.time_bank_ms}")
        seat.open = message
        self.note(f"<- {kind} {request.match_id} #{request.request_id}")

    def apply(self, message: arena_pb2.RefereeMessage) -> None:
        kind = kind_of(message)
        if kind == "match_start":
            start = message.match_start
            seat = self.seats.get(start.match_id)
            if seat is None or seat.started or start.resumed:
                raise self.fail(f"unexpected MatchStart {start}")
            if (start.seat, list(start.player_names), start.strikes) != (
                seat.seat,
                seat.bots,
                0,
            ) or start.num_players != len(seat.bots):
                raise self.fail(f"MatchStart {start} for seat {seat.seat} of {seat.bots}")
            seat.started = True
            self.note(f"<- match_start {start.match_id} seat {start.seat}")
        elif kind in ("rotation_request", "decision_request"):
            self._take_request(message)
        elif kind in ("public_event", "round_ended"):
            match_id = getattr(message, kind).match_id
            if match_id not in self.seats or self.seats[match_id].ended:
                raise self.fail(f"{kind} about match {match_id!r}")
        elif kind == "match_ended":
            ended = message.match_ended
            seat = self.seats.get(ended.match_id)
            if seat is None or seat.ended:
                raise self.fail(f"MatchEnded for {ended.match_id!r}")
            if seat.open is not None:
                raise self.fail(f"{ended.match_id} ended with request {seat.open_id} open")
            if (seat.seat in ended.forfeited_seats) != seat.forfeited:
                raise self.fail(
                    f"forfeited_seats {list(ended.forfeited_seats)}, the bot "
                    f"counted {seat.strikes} strikes"
                )
            seat.ended = True
            self.note(f"<- match_ended {ended.match_id}")
        elif kind == "answer_result" and message.answer_result.status == TIMED_OUT:
            raise self.fail(
                f"TIMED_OUT with a {FUZZ_DECISION_MS} ms clock: {message.answer_result}"
            )
        else:
            raise self.fail(f"unexpected {kind}: {message}")

    def _check_result(self, parsed: arena_pb2.BotMessage, result: arena_pb2.AnswerResult) -> str:
        body = kind_of(parsed)
        answer: Any = getattr(parsed, body or "")
        match_id, request_id = answer.match_id, answer.request_id
        seat = self.seats.get(match_id)
        expected_kind = "rotation_request" if body == "rotation" else "decision_request"
        if seat is None or seat.ended:
            want = UNKNOWN_MATCH
        elif seat.open is None or (seat.open_kind, seat.open_id) != (expected_kind, request_id):
            want = STALE
        elif body == "rotation":
            want = ACCEPTED
        else:
            assert seat.open is not None
            want = judge_action(seat.open.decision_request, parsed.action.action)
        problems = []
        if (result.match_id, result.request_id) != (match_id, request_id):
            problems.append(f"echo {result.match_id[:40]!r}/{result.request_id}")
        if result.status != want:
            problems.append(f"status {status_name(result.status)}, documented {status_name(want)}")
        if bool(result.reason) != (result.status != ACCEPTED):
            problems.append(f"reason {result.reason!r}")
        if seat is not None and not seat.ended and want in (ILLEGAL, MALFORMED):
            seat.strikes += 1
            if seat.strikes >= 3:
                seat.forfeited = True
                seat.open = None
        elif want == ACCEPTED:
            assert seat is not None
            seat.open = None
        if want == UNKNOWN_MATCH:
            if result.strikes != 0:
                problems.append(f"strikes {result.strikes} on UNKNOWN_MATCH")
        else:
            assert seat is not None
            if (result.strikes, result.time_bank_ms) != (seat.strikes, FUZZ_BANK_MS):
                problems.append(
                    f"strikes/bank {result.strikes}/{result.time_bank_ms}, "
                    f"expected {seat.strikes}/{FUZZ_BANK_MS}"
                )
        if problems:
            raise self.fail(
                f"{body} {match_id[:40]!r} #{request_id}: "
                + "; ".join(problems)
                + f"\n  answer: {str(parsed)[:400]}\n  result: {result}"
            )
        self.note(f"<- answer_result {status_name(result.status)} strikes {result.strikes}")
        return f"{body} -> {status_name(result.status)}"

    def target(self, pick: int) -> SeatView:
        seats = self.open_seats()
        assert seats
        return seats[pick % len(seats)]

    def legal_answer(self, seat: SeatView, pick: int) -> arena_pb2.BotMessage:
        assert seat.open is not None
        if seat.open_kind == "rotation_request":
            request = seat.open.rotation_request
            return rotation_choice(request.match_id, request.request_id, rotate=pick % 2 == 1)
        decision = seat.open.decision_request
        choices = [game_pb2.Action(show=s) for s in decision.legal_shows] + [
            game_pb2.Action(scout=s) for s in decision.legal_scouts
        ]
        if pick % 3 == 0 and decision.scout_and_show_available:
            combos = list(scout_and_shows(decision))
            choices = [wire_scout_and_show(*combos[pick % len(combos)])]
        return action_choice(decision.match_id, decision.request_id, choices[pick % len(choices)])
