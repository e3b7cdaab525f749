"""The Python bot SDK (clients/python/src/scout_client): conversions, bundled bots, SPEC loading
and the runner against a scripted fake referee served with grpc.aio on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2
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
    End,
    ErrorCode,
    GreedyBot,
    Hello,
    MatchEnded,
    MatchStart,
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
    TimeControl,
    Welcome,
    beats,
    convert,
    group_strength,
    run_bot,
    testing,
)
from scout_client.cli import BotSpecError, load_bot, main
from scout_client.runner import backoff_delay
from scout_client.types import BotMessage, RefereeMessage
from support import oracle

TOKEN = "secret-token"
EOF: object = getattr(aio, "EOF")  # noqa: B009 - missing from grpc's type stubs
LEFT, RIGHT = End.LEFT, End.RIGHT


# --- a reference for legality: the rules oracle of tests/support, not scout_rules.groups -------

SDK_END = {oracle.L: LEFT, oracle.R: RIGHT}
ORACLE_END = {LEFT: oracle.L, RIGHT: oracle.R}


def legal_shows(faces: Sequence[int], active: Sequence[int]) -> list[Show]:
    return [Show(start, length) for start, length in oracle.groups_beating(faces, active)]


def legal_scouts(hand_size: int, active_size: int) -> list[Scout]:
    return [Scout(SDK_END[e], f, i) for e, f, i in oracle.scout_choices(hand_size, active_size)]


def after_scout(hand: Sequence[Card], active: Sequence[Card], scout: Scout
                ) -> tuple[list[int], list[int]]:
    """The hand's faces after ``scout``, and the faces left in the active set."""
    return oracle.scouted([c.face for c in hand], [(c.face, c.other) for c in active],
                          ORACLE_END[scout.end], scout.flip, scout.insert_at)


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
    obs = observation(hand, active, players=players, can_scout=can_scout,
                      token=rng.random() < 0.7)
    if not obs.legal_shows and not obs.legal_scouts:
        return random_observation(rng)  # the round would have ended
    return obs


# --- conversions -------------------------------------------------------------------------------


def full_decision_request() -> arena_pb2.DecisionRequest:
    c = game_pb2.Card
    return arena_pb2.DecisionRequest(
        match_id="m7",
        request_id=42,
        observation=game_pb2.Observation(
            match_id="m7", seat=2, num_players=3, round_index=1, num_rounds=3, starting_seat=1,
            hand=[c(face=3, other=7), c(face=4, other=1)], hand_sizes=[5, 6, 2],
            active_set=[c(face=5, other=9), c(face=5, other=2)], active_owner=0,
            captured_counts=[1, 0, 2], scout_chips=[0, 1, 0],
            scout_show_tokens=[True, False, True], scores=[3, -1, 0], current_seat=2,
            history=[
                game_pb2.PublicAction(seat=0, kind=game_pb2.ACTION_KIND_SHOW,
                                      cards=[c(face=5, other=9), c(face=5, other=2)],
                                      start=2, length=2),
                game_pb2.PublicAction(seat=1, kind=game_pb2.ACTION_KIND_SCOUT,
                                      cards=[c(face=6, other=1)], end=game_pb2.END_RIGHT,
                                      insert_at=3, by_referee=True),
                game_pb2.PublicAction(seat=1, kind=game_pb2.ACTION_KIND_SCOUT_AND_SHOW,
                                      cards=[c(face=6, other=1), c(face=7, other=2)],
                                      start=0, length=1, end=game_pb2.END_LEFT, insert_at=0),
            ],
        ),
        legal_shows=[game_pb2.Show(start=0, length=1), game_pb2.Show(start=0, length=2)],
        legal_scouts=[game_pb2.Scout(end=game_pb2.END_LEFT, flip=True, insert_at=2)],
        scout_and_show_available=True,
        deadline_ms=1000,
        time_bank_ms=9000,
    )


def test_decision_request_round_trips_through_observation() -> None:
    request = full_decision_request()
    obs = convert.decision_request_from_proto(request)
    assert obs.hand_faces() == (3, 4)
    assert obs.active_faces() == (5, 5)
    assert obs.active_owner == 0
    assert obs.legal_shows == (Show(0, 1), Show(0, 2))
    assert obs.legal_scouts == (Scout(LEFT, True, 2),)
    assert (obs.request_id, obs.deadline_ms, obs.time_bank_ms) == (42, 1000, 9000)
    show, scout, both = obs.history
    assert (show.kind, show.start, show.length, show.end, show.insert_at) == (
        ActionKind.SHOW, 2, 2, None, None)
    assert (scout.kind, scout.start, scout.end, scout.insert_at, scout.by_referee) == (
        ActionKind.SCOUT, None, RIGHT, 3, True)
    assert scout.scouted_card == Card(6, 1) and scout.shown_cards == ()
    assert both.scouted_card == Card(6, 1) and both.shown_cards == (Card(7, 2),)
    assert testing.decision_request_to_proto(obs) == request

    request.observation.ClearField("active_owner")
    request.observation.ClearField("active_set")
    clear = convert.decision_request_from_proto(request)
    assert clear.active_owner is None and clear.table_clear()
    assert testing.decision_request_to_proto(clear) == request


