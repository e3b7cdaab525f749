"""The SDK's runner against a scripted fake referee served with grpc.aio on 127.0.0.1: request
ids, worker threads and the event loop, bundles, concurrency, fallbacks and reconnects."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import grpc
import pytest
from scout_client import (
    Action,
    ActionChoice,
    ActionKind,
    AnswerResult,
    AnswerStatus,
    Bot,
    Card,
    Hello,
    MatchEnded,
    MatchStart,
    Observation,
    PublicAction,
    PublicEvent,
    RotationChoice,
    RotationRequest,
    RoundEnded,
    RoundEndReason,
    Scout,
    ScoutAndShow,
    Show,
    convert,
    testing,
)
from support.sdk_fakes import (
    LEFT,
    TOKEN,
    Connection,
    FakeArena,
    Recorder,
    cards,
    observation,
    play,
    resumed_start,
    start,
)


def test_runner_plays_a_match_and_echoes_request_ids() -> None:
    bot = Recorder()
    obs = observation(cards(3, 4, 8), cards(2), match_id="m1", request_id=12)
    event = PublicEvent("m1", 0, PublicAction(0, ActionKind.SHOW, cards(4), start=1, length=1))

    async def script(conn: Connection) -> None:
        hello = await conn.handshake()
        # Recorder overrides on_event, so it asks for the full stream.
        assert hello == Hello("recorder", "7", 1, 3, lean=False)
        assert conn.metadata["authorization"] == f"Bearer {TOKEN}"
        await conn.send(start("m1"))
        await conn.send(RotationRequest("m1", 11, 0, cards(1, 2), 2000, 0))
        assert await conn.recv() == RotationChoice("m1", 11, True)
        await conn.send(AnswerResult("m1", 11, AnswerStatus.ACCEPTED), obs)
        assert await conn.recv() == ActionChoice("m1", 12, obs.legal_shows[-1])
        await conn.send(
            AnswerResult("m1", 12, AnswerStatus.ACCEPTED),
            event,
            RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED),
            MatchEnded("m1", (1, 2, 3, 4), (4, 3, 2, 1), (), "m1"),
        )
        assert await conn.drain() == []

    played = asyncio.run(play(FakeArena(script), bot, max_concurrent_matches=3, max_matches=1))
    assert played == 1
    assert bot.kinds() == ["start", "rotation", "act", "event", "round_end", "match_end"]
    assert bot.calls[2][1] == obs
    assert bot.calls[3][1] == event


class QuickRecorder(Recorder):
    """A Recorder that says it is quick, so the SDK asks it on the event loop."""

    quick = True


@pytest.mark.parametrize("quick", [False, True], ids=["threaded", "quick"])
def test_a_plain_bot_is_asked_in_a_worker_thread_and_a_quick_one_on_the_event_loop(
    quick: bool,
) -> None:
    threads: list[str] = []

    class Where(QuickRecorder if quick else Recorder):  # type: ignore[misc]
        def act(self, observation: Observation) -> Action:
            threads.append(threading.current_thread().name)
            return super().act(observation)  # type: ignore[no-any-return]

    bot = Where()
    obs = observation(cards(3, 4, 8), cards(2), match_id="m1", request_id=12)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), RotationRequest("m1", 11, 0, cards(1, 2), 2000, 0))
        assert await conn.recv() == RotationChoice("m1", 11, True)
        await conn.send(obs)
        assert await conn.recv() == ActionChoice("m1", 12, obs.legal_shows[-1])
        await conn.send(RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED), MatchEnded("m1"))
        assert await conn.drain() == []

    assert asyncio.run(play(FakeArena(script), bot, max_matches=1)) == 1
    assert bot.kinds() == ["start", "rotation", "act", "round_end", "match_end"]
    [thread] = threads
    if quick:
        assert thread == threading.main_thread().name
    else:
        assert thread.startswith("scout-bot")


def test_a_quick_bots_hook_that_returns_an_awaitable_is_awaited_before_the_next_message() -> None:
    class Deferring(QuickRecorder):
        def on_round_end(self, round_ended: RoundEnded) -> Any:
            self.calls.append(("round_end", round_ended))

            async def later() -> None:
                await asyncio.sleep(0.05)
                self.calls.append(("round_end_done", round_ended))

            return later()

    bot = Deferring()
    first = observation(cards(3, 4, 8), cards(2), match_id="m1", request_id=1)
    second = observation(cards(5, 6), match_id="m1", request_id=2)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), first)
        assert await conn.recv() == ActionChoice("m1", 1, first.legal_shows[-1])
        await conn.send(RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED), second)
        assert await conn.recv() == ActionChoice("m1", 2, second.legal_shows[-1])
        await conn.send(RoundEnded("m1", 1, RoundEndReason.HAND_EMPTIED), MatchEnded("m1"))
        assert await conn.drain() == []

    assert asyncio.run(play(FakeArena(script), bot, max_matches=1)) == 1
    assert bot.kinds() == [
        "start",
        "act",
        "round_end",
        "round_end_done",
        "act",
        "round_end",
        "round_end_done",
        "match_end",
    ]


def test_a_referee_bundle_is_read_as_its_messages_in_order_and_the_answers_go_back_bundled() -> (
    None
):
    bot = QuickRecorder()
    first = observation(cards(3, 4, 8), cards(2), match_id="m1", request_id=3)
    second = observation(cards(5, 6), match_id="m2", request_id=4)
    hellos: list[Hello] = []
    bundles: list[int] = []

    async def script(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        await conn.send_bundle(start("m1"), start("m2"), first, second)
        assert [await conn.recv(), await conn.recv()] == [
            ActionChoice("m1", 3, first.legal_shows[-1]),
            ActionChoice("m2", 4, second.legal_shows[-1]),
        ]
        bundles.append(conn.bundles)
        await conn.send_bundle(
            RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED), MatchEnded("m1"), MatchEnded("m2")
        )
        assert await conn.drain() == []

    played = asyncio.run(play(FakeArena(script), bot, max_concurrent_matches=2, max_matches=2))
    assert played == 2
    assert hellos[0].accepts_bundles
    assert convert.bot_message_to_proto(hellos[0]).hello.accepts_bundles
    assert bot.kinds() == ["start", "start", "act", "act", "round_end", "match_end", "match_end"]
    assert bundles == [1]  # both answers were ready together: one BotBundle


def test_bot_messages_go_alone_or_as_one_bundle_in_order() -> None:
    one = ActionChoice("m", 1, Show(0, 1))
    two = RotationChoice("m", 2, True)
    assert convert.bot_messages_to_proto([one]) == convert.bot_message_to_proto(one)
    wire = convert.bot_messages_to_proto([one, two])
    assert wire.WhichOneof("body") == "bundle"
    assert testing.bot_messages_from_proto(wire) == [one, two]


def test_two_matches_are_played_concurrently() -> None:
    asked = {"a": threading.Event(), "b": threading.Event()}

    class Waiting(Recorder):
        def act(self, observation: Observation) -> Action:
            # Each match's act waits until the other's has started: only possible in parallel.
            asked[observation.match_id].set()
            other = "b" if observation.match_id == "a" else "a"
            assert asked[other].wait(5)
            return super().act(observation)

    bot = Waiting()
    obs_a = observation(cards(1, 2, 3), match_id="a", request_id=100, deadline_ms=4000)
    obs_b = observation(cards(5, 6), match_id="b", request_id=200, deadline_ms=4000)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("a"), start("b"))
        await conn.send(RotationRequest("a", 1, 0, cards(1)), RotationRequest("b", 2, 0, cards(2)))
        assert {await conn.recv(), await conn.recv()} == {
            RotationChoice("a", 1, True),
            RotationChoice("b", 2, True),
        }
        await conn.send(obs_a, obs_b)
        # Both are the bot's own choices (a's is not the fallback: it did not wait for b's
        # act to finish in series), in whichever order the two threads finished.
        assert {await conn.recv(), await conn.recv()} == {
            ActionChoice("b", 200, obs_b.legal_shows[-1]),
            ActionChoice("a", 100, obs_a.legal_shows[-1]),
        }
        await conn.send(MatchEnded("b"), MatchEnded("a"))
        assert await conn.drain() == []

    assert asyncio.run(play(FakeArena(script), bot, max_matches=2)) == 2


class Sleepy(Recorder):
    """A sync bot that overruns every deadline."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def act(self, observation: Observation) -> Action:
        self.release.wait(5)
        return super().act(observation)


