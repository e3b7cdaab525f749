"""What the referee's end-to-end tests share: the engine-side reconstruction of a record, raw
clients written against the generated stubs (a bot and a spectator), and a self-signed
certificate."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from referee_support import (
    RefereeProcess,
    admin_metadata,
    running_referee,
    start_bot,
    wait_connected,
)
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.record import (
    action_from_json,
)
from scout_rules import End, Hand, PublicAction, State

from support.rawbot import action_choice, bearer, first_legal_action, hello, rotation_choice

pytestmark = pytest.mark.timeout(120)


BOT_SPECS = {
    "b0": "greedy",
    "b1": "random",
    "b2": "greedy",
    "b3": "random",
    "b4": "greedy",
    "b5": "random",
}


TOKENS = {
    **{name: f"token-{name}" for name in BOT_SPECS},
    "spy": "token-spy",
    "holder": "token-holder",
    "ghost": "token-ghost",
}


UNSPECIFIED = matches_pb2.MATCH_STATUS_UNSPECIFIED


RUNNING = matches_pb2.MATCH_STATUS_RUNNING


FINISHED = matches_pb2.MATCH_STATUS_FINISHED


SLOW_BOT = Path(__file__).resolve().parents[1] / "bots" / "slow_bot.py"


Pair = tuple[int, int]


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


_KIND_NAMES = {
    "show": "ACTION_KIND_SHOW",
    "scout": "ACTION_KIND_SCOUT",
    "scout_and_show": "ACTION_KIND_SCOUT_AND_SHOW",
}


_END_PB = {
    None: game_pb2.END_UNSPECIFIED,
    End.LEFT: game_pb2.END_LEFT,
    End.RIGHT: game_pb2.END_RIGHT,
}


def engine_public(action: PublicAction) -> tuple[Any, ...]:
    return (
        action.seat,
        _KIND_NAMES[action.kind],
        faces_others(action.cards),
        action.start or 0,
        action.length or 0,
        _END_PB[action.end],
        action.insert_at or 0,
        False,
    )


def wire_public(action: game_pb2.PublicAction) -> tuple[Any, ...]:
    return (
        action.seat,
        game_pb2.ActionKind.Name(action.kind),
        faces_others(action.cards),
        action.start,
        action.length,
        action.end,
        action.insert_at,
        action.by_referee,
    )


def competition_ranks(totals: Sequence[int]) -> list[int]:
    return [1 + sum(other > mine for other in totals) for mine in totals]


def expect_rpc_error(code: grpc.StatusCode, call: Callable[[], Any]) -> str:
    with pytest.raises(grpc.RpcError) as info:
        call()
    error: Any = info.value
    assert error.code() == code, f"expected {code}, got {error.code()}: {error.details()}"
    details: str = error.details()
    return details


class RawBot:
    """A bot speaking the wire protocol directly with grpc.aio, on its own thread and event loop.
    Records every RefereeMessage it receives. Rotates as ``rotate(round_index)`` says; plays the
    first legal Show, else the first legal Scout. With ``gate``, answers nothing until the gate
    is set."""

    def __init__(
        self,
        address: str,
        token: str,
        *,
        rotate: Callable[[int], bool],
        hello_name: str = "raw",
        gate: threading.Event | None = None,
    ) -> None:
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
                self._requests(), metadata=bearer(self.token)
            )
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
            self._outbox.put_nowait(
                rotation_choice(
                    rotation.match_id, rotation.request_id, self.rotate(rotation.round_index)
                )
            )
        else:
            decision = message.decision_request
            self._outbox.put_nowait(
                action_choice(decision.match_id, decision.request_id, first_legal_action(decision))
            )

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
                metadata=admin_metadata(),
                timeout=60,
            ):
                self.events.append(event)
        except BaseException as exc:
            self.error = exc

    def join(self) -> list[tuple[str, Any]]:
        self._thread.join(30)
        assert not self._thread.is_alive(), "WatchMatch did not end with the match"
        if self.error is not None:
            raise self.error
        return [
            (kind, getattr(event, kind))
            for event in self.events
            if (kind := event.WhichOneof("body")) is not None
        ]


def split_rounds(
    messages: Sequence[tuple[str, Any]],
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


def make_self_signed(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return cert, key


@pytest.fixture(scope="module", name="arena")
def arena_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefereeProcess]:
    """One referee with six bundled-bot processes connected (greedy and random alternating)."""
    tmp = tmp_path_factory.mktemp("arena")
    with running_referee(tmp, TOKENS) as referee:
        for name, spec in BOT_SPECS.items():
            start_bot(referee, spec, TOKENS[name])
        wait_connected(referee, list(BOT_SPECS))
        yield referee


@pytest.fixture(scope="module", name="matches")
def matches_fixture(arena: RefereeProcess) -> Iterator[matches_pb2_grpc.MatchesStub]:
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


FOUR_MATCHES = {
    2: (["b0", "b1"], 7),
    3: (["b2", "b3", "b4"], 11),
    4: (["b5", "b0", "b1", "b2"], 2**63 + 5),
    5: (["b3", "b4", "b5", "b0", "b1"], 2**64 - 1),
}
