"""The game's progress in one match: its phases, its moves, and what the table is told of them.

`MatchRunner` owns a match's life (start, cancel, the record, the end); this is the part that
plays the game itself. A phase is a round's rotations (asked of every seat at once) or its
decisions until rotations are due again or the match is over. The decisions run as answers
come (`Asking`), outside the match's task: `phase` returns once the phase has ended, and a
turn that raised ends it with that exception (`crash`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from scout_rules import Action, End, MalformedAction, Observation, Phase, Scout, State

from .asking import Asking
from .events import (
    ActionAnswer,
    ActionPlayed,
    Answer,
    DecisionRequested,
    RotationAnswer,
    RotationRequested,
    RoundEnded,
    RoundStarted,
)
from .seat import Seat
from .spectators import Spectators
from .table import Table

log = logging.getLogger("scout_arena.referee")


def _rotation_of(answer: Answer) -> bool:
    assert isinstance(answer, RotationAnswer)  # answers reach requests of their kind (route)
    return answer.rotate


def stop_asking(seats: Sequence[Seat]) -> None:
    """The match is ending: no open request is answered any more."""
    for seat in seats:
        seat.open = None
        seat.answers.clear()


class MatchPlay:
    """Plays one match's game: asks for rotations and decisions, plays the answers or the
    fallback, and tells the table and the spectators each action and round."""

    __slots__ = ("_phase", "asking", "match_id", "seats", "spectators", "state", "table")

    def __init__(self, match_id: str, state: State, seats: Sequence[Seat], table: Table,
                 asking: Asking, spectators: Spectators) -> None:
        self.match_id = match_id
        self.state = state
        self.seats = seats
        self.table = table
        self.asking = asking
        self.spectators = spectators
        self._phase: asyncio.Future[list[bool] | None] | None = None
        """The phase in progress: set with its result by its last turn."""

    async def phase(self) -> None:
        """Play the next phase to its end: the round's rotations, or its decisions."""
        state = self.state
        phase = self._phase = asyncio.get_running_loop().create_future()
        if state.phase is Phase.ROTATION:
            self._ask_rotations()
            choices = await phase
            assert choices is not None
            for seat, rotate in zip(self.seats, choices, strict=True):
                state.choose_rotation(seat.index, rotate)
        else:
            self._advance()
            await phase
        self._phase = None

    def crash(self, exc: Exception) -> None:
        """A turn raised: the phase ends with ``exc``, which ends the match (ABORTED, the
        traceback in the log). The turn ran in some other task (the one that read an answer),
        which goes on."""
        stop_asking(self.seats)
        phase = self._phase
        if phase is not None and not phase.done():
            phase.set_exception(exc)
        else:
            log.error("match %s: a turn failed outside a phase", self.match_id, exc_info=exc)

    def fallback(self) -> Action:
        """The documented always-legal move: the first legal Show (lowest start, then
        shortest), else the left end of the active set, unturned, into position 0."""
        shows = self.state.legal_shows()
        return shows[0] if shows else Scout(End.LEFT, False, 0)

    def round_started(self) -> None:
        state = self.state
        self.spectators.publish(RoundStarted(self.match_id, state.round_index, state.starting_seat,
                                             tuple(len(h) for h in state.hands)))

    # ----- the turns ----------------------------------------------------------------------

    def _end_phase(self, value: list[bool] | None = None) -> None:
        phase = self._phase
        if phase is not None and not phase.done():
            phase.set_result(value)

    def _ask_rotations(self) -> None:
        """Every seat's rotation request at once; the phase ends with the last answer."""
        state = self.state
        round_index = state.round_index
        choices = [False] * len(self.seats)
        left = [len(self.seats)]

        def ask(seat: Seat) -> None:
            hand = tuple(state.deals[round_index][seat.index])

            def event(request_id: int, deadline_ms: int, time_bank_ms: int
                      ) -> RotationRequested:
                return RotationRequested(self.match_id, request_id, seat.index, round_index,
                                         hand, deadline_ms, time_bank_ms)

            def done(rotate: bool | None) -> None:
                choices[seat.index] = bool(rotate)
                left[0] -= 1
                if not left[0]:
                    self._end_phase(choices)

            self.asking.ask(seat, event, _rotation_of, done)

        for seat in self.seats:
            ask(seat)

    def _accept_action(self, answer: Answer) -> Action:
        assert isinstance(answer, ActionAnswer)  # answers reach requests of their kind (route)
        action = answer.action
        if action is None:
            raise MalformedAction(answer.unreadable)
        self.state.check(action)
        return action

    def _advance(self) -> None:
        """Play on until a bot has to answer: the fallback for a forfeited seat, else a
        decision request. The phase ends when a round's rotations are due or the match is
        over."""
        state = self.state
        while not state.is_over and state.phase is not Phase.ROTATION:
            actor = state.current_seat
            assert actor is not None
            seat = self.seats[actor]
            if not seat.forfeited:
                observation = state.observation(actor)

                def event(request_id: int, deadline_ms: int, time_bank_ms: int,
                          observation: Observation = observation) -> DecisionRequested:
                    return DecisionRequested(self.match_id, request_id, observation,
                                             deadline_ms, time_bank_ms)

                self.asking.ask(seat, event, self._accept_action, self._decided)
                return
            self._play(self.fallback(), by_referee=True)
        self._end_phase()

    def _decided(self, action: Action | None) -> None:
        if action is None:
            self._play(self.fallback(), by_referee=True)
        else:
            self._play(action, by_referee=False)
        self._advance()

    def _play(self, action: Action, by_referee: bool) -> None:
        state = self.state
        rounds_before = len(state.round_results)
        round_index = state.round_index
        state.apply(action)
        self._action_done(round_index, by_referee)
        if len(state.round_results) > rounds_before:
            self._round_done(rounds_before)
            if not state.is_over:
                self.round_started()

    def _action_done(self, round_index: int, by_referee: bool) -> None:
        public = self.state.last_action
        assert public is not None
        event = ActionPlayed(self.match_id, round_index, public, by_referee)
        self.table.broadcast_unless_lean(event)
        self.spectators.publish(event)

    def _round_done(self, index: int) -> None:
        state = self.state
        round_log = state.round_logs[index]
        assert round_log.result is not None
        event = RoundEnded(self.match_id, round_log.result, tuple(state.scores),
                           round_log.dealt_hands, tuple(round_log.rotations))
        self.table.broadcast(event)
        self.spectators.publish(event)