def test_scout_without_an_end_is_refused() -> None:
    with pytest.raises(ValueError, match="end"):
        convert.scout_from_proto(game_pb2.Scout(end=game_pb2.END_UNSPECIFIED))
    empty = arena_pb2.BotMessage(action=arena_pb2.ActionChoice(match_id="m", request_id=1))
    assert testing.bot_message_from_proto(empty) == ActionChoice("m", 1, None)
    assert testing.bot_message_from_proto(arena_pb2.BotMessage()) is None
    assert convert.referee_message_from_proto(arena_pb2.RefereeMessage()) is None


REFEREE_MESSAGES: list[RefereeMessage] = [
    Welcome(1, "greedy", "s-1", resumed=True),
    MatchStart("m1", 1, ("a", "b", "c"), 3, 3, TimeControl(1000, 10000), resumed=True,
               time_bank_ms=800, strikes=2),
    RotationRequest("m1", 5, 2, cards(1, 2, 3), deadline_ms=1000, time_bank_ms=500),
    observation(cards(1, 2, 2), cards(2), request_id=9),
    AnswerResult("m1", 9, AnswerStatus.ILLEGAL, "a 2-card run 4-5 does not beat 3-3", 1, 700),
    PublicEvent("m1", 0, PublicAction(0, ActionKind.SCOUT, cards(4), end=RIGHT, insert_at=1)),
    RoundEnded("m1", 1, RoundEndReason.UNBEATEN_SHOW, exempt_seat=2, round_scores=(1, -2, 3),
               totals=(4, 0, 3), hands=(cards(1), (), cards(2, 3)),
               dealt_hands=(cards(1, 2), cards(3), cards(4)), rotations=(True, False, False)),
    RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED),
    MatchEnded("m1", (4, 0, 3), (1, 3, 2), (1,), "m1"),
    ProtocolError(ErrorCode.EXPECTED_HELLO, "send Hello first"),
]

BOT_MESSAGES: list[BotMessage] = [
    Hello("b", "v1", 1, 4),
    RotationChoice("m1", 3, True),
    ActionChoice("m1", 4, Show(1, 2)),
    ActionChoice("m1", 4, Scout(RIGHT, True, 0)),
    ActionChoice("m1", 4, ScoutAndShow(Scout(LEFT, False, 3), Show(2, 3))),
]


@pytest.mark.parametrize("message", REFEREE_MESSAGES, ids=lambda m: type(m).__name__)
def test_referee_messages_round_trip(message: RefereeMessage) -> None:
    wire = testing.referee_message_to_proto(message)
    again = convert.referee_message_from_proto(arena_pb2.RefereeMessage.FromString(
        wire.SerializeToString()))
    assert again == message


@pytest.mark.parametrize("message", BOT_MESSAGES, ids=repr)
def test_bot_messages_round_trip(message: BotMessage) -> None:
    wire = convert.bot_message_to_proto(message)
    assert testing.bot_message_from_proto(arena_pb2.BotMessage.FromString(
        wire.SerializeToString())) == message


def test_round_ended_without_exempt_seat_has_no_field_on_the_wire() -> None:
    wire = testing.round_ended_to_proto(RoundEnded("m", 0, RoundEndReason.NO_LEGAL_MOVE))
    assert not wire.HasField("exempt_seat")


def test_rotation_helpers() -> None:
    request = RotationRequest("m", 1, 0, (Card(1, 5), Card(2, 6), Card(3, 7)))
    assert request.hand_faces() == (1, 2, 3)
    assert request.rotated_hand() == (Card(7, 3), Card(6, 2), Card(5, 1))
    assert request.rotated_faces() == (7, 6, 5)


# --- group rules and the bundled bots ----------------------------------------------------------


@pytest.mark.parametrize(
    ("mine", "active", "expected"),
    [
        ((5, 6, 7), (3, 4, 5), True),
        ((8, 8), (6, 6), True),
        ((6, 6), (6, 6), False),  # equal strength does not beat
        ((3, 3), (4, 5), True),  # a set beats a run of the same length
        ((4, 5), (3, 3), False),
        ((1, 2, 3), (9, 9), True),  # more cards wins
        ((8, 7, 6), (5, 6, 7), True),  # descending runs count by their lowest value
        ((9,), (8,), True),
        ((2, 4), (), False),  # not a group
        ((7,), (), True),
    ],
)
def test_beats_follows_the_rules(mine: tuple[int, ...], active: tuple[int, ...],
                                 expected: bool) -> None:
    assert beats(mine, active) is expected
    assert oracle.beats(mine, active) is expected


