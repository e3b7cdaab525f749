"""Hostile bots against a real referee process on 127.0.0.1 (tests/support/robust_arena.py):
garbage bytes, answers naming the wrong match or request, messages over 64 KiB, and handshake
failures."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import grpc
from scout.v1 import arena_pb2, game_pb2
from scout_arena.server.calls import EOF
from support.rawbot import (
    ACCEPTED,
    LOCAL_POOL,
    PLAY,
    STALE,
    UNKNOWN_MATCH,
    RawBot,
    action_choice,
    bearer,
    hello,
    legal_action,
    rejected,
    rotation_choice,
)
from support.robust_arena import TOKENS, Arena, SideMatches, arena, run, side_matches

GARBAGE = b"\x00\x00\x00this is not a BotMessage\xff\xff\xff\xff"


def test_garbage_bytes_end_the_call_with_an_error_and_the_referee_keeps_serving(
    tmp_path: Path,
) -> None:
    with arena(tmp_path, decode_errors=True) as game, side_matches(game) as side:
        match_id = run(_garbage(game, side))
        record = game.record(match_id)
    assert record["forfeits"] == [] and record["notes"] == []


async def _garbage(game: Arena, side: SideMatches) -> str:
    address = game.referee.address
    async with grpc.aio.insecure_channel(address, options=LOCAL_POOL) as channel:
        play = channel.stream_stream(
            PLAY, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        # Garbage instead of the Hello, then garbage after a good Hello.
        for prefix in ([], [hello().SerializeToString()]):
            call = play(None, metadata=bearer(TOKENS["raw"]))
            for chunk in prefix:
                await call.write(chunk)
            if prefix:
                raw = await call.read()
                assert isinstance(raw, bytes), raw
                first = arena_pb2.RefereeMessage.FromString(raw)
                assert first.WhichOneof("body") == "welcome"
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                await call.write(GARBAGE)
            with contextlib.suppress(grpc.aio.AioRpcError):
                while await call.read() is not EOF:
                    pass
            code = await asyncio.wait_for(call.code(), 10)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, code
            assert "could not be read as a scout.v1.BotMessage" in await call.details()
            await side.wait_more()
    assert game.referee.process.poll() is None
    # The token is not stuck: it connects afresh and plays a whole match.
    bot, welcome = await RawBot.connect(address, TOKENS["raw"])
    try:
        assert not welcome.resumed
        match_id = await game.create(["raw", "g3"], seed=81)
        ended = await bot.play_to_end(match_id)
        assert not ended.forfeited_seats
    finally:
        await bot.close()
    return match_id


def test_wrong_match_stale_requests_and_bad_messages_are_ignored_without_strikes(
    tmp_path: Path,
) -> None:
    with arena(tmp_path) as game, side_matches(game) as side:
        match_id, seat, foreign = run(_wrong_answers(game, side))
        record = game.record(match_id)
    assert record["forfeits"] == [] and record["notes"] == []
    assert record["meta"]["seats"][seat]["strikes"] == 0
    assert foreign in [info.match_id for info in side.finished]


async def _wrong_answers(game: Arena, side: SideMatches) -> tuple[str, int, str]:
    bot, _ = await RawBot.connect(game.referee.address, TOKENS["raw"])
    try:
        # A BotMessage with no body, and a second Hello: protocol errors, the stream stays.
        await bot.send(arena_pb2.BotMessage())
        error = await bot.expect("error")
        assert error.code == arena_pb2.ERROR_CODE_BAD_MESSAGE and error.message
        await bot.send(hello())
        error = await bot.expect("error")
        assert error.code == arena_pb2.ERROR_CODE_BAD_MESSAGE and "Hello" in error.message

        foreign = await side.running_or_last()  # a match between g1 and g2
        match_id = await game.create(["raw", "g3"], seed=51, decision_ms=5000)
        seat: int = (await bot.expect("match_start", match_id)).seat
        rotation = await bot.expect("rotation_request", match_id)
        rid = rotation.request_id
        a_show = game_pb2.Action(show=game_pb2.Show(start=0, length=1))

        # Match ids the bot is not seated in: UNKNOWN_MATCH, no strike.
        for other in (foreign, "m-no-such-match"):
            for answer in (rotation_choice(other, rid), action_choice(other, rid, a_show)):
                await bot.send(answer)
                result = await bot.expect("answer_result", other)
                assert (result.status, result.strikes) == (UNKNOWN_MATCH, 0), result
                assert result.reason
        # An ActionChoice naming the open rotation request, and a request id never sent.
        for answer, named in (
            (action_choice(match_id, rid, a_show), rid),
            (rotation_choice(match_id, rid + 10_000), rid + 10_000),
        ):
            await bot.send(answer)
            result = await bot.result(match_id, named)
            assert (result.status, result.strikes) == (STALE, 0), result
            assert str(rid) in result.reason  # names the request that is open
        # The real answer, then the same answer again.
        await bot.send(rotation_choice(match_id, rid))
        assert (await bot.result(match_id, rid)).status == ACCEPTED
        await bot.send(rotation_choice(match_id, rid, rotate=True))
        result = await bot.result(match_id, rid)
        assert (result.status, result.strikes) == (STALE, 0), result

        decision = await bot.decision(match_id)
        did = decision.request_id
        # A RotationChoice naming the open decision request; an answer with the old id.
        for answer, named in (
            (rotation_choice(match_id, did), did),
            (action_choice(match_id, rid, legal_action(decision)), rid),
        ):
            await bot.send(answer)
            result = await bot.result(match_id, named)
            assert (result.status, result.strikes) == (STALE, 0), result
        # An empty message mid-match: BAD_MESSAGE, and the decision is still open.
        await bot.send(arena_pb2.BotMessage())
        assert (await bot.expect("error")).code == arena_pb2.ERROR_CODE_BAD_MESSAGE
        await bot.send(action_choice(match_id, did, legal_action(decision)))
        result = await bot.result(match_id, did)
        assert (result.status, result.strikes) == (ACCEPTED, 0), result
        await bot.send(action_choice(match_id, did, legal_action(decision)))
        result = await bot.result(match_id, did)
        assert (result.status, result.strikes) == (STALE, 0), result

        ended = await bot.play_to_end(match_id)
        assert not ended.forfeited_seats
        # The match is over: answers naming it are UNKNOWN_MATCH.
        await bot.send(action_choice(match_id, did, legal_action(decision)))
        result = await bot.expect("answer_result", match_id, status=UNKNOWN_MATCH)
        assert result.strikes == 0
        strikes = {
            m.answer_result.strikes for m in bot.messages if m.WhichOneof("body") == "answer_result"
        }
        assert strikes == {0}
        assert not [m for m in bot.messages if m.WhichOneof("body") == "welcome"][1:]
    finally:
        await bot.close()
    return match_id, seat, foreign


def test_messages_over_64_kib_fail_the_call_with_resource_exhausted(tmp_path: Path) -> None:
    with arena(tmp_path) as game, side_matches(game):
        match_id = run(_oversized(game))
        record = game.record(match_id)
    assert record["forfeits"] == [] and record["notes"] == []


async def _oversized(game: Arena) -> str:
    address = game.referee.address
    big_hello = hello(name="x" * 100_000)
    assert big_hello.ByteSize() > 64 * 1024
    messages, code, details = await rejected(address, TOKENS["raw"], big_hello)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
    assert not messages

    bot, _ = await RawBot.connect(address, TOKENS["raw"])
    try:
        await bot.send(action_choice("m-" + "x" * 100_000, 1, None))
        code, details = await bot.wait_ended()
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
    finally:
        await bot.close()

    # Just under the limit is fine, and the token plays on.
    bot = RawBot(address, TOKENS["raw"])
    try:
        await bot.send(hello(name="x" * 60_000))
        welcome = await bot.expect("welcome")
        assert not welcome.resumed and welcome.bot_name == "raw"
        match_id = await game.create(["raw", "g3"], seed=61)
        ended = await bot.play_to_end(match_id)
        assert not ended.forfeited_seats
    finally:
        await bot.close()
    return match_id


def test_bad_tokens_and_bad_handshakes_end_the_call_with_the_documented_status(
    tmp_path: Path,
) -> None:
    with arena(tmp_path) as game, side_matches(game) as side:
        run(_handshakes(game, side))


async def _handshakes(game: Arena, side: SideMatches) -> None:
    address = game.referee.address
    # (Nothing is sent: a write racing the referee's abort makes grpc's Python client report
    # its own INTERNAL error instead of the call's status.)
    for token in ("not-a-token", "", None):
        messages, code, details = await rejected(address, token)
        assert code == grpc.StatusCode.UNAUTHENTICATED, (token, code, details)
        assert "unknown bot token" in details and not messages

    # With the token of g1, which is playing side matches meanwhile: failed handshakes must
    # leave its live stream alone.
    for first in (rotation_choice("m-x", 1), arena_pb2.BotMessage()):
        messages, code, details = await rejected(address, TOKENS["g1"], first)
        assert [(m.WhichOneof("body"), m.error.code) for m in messages] == [
            ("error", arena_pb2.ERROR_CODE_EXPECTED_HELLO)
        ]
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    messages, code, details = await rejected(address, TOKENS["g1"], hello(protocol_version=2))
    assert [(m.WhichOneof("body"), m.error.code) for m in messages] == [
        ("error", arena_pb2.ERROR_CODE_UNSUPPORTED_PROTOCOL)
    ]
    assert code == grpc.StatusCode.FAILED_PRECONDITION, (code, details)
    assert "protocol version 2" in details
    await side.wait_more()
    assert game.referee.log().count("bot g1 connected") == 1  # never superseded