@pytest.mark.parametrize(
    ("deadline_ms", "bank_ms", "use_time_bank", "margin_ms", "expected_s"),
    [
        (400, 0, True, 100, 0.3),  # the default margin
        (300, 300, True, 300, 0.3),
        (500, 5000, False, 300, 0.2),
    ],
)
def test_slow_bot_gets_the_fallback_before_the_deadline(
    deadline_ms: int,
    bank_ms: int,
    use_time_bank: bool,
    margin_ms: int,
    expected_s: float,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK answers `margin_ms` before the referee would time the seat out: after
    deadline + bank, or after the deadline alone when told not to use the bank."""
    limit_s = (deadline_ms + (bank_ms if use_time_bank else 0)) / 1000
    bot = Sleepy()
    obs = observation(cards(3, 4, 8), cards(2), deadline_ms=deadline_ms, time_bank_ms=bank_ms)
    elapsed: list[float] = []

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"))
        sent = await conn.send(obs)
        answer = await conn.recv()
        elapsed.append(time.monotonic() - sent)
        assert answer == ActionChoice("m1", 1, Show(0, 1))  # the first legal show
        await conn.send(MatchEnded("m1"))
        assert await conn.drain() == []

    try:
        with caplog.at_level(logging.WARNING, logger="scout_client"):
            options: dict[str, Any] = {"use_time_bank": use_time_bank}
            if margin_ms != 100:
                options["safety_margin_ms"] = margin_ms
            asyncio.run(play(FakeArena(script), bot, max_matches=1, **options))
    finally:
        bot.release.set()
    assert expected_s - 0.05 <= elapsed[0] < limit_s
    assert "did not return within" in caplog.text


class Raising(Recorder):
    def act(self, observation: Observation) -> Action:
        raise RuntimeError("bug in the bot")


class ReturnsNone(Recorder):
    def act(self, observation: Observation) -> Action:
        return None  # type: ignore[return-value]


class ReturnsIllegalShow(Recorder):
    def act(self, observation: Observation) -> Action:
        return Show(0, 3)


@pytest.mark.parametrize(
    ("bot_class", "logged"),
    [
        (variant, text)
        for quick in (False, True)
        for bot, text in (
            (Raising, "bug in the bot"),
            (ReturnsNone, "not an Action"),
            (ReturnsIllegalShow, "not among the legal shows"),
        )
        for variant in ([type(f"Quick{bot.__name__}", (bot,), {"quick": True})] if quick else [bot])
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_broken_answers_are_replaced_by_the_fallback(
    bot_class: type[Bot], logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    obs = observation(cards(3, 4, 8), cards(2), deadline_ms=5000)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"))
        sent = await conn.send(obs)
        assert await conn.recv() == ActionChoice("m1", 1, Show(0, 1))
        assert time.monotonic() - sent < 1
        await conn.send(MatchEnded("m1"))
        await conn.drain()

    with caplog.at_level(logging.WARNING, logger="scout_client"):
        asyncio.run(play(FakeArena(script), bot_class(), max_matches=1))
    assert logged in caplog.text


def test_rejected_answer_calls_on_rejected_and_sends_the_fallback() -> None:
    combo = ScoutAndShow(Scout(LEFT, False, 0), Show(0, 2))
    rejected: list[AnswerResult] = []

    class Daring(Bot):
        name = "daring"

        async def act(self, observation: Observation) -> Action:
            await asyncio.sleep(0)
            return combo

        def on_rejected(self, result: AnswerResult) -> None:
            rejected.append(result)

    obs = observation(cards(2, 3, 9), (Card(2, 5), Card(2, 6)), deadline_ms=3000)
    assert obs.scout_and_show_available and obs.fallback() == Scout(LEFT, False, 0)
    verdict = AnswerResult("m1", 1, AnswerStatus.ILLEGAL, "does not beat", 1, 10000)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), obs)
        assert await conn.recv() == ActionChoice("m1", 1, combo)
        await conn.send(verdict)
        assert await conn.recv() == ActionChoice("m1", 1, obs.fallback())
        await conn.send(AnswerResult("m1", 1, AnswerStatus.ACCEPTED), MatchEnded("m1"))
        assert await conn.drain() == []

    asyncio.run(play(FakeArena(script), Daring(), max_matches=1))
    assert rejected == [verdict]


def test_reconnects_and_answers_resent_requests_once() -> None:
    bot = Recorder()
    first = observation(cards(3, 4), request_id=1)
    second = observation(cards(6, 7, 7), request_id=2)

    async def ends_at_once(conn: Connection) -> None:
        await conn.handshake()

    async def aborts(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), first)
        assert await conn.recv() == ActionChoice("m1", 1, first.legal_shows[-1])
        await conn.abort(grpc.StatusCode.UNAVAILABLE, "referee restarting")

    async def resumes(conn: Connection) -> None:
        await conn.handshake(resumed=True)
        await conn.send(resumed_start(time_bank_ms=500, strikes=1))
        await conn.send(first)  # "the answer never arrived": the same request again
        assert await conn.recv() == ActionChoice("m1", 1, first.legal_shows[-1])
        await conn.send(AnswerResult("m1", 1, AnswerStatus.ACCEPTED), second)
        assert await conn.recv() == ActionChoice("m1", 2, second.legal_shows[-1])
        await conn.send(second)  # a duplicate on the same stream is ignored
        await conn.send(AnswerResult("m1", 2, AnswerStatus.ACCEPTED), MatchEnded("m1"))
        assert await conn.drain() == []

    arena = FakeArena(ends_at_once, aborts, resumes)
    assert asyncio.run(play(arena, bot, max_matches=1)) == 1
    assert arena.connections == 3
    assert bot.kinds() == ["start", "act", "start", "act", "match_end"]
    resumed = bot.calls[2][1]
    assert isinstance(resumed, MatchStart) and resumed.resumed and resumed.strikes == 1
