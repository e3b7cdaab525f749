"""In-process bots and the loop that plays one match between them.

A bot sees only `Observation`s, exactly as a remote bot does through the referee; the legal-move
helpers on `Observation` need nothing but the seat's own hand and the public state.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol

from .engine import (
    Action,
    Observation,
    Phase,
    Scout,
    Show,
    State,
)
from .engine.moves import group_key, legal_shows


class Bot(Protocol):
    """What the match loop needs of a bot."""

    name: str

    def choose_rotation(self, observation: Observation) -> bool: ...

    def act(self, observation: Observation) -> Action: ...


class RandomBot:
    """Uniform over the action kinds available (Show, Scout, Scout & Show), then uniform
    within the chosen kind. Rotates with probability 1/2."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def choose_rotation(self, observation: Observation) -> bool:
        return self.rng.random() < 0.5

    def act(self, observation: Observation) -> Action:
        shows = observation.legal_shows()
        scouts = observation.legal_scouts()
        kinds: list[Sequence[Action] | None] = [k for k in (shows, scouts) if k]
        if observation.can_scout_and_show():
            kinds.append(None)
        chosen = self.rng.choice(kinds)
        if chosen is None:
            chosen = observation.legal_scout_and_shows()
        return self.rng.choice(chosen)


def hand_potential(faces: Sequence[int]) -> int:
    """How playable a hand is: the summed squares of its multi-card groups' lengths."""
    return sum(s.length * s.length for s in legal_shows(faces, 0) if s.length > 1)


class GreedyBot:
    """Shows the longest group that beats the table (the weakest such group on a tie), keeping
    strong combinations together; otherwise Scouts the card that best extends its hand.
    Uses Scout & Show when it lets it play a group at least as long as the active set."""

    name = "greedy"

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def choose_rotation(self, observation: Observation) -> bool:
        faces = observation.hand.faces
        return hand_potential(observation.hand.rotated().faces) > hand_potential(faces)

    def _best_show(self, faces: Sequence[int], shows: Sequence[Show]) -> Show:
        def score(show: Show) -> tuple[int, int]:
            played = faces[show.start : show.start + show.length]
            return (show.length, -group_key(played))
        return max(shows, key=score)

    def act(self, observation: Observation) -> Action:
        faces = observation.hand.faces
        shows = observation.legal_shows()
        active_len = len(observation.active_set)
        if shows:
            return self._best_show(faces, shows)
        scouts = observation.legal_scouts()
        if observation.can_scout_and_show():
            combos = observation.legal_scout_and_shows()
            top = max(combos, key=lambda c: c.show.length)
            if top.show.length >= max(2, active_len):
                return top
        if scouts:
            return max(scouts, key=lambda s: (self._after_scout(observation, s), -s.flip))
        return self._best_show(faces, shows)

    @staticmethod
    def _after_scout(observation: Observation, scout: Scout) -> int:
        card = observation.active_set[0 if scout.end == 0 else -1]
        value = card.other if scout.flip else card.face
        faces = list(observation.hand.faces)
        faces.insert(scout.insert_at, value)
        return hand_potential(faces)


BOTS: dict[str, Callable[[int], Bot]] = {"random": RandomBot, "greedy": GreedyBot}


def make_bot(name: str, seed: int = 0) -> Bot:
    try:
        return BOTS[name](seed)
    except KeyError:
        raise ValueError(f"unknown bot {name!r}; bundled bots: {', '.join(sorted(BOTS))}") \
            from None


def play_match(bots: Sequence[Bot], seed: int,
               on_action: Callable[[State, int, Action], None] | None = None) -> State:
    """Play one whole match in process: every seat's rotation from its own observation, then
    each decision from the acting seat's observation."""
    state = State.new(len(bots), seed)
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            choices = [bot.choose_rotation(state.observation(s)) for s, bot in enumerate(bots)]
            for seat, rotate in enumerate(choices):
                state.choose_rotation(seat, rotate)
            continue
        actor = state.current_seat
        assert actor is not None
        action = bots[actor].act(state.observation(actor))
        if on_action is not None:
            on_action(state, actor, action)
        state.apply(action)
    return state