def test_group_strength() -> None:
    assert group_strength((4,)) == (1, 1, 4)
    assert group_strength((3, 2, 1)) == (3, 0, 1)
    assert group_strength((1, 2, 2)) is None
    assert group_strength(()) is None


def check_action(obs: Observation, action: Action) -> None:
    if isinstance(action, Show):
        assert action in obs.legal_shows
    elif isinstance(action, Scout):
        assert action in obs.legal_scouts
    else:
        assert isinstance(action, ScoutAndShow)
        assert scout_and_show_ok(obs, action), (obs, action)
    assert obs.is_legal(action)


@pytest.mark.parametrize("bot_class", [RandomBot, GreedyBot])
def test_bundled_bots_play_only_legal_actions(bot_class: type[Bot]) -> None:
    rng = random.Random(7)
    bot = bot_class()
    combos: list[tuple[Observation, ScoutAndShow]] = []
    for _ in range(400):
        obs = random_observation(rng)
        action = bot.act(obs)
        check_action(obs, action)  # type: ignore[arg-type]
        if isinstance(action, ScoutAndShow):
            combos.append((obs, action))
        rotate = bot.choose_rotation(RotationRequest("m1", 1, 0, obs.hand))
        assert isinstance(rotate, bool)
    assert combos, "both bots play Scout & Show when it is allowed"
    assert all(obs.num_players >= 3 for obs, _ in combos)
    if bot_class is GreedyBot:
        # Greedy spends the token only on a group at least as long as the active set.
        assert all(combo.show.length >= max(2, len(obs.active_set)) for obs, combo in combos)


def kind_of(action: Action) -> str:
    return type(action).__name__


def test_random_bot_picks_each_available_kind_about_equally_often() -> None:
    """Uniform over the kinds, not over the actions: the one legal Show is played about as
    often as any of the 20 Scouts or the many Scout & Shows."""
    obs = observation(cards(5, 7, 9, 9), (Card(6, 1), Card(6, 2)), players=4)
    assert obs.legal_shows == (Show(2, 2),) and len(obs.legal_scouts) == 20
    assert len(obs.scout_and_shows()) > 20
    bot = RandomBot(seed=1)
    actions = [bot.act(replace(obs, match_id=f"m{i}")) for i in range(600)]
    counts = Counter(kind_of(action) for action in actions)
    assert set(counts) == {"Show", "Scout", "ScoutAndShow"}
    assert all(150 <= count <= 250 for count in counts.values()), counts
    combos = {action for action in actions if isinstance(action, ScoutAndShow)}
    assert len(combos) > 10  # uniform within the kind, not one favourite
    for combo in combos:
        assert scout_and_show_ok(obs, combo)


@pytest.mark.parametrize(
    ("players", "token"), [(2, True), (4, False)], ids=["two players", "token spent"]
)
def test_random_bot_never_plays_scout_and_show_where_it_is_not_allowed(
    players: int, token: bool
) -> None:
    obs = observation(cards(5, 7, 9, 9), (Card(6, 1), Card(6, 2)), players=players, token=token)
    assert not obs.scout_and_show_available and obs.scout_and_shows() == []
    bot = RandomBot(seed=1)
    counts = Counter(kind_of(bot.act(replace(obs, match_id=f"m{i}"))) for i in range(400))
    assert set(counts) == {"Show", "Scout"}
    assert all(150 <= count <= 250 for count in counts.values()), counts


def test_scout_and_shows_match_the_reference() -> None:
    rng = random.Random(3)
    checked = 0
    while checked < 50:
        obs = random_observation(rng)
        if not obs.scout_and_show_available:
            assert obs.scout_and_shows() == []
            continue
        combos = obs.scout_and_shows()
        assert combos, obs
        expected = {
            ScoutAndShow(scout, show)
            for scout in obs.legal_scouts
            for show in legal_shows(*after_scout(obs.hand, obs.active_set, scout))
        }
        assert set(combos) == expected
        checked += 1


def test_greedy_prefers_the_longest_then_weakest_show() -> None:
    obs = observation(cards(9, 9, 2, 3, 7, 7), cards(4))
    assert GreedyBot().act(obs) == Show(2, 2)  # run 2-3 is weaker than the sets 7-7 and 9-9
    obs = observation(cards(9, 9, 1, 2, 3), ())
    assert GreedyBot().act(obs) == Show(2, 3)


