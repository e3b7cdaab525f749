"""Local tournaments: bot programs against each other on one machine, cutechess-style.

One in-process referee on a free loopback port; every bot a subprocess that finds the referee
through the launch convention (SCOUT_ADDRESS, SCOUT_TOKEN, SCOUT_BOT_NAME, SCOUT_CONCURRENCY).
The schedule is a pure function of the configuration, results are computed from the saved
records in schedule order, so the same seed and deterministic bots give the same standings, and
``--resume`` can skip every match whose finished record is already on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import secrets
import shlex
import signal
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .engine.cards import MASK64, SplitMix64
from .ratings import RatingBook, conservative
from .record import JSON, MatchOutcome, MatchRecord, RecordError, load_record
from .server import RefereeFacade, TimeControl

CONFIG_FILE = "tournament.json"
SUMMARY_FILE = "summary.json"
BUNDLED = {"random", "greedy"}
#: A bot that forfeits this many matches in a row is seated as absent for the rest of the event.
DISQUALIFY_AFTER = 3
LEADER_REFRESH_S = 1.0


class TournamentDirError(ValueError):
    """The output folder belongs to another tournament: its records must not be mixed in."""


@dataclass(frozen=True)
class BotSpec:
    """A named bot program: a command line, or a bundled Python bot (``random``/``greedy``)."""

    name: str
    command: str

    def argv(self) -> list[str]:
        if self.command in BUNDLED:
            return [sys.executable, "-m", "scout_arena.cli", "bot", "run", self.command]
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
    decision_ms: int = 1000
    time_bank_ms: int = 10_000
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


# ----- results ------------------------------------------------------------------------------

@dataclass
class BotStats:
    name: str
    matches: int = 0
    scores: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    wins: float = 0.0
    timeouts: int = 0
    illegal_actions: int = 0
    forfeits: int = 0
    mu: float = 25.0
    sigma: float = 25.0 / 3

    @property
    def conservative(self) -> float:
        return conservative(self.mu, self.sigma)

    def mean_score_ci(self) -> tuple[float, float]:
        if not self.scores:
            return (0.0, 0.0)
        mean = statistics.fmean(self.scores)
        if len(self.scores) < 2:
            return (mean, math.inf)
        return (mean, 1.96 * statistics.stdev(self.scores) / math.sqrt(len(self.scores)))


def compute_standings(outcomes: Sequence[MatchOutcome], names: Sequence[str]
                      ) -> tuple[dict[str, BotStats], dict[str, dict[str, float]]]:
    """Standings and head-to-head shares from finished matches, taken in schedule order."""
    book = RatingBook()
    stats = {name: BotStats(name) for name in names}
    wins_vs: dict[str, dict[str, float]] = {a: {b: 0.0 for b in names} for a in names}
    games_vs: dict[str, dict[str, int]] = {a: {b: 0 for b in names} for a in names}
    for outcome in outcomes:
        seats, ranks = outcome.players, outcome.ranks
        firsts = len(outcome.winners)
        for seat, name in enumerate(seats):
            s = stats[name]
            s.matches += 1
            s.scores.append(outcome.totals[seat])
            s.ranks.append(ranks[seat])
            if ranks[seat] == 1:
                s.wins += 1 / firsts
            s.timeouts += outcome.seats[seat].timeouts
            s.illegal_actions += outcome.seats[seat].illegal_actions
            s.forfeits += seat in outcome.forfeits
            for other, other_name in enumerate(seats):
                if other != seat:
                    games_vs[name][other_name] += 1
                    if ranks[seat] < ranks[other]:
                        wins_vs[name][other_name] += 1
                    elif ranks[seat] == ranks[other]:
                        wins_vs[name][other_name] += 0.5
        book.rate(seats, ranks)
    for name in names:
        rating = book.get(name)
        stats[name].mu, stats[name].sigma = rating.mu, rating.sigma
    share = {a: {b: (wins_vs[a][b] / games_vs[a][b]) if games_vs[a][b] else math.nan
                 for b in names} for a in names}
    return stats, share


# ----- running --------------------------------------------------------------------------------

@dataclass
class BotProcess:
    spec: BotSpec
    token: str
    process: asyncio.subprocess.Process | None = None
    status: str = "starting"
    exit_code: int | None = None
    consecutive_forfeits: int = 0
    disqualified: bool = False
    notes: list[str] = field(default_factory=list)


class Tournament:
    """Runs a schedule; keeps going whatever the bots do."""

    def __init__(self, config: TournamentConfig, out_dir: Path, *, console: Any = None,
                 show_progress: bool = True) -> None:
        config.validate()
        self.config = config
        self.out = out_dir
        self.records_dir = out_dir / "records"
        self.logs_dir = out_dir / "logs"
        self.console = console
        self.show_progress = show_progress
        self.bots = {b.name: BotProcess(b, secrets.token_urlsafe(16)) for b in config.bots}
        self.schedule = schedule(config)
        self.done: dict[str, MatchRecord] = {}
        self.interrupted = False
        self.started = time.monotonic()
        self.play_seconds = 0.0
        self._leader_at = -LEADER_REFRESH_S
        self._leader_text = ""

    def _load_finished(self) -> None:
        if not self.records_dir.exists():
            return
        keys = {m.key for m in self.schedule}
        for path in sorted(self.records_dir.glob("*.json")):
            try:
                record = load_record(path)
            except RecordError:
                continue
            key = record.meta_value("tournament_key")
            if record.finished and key in keys:
                self.done[key] = record
            elif key in keys:
                path.rename(path.with_suffix(".unfinished"))

    async def run(self) -> JSON:
        self.out.mkdir(parents=True, exist_ok=True)
        self.records_dir.mkdir(exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        config_path = self.out / CONFIG_FILE
        if config_path.exists():
            stored = json.loads(config_path.read_text())
            if stored != json.loads(json.dumps(self.config.to_json())):
                raise TournamentDirError(
                    f"{self.out} holds a different tournament; choose another --out, or "
                    f"continue that one with --resume {self.out}")
        config_path.write_text(json.dumps(self.config.to_json(), indent=1) + "\n")
        self._load_finished()
        referee = RefereeFacade({b.spec.name: b.token for b in self.bots.values()},
                                host="127.0.0.1", port=0, records_dir=self.records_dir,
                                time_control=TimeControl(self.config.decision_ms,
                                                         self.config.time_bank_ms),
                                reconnect_grace_s=self.config.reconnect_grace_s)
        await referee.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        try:
            await self._launch_bots(referee.address)
            await self._wait_connected(referee, stop)
            play_started = time.monotonic()
            try:
                await self._play(referee, stop)
            finally:
                self.play_seconds = time.monotonic() - play_started
        finally:
            self.interrupted = stop.is_set()
            await referee.stop()
            await self._stop_bots()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
        summary = self.summary()
        (self.out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + "\n")
        return summary

    async def _launch_bots(self, address: str) -> None:
        for bot in self.bots.values():
            env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": bot.token,
                   "SCOUT_BOT_NAME": bot.spec.name,
                   "SCOUT_CONCURRENCY": str(self.config.concurrency)}
            log = (self.logs_dir / f"{bot.spec.name}.stderr.log").open("ab")
            try:
                bot.process = await asyncio.create_subprocess_exec(
                    *bot.spec.argv(), env=env, stdin=asyncio.subprocess.DEVNULL,
                    stdout=log, stderr=log, start_new_session=True)
            except OSError as exc:
                bot.status = "failed to start"
                bot.notes.append(f"could not start {bot.spec.command!r}: {exc}")
            finally:
                log.close()

    async def _wait_connected(self, referee: RefereeFacade, stop: asyncio.Event) -> None:
        deadline = time.monotonic() + self.config.connect_timeout_s
        while time.monotonic() < deadline and not stop.is_set():
            self._poll_processes()
            connected = referee.connected_bots()
            waiting = [b for b in self.bots.values() if b.status == "starting"
                       and b.spec.name not in connected]
            for b in self.bots.values():
                if b.status == "starting" and b.spec.name in connected:
                    b.status = "connected"
            if not waiting:
                return
            await asyncio.sleep(0.05)
        for b in self.bots.values():
            if b.status == "starting":
                b.status = "never connected"
                b.notes.append(f"did not connect within {self.config.connect_timeout_s:g} s; "
                               "its matches are forfeited")

    def _poll_processes(self) -> None:
        for b in self.bots.values():
            if b.process is not None and b.process.returncode is not None and \
                    b.exit_code is None:
                b.exit_code = b.process.returncode
                if b.status in ("starting", "connected"):
                    b.status = "crashed"
                    b.notes.append(f"exited with status {b.exit_code} during the tournament")

    def _absent(self, connected: dict[str, int]) -> set[str]:
        self._poll_processes()
        return {name for name, b in self.bots.items()
                if b.disqualified or name not in connected}

    async def _play(self, referee: RefereeFacade, stop: asyncio.Event) -> None:
        """Start matches as seats free up until the schedule is played or ``stop`` is set;
        matches still running then are aborted (records written) by the referee's stop."""
        pending = [m for m in self.schedule if m.key not in self.done]
        running: dict[str, ScheduledMatch] = {}
        ended: list[MatchRecord] = []
        woken = asyncio.Event()

        def match_ended(record: MatchRecord) -> None:
            ended.append(record)
            woken.set()

        referee.on_match_finished(match_ended)
        progress = self._progress()
        resumed = len(self.done)
        task_id = progress.add_task("matches", total=len(self.schedule),
                                    completed=len(self.done), leader="",
                                    rate="") if progress else None
        with progress if progress is not None else contextlib.nullcontext():
            while (pending or running) and not stop.is_set():
                while pending and len(running) < self.config.concurrency:
                    started = self._start_next(referee, pending)
                    if started is None:
                        break
                    match_id, item = started
                    running[match_id] = item
                if not running:
                    await asyncio.sleep(0.05)
                    continue
                if not ended:
                    waits = {asyncio.ensure_future(woken.wait()),
                             asyncio.ensure_future(stop.wait())}
                    try:
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for wait in waits:
                            wait.cancel()
                woken.clear()
                records, ended[:] = ended[:], []
                for record in records:
                    scheduled = running.pop(record.match_id or "", None)
                    if scheduled is not None:
                        self._finish(record, scheduled)
                if progress is not None and task_id is not None:
                    progress.update(task_id, completed=len(self.done), leader=self._leader(),
                                    rate=self._rate(len(self.done) - resumed))

    def _start_next(self, referee: RefereeFacade, pending: list[ScheduledMatch]
                    ) -> tuple[str, ScheduledMatch] | None:
        connected = referee.connected_bots()
        absent = self._absent(connected)
        for i, item in enumerate(pending):
            present = [n for n in item.seats if n not in absent]
            if all(connected.get(n, 0) > 0 for n in present):
                pending.pop(i)
                match_id = referee.create_match(list(item.seats), item.seed, absent=absent,
                                                absent_ok=True,
                                                meta={"tournament_key": item.key})
                return match_id, item
        return None

    def _finish(self, record: MatchRecord, item: ScheduledMatch) -> None:
        if record.status == "finished":
            self.done[item.key] = record
            forfeited = set(record.forfeits)
            for seat, name in enumerate(item.seats):
                bot = self.bots[name]
                if seat in forfeited:
                    bot.consecutive_forfeits += 1
                    if bot.consecutive_forfeits >= DISQUALIFY_AFTER and not bot.disqualified:
                        bot.disqualified = True
                        bot.notes.append(f"forfeited {DISQUALIFY_AFTER} matches in a row; seated "
                                         "as absent for the rest of the tournament")
                else:
                    bot.consecutive_forfeits = 0

    async def _stop_bots(self) -> None:
        for bot in self.bots.values():
            if bot.process is not None and bot.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    bot.process.send_signal(signal.SIGTERM)
        for bot in self.bots.values():
            if bot.process is None:
                continue
            try:
                await asyncio.wait_for(bot.process.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(bot.process.pid, signal.SIGKILL)
                await bot.process.wait()
                bot.notes.append("did not stop on SIGTERM within 5 s; killed")

    # ----- reporting ------------------------------------------------------------------------

    def ordered_records(self) -> list[MatchRecord]:
        order = {m.key: i for i, m in enumerate(self.schedule)}
        return [self.done[k] for k in sorted(self.done, key=order.__getitem__)]

    def ordered_outcomes(self) -> list[MatchOutcome]:
        return [outcome for r in self.ordered_records() if (outcome := r.outcome) is not None]

    def _leader(self) -> str:
        """The current leader for the progress bar. Rating every record again costs time that
        grows with the square of the matches, so it is refreshed at most once a second."""
        now = time.monotonic()
        if now - self._leader_at >= LEADER_REFRESH_S:
            self._leader_at = now
            stats, _ = compute_standings(self.ordered_outcomes(), list(self.bots))
            best = max(stats.values(), key=lambda s: s.conservative)
            self._leader_text = f"{best.name} ({best.conservative:.1f})" if best.matches else ""
        return self._leader_text

    def _progress(self) -> Any:
        if not self.show_progress:
            return None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        return Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                        TextColumn("leader: {task.fields[leader]}"), console=self.console,
                        transient=False)

    def _rate(self, finished_here: int) -> str:
        minutes = (time.monotonic() - self.started) / 60
        return f"{finished_here / minutes:.0f} matches/min" if minutes > 0 else ""

    def summary(self) -> JSON:
        names = list(self.bots)
        records = self.ordered_records()
        stats, share = compute_standings(self.ordered_outcomes(), names)
        elapsed = time.monotonic() - self.started
        standings = []
        for s in sorted(stats.values(), key=lambda s: -s.conservative):
            mean, half = s.mean_score_ci()
            bot = self.bots[s.name]
            standings.append({
                "bot": s.name, "command": bot.spec.command, "mu": round(s.mu, 3),
                "sigma": round(s.sigma, 3), "mu_minus_3sigma": round(s.conservative, 3),
                "matches": s.matches, "mean_score": round(mean, 3),
                "mean_score_ci95": None if math.isinf(half) else round(half, 3),
                "win_rate": round(s.wins / s.matches, 4) if s.matches else None,
                "mean_rank": round(statistics.fmean(s.ranks), 3) if s.ranks else None,
                "timeouts": s.timeouts, "illegal_actions": s.illegal_actions,
                "forfeits": s.forfeits, "status": bot.status, "notes": bot.notes,
            })
        return {
            "config": self.config.to_json(),
            "matches_total": len(self.schedule),
            "matches_finished": len(records),
            "interrupted": self.interrupted,
            "elapsed_s": round(elapsed, 2),
            "play_s": round(self.play_seconds, 3),
            "standings": standings,
            "head_to_head": {a: {b: (None if math.isnan(v) else round(v, 4))
                                 for b, v in row.items() if b != a}
                             for a, row in share.items()},
            "records": [f"records/{r.match_id}.json" for r in records],
        }


