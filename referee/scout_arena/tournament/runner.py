"""Running a tournament: one in-process referee, every bot a subprocess, matches started as
seats free up, records kept on disk so that an interrupted run can be resumed.

The matches are played by one `venue.Venue` (a referee and its bot programs on this machine),
or by many through `distributed.py`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..record import MatchOutcome, MatchRecord, RecordError, load_record
from ..workerspawn import Workers
from .config import (
    CONFIG_FILE,
    LEADER_REFRESH_S,
    SUMMARY_FILE,
    TournamentConfig,
    TournamentDirError,
    schedule,
)
from .report import progress_bar
from .standings import compute_standings
from .summary import Standing, TournamentSummary
from .venue import BotProcess, Venue, new_bots

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from .distributed import NodeFault

#: Which of two statuses of one bot on one node a distributed run reports (the worse one).
_STATUS_RANK = {"starting": 0, "connected": 1, "crashed": 2, "never connected": 3,
                "failed to start": 4}


class Tournament:
    """Runs a schedule; keeps going whatever the bots do.

    By default on one node, this machine's. ``nodes``: on that many local worker processes
    instead; ``ray_address``: on the Ray cluster there ("auto": the one ``RAY_ADDRESS`` or
    ``ray start`` on this machine names); see `distributed.play_distributed` for these and
    ``chunk_size``, ``ray_working_dir`` and ``workers`` (``--nodes`` workers started ahead).
    Records, summary and standings are the same.

    On one node, a bot that cannot start (it fails to, exits, or does not connect in time)
    stops the tournament before any match, as cutechess does, with the end of its stderr in
    `error`; ``keep_going`` plays on instead, its seats played by the fallback."""

    def __init__(self, config: TournamentConfig, out_dir: Path, *, console: Console | None = None,
                 show_progress: bool = True, nodes: int | None = None,
                 ray_address: str | None = None, chunk_size: int | None = None,
                 ray_working_dir: Path | None = None, keep_going: bool = False,
                 workers: Workers | None = None) -> None:
        config.validate()
        self.config = config
        self.out = out_dir
        self.records_dir = out_dir / "records"
        self.logs_dir = out_dir / "logs"
        self.console = console
        self.show_progress = show_progress
        self.nodes = nodes
        self.ray_address = ray_address
        self.chunk_size = chunk_size
        self.ray_working_dir = ray_working_dir
        self.keep_going = keep_going
        self.workers = workers
        self.bots = new_bots(config)
        self.schedule = schedule(config)
        self.done: dict[str, MatchRecord] = {}
        self.interrupted = False
        self.error: str | None = None
        self._node_reports: dict[str, dict[str, tuple[str, list[str]]]] = {}
        self.faults: list[NodeFault] = []
        """What nodes did that cost matches (summary.json ``faults``)."""
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
            key = record.tournament_key
            if record.finished and key in keys:
                self.done[key] = record
            elif key in keys:
                path.rename(path.with_suffix(".unfinished"))

    async def run(self) -> TournamentSummary:
        if self.out.exists() and not self.out.is_dir():
            raise TournamentDirError(f"{str(self.out)[:100]} is a file, not a folder: choose "
                                     "another --out")
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
        distributed = self.nodes is not None or self.ray_address is not None
        venue = None if distributed else Venue(self.config, self.bots, self.logs_dir,
                                               self.records_dir)
        if venue is not None:
            await venue.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        try:
            if venue is None:
                await self._play_distributed(stop)
            else:
                await venue.connect(stop)
                failed = [] if self.keep_going or stop.is_set() else venue.not_playing()
                if failed:
                    self.error = self._cannot_start(failed)
                else:
                    play_started = time.monotonic()
                    try:
                        await self._play(venue, stop)
                    finally:
                        self.play_seconds = time.monotonic() - play_started
        finally:
            self.interrupted = stop.is_set() or self.error is not None
            if venue is not None:
                await venue.close()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
        summary = self.summary()
        (self.out / SUMMARY_FILE).write_text(json.dumps(summary.to_json(), indent=1) + "\n")
        return summary

    def _cannot_start(self, failed: Sequence[BotProcess]) -> str:
        lines = [f"{'a bot' if len(failed) == 1 else 'bots'} could not start, so no match "
                 "was played:"]
        for bot in failed:
            lines.append(f"  {bot.spec.name} ({bot.spec.command!r}) {bot.status}: "
                         + "; ".join(bot.notes))
        lines.append(f"fix it and run again with --resume {self.out}, or pass --keep-going "
                     "to play its matches by the fallback")
        return "\n".join(lines)

    async def _play(self, venue: Venue, stop: asyncio.Event) -> None:
        """Play every unfinished match of the schedule on the one local venue."""
        pending = [m for m in self.schedule if m.key not in self.done]
        with self._progress_updates() as update:

            def finished(record: MatchRecord) -> None:
                key = record.tournament_key
                assert key is not None, "the venue tags every match with its schedule key"
                self.done[key] = record
                update()

            await venue.play(pending, stop, finished)

    async def _play_distributed(self, stop: asyncio.Event) -> None:
        """Play every unfinished match on workers; write each record as it comes back."""
        from .distributed import DistributedError, play_distributed

        pending = [m for m in self.schedule if m.key not in self.done]
        play_started = time.monotonic()
        try:
            with self._progress_updates() as update:

                def finished(record: MatchRecord) -> None:
                    key = record.tournament_key
                    if key is None or key in self.done:
                        return
                    self.done[key] = record
                    update()

                await play_distributed(self.config, pending, nodes=self.nodes,
                                       ray_address=self.ray_address, on_record=finished,
                                       on_bots=self._bots_report, logs_dir=self.logs_dir,
                                       chunk_size=self.chunk_size,
                                       working_dir=self.ray_working_dir, stop=stop,
                                       on_fault=self.faults.append,
                                       records_dir=self.records_dir, workers=self.workers)
        except DistributedError as exc:
            self.error = str(exc)
        finally:
            self.play_seconds = time.monotonic() - play_started
            self._apply_reports()

    def _bots_report(self, node: str, report: Mapping[str, tuple[str, Sequence[str]]]) -> None:
        """What a node said of each bot (status, notes); the worse status of a node stays."""
        known = self._node_reports.setdefault(node, {})
        for name, (status, notes) in report.items():
            old_status, old_notes = known.get(name, ("starting", []))
            if _STATUS_RANK.get(status, 5) >= _STATUS_RANK.get(old_status, 5):
                old_status = status
            known[name] = (old_status, old_notes + [n for n in notes if n not in old_notes])

    def _apply_reports(self) -> None:
        """Each bot's status over all nodes (one status, or each with its nodes), and its
        notes, each naming its node."""
        for name, bot in self.bots.items():
            by_status: dict[str, list[str]] = {}
            for node, report in self._node_reports.items():
                if name in report:
                    status, notes = report[name]
                    by_status.setdefault(status, []).append(node)
                    bot.notes.extend(f"on node {node}: {note}" for note in notes)
            if len(by_status) == 1:
                bot.status = next(iter(by_status))
            elif by_status:
                bot.status = "; ".join(f"{status} on {', '.join(nodes)}"
                                       for status, nodes in by_status.items())
            else:
                bot.status = "not started (nothing left to play)"

    @contextlib.contextmanager
    def _progress_updates(self) -> Iterator[Callable[[], None]]:
        """The progress bar (if shown) while the block runs; call the function it gives to
        redraw it after a match finished."""
        progress = self._progress()
        if progress is None:
            yield lambda: None
            return
        resumed = len(self.done)
        task_id = progress.add_task("matches", total=len(self.schedule),
                                    completed=len(self.done), leader="", rate="")

        def update() -> None:
            progress.update(task_id, completed=len(self.done), leader=self._leader(),
                            rate=self._rate(len(self.done) - resumed))

        with progress:
            yield update

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

    def _progress(self) -> Progress | None:
        return progress_bar(self.console) if self.show_progress else None

    def _rate(self, finished_here: int) -> str:
        minutes = (time.monotonic() - self.started) / 60
        return f"{finished_here / minutes:.0f} matches/min" if minutes > 0 else ""

    def summary(self) -> TournamentSummary:
        records = self.ordered_records()
        stats, share = compute_standings(self.ordered_outcomes(), list(self.bots))
        standings = tuple(
            Standing.of(s, self.bots[s.name].spec.command, self.bots[s.name].status,
                        self.bots[s.name].notes)
            for s in sorted(stats.values(), key=lambda s: -s.conservative))
        return TournamentSummary(
            config=self.config.to_json(), matches_total=len(self.schedule),
            matches_finished=len(records), interrupted=self.interrupted,
            elapsed_s=round(time.monotonic() - self.started, 2),
            play_s=round(self.play_seconds, 3), standings=standings,
            head_to_head={a: {b: (None if math.isnan(v) else round(v, 4))
                              for b, v in row.items() if b != a}
                          for a, row in share.items()},
            records=tuple(f"records/{r.match_id}.json" for r in records), error=self.error,
            faults=tuple(f.to_json() for f in self.faults))
