"""What one seat knows about the round in progress, and states of the engine consistent with it.

`RoundKnowledge.from_observation` replays the SDK observation's round history: it rebuilds the
table (active set, captured cards, who showed last, the Scouts since), follows every opponent's
hand slot by slot (a card scouted into a hand is public: which card and where it went in; only
the way up it went in is private) and keeps the pool of cards this seat has not seen. `sample`
draws one *determinization*: every unknown slot filled from the pool, every known card kept in
its place, turned a random way where its orientation is private. `round_state` builds an engine
`State` of that position (the engine has constructors only for a match's start), in which the
round in progress is the last one, so the state is over exactly when the round ends.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import scout_client as sdk
from scout_rules import (
    Action,
    Card,
    End,
    Phase,
    RoundLog,
    Scout,
    ScoutAndShow,
    Show,
    State,
    deck_for,
    group_key,
    player_count_rules,
)
from scout_rules.moves import NO_ACTIVE_SET, has_show

__all__ = [
    "KnowledgeError",
    "RoundKnowledge",
    "Slot",
    "engine_action",
    "engine_card",
    "round_state",
    "sdk_action",
]

Pair = tuple[int, int]


class KnowledgeError(ValueError):
    """The observation's history does not add up (it should never happen with a real referee)."""


def engine_card(card: sdk.Card) -> Card:
    return Card(card.face, card.other)


def engine_action(action: sdk.Action) -> Action:
    if isinstance(action, sdk.Show):
        return Show(action.start, action.length)
    if isinstance(action, sdk.Scout):
        return _engine_scout(action)
    return ScoutAndShow(_engine_scout(action.scout), Show(action.show.start, action.show.length))


def _engine_scout(scout: sdk.Scout) -> Scout:
    return Scout(End.LEFT if scout.end is sdk.End.LEFT else End.RIGHT, scout.flip,
                 scout.insert_at)


def sdk_action(action: Action) -> sdk.Action:
    if isinstance(action, Show):
        return sdk.Show(action.start, action.length)
    if isinstance(action, Scout):
        return _sdk_scout(action)
    return sdk.ScoutAndShow(_sdk_scout(action.scout),
                            sdk.Show(action.show.start, action.show.length))


def _sdk_scout(scout: Scout) -> sdk.Scout:
    return sdk.Scout(sdk.End.LEFT if scout.end == End.LEFT else sdk.End.RIGHT, scout.flip,
                     scout.insert_at)


@dataclass(frozen=True, slots=True)
class Slot:
    """A publicly known card in an opponent's hand: scouted from the table as ``card`` lay
    there. ``turned_known`` is False because a Scout's turn is private at the table."""

    card: Card
    turned_known: bool = False


