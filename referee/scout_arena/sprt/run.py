"""Playing an SPRT: results come in game by game, are folded into the test deal by deal in
deal order (so the LLR path does not depend on which game of a concurrent run ended first),
and the run stops as soon as the test decides or the games run out.

Three ways to play the games, all feeding `SprtRun.record`:

* `play_in_process`: Python bots on the engine through `scout_arena.local.play_match`, one
  after the other; no subprocess, no network.
* `play_processes`: bot programs as subprocesses on one venue of the local tournament runner
  (`scout_arena.tournament.venue.Venue`: a referee on loopback, the launch convention), which
  plays the SPRT's schedule and is stopped as soon as the test is over.
* `play_on_nodes`: `scout_arena.tournament.distributed.play_distributed` (--nodes, --ray), looked
  up at run time.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scout_rules import rank_scores

from ..record import JSON, MatchRecord, dump_record
from ..tournament import ScheduledMatch
from .design import DealGroup, GameResult, SprtConfig, deal_group, group_value
from .stats import SequentialTest

if TYPE_CHECKING:
    from ..tournament.venue import BotProcess

__all__ = ["DISTRIBUTED_MODULE", "SprtError", "SprtRun", "play_in_process", "play_on_nodes",
           "play_processes"]

DISTRIBUTED_MODULE = "scout_arena.tournament.distributed"


class SprtError(RuntimeError):
    """The SPRT cannot be played as asked (a missing module, games that never finish)."""


@dataclass
class Point:
    """The test after one more deal."""

    deals: int
    games: int
    llr: float
    llr_plain: float
    mean: float
    value: float


@dataclass
class SprtRun:
    """The test and everything it has seen. ``stop_on_decision=False`` plays every deal up to
    --max-games whatever the LLR says (for benchmarks)."""

    config: SprtConfig
    stop_on_decision: bool = True
    on_update: Callable[[SprtRun], None] | None = None
    test: SequentialTest = field(init=False)
    results: dict[str, GameResult] = field(default_factory=dict)
    history: list[Point] = field(default_factory=list)
    forfeits: dict[str, int] = field(default_factory=dict)
    games_played: int = 0
    interrupted: bool = False
    #: What the subprocess path saw of each bot program: command, status, notes.
    bots: JSON = field(default_factory=dict)
    #: Problems worth telling that did not stop the test.
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _groups: dict[int, DealGroup] = field(default_factory=dict)
    _decided_at: str | None = None

    def __post_init__(self) -> None:
        self.config.validate()
        self.test = SequentialTest(self.config.h0, self.config.h1, self.config.alpha,
                                   self.config.beta)

    # ----- feeding ------------------------------------------------------------------------------

    @property
    def total_deals(self) -> int:
        return self.config.max_groups

    def group(self, deal: int) -> DealGroup:
        """Deal ``deal``'s games and pairs (made when first asked for)."""
        group = self._groups.get(deal)
        if group is None:
            group = self._groups[deal] = deal_group(self.config, deal)
        return group

    def schedule(self, from_deal: int = 0, deals: int | None = None) -> Iterator[ScheduledMatch]:
        """The games of ``deals`` deals (default: all up to --max-games) from ``from_deal``."""
        end = self.total_deals if deals is None else min(self.total_deals, from_deal + deals)
        for deal in range(from_deal, end):
            yield from self.group(deal).games

    def _deal_of(self, key: str) -> int | None:
        """The deal a game key of this run belongs to ("d<deal>-r<rotation>-<side>")."""
        head = key.split("-", 1)[0]
        if not head.startswith("d") or not head[1:].isdigit():
            return None
        deal = int(head[1:])
        if deal >= self.total_deals or all(g.key != key for g in self.group(deal).games):
            return None
        return deal

    @property
    def deals(self) -> int:
        """Deals folded into the test so far."""
        return self.test.n

    @property
    def finished(self) -> bool:
        return self.decision is not None or self.deals >= self.total_deals

    @property
    def decision(self) -> str | None:
        """"H0" or "H1" once the test has decided (and is stopping on it), else None."""
        return self._decided_at if self.stop_on_decision else None

    def record(self, key: str, result: GameResult, seats: Iterable[str] = ()) -> bool:
        """Take one game's result; fold every deal now complete, in deal order. True when the
        run is over (decided, or out of games): the caller stops playing."""
        if self.finished:
            return True
        if key in self.results or self._deal_of(key) is None:
            return False
        self.results[key] = result
        self.games_played += 1
        for seat, name in enumerate(seats):
            if seat in result.forfeits:
                self.forfeits[name] = self.forfeits.get(name, 0) + 1
        while self.deals < self.total_deals and self._complete(self.group(self.deals)):
            group = self.group(self.deals)
            value = group_value(self.config.metric, group, self.results)
            self.test.add(value)
            self.history.append(Point(self.deals, self.games_used, self.test.llr,
                                      self.test.llr_plain, self.test.mean, value))
            if self._decided_at is None:
                self._decided_at = self.test.decision
            if self.on_update is not None:
                self.on_update(self)
            if self.finished:
                return True
        return False

    def record_match(self, record: MatchRecord) -> bool:
        """A referee's record (tournament or distributed path)."""
        outcome = record.outcome
        key = record.tournament_key
        if outcome is None or not isinstance(key, str):
            return self.finished
        return self.record(key, GameResult.from_outcome(outcome), outcome.players)

    def _complete(self, group: DealGroup) -> bool:
        return all(game.key in self.results for game in group.games)

    @property
    def games_used(self) -> int:
        """Games of the deals the test has folded (games of a deal still open are not used)."""
        return self.deals * self.config.group_games

    def summary(self) -> JSON:
        test = self.test
        lower, upper = test.bounds
        low, high = test.interval()
        return {
            "config": self.config.to_json(),
            "decision": self.decision,
            "interrupted": self.interrupted,
            "llr": test.llr,
            "llr_plain": test.llr_plain,
            "bounds": [lower, upper],
            "deals": test.n,
            "pairs": self.games_used // 2,
            "games_used": self.games_used,
            "games_played": self.games_played,
            "games_limit": self.config.max_groups * self.config.group_games,
            "deal_games": self.config.group_games,
            "estimate": test.mean if test.n else None,
            "ci95": [low, high] if test.n >= 2 else None,
            "sd": test.sd if test.n >= 2 else None,
            "variance_used": test.variance_used if test.n >= 2 else None,
            "forfeits": dict(self.forfeits),
            "bots": self.bots,
            "notes": list(self.notes),
            "elapsed_s": round(time.monotonic() - self.started, 3),
            "history": [vars(p) for p in self.history],
        }