def test_greedy_uses_scout_and_show_to_complete_a_run() -> None:
    obs = observation(cards(5, 7), (Card(6, 1), Card(6, 2)))
    assert not obs.legal_shows and obs.scout_and_show_available
    action = GreedyBot().act(obs)
    assert action == ScoutAndShow(Scout(LEFT, False, 1), Show(0, 3))
    # Without the token it scouts the card that makes the run.
    action = GreedyBot().act(observation(cards(5, 7), (Card(6, 1), Card(6, 2)), token=False))
    assert isinstance(action, Scout) and action.insert_at == 1 and not action.flip


def test_random_bot_is_reproducible_per_match() -> None:
    rng = random.Random(11)
    observations = [random_observation(rng) for _ in range(30)]
    first = [RandomBot(seed=5).act(o) for o in observations]
    assert [RandomBot(seed=5).act(o) for o in observations] == first
    # A match replays the same when another match draws from the same bot in between.
    alone, shared = RandomBot(seed=5), RandomBot(seed=5)
    solo = [alone.act(o) for o in observations]
    interleaved = []
    for o in observations:
        shared.act(replace(o, match_id="another match"))
        interleaved.append(shared.act(o))
    assert interleaved == solo
    assert len(set(solo)) > 1


def test_fallback_is_the_first_legal_show_else_first_scout() -> None:
    obs = observation(cards(4, 4, 1), cards(2))
    assert obs.fallback() == Show(0, 1)
    obs = observation(cards(1), cards(5, 5))
    assert obs.fallback() == Scout(LEFT, False, 0)


# --- SPEC loading ------------------------------------------------------------------------------


def test_load_bundled_and_module_specs() -> None:
    bot = load_bot("random", seed=3)
    assert isinstance(bot, RandomBot) and bot.seed == 3
    assert isinstance(load_bot("greedy", seed=3), GreedyBot)
    assert isinstance(load_bot("scout_client.bots:GreedyBot"), GreedyBot)


def test_load_file_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    (tmp_path / "sdk_test_helper.py").write_text("FAVOURITE = 1\n")
    (tmp_path / "my_bot.py").write_text(
        "from scout_client import Bot\n"
        "from sdk_test_helper import FAVOURITE\n"
        "class MyBot(Bot):\n"
        "    name = 'mine'\n"
        "    def __init__(self, seed=None):\n"
        "        self.seed = seed\n"
        "    def act(self, observation):\n"
        "        return observation.fallback()\n"
    )
    bot = load_bot(f"{tmp_path / 'my_bot.py'}:MyBot", seed=9)
    assert bot.name == "mine" and bot.seed == 9  # type: ignore[attr-defined]


def test_module_spec_resolves_from_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`bot run mybot:MyBot` in the bot's own folder: a console script's sys.path does not
    hold the current directory, yet Python users expect `import mybot` to work there."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sdk_cwd_bot.py").write_text(
        "from scout_client import Bot\n"
        "class MyBot(Bot):\n"
        "    name = 'cwd'\n"
        "    def act(self, observation):\n"
        "        return observation.fallback()\n"
    )
    assert load_bot("sdk_cwd_bot:MyBot").name == "cwd"


def test_missing_module_error_says_where_it_looked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BotSpecError) as caught:
        load_bot("sdk_absent_bot:MyBot")
    message = str(caught.value)
    assert str(tmp_path) in message and "current directory" in message
    assert "sdk_absent_bot.py:ClassName" in message


@pytest.mark.parametrize(
    "spec",
    ["nope", "scout_client.bots:Nope", "sdk_no_such_module:Bot", "missing/bot.py:Bot",
     "scout_client.types:Card", "scout_client.bots:"],
)
def test_bad_specs_are_refused(spec: str) -> None:
    with pytest.raises(BotSpecError):
        load_bot(spec)


# --- a scripted fake referee -------------------------------------------------------------------


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


def test_runner_plays_a_match_and_echoes_request_ids() -> None:
    bot = Recorder()
    obs = observation(cards(3, 4, 8), cards(2), match_id="m1", request_id=12)
    event = PublicEvent("m1", 0, PublicAction(0, ActionKind.SHOW, cards(4), start=1, length=1))

    async def script(conn: Connection) -> None:
        hello = await conn.handshake()
        # Recorder overrides on_event, so it asks for the full stream.
        assert hello == Hello("recorder", "7", 1, 3, lean=False)
        assert conn.metadata["authorization"] == f"Bearer {TOKEN}"
        await conn.send(start("m1"))
        await conn.send(RotationRequest("m1", 11, 0, cards(1, 2), 2000, 0))
        assert await conn.recv() == RotationChoice("m1", 11, True)
        await conn.send(AnswerResult("m1", 11, AnswerStatus.ACCEPTED), obs)
        assert await conn.recv() == ActionChoice("m1", 12, obs.legal_shows[-1])
        await conn.send(AnswerResult("m1", 12, AnswerStatus.ACCEPTED), event,
                        RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED),
                        MatchEnded("m1", (1, 2, 3, 4), (4, 3, 2, 1), (), "m1"))
        assert await conn.drain() == []

    played = asyncio.run(play(FakeArena(script), bot, max_concurrent_matches=3, max_matches=1))
    assert played == 1
    assert bot.kinds() == ["start", "rotation", "act", "event", "round_end", "match_end"]
    assert bot.calls[2][1] == obs
    assert bot.calls[3][1] == event


