"""Two ready-made bots that search nothing: they choose from the referee's legal lists and look
only at their own hand's face values (with the rules package's group helpers). They are
opponents for testing a new bot and examples of the SDK."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

from scout_rules import group_strength, groups_in, hand_potential, more_playable_rotated

from .bot import Bot
from .types import (
    Action,
    MatchEnded,
    Observation,
    RotationRequest,
    Scout,
    ScoutAndShow,
    Show,
)

__all__ = ["GreedyBot", "RandomBot"]


class RandomBot(Bot):
    """Picks uniformly among the kinds available (Show, Scout, and Scout & Show when the seat
    may play one), then uniformly within the kind; rotates with probability 1/2. With a seed,
    every match draws from its own generator seeded by (seed, match_id), so a match replays the
    same whatever else runs concurrently."""

    name = "random"
    quick = True
    version = "2"

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._rngs: dict[str, random.Random] = {}
        self._lock = threading.Lock()  # act runs in worker threads, several matches at once

    def _rng(self, match_id: str) -> random.Random:
        with self._lock:
            rng = self._rngs.get(match_id)
            if rng is None:
                seed = None if self.seed is None else f"{self.seed}:{match_id}"
                rng = self._rngs[match_id] = random.Random(seed)
            return rng

    def choose_rotation(self, request: RotationRequest) -> bool:
        return self._rng(request.match_id).random() < 0.5

    def act(self, observation: Observation) -> Action:
        every: tuple[Sequence[Action], ...] = (
            observation.legal_shows,
            observation.legal_scouts,
            observation.scout_and_shows(),
        )
        kinds = [kind for kind in every if kind]
        if not kinds:
            return observation.fallback()
        rng = self._rng(observation.match_id)
        chosen: Action = rng.choice(rng.choice(kinds))
        return chosen

    def on_match_end(self, match_ended: MatchEnded) -> None:
        with self._lock:
            self._rngs.pop(match_ended.match_id, None)


def _weakness(faces: tuple[int, ...], show: Show) -> tuple[int, int, int]:
    """Sort key that prefers the longest group and, among equally long ones, the weakest, so
    strong groups stay in hand for later."""
    strength = group_strength(faces[show.start : show.stop])
    assert strength is not None, "a legal show is a group"
    length, is_set, lowest = strength
    return (length, -is_set, -lowest)


class GreedyBot(Bot):
    """Shows the longest legal group (the weakest on ties). Otherwise uses Scout & Show when it
    finds one that plays at least as many cards as the active set holds (two at least, so the
    once-per-round token is not spent on a single card), else Scouts the card that most
    improves its hand's sets and runs. Rotates when the rotated hand has the better groups."""

    name = "greedy"
    version = "1"
    quick = True

    def choose_rotation(self, request: RotationRequest) -> bool:
        return more_playable_rotated(request.hand)

    def act(self, observation: Observation) -> Action:
        faces = observation.hand_faces()
        if observation.legal_shows:
            return max(observation.legal_shows, key=lambda show: _weakness(faces, show))
        combo = self._scout_and_show(observation)
        if combo is not None:
            return combo
        if observation.legal_scouts:
            return max(observation.legal_scouts, key=lambda s: self._after(observation, s))
        return observation.fallback()

    @staticmethod
    def _after(observation: Observation, scout: Scout) -> tuple[int, bool]:
        faces = [card.face for card in observation.hand_after(scout)]
        return (hand_potential(faces), not scout.flip)

    @staticmethod
    def _scout_and_show(observation: Observation) -> ScoutAndShow | None:
        if not observation.scout_and_show_available:
            return None
        need = max(2, len(observation.active_set))
        best: ScoutAndShow | None = None
        best_key: tuple[int, int, int] | None = None
        # Observation.scout_and_shows() in its order, each Scout's hand built once.
        for scout in observation.legal_scouts:
            faces = tuple(card.face for card in observation.hand_after(scout))
            remaining = [card.face for card in observation.active_after(scout)]
            for show in groups_in(faces, remaining):
                if show.length < need:
                    continue
                key = _weakness(faces, show)
                if best_key is None or key > best_key:
                    best, best_key = ScoutAndShow(scout, show), key
        return best
