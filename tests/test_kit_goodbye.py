"""Every starter kit obeys the referee's Goodbye{FINISHED} (PROTOCOL.md §10.1), and asks for the
stream the launch convention says.

Each kit is built with the command of the starter-kit table (tests/support/kits.py) and played
against a small fake referee in this process: a grpc.aio ``scout.v1.Arena/Play`` server on
127.0.0.1 that reads the bot's Hello, answers Welcome, and then ends the call as the test's plan
says, one step per Play call. Goodbye{FINISHED, reconnect: false}: the bot exits with status 0
and does not come back; its Hello asks for a lean stream unless SCOUT_PUBLIC_EVENTS is 1 (one
run per kit for each, which also checks the exit).

Goodbye{SHUTDOWN, reconnect: true} (the bot comes back no sooner than retry_after_ms, and gives
up after a bound when the referee stays down) and a stream that ends without a Goodbye (a fault:
the bot reconnects) are played in the same kit run as the ladder's other messages, in
tests/test_kit_scripted.py.

Calls beyond the plan get Goodbye{FINISHED}, so every bot ends with exit status 0.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from referee_support import stop
from scout.v1 import arena_pb2, arena_pb2_grpc
from scout_arena.server.calls import EOF
from support.kits import KITS, ROOT, Kit, require
from test_starter_kits import TOKENS

# A kit's first build (crates, Maven artefacts, npm packages, apt for C++) can take minutes; the
# build runs inside the first test of each kit, like the `built_kits` fixture of the kit table.
pytestmark = pytest.mark.timeout(1200)

FINISHED_MESSAGE = "the fake tournament is over"
SHUTDOWN_MESSAGE = "the fake referee restarts for maintenance"
RETRY_AFTER_MS = 800
#: Timer granularity and clock reading slack below retry_after_ms.
RETRY_SLACK_S = 0.1
#: How long a bot may take to start and open its first Play call (a JVM, a cold cache).
START_TIMEOUT_S = 60.0
#: How long the bot may take for what the test waits for after the referee acted.
REACTION_TIMEOUT_S = 10.0


def goodbye(reason: arena_pb2.GoodbyeReason.ValueType, reconnect: bool,
            retry_after_ms: int = 0) -> arena_pb2.Goodbye:
    message = FINISHED_MESSAGE if reason == arena_pb2.GOODBYE_REASON_FINISHED else SHUTDOWN_MESSAGE
    return arena_pb2.Goodbye(reason=reason, message=message, reconnect=reconnect,
                             retry_after_ms=retry_after_ms)


FINISHED = goodbye(arena_pb2.GOODBYE_REASON_FINISHED, reconnect=False)
SHUTDOWN = goodbye(arena_pb2.GOODBYE_REASON_SHUTDOWN, reconnect=True,
                   retry_after_ms=RETRY_AFTER_MS)
#: A plan step: end the call with this Goodbye, or (None) with UNAVAILABLE and no Goodbye.
UNAVAILABLE = None


@dataclass
class Call:
    """One Play call, as the fake referee saw it (times are time.monotonic())."""

    opened: float
    authorization: str
    hello: arena_pb2.BotMessage | None = None
    goodbye: arena_pb2.Goodbye | None = None
    #: When the Goodbye had been written, or when the call was aborted.
    ended: float | None = None


@dataclass
class FakeReferee:
    """A grpc.aio Arena server on its own event loop in a thread, following `plan`."""

    plan: list[arena_pb2.Goodbye | None]
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._changed = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.address = f"127.0.0.1:{self.port}"

    async def _start(self) -> int:
        self._server = grpc.aio.server()
        arena_pb2_grpc.add_ArenaServicer_to_server(_Arena(self), self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        return port

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.stop(None), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def record(self, call: Call | None = None) -> None:
        with self._changed:
            if call is not None:
                self.calls.append(call)
            self._changed.notify_all()

    def step(self, index: int) -> arena_pb2.Goodbye | None:
        return self.plan[index] if index < len(self.plan) else FINISHED

    def wait_for(self, predicate: Any, timeout: float, what: str, log: Path) -> list[Call]:
        """Wait until predicate(calls) holds; fail with the bot's log otherwise."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self.calls), timeout):
                pytest.fail(f"{what} within {timeout:.0f} s; calls: {self.calls}\n"
                            f"{tail(log)}")
            return list(self.calls)