class QuickRecorder(Recorder):
    """A Recorder that says it is quick, so the SDK asks it on the event loop."""

    quick = True


@pytest.mark.parametrize("quick", [False, True], ids=["threaded", "quick"])
def test_a_plain_bot_is_asked_in_a_worker_thread_and_a_quick_one_on_the_event_loop(
        quick: bool) -> None:
    threads: list[str] = []

    class Where(QuickRecorder if quick else Recorder):  # type: ignore[misc]
        def act(self, observation: Observation) -> Action:
            threads.append(threading.current_thread().name)
            return super().act(observation)  # type: ignore[no-any-return]

    bot = Where()
    obs = observation(cards(3, 4, 8), cards(2), match_id="m1", request_id=12)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), RotationRequest("m1", 11, 0, cards(1, 2), 2000, 0))
        assert await conn.recv() == RotationChoice("m1", 11, True)
        await conn.send(obs)
        assert await conn.recv() == ActionChoice("m1", 12, obs.legal_shows[-1])
        await conn.send(RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED), MatchEnded("m1"))
        assert await conn.drain() == []

    assert asyncio.run(play(FakeArena(script), bot, max_matches=1)) == 1
    assert bot.kinds() == ["start", "rotation", "act", "round_end", "match_end"]
    [thread] = threads
    if quick:
        assert thread == threading.main_thread().name
    else:
        assert thread.startswith("scout-bot")


def test_a_quick_bots_hook_that_returns_an_awaitable_is_awaited_before_the_next_message(
        ) -> None:
    class Deferring(QuickRecorder):
        def on_round_end(self, round_ended: RoundEnded) -> Any:
            self.calls.append(("round_end", round_ended))

            async def later() -> None:
                await asyncio.sleep(0.05)
                self.calls.append(("round_end_done", round_ended))

            return later()

    bot = Deferring()
    first = observation(cards(3, 4, 8), cards(2), match_id="m1", request_id=1)
    second = observation(cards(5, 6), match_id="m1", request_id=2)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), first)
        assert await conn.recv() == ActionChoice("m1", 1, first.legal_shows[-1])
        await conn.send(RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED), second)
        assert await conn.recv() == ActionChoice("m1", 2, second.legal_shows[-1])
        await conn.send(RoundEnded("m1", 1, RoundEndReason.HAND_EMPTIED), MatchEnded("m1"))
        assert await conn.drain() == []

    assert asyncio.run(play(FakeArena(script), bot, max_matches=1)) == 1
    assert bot.kinds() == ["start", "act", "round_end", "round_end_done", "act", "round_end",
                           "round_end_done", "match_end"]


def test_a_referee_bundle_is_read_as_its_messages_in_order_and_the_answers_go_back_bundled(
        ) -> None:
    bot = QuickRecorder()
    first = observation(cards(3, 4, 8), cards(2), match_id="m1", request_id=3)
    second = observation(cards(5, 6), match_id="m2", request_id=4)
    hellos: list[Hello] = []
    bundles: list[int] = []

    async def script(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        await conn.send_bundle(start("m1"), start("m2"), first, second)
        assert [await conn.recv(), await conn.recv()] == [
            ActionChoice("m1", 3, first.legal_shows[-1]),
            ActionChoice("m2", 4, second.legal_shows[-1])]
        bundles.append(conn.bundles)
        await conn.send_bundle(RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED),
                               MatchEnded("m1"), MatchEnded("m2"))
        assert await conn.drain() == []

    played = asyncio.run(play(FakeArena(script), bot, max_concurrent_matches=2, max_matches=2))
    assert played == 2
    assert hellos[0].accepts_bundles
    assert convert.bot_message_to_proto(hellos[0]).hello.accepts_bundles
    assert bot.kinds() == ["start", "start", "act", "act", "round_end", "match_end",
                           "match_end"]
    assert bundles == [1]  # both answers were ready together: one BotBundle