@dataclass(slots=True)
class RoundKnowledge:
    """The round as ``seat`` sees it. ``slots[s]`` is seat s's hand left to right: a `Slot` for
    a publicly known card, None for a card never seen (for ``seat`` itself: all its cards).
    ``unseen`` are the deck's cards this seat cannot place: in opponents' unknown slots or, with
    two players, among the cards not dealt this round."""

    seat: int
    num_players: int
    round_index: int
    starting_seat: int
    hand: tuple[Card, ...]
    slots: list[list[Slot | None]]
    active: list[Card]
    captured: list[list[Card]]
    last_shower: int | None
    scouts_since_show: int
    actions_this_round: int
    scout_chips: tuple[int, ...]
    scout_show_tokens: tuple[bool, ...]
    scores: tuple[int, ...]
    current_seat: int
    unseen: tuple[Pair, ...] = field(default=())
    #: Every card each seat has held this round, as token ids: ``tokens[s]`` runs parallel to
    #: ``slots[s]``; ``token_cards[s][t]`` is token t's card once public (shown), else None.
    tokens: list[list[int]] = field(default_factory=list)
    token_cards: list[dict[int, Card]] = field(default_factory=list)
    #: Each opponent's plain Scout or Scout & Show: (seat, its hand then as tokens, the active
    #: set's strength then). A greedy-like player scouts only when it has no Show that beats
    #: the active set; `sample` can prefer hands that agree (``tries``).
    scouted_without_show: list[tuple[int, tuple[int, ...], int]] = field(default_factory=list)

    @classmethod
    def from_observation(cls, observation: sdk.Observation,
                         excluded: Iterable[Pair] = ()) -> RoundKnowledge:
        """Replay the round's history. ``excluded``: cards known not to be in this round at all
        (with two players, the cards of round 1 once round 2 is played)."""
        return cls.from_parts(
            seat=observation.seat, num_players=observation.num_players,
            round_index=observation.round_index, starting_seat=observation.starting_seat,
            hand=tuple(engine_card(c) for c in observation.hand),
            hand_sizes=observation.hand_sizes, history=observation.history,
            scout_chips=observation.scout_chips, scout_show_tokens=observation.scout_show_tokens,
            scores=observation.scores, current_seat=observation.current_seat,
            captured_counts=observation.captured_counts, excluded=excluded)

    @classmethod
    def at_round_start(cls, seat: int, num_players: int, round_index: int,
                       hand: Sequence[Card], scores: Sequence[int],
                       excluded: Iterable[Pair] = ()) -> RoundKnowledge:
        """Before the first turn (for the rotation choice): every other hand is unseen."""
        rules = player_count_rules(num_players)
        return cls.from_parts(
            seat=seat, num_players=num_players, round_index=round_index,
            starting_seat=round_index % num_players, hand=tuple(hand),
            hand_sizes=(rules.hand_size,) * num_players, history=(),
            scout_chips=(3 if num_players == 2 else 0,) * num_players,
            scout_show_tokens=(num_players > 2,) * num_players, scores=tuple(scores),
            current_seat=round_index % num_players, captured_counts=(0,) * num_players,
            excluded=excluded)

    @classmethod
    def from_parts(cls, *, seat: int, num_players: int, round_index: int, starting_seat: int,
                   hand: tuple[Card, ...], hand_sizes: Sequence[int],
                   history: Sequence[sdk.PublicAction], scout_chips: Sequence[int],
                   scout_show_tokens: Sequence[bool], scores: Sequence[int], current_seat: int,
                   captured_counts: Sequence[int], excluded: Iterable[Pair]) -> RoundKnowledge:
        n = num_players
        rules = player_count_rules(n)
        slots: list[list[Slot | None]] = [[None] * rules.hand_size for _ in range(n)]
        tokens = [list(range(rules.hand_size)) for _ in range(n)]
        next_token = [rules.hand_size] * n
        token_cards: list[dict[int, Card]] = [{} for _ in range(n)]
        constraints: list[tuple[int, tuple[int, ...], int]] = []
        active: list[Card] = []
        captured: list[list[Card]] = [[] for _ in range(n)]
        seen: set[Pair] = set()  # cards that left a hand for the table, wherever they are now
        last_shower: int | None = None
        scouts_since_show = 0
        for entry in history:
            s = entry.seat
            if not 0 <= s < n:
                raise KnowledgeError(f"history names seat {s}")
            hand_slots = slots[s]
            if entry.kind in (sdk.ActionKind.SCOUT, sdk.ActionKind.SCOUT_AND_SHOW):
                if not active or entry.insert_at is None or not entry.cards:
                    raise KnowledgeError("a Scout without an active set or position")
                if s != seat:
                    constraints.append((s, tuple(tokens[s]),
                                        group_key([c.face for c in active])))
                taken = active.pop(0 if entry.end is sdk.End.LEFT else -1)
                if taken.pair != engine_card(entry.cards[0]).pair:
                    raise KnowledgeError("a Scout took a card the table did not show")
                if not 0 <= entry.insert_at <= len(hand_slots):
                    raise KnowledgeError("a Scout into a position outside the hand")
                hand_slots.insert(entry.insert_at, Slot(taken))
                tokens[s].insert(entry.insert_at, next_token[s])
                next_token[s] += 1
                if entry.kind is sdk.ActionKind.SCOUT:
                    scouts_since_show += 1
            if entry.kind in (sdk.ActionKind.SHOW, sdk.ActionKind.SCOUT_AND_SHOW):
                shown = [engine_card(c) for c in entry.shown_cards]
                start = entry.start if entry.start is not None else -1
                if start < 0 or start + len(shown) > len(hand_slots) or not shown:
                    raise KnowledgeError("a Show outside the hand")
                del hand_slots[start:start + len(shown)]
                for token, card in zip(tokens[s][start:start + len(shown)], shown, strict=True):
                    token_cards[s][token] = card
                del tokens[s][start:start + len(shown)]
                seen.update(c.pair for c in shown)
                captured[s].extend(active)
                active = shown
                last_shower = s
                scouts_since_show = 0
        if [len(c) for c in captured] != list(captured_counts):
            raise KnowledgeError("the history does not explain the captured counts")
        slots[seat] = [None] * len(hand)
        if [len(h) for h in slots] != list(hand_sizes):
            raise KnowledgeError("the history does not explain the hand sizes")
        known = {c.pair for c in hand}
        known.update(slot.card.pair for h in slots for slot in h if slot is not None)
        known.update(seen)
        known.update(excluded)
        unseen = tuple(p for p in deck_for(n) if p not in known)
        return cls(seat=seat, num_players=n, round_index=round_index, starting_seat=starting_seat,
                   hand=hand, slots=slots, active=active, captured=captured,
                   last_shower=last_shower, scouts_since_show=scouts_since_show,
                   actions_this_round=len(history), scout_chips=tuple(scout_chips),
                   scout_show_tokens=tuple(scout_show_tokens), scores=tuple(scores),
                   current_seat=current_seat, unseen=unseen, tokens=tokens,
                   token_cards=token_cards, scouted_without_show=constraints)

    def unknown_slots(self) -> int:
        return sum(1 for s, h in enumerate(self.slots) if s != self.seat
                   for slot in h if slot is None)

    def violations(self, hands: Sequence[Sequence[Card]]) -> int:
        """How many of the opponents' Scouts these hands contradict: the scout had a Show
        that beat the active set (which a greedy-like player would have played)."""
        count = 0
        faces: dict[int, dict[int, int]] = {}
        for s, then, beat in self.scouted_without_show:
            seat_faces = faces.get(s)
            if seat_faces is None:
                seat_faces = {t: c.face for t, c in self.token_cards[s].items()}
                seat_faces.update(zip(self.tokens[s], [c.face for c in hands[s]], strict=True))
                faces[s] = seat_faces
            if has_show([seat_faces[t] for t in then], beat):
                count += 1
        return count

    def sample(self, rng: random.Random, tries: int = 1) -> list[list[Card]]:
        """One determinization: every seat's hand, this seat's as it is. With ``tries`` > 1,
        up to that many draws, keeping the first (else the least) contradicted by the
        opponents' Scouts (`violations`)."""
        best = self._draw(rng)
        if tries <= 1 or not self.scouted_without_show:
            return best
        best_count = self.violations(best)
        for _ in range(tries - 1):
            if best_count == 0:
                break
            hands = self._draw(rng)
            count = self.violations(hands)
            if count < best_count:
                best, best_count = hands, count
        return best

    def _draw(self, rng: random.Random) -> list[list[Card]]:
        unknown = self.unknown_slots()
        if unknown > len(self.unseen):
            raise KnowledgeError("more unknown cards in hands than unseen cards in the deck")
        pool = rng.sample(self.unseen, unknown)
        hands: list[list[Card]] = []
        k = 0
        for s, hand_slots in enumerate(self.slots):
            if s == self.seat:
                hands.append(list(self.hand))
                continue
            hand: list[Card] = []
            for slot in hand_slots:
                if slot is None:
                    low, high = pool[k]
                    k += 1
                    hand.append(Card(high, low) if rng.random() < 0.5 else Card(low, high))
                elif slot.turned_known or rng.random() < 0.5:
                    hand.append(slot.card)
                else:
                    hand.append(slot.card.turned())
            hands.append(hand)
        return hands


