"""Hostile bots against a real referee process on 127.0.0.1 (tests/support/robust_arena.py):
disconnects and reconnects within or past the grace period, a bot that never reads its stream,
and a newer connection with the same token."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
from referee_support import (
    wait_connected,
)
from scout.v1 import arena_pb2_grpc, matches_pb2
from support.rawbot import (
    ACCEPTED,
    LOCAL_POOL,
    RawBot,
    action_choice,
    bearer,
    body,
    hello,
    legal_action,
    rotation_choice,
)
from support.robust_arena import TOKENS, Arena, arena, run, seat_notes, side_matches


def test_reconnect_within_grace_resumes_the_match_with_its_open_request(tmp_path: Path) -> None:
    with arena(tmp_path, "--reconnect-grace", "3") as game, side_matches(game):
        match_id, seat = run(_reconnect_within_grace(game))
        record = game.record(match_id)
    assert record["forfeits"] == []
    assert not {"timeout", "illegal_action", "malformed_action", "strike", "forfeit"} & set(
        seat_notes(record, seat, strikes=True)
    )
    assert record["meta"]["seats"][seat]["strikes"] == 0


async def _reconnect_within_grace(game: Arena) -> tuple[str, int]:
    address = game.referee.address
    first, _ = await RawBot.connect(address, TOKENS["raw"])
    try:
        match_id = await game.create(["raw", "g3"], seed=31, decision_ms=4000, time_bank_ms=4000)
        seat: int = (await first.expect("match_start", match_id)).seat
        decision = await first.decision(match_id)
    finally:
        await first.close()  # mid-match, with the decision open
    second, welcome = await RawBot.connect(address, TOKENS["raw"])
    try:
        assert welcome.resumed and welcome.bot_name == "raw"
        start = await second.expect("match_start", match_id)
        assert (start.resumed, start.seat, start.strikes, start.time_bank_ms) == (
            True,
            seat,
            0,
            4000,
        ), start
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
        statuses = {
            m.answer_result.status
            for m in second.messages
            if m.WhichOneof("body") == "answer_result"
        }
        assert statuses == {ACCEPTED}
    finally:
        await second.close()
    return match_id, seat


def test_no_reconnect_within_grace_forfeits_the_seat_and_the_match_finishes(tmp_path: Path) -> None:
    with arena(tmp_path, "--reconnect-grace", "1") as game, side_matches(game):
        match_id, seat = run(_grace_expires(game))
        record = game.record(match_id)
    assert record["forfeits"] == [seat]
    notes = [
        n
        for n in record["notes"]
        if n["seat"] == seat and n["kind"] in ("disconnect", "timeout", "illegal_action", "forfeit")
    ]
    assert [n["kind"] for n in notes] == ["disconnect", "forfeit"], record["notes"]
    assert "disconnected" in notes[-1]["detail"]
    assert record["meta"]["seats"][seat]["strikes"] == 0


async def _grace_expires(game: Arena) -> tuple[str, int]:
    address = game.referee.address
    leaver, _ = await RawBot.connect(address, TOKENS["raw"])
    staller, _ = await RawBot.connect(address, TOKENS["raw2"])
    try:
        match_id = await game.create(
            ["raw", "raw2", "g3"], seed=41, decision_ms=20_000, time_bank_ms=1000
        )
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
            about = [m for m in late.messages if getattr(body(m), "match_id", None) == match_id]
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
        ids = [
            await game.create(bots, seed=seed, decision_ms=100, time_bank_ms=100)
            for bots, seed in ((["raw", "g3", "g1"], 91), (["g2", "raw"], 92))
        ]
        outcome = []
        for match_id in ids:
            info = await game.finished(match_id)
            seat = list(info.bots).index("raw")
            assert list(info.forfeited_seats) == [seat], info
            outcome.append((match_id, seat))
        call.cancel()
    return outcome


def test_a_newer_connection_with_the_same_token_supersedes_the_older_and_takes_its_match(
    tmp_path: Path,
) -> None:
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
