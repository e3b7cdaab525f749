"""Property-based fuzzing (hypothesis) of everything a bot can send, on live streams.

One real referee process (`scout-arena referee serve`, module fixture) serves the whole module.
Four honest `scout-arena bot run random` processes keep matches going the whole time: h1, h2
(and h3) play 2- and 3-player matches among themselves, created one after another by keepers in
this process; h3 and h4 are also the opponents of the fuzzing bot. A fuzzing bot, a raw grpc.aio
client that sends and reads *bytes* (``support.rawbot.RawCall``: ``channel.stream_stream``
without serializers), connects with its own token and per hypothesis example sends

* (a) random bytes, or random but well-formed protobuf wire data, as one BotMessage frame;
* (b) a valid BotMessage (a Hello, or the right answer to its open request) with bit flips,
  byte edits or truncations;
* (c) structurally valid BotMessages with hostile values: wrong or foreign match ids, request ids
  of other seats, huge ones, repeated answers, enum values out of range, empty oneofs, a second
  Hello, strings that bring the message to just under or just over 64 KiB, unknown fields.

Every frame must get the one reaction PROTOCOL.md documents for it (§3.3, §3.7, §8, §9, §10,
§11.2), judged from what the bot knows when the reaction arrives (its open requests, strikes and
matches, kept from the referee's own messages) and from the docs' rules (§2, §6) as the
independent rules oracle of tests/support/oracle.py states them, not from the referee's code:

* it does not parse as a BotMessage: the call ends with INVALID_ARGUMENT (the status §8.3 gives
  to an unusable first message; §8 has no row for an unparseable later one);
* it is larger than 64 KiB: the call ends with RESOURCE_EXHAUSTED (§11.2, §8.3);
* a BotMessage with no body, an empty BotBundle (§3.6.2), or a second Hello:
  ProtocolError{BAD_MESSAGE}, the stream stays;
* a RotationChoice/ActionChoice: exactly one AnswerResult echoing its match_id and request_id,
  status ACCEPTED / ILLEGAL / MALFORMED (it answers the open request; strikes +1 for the latter
  two, forfeit at 3) / STALE (the match is the bot's, the request is not open or of the other
  kind) / UNKNOWN_MATCH (not a running match of the bot's), with the documented strikes, bank
  and reason;
* as first message of a call: ProtocolError{EXPECTED_HELLO} + INVALID_ARGUMENT,
  ProtocolError{UNSUPPORTED_PROTOCOL} + FAILED_PRECONDITION, or a Welcome; an unknown token
  UNAUTHENTICATED; a call that sends nothing DEADLINE_EXCEEDED after 10 s.

After a call that ended, the bot reconnects and checks the resync of §10 (Welcome.resumed,
MatchStart{resumed} with its strikes, the open request again with the same request_id). Every
DecisionRequest it receives is checked against the documented legal lists. Every wait is bounded
(a hang fails with the bot's recent history); after every example the referee must still answer
health checks with SERVING. Each test counts the honest matches finished (Matches.ListMatches)
before and after and requires more; the last test replays every record (honest and fuzzed) with
`scout_arena.record.replay` and checks that honest seats never got a strike.

The live referee is one long-running state machine, so examples cannot be re-run identically:
shrinking is off (a failing example is reported as found) and failures would show up as hypothesis
"Flaky" errors carrying the original assertion."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from referee_support import (
    running_referee,
    start_bot,
    wait_connected,
)
from scout.v1 import arena_pb2
from scout_arena.record import replay
from support.fuzz_bot import FuzzBot
from support.fuzz_frames import (
    FIRST_FRAMES,
    FRAMES,
    HOSTILE,
    MUTATION,
    Hostile,
    hostile_frame,
    mutate,
)
from support.fuzz_live import Live, LoopThread
from support.fuzz_oracle import (
    EXPECTED_HELLO,
    FINISHED,
    FUZZ_MAX_MATCHES,
    FUZZ_SETTINGS,
    HELLO_TIMEOUT_S,
    HONEST,
    LIMIT,
    REACTION_S,
    SHAKER,
    TOKENS,
    UNSUPPORTED_PROTOCOL,
    parse_bot_message,
    sized,
)
from support.rawbot import (
    EOF,
    PLAY,
    RawCall,
    hello,
    kind_of,
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("fuzz-bot-messages")
    with running_referee(tmp, TOKENS) as referee:
        for name in HONEST:
            start_bot(referee, "random", TOKENS[name])
        wait_connected(referee, HONEST, timeout=60)
        loop = LoopThread()
        arena = Live(referee, loop)
        try:
            arena.run(arena.start(), 60)
            yield arena
        finally:
            with contextlib.suppress(Exception):
                arena.run(arena.stop(), 30)
            loop.close()


def around_examples(live: Live, examples: Any, phase: str) -> None:
    """Count honest finished matches, run the examples, require more finished afterwards."""
    live.fuzz.phase = phase
    before = live.run(live.honest_finished())
    examples()
    live.run(live.wait_more_honest(before))
    live.run(live.check_health())


async def after_example(live: Live, bot: FuzzBot, advance: bool, pick: int) -> None:
    if advance:
        await bot.advance(pick)
    await bot.settle()
    await live.check_health()


@FUZZ_SETTINGS
@given(frame=FRAMES, pick=st.integers(0, 1000), advance=st.booleans())
def _random_frames(live: Live, frame: bytes, pick: int, advance: bool) -> None:
    async def example() -> None:
        bot = live.fuzz
        await bot.ensure_target()
        await bot.exchange(frame, "random bytes")
        await after_example(live, bot, advance, pick)

    live.run(example())


def test_random_bytes_as_bot_messages_get_a_documented_reaction(live: Live) -> None:
    around_examples(live, lambda: _random_frames(live), "(a) random")
    assert live.fuzz.outcomes, "no example ran"


@FUZZ_SETTINGS
@given(
    base=st.sampled_from(["legal", "legal", "legal", "hello", "stale", "foreign"]),
    ops=st.lists(MUTATION, min_size=1, max_size=3),
    pick=st.integers(0, 1000),
    advance=st.booleans(),
)
def _mutated_frames(
    live: Live, base: str, ops: list[tuple[str, int, int]], pick: int, advance: bool
) -> None:
    async def example() -> None:
        bot = live.fuzz
        await bot.ensure_target()
        seat = bot.target(pick)
        message = bot.legal_answer(seat, pick)
        if base == "hello":
            message = hello("fuzzer", version="1.0", max_matches=FUZZ_MAX_MATCHES)
        elif base == "stale":
            answer = getattr(message, kind_of(message) or "")
            answer.request_id += 1
        elif base == "foreign":
            answer = getattr(message, kind_of(message) or "")
            answer.match_id = (live.keepers[0].created or ["m-000000000000"])[-1]
        frame = mutate(message.SerializeToString(), ops)
        await bot.exchange(frame, f"mutated {base} {ops}")
        await after_example(live, bot, advance, pick)

    live.run(example())


def test_mutated_valid_messages_get_a_documented_reaction(live: Live) -> None:
    around_examples(live, lambda: _mutated_frames(live), "(b) mutated")


@FUZZ_SETTINGS
@given(example=HOSTILE, pick=st.integers(0, 1000), advance=st.booleans())
def _hostile_values(live: Live, example: Hostile, pick: int, advance: bool) -> None:
    async def run_example() -> None:
        bot = live.fuzz
        await bot.ensure_target()
        seat = bot.target(pick)
        frame = hostile_frame(example, bot, seat, live)
        for _ in range(example.repeat):
            await bot.exchange(
                frame,
                f"hostile {example.body} {example.match[0]} "
                f"{example.request[0]} {str(example.action)[:60]}",
            )
        await after_example(live, bot, advance, pick)

    live.run(run_example())


def test_hostile_field_values_get_a_documented_reaction(live: Live) -> None:
    around_examples(live, lambda: _hostile_values(live), "(c) hostile")


def test_exactly_64_kib_is_read_and_one_byte_more_ends_the_call(live: Live) -> None:
    """§11.2 "at most 64 KiB": a 65,536-byte answer naming no match is UNKNOWN_MATCH; 65,537
    bytes end the call with RESOURCE_EXHAUSTED, and the bot resumes its matches."""
    live.fuzz.phase = "explicit"

    async def scenario() -> list[str]:
        bot = live.fuzz
        await bot.ensure_target()
        labels = []
        for size in (LIMIT - 1, LIMIT, LIMIT + 1):
            frame = sized(
                size,
                lambda n: arena_pb2.BotMessage(
                    rotation=arena_pb2.RotationChoice(match_id="m" * n, request_id=1)
                ).SerializeToString(),
            )
            assert len(frame) == size
            labels.append(await bot.exchange(frame, f"{size}-byte rotation"))
        await live.check_health()
        return labels

    assert live.run(scenario()) == ["rotation -> ANSWER_STATUS_UNKNOWN_MATCH"] * 2 + [
        "call ended RESOURCE_EXHAUSTED"
    ]


@FUZZ_SETTINGS
@given(frame=FIRST_FRAMES)
def _first_frames(live: Live, frame: bytes) -> None:
    async def example() -> None:
        call = RawCall(live.shaker_channel, TOKENS[SHAKER], bound=REACTION_S)
        try:
            await call.write(frame)
            parsed = parse_bot_message(frame)
            kind = None if parsed is None else kind_of(parsed)
            if parsed is not None and kind == "hello" and parsed.hello.protocol_version == 1:
                message = await call.next()
                assert message is not None and kind_of(message) == "welcome", message
                welcome = message.welcome
                assert (welcome.protocol_version, welcome.bot_name, welcome.resumed) == (
                    1,
                    SHAKER,
                    False,
                ), welcome
                return
            code, _ = await call.wait_ended(REACTION_S)
            bodies = [(kind_of(m), m.error.code) for m in call.messages]
            if parsed is None:
                # §8.3 gives no row to an unparseable frame; the referee ends the call with
                # INVALID_ARGUMENT, the status of an unusable first message (§3.3), which also
                # sends ProtocolError{EXPECTED_HELLO} first: at most that may precede it.
                assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, call.details)
                assert bodies in ([], [("error", EXPECTED_HELLO)]), bodies
            elif kind == "hello":
                assert code == grpc.StatusCode.FAILED_PRECONDITION, (code, call.details)
                assert bodies == [("error", UNSUPPORTED_PROTOCOL)], bodies
            else:
                assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, call.details)
                assert bodies == [("error", EXPECTED_HELLO)], bodies
            assert all(m.error.message for m in call.messages)
        finally:
            await call.close()
        await live.check_health()

    live.run(example())


def test_first_messages_get_the_documented_handshake_reaction(live: Live) -> None:
    around_examples(live, lambda: _first_frames(live), "first frames")


@settings(
    max_examples=30,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    value=st.one_of(
        st.none(),
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40).map(
            lambda t: f"Bearer {t}"
        ),
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
        st.sampled_from(
            [
                f"Bearer {TOKENS[SHAKER]}x",
                f"bearer {TOKENS[SHAKER]}",
                f"Basic {TOKENS[SHAKER]}",
                "Bearer",
                "Bearer ",
                TOKENS[SHAKER],
            ]
        ),
    )
)
def _tokens(live: Live, value: str | None) -> None:
    assume(
        value is None
        or not any(value.startswith("Bearer ") and value[7:].strip() == t for t in TOKENS.values())
    )

    async def example() -> None:
        method = live.shaker_channel.stream_stream(
            PLAY, request_serializer=None, response_deserializer=None
        )
        call: Any = method(None, metadata=None if value is None else (("authorization", value),))
        try:
            with contextlib.suppress(grpc.aio.AioRpcError):
                async with asyncio.timeout(REACTION_S):
                    while await call.read() is not EOF:
                        raise AssertionError("a message on an unauthenticated call")
            code = await asyncio.wait_for(call.code(), REACTION_S)
            assert code == grpc.StatusCode.UNAUTHENTICATED, (value, code)
            assert "unknown bot token" in (await call.details())
        finally:
            call.cancel()

    live.run(example())


def test_unknown_tokens_are_unauthenticated(live: Live) -> None:
    _tokens(live)
    live.run(live.check_health())


def test_undecodable_frames_end_the_call_with_invalid_argument(live: Live) -> None:
    """Pinned behaviour for a case §8 has no row for: bytes that are not a BotMessage end the
    call with INVALID_ARGUMENT, first or later; the bot then resumes its matches."""
    live.fuzz.phase = "explicit"
    garbage = b"\x0a\xff\xff\xff\xff\x0f"  # a length-delimited field running off the end
    assert parse_bot_message(garbage) is None

    async def scenario() -> tuple[grpc.StatusCode | None, str, list[str]]:
        call = RawCall(live.shaker_channel, TOKENS[SHAKER], bound=REACTION_S)
        try:
            await call.write(garbage)
            code, _ = await call.wait_ended(REACTION_S)
            first = (code, call.details, [str(kind_of(m)) for m in call.messages])
        finally:
            await call.close()
        bot = live.fuzz
        await bot.ensure_target()
        label = await bot.exchange(garbage, "garbage after Hello")
        assert label == "call ended INVALID_ARGUMENT", label
        assert bot.open_seats(), "the open request was not resumed"
        return first

    code, details, bodies = live.run(scenario())
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert "could not be read as a scout.v1.BotMessage" in details
    assert bodies in ([], ["error"]), bodies


def test_matches_kept_finishing_and_every_record_replays(live: Live) -> None:
    live.fuzz.phase = "aftermath"

    async def scenario() -> None:
        bot = live.fuzz
        await bot.settle()
        # Play the fuzzing bot's matches out legally, so that their records are complete.
        deadline = time.monotonic() + 90
        while bot.running():
            assert time.monotonic() < deadline, "the fuzzed matches did not finish"
            if bot.open_seats():
                await bot.advance(0)
            else:
                await bot.pump(5)

    live.run(scenario(), 180)
    # A call that sent nothing ended with DEADLINE_EXCEEDED after about 10 s (§3.3).
    deadline = time.monotonic() + HELLO_TIMEOUT_S + 30
    while live.silent_result is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live.silent_result is not None, "the silent call never ended"
    code, after = live.silent_result
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED, code
    assert HELLO_TIMEOUT_S - 1 <= after <= HELLO_TIMEOUT_S + 20, after

    errors = [e for k in live.keepers for e in k.errors]
    assert not errors, errors
    honest = [info for k in live.keepers for info in k.finished]
    assert honest, "no honest match finished"
    for info in honest:
        assert info.status == FINISHED and not info.forfeited_seats, info
        record = live.run(live.record(info.match_id))
        replay(record)
        assert record["finished"] and not record["notes"], record["notes"]
        assert all(s["strikes"] == 0 for s in record["meta"]["seats"])
    bot = live.fuzz
    for match_id in live.fuzz_matches:
        info = live.run(live.get_match(match_id))
        assert info.status == FINISHED, info  # not ABORTED: no match crashed
        record = live.run(live.record(match_id))
        replay(record)
        seat = bot.seats[match_id]
        for index, stats in enumerate(record["meta"]["seats"]):
            if index == seat.seat:
                assert (stats["strikes"], stats["forfeited"]) == (seat.strikes, seat.forfeited), (
                    match_id,
                    stats,
                    seat,
                )
            else:
                assert stats["strikes"] == 0 and not stats["forfeited"], (match_id, stats)
        assert {n["seat"] for n in record["notes"]} <= {seat.seat}, record["notes"]
    log = live.referee.log()
    assert "crashed" not in log and "Traceback" not in log, log[-5000:]
    print(
        f"\nfuzzing bot: {sum(bot.outcomes.values())} frames, {bot.reconnects} connections, "
        f"{bot.resumed_matches} matches resumed, {len(live.fuzz_matches)} matches fuzzed, "
        f"{len(honest)} honest matches finished"
    )
    for label, count in sorted(bot.outcomes.items()):
        print(f"  {count:5d}  {label}")