def round_state(knowledge: RoundKnowledge, hands: Sequence[Sequence[Card]]) -> State:
    """An engine `State` of the position with these hands, in PLAY with ``current_seat`` to act.

    The round in progress is the match's last as far as this state knows (its rules are cut to
    ``round_index + 1`` rounds), so `State.is_over` is the round's end and ``scores`` are the
    match totals after it. Only the engine's public fields are set, the way `State.clone` does.
    """
    k = knowledge
    n = k.num_players
    state = object.__new__(State)
    state.rules = player_count_rules(n)._replace(rounds=k.round_index + 1)
    state.num_players = n
    state.seed = None
    state.deals = ()
    rotations: list[bool | None] = [False] * n
    log = RoundLog(k.round_index, k.starting_seat, (), rotations, [])
    # The action limit counts the round's actions: the ones already played count too.
    log.actions.extend([(0, Show(0, 1))] * k.actions_this_round)
    state.round_logs = [log]
    state.round_results = []
    state.scores = list(k.scores)
    state.last_action = None
    state.round_index = k.round_index
    state.starting_seat = k.starting_seat
    state.phase = Phase.PLAY
    state.hands = [list(h) for h in hands]
    state.faces = [[c.face for c in h] for h in hands]
    state.active = list(k.active)
    state.active_faces = [c.face for c in k.active]
    state.active_key = group_key(state.active_faces) if k.active else NO_ACTIVE_SET
    state.last_shower = k.last_shower
    state.scouts_since_show = k.scouts_since_show
    state.captured = [list(c) for c in k.captured]
    state.scout_chips = list(k.scout_chips)
    state.scout_show_tokens = list(k.scout_show_tokens)
    state.current_seat = k.current_seat
    state.history = []
    return state