def test_bot_messages_go_alone_or_as_one_bundle_in_order() -> None:
    one = ActionChoice("m", 1, Show(0, 1))
    two = RotationChoice("m", 2, True)
    assert convert.bot_messages_to_proto([one]) == convert.bot_message_to_proto(one)
    wire = convert.bot_messages_to_proto([one, two])
    assert wire.WhichOneof("body") == "bundle"
    assert testing.bot_messages_from_proto(wire) == [one, two]


def test_two_matches_are_played_concurrently() -> None:
    asked = {"a": threading.Event(), "b": threading.Event()}

    class Waiting(Recorder):
        def act(self, observation: Observation) -> Action:
            # Each match's act waits until the other's has started: only possible in parallel.
            asked[observation.match_id].set()
            other = "b" if observation.match_id == "a" else "a"
            assert asked[other].wait(5)
            return super().act(observation)

    bot = Waiting()
    obs_a = observation(cards(1, 2, 3), match_id="a", request_id=100, deadline_ms=4000)
    obs_b = observation(cards(5, 6), match_id="b", request_id=200, deadline_ms=4000)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("a"), start("b"))
        await conn.send(RotationRequest("a", 1, 0, cards(1)), RotationRequest("b", 2, 0, cards(2)))
        assert {await conn.recv(), await conn.recv()} == {
            RotationChoice("a", 1, True), RotationChoice("b", 2, True)}
        await conn.send(obs_a, obs_b)
        # Both are the bot's own choices (a's is not the fallback: it did not wait for b's
        # act to finish in series), in whichever order the two threads finished.
        assert {await conn.recv(), await conn.recv()} == {
            ActionChoice("b", 200, obs_b.legal_shows[-1]),
            ActionChoice("a", 100, obs_a.legal_shows[-1]),
        }
        await conn.send(MatchEnded("b"), MatchEnded("a"))
        assert await conn.drain() == []

    assert asyncio.run(play(FakeArena(script), bot, max_matches=2)) == 2


class Sleepy(Recorder):
    """A sync bot that overruns every deadline."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def act(self, observation: Observation) -> Action:
        self.release.wait(5)
        return super().act(observation)


@pytest.mark.parametrize(
    ("deadline_ms", "bank_ms", "use_time_bank", "margin_ms", "expected_s"),
    [
        (400, 0, True, 100, 0.3),  # the default margin
        (300, 300, True, 300, 0.3),
        (500, 5000, False, 300, 0.2),
    ],
)
def test_slow_bot_gets_the_fallback_before_the_deadline(
    deadline_ms: int, bank_ms: int, use_time_bank: bool, margin_ms: int, expected_s: float,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK answers `margin_ms` before the referee would time the seat out: after
    deadline + bank, or after the deadline alone when told not to use the bank."""
    limit_s = (deadline_ms + (bank_ms if use_time_bank else 0)) / 1000
    bot = Sleepy()
    obs = observation(cards(3, 4, 8), cards(2), deadline_ms=deadline_ms, time_bank_ms=bank_ms)
    elapsed: list[float] = []

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"))
        sent = await conn.send(obs)
        answer = await conn.recv()
        elapsed.append(time.monotonic() - sent)
        assert answer == ActionChoice("m1", 1, Show(0, 1))  # the first legal show
        await conn.send(MatchEnded("m1"))
        assert await conn.drain() == []

    try:
        with caplog.at_level(logging.WARNING, logger="scout_client"):
            options: dict[str, Any] = {"use_time_bank": use_time_bank}
            if margin_ms != 100:
                options["safety_margin_ms"] = margin_ms
            asyncio.run(play(FakeArena(script), bot, max_matches=1, **options))
    finally:
        bot.release.set()
    assert expected_s - 0.05 <= elapsed[0] < limit_s
    assert "did not return within" in caplog.text


class Raising(Recorder):
    def act(self, observation: Observation) -> Action:
        raise RuntimeError("bug in the bot")


class ReturnsNone(Recorder):
    def act(self, observation: Observation) -> Action:
        return None  # type: ignore[return-value]


class ReturnsIllegalShow(Recorder):
    def act(self, observation: Observation) -> Action:
        return Show(0, 3)


