"""What the SDK's tests share: a rules reference for legality, observations made to order,
and a scripted fake referee (FakeArena) with recording bots."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
from grpc import aio
from scout.v1 import arena_pb2_grpc
from scout_client import (
    Action,
    Bot,
    Card,
    End,
    Hello,
    MatchEnded,
    MatchStart,
    Observation,
    PublicEvent,
    RotationRequest,
    RoundEnded,
    Scout,
    ScoutAndShow,
    Show,
    TimeControl,
    Welcome,
    run_bot,
    testing,
)
from scout_client.types import BotMessage, RefereeMessage

from support import oracle

TOKEN = "secret-token"


EOF: object = getattr(aio, "EOF")  # noqa: B009 - missing from grpc's type stubs


LEFT, RIGHT = End.LEFT, End.RIGHT


SDK_END = {oracle.L: LEFT, oracle.R: RIGHT}


ORACLE_END = {LEFT: oracle.L, RIGHT: oracle.R}


def legal_shows(faces: Sequence[int], active: Sequence[int]) -> list[Show]:
    return [Show(start, length) for start, length in oracle.groups_beating(faces, active)]


def legal_scouts(hand_size: int, active_size: int) -> list[Scout]:
    return [Scout(SDK_END[e], f, i) for e, f, i in oracle.scout_choices(hand_size, active_size)]


def after_scout(
    hand: Sequence[Card], active: Sequence[Card], scout: Scout
) -> tuple[list[int], list[int]]:
    """The hand's faces after ``scout``, and the faces left in the active set."""
    return oracle.scouted(
        [c.face for c in hand],
        [(c.face, c.other) for c in active],
        ORACLE_END[scout.end],
        scout.flip,
        scout.insert_at,
    )


def scout_and_show_ok(obs: Observation, action: ScoutAndShow) -> bool:
    if not obs.scout_and_show_available or action.scout not in obs.legal_scouts:
        return False
    hand, rest = after_scout(obs.hand, obs.active_set, action.scout)
    show = action.show
    if show.start < 0 or show.length < 1 or show.start + show.length > len(hand):
        return False
    return oracle.beats(hand[show.start : show.start + show.length], rest)


def cards(*faces: int) -> tuple[Card, ...]:
    """Cards with the given faces; the other value is any different number."""
    return tuple(Card(f, f % 10 + 1) for f in faces)


def observation(
    hand: Sequence[Card],
    active: Sequence[Card] = (),
    *,
    players: int = 4,
    can_scout: bool = True,
    token: bool = True,
    match_id: str = "m1",
    request_id: int = 1,
    deadline_ms: int = 2000,
    time_bank_ms: int = 0,
) -> Observation:
    """A consistent DecisionRequest for seat 0, its legal lists from the reference above."""
    faces = [c.face for c in hand]
    active_faces = [c.face for c in active]
    shows = legal_shows(faces, active_faces)
    scouts = legal_scouts(len(hand), len(active)) if can_scout else []
    available = False
    if players > 2 and token and scouts:
        available = any(legal_shows(*after_scout(hand, active, scout)) for scout in scouts)
    return Observation(
        match_id=match_id,
        seat=0,
        num_players=players,
        num_rounds=players,
        hand=tuple(hand),
        hand_sizes=(len(hand),) + (5,) * (players - 1),
        active_set=tuple(active),
        active_owner=1 if active else None,
        captured_counts=(0,) * players,
        scout_chips=(3 if can_scout else 0,) * players if players == 2 else (0,) * players,
        scout_show_tokens=(token,) * players,
        scores=(0,) * players,
        current_seat=0,
        legal_shows=tuple(shows),
        legal_scouts=tuple(scouts),
        scout_and_show_available=available,
        request_id=request_id,
        deadline_ms=deadline_ms,
        time_bank_ms=time_bank_ms,
    )


def random_observation(rng: random.Random) -> Observation:
    players = rng.choice([2, 3, 4, 5])
    hand = [Card(*rng.sample(range(1, 11), 2)) for _ in range(rng.randint(1, 11))]
    active: list[Card] = []
    if rng.random() < 0.8:
        length = rng.randint(1, 4)
        if rng.random() < 0.5:
            value = rng.randint(1, 10)
            faces = [value] * length
        else:
            low = rng.randint(1, 11 - length)
            faces = list(range(low, low + length))
            if rng.random() < 0.5:
                faces.reverse()
        active = [Card(f, rng.choice([v for v in range(1, 11) if v != f])) for f in faces]
    can_scout = players > 2 or rng.random() < 0.7
    obs = observation(hand, active, players=players, can_scout=can_scout, token=rng.random() < 0.7)
    if not obs.legal_shows and not obs.legal_scouts:
        return random_observation(rng)  # the round would have ended
    return obs


