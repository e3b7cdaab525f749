"""Hostile bots against a real referee process on 127.0.0.1 (tests/support/robust_arena.py): late
and silent answers against the bank and the fallbacks, and illegal or malformed answers as
strikes up to a forfeit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from scout.v1 import game_pb2
from support.rawbot import (
    ACCEPTED,
    ILLEGAL,
    MALFORMED,
    STALE,
    TIMED_OUT,
    RawBot,
    action_choice,
    body,
    is_request,
    legal_action,
    legal_answer,
)
from support.robust_arena import TOKENS, Arena, arena, illegal_show, run, seat_notes, side_matches


def test_late_answer_draws_on_bank_and_silence_times_out_into_fallbacks_then_forfeit(
    tmp_path: Path,
) -> None:
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


async def _late_then_silent(game: Arena) -> tuple[str, int, list[tuple[int, int, Any]], list[int]]:
    bot, _ = await RawBot.connect(game.referee.address, TOKENS["raw"])
    try:
        match_id = await game.create(
            ["raw", "g3", "g1"], seed=11, decision_ms=100, time_bank_ms=300
        )
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
                expired = [
                    m
                    for m in bot.messages
                    if is_request(m, match_id) and body(m).request_id == timed_out.request_id
                ][-1]
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
    assert not [m for m in messages[last_timeout:] if is_request(m, match_id)], (
        "a request was sent to the seat after it forfeited"
    )
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
            expected: Any = {"seat": seat, "show": {"start": first.start, "length": first.length}}
        else:
            assert decision.legal_scouts[0] == game_pb2.Scout(end=game_pb2.END_LEFT)
            assert action.kind == game_pb2.ACTION_KIND_SCOUT
            assert (action.end, action.insert_at) == (game_pb2.END_LEFT, 0)
            assert action.cards[0] == decision.observation.active_set[0]
            expected = {"seat": seat, "scout": {"end": "left", "flip": False, "insert_at": 0}}
        index = sum(
            1
            for m in messages[:at]
            if m.WhichOneof("body") == "public_event"
            and m.public_event.match_id == match_id
            and m.public_event.round_index == event.round_index
        )
        fallbacks.append((event.round_index, index, expected))
    assert fallbacks, "no decision request timed out"
    # After the forfeit the referee plays every turn of the seat.
    for message in messages[last_timeout:]:
        if (
            message.WhichOneof("body") == "public_event"
            and message.public_event.action.seat == seat
        ):
            assert message.public_event.action.by_referee
    return match_id, seat, fallbacks, rotations


def test_illegal_and_malformed_answers_are_strikes_the_request_stays_open_three_forfeit(
    tmp_path: Path,
) -> None:
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
        outcomes = await asyncio.gather(
            _strikes_without_forfeit(bot, ids[0]),
            _three_illegal(bot, ids[1]),
            _three_malformed(bot, ids[2]),
        )
        for match_id in ids:
            await game.finished(match_id)
        return dict(
            zip(("kept", "illegal", "malformed"), zip(ids, outcomes, strict=True), strict=True)
        )
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
    results = [
        body(m)
        for m in bot.messages
        if m.WhichOneof("body") == "answer_result" and m.answer_result.match_id == match_id
    ]
    assert max(r.strikes for r in results) == 2
    seat: int = start.seat
    return seat


async def _forfeit_follows(bot: RawBot, match_id: str, seat: int, last_result: Any) -> None:
    """After a third strike: no more requests, the referee plays the seat, it ranks last."""
    ended = await bot.expect("match_ended", match_id)
    assert list(ended.forfeited_seats) == [seat]
    assert ended.ranks[seat] > ended.ranks[1 - seat]
    after = bot.messages[bot.index(last_result) :]
    assert not [m for m in after if is_request(m, match_id)]
    own = [
        m.public_event.action
        for m in after
        if m.WhichOneof("body") == "public_event"
        and m.public_event.match_id == match_id
        and m.public_event.action.seat == seat
    ]
    assert own and all(action.by_referee for action in own)


async def _three_illegal(bot: RawBot, match_id: str) -> int:
    seat: int = (await bot.expect("match_start", match_id)).seat
    decision = await bot.decision(match_id)
    show, reason = illegal_show(decision)
    result = None
    for strikes in (1, 2, 3):
        await bot.send(action_choice(match_id, decision.request_id, game_pb2.Action(show=show)))
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
