"""`SearchBot`: an SDK bot that thinks with ISMCTS over the engine (see README.md here)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import scout_client as sdk
from scout_rules import Hand, InformationSet, InvalidPosition, more_playable_rotated
from scout_rules.playout import greedy_action

from .mcts import DEFAULT_SAMPLE_TRIES, SearchResult, Width, rollout, search
from .value import load_net

__all__ = ["DEFAULT_MIN_ITERATIONS", "DEFAULT_THINK_MS", "SAFETY_MARGIN_MS", "SearchBot",
           "SearchStats", "time_budget_ms"]

#: Per decision, suited to the default time control (1000 ms a decision, 10 s bank).
DEFAULT_THINK_MS = 200
#: Kept free below the request's deadline_ms for the answer's way back and a busy machine.
SAFETY_MARGIN_MS = 150


#: The leaf evaluations (`SearchBot`'s ``eval``).
EVALS = ("rollout", "net", "mix")

#: Iterations the bot runs even past ``think_ms`` while the deadline (less the margin) allows.
DEFAULT_MIN_ITERATIONS = 100


def time_budget_ms(think_ms: int | None, deadline_ms: int,
                   safety_margin_ms: int = SAFETY_MARGIN_MS) -> int | None:
    """Milliseconds the search may take: ``think_ms`` capped by the request's deadline less the
    margin (never the time bank). None: no limit (iteration mode with no deadline)."""
    limit = None if deadline_ms <= 0 else max(0, deadline_ms - safety_margin_ms)
    if think_ms is None:
        return limit
    return think_ms if limit is None else min(think_ms, limit)


@dataclass(frozen=True, slots=True)
class SearchStats:
    """What the last decision cost: iterations run and the budget it had."""

    iterations: int
    budget_ms: int | None
    used_search: bool


class SearchBot(sdk.Bot):
    """ISMCTS to the end of the round with greedy rollouts.

    ``think_ms``: time per decision (default 200), capped by each request's deadline_ms less
    ``safety_margin_ms``. ``iterations``: a fixed iteration count instead (reproducible; the
    deadline still caps it). ``seed``: with a seed the bot is deterministic in iteration mode.
    ``rotation_samples``: determinizations per orientation for the rotation choice in
    iteration mode (time mode spends up to the same time budget). ``min_iterations``: in time
    mode, go on past ``think_ms`` until this many iterations are done (default 100, what the
    strength bench runs), while the deadline less the margin allows. ``opponents_search``: the
    other seats choose in the tree too (default) rather than by the rollout policy.
    ``sample_tries``: draws per determinization (default 4) to find opponents' hands that
    agree with how they played: ``read_rotations`` (default), each holds its dealt hand the
    more playable way up (`hand_potential`); ``read_scouts``, a greedy-like player scouts only
    without a Show. 1: uniform fills, assuming nothing. ``observe`` (default): below an
    opponent's Show the tree branches on the faces shown (see `mcts.search`).
    ``root_scouts``, ``root_combos``, ``scouts``, ``combos``: the actions tried at a node
    (`mcts.Width`; unset, `Width.for_players` of the table). ``eval``: the leaf evaluation,
    ``rollout`` (greedy playouts, the default), ``net`` (the learned `value.ValueNet`) or
    ``mix`` (``net_weight`` of the net, the rest rollout); ``prior`` > 0 ranks and biases the
    root's actions by the net (see `mcts.search`); ``weights``: the network's ``.npz``
    (default: the one shipped in the package).
    """

    name = "search"
    version = "1"

    def __init__(self, seed: int | None = 0, *, think_ms: int | None = None,
                 iterations: int | None = None, exploration: float = 0.7,
                 safety_margin_ms: int = SAFETY_MARGIN_MS, rotation_samples: int = 24,
                 opponents_search: bool = True, sample_tries: int = DEFAULT_SAMPLE_TRIES,
                 min_iterations: int = DEFAULT_MIN_ITERATIONS, root_scouts: int | None = None,
                 root_combos: int | None = None, scouts: int | None = None,
                 combos: int | None = None,
                 eval: str = "rollout", net_weight: float = 0.5, prior: float = 0.0,
                 weights: str | None = None, observe: bool = True,
                 read_scouts: bool = False, read_rotations: bool = True,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if think_ms is None and iterations is None:
            think_ms = DEFAULT_THINK_MS
        self.seed = seed
        self.think_ms = think_ms
        self.iterations = iterations
        self.exploration = exploration
        self.safety_margin_ms = safety_margin_ms
        self.rotation_samples = rotation_samples
        self.opponents_search = opponents_search
        self.sample_tries = sample_tries
        self.min_iterations = min_iterations
        widths = {"root_scouts": root_scouts, "root_combos": root_combos, "scouts": scouts,
                  "combos": combos}
        self.width_overrides = {k: v for k, v in widths.items() if v is not None}
        if eval not in EVALS:
            raise ValueError(f"eval is one of {', '.join(EVALS)}, not {eval!r}")
        self.eval = eval
        self.net_weight = {"rollout": 0.0, "net": 1.0}.get(eval, net_weight)
        self.prior = prior
        self.observe = observe
        self.read_scouts = read_scouts
        self.read_rotations = read_rotations
        self.net = (load_net(weights) if self.net_weight > 0 or prior > 0 else None)
        self.clock = clock
        self.last_stats = SearchStats(0, None, False)
        self.fallbacks = 0  # decisions answered by the greedy policy (an InvalidPosition)
        self._lock = threading.Lock()
        self._excluded: dict[str, set[tuple[int, int]]] = {}  # 2 players: round 1's cards
        self._seen_round0: dict[str, set[tuple[int, int]]] = {}
        self._seats: dict[str, int] = {}  # from MatchStart or the match's observations
        self._players: dict[str, int] = {}
        self._totals: dict[str, tuple[int, ...]] = {}  # after the last round, from RoundEnded

    def width(self, num_players: int) -> Width:
        """The actions tried at a node: the table size's default, with any knob given."""
        return replace(Width.for_players(num_players), **self.width_overrides)

    # ----- per-match memory (two players only: round 2 is dealt the cards round 1 did not use)

    def _remember(self, match_id: str, cards: list[tuple[int, int]]) -> None:
        with self._lock:
            self._seen_round0.setdefault(match_id, set()).update(cards)

    def _excluded_for(self, match_id: str, num_players: int, round_index: int
                      ) -> set[tuple[int, int]]:
        if num_players != 2 or round_index == 0:
            return set()
        with self._lock:
            return set(self._excluded.get(match_id, ())) | self._seen_round0.get(match_id, set())

    def on_round_end(self, round_ended: sdk.RoundEnded) -> None:
        with self._lock:
            if round_ended.totals:
                self._totals[round_ended.match_id] = tuple(round_ended.totals)
        if round_ended.round_index == 0 and round_ended.dealt_hands:
            with self._lock:
                self._excluded.setdefault(round_ended.match_id, set()).update(
                    c.pair for h in round_ended.dealt_hands for c in h)

    def on_match_end(self, match_ended: sdk.MatchEnded) -> None:
        with self._lock:
            self._excluded.pop(match_ended.match_id, None)
            self._seen_round0.pop(match_ended.match_id, None)
            self._seats.pop(match_ended.match_id, None)
            self._players.pop(match_ended.match_id, None)
            self._totals.pop(match_ended.match_id, None)

    # ----- decisions ---------------------------------------------------------------------

    def _rng(self, *parts: object) -> random.Random:
        return random.Random(":".join(map(str, (self.seed, *parts))))

    def _deadline(self, deadline_ms: int) -> tuple[float | None, int | None]:
        budget = time_budget_ms(self.think_ms, deadline_ms, self.safety_margin_ms)
        start = self.clock()
        return (None if budget is None else start + budget / 1000), budget

    def _hard_deadline(self, deadline_ms: int) -> float | None:
        """The latest the search may run to for ``min_iterations``: the deadline less the
        margin (None without a deadline or in iteration mode, where the count decides)."""
        if deadline_ms <= 0 or self.iterations is not None:
            return None
        return self.clock() + max(0, deadline_ms - self.safety_margin_ms) / 1000

    def act(self, observation: sdk.Observation) -> sdk.Action:
        deadline, budget = self._deadline(observation.deadline_ms)
        hard = self._hard_deadline(observation.deadline_ms)
        with self._lock:
            self._seats[observation.match_id] = observation.seat
            self._players[observation.match_id] = observation.num_players
        if observation.num_players == 2 and observation.round_index == 0:
            self._remember(observation.match_id, [c.pair for c in observation.hand]
                           + [c.pair for a in observation.history for c in a.cards])
        excluded = self._excluded_for(observation.match_id, observation.num_players,
                                      observation.round_index)
        try:
            info = observation.information_set(excluded)
        except InvalidPosition:
            try:  # the memory of round 1 may be at fault; the observation alone is enough
                info = observation.information_set()
            except InvalidPosition:
                self.fallbacks += 1
                self.last_stats = SearchStats(0, budget, False)
                return sdk.GreedyBot().act(observation)
        rng = self._rng(observation.match_id, observation.round_index,
                        len(observation.history), observation.seat)
        result: SearchResult | None = None
        if budget is None or budget > 0:
            result = search(info, rng, iterations=self.iterations, deadline=deadline,
                            exploration=self.exploration, clock=self.clock,
                            opponents_search=self.opponents_search,
                            sample_tries=self.sample_tries,
                            min_iterations=0 if self.iterations is not None
                            else self.min_iterations,
                            hard_deadline=hard, width=self.width(observation.num_players),
                            net=self.net,
                            net_weight=self.net_weight, prior=self.prior,
                            observe=self.observe, read_scouts=self.read_scouts,
                            read_rotations=self.read_rotations)
        if result is None:
            action = greedy_action(info.determinize(rng))
            self.last_stats = SearchStats(0, budget, False)
        else:
            action = result.action
            self.last_stats = SearchStats(result.iterations, budget, True)
        if not observation.is_legal(action):  # never expected: the engine generated it
            self.fallbacks += 1
            return sdk.GreedyBot().act(observation)
        return action

    def choose_rotation(self, request: sdk.RotationRequest) -> bool:
        """Play the round out from both orientations on the same determinizations (the other
        seats rotating as greedy would) and keep the better mean reward; on a tie, or with no
        time, the orientation whose hand has the better sets and runs."""
        deadline, budget = self._deadline(request.deadline_ms)
        hand = Hand(request.hand)
        heuristic = more_playable_rotated(request.hand)
        # The request names neither the seat nor the table size: they come from the match
        # start or the match's earlier observations (a bot that missed the MatchStart, having
        # connected late, rotates by the heuristic until its first observation).
        with self._lock:
            seat = self._seats.get(request.match_id)
            num_players = self._players.get(request.match_id)
        if seat is None or num_players is None or (budget is not None and budget <= 0):
            return heuristic
        excluded = self._excluded_for(request.match_id, num_players, request.round_index)
        # Totals are known only from RoundEnded; without them the round alone is judged.
        scores = self._scores_for(request.match_id, num_players)
        rng = self._rng(request.match_id, request.round_index, "rotation")
        try:
            views = [(sign, InformationSet.at_round_start(seat, num_players, request.round_index,
                                                          mine, scores, excluded))
                     for sign, mine in ((1.0, hand), (-1.0, hand.rotated()))]
        except InvalidPosition:  # the memory of round 1 does not add up
            return heuristic
        kept = views[0][1]
        margin = 0.0
        samples = 0
        limit = self.rotation_samples if self.iterations is not None else None
        while limit is None or samples < limit:
            if deadline is not None and self.clock() >= deadline:
                break
            hands = list(kept.deal(rng))
            for s in range(num_players):
                if s != seat and more_playable_rotated(hands[s]):
                    hands[s] = Hand(hands[s]).rotated()
            for sign, view in views:
                hands[seat] = view.hand
                state = view.state(hands)
                margin += sign * rollout(state, scores)[seat]
            samples += 1
        if samples == 0 or margin == 0:
            return heuristic
        return margin < 0

    def on_match_start(self, start: sdk.MatchStart) -> None:
        with self._lock:
            self._seats[start.match_id] = start.seat
            self._players[start.match_id] = start.num_players

    def _scores_for(self, match_id: str, num_players: int) -> tuple[int, ...]:
        with self._lock:
            return self._totals.get(match_id, (0,) * num_players)

