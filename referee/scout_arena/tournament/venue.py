"""A tournament's venue: one referee on 127.0.0.1 of this machine and every bot program beside
it (`Venue`), playing any number of lists of scheduled matches. The local run is one venue
playing the whole schedule; a distributed run (`distributed.py`) has many, one per worker, each
playing chunks of it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scout_rules.protocol import TimeControl

from ..record import MatchRecord
from ..sandbox.lifeline import parent_death_preexec
from ..server import NO_PASS_BUDGET_MS, RefereeFacade
from .config import (
    DISQUALIFY_AFTER,
    BotSpec,
    ScheduledMatch,
    TournamentConfig,
    bot_seed,
)
from .config import match_id as scheduled_match_id

ABORT_WAIT_S = 30.0
"""How long a stopped tournament waits for its aborted matches to write their records."""
#: Lines of a failed bot's stderr quoted in its note, and how far back they are looked for.
STDERR_TAIL_LINES = 8
_STDERR_TAIL_BYTES = 8192


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
    log_path: Path | None = None

    def failure_note(self, what: str) -> str:
        """``what`` happened, with where the bot's stderr is and how it ends: a crash is
        diagnosed from there, and a bare exit status says nothing."""
        if self.log_path is None:
            return what
        tail = stderr_tail(self.log_path)
        note = f"{what}; its stderr is in {self.log_path}"
        if not tail:
            return note + " (empty)"
        return note + ", ending:\n" + "\n".join(f"    {line}" for line in tail)


def stderr_tail(path: Path, lines: int = STDERR_TAIL_LINES) -> list[str]:
    """The last non-blank lines of a log (read from its last few KiB only)."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - _STDERR_TAIL_BYTES))
            data = log.read()
    except OSError:
        return []
    text = [line.rstrip() for line in data.decode("utf-8", "replace").splitlines()]
    return [line for line in text if line.strip()][-lines:]


def new_bots(config: TournamentConfig) -> dict[str, BotProcess]:
    """A fresh, not yet started process entry (with a new token) for every bot."""
    return {b.name: BotProcess(b, secrets.token_urlsafe(16)) for b in config.bots}


@dataclass(eq=False)
class Feed:
    """The matches of a `Venue.play_feed`, handed over as they come (`Venue.feed`)."""

    items: list[ScheduledMatch] = field(default_factory=list)
    closed: bool = False
    on_low: Callable[[], None] | None = None
    """Told once, when fewer matches wait than may run at once, that more are welcome (again
    after each `Venue.feed`)."""
    asked: bool = False


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
        self._preexec = parent_death_preexec() if die_with_parent else None
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

    def not_playing(self) -> list[BotProcess]:
        """The bots that are not connected (after `connect`: those that could not start)."""
        self._poll_processes()
        return [b for b in self.bots.values() if b.status != "connected"]

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
            bot.log_path = self.logs_dir / f"{bot.spec.name}.stderr.log"
            log = bot.log_path.open("ab")
            try:
                bot.process = await asyncio.create_subprocess_exec(
                    *bot.spec.argv(bot_seed(self.config.seed, bot.spec.name)), env=env,
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True,
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
                b.notes.append(b.failure_note(
                    f"did not connect within {self.config.connect_timeout_s:g} s; its matches "
                    "are forfeited"))

    def _poll_processes(self) -> None:
        for b in self.bots.values():
            if b.process is not None and b.process.returncode is not None and \
                    b.exit_code is None:
                b.exit_code = b.process.returncode
                if b.status in ("starting", "connected"):
                    when = "before it connected" if b.status == "starting" else \
                        "during the tournament"
                    b.status = "crashed"
                    b.notes.append(b.failure_note(f"exited with status {b.exit_code} {when}"))

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
        return await self.play_feed(Feed(list(items), closed=True), stop, on_record)

    def feed(self, feed: Feed, items: Sequence[ScheduledMatch]) -> None:
        """More matches for a `play_feed` under way (or to come)."""
        feed.items.extend(items)
        feed.asked = False
        self._woken.set()

    def close_feed(self, feed: Feed) -> None:
        """No more matches: `play_feed` returns once those it has have ended."""
        feed.closed = True
        self._woken.set()

    async def play_feed(self, feed: Feed, stop: asyncio.Event,
                        on_record: Callable[[MatchRecord], None] | None = None,
                        on_ended: Callable[[ScheduledMatch], None] | None = None
                        ) -> list[MatchRecord]:
        """`play`, of matches that keep coming (`feed`) until the feed is closed: a worker
        given its next chunk before the last one ends keeps every seat busy across chunks.
        ``on_ended``: told of every match that ends (finished or not)."""
        pending = feed.items
        running: dict[str, ScheduledMatch] = {}
        finished: list[MatchRecord] = []

        def take_ended() -> None:
            self._woken.clear()
            records, self._ended[:] = self._ended[:], []
            for record in records:
                scheduled = running.pop(record.match_id or "", None)
                if scheduled is None:
                    continue
                if self._finish(record, scheduled):
                    finished.append(record)
                    if on_record is not None:
                        on_record(record)
                if on_ended is not None:
                    on_ended(scheduled)

        while (pending or running or not feed.closed) and not stop.is_set():
            while pending and len(running) < self.config.concurrency:
                started = self._start_next(pending)
                if started is None:
                    break
                match_id, item = started
                running[match_id] = item
            if (feed.on_low is not None and not feed.asked and not feed.closed
                    and len(pending) < self.config.concurrency):
                feed.asked = True
                feed.on_low()
            if not running and pending:
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
                match_id = self.referee.create_match(
                    list(item.seats), item.seed, absent=absent, absent_ok=True,
                    meta={"tournament_key": item.key},
                    match_id=scheduled_match_id(self.config.seed, item.key))
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
