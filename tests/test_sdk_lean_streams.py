"""Lean streams (PROTOCOL.md §3.6.1) as the SDK runs them: no PublicEvent, no ACCEPTED, and how
they resync, retry and stop."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

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
    ConnectionLost,
    ConnectionRejected,
    ErrorCode,
    GreedyBot,
    Hello,
    MatchEnded,
    Observation,
    ProtocolError,
    PublicAction,
    PublicEvent,
    RandomBot,
    RotationChoice,
    RotationRequest,
    RoundEnded,
    RoundEndReason,
    Scout,
    ScoutAndShow,
    Show,
    convert,
)
from scout_client.runner import backoff_delay
from scout_client.types import BotMessage
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


class LeanRecorder(Bot):
    """Records its calls and never overrides on_event, so it asks for a lean stream. Answers
    with the last legal show (or scout); request 2 gets a Scout & Show that the fake referee
    rejects."""

    name = "lean"
    version = "3"

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def choose_rotation(self, request: RotationRequest) -> bool:
        self.calls.append(("rotation", request.request_id))
        return True

    def act(self, observation: Observation) -> Action:
        self.calls.append(("act", observation.request_id))
        if observation.request_id == 2 and observation.scout_and_show_available:
            return ScoutAndShow(Scout(LEFT, False, 0), Show(0, 2))
        return (observation.legal_shows or observation.legal_scouts)[-1]

    def on_round_end(self, round_ended: RoundEnded) -> None:
        self.calls.append(("round_end", round_ended.round_index))

    def on_match_end(self, match_ended: MatchEnded) -> None:
        self.calls.append(("match_end", match_ended.match_id))

    def on_rejected(self, result: AnswerResult) -> None:
        self.calls.append(("rejected", result.request_id))


class Watcher(LeanRecorder):
    """Overrides on_event: it needs the events, so it asks for the full stream."""

    def on_event(self, event: PublicEvent) -> None:
        self.calls.append(("event", event.action.seat))


@pytest.mark.parametrize(
    ("bot_class", "public_events", "lean"),
    [
        (LeanRecorder, None, True),
        (Watcher, None, False),
        (LeanRecorder, True, False),
        (Watcher, False, True),
        (RandomBot, None, True),
        (GreedyBot, None, True),
    ],
    ids=[
        "default",
        "on_event overridden",
        "asked for events",
        "asked for lean",
        "random",
        "greedy",
    ],
)
def test_hello_asks_for_a_lean_stream_unless_events_are_needed(
    bot_class: type[Bot], public_events: bool | None, lean: bool
) -> None:
    hellos: list[Hello] = []

    async def script(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        arena.stop.set()
        await conn.drain()

    arena = FakeArena(script)
    asyncio.run(play(arena, bot_class(), public_events=public_events))
    assert len(hellos) == 1 and hellos[0].lean is lean
    wire = convert.bot_message_to_proto(hellos[0])
    assert wire.hello.lean is lean
    assert "accepts_batches" not in str(wire)


def test_a_lean_match_is_played_without_accepted_results_or_events() -> None:
    """A whole 2-round match from a referee that sends no ACCEPTED and no PublicEvent: every
    answer goes out once, a rejection is followed by the fallback on the same request, and a
    stray verdict about a request the match has moved past (a next request or the round's end
    closed it) gets no fallback."""
    bot = LeanRecorder()
    combo = ScoutAndShow(Scout(LEFT, False, 0), Show(0, 2))
    second = observation(cards(2, 3, 9), (Card(2, 5), Card(2, 6)), request_id=2, deadline_ms=3000)
    assert second.scout_and_show_available and second.fallback() == Scout(LEFT, False, 0)
    played = (
        PublicAction(0, ActionKind.SCOUT, (Card(2, 5),), end=LEFT, insert_at=0),
        PublicAction(1, ActionKind.SHOW, cards(7), start=0, length=1),
    )
    third = replace(observation(cards(2, 3, 4, 8), cards(7), request_id=3), history=played)
    fifth = observation(cards(5, 6), request_id=5)
    hellos: list[Hello] = []

    async def script(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        await conn.send(start("m1"), RotationRequest("m1", 1, 0, cards(1, 2), 2000, 0))
        assert await conn.recv() == RotationChoice("m1", 1, True)
        await conn.send(second)  # no ACCEPTED for the rotation: the next request says it all
        assert await conn.recv() == ActionChoice("m1", 2, combo)
        # The rotation was closed by request 2: a stray verdict on it gets no fallback.
        await conn.send(AnswerResult("m1", 1, AnswerStatus.ILLEGAL, "stray", 0, 9000))
        await conn.send(AnswerResult("m1", 2, AnswerStatus.ILLEGAL, "does not beat", 1, 9000))
        assert await conn.recv() == ActionChoice("m1", 2, second.fallback())
        await conn.send(third)  # the fallback was accepted, silently
        assert await conn.recv() == ActionChoice("m1", 3, third.legal_shows[-1])
        assert third.legal_shows[-1] != third.fallback()
        # The round's end closes request 3 too.
        await conn.send(
            RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED),
            AnswerResult("m1", 3, AnswerStatus.ILLEGAL, "stray", 1, 9000),
            RotationRequest("m1", 4, 1, cards(3, 4), 2000, 0),
        )
        assert await conn.recv() == RotationChoice("m1", 4, True)
        await conn.send(fifth)
        assert await conn.recv() == ActionChoice("m1", 5, fifth.legal_shows[-1])
        await conn.send(
            RoundEnded("m1", 1, RoundEndReason.HAND_EMPTIED),
            MatchEnded("m1", (3, 1, 0, 0), (1, 2, 3, 3), (), "m1"),
        )
        assert await conn.drain() == []

    assert asyncio.run(play(FakeArena(script), bot, max_matches=1)) == 1
    assert hellos[0].lean
    assert bot.calls == [
        ("rotation", 1),
        ("act", 2),
        ("rejected", 1),
        ("rejected", 2),
        ("act", 3),
        ("round_end", 0),
        ("rejected", 3),
        ("rotation", 4),
        ("act", 5),
        ("round_end", 1),
        ("match_end", "m1"),
    ]


def test_a_lean_stream_resyncs_after_a_reconnect() -> None:
    """Nothing said whether the answers were accepted: after the reconnect the referee resends
    the request that is still open (its answer was lost) and the SDK resends that answer
    without asking the bot again; the next request is answered as usual."""
    bot = LeanRecorder()
    first = observation(cards(3, 4), request_id=1)
    second = observation(cards(6, 7, 7), request_id=2, deadline_ms=5000)
    third = observation(cards(1, 5), request_id=3)
    hellos: list[Hello] = []

    async def drops(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        await conn.send(start("m1"), first)
        assert await conn.recv() == ActionChoice("m1", 1, first.legal_shows[-1])
        await conn.send(second)
        assert await conn.recv() == ActionChoice("m1", 2, second.legal_shows[-1])
        await conn.abort(grpc.StatusCode.UNAVAILABLE, "referee restarting")

    async def resumes(conn: Connection) -> None:
        hellos.append(await conn.handshake(resumed=True))
        await conn.send(resumed_start(time_bank_ms=4000, strikes=0))
        await conn.send(replace(second, deadline_ms=2500))  # still open: its answer was lost
        assert await conn.recv() == ActionChoice("m1", 2, second.legal_shows[-1])
        await conn.send(third)
        assert await conn.recv() == ActionChoice("m1", 3, third.legal_shows[-1])
        await conn.send(MatchEnded("m1"))
        assert await conn.drain() == []

    arena = FakeArena(drops, resumes)
    assert asyncio.run(play(arena, bot, max_matches=1)) == 1
    assert arena.connections == 2
    assert [hello.lean for hello in hellos] == [True, True]
    assert bot.calls == [("act", 1), ("act", 2), ("act", 3), ("match_end", "m1")]


@pytest.mark.parametrize(
    ("token", "code", "details", "error"),
    [
        ("wrong", grpc.StatusCode.UNAUTHENTICATED, "unknown bot token", None),
        (
            TOKEN,
            grpc.StatusCode.FAILED_PRECONDITION,
            "protocol 1 is not supported",
            ProtocolError(ErrorCode.UNSUPPORTED_PROTOCOL, "speak protocol 2"),
        ),
        (
            TOKEN,
            grpc.StatusCode.ABORTED,
            "superseded by a newer connection with the same token",
            None,
        ),
    ],
)
def test_rejections_are_not_retried(
    token: str, code: grpc.StatusCode, details: str, error: ProtocolError | None
) -> None:
    async def script(conn: Connection) -> None:
        await conn.recv()
        if error is not None:
            await conn.send(error)
        await conn.abort(code, details)

    arena = FakeArena(script)
    with pytest.raises(ConnectionRejected) as caught:
        asyncio.run(play(arena, Recorder(), token=token))
    assert arena.connections == 1
    assert caught.value.code is code
    assert details in str(caught.value)
    assert caught.value.protocol_error == error


def test_without_reconnect_a_lost_stream_is_an_error() -> None:
    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.abort(grpc.StatusCode.UNAVAILABLE, "gone")

    arena = FakeArena(script)
    with pytest.raises(ConnectionLost, match="UNAVAILABLE: gone"):
        asyncio.run(play(arena, Recorder(), reconnect=False))
    assert arena.connections == 1


def test_stop_event_closes_the_stream() -> None:
    closed: list[list[BotMessage]] = []

    async def script(conn: Connection) -> None:
        await conn.handshake()
        arena.stop.set()  # what a bot's owner does to stop it
        closed.append(await conn.drain())

    arena = FakeArena(script)
    assert asyncio.run(play(arena, Recorder())) == 0
    assert closed == [[]]


def test_backoff_doubles_from_a_fifth_of_a_second_up_to_five() -> None:
    rng = random.Random(1)
    steps = [backoff_delay(attempt, rng) for attempt in range(10)]
    assert 0.1 <= steps[0] <= 0.2 and 0.2 <= steps[1] <= 0.4
    assert all(2.5 <= step <= 5.0 for step in steps[6:])
