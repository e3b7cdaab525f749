"""Hostile bots against a real referee process on 127.0.0.1.

The misbehaving bot is a raw grpc.aio client written with the generated stubs
(`support.rawbot.RawBot`); its opponents and every other seat are real `scout-arena bot run
greedy` processes. Each test checks that the offender gets a clear error, that nothing crashes,
that matches between other, well-behaved bots running on the same referee at the same time
finish normally (`SideMatches`), and that every record, the offender's match included, passes
`replay()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from referee_support import (
    RefereeProcess,
    admin_metadata,
    create_match,
    fetch_record,
    running_referee,
    start_bot,
    wait_connected,
    wait_finished,
)
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.record import replay
from scout_arena.server.calls import EOF
from scout_rules import IllegalAction
from scout_rules import Show as EngineShow
from scout_rules.moves import check_show
from support.rawbot import (
    ACCEPTED,
    ILLEGAL,
    LOCAL_POOL,
    MALFORMED,
    PLAY,
    STALE,
    TIMED_OUT,
    UNKNOWN_MATCH,
    RawBot,
    action_choice,
    bearer,
    body,
    hello,
    is_request,
    legal_action,
    legal_answer,
    rejected,
    rotation_choice,
)

pytestmark = pytest.mark.timeout(120)

TOKENS = {"g1": "tok-g1", "g2": "tok-g2", "g3": "tok-g3", "raw": "tok-raw", "raw2": "tok-raw2"}
GREEDY = ("g1", "g2", "g3")
T = TypeVar("T")


# ----- an unlisted Show, and the engine's reason for rejecting it --------------------------------


def illegal_show(request: arena_pb2.DecisionRequest) -> tuple[game_pb2.Show, str]:
    """A Show inside the hand that is not listed as legal, and the engine's reason for
    rejecting it (checked against the engine: every unlisted group must really be illegal)."""
    faces = [c.face for c in request.observation.hand]
    active = [c.face for c in request.observation.active_set]
    listed = {(s.start, s.length) for s in request.legal_shows}
    for length in [*range(2, len(faces) + 1), 1]:
        for start in range(len(faces) - length + 1):
            if (start, length) in listed:
                continue
            try:
                check_show(faces, EngineShow(start, length), active)
            except IllegalAction as exc:
                return game_pb2.Show(start=start, length=length), str(exc)
            raise AssertionError(f"show {start}+{length} is legal but not in legal_shows")
    raise AssertionError(f"every group of hand {faces} is legal against {active}")


# ----- the referee, its well-behaved bots and their matches -------------------------------------


@dataclass
class Arena:
    referee: RefereeProcess
    stub: matches_pb2_grpc.MatchesStub

    async def create(self, bots: Sequence[str], seed: int, decision_ms: int = 0,
                     time_bank_ms: int = 0) -> str:
        info = await asyncio.to_thread(create_match, self.stub, bots, seed, decision_ms,
                                       time_bank_ms)
        return info.match_id

    async def finished(self, match_id: str, timeout: float = 30.0) -> matches_pb2.MatchInfo:
        info = await asyncio.to_thread(wait_finished, self.stub, match_id, timeout)
        assert info.status == matches_pb2.MATCH_STATUS_FINISHED, info
        return info

    async def info(self, match_id: str) -> matches_pb2.MatchInfo:
        info: matches_pb2.MatchInfo = await asyncio.to_thread(
            self.stub.GetMatch, matches_pb2.GetMatchRequest(match_id=match_id),
            metadata=admin_metadata(), timeout=5)
        return info

    def record(self, match_id: str) -> dict[str, Any]:
        """The finished match's record, after checking that it replays."""
        record = fetch_record(self.stub, match_id)
        replay(record)
        assert record["finished"] is True
        return record


@contextlib.contextmanager
def arena(tmp_path: Path, *referee_args: str, decode_errors: bool = False) -> Iterator[Arena]:
    """A referee with every token of TOKENS and the greedy bots g1, g2, g3 connected; checked
    for health when the block ends."""
    with running_referee(tmp_path, TOKENS, *referee_args) as referee:
        for name in GREEDY:
            start_bot(referee, "greedy", TOKENS[name])
        wait_connected(referee, GREEDY)
        channel, stub = referee.matches_stub()
        try:
            yield Arena(referee, stub)
        finally:
            channel.close()
        assert_healthy(referee, decode_errors)