# ----- in process --------------------------------------------------------------------------------

def _result(totals: Iterable[int]) -> GameResult:
    scores = tuple(totals)
    return GameResult(scores, rank_scores(scores))


def play_in_process(run: SprtRun) -> None:
    """Every game on the engine, in schedule order, until the run is over. One bot object per
    seat name plays all of that name's games, as one process would (a bot sees each match by
    its own id)."""
    from scout_client.cli import BotSpecError, load_bot

    from ..local import play_match

    try:
        bots = {name: load_bot(spec, seed=run.config.seed * 1000 + i)
                for i, (name, spec) in enumerate(run.config.programs().items())}
    except BotSpecError as exc:
        raise SprtError(str(exc)) from None
    try:
        for game in run.schedule(run.deals):
            state = play_match([bots[name] for name in game.seats], game.seed,
                               match_id=f"sprt-{game.key}")
            if run.record(game.key, _result(state.scores), game.seats):
                return
    except KeyboardInterrupt:
        run.interrupted = True


# ----- bot programs: this machine's node, or workers -------------------------------------

@contextlib.contextmanager
def _stop_on_signals(run: SprtRun, stop: asyncio.Event) -> Iterator[None]:
    """Ctrl-C / SIGTERM stop the games (running ones are aborted) and mark the run interrupted."""
    loop = asyncio.get_running_loop()

    def interrupt() -> None:
        run.interrupted = True
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, interrupt)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


def _bots_json(bots: Mapping[str, BotProcess]) -> JSON:
    return {name: {"command": bot.spec.command, "status": bot.status, "notes": list(bot.notes)}
            for name, bot in bots.items()}


async def _play_node(run: SprtRun, out_dir: Path) -> None:
    from ..tournament.venue import Venue, new_bots

    config = run.config.tournament_config()
    records_dir, logs_dir = out_dir / "records", out_dir / "logs"
    records_dir.mkdir(parents=True, exist_ok=True)
    logs_dir.mkdir(parents=True, exist_ok=True)
    bots = new_bots(config)
    venue = Venue(config, bots, logs_dir, records_dir)
    stop = asyncio.Event()

    def finished(record: MatchRecord) -> None:
        if run.record_match(record):
            stop.set()

    await venue.start()
    try:
        with _stop_on_signals(run, stop):
            await venue.connect(stop)
            missing = [f"{name} ({bot.spec.command!r}) {bot.status}: {'; '.join(bot.notes)}"
                       for name, bot in bots.items() if bot.status != "connected"]
            if missing and not stop.is_set():
                raise SprtError("\n".join(missing) + "\na test of bots that do not play "
                                "would measure the referee's fallback")
            await venue.play(list(run.schedule(run.deals)), stop, finished)
    finally:
        await venue.close()
        run.bots = _bots_json(bots)


