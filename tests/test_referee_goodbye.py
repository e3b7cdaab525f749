"""The referee says Goodbye before it closes a bot's stream on purpose (PROTOCOL.md §10.1).

Real referees on 127.0.0.1 (in process through `RefereeFacade`, or `scout-arena referee
serve`), real SDK bot processes (`scout-arena bot run random`) and raw gRPC streams. What is
pinned: the Goodbye reaches the bot before its call ends, the call ends with OK from the
referee's side (not UNAVAILABLE "Cancelling all calls"), a bot told FINISHED exits 0 on its
own, and a bot told SHUTDOWN comes back to the referee that replaces the stopped one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from referee_support import (
    create_match,
    running_referee,
    start_referee,
    stop,
    wait_connected,
)
from scout.v1 import arena_pb2, arena_pb2_grpc, matches_pb2_grpc
from scout_arena.server import RefereeFacade
from scout_arena.server.calls import EOF
from scout_arena.server.events import Goodbye, GoodbyeReason
from scout_arena.tournament import BotSpec, Tournament, TournamentConfig
from scout_arena.tournament import runner as tournament_runner
from scout_arena.tournament import venue as tournament_venue
from scout_rules.protocol import TimeControl

pytestmark = pytest.mark.timeout(180)

SCOUT_ARENA = [sys.executable, "-m", "scout_arena.cli"]
LOCAL_POOL = [("grpc.use_local_subchannel_pool", 1)]
EXIT_BUDGET_S = 30.0
"""How long a bot may take to exit after its Goodbye (it takes well under a second)."""


def sdk_bot(address: str, token: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token}
    return subprocess.Popen([*SCOUT_ARENA, "bot", "run", "random"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log.open("w"))


@contextlib.contextmanager
def killed_at_end(process: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def wait_connected_in_process(referee: RefereeFacade, names: set[str],
                                    timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not names <= set(referee.connected_bots()):
        assert loop.time() < deadline, f"bots {names} did not connect"
        await asyncio.sleep(0.05)


async def exit_code(process: subprocess.Popen[bytes]) -> int:
    """The exit status of a process left to end on its own (no signal is sent)."""
    return await asyncio.to_thread(process.wait, EXIT_BUDGET_S)


@contextlib.asynccontextmanager
async def facade(tokens: dict[str, str], records: Path) -> AsyncIterator[RefereeFacade]:
    records.mkdir(parents=True, exist_ok=True)
    referee = RefereeFacade(tokens, records_dir=records, time_control=TimeControl(500, 2000),
                            reconnect_grace_s=2.0)
    await referee.start()
    try:
        yield referee
    finally:
        await referee.stop()


# ----- FINISHED: bots exit 0 on their own ------------------------------------------------------


def test_after_stop_finished_an_sdk_bot_exits_0_on_its_own(tmp_path: Path) -> None:
    async def main() -> None:
        async with facade({"a": "token-a", "b": "token-b"}, tmp_path / "records") as referee:
            ended: list[str | None] = []
            referee.on_match_finished(lambda record: ended.append(record.match_id))
            bot_a = sdk_bot(referee.address, "token-a", tmp_path / "a.log")
            bot_b = sdk_bot(referee.address, "token-b", tmp_path / "b.log")
            with killed_at_end(bot_a), killed_at_end(bot_b):
                await wait_connected_in_process(referee, {"a", "b"})
                match_id = referee.create_match(["a", "b"], seed=5)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 60
                while match_id not in ended:
                    assert loop.time() < deadline, "the match did not finish"
                    await asyncio.sleep(0.05)
                await referee.stop(finished=True, message="the test event is over")
                assert await exit_code(bot_a) == 0
                assert await exit_code(bot_b) == 0

    asyncio.run(main())
    for name in ("a", "b"):
        log = (tmp_path / f"{name}.log").read_text()
        assert "the referee has finished (FINISHED: the test event is over)" in log, log
        assert "connection lost" not in log and "reconnecting in" not in log, log


def test_a_tournament_ends_and_its_bots_exit_0_without_being_signalled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tournament's stop says Goodbye{FINISHED}; its SIGTERM of the bots is replaced by a
    plain wait here, so only the Goodbye can make them exit."""
    exits: dict[str, int | None] = {}

    async def wait_only(self: Any) -> None:
        for bot in self.bots.values():
            assert bot.process is not None
            try:
                await asyncio.wait_for(bot.process.wait(), EXIT_BUDGET_S)
            except TimeoutError:
                bot.process.kill()
                await bot.process.wait()
                exits[bot.spec.name] = None
                continue
            exits[bot.spec.name] = bot.process.returncode

    # The class that starts and stops the bot programs (the tournament's runner, or its node).
    owner = next(cls for cls in (getattr(tournament_venue, "Venue", None),
                                 tournament_runner.Tournament)
                 if cls is not None and hasattr(cls, "_stop_bots"))
    monkeypatch.setattr(owner, "_stop_bots", wait_only)
    config = TournamentConfig((BotSpec("r1", "random"), BotSpec("r2", "random")), players=2,
                              games=1, concurrency=2, seed=3)
    summary = asyncio.run(Tournament(config, tmp_path / "out").run())
    assert len(summary.records) == 2
    assert exits == {"r1": 0, "r2": 0}
    for name in ("r1", "r2"):
        log = (tmp_path / "out" / "logs" / f"{name}.stderr.log").read_text()
        assert "the referee has finished (FINISHED" in log, log


