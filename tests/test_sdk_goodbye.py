"""The Python SDK obeys the referee's Goodbye (PROTOCOL.md §10.1) and refuses bot tokens that
gRPC cannot send, without retrying (§3.2, §8.3).

The fake referee is the scripted grpc.aio harness of tests/test_sdk.py; the command-line tests
run `scout-bot` in a subprocess against it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sys
import time
from pathlib import Path

import grpc
import pytest
import scout_client.connection as sdk_connection
import scout_client.runner as sdk_runner
from scout.v1 import arena_pb2
from scout_client import (
    ActionChoice,
    ConnectionLost,
    ConnectionRejected,
    Goodbye,
    GoodbyeReason,
    Hello,
    InvalidToken,
    MatchEnded,
    convert,
    run_bot,
    testing,
)
from scout_client.connection import _is_rejection, goodbye_delay, validate_token
from support.sdk_fakes import (
    TOKEN,
    Connection,
    FakeArena,
    Recorder,
    cards,
    observation,
    play,
    serving,
    start,
)

FINISHED = Goodbye(GoodbyeReason.FINISHED, "the tournament is over", reconnect=False)
SHUTDOWN = Goodbye(GoodbyeReason.SHUTDOWN, "restarting for maintenance", reconnect=True,
                   retry_after_ms=500)


class Polite(Recorder):
    """A Recorder that also records its Goodbyes."""

    def __init__(self) -> None:
        super().__init__()
        self.goodbyes: list[Goodbye] = []

    def on_goodbye(self, goodbye: Goodbye) -> None:
        self.goodbyes.append(goodbye)


def record_backoff(monkeypatch: pytest.MonkeyPatch, *, delay: float | None = None) -> list[int]:
    """The attempts `Connection.run` asks `backoff_delay` for, in order. With `delay` every
    wait takes that long; without, the real (jittered) backoff is kept."""
    attempts: list[int] = []
    real = sdk_connection.backoff_delay

    def recording(attempt: int, rng: random.Random | None = None) -> float:
        attempts.append(attempt)
        return real(attempt, rng) if delay is None else delay

    monkeypatch.setattr(sdk_connection, "backoff_delay", recording)
    return attempts


# --- the Goodbye value -------------------------------------------------------------------------


@pytest.mark.parametrize("goodbye", [FINISHED, SHUTDOWN, Goodbye()], ids=repr)
def test_goodbye_round_trips(goodbye: Goodbye) -> None:
    wire = testing.referee_message_to_proto(goodbye)
    assert wire.WhichOneof("body") == "goodbye"
    again = arena_pb2.RefereeMessage.FromString(wire.SerializeToString())
    assert convert.referee_message_from_proto(again) == goodbye


def test_goodbye_with_an_unknown_reason_reads_as_unspecified() -> None:
    wire = arena_pb2.RefereeMessage(goodbye=arena_pb2.Goodbye(
        reason=7, message="new", reconnect=True, retry_after_ms=3))  # type: ignore[arg-type]
    assert convert.referee_message_from_proto(wire) == Goodbye(
        GoodbyeReason.UNSPECIFIED, "new", True, 3)


def test_goodbye_delay_is_retry_after_plus_a_little_jitter() -> None:
    rng = random.Random(3)
    delays = [goodbye_delay(500, rng) for _ in range(200)]
    assert all(0.5 <= delay <= 0.5 + 0.05 + 0.1 for delay in delays)
    assert max(delays) - min(delays) > 0.05  # jittered, not constant
    assert all(0 <= goodbye_delay(0, rng) <= 0.1 for _ in range(50))


# --- Goodbye against a fake referee -------------------------------------------------------------


@pytest.mark.parametrize("ending", ["ok", "unavailable", "left-open"])
def test_finished_goodbye_returns_without_reconnecting(
    ending: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Goodbye{FINISHED, reconnect: false}: run_bot returns normally after the hook, whatever
    status the stream then ends with; a referee that keeps the stream open is hung up on."""
    bot = Polite()
    obs = observation(cards(1, 2, 3))

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), obs)
        assert await conn.recv() == ActionChoice("m1", 1, obs.legal_shows[-1])
        await conn.send(MatchEnded("m1"), FINISHED)
        if ending == "unavailable":
            await conn.abort(grpc.StatusCode.UNAVAILABLE, "shutting down")
        elif ending == "left-open":
            assert await conn.drain() == []  # the SDK half-closes its side

    arena = FakeArena(script)
    with caplog.at_level(logging.INFO, logger="scout_client"):
        assert asyncio.run(play(arena, bot)) == 1
    assert arena.connections == 1
    assert bot.goodbyes == [FINISHED]
    assert "the tournament is over" in caplog.text
    assert "reconnecting in" not in caplog.text and "connection lost" not in caplog.text


