"""SCOUT as an OpenSpiel Python game, registered as ``python_scout`` when this module is imported.

``pyspiel.load_game("python_scout", {"players": 3})`` (2 to 5, default 2). Sequential, imperfect
information, general-sum (match scores do not add up to a constant), rewards at every round end.

Chance: the deal is dealt card by card, one chance node per card, in the engine's dealing
order: for each round (2 players: the one 44-card deck, both rounds), deck position 0 first, to
the round's starting seat and then around the table. A chance outcome is ``2 * k + up``: card
``k`` of the deck in canonical order (`deck_for`) with its low (``up = 0``) or high value
(``up = 1``) in play; every card not yet dealt that round, either way up, is equally likely, as
the engine's shuffle of order and orientation is. Every round is dealt before the first
rotation choice: nobody observes a deal before its round, and the engine then plays from one
`State.from_deals`. Player actions are the ids of `ActionCodec`, shared with the PettingZoo
environment; rotations are chosen in seat order. Tensors are `ObservationLayout`'s (see
docs/env.md for the information-state extras).
"""

from __future__ import annotations

import numpy as np
import pyspiel
from scout_rules import (
    Card,
    Hand,
    Observation,
    Phase,
    PublicAction,
    Scout,
    ScoutAndShow,
    State,
    deck_for,
    player_count_rules,
)

from ..record import MatchRecord, build_record
from .actions import ActionCodec, Decision, Rotation, max_hand, round_cards
from .known import KnownCards
from .masks import apply_decision, legal_ids, seat_to_decide
from .observation import CARD_ROW, ObservationLayout, Vector
from .render import describe_table

SHORT_NAME = "python_scout"
DEFAULT_PLAYERS = 2

Params = dict[str, int | float | str | bool]
"""A game's or observer's parameters (pyspiel's GameParameter values)."""

_GAME_TYPE = pyspiel.GameType(
    short_name=SHORT_NAME,
    long_name="Python SCOUT (Scout Arena rules engine)",
    dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.IMPERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.GENERAL_SUM,
    reward_model=pyspiel.GameType.RewardModel.REWARDS,
    max_num_players=5,
    min_num_players=2,
    provides_information_state_string=True,
    provides_information_state_tensor=True,
    provides_observation_string=True,
    provides_observation_tensor=True,
    parameter_specification={"players": DEFAULT_PLAYERS},
)


def _game_info(num_players: int, codec: ActionCodec) -> pyspiel.GameInfo:
    """Bounds from the rules: a round scores at least minus a full hand, and at most every
    card of the round plus the Scout chips its action cap allows."""
    rules = player_count_rules(num_players)
    chips = 3 if num_players == 2 else State.max_round_actions
    return pyspiel.GameInfo(
        num_distinct_actions=codec.size,
        max_chance_outcomes=2 * len(deck_for(num_players)),
        num_players=num_players,
        min_utility=float(-rules.rounds * max_hand(num_players)),
        max_utility=float(rules.rounds * (round_cards(num_players) + chips)),
        utility_sum=None,
        max_game_length=rules.rounds * (num_players + State.max_round_actions),
    )


def _deal_length(num_players: int) -> int:
    """Chance nodes of a match: 44 cards once with 2 players, else a full deck per round."""
    rules = player_count_rules(num_players)
    if num_players == 2:
        return 2 * 22
    return rules.rounds * len(deck_for(num_players))


class ScoutGame(pyspiel.Game):  # type: ignore[misc]
    """The game for a player count: makes initial states and observers."""

    def __init__(self, params: Params | None = None) -> None:
        params = dict(params or {})
        num_players = int(params.get("players", DEFAULT_PLAYERS))
        player_count_rules(num_players)  # ValueError outside 2-5
        self.codec = ActionCodec(num_players)
        self.layout = ObservationLayout(num_players)
        self.deck = deck_for(num_players)
        self.deal_length = _deal_length(num_players)
        super().__init__(_GAME_TYPE, _game_info(num_players, self.codec),
                         {"players": num_players})

    def new_initial_state(self) -> ScoutState:
        return ScoutState(self)

    def make_py_observer(self, iig_obs_type: pyspiel.IIGObservationType | None = None,
                         params: Params | None = None) -> ScoutObserver:
        return ScoutObserver(self, iig_obs_type or pyspiel.IIGObservationType(
            perfect_recall=False), params)


