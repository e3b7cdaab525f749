"""End-to-end tests of the referee: a real `scout-arena referee serve` process with six real
`scout-arena bot run` processes (the shared fixture `arena`) and raw gRPC clients, on 127.0.0.1."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from referee_support import (
    ADMIN_TOKEN,
    RefereeProcess,
    admin_metadata,
    card_pairs,
    create_match,
    fetch_record,
    wait_finished,
)
from scout.v1 import arena_pb2, arena_pb2_grpc, matches_pb2, matches_pb2_grpc
from scout_arena.record import (
    action_from_json,
    build_record,
    record_from_json,
    record_to_json,
    replay,
)
from scout_rules import State, deal_match
from support.referee_e2e import (  # noqa: F401  (the *_fixture names: pytest fixtures)
    BOT_SPECS,
    FINISHED,
    FOUR_MATCHES,
    RUNNING,
    TOKENS,
    UNSPECIFIED,
    Played,
    RawBot,
    Spectator,
    arena_fixture,
    competition_ranks,
    engine_public,
    expect_rpc_error,
    faces_others,
    matches_fixture,
    pairs_of,
    split_rounds,
    trace_record,
    wire_public,
)


@pytest.fixture(scope="module")
def played(matches: matches_pb2_grpc.MatchesStub) -> dict[int, Played]:
    """A 2-, 3-, 4- and 5-player match, created back to back so that they run concurrently."""
    created = {
        n: create_match(matches, seats, seed, decision_ms=1000, time_bank_ms=5000)
        for n, (seats, seed) in FOUR_MATCHES.items()
    }
    out = {}
    for n, info in created.items():
        final = wait_finished(matches, info.match_id, timeout=30)
        seats, seed = FOUR_MATCHES[n]
        out[n] = Played(seats, seed, info, final, fetch_record(matches, info.match_id))
    return out


def test_full_matches_of_two_to_five_players_finish_replay_and_rank_by_totals(
    played: dict[int, Played],
) -> None:
    assert len({p.created.match_id for p in played.values()}) == 4
    for n, p in played.items():
        assert p.created.status == RUNNING
        # the seed deals every hand: it is told only once the match has ended
        assert list(p.created.bots) == p.seats and p.created.seed == 0
        assert p.final.seed == p.seed
        assert p.created.time_control.decision_ms == 1000
        assert p.created.time_control.time_bank_ms == 5000
        assert p.final.status == FINISHED, f"{n}-player match ended {p.final.status}"
        record = p.record
        assert record["match_id"] == p.created.match_id
        assert record["seed"] == p.seed and record["num_players"] == n
        assert [pl["name"] for pl in record["players"]] == p.seats
        assert record["finished"] is True
        result = replay(record)
        assert result.state.is_over
        assert len(record["rounds"]) == n  # 2 players play 2 rounds, 3-5 play one per player
        # well-behaved bots: no strikes, timeouts, illegal answers or forfeits of any kind
        assert record["notes"] == [] and record["forfeits"] == []
        assert list(p.final.forfeited_seats) == []
        sums = [sum(entry["scores"][seat] for entry in record["rounds"]) for seat in range(n)]
        assert record["totals"] == sums == list(p.final.totals)
        assert record["ranks"] == competition_ranks(sums) == list(p.final.ranks)
        assert min(record["ranks"]) == 1
        for entry in record["rounds"]:
            allowed = (
                {"hand_emptied", "no_legal_move"} if n == 2 else {"hand_emptied", "unbeaten_show"}
            )
            assert entry["end_reason"] in allowed
            assert all(isinstance(r, bool) for r in entry["rotations"])


def test_referee_record_equals_in_process_engine_for_same_seed_and_decisions(
    played: dict[int, Played],
) -> None:
    for n, p in played.items():
        record = p.record
        deals = deal_match(n, p.seed)
        state = State.new(n, p.seed)
        for index, entry in enumerate(record["rounds"]):
            assert entry["dealt_hands"] == [
                [[c.face, c.other] for c in hand] for hand in deals[index]
            ]
            assert state.round_index == index
            for seat, rotate in enumerate(entry["rotations"]):
                state.choose_rotation(seat, rotate)
            for item in entry["actions"]:
                assert state.current_seat == item["seat"]
                state.apply(action_from_json({k: v for k, v in item.items() if k != "seat"}))
        assert state.is_over
        built = json.loads(
            json.dumps(
                record_to_json(
                    build_record(
                        state,
                        p.seats,
                        match_id=record["match_id"],
                        forfeits=record["forfeits"],
                        notes=record_from_json(record).notes,
                        meta=record["meta"],
                    )
                )
            )
        )
        for got, want in zip(record["rounds"], built["rounds"], strict=True):
            for key in (
                "index",
                "starting_seat",
                "dealt_hands",
                "rotations",
                "actions",
                "scores",
                "end_reason",
                "exempt_seat",
            ):
                assert got[key] == want[key], f"{n} players, round {got['index']}: {key}"
        for key in (
            "seed",
            "num_players",
            "players",
            "finished",
            "totals",
            "ranks",
            "forfeits",
            "explicit_deals",
        ):
            assert record[key] == built[key], key
        assert record == built
        assert list(p.final.totals) == list(state.scores)


def test_hidden_cards_reach_neither_seat_nor_spectator_before_round_end(
    arena: RefereeProcess,
    matches: matches_pb2_grpc.MatchesStub,
) -> None:
    # The spy keeps its hand in even rounds and rotates it in odd ones.
    spy = RawBot(
        arena.address,
        TOKENS["spy"],
        rotate=lambda r: r % 2 == 1,
        hello_name="not-my-registered-name",
    ).start()
    try:
        welcome = spy.received[0].welcome
        assert welcome.protocol_version == 1 and welcome.bot_name == "spy"
        assert welcome.session_id and not welcome.resumed
        lineups = [
            (["spy", "b0", "b1"], 0, 301),
            (["b2", "b3", "spy", "b4"], 2, 302),
            (["b5", "b0", "b1", "b2", "spy"], 4, 303),
        ]
        created = []
        for seats, spy_seat, seed in lineups:
            info = create_match(matches, seats, seed, decision_ms=1000, time_bank_ms=5000)
            created.append((info, seats, spy_seat, Spectator(matches, info.match_id)))
        for info, *_ in created:
            assert wait_finished(matches, info.match_id, timeout=30).status == FINISHED
        spy.wait_ended([info.match_id for info, *_ in created])
    finally:
        spy.close()

    leak_checks = 0
    for info, seats, spy_seat, spectator in created:
        n = len(seats)
        record = fetch_record(matches, info.match_id)
        assert record["notes"] == [] and replay(record).state.is_over
        traces = trace_record(record)
        others = [s for s in range(n) if s != spy_seat]
        assert [entry["rotations"][spy_seat] for entry in record["rounds"]] == [
            r % 2 == 1 for r in range(n)
        ]

        # -- what the spy's stream carried --
        messages = spy.messages_of(info.match_id)
        start = messages[0][1]
        assert messages[0][0] == "match_start" and start.seat == spy_seat
        assert list(start.player_names) == seats and start.num_players == n
        assert messages[-1][0] == "match_ended"
        assert list(messages[-1][1].totals) == record["totals"]
        assert list(messages[-1][1].ranks) == record["ranks"]
        windows = split_rounds(messages)
        assert [ended.round_index for _, ended in windows] == list(range(n))
        for r, (window, ended) in enumerate(windows):
            trace = traces[r]
            hidden = trace.hidden_from(others)
            for kind, body in window:
                leaked = card_pairs(body) & hidden
                assert not leaked, f"round {r}: {kind} showed the spy hidden cards {leaked}"
            rotation_requests = [b for k, b in window if k == "rotation_request"]
            assert len(rotation_requests) == 1
            dealt = faces_others(trace.dealt[spy_seat])
            assert faces_others(rotation_requests[0].hand) == dealt
            decisions = [b for k, b in window if k == "decision_request"]
            assert len(decisions) == trace.actors.count(spy_seat)
            for number, decision in enumerate(decisions):
                obs = decision.observation
                step = len(obs.history)
                assert obs.seat == spy_seat and obs.round_index == r
                assert trace.actors[step] == spy_seat
                own = trace.hands_before[step][spy_seat]
                assert faces_others(obs.hand) == faces_others(own)
                assert list(obs.hand_sizes) == [len(h) for h in trace.hands_before[step]]
                assert [wire_public(a) for a in obs.history] == [
                    engine_public(a) for a in trace.public[:step]
                ]
                # nothing but its own hand and what was on the table this round
                assert card_pairs(decision) <= pairs_of(own) | trace.public_pairs(step)
                if number == 0:  # no card has left or entered the spy's hand yet
                    expected = (
                        [(other, face) for face, other in reversed(dealt)] if r % 2 == 1 else dealt
                    )
                    assert faces_others(obs.hand) == expected
            events = [wire_public(b.action) for k, b in window if k == "public_event"]
            assert events == [engine_public(a) for a in trace.public]
            # at the round's end every hand is revealed, hidden cards included
            assert [faces_others(h.cards) for h in ended.hands] == [
                faces_others(h) for h in trace.final_hands
            ]
            assert [faces_others(h.cards) for h in ended.dealt_hands] == [
                faces_others(h) for h in trace.dealt
            ]
            assert list(ended.rotations) == trace.rotations
            assert list(ended.round_scores) == record["rounds"][r]["scores"]
            assert hidden <= card_pairs(ended)
            leak_checks += len(hidden)

        # -- what the spectator's stream carried --
        events = spectator.join()
        assert events[0][0] == "match_info" and events[0][1].match_id == info.match_id
        assert events[-1][0] == "match_ended"
        assert list(events[-1][1].ranks) == record["ranks"]
        windows = split_rounds(events)
        assert [ended.round_index for _, ended in windows] == list(range(n))
        for r, (window, ended) in enumerate(windows):
            trace = traces[r]
            hidden = trace.hidden_from(range(n))
            for kind, body in window:
                leaked = card_pairs(body) & hidden
                assert not leaked, f"round {r}: spectator {kind} showed hidden cards {leaked}"
            started = [b for k, b in window if k == "round_started"]
            assert len(started) == 1 and started[0].starting_seat == r % n
            assert list(started[0].hand_sizes) == [len(h) for h in trace.dealt]
            assert [wire_public(b.action) for k, b in window if k == "public_event"] == [
                engine_public(a) for a in trace.public
            ]
            assert [faces_others(h.cards) for h in ended.hands] == [
                faces_others(h) for h in trace.final_hands
            ]
            assert hidden <= card_pairs(ended)
    assert leak_checks > 0, "no card stayed hidden in any round: the leak check proved nothing"


def test_create_match_rejects_bad_requests_with_precise_status_codes(
    matches: matches_pb2_grpc.MatchesStub,
) -> None:
    def create(bots: Sequence[str]) -> Callable[[], Any]:
        return lambda: create_match(matches, bots, seed=1)

    details = expect_rpc_error(grpc.StatusCode.NOT_FOUND, create(["b0", "nobody"]))
    assert "nobody" in details
    details = expect_rpc_error(grpc.StatusCode.FAILED_PRECONDITION, create(["b0", "ghost"]))
    assert "ghost" in details
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, create(["b0", "b0"]))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, create(["b0", "b1", "b0"]))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, create(["b0"]))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, create([]))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, create(list(BOT_SPECS)))  # six, connected
    # none of the refused requests created a match
    listed = matches.ListMatches(
        matches_pb2.ListMatchesRequest(limit=1000), metadata=admin_metadata(), timeout=5
    ).matches
    assert all(
        set(m.bots) <= set(BOT_SPECS) | {"spy", "holder"}
        and 2 <= len(m.bots) <= 5
        and len(set(m.bots)) == len(m.bots)
        for m in listed
    )


def test_matches_service_requires_admin_token(
    arena: RefereeProcess,
    matches: matches_pb2_grpc.MatchesStub,
) -> None:
    request = matches_pb2.CreateMatchRequest(bots=["b0", "b1"], seed=5)
    for metadata in (
        (),
        (("authorization", "Bearer wrong"),),
        (("authorization", f"Bearer {TOKENS['b0']}"),),
        (("authorization", ADMIN_TOKEN),),
    ):
        expect_rpc_error(
            grpc.StatusCode.UNAUTHENTICATED,
            partial(matches.CreateMatch, request, metadata=metadata, timeout=5),
        )
    expect_rpc_error(
        grpc.StatusCode.UNAUTHENTICATED,
        lambda: matches.ListMatches(matches_pb2.ListMatchesRequest(), timeout=5),
    )
    expect_rpc_error(
        grpc.StatusCode.UNAUTHENTICATED,
        lambda: matches.GetMatch(matches_pb2.GetMatchRequest(match_id="m-x"), timeout=5),
    )
    expect_rpc_error(
        grpc.StatusCode.UNAUTHENTICATED,
        lambda: list(matches.WatchMatch(matches_pb2.WatchMatchRequest(match_id="m-x"), timeout=5)),
    )
    # a bot cannot use the admin token to play
    with grpc.insecure_channel(arena.address) as channel:
        stream = arena_pb2_grpc.ArenaStub(channel).Play(
            iter(
                [
                    arena_pb2.BotMessage(
                        hello=arena_pb2.Hello(protocol_version=1, max_concurrent_matches=1)
                    )
                ]
            ),
            metadata=admin_metadata(),
            timeout=5,
        )
        expect_rpc_error(grpc.StatusCode.UNAUTHENTICATED, lambda: list(stream))


def test_get_record_and_list_matches_follow_match_status(
    arena: RefereeProcess,
    matches: matches_pb2_grpc.MatchesStub,
) -> None:
    first = create_match(matches, ["b0", "b1"], seed=41)
    assert wait_finished(matches, first.match_id).status == FINISHED
    second = create_match(matches, ["b2", "b3", "b4"], seed=42)
    assert wait_finished(matches, second.match_id).status == FINISHED

    gate = threading.Event()
    holder = RawBot(arena.address, TOKENS["holder"], rotate=lambda r: False, gate=gate).start()
    try:
        held = create_match(
            matches, ["holder", "b5"], seed=43, decision_ms=30_000, time_bank_ms=1000
        )
        time.sleep(0.2)
        info = matches.GetMatch(
            matches_pb2.GetMatchRequest(match_id=held.match_id),
            metadata=admin_metadata(),
            timeout=5,
        )
        assert info.status == RUNNING and list(info.ranks) == []
        details = expect_rpc_error(
            grpc.StatusCode.FAILED_PRECONDITION, lambda: fetch_record(matches, held.match_id)
        )
        assert held.match_id in details
        for call in (
            lambda: fetch_record(matches, "m-does-not-exist"),
            lambda: matches.GetMatch(
                matches_pb2.GetMatchRequest(match_id="m-nope"), metadata=admin_metadata(), timeout=5
            ),
            lambda: list(
                matches.WatchMatch(
                    matches_pb2.WatchMatchRequest(match_id="m-nope"),
                    metadata=admin_metadata(),
                    timeout=5,
                )
            ),
        ):
            expect_rpc_error(grpc.StatusCode.NOT_FOUND, call)

        def listed(
            status: matches_pb2.MatchStatus.ValueType = UNSPECIFIED, limit: int = 0
        ) -> list[matches_pb2.MatchInfo]:
            return list(
                matches.ListMatches(
                    matches_pb2.ListMatchesRequest(status=status, limit=limit),
                    metadata=admin_metadata(),
                    timeout=5,
                ).matches
            )

        ids = [m.match_id for m in listed()]
        assert ids[0] == held.match_id  # newest first
        assert ids.index(second.match_id) < ids.index(first.match_id)
        assert [m.match_id for m in listed(limit=2)] == ids[:2]
        running = listed(RUNNING)
        assert [m.match_id for m in running] == [held.match_id]
        finished = listed(FINISHED)
        finished_ids = [m.match_id for m in finished]
        assert held.match_id not in finished_ids and all(m.status == FINISHED for m in finished)
        assert finished_ids == [i for i in ids if i != held.match_id]
        assert listed(matches_pb2.MATCH_STATUS_ABORTED) == []
    finally:
        gate.set()
        try:
            final = wait_finished(matches, held.match_id, timeout=20)
            holder.wait_ended([held.match_id])
        finally:
            holder.close()
    assert final.status == FINISHED
    assert listed(FINISHED)[0].match_id == held.match_id
    assert listed(RUNNING) == []
    replay(fetch_record(matches, held.match_id))


def test_health_reports_serving_and_reflection_lists_services(arena: RefereeProcess) -> None:
    with grpc.insecure_channel(arena.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "scout.v1.Arena"):
            response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert response.status == health_pb2.HealthCheckResponse.SERVING, service
        expect_rpc_error(
            grpc.StatusCode.NOT_FOUND,
            lambda: health.Check(
                health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5
            ),
        )

        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = list(
            reflection.ServerReflectionInfo(
                iter(
                    [
                        reflection_pb2.ServerReflectionRequest(list_services=""),
                        reflection_pb2.ServerReflectionRequest(
                            file_containing_symbol="scout.v1.Arena"
                        ),
                    ]
                ),
                timeout=5,
            )
        )
    names = {s.name for s in responses[0].list_services_response.service}
    assert {"scout.v1.Arena", "scout.v1.Matches", "grpc.health.v1.Health"} <= names
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in responses[1].file_descriptor_response.file_descriptor_proto
    ]
    arena_file = next(f for f in files if any(s.name == "Arena" for s in f.service))
    assert arena_file.package == "scout.v1"
    assert [m.name for m in arena_file.service[0].method] == ["Play"]


def test_every_finished_match_has_record_file_equal_to_get_record(
    arena: RefereeProcess,
    matches: matches_pb2_grpc.MatchesStub,
    played: dict[int, Played],
) -> None:
    finished = matches.ListMatches(
        matches_pb2.ListMatchesRequest(status=FINISHED, limit=1000),
        metadata=admin_metadata(),
        timeout=5,
    ).matches
    ids = {m.match_id for m in finished}
    assert {p.created.match_id for p in played.values()} <= ids
    deadline = time.monotonic() + 5
    while not all((arena.records / f"{i}.json").is_file() for i in ids):
        assert time.monotonic() < deadline, "record files missing"
        time.sleep(0.05)
    on_disk = {p.stem for p in arena.records.glob("*.json")}
    assert ids <= on_disk
    assert not [name for name in os.listdir(arena.records) if name.endswith(".tmp")]
    for match_id in ids:
        text = (arena.records / f"{match_id}.json").read_text(encoding="utf-8")
        from_file = json.loads(text)
        assert from_file == fetch_record(matches, match_id)
        assert from_file["match_id"] == match_id and from_file["finished"] is True
        replay(from_file)
