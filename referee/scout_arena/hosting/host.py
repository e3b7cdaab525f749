"""Hosted bots of a referee's matches: each seat's bot started in the sandbox, supervised, and
stopped when its match ends, with how its run went and its data folder handed back.

A match with hosted seats is held like a node's match (`Referee.host_match`): it starts once
every seat's bot has a stream, or at the join deadline with the missing ones absent. A hosted
bot connects through its own socket (`socket.BotSocket`). What a run can do wrong costs only
its own seat, as a remote bot's would: a process that ends before connecting makes its seat
absent at once (the match starts without waiting out the deadline when nobody else is awaited),
one that ends mid-match forfeits its seat at once (a process that is gone will not reconnect,
so the reconnect grace is not waited out).

One match at a time per hosted bot (the ladder's rule): its ``data/`` folder is the bot's, so
two runs at once would each write over the other's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..sandbox import Manifest, RunOutcome
from ..server.connections import BotEntry
from ..server.match import MatchRunner
from ..server.referee import Referee
from .files import DEFAULT_DATA_LIMIT_BYTES, DataFolderError, pack_data, unpack_data
from .socket import BotSocket

log = logging.getLogger("scout_arena.hosting")

OUTPUT_TAIL_CHARS = 32 * 1024
"""The most of a run's output kept with its report (its last part)."""


class Process(Protocol):
    """A bot's process in the sandbox (`scout_arena.sandbox.HostedProcess`)."""

    async def wait(self) -> RunOutcome: ...

    async def stop(self, grace_s: float = 2.0) -> RunOutcome: ...

    def output_tail(self) -> str: ...


class Launcher(Protocol):
    """Starts a bot in the sandbox (`scout_arena.sandbox.Sandbox`)."""

    async def start(self, *, name: str, code_dir: Path, data_dir: Path, socket_path: Path,
                    manifest: Manifest, env: Mapping[str, str] = ...) -> Process: ...


@dataclass(frozen=True)
class HostedBot:
    """A hosted seat of a match: the bot, its code, and its data folder as it is now."""

    name: str
    code_dir: Path
    manifest: Manifest
    data: bytes = b""
    """Its data folder, tar.gz (`files.pack_data`); b"": empty."""


@dataclass(frozen=True)
class RunReport:
    """How a hosted run went, once its process is stopped."""

    match_id: str
    bot_name: str
    connected: bool
    """The bot opened its Play stream."""
    ended_early: bool
    """Its process ended on its own before the match did (a crash or an exit)."""
    outcome: RunOutcome
    data: bytes | None
    """Its data folder afterwards (tar.gz); None when it is not kept (`data_problem`)."""
    data_problem: str = ""
    interrupted: bool = False
    """The host stopped the run (it was shutting down) before the bot connected or ended on
    its own: the run says nothing of the bot."""

    @property
    def failed(self) -> bool:
        """The run cost its seat through the bot's doing: it never connected, or its process
        ended mid-match."""
        return not self.interrupted and (not self.connected or self.ended_early)

    @property
    def why(self) -> str:
        """The failure in words (empty when the run did not fail)."""
        if not self.connected:
            return f"it never connected ({self.outcome.reason})"
        if self.ended_early:
            return f"its process ended during the match ({self.outcome.reason})"
        return ""


@dataclass(eq=False)
class _Run:
    match_id: str
    bot: HostedBot
    folder: Path
    socket: BotSocket
    process: Process | None = None
    early: RunOutcome | None = None
    """How the process ended, when it ended before the match."""
    watcher: asyncio.Task[None] | None = None
    ended: asyncio.Future[RunReport] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


