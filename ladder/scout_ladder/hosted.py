"""The ladder's hosted bots: which may be seated now, where their files are, and what their
runs left.

A hosted bot is a candidate for a table whenever its active version exists and it is neither
paused, retired, nor its owner suspended: no stream needed, the ladder starts it where its
match is played. It plays one match at a time: its ``data/`` folder goes to the match and
comes back with the run's report, and a second match at once would start from the folder the
first has not yet given back (and one of the two would overwrite the other's). It is busy from
the moment it is seated until its run is reported (or, for a report that never comes, until
`REPORT_TIMEOUT_S` after its match ended).

A run that fails (never connected, or its process ended mid-match) counts against the bot;
`FAILURES_TO_PAUSE` in a row pause it with the reason on its profile, until its owner submits a
version that passes. A run that played counts the streak down to zero.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from scout.v1 import nodes_pb2
from scout_arena.hosting import DataFolderError, RunReport, pack_data, unpack_data

log = logging.getLogger("scout_ladder.hosted")

FAILURES_TO_PAUSE = 3
REPORT_TIMEOUT_S = 60.0
DATA_LIMIT_BYTES = 16 * 2**20


class HostedRepository(Protocol):
    """What this module needs of the ladder's repository (the owners' tables)."""

    def upload_path(self, name: str, version: int) -> Path: ...

    def data_dir(self, name: str, *, as_owner: str | None = None) -> Path: ...

    def record_hosted_run(self, name: str, match_id: str, version: int, outcome_reason: str,
                          output_tail: str) -> object: ...

    def set_paused(self, name: str, reason: str | None) -> object: ...


class HostedVersion(Protocol):
    @property
    def version(self) -> int: ...

    @property
    def archive_sha256(self) -> str | None: ...

    @property
    def archive_size(self) -> int | None: ...


class BotRow(Protocol):
    """`repository.BotInfo` as far as hosting reads it."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def retired(self) -> bool: ...

    @property
    def kind(self) -> str: ...

    @property
    def paused_reason(self) -> str | None: ...

    @property
    def suspended_reason(self) -> str | None: ...


@dataclass(frozen=True)
class HostedEntry:
    name: str
    version: int
    code_sha256: str
    code_size: int


