"""What the search bot reads into its opponents' play, on top of the rules' information set.

The position itself comes from the rules package: `scout_rules.InformationSet` (which an SDK
observation hands out with `information_set()`) replays the public history and fills the unseen
cards consistently (`deal`, `determinize`). This module adds two guesses about how opponents
play: a greedy-like player scouts only when it has no Show that beats the active set, and a
player holds its hand the way up that makes it more playable (`hand_potential`, as GreedyBot
rotates). `Reads` records, for each opponent's plain Scout or Scout & Show, which cards it held
then and what it had to beat, and where each card it was dealt is now; `Reads.misfits` scores a
fill of the hidden hands against either guess, so that `InformationSet.deal` can prefer fills
that agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scout_rules import (
    ActionKind,
    Card,
    End,
    InformationSet,
    more_playable_rotated,
    player_count_rules,
)
from scout_rules.moves import group_key, has_show

__all__ = ["Reads"]


@dataclass(frozen=True, slots=True)
class Reads:
    """Every card each seat has held this round as a token id (its dealt cards are 0 to the
    hand size less one): ``tokens[s]`` runs parallel to seat s's hand now; ``token_cards[s][t]``
    is token t's card once shown. ``scouted[i]``: (seat, its hand then as tokens, the active
    set's strength then) for each Scout of an opponent. ``dealt[i]``: (an opponent, its cards
    shown, where its dealt cards are, in order, as indices into its hand now followed by those
    shown cards)."""

    tokens: tuple[tuple[int, ...], ...]
    token_cards: tuple[dict[int, Card], ...]
    scouted: tuple[tuple[int, tuple[int, ...], int], ...]
    dealt: tuple[tuple[int, tuple[Card, ...], tuple[int, ...]], ...]
    scouts: bool = True
    rotations: bool = False

    @classmethod
    def of(cls, info: InformationSet, *, scouts: bool = True, rotations: bool = False
           ) -> Reads:
        """Follow the information set's history (which it has already checked). ``scouts``,
        ``rotations``: the guesses `misfits` counts."""
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
        dealt = []
        for s in range(n):
            if s != info.seat:
                shown_tokens = list(token_cards[s])
                where = {t: i for i, t in enumerate(tokens[s] + shown_tokens)}
                dealt.append((s, tuple(token_cards[s][t] for t in shown_tokens),
                              tuple(where[t] for t in range(size))))
        return cls(tuple(map(tuple, tokens)), tuple(token_cards), tuple(scouted), tuple(dealt),
                   scouts, rotations)

    def misfits(self, hands: Sequence[Sequence[Card]]) -> int:
        """How many of the opponents' choices these hands contradict, by the guesses read
        (for `InformationSet.deal`'s ``misfits``)."""
        return ((self.violations(hands) if self.scouts else 0)
                + (self.misrotations(hands) if self.rotations else 0))

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


    def misrotations(self, hands: Sequence[Sequence[Card]]) -> int:
        """How many opponents these hands would have had to hold the less playable way up: the
        hand each was dealt (after its rotation; its shown cards where they were) would have
        had a greater `hand_potential` rotated."""
        count = 0
        for s, shown, order in self.dealt:
            cards = (*hands[s], *shown)
            if more_playable_rotated([cards[i] for i in order]):
                count += 1
        return count

