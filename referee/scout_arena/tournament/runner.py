"""Running a tournament: one in-process referee, every bot a subprocess, matches started as
seats free up, records kept on disk so that an interrupted run can be resumed.

`Venue` is one referee and its bot programs on one machine; `Venue.play` plays a given list of
scheduled matches with them. The local run is one venue playing the whole schedule; a
distributed run (`distributed.py`) has many, each playing chunks of it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..record import MatchOutcome, MatchRecord, RecordError, dump_record, load_record
from ..server import NO_PASS_BUDGET_MS, RefereeFacade, TimeControl
from .config import (
    CONFIG_FILE,
    DISQUALIFY_AFTER,
    LEADER_REFRESH_S,
    SUMMARY_FILE,
    BotSpec,
    ScheduledMatch,
    TournamentConfig,
    TournamentDirError,
    schedule,
)
from .report import progress_bar
from .standings import compute_standings
from .summary import Standing, TournamentSummary

ABORT_WAIT_S = 30.0
"""How long a stopped tournament waits for its aborted matches to write their records."""


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


def new_bots(config: TournamentConfig) -> dict[str, BotProcess]:
    """A fresh, not yet started process entry (with a new token) for every bot."""
    return {b.name: BotProcess(b, secrets.token_urlsafe(16)) for b in config.bots}


def _parent_death_signal() -> Callable[[], None] | None:
    """A pre-exec function making the child die with SIGKILL when its parent dies (Linux
    prctl PR_SET_PDEATHSIG); None where that is not available. libc is looked up here, in the
    parent: the child only calls it."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def set_signal() -> None:
        prctl(1, signal.SIGKILL)

    return set_signal


class Venue:
    """One referee on 127.0.0.1 of this machine and every bot program beside it, playing any
    number of lists of scheduled matches; whatever the bots do, every match ends.

    ``bots`` are the process entries to start (their status and notes say what happened).
    ``records_dir``: where the referee writes each record as it ends (None: in memory only).
    ``die_with_parent``: bots are killed when this process dies (a worker that is
    killed must not leave bots reconnecting forever)."""

    def __init__(self, config: TournamentConfig, bots: Mapping[str, BotProcess],
                 logs_dir: Path, records_dir: Path | None, *,
                 die_with_parent: bool = False) -> None:
        self.config = config
        self.bots = bots
        self.logs_dir = logs_dir
        self._preexec = _parent_death_signal() if die_with_parent else None
        self.referee = RefereeFacade({b.spec.name: b.token for b in bots.values()},
                                     host="127.0.0.1", port=0, records_dir=records_dir,
                                     time_control=TimeControl(config.decision_ms,
                                                              config.time_bank_ms),
                                     reconnect_grace_s=config.reconnect_grace_s,
                                     pass_budget_ms=NO_PASS_BUDGET_MS)
        self._ended: list[MatchRecord] = []
        self._woken = asyncio.Event()
        self.referee.on_match_finished(self._match_ended)

    def _match_ended(self, record: MatchRecord) -> None:
        self._ended.append(record)
        self._woken.set()

    async def start(self) -> None:
        """Start the referee (bots are started by `connect`)."""
        await self.referee.start()

    async def connect(self, stop: asyncio.Event) -> None:
        """Start every bot program and wait until each is connected, has failed, or the
        connect timeout has passed (or ``stop`` is set)."""
        await self._launch_bots(self.referee.address)
        await self._wait_connected(stop)

    async def close(self) -> None:
        """Stop the referee (matches still running are aborted, their records written and
        reported), then the bots."""
        referee = self.referee
        await referee.stop(finished=True)
        await self._stop_bots()

    async def _launch_bots(self, address: str) -> None:
        for bot in self.bots.values():
            env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": bot.token,
                   "SCOUT_BOT_NAME": bot.spec.name,
                   "SCOUT_CONCURRENCY": str(self.config.concurrency)}
            log = (self.logs_dir / f"{bot.spec.name}.stderr.log").open("ab")
            try:
                bot.process = await asyncio.create_subprocess_exec(
                    *bot.spec.argv(), env=env, stdin=asyncio.subprocess.DEVNULL,
                    stdout=log, stderr=log, start_new_session=True,
                    preexec_fn=self._preexec)
            except OSError as exc:
                bot.status = "failed to start"
                bot.notes.append(f"could not start {bot.spec.command!r}: {exc}")
            finally:
                log.close()

    async def _wait_connected(self, stop: asyncio.Event) -> None:
        deadline = time.monotonic() + self.config.connect_timeout_s
        while time.monotonic() < deadline and not stop.is_set():
            self._poll_processes()
            connected = self.referee.connected_bots()
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

    async def play(self, items: Sequence[ScheduledMatch], stop: asyncio.Event,
                   on_record: Callable[[MatchRecord], None] | None = None
                   ) -> list[MatchRecord]:
        """Play ``items``, starting matches as seats free up, until all have ended or ``stop``
        is set (matches still running then are aborted, and any that finished meanwhile is
        counted). Returns the finished records, each also given to ``on_record`` as it ends
        (aborted ones are not)."""
        pending = list(items)
        running: dict[str, ScheduledMatch] = {}
        finished: list[MatchRecord] = []

        def take_ended() -> None:
            self._woken.clear()
            records, self._ended[:] = self._ended[:], []
            for record in records:
                scheduled = running.pop(record.match_id or "", None)
                if scheduled is not None and self._finish(record, scheduled):
                    finished.append(record)
                    if on_record is not None:
                        on_record(record)

        while (pending or running) and not stop.is_set():
            while pending and len(running) < self.config.concurrency:
                started = self._start_next(pending)
                if started is None:
                    break
                match_id, item = started
                running[match_id] = item
            if not running:
                await asyncio.sleep(0.05)
                continue
            if not self._ended:
                waits = {asyncio.ensure_future(self._woken.wait()),
                         asyncio.ensure_future(stop.wait())}
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for wait in waits:
                        wait.cancel()
            take_ended()
        if running:
            await self._abort(running, take_ended)
        return finished

    async def _abort(self, running: dict[str, ScheduledMatch],
                     take_ended: Callable[[], None]) -> None:
        """Abort the matches still running and wait (up to ABORT_WAIT_S) until each has
        ended: one that was writing its finished record as the stop came ends finished, and
        is counted with the others; the aborted ones write their unfinished records."""
        for match_id in list(running):
            self.referee.cancel_match(match_id, "the tournament was stopped")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ABORT_WAIT_S
        while running and (remaining := deadline - loop.time()) > 0:
            if not self._ended:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), remaining)
            take_ended()

    def _start_next(self, pending: list[ScheduledMatch]) -> tuple[str, ScheduledMatch] | None:
        connected = self.referee.connected_bots()
        absent = self._absent(connected)
        for i, item in enumerate(pending):
            present = [n for n in item.seats if n not in absent]
            if all(connected.get(n, 0) > 0 for n in present):
                pending.pop(i)
                match_id = self.referee.create_match(list(item.seats), item.seed,
                                                     absent=absent, absent_ok=True,
                                                     meta={"tournament_key": item.key})
                return match_id, item
        return None

    def _finish(self, record: MatchRecord, item: ScheduledMatch) -> bool:
        """Count the forfeits of an ended match; whether it finished (with a result)."""
        if record.status != "finished":
            return False
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
        return True

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