# ----- the stream ends with OK after the Goodbye ----------------------------------------------


class RawStream:
    """A Play stream that reads everything and never half-closes: only the referee ends it."""

    def __init__(self, address: str, token: str) -> None:
        self.channel = grpc.aio.insecure_channel(address, options=LOCAL_POOL)
        self.call = arena_pb2_grpc.ArenaStub(self.channel).Play(
            None, metadata=(("authorization", f"Bearer {token}"),))
        self.messages: list[arena_pb2.RefereeMessage] = []

    async def hello(self) -> arena_pb2.Welcome:
        await self.call.write(arena_pb2.BotMessage(hello=arena_pb2.Hello(
            bot_name="raw", protocol_version=1, max_concurrent_matches=1)))
        first = await self.call.read()
        assert isinstance(first, arena_pb2.RefereeMessage), first
        assert first.WhichOneof("body") == "welcome", first
        return first.welcome

    async def read_to_end(self) -> grpc.StatusCode:
        with contextlib.suppress(grpc.aio.AioRpcError):
            while True:
                message = await self.call.read()
                if message is EOF:
                    break
                assert isinstance(message, arena_pb2.RefereeMessage)
                self.messages.append(message)
        code: grpc.StatusCode = await self.call.code()
        return code

    async def close(self) -> None:
        self.call.cancel()
        await self.channel.close(None)


def test_the_goodbye_is_the_last_message_and_the_call_ends_ok(tmp_path: Path) -> None:
    async def main() -> tuple[list[arena_pb2.RefereeMessage], grpc.StatusCode, str]:
        referee = RefereeFacade({"raw": "token-raw"}, records_dir=tmp_path)
        await referee.start()
        stream = RawStream(referee.address, "token-raw")
        try:
            await stream.hello()
            reading = asyncio.ensure_future(stream.read_to_end())
            await referee.stop()
            code = await asyncio.wait_for(reading, 30)
            return stream.messages, code, await stream.call.details() or ""
        finally:
            await stream.close()

    messages, code, details = asyncio.run(main())
    assert [m.WhichOneof("body") for m in messages] == ["goodbye"]
    goodbye = messages[0].goodbye
    assert goodbye.reason == arena_pb2.GOODBYE_REASON_SHUTDOWN
    assert goodbye.reconnect is True and goodbye.retry_after_ms == 2000
    assert code == grpc.StatusCode.OK, (code, details)


def test_a_stream_opened_after_the_goodbye_gets_it_at_once(tmp_path: Path) -> None:
    async def main() -> tuple[list[arena_pb2.RefereeMessage], grpc.StatusCode]:
        referee = RefereeFacade({"raw": "token-raw"}, records_dir=tmp_path)
        await referee.start()
        try:
            # What stop() does between its match shutdown and grpc's: every stream from now
            # on is told the same Goodbye.
            await referee._referee.say_goodbye(
                Goodbye(GoodbyeReason.FINISHED, "over", reconnect=False), 1.0)
            stream = RawStream(referee.address, "token-raw")
            try:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await stream.call.write(arena_pb2.BotMessage(hello=arena_pb2.Hello(
                        protocol_version=1)))
                code = await asyncio.wait_for(stream.read_to_end(), 30)
                return stream.messages, code
            finally:
                await stream.close()
        finally:
            await referee.stop()

    messages, code = asyncio.run(main())
    assert [m.WhichOneof("body") for m in messages] == ["goodbye"]
    assert messages[0].goodbye.reason == arena_pb2.GOODBYE_REASON_FINISHED
    assert messages[0].goodbye.reconnect is False
    assert code == grpc.StatusCode.OK


