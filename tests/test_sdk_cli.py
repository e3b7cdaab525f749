"""The SDK's command line (`scout-bot`): max matches, environment, usage errors, events, and
streams cut by the referee."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from grpc import aio
from scout.v1 import arena_pb2_grpc
from scout_client import (
    ActionChoice,
    Hello,
    MatchEnded,
    Show,
    run_bot,
)
from scout_client.cli import main
from support.sdk_fakes import (
    TOKEN,
    Connection,
    FakeArena,
    Recorder,
    cards,
    observation,
    serving,
    start,
)


def test_cli_plays_until_max_matches_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    obs = observation(cards(1, 2, 3, 9))
    hellos: list[Hello] = []

    async def script(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        await conn.send(start("m1"), obs)
        assert await conn.recv() == ActionChoice("m1", 1, Show(0, 3))  # greedy: longest
        await conn.send(MatchEnded("m1"))
        await conn.drain()

    async def scenario() -> tuple[int, int]:
        async with serving(FakeArena(script)) as address:
            code = await asyncio.to_thread(
                main,
                [
                    "run",
                    "greedy",
                    "--address",
                    address,
                    "--token",
                    TOKEN,
                    "--max-matches",
                    "1",
                    "--max-concurrent",
                    "2",
                ],
            )
            monkeypatch.setenv("SCOUT_ADDRESS", address)
            monkeypatch.setenv("SCOUT_TOKEN", "wrong")
            rejected = await asyncio.to_thread(main, ["run", "random", "--seed", "4"])
        return code, rejected

    assert asyncio.run(scenario()) == (0, 1)
    assert hellos == [Hello("greedy", "1", 1, 2)]
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "scout-bot: error: the referee rejected the connection (UNAUTHENTICATED): unknown bot token"
    )


def test_cli_usage_errors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SCOUT_ADDRESS", raising=False)
    monkeypatch.delenv("SCOUT_TOKEN", raising=False)
    assert main(["run", "random"]) == 2
    assert "SCOUT_ADDRESS" in capsys.readouterr().err
    assert main(["run", "nonsense", "--address", "x:1", "--token", "t"]) == 2
    assert "bad bot spec" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["flag", "environment", "neither"])
def test_cli_asks_for_public_events_when_told(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hellos: list[Hello] = []

    async def script(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        await conn.send(start("m1"), MatchEnded("m1"))
        await conn.drain()

    monkeypatch.delenv("SCOUT_PUBLIC_EVENTS", raising=False)
    if how == "environment":
        monkeypatch.setenv("SCOUT_PUBLIC_EVENTS", "1")
    extra = ["--public-events"] if how == "flag" else []

    async def scenario() -> int:
        async with serving(FakeArena(script)) as address:
            return await asyncio.to_thread(
                main,
                [
                    "run",
                    "greedy",
                    "--address",
                    address,
                    "--token",
                    TOKEN,
                    "--max-matches",
                    "1",
                    *extra,
                ],
            )

    assert asyncio.run(scenario()) == 0
    assert [hello.lean for hello in hellos] == [how == "neither"]


def test_streams_cut_by_the_referee_leave_no_task_pending_or_exception_unretrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A referee that takes the stream and goes away, three times. Each stream's tasks must end
    with its session; before, grpc's own task reading the SDK's request generator was left
    pending when the call failed under it, and destroyed with the call ("Task was destroyed but
    it is pending", then "aclose(): asynchronous generator is already running")."""
    import gc

    class Vanishing(arena_pb2_grpc.ArenaServicer):
        def __init__(self) -> None:
            self.streams = 0

        # override: it never answers, and returns None, as grpc.aio allows.
        async def Play(  # type: ignore[override]
            self, request_iterator: Any, context: Any
        ) -> None:
            self.streams += 1
            await context.read()  # the Hello; then nothing until the server goes away
            await asyncio.Event().wait()

    async def main() -> None:
        arena = Vanishing()
        stop = asyncio.Event()
        port = 0
        running: asyncio.Future[int] | None = None
        for _ in range(3):
            server = aio.server()
            arena_pb2_grpc.add_ArenaServicer_to_server(arena, server)
            port = server.add_insecure_port(f"127.0.0.1:{port}")
            await server.start()
            streams = arena.streams
            if running is None:
                running = asyncio.ensure_future(
                    run_bot(Recorder(), f"127.0.0.1:{port}", TOKEN, stop_event=stop)
                )
            deadline = time.monotonic() + 20
            while arena.streams == streams and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await server.stop(None)
            gc.collect()
        stop.set()
        assert running is not None
        await asyncio.wait_for(running, 10)
        gc.collect()
        await asyncio.sleep(0.1)
        assert arena.streams == 3

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
        gc.collect()
    problems = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert problems == []