class _Fixed:
    """What every state of one game shares and never changes: deepcopy keeps the instance."""

    __slots__ = ("codec", "deal_length", "deck", "hand_size", "n", "per_round")

    def __init__(self, game: ScoutGame) -> None:
        self.codec = game.codec
        self.n: int = game.num_players()
        self.deck = game.deck
        self.deal_length = game.deal_length
        self.per_round = 22 if self.n == 2 else len(self.deck)
        self.hand_size = game.layout.hand_size

    def __deepcopy__(self, memo: dict[int, object]) -> _Fixed:
        return self


class _Table:
    """Everything that changes in a match: the cards dealt so far, then the engine's state,
    and the decision log the information states are written from."""

    __slots__ = ("dealt", "known", "log", "match", "rewards", "round_ends")

    def __init__(self, n: int, hand_size: int) -> None:
        self.dealt: list[Card] = []
        self.match: State | None = None
        self.known = KnownCards(n, hand_size)
        self.log: list[tuple[int, int, str, str]] = []
        """Per decision: round, seat, what the others saw, what the seat itself saw (written
        once, as the information-state strings repeat them at every later step)."""
        self.round_ends: dict[int, tuple[int, ...]] = {}
        """Log length at each round end -> that round's scores."""
        self.rewards = [0.0] * n

    def __deepcopy__(self, memo: dict[int, object]) -> _Table:
        """OpenSpiel clones a Python state by deepcopying its attributes, at nearly every step
        of its tests and searches; the engine's `State.clone` shares what is immutable and is
        some fifty times faster than a generic deepcopy of it."""
        other = _Table(0, 0)
        other.known = self.known.copy()
        other.dealt = list(self.dealt)
        other.match = None if self.match is None else self.match.clone()
        other.log = list(self.log)
        other.round_ends = dict(self.round_ends)
        other.rewards = list(self.rewards)
        return other


