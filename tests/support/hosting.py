"""Shared pieces of the hosted-bot tests: the test bots' folders, a referee with a `Host` on
a free loopback port, and remote bundled bots as processes."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import os
import secrets
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec

import pytest
from scout_arena.hosting import CodeCache, Host, HostedBot, RunReport, sha256_hex
from scout_arena.sandbox import Sandbox, pack_folder
from scout_arena.server import Referee, RefereeServer
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.match import MatchRunner
from scout_rules.protocol import TimeControl

P = ParamSpec("P")
HOSTED_BOTS = Path(__file__).resolve().parent.parent / "bots" / "hosted"


def bot_folder(kind: str, into: Path, probe: str = "") -> Path:
    """A copy of a test bot's folder (tests/bots/hosted/KIND), with probe.txt if given."""
    folder = into / kind
    shutil.copytree(HOSTED_BOTS / kind, folder)
    if probe:
        (folder / "probe.txt").write_text(probe)
    return folder


def hosted(name: str, kind: str, tmp: Path, probe: str = "", data: bytes = b"") -> HostedBot:
    archive = pack_folder(bot_folder(kind, tmp / f"src-{name}", probe))
    code_dir, manifest = CodeCache(tmp / "cache").put(sha256_hex(archive), archive)
    return HostedBot(name, code_dir, manifest, data)


@dataclass
class HostedReferee:
    referee: Referee
    server: RefereeServer
    host: Host
    reports: list[RunReport] = field(default_factory=list)
    ended: dict[str, asyncio.Future[MatchRunner]] = field(default_factory=dict)
    reported: dict[tuple[str, str], asyncio.Future[RunReport]] = field(default_factory=dict)

    def expect(self, match_id: str, *bots: str) -> None:
        loop = asyncio.get_running_loop()
        self.ended[match_id] = loop.create_future()
        for bot in bots:
            self.reported[(match_id, bot)] = loop.create_future()

    async def finished(self, match_id: str, timeout: float = 60) -> MatchRunner:
        return await asyncio.wait_for(self.ended[match_id], timeout)

    async def report(self, match_id: str, bot: str, timeout: float = 60) -> RunReport:
        return await asyncio.wait_for(self.reported[(match_id, bot)], timeout)

    async def start_hosted(self, match_id: str, name: str, kind: str, tmp: Path, seed: int,
                           time_control: TimeControl, join_s: float, against: str = "remote",
                           probe: str = "") -> None:
        """Seat the hosted test bot ``kind`` as ``name`` against ``against`` (seat 1), expect
        the match and the bot's report, and start the bot."""
        self.expect(match_id, name)
        self.referee.host_match(match_id, [(name, secrets.token_urlsafe(16)),
                                           (against, secrets.token_urlsafe(16))],
                                seed, time_control, join_s)
        await self.host.start(match_id, [hosted(name, kind, tmp, probe)])


@contextlib.asynccontextmanager
async def hosted_referee(tmp: Path, tokens: dict[str, str] | None = None
                         ) -> AsyncIterator[HostedReferee]:
    referee = Referee(tokens or {}, wire=ProtobufWire(), reconnect_grace_s=30.0)
    server = RefereeServer(referee)
    holder: list[HostedReferee] = []

    async def on_report(report: RunReport) -> None:
        hr = holder[0]
        hr.reports.append(report)
        future = hr.reported.get((report.match_id, report.bot_name))
        if future is not None and not future.done():
            future.set_result(report)

    host = Host(referee, Sandbox(), tmp / "host", on_report=on_report)
    hr = HostedReferee(referee, server, host)
    holder.append(hr)

    def finished(match: MatchRunner) -> None:
        future = hr.ended.get(match.match_id)
        if future is not None and not future.done():
            future.set_result(match)

    referee.on_match_finished.append(finished)
    await server.start()
    try:
        yield hr
    finally:
        await host.close()
        await server.stop()


async def start_remote(address: str, token: str, kind: str = "greedy"
                       ) -> asyncio.subprocess.Process:
    env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token,
           "SCOUT_CONCURRENCY": "4"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scout_client", "run", kind, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)


async def stop_processes(*processes: asyncio.subprocess.Process) -> None:
    for process in processes:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
    for process in processes:
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            process.kill()
            await process.wait()


#: Below pytest-timeout's 300 s, so that a hung test says where every task of it waited.
HUNG_AFTER_S = 240.0


def _every_task_stack() -> str:
    """Each task's chain of awaits, outermost first (``Task.print_stack`` shows only the top)."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        out.write(f"--- {task.get_name()}\n")
        link: object = task.get_coro()
        while link is not None:
            frame = getattr(link, "cr_frame", None) or getattr(link, "gi_frame", None)
            if frame is not None:
                out.write(f"  {frame.f_code.co_filename}:{frame.f_lineno} "
                          f"in {frame.f_code.co_name}\n")
            link = getattr(link, "cr_await", None) or getattr(link, "gi_yieldfrom", None)
    return out.getvalue()


def run_async(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """A test written as a coroutine, run on a fresh event loop; after `HUNG_AFTER_S` it fails
    with the stack of every task still waiting."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        stacks: list[str] = []

        async def bounded() -> None:
            main = asyncio.current_task()
            assert main is not None

            def hung() -> None:
                stacks.append(_every_task_stack())
                print(f"hung; every task:\n{stacks[0]}", file=sys.stderr)  # if teardown hangs too
                main.cancel()

            timer = asyncio.get_running_loop().call_later(HUNG_AFTER_S, hung)
            try:
                await test(*args, **kwargs)
            finally:
                timer.cancel()

        try:
            asyncio.run(bounded())
        except asyncio.CancelledError:
            if not stacks:
                raise
            pytest.fail(f"hung for {HUNG_AFTER_S:.0f} s; every task then:\n{stacks[0]}")

    return run


@contextlib.asynccontextmanager
async def hosted_referee_and_remote(tmp: Path) -> AsyncIterator[HostedReferee]:
    """`hosted_referee` with one remote bundled bot connected ("remote", token
    "remote-token"), stopped on the way out."""
    async with hosted_referee(tmp, {"remote": "remote-token"}) as hr:
        remote = await start_remote(hr.server.address, "remote-token")
        try:
            yield hr
        finally:
            await stop_processes(remote)