def load_config_file(path: Path) -> JSON:
    """A TOML or JSON file with the same keys as the options, bots as [[bot]] name/command."""
    import tomllib

    text = path.read_text(encoding="utf-8")
    data: JSON = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    if "bot" in data:
        data["bots"] = data.pop("bot")
    return data


def render_summary(summary: JSON, console: Any) -> None:
    """Standings and the head-to-head crosstable as rich tables."""
    from rich.table import Table

    done, total = summary["matches_finished"], summary["matches_total"]
    title = f"Standings after {done}/{total} matches"
    if summary["interrupted"]:
        title += " (interrupted: resume with --resume)"
    table = Table(title=title)
    for col in ("#", "bot", "mu-3sigma", "mu", "sigma", "games", "mean score (95% CI)", "win %",
                "mean rank", "timeouts", "illegal", "forfeits"):
        table.add_column(col, justify="left" if col == "bot" else "right")
    for i, row in enumerate(summary["standings"], 1):
        ci = row["mean_score_ci95"]
        score = f"{row['mean_score']:+.2f} ± {ci:.2f}" if ci is not None else \
            f"{row['mean_score']:+.2f}"
        win = f"{100 * row['win_rate']:.1f}" if row["win_rate"] is not None else "-"
        rank = f"{row['mean_rank']:.2f}" if row["mean_rank"] is not None else "-"
        table.add_row(str(i), row["bot"], f"{row['mu_minus_3sigma']:.2f}", f"{row['mu']:.2f}",
                      f"{row['sigma']:.2f}", str(row["matches"]), score, win, rank,
                      str(row["timeouts"]), str(row["illegal_actions"]), str(row["forfeits"]))
    console.print(table)
    names = [row["bot"] for row in summary["standings"]]
    cross = Table(title="Head to head: share of encounters the row bot finished ahead "
                        "(ties count half)")
    cross.add_column("")
    for name in names:
        cross.add_column(name, justify="right")
    for a in names:
        cells = []
        for b in names:
            v = summary["head_to_head"][a].get(b) if a != b else None
            cells.append("-" if v is None else f"{100 * v:.0f}%")
        cross.add_row(a, *cells)
    console.print(cross)
    for row in summary["standings"]:
        for note in row["notes"]:
            console.print(f"[yellow]{row['bot']}[/yellow]: {note}")
