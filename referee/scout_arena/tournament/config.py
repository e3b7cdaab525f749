"""What a tournament is: its bots, options and schedule, a pure function of the configuration
(so a resumed or repeated run plays exactly the same matches)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from scout_rules.cards import MASK64, SplitMix64
from scout_rules.protocol import DEFAULT_DECISION_MS, DEFAULT_TIME_BANK_MS

from ..record import JSON

CONFIG_FILE = "tournament.json"
SUMMARY_FILE = "summary.json"
BUNDLED = {"random", "greedy", "search"}
#: A bot that forfeits this many matches in a row is seated as absent for the rest of the event.
DISQUALIFY_AFTER = 3
LEADER_REFRESH_S = 1.0


class TournamentDirError(ValueError):
    """The output folder belongs to another tournament: its records must not be mixed in."""


def _derived(*parts: object) -> int:
    """A 60-bit number from ``parts`` (the same on every machine and Python)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 4


def bot_seed(tournament_seed: int, name: str) -> int:
    """The ``--seed`` a bundled bot of a tournament gets: with the match ids (`match_id`), it
    makes ``random`` and ``search --iterations N`` replay from the tournament's seed."""
    return _derived("bot", tournament_seed, name)


def match_id(tournament_seed: int, key: str) -> str:
    """A scheduled match's id, from the tournament's seed and the match's schedule key: a bot
    seeding its generators with the match id (as the bundled ones do) plays it again the same
    in a second run, on any node, where the referee's random ids made every run differ."""
    return f"m-{_derived('match', tournament_seed, key) >> 12:012x}"


#: A Python bot class as `bot run` names one: ``path/to/file.py:Class`` or ``module:Class``.
_CLASS_SPEC = re.compile(r"(?:[\w./-]+\.py|[A-Za-z_][\w.]*):[A-Za-z_]\w*")


@dataclass(frozen=True)
class BotSpec:
    """A named bot program: a command line, or a Python bot that `scout-arena bot run` plays
    with the runner's interpreter: a bundled one (``random``, ``greedy``, ``search``) or a class
    (``my_bot.py:MyBot``, ``my_bot:MyBot``), with `bot run`'s options after it (``search
    --iterations 200``)."""

    name: str
    command: str

    @property
    def bot_run(self) -> bool:
        """Whether `scout-arena bot run` plays it (rather than the command being run as is)."""
        words = self.command.split(maxsplit=1)
        return bool(words) and (words[0] in BUNDLED or _CLASS_SPEC.fullmatch(words[0]) is not None)

    def argv(self, seed: int | None = None) -> list[str]:
        """The command line; ``seed``: the ``--seed`` of a `bot_run` bot (others get none)."""
        if self.bot_run:
            extra = [] if seed is None else ["--seed", str(seed)]
            return [sys.executable, "-m", "scout_arena.cli", "bot", "run",
                    *shlex.split(self.command), *extra]
        return shlex.split(self.command)


@dataclass(frozen=True)
class TournamentConfig:
    bots: tuple[BotSpec, ...]
    players: int = 2
    games: int = 2
    concurrency: int = 2
    seed: int = 1
    gauntlet: str | None = None
    duplicate: bool = True
    decision_ms: int = DEFAULT_DECISION_MS
    time_bank_ms: int = DEFAULT_TIME_BANK_MS
    connect_timeout_s: float = 30.0
    reconnect_grace_s: float = 2.0

    def validate(self) -> None:
        names = [b.name for b in self.bots]
        if len(set(names)) != len(names):
            raise ValueError("bot names must be unique")
        if not 2 <= self.players <= 5:
            raise ValueError("--players is 2 to 5")
        if self.gauntlet is not None and self.gauntlet not in names:
            raise ValueError(f"gauntlet candidate {self.gauntlet!r} is not one of the bots")
        field_size = len(names) - (1 if self.gauntlet else 0)
        needed = self.players - (1 if self.gauntlet else 0)
        if field_size < needed:
            raise ValueError(f"{self.players}-player tables need at least {self.players} bots")
        if self.games < 1 or self.concurrency < 1:
            raise ValueError("--games and --concurrency are at least 1")

    def to_json(self) -> JSON:
        data = asdict(self)
        data["bots"] = [asdict(b) for b in self.bots]
        return data

    @classmethod
    def from_json(cls, data: JSON) -> TournamentConfig:
        values = dict(data)
        values["bots"] = tuple(BotSpec(**b) for b in values["bots"])
        return cls(**values)


@dataclass(frozen=True)
class ScheduledMatch:
    """One match of the schedule; ``key`` names it across restarts."""

    key: str
    seats: tuple[str, ...]
    seed: int


def deal_seed(base: int, index: int) -> int:
    return SplitMix64((base + index * 0x9E3779B97F4A7C15) & MASK64).next_u64()


def schedule(config: TournamentConfig) -> list[ScheduledMatch]:
    """Every table lineup x every deal x (with duplicate deals) every cyclic seat rotation.

    Duplicate deals: each deal is played once per rotation of the seats, so over the N plays of
    a deal every bot of the table holds every hand. Without them, each deal is played once and
    the seating rotates from deal to deal."""
    names = [b.name for b in config.bots]
    n = config.players
    if config.gauntlet is None:
        tables = [tuple(t) for t in itertools.combinations(names, n)]
    else:
        field_names = [x for x in names if x != config.gauntlet]
        tables = [(config.gauntlet, *t) for t in itertools.combinations(field_names, n - 1)]
    matches = []
    deal_index = 0
    for t, table in enumerate(tables):
        for g in range(config.games):
            seed = deal_seed(config.seed, deal_index)
            deal_index += 1
            rotations = range(n) if config.duplicate else [g % n]
            for r in rotations:
                seats = table[r:] + table[:r]
                matches.append(ScheduledMatch(f"t{t}-d{g}-r{r}", seats, seed))
    return matches


def load_config_file(path: Path) -> JSON:
    """A TOML or JSON file with the same keys as the options, bots as [[bot]] name/command."""
    import tomllib

    text = path.read_text(encoding="utf-8")
    data: JSON = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    if "bot" in data:
        data["bots"] = data.pop("bot")
    return data