class Connection:
    """One Play stream as the fake referee sees it, in SDK types."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.metadata = dict(context.invocation_metadata() or ())
        self.unread: deque[BotMessage | None] = deque()
        self.bundles = 0
        """BotBundles received so far (their messages come out of `recv` one by one)."""

    async def recv(self, timeout: float = 5.0) -> BotMessage | None:
        if self.unread:
            return self.unread.popleft()
        raw = await asyncio.wait_for(self.context.read(), timeout)
        if raw is EOF:
            return None
        if raw.WhichOneof("body") == "bundle":
            self.bundles += 1
        self.unread.extend(testing.bot_messages_from_proto(raw))
        return self.unread.popleft()

    async def send(self, *messages: RefereeMessage) -> float:
        for message in messages:
            await self.context.write(testing.referee_message_to_proto(message))
        return time.monotonic()

    async def send_bundle(self, *messages: RefereeMessage) -> None:
        await self.context.write(testing.referee_bundle_to_proto(messages))

    async def handshake(self, resumed: bool = False) -> Hello:
        hello = await self.recv()
        assert isinstance(hello, Hello), hello
        await self.send(Welcome(1, hello.bot_name, "session", resumed))
        return hello

    async def drain(self) -> list[BotMessage]:
        """Everything the bot still sends until it closes the stream."""
        rest = []
        while (message := await self.recv()) is not None:
            rest.append(message)
        return rest

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        await self.context.abort(code, details)


Script = Callable[[Connection], Awaitable[None]]


class FakeArena(arena_pb2_grpc.ArenaServicer):
    """Plays `scripts[i]` on the i-th connection (the last one again after that). A failed
    assertion in a script stops the bot and is raised again by `check`."""

    def __init__(self, *scripts: Script) -> None:
        self.scripts = scripts
        self.connections = 0
        self.failures: list[BaseException] = []
        self.stop = asyncio.Event()

    # override: it writes through context.write() and returns None, as grpc.aio allows.
    async def Play(  # type: ignore[override]
        self, request_iterator: Any, context: Any
    ) -> None:
        index = self.connections
        self.connections += 1
        connection = Connection(context)
        if connection.metadata.get("authorization") != f"Bearer {TOKEN}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown bot token")
        try:
            await self.scripts[min(index, len(self.scripts) - 1)](connection)
        except (AssertionError, TimeoutError) as failure:
            self.failures.append(failure)
            self.stop.set()
            raise

    def check(self) -> None:
        if self.failures:
            raise self.failures[0]


@contextlib.asynccontextmanager
async def serving(arena: FakeArena) -> AsyncIterator[str]:
    server = aio.server()
    arena_pb2_grpc.add_ArenaServicer_to_server(arena, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def play(arena: FakeArena, bot: Bot, token: str = TOKEN, **options: Any) -> int:
    async with serving(arena) as address:
        played = await asyncio.wait_for(
            run_bot(bot, address, token, stop_event=arena.stop, **options), 15
        )
    arena.check()
    return played


def start(match_id: str = "m1", players: int = 4) -> MatchStart:
    names = tuple(f"p{i}" for i in range(players))
    return MatchStart(match_id, 0, names, players, players, TimeControl(1000, 10000))


def resumed_start(time_bank_ms: int, strikes: int) -> MatchStart:
    """The MatchStart of m1 resumed after a reconnect, seat 0 of a, b, c, d (1 s a decision)."""
    return MatchStart(
        "m1",
        0,
        ("a", "b", "c", "d"),
        4,
        4,
        TimeControl(1000, 0),
        resumed=True,
        time_bank_ms=time_bank_ms,
        strikes=strikes,
    )


class Recorder(Bot):
    """Remembers every call; shows the last legal show (never the fallback) when it can."""

    name = "recorder"
    version = "7"

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def choose_rotation(self, request: RotationRequest) -> bool:
        self.calls.append(("rotation", request))
        return True

    def act(self, observation: Observation) -> Action:
        self.calls.append(("act", observation))
        return (observation.legal_shows or observation.legal_scouts)[-1]

    def on_match_start(self, start: MatchStart) -> None:
        self.calls.append(("start", start))

    def on_event(self, event: PublicEvent) -> None:
        self.calls.append(("event", event))

    def on_round_end(self, round_ended: RoundEnded) -> None:
        self.calls.append(("round_end", round_ended))

    def on_match_end(self, match_ended: MatchEnded) -> None:
        self.calls.append(("match_end", match_ended))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]