@pytest.mark.parametrize(
    ("bot_class", "logged"),
    [(variant, text) for quick in (False, True)
     for bot, text in ((Raising, "bug in the bot"), (ReturnsNone, "not an Action"),
                       (ReturnsIllegalShow, "not among the legal shows"))
     for variant in ([type(f"Quick{bot.__name__}", (bot,), {"quick": True})] if quick
                     else [bot])],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_broken_answers_are_replaced_by_the_fallback(
    bot_class: type[Bot], logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    obs = observation(cards(3, 4, 8), cards(2), deadline_ms=5000)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"))
        sent = await conn.send(obs)
        assert await conn.recv() == ActionChoice("m1", 1, Show(0, 1))
        assert time.monotonic() - sent < 1
        await conn.send(MatchEnded("m1"))
        await conn.drain()

    with caplog.at_level(logging.WARNING, logger="scout_client"):
        asyncio.run(play(FakeArena(script), bot_class(), max_matches=1))
    assert logged in caplog.text


def test_rejected_answer_calls_on_rejected_and_sends_the_fallback() -> None:
    combo = ScoutAndShow(Scout(LEFT, False, 0), Show(0, 2))
    rejected: list[AnswerResult] = []

    class Daring(Bot):
        name = "daring"

        async def act(self, observation: Observation) -> Action:
            await asyncio.sleep(0)
            return combo

        def on_rejected(self, result: AnswerResult) -> None:
            rejected.append(result)

    obs = observation(cards(2, 3, 9), (Card(2, 5), Card(2, 6)), deadline_ms=3000)
    assert obs.scout_and_show_available and obs.fallback() == Scout(LEFT, False, 0)
    verdict = AnswerResult("m1", 1, AnswerStatus.ILLEGAL, "does not beat", 1, 10000)

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), obs)
        assert await conn.recv() == ActionChoice("m1", 1, combo)
        await conn.send(verdict)
        assert await conn.recv() == ActionChoice("m1", 1, obs.fallback())
        await conn.send(AnswerResult("m1", 1, AnswerStatus.ACCEPTED), MatchEnded("m1"))
        assert await conn.drain() == []

    asyncio.run(play(FakeArena(script), Daring(), max_matches=1))
    assert rejected == [verdict]


def test_reconnects_and_answers_resent_requests_once() -> None:
    bot = Recorder()
    first = observation(cards(3, 4), request_id=1)
    second = observation(cards(6, 7, 7), request_id=2)

    async def ends_at_once(conn: Connection) -> None:
        await conn.handshake()

    async def aborts(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), first)
        assert await conn.recv() == ActionChoice("m1", 1, first.legal_shows[-1])
        await conn.abort(grpc.StatusCode.UNAVAILABLE, "referee restarting")

    async def resumes(conn: Connection) -> None:
        await conn.handshake(resumed=True)
        await conn.send(MatchStart("m1", 0, ("a", "b", "c", "d"), 4, 4, TimeControl(1000, 0),
                                   resumed=True, time_bank_ms=500, strikes=1))
        await conn.send(first)  # "the answer never arrived": the same request again
        assert await conn.recv() == ActionChoice("m1", 1, first.legal_shows[-1])
        await conn.send(AnswerResult("m1", 1, AnswerStatus.ACCEPTED), second)
        assert await conn.recv() == ActionChoice("m1", 2, second.legal_shows[-1])
        await conn.send(second)  # a duplicate on the same stream is ignored
        await conn.send(AnswerResult("m1", 2, AnswerStatus.ACCEPTED), MatchEnded("m1"))
        assert await conn.drain() == []

    arena = FakeArena(ends_at_once, aborts, resumes)
    assert asyncio.run(play(arena, bot, max_matches=1)) == 1
    assert arena.connections == 3
    assert bot.kinds() == ["start", "act", "start", "act", "match_end"]
    resumed = bot.calls[2][1]
    assert isinstance(resumed, MatchStart) and resumed.resumed and resumed.strikes == 1


