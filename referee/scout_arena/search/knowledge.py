"""What the search bot reads into its opponents' Scouts, on top of the rules' information set.

The position itself comes from the rules package: `scout_rules.InformationSet` (which an SDK
observation hands out with `information_set()`) replays the public history and fills the unseen
cards consistently (`deal`, `determinize`). This module adds one guess about how opponents
play: a greedy-like player scouts only when it has no Show that beats the active set. So
`ScoutReads` records, for each opponent's plain Scout or Scout & Show, which cards it held then
and what it had to beat, and `sample` can prefer fills of the hidden hands that agree.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from scout_rules import ActionKind, Card, End, InformationSet, player_count_rules
from scout_rules.moves import group_key, has_show

__all__ = ["ScoutReads", "sample"]


@dataclass(frozen=True, slots=True)
class ScoutReads:
    """Every card each seat has held this round as a token id: ``tokens[s]`` runs parallel to
    seat s's hand now; ``token_cards[s][t]`` is token t's card once shown. ``scouted[i]``:
    (seat, its hand then as tokens, the active set's strength then) for each Scout of an
    opponent."""

    tokens: tuple[tuple[int, ...], ...]
    token_cards: tuple[dict[int, Card], ...]
    scouted: tuple[tuple[int, tuple[int, ...], int], ...]

    @classmethod
    def of(cls, info: InformationSet) -> ScoutReads:
        """Follow the information set's history (which it has already checked)."""
        n = info.num_players
        size = player_count_rules(n).hand_size
        tokens = [list(range(size)) for _ in range(n)]
        next_token = [size] * n
        token_cards: list[dict[int, Card]] = [{} for _ in range(n)]
        scouted: list[tuple[int, tuple[int, ...], int]] = []
        active: list[Card] = []
        for entry in info.history:
            s = entry.seat
            if entry.kind in (ActionKind.SCOUT, ActionKind.SCOUT_AND_SHOW):
                assert entry.insert_at is not None
                if s != info.seat:
                    scouted.append((s, tuple(tokens[s]), group_key([c.face for c in active])))
                active.pop(0 if entry.end == End.LEFT else -1)
                tokens[s].insert(entry.insert_at, next_token[s])
                next_token[s] += 1
            if entry.kind in (ActionKind.SHOW, ActionKind.SCOUT_AND_SHOW):
                assert entry.start is not None
                shown = entry.shown_cards
                stop = entry.start + len(shown)
                for token, card in zip(tokens[s][entry.start:stop], shown, strict=True):
                    token_cards[s][token] = card
                del tokens[s][entry.start:stop]
                active = list(shown)
        return cls(tuple(map(tuple, tokens)), tuple(token_cards), tuple(scouted))

    def violations(self, hands: Sequence[Sequence[Card]]) -> int:
        """How many of the opponents' Scouts these hands contradict: the scout had a Show
        that beat the active set (which a greedy-like player would have played)."""
        count = 0
        faces: dict[int, dict[int, int]] = {}
        for s, then, beat in self.scouted:
            seat_faces = faces.get(s)
            if seat_faces is None:
                seat_faces = {t: c.face for t, c in self.token_cards[s].items()}
                seat_faces.update(zip(self.tokens[s], [c.face for c in hands[s]], strict=True))
                faces[s] = seat_faces
            if has_show([seat_faces[t] for t in then], beat):
                count += 1
        return count


def sample(info: InformationSet, reads: ScoutReads, rng: random.Random, tries: int = 1
           ) -> tuple[tuple[Card, ...], ...]:
    """One fill of the hidden hands (`InformationSet.deal`). With ``tries`` > 1, up to that
    many draws, keeping the first (else the least) contradicted by the opponents' Scouts."""
    best = info.deal(rng)
    if tries <= 1 or not reads.scouted:
        return best
    best_count = reads.violations(best)
    for _ in range(tries - 1):
        if best_count == 0:
            break
        hands = info.deal(rng)
        count = reads.violations(hands)
        if count < best_count:
            best, best_count = hands, count
    return best
