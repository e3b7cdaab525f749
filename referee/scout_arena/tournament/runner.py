"""Running a tournament: one in-process referee, every bot a subprocess, matches started as
seats free up, records kept on disk so that an interrupted run can be resumed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import signal
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..record import JSON, MatchOutcome, MatchRecord, RecordError, load_record
from ..server import RefereeFacade, TimeControl
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
        return progress_bar(self.console) if self.show_progress else None

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