# ----- SHUTDOWN: SIGTERM, then the bot comes back to the new referee --------------------------


def test_sigterm_says_shutdown_and_the_bot_reconnects_to_the_referee_started_after(
        tmp_path: Path) -> None:
    tokens = {"a": "token-a"}
    first = start_referee(tmp_path, tokens, "--goodbye-retry-ms", "300")
    port = first.address.rsplit(":", 1)[1]
    bot_log = tmp_path / "bot.log"
    bot = sdk_bot(first.address, "token-a", bot_log)
    with killed_at_end(bot):
        try:
            wait_connected(first, ["a"])
        finally:
            code = stop(first.process, timeout=30)
        assert code == 0, first.log()
        log = bot_log.read_text()
        assert "the referee is closing the stream (SHUTDOWN" in log, log
        assert "come back in 300 ms" in log, log
        assert bot.poll() is None, "told SHUTDOWN, the bot must wait to reconnect, not exit"
        second = start_referee(tmp_path, tokens, "--port", port)
        try:
            wait_connected(second, ["a"], timeout=60)
        finally:
            stop(second.process)
    log = bot_log.read_text()
    assert "reconnecting in" in log and "as the referee asked" in log, log
    assert len(re.findall(r"connected to the referee as 'a'", log)) >= 2, log


def test_sigterm_with_a_match_running_aborts_it_then_says_goodbye(tmp_path: Path) -> None:
    """`referee serve` with a match in progress (one seat never answers): SIGTERM aborts the
    match (its record is written) and both seats hear SHUTDOWN, the raw one's call ending
    with OK rather than cancelled."""
    tokens = {"a": "token-a", "silent": "token-silent"}
    bot_log = tmp_path / "bot.log"

    async def main(referee_address: str, referee: subprocess.Popen[str]
                   ) -> tuple[list[arena_pb2.RefereeMessage], grpc.StatusCode]:
        stream = RawStream(referee_address, "token-silent")
        try:
            await stream.hello()
            reading = asyncio.ensure_future(stream.read_to_end())
            channel = grpc.insecure_channel(referee_address)
            try:
                stub = matches_pb2_grpc.MatchesStub(channel)
                await asyncio.to_thread(create_match, stub, ["a", "silent"], 9, 600_000)
            finally:
                channel.close()
            while not stream.messages:  # the match has started: MatchStart came
                await asyncio.sleep(0.02)
            referee.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(reading, 30)
            return stream.messages, code
        finally:
            await stream.close()

    with running_referee(tmp_path, tokens) as referee:
        bot = sdk_bot(referee.address, "token-a", bot_log)
        with killed_at_end(bot):
            wait_connected(referee, ["a"])
            messages, code = asyncio.run(main(referee.address, referee.process))
            assert referee.process.wait(30) == 0, referee.log()
    kinds = [m.WhichOneof("body") for m in messages]
    assert kinds[0] == "match_start" and kinds[-2:] == ["match_ended", "goodbye"], kinds
    # The match ends for each seat, saying how and why, before the Goodbye (issue 28).
    ended = messages[-2].match_ended
    assert ended.status == arena_pb2.MATCH_END_STATUS_ABORTED
    assert ended.match_id == messages[0].match_start.match_id and not ended.record_id
    assert "shut down" in ended.reason and not ended.ranks, ended
    assert messages[-1].goodbye.reason == arena_pb2.GOODBYE_REASON_SHUTDOWN
    assert code == grpc.StatusCode.OK
    log = bot_log.read_text()
    assert f"match {ended.match_id} aborted: the referee shut down" in log, log
    assert "the referee is closing the stream (SHUTDOWN" in log, log
    [record] = referee.records.glob("*.json")
    assert json.loads(record.read_text())["meta"]["status"] == "aborted"