class _Arena(arena_pb2_grpc.ArenaServicer):
    def __init__(self, referee: FakeReferee) -> None:
        self.referee = referee

    # override: it writes through context.write() and returns None, as grpc.aio allows.
    async def Play(  # type: ignore[override]
        self, request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        metadata = dict(context.invocation_metadata() or ())
        call = Call(opened=time.monotonic(), authorization=str(metadata.get("authorization")))
        with self.referee._changed:
            index = len(self.referee.calls)
        self.referee.record(call)
        first = await context.read()
        if first is EOF:
            return
        call.hello = first
        await context.write(arena_pb2.RefereeMessage(welcome=arena_pb2.Welcome(
            protocol_version=1, bot_name=first.hello.bot_name, session_id=f"s-{index}")))
        step = self.referee.step(index)
        if step is UNAVAILABLE:
            call.ended = time.monotonic()
            self.referee.record()
            await context.abort(grpc.StatusCode.UNAVAILABLE, "fake referee going away")
        await context.write(arena_pb2.RefereeMessage(goodbye=step))
        call.goodbye, call.ended = step, time.monotonic()
        self.referee.record()
        # Returning ends the call with status OK, as a referee does after its Goodbye.


@dataclass
class Bot:
    process: subprocess.Popen[str]
    stderr: Path


def tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return f"--- {path.name} ---\n" + "\n".join(text.splitlines()[-lines:])


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    """Starts a kit's bot with the launch convention against an address; stops it afterwards."""
    bots: list[subprocess.Popen[str]] = []

    def start(kit: Kit, address: str) -> Bot:
        env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": TOKENS[kit.name],
               "SCOUT_BOT_NAME": kit.name, "SCOUT_CONCURRENCY": "8"}
        stderr = tmp_path / f"{kit.name}-{time.monotonic_ns()}.stderr"
        with (tmp_path / f"{stderr.stem}.stdout").open("w") as out, stderr.open("w") as err:
            process = subprocess.Popen(list(kit.command), cwd=ROOT, env=env, stdout=out,
                                       stderr=err, text=True)
        bots.append(process)
        return Bot(process, stderr)

    yield start
    for process in bots:
        stop(process)


@pytest.fixture
def referee_factory() -> Iterator[Any]:
    referees: list[FakeReferee] = []

    def make(plan: list[arena_pb2.Goodbye | None]) -> FakeReferee:
        referees.append(FakeReferee(plan))
        return referees[-1]

    yield make
    for referee in referees:
        referee.close()


def wait_exit(bot: Bot, timeout: float) -> int:
    try:
        return bot.process.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the bot is still running {timeout:.0f} s later\n{tail(bot.stderr)}")


def assert_said_hello(call: Call, kit: Kit, bot: Bot) -> None:
    assert call.authorization == f"Bearer {TOKENS[kit.name]}", call
    assert call.hello is not None and call.hello.WhichOneof("body") == "hello", tail(bot.stderr)
    assert call.hello.hello.protocol_version == 1


def ended(count: int) -> Any:
    return lambda calls: len(calls) >= count and calls[count - 1].ended is not None


@pytest.mark.parametrize("public_events", [None, "1"], ids=["lean", "public-events"])
@pytest.mark.parametrize("name", list(KITS))
def test_goodbye_without_reconnect_exits_0_and_does_not_come_back(
        name: str, public_events: str | None, built_kits: dict[str, str], launch: Any,
        referee_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also the launch convention's SCOUT_PUBLIC_EVENTS: unset, the kit's Hello asks for a lean
    stream (PROTOCOL.md §3.6.1); "1" asks for the full one."""
    kit = require(built_kits, name)
    if public_events is None:
        monkeypatch.delenv("SCOUT_PUBLIC_EVENTS", raising=False)
    else:
        monkeypatch.setenv("SCOUT_PUBLIC_EVENTS", public_events)
    referee = referee_factory([FINISHED])
    bot = launch(kit, referee.address)
    calls = referee.wait_for(ended(1), START_TIMEOUT_S, "no Goodbye sent", bot.stderr)
    assert_said_hello(calls[0], kit, bot)
    hello = calls[0].hello
    assert hello is not None
    assert hello.hello.lean is (public_events is None), hello

    status = wait_exit(bot, REACTION_TIMEOUT_S)
    assert status == 0, tail(bot.stderr)
    assert len(referee.calls) == 1, f"the bot reconnected: {referee.calls}\n{tail(bot.stderr)}"
    assert FINISHED_MESSAGE in bot.stderr.read_text(), tail(bot.stderr)