def play_processes(run: SprtRun, out_dir: Path) -> None:
    """The games as subprocesses: one venue of the local tournament runner (`venue.Venue`: a
    referee on a free loopback port, every bot program started once with the launch
    convention), playing the SPRT's schedule and stopped as soon as the test is over. Records
    and the bots' stderr go to ``out_dir``; ``run.bots`` says what became of each bot."""
    asyncio.run(_play_node(run, out_dir))


# ----- other machines ------------------------------------------------------------------------

def _distributed() -> Callable[..., object]:
    """`play_distributed`, looked up now: the module may not be installed."""
    try:
        module = importlib.import_module(DISTRIBUTED_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name is not None and DISTRIBUTED_MODULE.startswith(exc.name):
            raise SprtError(f"--nodes/--ray need {DISTRIBUTED_MODULE}, which this installation "
                            "does not have: play on this machine (without --nodes/--ray) or "
                            "install a scout-arena with distributed tournaments") from None
        raise
    function = getattr(module, "play_distributed", None)
    if not callable(function):
        raise SprtError(f"{DISTRIBUTED_MODULE} has no play_distributed(config, items, *, "
                        "nodes, ray_address, on_record)")
    return function  # type: ignore[no-any-return]


#: Without a ``stop`` parameter, `play_distributed` gets the schedule a batch of deals at a time,
#: doubling from the first batch to the largest: a run that decides early wastes little, a long
#: one pays the nodes' start-up rarely.
FIRST_BATCH_DEALS = 8
MOST_BATCH_DEALS = 512


async def _maybe_await(value: object) -> None:
    if inspect.isawaitable(value):
        await value


async def _play_distributed(run: SprtRun, out_dir: Path, nodes: int | None,
                            ray_address: str | None) -> None:
    play = _distributed()
    accepts = set(inspect.signature(play).parameters)
    config = run.config.tournament_config()
    records_dir, logs_dir = out_dir / "records", out_dir / "logs"
    records_dir.mkdir(parents=True, exist_ok=True)
    logs_dir.mkdir(parents=True, exist_ok=True)
    stop = asyncio.Event()

    def finished(record: MatchRecord) -> None:
        dump_record(record, records_dir / f"{record.match_id}.json")
        if run.record_match(record):
            stop.set()

    extra: dict[str, object] = {}
    if "logs_dir" in accepts:
        extra["logs_dir"] = logs_dir
    if "stop" in accepts:
        extra["stop"] = stop
    batch = run.total_deals if "stop" in accepts else FIRST_BATCH_DEALS * max(1, nodes or 1)
    retried: set[str] = set()
    with _stop_on_signals(run, stop):
        while not run.finished and not stop.is_set():
            start = run.deals
            items = [game for game in run.schedule(start, batch) if game.key not in run.results]
            if not items:
                break
            try:
                await _maybe_await(play(config, items, nodes=nodes, ray_address=ray_address,
                                        on_record=finished, **extra))
            except (RuntimeError, ValueError) as exc:
                if not (run.finished or run.interrupted):
                    raise SprtError(f"the nodes could not play the games: {exc}") from exc
                # The test was over; what went wrong while the nodes stopped changes nothing.
                run.notes.append(f"the nodes raised while stopping: {exc}")
                break
            missing = {game.key for game in items} - set(run.results)
            if missing and not run.finished and not stop.is_set():
                if missing & retried:
                    raise SprtError(f"{len(missing)} game(s) did not finish on the nodes twice, "
                                    f"for example {sorted(missing)[0]}")
                retried |= missing
            batch = min(2 * batch, max(MOST_BATCH_DEALS, batch))


def play_on_nodes(run: SprtRun, out_dir: Path, *, nodes: int | None = None,
                  ray_address: str | None = None) -> None:
    """The games through `scout_arena.tournament.distributed.play_distributed` (``nodes``
    local worker processes, or the Ray cluster at ``ray_address``), each finished record
    written to ``out_dir/records`` as it comes back. With a ``stop`` parameter it gets the
    whole schedule and is stopped when the test is over; without, batches of deals."""
    if (nodes is None) == (ray_address is None):
        raise SprtError("give either --nodes or --ray")
    asyncio.run(_play_distributed(run, out_dir, nodes, ray_address))