# --- lean streams (PROTOCOL.md §3.6.1): no PublicEvent, no ACCEPTED -------------------------


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
    [(LeanRecorder, None, True), (Watcher, None, False), (LeanRecorder, True, False),
     (Watcher, False, True), (RandomBot, None, True), (GreedyBot, None, True)],
    ids=["default", "on_event overridden", "asked for events", "asked for lean",
         "random", "greedy"],
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
    second = observation(cards(2, 3, 9), (Card(2, 5), Card(2, 6)), request_id=2,
                         deadline_ms=3000)
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
        await conn.send(RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED),
                        AnswerResult("m1", 3, AnswerStatus.ILLEGAL, "stray", 1, 9000),
                        RotationRequest("m1", 4, 1, cards(3, 4), 2000, 0))
        assert await conn.recv() == RotationChoice("m1", 4, True)
        await conn.send(fifth)
        assert await conn.recv() == ActionChoice("m1", 5, fifth.legal_shows[-1])
        await conn.send(RoundEnded("m1", 1, RoundEndReason.HAND_EMPTIED),
                        MatchEnded("m1", (3, 1, 0, 0), (1, 2, 3, 3), (), "m1"))
        assert await conn.drain() == []

    assert asyncio.run(play(FakeArena(script), bot, max_matches=1)) == 1
    assert hellos[0].lean
    assert bot.calls == [
        ("rotation", 1), ("act", 2), ("rejected", 1), ("rejected", 2), ("act", 3),
        ("round_end", 0), ("rejected", 3), ("rotation", 4), ("act", 5), ("round_end", 1),
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
        await conn.send(MatchStart("m1", 0, ("a", "b", "c", "d"), 4, 4, TimeControl(1000, 0),
                                   resumed=True, time_bank_ms=4000, strikes=0))
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
        (TOKEN, grpc.StatusCode.FAILED_PRECONDITION, "protocol 1 is not supported",
         ProtocolError(ErrorCode.UNSUPPORTED_PROTOCOL, "speak protocol 2")),
        (TOKEN, grpc.StatusCode.ABORTED,
         "superseded by a newer connection with the same token", None),
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


# --- the command line --------------------------------------------------------------------------


def test_cli_plays_until_max_matches_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    obs = observation(cards(1, 2, 3, 9))
    hellos: list[Hello] = []

    async def script(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        await conn.send(start("m1"), obs)
        assert await conn.recv() == ActionChoice("m1", 1, Show(0, 3))  # greedy: longest
        await conn.send(MatchEnded("m1"))
        await conn.drain()

    async def scenario() -> tuple[int, int]:
        async with serving(FakeArena(script)) as address:
            code = await asyncio.to_thread(
                main, ["run", "greedy", "--address", address, "--token", TOKEN,
                       "--max-matches", "1", "--max-concurrent", "2"])
            monkeypatch.setenv("SCOUT_ADDRESS", address)
            monkeypatch.setenv("SCOUT_TOKEN", "wrong")
            rejected = await asyncio.to_thread(main, ["run", "random", "--seed", "4"])
        return code, rejected

    assert asyncio.run(scenario()) == (0, 1)
    assert hellos == [Hello("greedy", "1", 1, 2)]
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("scout-bot: error: the referee rejected the connection "
                              "(UNAUTHENTICATED): unknown bot token")


def test_cli_usage_errors(monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SCOUT_ADDRESS", raising=False)
    monkeypatch.delenv("SCOUT_TOKEN", raising=False)
    assert main(["run", "random"]) == 2
    assert "SCOUT_ADDRESS" in capsys.readouterr().err
    assert main(["run", "nonsense", "--address", "x:1", "--token", "t"]) == 2
    assert "bad bot spec" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["flag", "environment", "neither"])
def test_cli_asks_for_public_events_when_told(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hellos: list[Hello] = []

    async def script(conn: Connection) -> None:
        hellos.append(await conn.handshake())
        await conn.send(start("m1"), MatchEnded("m1"))
        await conn.drain()

    monkeypatch.delenv("SCOUT_PUBLIC_EVENTS", raising=False)
    if how == "environment":
        monkeypatch.setenv("SCOUT_PUBLIC_EVENTS", "1")
    extra = ["--public-events"] if how == "flag" else []

    async def scenario() -> int:
        async with serving(FakeArena(script)) as address:
            return await asyncio.to_thread(
                main, ["run", "greedy", "--address", address, "--token", TOKEN,
                       "--max-matches", "1", *extra])

    assert asyncio.run(scenario()) == 0
    assert [hello.lean for hello in hellos] == [how == "neither"]


def test_streams_cut_by_the_referee_leave_no_task_pending_or_exception_unretrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A referee that takes the stream and goes away, three times. Each stream's tasks must end
    with its session; before, grpc's own task reading the SDK's request generator was left
    pending when the call failed under it, and destroyed with the call ("Task was destroyed but
    it is pending", then "aclose(): asynchronous generator is already running")."""
    import gc

    class Vanishing(arena_pb2_grpc.ArenaServicer):
        def __init__(self) -> None:
            self.streams = 0

        # override: it never answers, and returns None, as grpc.aio allows.
        async def Play(  # type: ignore[override]
            self, request_iterator: Any, context: Any
        ) -> None:
            self.streams += 1
            await context.read()  # the Hello; then nothing until the server goes away
            await asyncio.Event().wait()

    async def main() -> None:
        arena = Vanishing()
        stop = asyncio.Event()
        port = 0
        running: asyncio.Future[int] | None = None
        for _ in range(3):
            server = aio.server()
            arena_pb2_grpc.add_ArenaServicer_to_server(arena, server)
            port = server.add_insecure_port(f"127.0.0.1:{port}")
            await server.start()
            streams = arena.streams
            if running is None:
                running = asyncio.ensure_future(
                    run_bot(Recorder(), f"127.0.0.1:{port}", TOKEN, stop_event=stop))
            deadline = time.monotonic() + 20
            while arena.streams == streams and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await server.stop(None)
            gc.collect()
        stop.set()
        assert running is not None
        await asyncio.wait_for(running, 10)
        gc.collect()
        await asyncio.sleep(0.1)
        assert arena.streams == 3

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
        gc.collect()
    problems = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert problems == []