def test_goodbye_without_reconnect_for_another_reason_also_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    unwanted = Goodbye(GoodbyeReason.UNSPECIFIED, "you are banned", reconnect=False)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(unwanted)

    arena = FakeArena(script)
    with caplog.at_level(logging.INFO, logger="scout_client"):
        assert asyncio.run(play(arena, Polite())) == 0
    assert arena.connections == 1
    assert [r.levelno for r in caplog.records if "you are banned" in r.getMessage()] == [
        logging.WARNING]


def test_goodbye_right_after_a_match_end_is_obeyed() -> None:
    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), MatchEnded("m1"), FINISHED)

    arena = FakeArena(script)
    bot = Polite()
    assert asyncio.run(play(arena, bot)) == 1
    assert arena.connections == 1 and bot.goodbyes == [FINISHED]


def test_a_raising_on_goodbye_hook_does_not_stop_the_goodbye(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Recorder):
        async def on_goodbye(self, goodbye: Goodbye) -> None:
            raise RuntimeError("hook bug")

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(FINISHED)

    arena = FakeArena(script)
    assert asyncio.run(play(arena, Broken())) == 0
    assert arena.connections == 1
    assert "hook bug" in caplog.text


@pytest.mark.parametrize("ending", ["ok", "unavailable"])
def test_shutdown_goodbye_reconnects_after_retry_after_ms(
    ending: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goodbye{SHUTDOWN, reconnect: true, retry_after_ms: 500}: the next Play call comes no
    sooner than the wait asked for, says Hello again with the same token, and is not a
    backoff step."""
    attempts = record_backoff(monkeypatch)
    bot = Polite()
    said_goodbye: list[float] = []
    reopened: list[float] = []
    hellos: list[Hello] = []
    tokens: list[str] = []

    async def restarts(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        tokens.append(conn.metadata["authorization"])
        said_goodbye.append(await conn.send(SHUTDOWN))
        if ending == "unavailable":
            await conn.abort(grpc.StatusCode.UNAVAILABLE, "going down")

    async def back(conn: Connection) -> None:
        reopened.append(time.monotonic())
        hellos.append(await conn.handshake())
        tokens.append(conn.metadata["authorization"])
        arena.stop.set()
        await conn.drain()

    arena = FakeArena(restarts, back)
    assert asyncio.run(play(arena, bot)) == 0
    assert arena.connections == 2
    waited = reopened[0] - said_goodbye[0]
    assert 0.45 <= waited < 2.0, waited
    assert hellos[0] == hellos[1] == Hello("recorder", "7", 1, 8, lean=False)  # on_event: full
    assert tokens == [f"Bearer {TOKEN}"] * 2
    assert attempts == []  # the wait was not a backoff
    assert bot.goodbyes == [SHUTDOWN]


def test_a_goodbye_resets_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Faults before a Goodbye grow the backoff; the Goodbye is no fault and starts it again
    from the first step, even on a stream that was never welcomed."""
    attempts = record_backoff(monkeypatch, delay=0.01)

    async def fails(conn: Connection) -> None:
        assert isinstance(await conn.recv(), Hello)
        await conn.abort(grpc.StatusCode.UNAVAILABLE, "flaky")

    async def says_goodbye(conn: Connection) -> None:
        assert isinstance(await conn.recv(), Hello)
        await conn.send(Goodbye(GoodbyeReason.SHUTDOWN, "brb", reconnect=True, retry_after_ms=0))

    async def welcomes(conn: Connection) -> None:
        await conn.handshake()
        arena.stop.set()
        await conn.drain()

    arena = FakeArena(fails, fails, says_goodbye, fails, welcomes)
    asyncio.run(play(arena, Recorder()))
    assert arena.connections == 5
    assert attempts == [0, 1, 0]


@pytest.mark.parametrize("ending", ["unavailable", "ok"])
def test_a_stream_ending_without_goodbye_is_a_fault(
    ending: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: no Goodbye, so the SDK reconnects after a backoff step."""
    attempts = record_backoff(monkeypatch)
    ended: list[float] = []
    reopened: list[float] = []

    async def ends(conn: Connection) -> None:
        await conn.handshake()
        ended.append(time.monotonic())
        if ending == "unavailable":
            await conn.abort(grpc.StatusCode.UNAVAILABLE, "network trouble")

    async def back(conn: Connection) -> None:
        reopened.append(time.monotonic())
        await conn.handshake()
        arena.stop.set()
        await conn.drain()

    arena = FakeArena(ends, back)
    asyncio.run(play(arena, Recorder()))
    assert arena.connections == 2
    assert attempts == [0]
    assert 0.09 <= reopened[0] - ended[0] < 1.5  # the first step: 0.1-0.2 s


def test_shutdown_goodbye_without_reconnect_is_connection_lost() -> None:
    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(SHUTDOWN)

    arena = FakeArena(script)
    with pytest.raises(ConnectionLost, match="reconnect in 500 ms") as caught:
        asyncio.run(play(arena, Recorder(), reconnect=False))
    assert caught.value.goodbye == SHUTDOWN
    assert arena.connections == 1


# --- tokens ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("", "it is empty"),
        (" secret", "starts with whitespace, U+0020 (space)"),
        ("secret\n", "ends with whitespace, U+000A (line feed)"),
        ("secret\r", "ends with whitespace, U+000D (carriage return)"),
        ("s\u00f8cret", "character 2 of 6 is U+00F8 (latin small letter o with stroke)"),
        ("sec\x00ret", "character 4 of 7 is U+0000"),
        ("secret\x7f", "character 7 of 7 is U+007F"),
        ("sec\tret", "character 4 of 7 is U+0009 (tab)"),
        ("\u00a0secret", "starts with whitespace, U+00A0"),
    ],
)
def test_unsendable_tokens_are_refused_with_a_reason(token: str, expected: str) -> None:
    with pytest.raises(InvalidToken) as caught:
        validate_token(token)
    message = str(caught.value)
    assert message.startswith("invalid bot token: ")
    assert expected in message
    assert "\n" not in message
    assert not token or token not in message  # the secret is never repeated
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("token", ["secret-token", "a b", "~!#$%&'*+-.^_`|", "x" * 500])
def test_printable_ascii_tokens_are_accepted(token: str) -> None:
    validate_token(token)


def test_run_bot_refuses_a_bad_token_before_connecting() -> None:
    async def script(conn: Connection) -> None:
        raise AssertionError("no Play call was expected")

    async def scenario(arena: FakeArena) -> None:
        async with serving(arena) as address:
            await asyncio.wait_for(run_bot(Recorder(), address, "t\u00f8ken"), 5)

    arena = FakeArena(script)
    with pytest.raises(InvalidToken, match="U\\+00F8"):
        asyncio.run(scenario(arena))
    assert arena.connections == 0


def test_invalid_metadata_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a header gRPC cannot encode to get past the check, gRPC's own INTERNAL "Invalid
    metadata" would come back on every attempt: it is a rejection, not a fault."""
    monkeypatch.setattr(sdk_runner, "bearer_metadata",
                        lambda token: (("authorization", f"Bearer {token}\u00f8"),))

    async def script(conn: Connection) -> None:
        raise AssertionError("no Play call was expected")

    arena = FakeArena(script)
    with pytest.raises(ConnectionRejected) as caught:
        asyncio.run(play(arena, Recorder()))
    assert caught.value.code is grpc.StatusCode.INTERNAL and caught.value.local
    assert str(caught.value).startswith("gRPC refused to send the call (INTERNAL)")
    assert arena.connections == 0


def test_other_internal_errors_are_still_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = record_backoff(monkeypatch, delay=0.01)
    assert not _is_rejection(grpc.StatusCode.INTERNAL, "stream terminated by RST_STREAM")
    assert _is_rejection(grpc.StatusCode.INTERNAL, "Invalid metadata")

    async def breaks(conn: Connection) -> None:
        await conn.recv()
        await conn.abort(grpc.StatusCode.INTERNAL, "referee bug")

    async def welcomes(conn: Connection) -> None:
        await conn.handshake()
        arena.stop.set()
        await conn.drain()

    arena = FakeArena(breaks, welcomes)
    asyncio.run(play(arena, Recorder()))
    assert arena.connections == 2 and attempts == [0]


def test_unauthenticated_is_not_retried_even_after_a_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A token revoked while the bot was away: the reconnect's UNAUTHENTICATED ends run_bot."""
    record_backoff(monkeypatch, delay=0.01)

    async def drops(conn: Connection) -> None:
        await conn.handshake()
        await conn.abort(grpc.StatusCode.UNAVAILABLE, "network trouble")

    async def revoked(conn: Connection) -> None:
        await conn.recv()
        await conn.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown bot token")

    arena = FakeArena(drops, revoked)
    with pytest.raises(ConnectionRejected, match="UNAUTHENTICATED"):
        asyncio.run(play(arena, Recorder()))
    assert arena.connections == 2


# --- the command line, in a subprocess ----------------------------------------------------------


def scout_bot() -> list[str]:
    """The installed `scout-bot` command of this interpreter, else `python -m scout_client`."""
    script = Path(sys.executable).with_name("scout-bot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "scout_client"]


def bot_environment(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOUT_")}
    env.update(overrides)
    return env


async def run_scout_bot(*arguments: str, env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *scout_bot(), *arguments, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(), 60)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, err.decode()


def test_cli_exits_with_status_0_on_a_finished_goodbye() -> None:
    async def script(conn: Connection) -> None:
        hello = await conn.handshake()
        assert hello.bot_name == "greedy"
        await conn.send(FINISHED)

    async def scenario(arena: FakeArena) -> tuple[int, str]:
        async with serving(arena) as address:
            return await run_scout_bot("run", "greedy", "--address", address, "--token", TOKEN,
                                       env=bot_environment())

    arena = FakeArena(script)
    code, err = asyncio.run(scenario(arena))
    arena.check()
    assert code == 0, err
    assert arena.connections == 1
    assert "the tournament is over" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("arguments", "env", "expected"),
    [
        (("--token", "t\u00f8ken"), {}, "character 2 of 5 is U+00F8"),
        ((), {"SCOUT_TOKEN": "secret\r\n"}, "ends with whitespace, U+000A (line feed)"),
    ],
)
def test_cli_refuses_a_bad_token_with_status_2(
    arguments: tuple[str, ...], env: dict[str, str], expected: str
) -> None:
    source = "--token" if arguments else "SCOUT_TOKEN"
    # Nothing listens on the address: the token must be refused before any connection.
    code, err = asyncio.run(run_scout_bot(
        "run", "greedy", "--address", "127.0.0.1:9", *arguments,
        env=bot_environment(**env)))
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("scout-bot: error: invalid bot token: ")
    assert expected in lines[0] and f"the token came from {source}" in lines[0]
    assert "Traceback" not in err


def test_cli_in_process_refuses_a_bad_token(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from scout_client.cli import main

    monkeypatch.delenv("SCOUT_TOKEN", raising=False)
    assert main(["run", "random", "--address", "127.0.0.1:9", "--token", " padded"]) == 2
    assert "starts with whitespace" in capsys.readouterr().err
