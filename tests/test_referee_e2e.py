"""End-to-end tests of the referee: a real `scout-arena referee serve` process, real
`scout-arena bot run` processes, and raw gRPC clients written here, all on 127.0.0.1.

Most tests share one referee (module fixture `arena`) with six bundled bots connected; the TLS
and shutdown tests start their own referee.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
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
    running_referee,
    start_bot,
    wait_connected,
    wait_finished,
)
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.record import (
    action_from_json,
    build_record,
    record_from_json,
    record_to_json,
    replay,
)
from scout_rules import End, Hand, PublicAction, State, deal_match
from support.rawbot import action_choice, bearer, first_legal_action, hello, rotation_choice

pytestmark = pytest.mark.timeout(120)

BOT_SPECS = {"b0": "greedy", "b1": "random", "b2": "greedy", "b3": "random", "b4": "greedy",
             "b5": "random"}
TOKENS = {**{name: f"token-{name}" for name in BOT_SPECS},
          "spy": "token-spy", "holder": "token-holder", "ghost": "token-ghost"}
UNSPECIFIED = matches_pb2.MATCH_STATUS_UNSPECIFIED
RUNNING = matches_pb2.MATCH_STATUS_RUNNING
FINISHED = matches_pb2.MATCH_STATUS_FINISHED
SLOW_BOT = Path(__file__).resolve().parent / "bots" / "slow_bot.py"

Pair = tuple[int, int]


# --- engine-side reconstruction of a record ---------------------------------------------------


def pairs_of(cards: Sequence[Any]) -> set[Pair]:
    """Deck pairs of engine Cards, [face, other] lists or protobuf Cards."""
    out: set[Pair] = set()
    for card in cards:
        face, other = (card[0], card[1]) if isinstance(card, list) else (card.face, card.other)
        out.add((min(face, other), max(face, other)))
    return out


def faces_others(cards: Sequence[Any]) -> list[tuple[int, int]]:
    return [(c.face, c.other) for c in cards]


@dataclass
class RoundTrace:
    """One round of a record re-played through the engine, step by step."""

    dealt: list[Hand]
    rotations: list[bool]
    actors: list[int] = field(default_factory=list)
    hands_before: list[list[Hand]] = field(default_factory=list)  # by action index, by seat
    public: list[PublicAction] = field(default_factory=list)
    final_hands: list[Hand] = field(default_factory=list)

    def public_pairs(self, upto: int | None = None) -> set[Pair]:
        """Cards that became public (shown, or scouted from the table) in the first ``upto``
        actions of the round."""
        found: set[Pair] = set()
        for action in self.public[:upto]:
            found |= pairs_of(action.cards)
        return found

    def hidden_from(self, seats: Sequence[int]) -> set[Pair]:
        """Cards dealt to ``seats`` that never became public during the round."""
        dealt: set[Pair] = set()
        for seat in seats:
            dealt |= pairs_of(self.dealt[seat])
        return dealt - self.public_pairs()


def trace_record(record: dict[str, Any]) -> list[RoundTrace]:
    """Play a record's rotations and actions through a fresh seeded State, keeping every public
    action and every hand before every action."""
    n = record["num_players"]
    state = State.new(n, record["seed"])
    traces = []
    for index, entry in enumerate(record["rounds"]):
        assert state.round_index == index
        trace = RoundTrace(list(state.deals[index]), list(entry["rotations"]))
        for seat, rotate in enumerate(entry["rotations"]):
            state.choose_rotation(seat, rotate)
        for item in entry["actions"]:
            trace.hands_before.append([state.hand(s) for s in range(n)])
            trace.actors.append(item["seat"])
            assert state.current_seat == item["seat"]
            state.apply(action_from_json({k: v for k, v in item.items() if k != "seat"}))
            assert state.last_action is not None
            trace.public.append(state.last_action)
        result = state.round_logs[index].result
        if result is not None:
            trace.final_hands = list(result.hands)
        traces.append(trace)
    return traces


_KIND_NAMES = {"show": "ACTION_KIND_SHOW", "scout": "ACTION_KIND_SCOUT",
               "scout_and_show": "ACTION_KIND_SCOUT_AND_SHOW"}
_END_PB = {None: game_pb2.END_UNSPECIFIED, End.LEFT: game_pb2.END_LEFT,
           End.RIGHT: game_pb2.END_RIGHT}


def engine_public(action: PublicAction) -> tuple[Any, ...]:
    return (action.seat, _KIND_NAMES[action.kind], faces_others(action.cards), action.start or 0,
            action.length or 0, _END_PB[action.end], action.insert_at or 0, False)


def wire_public(action: game_pb2.PublicAction) -> tuple[Any, ...]:
    return (action.seat, game_pb2.ActionKind.Name(action.kind), faces_others(action.cards),
            action.start, action.length, action.end, action.insert_at, action.by_referee)


def competition_ranks(totals: Sequence[int]) -> list[int]:
    return [1 + sum(other > mine for other in totals) for mine in totals]


def expect_rpc_error(code: grpc.StatusCode, call: Callable[[], Any]) -> str:
    with pytest.raises(grpc.RpcError) as info:
        call()
    error: Any = info.value
    assert error.code() == code, f"expected {code}, got {error.code()}: {error.details()}"
    details: str = error.details()
    return details


# --- raw clients written against the generated stubs ----------------------------------------


class RawBot:
    """A bot speaking the wire protocol directly with grpc.aio, on its own thread and event loop.
    Records every RefereeMessage it receives. Rotates as ``rotate(round_index)`` says; plays the
    first legal Show, else the first legal Scout. With ``gate``, answers nothing until the gate
    is set."""

    def __init__(self, address: str, token: str, *, rotate: Callable[[int], bool],
                 hello_name: str = "raw", gate: threading.Event | None = None) -> None:
        self.address = address
        self.token = token
        self.rotate = rotate
        self.hello_name = hello_name
        self.gate = gate
        self.received: list[arena_pb2.RefereeMessage] = []
        self.ended: set[str] = set()
        self.welcomed = threading.Event()
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._outbox: asyncio.Queue[arena_pb2.BotMessage | None] | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def start(self) -> RawBot:
        self._thread.start()
        assert self.welcomed.wait(10), "no Welcome within 10 s"
        if self.error is not None:
            raise self.error
        return self

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # surfaced by start()/close()
            self.error = exc
            self.welcomed.set()

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._outbox = asyncio.Queue()
        async with grpc.aio.insecure_channel(self.address) as channel:
            call = arena_pb2_grpc.ArenaStub(channel).Play(
                self._requests(), metadata=bearer(self.token))
            async for message in call:
                self.received.append(message)
                await self._handle(message)

    async def _requests(self) -> AsyncIterator[arena_pb2.BotMessage]:
        yield hello(self.hello_name, version="test", max_matches=4)
        assert self._outbox is not None
        while (message := await self._outbox.get()) is not None:
            yield message

    async def _handle(self, message: arena_pb2.RefereeMessage) -> None:
        assert self._outbox is not None
        kind = message.WhichOneof("body")
        if kind == "welcome":
            self.welcomed.set()
        elif kind == "match_ended":
            self.ended.add(message.match_ended.match_id)
        if kind not in ("rotation_request", "decision_request"):
            return
        if self.gate is not None and not self.gate.is_set():
            await asyncio.to_thread(self.gate.wait)
        if kind == "rotation_request":
            rotation = message.rotation_request
            self._outbox.put_nowait(rotation_choice(rotation.match_id, rotation.request_id,
                                                    self.rotate(rotation.round_index)))
        else:
            decision = message.decision_request
            self._outbox.put_nowait(action_choice(decision.match_id, decision.request_id,
                                                  first_legal_action(decision)))

    def wait_ended(self, match_ids: Sequence[str], timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not set(match_ids) <= self.ended:
            assert time.monotonic() < deadline, f"no MatchEnded for {set(match_ids) - self.ended}"
            time.sleep(0.02)

    def close(self) -> None:
        """Half-close the stream (the referee then ends the call) and join the thread."""
        if self.gate is not None:
            self.gate.set()
        if self._loop is not None and self._outbox is not None:
            self._loop.call_soon_threadsafe(self._outbox.put_nowait, None)
        self._thread.join(10)
        assert not self._thread.is_alive(), "the raw bot's stream did not end"
        if self.error is not None:
            raise self.error

    def messages_of(self, match_id: str) -> list[tuple[str, Any]]:
        """(body kind, body) of every message about ``match_id``, in arrival order."""
        out: list[tuple[str, Any]] = []
        for message in self.received:
            kind = message.WhichOneof("body")
            if kind is None:
                continue
            body = getattr(message, kind)
            if getattr(body, "match_id", None) == match_id:
                out.append((kind, body))
        return out


class Spectator:
    """Matches.WatchMatch on a thread, recording every SpectatorEvent until the stream ends."""

    def __init__(self, stub: matches_pb2_grpc.MatchesStub, match_id: str) -> None:
        self.events: list[matches_pb2.SpectatorEvent] = []
        self.error: BaseException | None = None
        self._stub = stub
        self._match_id = match_id
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            for event in self._stub.WatchMatch(
                    matches_pb2.WatchMatchRequest(match_id=self._match_id),
                    metadata=admin_metadata(), timeout=60):
                self.events.append(event)
        except BaseException as exc:
            self.error = exc

    def join(self) -> list[tuple[str, Any]]:
        self._thread.join(30)
        assert not self._thread.is_alive(), "WatchMatch did not end with the match"
        if self.error is not None:
            raise self.error
        return [(kind, getattr(event, kind)) for event in self.events
                if (kind := event.WhichOneof("body")) is not None]


def split_rounds(messages: Sequence[tuple[str, Any]]
                 ) -> list[tuple[list[tuple[str, Any]], arena_pb2.RoundEnded]]:
    """Cut a message sequence at each RoundEnded: [(messages since the previous RoundEnded,
    the RoundEnded)], so window r holds everything received during round r."""
    windows = []
    current: list[tuple[str, Any]] = []
    for kind, body in messages:
        if kind == "round_ended":
            windows.append((current, body))
            current = []
        else:
            current.append((kind, body))
    return windows


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefereeProcess]:
    """One referee with six bundled-bot processes connected (greedy and random alternating)."""
    tmp = tmp_path_factory.mktemp("arena")
    with running_referee(tmp, TOKENS) as referee:
        for name, spec in BOT_SPECS.items():
            start_bot(referee, spec, TOKENS[name])
        wait_connected(referee, list(BOT_SPECS))
        yield referee


@pytest.fixture(scope="module")
def matches(arena: RefereeProcess) -> Iterator[matches_pb2_grpc.MatchesStub]:
    channel, stub = arena.matches_stub()
    with channel:
        yield stub


@dataclass
class Played:
    seats: list[str]
    seed: int
    created: matches_pb2.MatchInfo
    final: matches_pb2.MatchInfo
    record: dict[str, Any]


FOUR_MATCHES = {2: (["b0", "b1"], 7),
                3: (["b2", "b3", "b4"], 11),
                4: (["b5", "b0", "b1", "b2"], 2**63 + 5),
                5: (["b3", "b4", "b5", "b0", "b1"], 2**64 - 1)}


@pytest.fixture(scope="module")
def played(matches: matches_pb2_grpc.MatchesStub) -> dict[int, Played]:
    """A 2-, 3-, 4- and 5-player match, created back to back so that they run concurrently."""
    created = {n: create_match(matches, seats, seed, decision_ms=1000, time_bank_ms=5000)
               for n, (seats, seed) in FOUR_MATCHES.items()}
    out = {}
    for n, info in created.items():
        final = wait_finished(matches, info.match_id, timeout=30)
        seats, seed = FOUR_MATCHES[n]
        out[n] = Played(seats, seed, info, final, fetch_record(matches, info.match_id))
    return out


# --- 1. full matches ----------------------------------------------------------------------------


def test_full_matches_of_two_to_five_players_finish_replay_and_rank_by_totals(
        played: dict[int, Played]) -> None:
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
            allowed = ({"hand_emptied", "no_legal_move"} if n == 2
                       else {"hand_emptied", "unbeaten_show"})
            assert entry["end_reason"] in allowed
            assert all(isinstance(r, bool) for r in entry["rotations"])


# --- 2. referee == in-process engine ------------------------------------------------------------


def test_referee_record_equals_in_process_engine_for_same_seed_and_decisions(
        played: dict[int, Played]) -> None:
    for n, p in played.items():
        record = p.record
        deals = deal_match(n, p.seed)
        state = State.new(n, p.seed)
        for index, entry in enumerate(record["rounds"]):
            assert entry["dealt_hands"] == [[[c.face, c.other] for c in hand]
                                            for hand in deals[index]]
            assert state.round_index == index
            for seat, rotate in enumerate(entry["rotations"]):
                state.choose_rotation(seat, rotate)
            for item in entry["actions"]:
                assert state.current_seat == item["seat"]
                state.apply(action_from_json({k: v for k, v in item.items() if k != "seat"}))
        assert state.is_over
        built = json.loads(json.dumps(record_to_json(build_record(
            state, p.seats, match_id=record["match_id"], forfeits=record["forfeits"],
            notes=record_from_json(record).notes, meta=record["meta"]))))
        for got, want in zip(record["rounds"], built["rounds"], strict=True):
            for key in ("index", "starting_seat", "dealt_hands", "rotations", "actions",
                        "scores", "end_reason", "exempt_seat"):
                assert got[key] == want[key], f"{n} players, round {got['index']}: {key}"
        for key in ("seed", "num_players", "players", "finished", "totals", "ranks",
                    "forfeits", "explicit_deals"):
            assert record[key] == built[key], key
        assert record == built
        assert list(p.final.totals) == list(state.scores)


# --- 3. hidden information ----------------------------------------------------------------------


def test_hidden_cards_reach_neither_seat_nor_spectator_before_round_end(
        arena: RefereeProcess, matches: matches_pb2_grpc.MatchesStub) -> None:
    # The spy keeps its hand in even rounds and rotates it in odd ones.
    spy = RawBot(arena.address, TOKENS["spy"], rotate=lambda r: r % 2 == 1,
                 hello_name="not-my-registered-name").start()
    try:
        welcome = spy.received[0].welcome
        assert welcome.protocol_version == 1 and welcome.bot_name == "spy"
        assert welcome.session_id and not welcome.resumed
        lineups = [(["spy", "b0", "b1"], 0, 301), (["b2", "b3", "spy", "b4"], 2, 302),
                   (["b5", "b0", "b1", "b2", "spy"], 4, 303)]
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
        assert [entry["rotations"][spy_seat] for entry in record["rounds"]] == \
            [r % 2 == 1 for r in range(n)]

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
                assert [wire_public(a) for a in obs.history] == \
                    [engine_public(a) for a in trace.public[:step]]
                # nothing but its own hand and what was on the table this round
                assert card_pairs(decision) <= pairs_of(own) | trace.public_pairs(step)
                if number == 0:  # no card has left or entered the spy's hand yet
                    expected = ([(other, face) for face, other in reversed(dealt)]
                                if r % 2 == 1 else dealt)
                    assert faces_others(obs.hand) == expected
            events = [wire_public(b.action) for k, b in window if k == "public_event"]
            assert events == [engine_public(a) for a in trace.public]
            # at the round's end every hand is revealed, hidden cards included
            assert [faces_others(h.cards) for h in ended.hands] == \
                [faces_others(h) for h in trace.final_hands]
            assert [faces_others(h.cards) for h in ended.dealt_hands] == \
                [faces_others(h) for h in trace.dealt]
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
            assert [wire_public(b.action) for k, b in window if k == "public_event"] == \
                [engine_public(a) for a in trace.public]
            assert [faces_others(h.cards) for h in ended.hands] == \
                [faces_others(h) for h in trace.final_hands]
            assert hidden <= card_pairs(ended)
    assert leak_checks > 0, "no card stayed hidden in any round: the leak check proved nothing"


# --- 4. the Matches service ---------------------------------------------------------------------


def test_create_match_rejects_bad_requests_with_precise_status_codes(
        matches: matches_pb2_grpc.MatchesStub) -> None:
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
    listed = matches.ListMatches(matches_pb2.ListMatchesRequest(limit=1000),
                                 metadata=admin_metadata(), timeout=5).matches
    assert all(set(m.bots) <= set(BOT_SPECS) | {"spy", "holder"} and 2 <= len(m.bots) <= 5
               and len(set(m.bots)) == len(m.bots) for m in listed)


def test_matches_service_requires_admin_token(arena: RefereeProcess,
                                              matches: matches_pb2_grpc.MatchesStub) -> None:
    request = matches_pb2.CreateMatchRequest(bots=["b0", "b1"], seed=5)
    for metadata in ((), (("authorization", "Bearer wrong"),),
                     (("authorization", f"Bearer {TOKENS['b0']}"),),
                     (("authorization", ADMIN_TOKEN),)):
        expect_rpc_error(grpc.StatusCode.UNAUTHENTICATED,
                         partial(matches.CreateMatch, request, metadata=metadata, timeout=5))
    expect_rpc_error(grpc.StatusCode.UNAUTHENTICATED, lambda: matches.ListMatches(
        matches_pb2.ListMatchesRequest(), timeout=5))
    expect_rpc_error(grpc.StatusCode.UNAUTHENTICATED, lambda: matches.GetMatch(
        matches_pb2.GetMatchRequest(match_id="m-x"), timeout=5))
    expect_rpc_error(grpc.StatusCode.UNAUTHENTICATED, lambda: list(matches.WatchMatch(
        matches_pb2.WatchMatchRequest(match_id="m-x"), timeout=5)))
    # a bot cannot use the admin token to play
    with grpc.insecure_channel(arena.address) as channel:
        stream = arena_pb2_grpc.ArenaStub(channel).Play(
            iter([arena_pb2.BotMessage(hello=arena_pb2.Hello(protocol_version=1,
                                                             max_concurrent_matches=1))]),
            metadata=admin_metadata(), timeout=5)
        expect_rpc_error(grpc.StatusCode.UNAUTHENTICATED, lambda: list(stream))


def test_get_record_and_list_matches_follow_match_status(
        arena: RefereeProcess, matches: matches_pb2_grpc.MatchesStub) -> None:
    first = create_match(matches, ["b0", "b1"], seed=41)
    assert wait_finished(matches, first.match_id).status == FINISHED
    second = create_match(matches, ["b2", "b3", "b4"], seed=42)
    assert wait_finished(matches, second.match_id).status == FINISHED

    gate = threading.Event()
    holder = RawBot(arena.address, TOKENS["holder"], rotate=lambda r: False, gate=gate).start()
    try:
        held = create_match(matches, ["holder", "b5"], seed=43, decision_ms=30_000,
                            time_bank_ms=1000)
        time.sleep(0.2)
        info = matches.GetMatch(matches_pb2.GetMatchRequest(match_id=held.match_id),
                                metadata=admin_metadata(), timeout=5)
        assert info.status == RUNNING and list(info.ranks) == []
        details = expect_rpc_error(grpc.StatusCode.FAILED_PRECONDITION,
                                   lambda: fetch_record(matches, held.match_id))
        assert held.match_id in details
        for call in (lambda: fetch_record(matches, "m-does-not-exist"),
                     lambda: matches.GetMatch(matches_pb2.GetMatchRequest(match_id="m-nope"),
                                              metadata=admin_metadata(), timeout=5),
                     lambda: list(matches.WatchMatch(
                         matches_pb2.WatchMatchRequest(match_id="m-nope"),
                         metadata=admin_metadata(), timeout=5))):
            expect_rpc_error(grpc.StatusCode.NOT_FOUND, call)

        def listed(status: matches_pb2.MatchStatus.ValueType = UNSPECIFIED,
                   limit: int = 0) -> list[matches_pb2.MatchInfo]:
            return list(matches.ListMatches(
                matches_pb2.ListMatchesRequest(status=status, limit=limit),
                metadata=admin_metadata(), timeout=5).matches)

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


# --- 5. health and reflection -------------------------------------------------------------------


def test_health_reports_serving_and_reflection_lists_services(arena: RefereeProcess) -> None:
    with grpc.insecure_channel(arena.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "scout.v1.Arena"):
            response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert response.status == health_pb2.HealthCheckResponse.SERVING, service
        expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: health.Check(
            health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5))

        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = list(reflection.ServerReflectionInfo(iter([
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="scout.v1.Arena"),
        ]), timeout=5))
    names = {s.name for s in responses[0].list_services_response.service}
    assert {"scout.v1.Arena", "scout.v1.Matches", "grpc.health.v1.Health"} <= names
    files = [descriptor_pb2.FileDescriptorProto.FromString(raw)
             for raw in responses[1].file_descriptor_response.file_descriptor_proto]
    arena_file = next(f for f in files if any(s.name == "Arena" for s in f.service))
    assert arena_file.package == "scout.v1"
    assert [m.name for m in arena_file.service[0].method] == ["Play"]


# --- 6. TLS -------------------------------------------------------------------------------------


def make_self_signed(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=30)
    return cert, key


def test_tls_referee_plays_full_match_and_refuses_plaintext(tmp_path: Path) -> None:
    cert, key = make_self_signed(tmp_path)
    tokens = {"t0": "token-t0", "t1": "token-t1"}
    with running_referee(tmp_path, tokens, "--tls-cert", str(cert),
                         "--tls-key", str(key)) as referee:
        start_bot(referee, "greedy", tokens["t0"], "--tls", "--ca-cert", str(cert))
        start_bot(referee, "random", tokens["t1"], "--tls", "--ca-cert", str(cert))
        wait_connected(referee, list(tokens))
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(referee.address, credentials) as channel:
            stub = matches_pb2_grpc.MatchesStub(channel)
            info = create_match(stub, ["t0", "t1"], seed=99, decision_ms=1000,
                                time_bank_ms=5000)
            assert wait_finished(stub, info.match_id, timeout=30).status == FINISHED
            record = fetch_record(stub, info.match_id)
            assert record["finished"] and record["notes"] == []
            replay(record)
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="scout.v1.Arena"), timeout=5)
            assert health.status == health_pb2.HealthCheckResponse.SERVING

        with grpc.insecure_channel(referee.address) as plain:
            expect_rpc_error(grpc.StatusCode.UNAVAILABLE, lambda: health_pb2_grpc.HealthStub(
                plain).Check(health_pb2.HealthCheckRequest(), timeout=3))
            expect_rpc_error(grpc.StatusCode.UNAVAILABLE, lambda: matches_pb2_grpc.MatchesStub(
                plain).ListMatches(matches_pb2.ListMatchesRequest(), metadata=admin_metadata(),
                                   timeout=3))
        # TLS without trusting the self-signed certificate fails too
        with grpc.secure_channel(referee.address, grpc.ssl_channel_credentials()) as untrusted:
            expect_rpc_error(grpc.StatusCode.UNAVAILABLE, lambda: health_pb2_grpc.HealthStub(
                untrusted).Check(health_pb2.HealthCheckRequest(), timeout=3))


# --- 7. graceful shutdown -----------------------------------------------------------------------


def test_sigterm_mid_match_exits_zero_and_writes_aborted_replayable_record(
        tmp_path: Path) -> None:
    tokens = {"quick": "token-quick", "slow": "token-slow"}
    with running_referee(tmp_path, tokens) as referee:
        start_bot(referee, "greedy", tokens["quick"])
        start_bot(referee, f"{SLOW_BOT}:SlowBot", tokens["slow"])
        wait_connected(referee, list(tokens))
        channel, stub = referee.matches_stub()
        with channel:
            # quick (seat 0) starts round 0; then slow thinks far longer than the test runs
            info = create_match(stub, ["quick", "slow"], seed=5, decision_ms=60_000,
                                time_bank_ms=1000)
            watch = stub.WatchMatch(matches_pb2.WatchMatchRequest(match_id=info.match_id),
                                    metadata=admin_metadata(), timeout=20)
            for event in watch:
                if event.WhichOneof("body") == "public_event":
                    assert event.public_event.action.seat == 0
                    break
            watch.cancel()
            time.sleep(0.3)  # the slow seat's DecisionRequest is out and unanswered
            status = stub.GetMatch(matches_pb2.GetMatchRequest(match_id=info.match_id),
                                   metadata=admin_metadata(), timeout=5).status
            assert status == RUNNING
        began = time.monotonic()
        referee.process.send_signal(signal.SIGTERM)
        code = referee.process.wait(timeout=15)
        elapsed = time.monotonic() - began
        assert code == 0, referee.log()
        assert elapsed < 5, f"the referee took {elapsed:.1f} s to stop"

        path = referee.records / f"{info.match_id}.json"
        assert path.is_file(), os.listdir(referee.records)
        assert not [name for name in os.listdir(referee.records) if name.endswith(".tmp")]
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["match_id"] == info.match_id and record["seed"] == 5
        assert record["finished"] is False
        assert record["totals"] is None and record["ranks"] is None
        assert record["meta"]["status"] == "aborted"
        assert len(record["rounds"]) == 1
        assert [a["seat"] for a in record["rounds"][0]["actions"]] == [0]
        assert "end_reason" not in record["rounds"][0]
        result = replay(record)
        assert not result.state.is_over and result.state.current_seat == 1


# --- 8. records on disk -------------------------------------------------------------------------


def test_every_finished_match_has_record_file_equal_to_get_record(
        arena: RefereeProcess, matches: matches_pb2_grpc.MatchesStub,
        played: dict[int, Played]) -> None:
    finished = matches.ListMatches(
        matches_pb2.ListMatchesRequest(status=FINISHED, limit=1000),
        metadata=admin_metadata(), timeout=5).matches
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