def assert_healthy(referee: RefereeProcess, decode_errors: bool = False) -> None:
    """The referee process is up, reports SERVING and logged no crash. With `decode_errors`,
    tracebacks of unparseable bot messages (logged by grpc itself) are tolerated."""
    assert referee.process.poll() is None, "the referee process died"
    with grpc.insecure_channel(referee.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "scout.v1.Arena"):
            response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert response.status == health_pb2.HealthCheckResponse.SERVING
    log = referee.log()
    assert "crashed" not in log, log
    tracebacks = log.count("Traceback")
    allowed = log.count("Unexpected [DecodeError] raised by servicer") if decode_errors else 0
    assert tracebacks <= allowed, log


class SideMatches:
    """Matches between g1 and g2, created one after another in a thread for as long as the
    `with` block runs: whatever a hostile bot does meanwhile, each must finish normally."""

    def __init__(self, arena: Arena, bots: Sequence[str] = ("g1", "g2")) -> None:
        self.arena = arena
        self.bots = list(bots)
        self.created: list[str] = []
        self.finished: list[matches_pb2.MatchInfo] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SideMatches:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        deadline = time.monotonic() + 30
        while not self.finished and self.error is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        channel, stub = self.arena.referee.matches_stub()
        try:
            seed = 9000
            while not self._stop.is_set():
                info = create_match(stub, self.bots, seed)
                self.created.append(info.match_id)
                seed += 1
                self.finished.append(wait_finished(stub, info.match_id, timeout=30))
                self._stop.wait(0.15)
        except BaseException as exc:  # reported by check()
            self.error = exc
        finally:
            channel.close()

    async def wait_more(self, timeout: float = 30.0) -> None:
        """Wait until a side match created from now on has finished."""
        wanted = len(self.created) + 1
        deadline = time.monotonic() + timeout
        while len(self.finished) < wanted:
            assert self.error is None, f"a side match failed: {self.error!r}"
            assert time.monotonic() < deadline, "no further side match finished"
            await asyncio.sleep(0.05)

    async def running_or_last(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while not self.created:
            assert self.error is None, f"a side match failed: {self.error!r}"
            assert time.monotonic() < deadline, "no side match was created"
            await asyncio.sleep(0.05)
        return self.created[-1]

    def check(self) -> None:
        assert self.error is None, f"a side match failed: {self.error!r}"
        assert self.finished, "no side match finished"
        for info in self.finished:
            assert info.status == matches_pb2.MATCH_STATUS_FINISHED, info
            assert not info.forfeited_seats, info
            record = self.arena.record(info.match_id)
            assert not record["notes"], record["notes"]
            assert all(seat["strikes"] == 0 for seat in record["meta"]["seats"])


@contextlib.contextmanager
def side_matches(arena: Arena) -> Iterator[SideMatches]:
    side = SideMatches(arena)
    with side:
        yield side
    side.check()


def run(scenario: Coroutine[Any, Any, T], timeout: float = 90.0) -> T:
    """Run a scenario; a hang fails it with a traceback instead of hitting pytest-timeout."""
    return asyncio.run(asyncio.wait_for(scenario, timeout))


def seat_notes(record: dict[str, Any], seat: int, strikes: bool = False) -> list[str]:
    """The kinds of a seat's notes, without the ``strike`` note that follows each strike's
    own note unless ``strikes``."""
    return [note["kind"] for note in record["notes"]
            if note["seat"] == seat and (strikes or note["kind"] != "strike")]


# ----- 1. timeouts and the bank ---------------------------------------------------------------


def test_late_answer_draws_on_bank_and_silence_times_out_into_fallbacks_then_forfeit(
        tmp_path: Path) -> None:
    with arena(tmp_path) as game, side_matches(game):
        match_id, seat, fallbacks, rotations = run(_late_then_silent(game))
        record = game.record(match_id)
    assert record["forfeits"] == [seat]
    kinds = [kind for kind in seat_notes(record, seat) if kind != "strike"]
    assert kinds == ["timeout", "timeout", "timeout", "forfeit"], record["notes"]
    forfeit = next(n for n in record["notes"] if n["kind"] == "forfeit")
    assert "3 strikes" in forfeit["detail"]
    meta = record["meta"]["seats"][seat]
    assert (meta["strikes"], meta["timeouts"], meta["forfeited"]) == (3, 3, True)
    # Every fallback the referee played is in the record as that exact action, flip included.
    for round_index, action_index, expected in fallbacks:
        assert record["rounds"][round_index]["actions"][action_index] == expected
    # A timed-out rotation is played as "do not rotate".
    for round_index in rotations:
        assert record["rounds"][round_index]["rotations"][seat] is False


async def _late_then_silent(game: Arena
                            ) -> tuple[str, int, list[tuple[int, int, Any]], list[int]]:
    bot, _ = await RawBot.connect(game.referee.address, TOKENS["raw"])
    try:
        match_id = await game.create(["raw", "g3", "g1"], seed=11, decision_ms=100,
                                     time_bank_ms=300)
        start = await bot.expect("match_start", match_id)
        seat = start.seat
        assert (start.time_bank_ms, start.strikes, start.resumed) == (300, 0, False)
        assert (start.time_control.decision_ms, start.time_control.time_bank_ms) == (100, 300)

        # The first decision, answered ~250 ms after it arrived: 150 ms over the deadline.
        decision = await bot.decision(match_id)
        bank = decision.time_bank_ms  # 300, unless answering the rotation took > 100 ms
        assert decision.deadline_ms == 100 and 200 <= bank <= 300, decision
        await asyncio.sleep(0.25)
        await bot.send(action_choice(match_id, decision.request_id, legal_action(decision)))
        result = await bot.result(match_id, decision.request_id)
        assert result.status == ACCEPTED, result
        assert result.strikes == 0
        assert 0 < result.time_bank_ms <= bank - 149, result  # bank - (>= 250 - 100)

        # Silence from now on: each request times out, the first after deadline + what is
        # left of the bank, the others after the bare deadline; the third timeout forfeits.
        timeouts = []
        for strikes in (1, 2, 3):
            timed_out = await bot.expect("answer_result", match_id, status=TIMED_OUT)
            assert (timed_out.strikes, timed_out.time_bank_ms) == (strikes, 0), timed_out
            assert timed_out.reason
            timeouts.append(timed_out)
            if strikes == 1:
                # An answer to the expired request is STALE and costs nothing.
                expired = [m for m in bot.messages if is_request(m, match_id)
                           and body(m).request_id == timed_out.request_id][-1]
                await bot.send(legal_answer(expired))
                stale = await bot.expect("answer_result", match_id, status=STALE)
                assert stale.request_id == timed_out.request_id
        # After the forfeit an answer is STALE too, and strikes stay at 3.
        expired = [m for m in bot.messages if is_request(m, match_id)][-1]
        await bot.send(legal_answer(expired))
        stale = await bot.expect("answer_result", match_id, status=STALE)
        assert stale.strikes == 3
        ended = await bot.expect("match_ended", match_id, timeout=30)
    finally:
        await bot.close()

    assert list(ended.forfeited_seats) == [seat]
    others = [rank for s, rank in enumerate(ended.ranks) if s != seat]
    assert ended.ranks[seat] > max(others), ended

    messages = bot.messages
    last_timeout = bot.index(timeouts[-1])
    assert not [m for m in messages[last_timeout:] if is_request(m, match_id)], \
        "a request was sent to the seat after it forfeited"
    fallbacks: list[tuple[int, int, Any]] = []
    rotations: list[int] = []
    for timed_out in timeouts:
        at = bot.index(timed_out)
        request = [m for m in messages[:at] if is_request(m, match_id)][-1]
        assert body(request).request_id == timed_out.request_id
        if request.WhichOneof("body") == "rotation_request":
            rotations.append(request.rotation_request.round_index)
            continue
        decision = request.decision_request
        # The fallback is the next PublicEvent: by the referee, for this seat, and it is
        # legal_shows[0] if there is one, else Scout{END_LEFT, flip=false, insert_at=0}.
        event = next(body(m) for m in messages[at:] if m.WhichOneof("body") == "public_event")
        action = event.action
        assert (action.seat, action.by_referee) == (seat, True), action
        if decision.legal_shows:
            first = decision.legal_shows[0]
            assert action.kind == game_pb2.ACTION_KIND_SHOW
            assert (action.start, action.length) == (first.start, first.length)
            expected: Any = {"seat": seat, "show": {"start": first.start,
                                                    "length": first.length}}
        else:
            assert decision.legal_scouts[0] == game_pb2.Scout(end=game_pb2.END_LEFT)
            assert action.kind == game_pb2.ACTION_KIND_SCOUT
            assert (action.end, action.insert_at) == (game_pb2.END_LEFT, 0)
            assert action.cards[0] == decision.observation.active_set[0]
            expected = {"seat": seat, "scout": {"end": "left", "flip": False, "insert_at": 0}}
        index = sum(1 for m in messages[:at] if m.WhichOneof("body") == "public_event"
                    and m.public_event.match_id == match_id
                    and m.public_event.round_index == event.round_index)
        fallbacks.append((event.round_index, index, expected))
    assert fallbacks, "no decision request timed out"
    # After the forfeit the referee plays every turn of the seat.
    for message in messages[last_timeout:]:
        if message.WhichOneof("body") == "public_event" and \
                message.public_event.action.seat == seat:
            assert message.public_event.action.by_referee
    return match_id, seat, fallbacks, rotations


# ----- 2. illegal and malformed answers --------------------------------------------------------


def test_illegal_and_malformed_answers_are_strikes_the_request_stays_open_three_forfeit(
        tmp_path: Path) -> None:
    with arena(tmp_path) as game, side_matches(game):
        outcome = run(_illegal_answers(game))
        records = {name: game.record(match_id) for name, (match_id, _) in outcome.items()}

    _, kept_seat = outcome["kept"]
    kept = records["kept"]
    assert kept["forfeits"] == []
    assert seat_notes(kept, kept_seat) == ["illegal_action", "malformed_action"]
    assert kept["meta"]["seats"][kept_seat]["illegal_actions"] == 2
    first = next(n for n in kept["notes"] if n["kind"] == "illegal_action")
    assert "neither a set nor a run" in first["detail"] or "does not beat" in first["detail"]

    for name in ("illegal", "malformed"):
        _, seat = outcome[name]
        record = records[name]
        assert record["forfeits"] == [seat]
        kind = "illegal_action" if name == "illegal" else "malformed_action"
        assert seat_notes(record, seat) == [kind] * 3 + ["forfeit"], record["notes"]
        assert seat_notes(record, seat, strikes=True) == [kind, "strike"] * 3 + ["forfeit"]
        assert record["meta"]["seats"][seat]["strikes"] == 3


async def _illegal_answers(game: Arena) -> dict[str, tuple[str, int]]:
    bot, _ = await RawBot.connect(game.referee.address, TOKENS["raw"], max_matches=3)
    try:
        ids = [await game.create(["raw", "g3"], seed=seed) for seed in (21, 22, 23)]
        # Three matches at once over the one stream, each scripted by its own coroutine.
        outcomes = await asyncio.gather(_strikes_without_forfeit(bot, ids[0]),
                                        _three_illegal(bot, ids[1]),
                                        _three_malformed(bot, ids[2]))
        for match_id in ids:
            await game.finished(match_id)
        return dict(zip(("kept", "illegal", "malformed"), zip(ids, outcomes, strict=True),
                        strict=True))
    finally:
        await bot.close()


async def _strikes_without_forfeit(bot: RawBot, match_id: str) -> int:
    start = await bot.expect("match_start", match_id)
    decision = await bot.decision(match_id)
    request_id = decision.request_id
    show, reason = illegal_show(decision)
    await bot.send(action_choice(match_id, request_id, game_pb2.Action(show=show)))
    result = await bot.result(match_id, request_id)
    assert (result.status, result.reason, result.strikes) == (ILLEGAL, reason, 1), result
    # The request stays open: the legal answer to the same request_id is played.
    await bot.send(action_choice(match_id, request_id, legal_action(decision)))
    result = await bot.result(match_id, request_id)
    assert (result.status, result.strikes) == (ACCEPTED, 1), result

    decision = await bot.decision(match_id)
    size = len(decision.observation.hand)
    out_of_range = game_pb2.Action(show=game_pb2.Show(start=size, length=1))
    await bot.send(action_choice(match_id, decision.request_id, out_of_range))
    result = await bot.result(match_id, decision.request_id)
    assert (result.status, result.strikes) == (MALFORMED, 2), result
    assert f"outside your hand of {size} cards" in result.reason
    await bot.send(action_choice(match_id, decision.request_id, legal_action(decision)))
    assert (await bot.result(match_id, decision.request_id)).status == ACCEPTED

    ended = await bot.play_to_end(match_id)
    assert not ended.forfeited_seats
    results = [body(m) for m in bot.messages if m.WhichOneof("body") == "answer_result"
               and m.answer_result.match_id == match_id]
    assert max(r.strikes for r in results) == 2
    seat: int = start.seat
    return seat


async def _forfeit_follows(bot: RawBot, match_id: str, seat: int, last_result: Any) -> None:
    """After a third strike: no more requests, the referee plays the seat, it ranks last."""
    ended = await bot.expect("match_ended", match_id)
    assert list(ended.forfeited_seats) == [seat]
    assert ended.ranks[seat] > ended.ranks[1 - seat]
    after = bot.messages[bot.index(last_result):]
    assert not [m for m in after if is_request(m, match_id)]
    own = [m.public_event.action for m in after if m.WhichOneof("body") == "public_event"
           and m.public_event.match_id == match_id and m.public_event.action.seat == seat]
    assert own and all(action.by_referee for action in own)


async def _three_illegal(bot: RawBot, match_id: str) -> int:
    seat: int = (await bot.expect("match_start", match_id)).seat
    decision = await bot.decision(match_id)
    show, reason = illegal_show(decision)
    result = None
    for strikes in (1, 2, 3):
        await bot.send(action_choice(match_id, decision.request_id,
                                     game_pb2.Action(show=show)))
        result = await bot.result(match_id, decision.request_id)
        assert (result.status, result.reason, result.strikes) == (ILLEGAL, reason, strikes)
    await _forfeit_follows(bot, match_id, seat, result)
    return seat


async def _three_malformed(bot: RawBot, match_id: str) -> int:
    seat: int = (await bot.expect("match_start", match_id)).seat
    decision = await bot.decision(match_id)
    unspecified_end = game_pb2.Action(scout=game_pb2.Scout(end=game_pb2.END_UNSPECIFIED))
    result = None
    for strikes, action in enumerate((None, game_pb2.Action(), unspecified_end), start=1):
        await bot.send(action_choice(match_id, decision.request_id, action))
        result = await bot.result(match_id, decision.request_id)
        assert (result.status, result.strikes) == (MALFORMED, strikes), result
        assert result.reason
    await _forfeit_follows(bot, match_id, seat, result)
    return seat


# ----- 3. disconnect and reconnect --------------------------------------------------------------


def test_reconnect_within_grace_resumes_the_match_with_its_open_request(tmp_path: Path) -> None:
    with arena(tmp_path, "--reconnect-grace", "3") as game, side_matches(game):
        match_id, seat = run(_reconnect_within_grace(game))
        record = game.record(match_id)
    assert record["forfeits"] == []
    assert not {"timeout", "illegal_action", "malformed_action", "strike",
                "forfeit"} & set(seat_notes(record, seat, strikes=True))
    assert record["meta"]["seats"][seat]["strikes"] == 0


async def _reconnect_within_grace(game: Arena) -> tuple[str, int]:
    address = game.referee.address
    first, _ = await RawBot.connect(address, TOKENS["raw"])
    try:
        match_id = await game.create(["raw", "g3"], seed=31, decision_ms=4000,
                                     time_bank_ms=4000)
        seat: int = (await first.expect("match_start", match_id)).seat
        decision = await first.decision(match_id)
    finally:
        await first.close()  # mid-match, with the decision open
    second, welcome = await RawBot.connect(address, TOKENS["raw"])
    try:
        assert welcome.resumed and welcome.bot_name == "raw"
        start = await second.expect("match_start", match_id)
        assert (start.resumed, start.seat, start.strikes, start.time_bank_ms) == \
            (True, seat, 0, 4000), start
        again = await second.expect("decision_request", match_id)
        assert second.index(welcome) < second.index(start) < second.index(again)
        assert again.request_id == decision.request_id
        assert again.observation == decision.observation
        assert list(again.legal_shows) == list(decision.legal_shows)
        assert list(again.legal_scouts) == list(decision.legal_scouts)
        assert 0 < again.deadline_ms <= 4000 and again.time_bank_ms == 4000, again
        await second.send(action_choice(match_id, again.request_id, legal_action(again)))
        result = await second.result(match_id, again.request_id)
        assert (result.status, result.strikes) == (ACCEPTED, 0), result
        ended = await second.play_to_end(match_id)
        assert not ended.forfeited_seats
        statuses = {m.answer_result.status for m in second.messages
                    if m.WhichOneof("body") == "answer_result"}
        assert statuses == {ACCEPTED}
    finally:
        await second.close()
    return match_id, seat


def test_no_reconnect_within_grace_forfeits_the_seat_and_the_match_finishes(
        tmp_path: Path) -> None:
    with arena(tmp_path, "--reconnect-grace", "1") as game, side_matches(game):
        match_id, seat = run(_grace_expires(game))
        record = game.record(match_id)
    assert record["forfeits"] == [seat]
    notes = [n for n in record["notes"] if n["seat"] == seat
             and n["kind"] in ("disconnect", "timeout", "illegal_action", "forfeit")]
    assert [n["kind"] for n in notes] == ["disconnect", "forfeit"], record["notes"]
    assert "disconnected" in notes[-1]["detail"]
    assert record["meta"]["seats"][seat]["strikes"] == 0


async def _grace_expires(game: Arena) -> tuple[str, int]:
    address = game.referee.address
    leaver, _ = await RawBot.connect(address, TOKENS["raw"])
    staller, _ = await RawBot.connect(address, TOKENS["raw2"])
    try:
        match_id = await game.create(["raw", "raw2", "g3"], seed=41, decision_ms=20_000,
                                     time_bank_ms=1000)
        seat: int = (await leaver.expect("match_start", match_id)).seat
        await leaver.expect("rotation_request", match_id)
        # raw2 holds its rotation open, so the match is still running when the grace ends.
        held = await staller.expect("rotation_request", match_id)
        await leaver.close()
        left_at = time.monotonic()
        while seat not in (info := await game.info(match_id)).forfeited_seats:
            assert time.monotonic() - left_at < 15, "the seat never forfeited"
            await asyncio.sleep(0.05)
        assert time.monotonic() - left_at >= 0.9, "forfeited before the grace ended"
        assert info.status == matches_pb2.MATCH_STATUS_RUNNING

        # A connection after the grace resumes nothing.
        late, welcome = await RawBot.connect(address, TOKENS["raw"])
        try:
            assert not welcome.resumed
            await staller.send(rotation_choice(match_id, held.request_id))
            ended = await staller.play_to_end(match_id)
            assert list(ended.forfeited_seats) == [seat]
            assert ended.ranks[seat] > max(r for s, r in enumerate(ended.ranks) if s != seat)
            await game.finished(match_id)
            await asyncio.sleep(0.3)  # anything still in flight to `late` arrives
            about = [m for m in late.messages
                     if getattr(body(m), "match_id", None) == match_id]
            assert not about, about
        finally:
            await late.close()
    finally:
        await staller.close()
    return match_id, seat


def test_a_bot_that_never_reads_its_stream_costs_only_its_own_seats(tmp_path: Path) -> None:
    with arena(tmp_path) as game, side_matches(game):
        outcome = run(_never_reads(game))
        for match_id, seat in outcome:
            record = game.record(match_id)
            assert record["forfeits"] == [seat]
            assert seat_notes(record, seat) == ["timeout"] * 3 + ["forfeit"], record["notes"]


async def _never_reads(game: Arena) -> list[tuple[str, int]]:
    async with grpc.aio.insecure_channel(game.referee.address, options=LOCAL_POOL) as channel:
        call = arena_pb2_grpc.ArenaStub(channel).Play(None, metadata=bearer(TOKENS["raw"]))
        await call.write(hello(max_matches=2))
        await asyncio.to_thread(wait_connected, game.referee, ["raw"])
        ids = [await game.create(bots, seed=seed, decision_ms=100, time_bank_ms=100)
               for bots, seed in ((["raw", "g3", "g1"], 91), (["g2", "raw"], 92))]
        outcome = []
        for match_id in ids:
            info = await game.finished(match_id)
            seat = list(info.bots).index("raw")
            assert list(info.forfeited_seats) == [seat], info
            outcome.append((match_id, seat))
        call.cancel()
    return outcome


# ----- 4. garbage bytes -------------------------------------------------------------------------

GARBAGE = b"\x00\x00\x00this is not a BotMessage\xff\xff\xff\xff"


def test_garbage_bytes_end_the_call_with_an_error_and_the_referee_keeps_serving(
        tmp_path: Path) -> None:
    with arena(tmp_path, decode_errors=True) as game, side_matches(game) as side:
        match_id = run(_garbage(game, side))
        record = game.record(match_id)
    assert record["forfeits"] == [] and record["notes"] == []


async def _garbage(game: Arena, side: SideMatches) -> str:
    address = game.referee.address
    async with grpc.aio.insecure_channel(address, options=LOCAL_POOL) as channel:
        play = channel.stream_stream(PLAY, request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)
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


# ----- 5. answers naming the wrong match or request ---------------------------------------------


def test_wrong_match_stale_requests_and_bad_messages_are_ignored_without_strikes(
        tmp_path: Path) -> None:
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
        for answer, named in ((action_choice(match_id, rid, a_show), rid),
                              (rotation_choice(match_id, rid + 10_000), rid + 10_000)):
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
        for answer, named in ((rotation_choice(match_id, did), did),
                              (action_choice(match_id, rid, legal_action(decision)), rid)):
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
        strikes = {m.answer_result.strikes for m in bot.messages
                   if m.WhichOneof("body") == "answer_result"}
        assert strikes == {0}
        assert not [m for m in bot.messages if m.WhichOneof("body") == "welcome"][1:]
    finally:
        await bot.close()
    return match_id, seat, foreign


# ----- 6. oversized messages --------------------------------------------------------------------


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


# ----- 7. two connections with one token --------------------------------------------------------


def test_a_newer_connection_with_the_same_token_supersedes_the_older_and_takes_its_match(
        tmp_path: Path) -> None:
    with arena(tmp_path) as game, side_matches(game):
        match_id, seat = run(_supersede(game))
        record = game.record(match_id)
    assert record["forfeits"] == []
    assert [(n["kind"], n["seat"]) for n in record["notes"]] == [("reconnect", seat)]
    assert "newer connection took over" in record["notes"][0]["detail"]
    assert record["meta"]["seats"][seat]["strikes"] == 0


async def _supersede(game: Arena) -> tuple[str, int]:
    address = game.referee.address
    oldest, welcome = await RawBot.connect(address, TOKENS["raw"])
    older = newer = None
    try:
        assert not welcome.resumed
        older, welcome = await RawBot.connect(address, TOKENS["raw"])
        assert not welcome.resumed  # no match to take over
        code, details = await oldest.wait_ended()
        assert code == grpc.StatusCode.ABORTED and "superseded" in details, (code, details)

        match_id = await game.create(["raw", "g3"], seed=71, decision_ms=5000)
        seat: int = (await older.expect("match_start", match_id)).seat
        rotation = await older.expect("rotation_request", match_id)
        newer, welcome = await RawBot.connect(address, TOKENS["raw"])
        assert welcome.resumed
        code, details = await older.wait_ended()
        assert code == grpc.StatusCode.ABORTED and "superseded" in details, (code, details)
        start = await newer.expect("match_start", match_id)
        assert (start.resumed, start.seat, start.strikes) == (True, seat, 0)
        again = await newer.expect("rotation_request", match_id)
        assert newer.index(welcome) < newer.index(start) < newer.index(again)
        assert (again.request_id, list(again.hand)) == (rotation.request_id, list(rotation.hand))
        await newer.send(rotation_choice(match_id, again.request_id))
        result = await newer.result(match_id, again.request_id)
        assert (result.status, result.strikes) == (ACCEPTED, 0), result
        ended = await newer.play_to_end(match_id)
        assert not ended.forfeited_seats
    finally:
        for bot in (oldest, older, newer):
            if bot is not None:
                await bot.close()
    return match_id, seat


# ----- 8. handshake failures --------------------------------------------------------------------


def test_bad_tokens_and_bad_handshakes_end_the_call_with_the_documented_status(
        tmp_path: Path) -> None:
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
        assert [(m.WhichOneof("body"), m.error.code) for m in messages] == \
            [("error", arena_pb2.ERROR_CODE_EXPECTED_HELLO)]
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    messages, code, details = await rejected(address, TOKENS["g1"], hello(protocol_version=2))
    assert [(m.WhichOneof("body"), m.error.code) for m in messages] == \
        [("error", arena_pb2.ERROR_CODE_UNSUPPORTED_PROTOCOL)]
    assert code == grpc.StatusCode.FAILED_PRECONDITION, (code, details)
    assert "protocol version 2" in details
    await side.wait_more()
    assert game.referee.log().count("bot g1 connected") == 1  # never superseded