class Host:
    """Runs the hosted seats of one referee's matches (`start`), until their match is over
    (the referee's `on_match_finished`, `on_hosting_failed`, or `release`); each report goes
    to ``on_report``."""

    def __init__(self, referee: Referee, launcher: Launcher, workdir: Path, *,
                 on_report: Callable[[RunReport], Awaitable[None]],
                 data_limit_bytes: int = DEFAULT_DATA_LIMIT_BYTES,
                 stop_grace_s: float = 2.0) -> None:
        self.referee = referee
        self.launcher = launcher
        self.workdir = workdir
        self.on_report = on_report
        self.data_limit_bytes = data_limit_bytes
        self.stop_grace_s = stop_grace_s
        self._runs: dict[str, list[_Run]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        # Unix socket paths are short (108 bytes): the sockets live in a short private folder.
        self._sockets = Path(tempfile.mkdtemp(prefix="scout-h-"))
        referee.on_match_finished.append(self._match_finished)
        referee.streams.on_connect.append(self._connected)
        referee.assigned.on_hosting_failed.append(lambda match_id, _why: self.release(match_id))

    def runs(self, match_id: str) -> int:
        return len(self._runs.get(match_id, ()))

    @property
    def running(self) -> int:
        """Hosted runs not yet stopped."""
        return sum(len(runs) for runs in self._runs.values())

    async def start(self, match_id: str, bots: Sequence[HostedBot]) -> None:
        """Start the hosted seats of a match the referee holds (`Referee.host_match`). A bot
        that cannot be started is reported failed and its seat plays absent."""
        runs = self._runs.setdefault(match_id, [])
        for bot in bots:
            key = secrets.token_hex(4)
            folder = self.workdir / "runs" / f"{match_id}-{key}"
            run = _Run(match_id, bot, folder,
                       BotSocket(self.referee, bot.name, self._sockets / key / "referee.sock"))
            runs.append(run)
            try:
                await self._launch(run)
            except Exception as exc:
                log.warning("hosted bot %s of match %s could not start: %s", bot.name,
                            match_id, exc)
                run.early = RunOutcome(None, None, f"the host could not start it: {exc}", "")
                self._gone(run)
                continue
            run.watcher = self._spawn(self._watch(run), f"watch {bot.name} in {match_id}")
        if match_id not in self.referee.assigned.pending and \
                self.referee.matches.running.get(match_id) is None:
            self.release(match_id)  # ended (or was dropped) while its bots were starting

    async def _launch(self, run: _Run) -> None:
        data_dir = run.folder / "data"
        run.folder.mkdir(parents=True)
        try:
            unpack_data(run.bot.data, data_dir, self.data_limit_bytes)
        except DataFolderError as exc:
            log.warning("hosted bot %s starts with an empty data folder: %s", run.bot.name, exc)
            shutil.rmtree(data_dir, ignore_errors=True)
            data_dir.mkdir()
        await run.socket.start()
        run.process = await self.launcher.start(
            name=run.bot.name, code_dir=run.bot.code_dir, data_dir=data_dir,
            socket_path=run.socket.path, manifest=run.bot.manifest,
            env={"SCOUT_MATCH_ID": run.match_id})

    async def _watch(self, run: _Run) -> None:
        assert run.process is not None
        outcome = await run.process.wait()
        if run.ended.done() or self._stopping(run):
            return
        run.early = outcome
        log.info("hosted bot %s of match %s ended early: %s", run.bot.name, run.match_id,
                 outcome.reason)
        self._gone(run)

    def _stopping(self, run: _Run) -> bool:
        return run.match_id not in self._runs or run not in self._runs[run.match_id]

    def _gone(self, run: _Run) -> None:
        """The bot's process is gone while its match is held or played: its seat is lost."""
        referee = self.referee
        if run.match_id in referee.assigned.pending:
            self._start_without_dead(run.match_id)
            return
        bot = referee.bots.get(run.bot.name)
        seat = bot.seats.get(run.match_id) if bot is not None else None
        if bot is not None and seat is not None:
            assert run.early is not None
            seat.match.forfeit(seat, f"its hosted process ended: {run.early.reason}")
            seat.absent = True
            del bot.seats[run.match_id]

    def _start_without_dead(self, match_id: str) -> None:
        """Start a held match now when the only seats it still awaits are hosted bots whose
        processes are gone (rather than at its join deadline)."""
        referee = self.referee
        pending = referee.assigned.pending.get(match_id)
        if pending is None:
            return
        dead = {r.bot.name for r in self._runs.get(match_id, ()) if r.early}
        awaited = [n for n in pending.names
                   if (b := referee.bots.get(n)) is None or b.connection is None]
        if awaited and all(name in dead for name in awaited):
            referee.assigned._start_pending(pending, True)

    def _connected(self, bot: BotEntry) -> None:
        for match_id, runs in list(self._runs.items()):
            if any(r.early for r in runs) and match_id in self.referee.assigned.pending:
                self._start_without_dead(match_id)

    def _match_finished(self, match: MatchRunner) -> None:
        self.release(match.match_id)

    def release(self, match_id: str) -> None:
        """The match is over (finished, aborted, cancelled or never started): stop its hosted
        bots and report each run."""
        for run in self._runs.pop(match_id, ()):
            self._spawn(self._end(run), f"end {run.bot.name} in {match_id}")

    async def _end(self, run: _Run) -> None:
        try:
            if run.process is not None:
                outcome = await run.process.stop(self.stop_grace_s)
            else:
                outcome = run.early or RunOutcome(None, None, "never started", "")
            if run.watcher is not None:
                run.watcher.cancel()
            await run.socket.stop()
            if run.early is not None:
                outcome = RunOutcome(run.early.exit_code, run.early.signal, run.early.reason,
                                     outcome.output_tail or run.early.output_tail)
            data: bytes | None = None
            problem = ""
            try:
                data = await asyncio.to_thread(pack_data, run.folder / "data",
                                               self.data_limit_bytes)
            except (DataFolderError, OSError) as exc:
                problem = f"the data folder is not kept: {exc}"
            tail = outcome.output_tail[-OUTPUT_TAIL_CHARS:]
            report = RunReport(run.match_id, run.bot.name, run.socket.connected,
                               run.early is not None, RunOutcome(
                                   outcome.exit_code, outcome.signal, outcome.reason, tail),
                               data, problem, interrupted=self._stopping_all() and run.early is None
                               and not run.socket.connected)
            run.ended.set_result(report)
        finally:
            await asyncio.to_thread(shutil.rmtree, run.folder, True)
            shutil.rmtree(run.socket.path.parent, ignore_errors=True)
        try:
            await self.on_report(report)
        except Exception:
            log.exception("the report of hosted bot %s in match %s was not taken",
                          run.bot.name, run.match_id)

    def _stopping_all(self) -> bool:
        """The host or its referee is shutting down: runs stopped now were cut short."""
        return self._closing or not self.referee.accepting

    def _spawn(self, coro: Awaitable[None], name: str) -> asyncio.Task[None]:
        async def run() -> None:
            await coro

        task = asyncio.get_running_loop().create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Stop every hosted bot (their matches are over or being aborted) and wait for their
        reports."""
        self._closing = True
        for match_id in list(self._runs):
            self.release(match_id)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        with contextlib.suppress(OSError):
            shutil.rmtree(self._sockets)