#: Which of two statuses of one bot on one node a distributed run reports (the worse one).
_STATUS_RANK = {"starting": 0, "connected": 1, "crashed": 2, "never connected": 3,
                "failed to start": 4}


class Tournament:
    """Runs a schedule; keeps going whatever the bots do.

    By default on one node, this machine's. ``nodes``: on that many local worker processes
    instead; ``ray_address``: on the Ray cluster there ("auto": the one ``RAY_ADDRESS`` or
    ``ray start`` on this machine names); see `distributed.play_distributed` for these and
    ``chunk_size`` and ``ray_working_dir``. Records, summary and standings are the same."""

    def __init__(self, config: TournamentConfig, out_dir: Path, *, console: Any = None,
                 show_progress: bool = True, nodes: int | None = None,
                 ray_address: str | None = None, chunk_size: int | None = None,
                 ray_working_dir: Path | None = None) -> None:
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
        self.bots = new_bots(config)
        self.schedule = schedule(config)
        self.done: dict[str, MatchRecord] = {}
        self.interrupted = False
        self.error: str | None = None
        self._node_reports: dict[str, dict[str, tuple[str, list[str]]]] = {}
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

    async def run(self) -> TournamentSummary:
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

    async def _play(self, venue: Venue, stop: asyncio.Event) -> None:
        """Play every unfinished match of the schedule on the one local venue."""
        pending = [m for m in self.schedule if m.key not in self.done]
        with self._progress_updates() as update:

            def finished(record: MatchRecord) -> None:
                self.done[record.meta_value("tournament_key")] = record
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
                    key = record.meta_value("tournament_key")
                    if key in self.done:
                        return
                    dump_record(record, self.records_dir / f"{record.match_id}.json")
                    self.done[key] = record
                    update()

                await play_distributed(self.config, pending, nodes=self.nodes,
                                       ray_address=self.ray_address, on_record=finished,
                                       on_bots=self._bots_report, logs_dir=self.logs_dir,
                                       chunk_size=self.chunk_size,
                                       working_dir=self.ray_working_dir, stop=stop)
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

    def _progress(self) -> Any:
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
            records=tuple(f"records/{r.match_id}.json" for r in records), error=self.error)