class HostedBots:
    """The hosted side of the roster, on the ladder's event loop."""

    def __init__(self, repo: HostedRepository, *, data_limit_bytes: int = DATA_LIMIT_BYTES,
                 failures_to_pause: int = FAILURES_TO_PAUSE) -> None:
        self.repo = repo
        self.data_limit_bytes = data_limit_bytes
        self.failures_to_pause = failures_to_pause
        self.entries: dict[str, HostedEntry] = {}
        """Hosted bots that may be seated (active version, not paused, owner not suspended)."""
        self.busy: dict[str, str] = {}
        """Hosted bot -> the match it is seated in, until its run is reported."""
        self.playing: dict[str, int] = {}
        """Hosted bot -> the version it was seated with (its run is that version's)."""
        self.streak: dict[str, int] = {}
        self.paused: dict[str, str] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}

    # ----- who may play ---------------------------------------------------------------------

    def refresh(self, bots: Sequence[BotRow], versions: dict[str, HostedVersion]) -> None:
        """The hosted bots as stored now; ``versions``: each one's active version."""
        entries = {}
        for bot in bots:
            if bot.kind != "hosted" or bot.retired or bot.paused_reason or \
                    bot.suspended_reason or bot.version < 1:
                if bot.kind == "hosted" and bot.paused_reason:
                    self.paused[bot.name] = bot.paused_reason
                continue
            self.paused.pop(bot.name, None)
            version = versions.get(bot.name)
            if version is None or not version.archive_sha256:
                continue
            entries[bot.name] = HostedEntry(bot.name, version.version, version.archive_sha256,
                                            version.archive_size or 0)
        self.entries = entries

    def is_hosted(self, name: str) -> bool:
        return name in self.entries or name in self.busy

    def idle(self) -> list[str]:
        """Hosted bots that can be seated now."""
        return [name for name in self.entries if name not in self.busy]

    def seat(self, match_id: str, names: Sequence[str]) -> list[str]:
        """Mark the hosted bots among ``names`` busy with ``match_id``; returns them."""
        hosted = [n for n in names if n in self.entries]
        for name in hosted:
            self.busy[name] = match_id
            self.playing[name] = self.entries[name].version
        return hosted

    def unseat(self, match_id: str, names: Sequence[str]) -> None:
        """The match never began (refused, voided before it started): free its hosted bots."""
        for name in names:
            if self.busy.get(name) == match_id:
                del self.busy[name]

    def match_over(self, match_id: str, names: Sequence[str]) -> None:
        """The match ended: its hosted bots are freed by their reports, or after a while."""
        waiting = [n for n in names if self.busy.get(n) == match_id]
        if not waiting:
            return
        handle = asyncio.get_running_loop().call_later(REPORT_TIMEOUT_S, self._give_up,
                                                        match_id, waiting)
        self._timers[match_id] = handle

    def _give_up(self, match_id: str, names: Sequence[str]) -> None:
        self._timers.pop(match_id, None)
        for name in names:
            if self.busy.get(name) == match_id:
                log.warning("no report of hosted bot %s's run in match %s: freeing it", name,
                            match_id)
                del self.busy[name]

    # ----- files --------------------------------------------------------------------------

    def seat_message(self, name: str) -> nodes_pb2.HostedSeat:
        entry = self.entries[name]
        return nodes_pb2.HostedSeat(code_sha256=entry.code_sha256, code_size=entry.code_size,
                                    version=entry.version, data_size=self._data_size(name))

    def _data_size(self, name: str) -> int:
        folder = self.repo.data_dir(name)
        try:
            return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) + 1 \
                if any(folder.iterdir()) else 0
        except OSError:
            return 0

    def code(self, name: str) -> bytes:
        """The archive of the bot's active version (in a thread: it reads a file)."""
        entry = self.entries[name]
        return self.repo.upload_path(name, entry.version).read_bytes()

    def code_path(self, name: str) -> Path:
        entry = self.entries[name]
        return self.repo.upload_path(name, entry.version)

    def data(self, name: str) -> bytes:
        """The bot's data folder now, tar.gz (b"" when empty; in a thread)."""
        folder = self.repo.data_dir(name)
        if not folder.is_dir():
            return b""
        try:
            return pack_data(folder, self.data_limit_bytes)
        except DataFolderError as exc:
            log.warning("the data folder of %s is not sent: %s", name, exc)
            return b""

    # ----- reports ------------------------------------------------------------------------

    async def run_ended(self, report: RunReport, version: int | None = None) -> str:
        """Store what a run left (output for the owner, the data folder), count its failure,
        pause the bot after `failures_to_pause` in a row, and free it. Returns a note."""
        name = report.bot_name
        if self.busy.get(name) not in (report.match_id, None):
            return f"{name} is seated in another match now: report ignored"
        number = version or self.playing.get(name, 0)
        reason = report.why or report.outcome.reason
        try:
            await asyncio.to_thread(self.repo.record_hosted_run, name, report.match_id, number,
                                    reason, report.outcome.output_tail)
            if report.data is not None:
                await asyncio.to_thread(self._keep_data, name, report.data)
        finally:
            if self.busy.get(name) == report.match_id:
                del self.busy[name]
        if not report.failed:
            self.streak.pop(name, None)
            return "stored"
        streak = self.streak[name] = self.streak.get(name, 0) + 1
        if streak >= self.failures_to_pause:
            why = (f"its last {streak} hosted runs failed; the last: {report.why}. Submit a "
                   "new version to play again")
            await asyncio.to_thread(self.repo.set_paused, name, why)
            self.entries.pop(name, None)
            self.paused[name] = why
            self.streak.pop(name, None)
            log.warning("hosted bot %s paused: %s", name, why)
        return "stored"

    def _keep_data(self, name: str, data: bytes) -> None:
        """Replace the bot's data folder with the run's (whole, or not at all)."""
        folder = self.repo.data_dir(name)
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            unpack_data(data, staging / "data", self.data_limit_bytes)
            old = folder.with_name(f".{folder.name}-old-{time.monotonic_ns()}")
            if folder.exists():
                folder.rename(old)
            (staging / "data").rename(folder)
            shutil.rmtree(old, ignore_errors=True)
        except DataFolderError as exc:
            log.warning("the data folder hosted bot %s gave back is not kept: %s", name, exc)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
