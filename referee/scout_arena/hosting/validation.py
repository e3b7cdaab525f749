"""A new version's check before it plays rated: a few unrated matches in the sandbox against
bundled bots, on a referee of its own.

The candidate passes when, in every match, it starts, connects, and plays to the end without
forfeiting (three strikes forfeit, as do a crash or a stream left for good); otherwise it is
rejected with the first failure and its output. The bundled opponents (``greedy`` and
``random``, from the SDK) are trusted code run as ordinary processes with tokens on the
validation referee's loopback port; they play every match of the check, so each check costs
their start once (about a second).

Nothing here is stored: the ladder records the verdict (the owners' repository).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scout_rules.protocol import TimeControl

from ..server.convert import ProtobufWire
from ..server.lifecycle import RefereeServer
from ..server.match import MatchRunner
from ..server.referee import Referee
from .files import CodeCache, DataFolderError, sha256_hex
from .host import Host, HostedBot, Launcher, RunReport

log = logging.getLogger("scout_arena.hosting")

OPPONENTS = ("greedy", "random")
DEFAULT_MATCHES = 2
MATCH_TIMEOUT_S = 300.0
REPORT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str
    """Why it failed (empty when it passed)."""
    output: str
    """The candidate's output in its check's matches (the last part of each run's)."""


@dataclass(frozen=True)
class ValidationConfig:
    matches: int = DEFAULT_MATCHES
    time_control: TimeControl = field(default_factory=TimeControl)
    join_timeout_s: float = 20.0
    """How long a match of the check waits for the candidate to connect."""


class Validator:
    """Checks uploaded versions, one at a time (`check`)."""

    def __init__(self, launcher: Launcher, workdir: Path,
                 config: ValidationConfig | None = None) -> None:
        self.launcher = launcher
        self.workdir = workdir
        self.config = config or ValidationConfig()
        self._lock = asyncio.Lock()

    async def check(self, name: str, archive: bytes) -> Verdict:
        """Unpack ``archive`` (hostile: `CodeCache` refuses what `unpack_upload` refuses) and
        play the check's matches with it seated as ``name``."""
        async with self._lock:
            with tempfile.TemporaryDirectory(prefix="check-", dir=self._root()) as temp:
                folder = Path(temp)
                try:
                    code_dir, manifest = await asyncio.to_thread(
                        CodeCache(folder / "code").put, sha256_hex(archive), archive)
                except (DataFolderError, ValueError, OSError) as exc:
                    return Verdict(False, f"the upload cannot be unpacked: {exc}", "")
                return await self._play(HostedBot(name, code_dir, manifest), folder)

    def _root(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return self.workdir

    async def _play(self, bot: HostedBot, folder: Path) -> Verdict:
        tokens = {f"check-{kind}": secrets.token_urlsafe(16) for kind in OPPONENTS}
        referee = Referee(tokens, wire=ProtobufWire(),
                          default_time_control=self.config.time_control,
                          reconnect_grace_s=2.0)
        server = RefereeServer(referee, host="127.0.0.1", port=0)
        reports: dict[str, asyncio.Future[RunReport]] = {}
        ended: dict[str, asyncio.Future[MatchRunner]] = {}

        async def on_report(report: RunReport) -> None:
            future = reports.get(report.match_id)
            if future is not None and not future.done():
                future.set_result(report)

        def finished(match: MatchRunner) -> None:
            future = ended.get(match.match_id)
            if future is not None and not future.done():
                future.set_result(match)

        referee.on_match_finished.append(finished)
        host = Host(referee, self.launcher, folder / "runs", on_report=on_report)
        await server.start()
        opponents: list[asyncio.subprocess.Process] = []
        outputs: list[str] = []
        try:
            opponents = await _start_opponents(server.address, tokens)
            for index in range(self.config.matches):
                match_id = f"check-{index + 1}-{secrets.token_hex(4)}"
                ended[match_id] = asyncio.get_running_loop().create_future()
                reports[match_id] = asyncio.get_running_loop().create_future()
                seats = [(bot.name, secrets.token_urlsafe(16)), *(
                    (name, secrets.token_urlsafe(16)) for name in tokens)]
                referee.host_match(match_id, seats, secrets.randbits(64),
                                   self.config.time_control, self.config.join_timeout_s)
                await host.start(match_id, [bot])
                match = await asyncio.wait_for(ended[match_id], MATCH_TIMEOUT_S)
                report = None
                with contextlib.suppress(TimeoutError):
                    report = await asyncio.wait_for(reports[match_id], REPORT_TIMEOUT_S)
                if report is not None:
                    outputs.append(f"--- match {index + 1} of the check ({report.outcome.reason})"
                                   f" ---\n{report.outcome.output_tail}")
                why = _failure(match, bot.name, report)
                if why:
                    return Verdict(False, f"match {index + 1} of the check: {why}",
                                   "\n".join(outputs))
            return Verdict(True, "", "\n".join(outputs))
        finally:
            await host.close()
            await server.stop()
            await _stop(opponents)


def _failure(match: MatchRunner, name: str, report: RunReport | None) -> str:
    if report is not None and report.failed:
        return report.why
    record = match.record
    if record is None or record.status != "finished" or record.outcome is None:
        return "the match did not finish"
    seat = list(record.players).index(name)
    stats = record.outcome.seats[seat]
    if seat in record.outcome.forfeits:
        return (f"it forfeited its seat ({stats.timeouts} timeouts, {stats.illegal_actions} "
                "illegal actions)")
    if report is None:
        return "its run was not reported"
    return ""


async def _start_opponents(address: str, tokens: dict[str, str]
                           ) -> list[asyncio.subprocess.Process]:
    processes = []
    for name, token in tokens.items():
        kind = name.removeprefix("check-")
        env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token,
               "SCOUT_BOT_NAME": name, "SCOUT_CONCURRENCY": "4"}
        processes.append(await asyncio.create_subprocess_exec(
            sys.executable, "-m", "scout_client", "run", kind, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL))
    return processes


async def _stop(processes: Sequence[asyncio.subprocess.Process]) -> None:
    for process in processes:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
    for process in processes:
        try:
            await asyncio.wait_for(process.wait(), 5.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
