"""What an SPRT plays: its options and the duplicate-deal pairs, a pure function of them.

Every deal is a *group* of games on one seed. For each seat rotation the deal is played twice,
once with NEW in the tested seat and once with BASE there, every other seat held by the same
field bot in both games; the pair's difference is NEW's result minus BASE's result in that
seat, on the same cards against the same opponents. With two players and no field the two
games of a deal are NEW-BASE and BASE-NEW, and both seats are tested seats of that one pair of
games. A group's observation is the mean of its pairs' differences: the pairs of one deal share
its cards, so the deal (for two players without a field, exactly fishtest's game pair) is the
unit of the test.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass

from scout_rules.protocol import DEFAULT_DECISION_MS, DEFAULT_TIME_BANK_MS

from ..record import JSON, MatchOutcome
from ..tournament import BotSpec, ScheduledMatch, TournamentConfig, deal_seed

__all__ = ["BASE", "METRICS", "NEW", "DealGroup", "GameResult", "Pair", "SprtConfig",
           "deal_group", "group_value", "pair_value"]

NEW = "new"
BASE = "base"
METRICS = ("score", "winrate")
#: --h1 when it is not given: one point of match score, or 5 points of win rate.
DEFAULT_H1 = {"score": 1.0, "winrate": 0.05}


@dataclass(frozen=True)
class SprtConfig:
    """``new``, ``base`` and ``field`` are bot commands (subprocesses) or, in process, bot
    specs (``greedy``, ``random``, ``module:Class``, ``file.py:Class``)."""

    new: str
    base: str
    field: tuple[str, ...] = ()
    players: int = 2
    metric: str = "score"
    h0: float = 0.0
    h1: float = 1.0
    alpha: float = 0.05
    beta: float = 0.05
    max_games: int = 10_000
    seed: int = 1
    concurrency: int = 2
    decision_ms: int = DEFAULT_DECISION_MS
    time_bank_ms: int = DEFAULT_TIME_BANK_MS
    connect_timeout_s: float = 30.0

    def validate(self) -> None:
        if not 2 <= self.players <= 5:
            raise ValueError("--players is 2 to 5")
        if self.metric not in METRICS:
            raise ValueError(f"--metric is one of {', '.join(METRICS)}")
        if not self.h1 > self.h0:
            raise ValueError("--h1 must be above --h0")
        if not (0 < self.alpha < 0.5 and 0 < self.beta < 0.5):
            raise ValueError("--alpha and --beta are between 0 and 0.5")
        if self.max_games < self.group_games:
            raise ValueError(f"--max-games is at least one deal's games ({self.group_games})")
        if self.concurrency < 1:
            raise ValueError("--concurrency is at least 1")

    @property
    def field_programs(self) -> tuple[str, ...]:
        """The bots of the other seats: --field, or for more than two players without one,
        the base (NEW and BASE are then measured against copies of BASE)."""
        if self.field:
            return self.field
        return (self.base,) if self.players > 2 else ()

    @property
    def head_to_head(self) -> bool:
        return not self.field_programs

    @property
    def group_games(self) -> int:
        return 2 if self.head_to_head else 2 * self.players

    @property
    def max_groups(self) -> int:
        return self.max_games // self.group_games

    def seat_names(self, deal: int) -> tuple[str, ...]:
        """The field seats of a deal's base table, as bot names: field bot i is ``fieldI``;
        a second copy at the same table is ``fieldI-2``, and so on."""
        count = len(self.field_programs)
        picks = [(deal + j) % count for j in range(self.players - 1)]
        seen: Counter[int] = Counter()
        names = []
        for i in picks:
            seen[i] += 1
            names.append(f"field{i + 1}" + (f"-{seen[i]}" if seen[i] > 1 else ""))
        return tuple(names)

    def programs(self) -> dict[str, str]:
        """Every bot name that can take a seat, with its command (or in-process spec)."""
        named = {NEW: self.new, BASE: self.base}
        for deal in range(len(self.field_programs)):  # every table the rotation ever sets
            for name in self.seat_names(deal):
                named[name] = self.field_programs[int(name[len("field"):].split("-")[0]) - 1]
        return named

    def tournament_config(self) -> TournamentConfig:
        """The local tournament that plays these games as subprocesses (its own schedule is
        replaced by the SPRT's)."""
        bots = tuple(BotSpec(name, command) for name, command in self.programs().items())
        return TournamentConfig(bots, players=self.players, games=1,
                                concurrency=self.concurrency, seed=self.seed,
                                decision_ms=self.decision_ms, time_bank_ms=self.time_bank_ms,
                                connect_timeout_s=self.connect_timeout_s)

    def to_json(self) -> JSON:
        data = asdict(self)
        data["field"] = list(self.field)
        return data


@dataclass(frozen=True)
class Pair:
    """NEW in ``seat`` of game ``new_game`` against BASE in the same seat of ``base_game``."""

    new_game: str
    base_game: str
    seat: int


@dataclass(frozen=True)
class DealGroup:
    index: int
    seed: int
    games: tuple[ScheduledMatch, ...]
    pairs: tuple[Pair, ...]


@dataclass(frozen=True)
class GameResult:
    """What the test needs of a finished game, by seat."""

    totals: tuple[int, ...]
    ranks: tuple[int, ...]
    forfeits: frozenset[int] = frozenset()

    @classmethod
    def from_outcome(cls, outcome: MatchOutcome) -> GameResult:
        return cls(tuple(outcome.totals), tuple(outcome.ranks), frozenset(outcome.forfeits))


def deal_group(config: SprtConfig, index: int) -> DealGroup:
    """The games and pairs of deal ``index``."""
    seed = deal_seed(config.seed, index)
    n = config.players
    if config.head_to_head:
        a = ScheduledMatch(f"d{index}-r0-{NEW}", (NEW, BASE), seed)
        b = ScheduledMatch(f"d{index}-r0-{BASE}", (BASE, NEW), seed)
        return DealGroup(index, seed, (a, b), (Pair(a.key, b.key, 0), Pair(b.key, a.key, 1)))
    field_seats = config.seat_names(index)
    games: list[ScheduledMatch] = []
    pairs: list[Pair] = []
    for r in range(n):
        keys = {}
        for side in (NEW, BASE):
            table = (side, *field_seats)
            seats = table[r:] + table[:r]
            key = f"d{index}-r{r}-{side}"
            keys[side] = key
            games.append(ScheduledMatch(key, seats, seed))
        pairs.append(Pair(keys[NEW], keys[BASE], (n - r) % n))
    return DealGroup(index, seed, tuple(games), tuple(pairs))


def seat_value(metric: str, result: GameResult, seat: int) -> float:
    """A seat's result: its match score, or its share of first place (1/k for k firsts)."""
    if metric == "score":
        return float(result.totals[seat])
    if result.ranks[seat] != 1:
        return 0.0
    return 1.0 / sum(1 for rank in result.ranks if rank == 1)


def pair_value(metric: str, pair: Pair, results: dict[str, GameResult]) -> float:
    return (seat_value(metric, results[pair.new_game], pair.seat)
            - seat_value(metric, results[pair.base_game], pair.seat))


def group_value(metric: str, group: DealGroup, results: dict[str, GameResult]) -> float:
    values = [pair_value(metric, pair, results) for pair in group.pairs]
    return math.fsum(values) / len(values)