class ScoutState(pyspiel.State):  # type: ignore[misc]
    """The deal so far, then the engine's `State` of the match (`_Table`)."""

    def __init__(self, game: ScoutGame) -> None:
        super().__init__(game)
        self.fixed = _Fixed(game)
        self.table = _Table(self.fixed.n, game.layout.hand_size)

    @property
    def n(self) -> int:
        return self.fixed.n

    @property
    def match(self) -> State | None:
        return self.table.match

    # ----- who acts ------------------------------------------------------------------------

    def current_player(self) -> int:
        if self.table.match is None:
            return int(pyspiel.PlayerId.CHANCE)
        seat = seat_to_decide(self.table.match)
        return int(pyspiel.PlayerId.TERMINAL) if seat is None else seat

    def is_terminal(self) -> bool:
        return self.table.match is not None and self.table.match.is_over

    def _legal_actions(self, player: int) -> list[int]:
        assert self.table.match is not None and player == seat_to_decide(self.table.match)
        return legal_ids(self.table.match, self.fixed.codec)

    # ----- chance --------------------------------------------------------------------------

    def _undealt(self) -> list[int]:
        """Deck indices not yet dealt in this chance round (the current round's deck)."""
        dealt = self.table.dealt
        start = len(dealt) - len(dealt) % self.fixed.per_round if self.fixed.n > 2 else 0
        taken = {card.pair for card in dealt[start:]}
        return [k for k, pair in enumerate(self.fixed.deck) if pair not in taken]

    def chance_outcomes(self) -> list[tuple[int, float]]:
        assert self.table.match is None
        left = self._undealt()
        p = 1.0 / (2 * len(left))
        return [(2 * k + up, p) for k in left for up in (0, 1)]

    def _card_of(self, outcome: int) -> Card:
        low, high = self.fixed.deck[outcome // 2]
        return Card(high, low) if outcome % 2 else Card(low, high)

    def _deals(self) -> list[list[Hand]]:
        """``deals[round][seat]`` from the dealt cards, in the engine's dealing order."""
        rules = player_count_rules(self.fixed.n)
        deals = []
        for r in range(rules.rounds):
            part = self.table.dealt[r * self.fixed.per_round : (r + 1) * self.fixed.per_round]
            hands: list[list[Card]] = [[] for _ in range(self.fixed.n)]
            for i, card in enumerate(part):
                hands[(r % self.fixed.n + i) % self.fixed.n].append(card)
            deals.append([Hand(h) for h in hands])
        return deals

    # ----- moves ---------------------------------------------------------------------------

    def _apply_action(self, action: int) -> None:
        self.table.rewards = [0.0] * self.fixed.n
        if self.table.match is None:
            self.table.dealt.append(self._card_of(action))
            if len(self.table.dealt) == self.fixed.deal_length:
                self.table.match = State.from_deals(self.fixed.n, self._deals())
            return
        state = self.table.match
        seat = seat_to_decide(state)
        assert seat is not None
        decision = self.fixed.codec.decode(action)
        round_index, rounds_done, before = state.round_index, len(state.round_results), \
            state.last_action
        apply_decision(state, decision)
        public = state.last_action if state.last_action is not before else None
        self.table.log.append((round_index, seat, *_decision_texts(seat, decision, public)))
        self.table.known.follow(state.round_index, state.history, self.fixed.hand_size)
        if len(state.round_results) > rounds_done:
            scores = state.round_results[-1].scores
            self.table.rewards = [float(s) for s in scores]
            self.table.round_ends[len(self.table.log)] = scores

    def _action_to_string(self, player: int, action: int) -> str:
        if player == pyspiel.PlayerId.CHANCE:
            return f"deal {self._card_of(action)}"
        return str(self.fixed.codec.decode(action))

    def rewards(self) -> list[float]:
        """The round's scores on the decision that ended a round, else zeros."""
        return list(self.table.rewards)

    def returns(self) -> list[float]:
        """The match score so far: the sum of the finished rounds' scores."""
        if self.table.match is None:
            return [0.0] * self.fixed.n
        return [float(s) for s in self.table.match.scores]

    def __str__(self) -> str:
        if self.table.match is None:
            return f"dealing: {len(self.table.dealt)}/{self.fixed.deal_length} cards dealt"
        return describe_table(self.table.match, [f"seat {s}" for s in range(self.fixed.n)])

    def match_record(self, players: list[str] | None = None) -> MatchRecord:
        """The match as a record (explicit deal, no seed) that `replay()` accepts."""
        if self.table.match is None:
            raise ValueError("the deal is not complete: there is no match to record yet")
        names = players or [f"seat_{s}" for s in range(self.fixed.n)]
        return build_record(self.table.match, names, meta={"source": "scout_arena.env.spiel"})


class ScoutObserver:
    """Observation (``perfect_recall=False``) or information state (``True``) of one seat.

    The tensor starts with `ObservationLayout`'s vector; the information state appends the
    seat's private memory of the round (its hand as dealt, its rotation choice) and every
    finished round's scores. Strings: the observation string is the seat's view of the table;
    the information-state string is perfect recall (every decision as the seat saw it)."""

    def __init__(self, game: ScoutGame, iig_obs_type: pyspiel.IIGObservationType,
                 params: Params | None
                 ) -> None:
        if params:
            raise ValueError(f"observation parameters are not supported; got {params}")
        if iig_obs_type.private_info != pyspiel.PrivateInfoType.SINGLE_PLAYER \
                or not iig_obs_type.public_info:
            raise ValueError("only the seat's own view (private SINGLE_PLAYER plus public) "
                             "is provided")
        self.layout = game.layout
        self.perfect_recall = bool(iig_obs_type.perfect_recall)
        n, rounds = game.num_players(), player_count_rules(game.num_players()).rounds
        pieces: list[tuple[str, tuple[int, ...]]] = [("observation", (self.layout.size,))]
        if self.perfect_recall:
            pieces += [("dealt_hand", (self.layout.max_hand, CARD_ROW)), ("rotated", (1,)),
                       ("round_scores", (rounds, n))]
        size = sum(int(np.prod(shape)) for _, shape in pieces)
        self.tensor: Vector = np.zeros(size, np.float32)
        self.dict: dict[str, Vector] = {}
        at = 0
        for name, shape in pieces:
            width = int(np.prod(shape))
            self.dict[name] = self.tensor[at : at + width].reshape(shape)
            at += width

    def set_from(self, state: ScoutState, player: int) -> None:
        self.tensor.fill(0)
        match = state.match
        if match is None:
            return
        self.dict["observation"][:] = self.layout.encode(match.observation(player),
                                                         state.table.known)
        if not self.perfect_recall:
            return
        dealt = match.deals[match.round_index][player]
        rows = self.dict["dealt_hand"]
        for i, card in enumerate(dealt):
            rows[i, 0] = rows[i, card.face] = rows[i, 10 + card.other] = 1
        rotated = match.round_logs[-1].rotations[player]
        self.dict["rotated"][0] = 1.0 if rotated else 0.0
        for result in match.round_results:
            for seat, score in enumerate(result.scores):
                self.dict["round_scores"][result.round_index,
                                          (seat - player) % state.n] = score

    def string_from(self, state: ScoutState, player: int) -> str:
        match = state.match
        if match is None:
            return f"seat {player}: dealing"
        if self.perfect_recall:
            return _information_state_string(state, match, player)
        return _observation_string(match.observation(player))


def _cards(cards: Hand | tuple[Card, ...]) -> str:
    return " ".join(str(c) for c in cards) or "-"


def _observation_string(obs: Observation) -> str:
    active = _cards(obs.active_set)
    phase = obs.phase.value if obs.phase is not Phase.PLAY else f"seat {obs.current_seat} acts"
    return (f"seat {obs.seat} round {obs.round_index + 1} ({phase}) hand "
            f"{_cards(obs.hand)} | active {active} owner {obs.active_owner} "
            f"| hands {list(obs.hand_sizes)} captured {list(obs.captured_counts)} chips "
            f"{list(obs.scout_chips)} tokens {[int(t) for t in obs.scout_show_tokens]} scores "
            f"{list(obs.scores)} | {'; '.join(str(a) for a in obs.history)}")


def _decision_texts(seat: int, decision: Decision, public: PublicAction | None
                    ) -> tuple[str, str]:
    """How a decision reads to the other seats, and to the seat that took it: a rotation
    choice is secret (only that it was made is seen), and so is which way up a Scout went."""
    if isinstance(decision, Rotation):
        return f"seat {seat} chose", f"seat {seat} {decision}"
    assert public is not None
    scout = decision.scout if isinstance(decision, ScoutAndShow) else decision
    turned = isinstance(scout, Scout) and scout.flip
    return str(public), f"{public} (turned)" if turned else str(public)


def _information_state_string(state: ScoutState, match: State, player: int) -> str:
    """Everything ``player`` has seen, in order: its dealt hands, its own rotation choices (and
    that the others chose), every public action (with its own Scouts' flips), round scores."""
    parts = [f"seat {player}"]
    dealt_rounds = set()
    for k, (round_index, seat, seen, own) in enumerate(state.table.log, start=1):
        if round_index not in dealt_rounds:
            dealt_rounds.add(round_index)
            dealt = _cards(match.deals[round_index][player])
            parts.append(f"round {round_index + 1} dealt {dealt}")
        parts.append(own if seat == player else seen)
        if k in state.table.round_ends:
            parts.append(f"round {round_index + 1} scores {list(state.table.round_ends[k])}")
    if match.round_index not in dealt_rounds and not match.is_over:
        parts.append(f"round {match.round_index + 1} dealt "
                     f"{_cards(match.deals[match.round_index][player])}")
    return " | ".join(parts)


pyspiel.register_game(_GAME_TYPE, ScoutGame)
