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
"Flaky" errors carrying the original assertion.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import grpc
import pytest
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from referee_support import (
    RefereeProcess,
    admin_metadata,
    running_referee,
    start_bot,
    wait_connected,
)
from scout.v1 import arena_pb2, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.record import replay
from support import oracle
from support.rawbot import (
    ACCEPTED,
    EOF,
    ILLEGAL,
    LOCAL_POOL,
    MALFORMED,
    PLAY,
    STALE,
    TIMED_OUT,
    UNKNOWN_MATCH,
    RawCall,
    action_choice,
    hello,
    kind_of,
    rotation_choice,
)

pytestmark = pytest.mark.timeout(300)

T = TypeVar("T")

HONEST = ("h1", "h2", "h3", "h4")
FUZZ = "fz"  # the stateful fuzzing bot
SHAKER = "fzh"  # fresh calls: first messages and tokens
SILENT = "fzs"  # one call that never sends anything
TOKENS = {**{name: f"tok-{name}" for name in HONEST}, FUZZ: "tok-fz", SHAKER: "tok-fzh",
          SILENT: "tok-fzs"}
HONEST_TABLES = (("h1", "h2"), ("h1", "h2", "h3"))
FUZZ_OPPONENTS = (("h4",), ("h4", "h3"))
FUZZ_DECISION_MS = 600_000  # the most CreateMatch allows: a hostile example never times out
FUZZ_BANK_MS = 600_000
FUZZ_MAX_MATCHES = 3
FUZZ_RUNNING = 2  # matches the fuzzing bot is kept seated in
HONEST_DECISION_MS = 10_000  # generous: the machine is shared, honest bots answer at once
LIMIT = 64 * 1024  # §11.2: at most 64 KiB from a bot
HELLO_TIMEOUT_S = 10.0  # §3.3
REACTION_S = 15.0  # bound on waiting for any one reaction
EXAMPLE_S = 120.0  # backstop per example (every inner wait is bounded already)

BAD_MESSAGE = arena_pb2.ERROR_CODE_BAD_MESSAGE
EXPECTED_HELLO = arena_pb2.ERROR_CODE_EXPECTED_HELLO
UNSUPPORTED_PROTOCOL = arena_pb2.ERROR_CODE_UNSUPPORTED_PROTOCOL
END_LEFT, END_RIGHT = game_pb2.END_LEFT, game_pb2.END_RIGHT
FINISHED = matches_pb2.MATCH_STATUS_FINISHED
RUNNING = matches_pb2.MATCH_STATUS_RUNNING
SERVING = health_pb2.HealthCheckResponse.SERVING

FUZZ_SETTINGS = settings(
    max_examples=60, deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])


def status_name(status: int) -> str:
    known = status in arena_pb2.AnswerStatus.values()
    return arena_pb2.AnswerStatus.Name(arena_pb2.AnswerStatus.ValueType(status)) if known \
        else str(status)


def parse_bot_message(data: bytes) -> arena_pb2.BotMessage | None:
    try:
        return arena_pb2.BotMessage.FromString(data)
    except DecodeError:
        return None


# ----- the documented rules (PROTOCOL.md §2, §6): the rules oracle, on the wire's types ----------


WIRE_END = {oracle.L: END_LEFT, oracle.R: END_RIGHT}
ORACLE_END = {END_LEFT: oracle.L, END_RIGHT: oracle.R}


def active_pairs(obs: game_pb2.Observation) -> list[tuple[int, int]]:
    return [(c.face, c.other) for c in obs.active_set]


def expected_scouts(request: arena_pb2.DecisionRequest) -> list[tuple[int, bool, int]]:
    obs = request.observation
    if not oracle.may_scout(obs.num_players, obs.scout_chips[obs.seat], len(obs.active_set)):
        return []
    return [(WIRE_END[end], flip, at)
            for end, flip, at in oracle.scout_choices(len(obs.hand), len(obs.active_set))]


def scout_and_shows(request: arena_pb2.DecisionRequest
                    ) -> Iterator[tuple[int, bool, int, int, int]]:
    """§6.3's enumeration: (end, flip, insert_at, start, length) of every legal Scout & Show."""
    obs = request.observation
    if not oracle.may_scout_and_show(obs.num_players, obs.scout_show_tokens[obs.seat],
                                     len(obs.active_set)):
        return
    for end, flip, at, start, length in oracle.scout_and_show_choices(
            [c.face for c in obs.hand], active_pairs(obs)):
        yield WIRE_END[end], flip, at, start, length


def wire_scout_and_show(end: int, flip: bool, at: int, start: int, length: int
                        ) -> game_pb2.Action:
    return game_pb2.Action(scout_and_show=game_pb2.ScoutAndShow(
        scout=game_pb2.Scout(end=end, flip=flip, insert_at=at),  # type: ignore[arg-type]
        show=game_pb2.Show(start=start, length=length)))


def judge_action(request: arena_pb2.DecisionRequest, action: game_pb2.Action
                 ) -> arena_pb2.AnswerStatus.ValueType:
    """The documented judgement (§4.2, §5, §8.1) of ``action`` against an open request."""
    obs = request.observation
    n = len(obs.hand)
    kind = action.WhichOneof("kind")
    if kind is None:
        return MALFORMED
    if kind == "show":
        show = action.show
        if show.length < 1 or show.start < 0 or show.start + show.length > n:
            return MALFORMED
        listed = {(s.start, s.length) for s in request.legal_shows}
        return ACCEPTED if (show.start, show.length) in listed else ILLEGAL
    if kind == "scout":
        scout = action.scout
        if scout.end not in (END_LEFT, END_RIGHT) or not 0 <= scout.insert_at <= n:
            return MALFORMED
        end = END_LEFT if len(obs.active_set) == 1 else scout.end  # §5.3: RIGHT names it too
        scouts = {(s.end, s.flip, s.insert_at) for s in request.legal_scouts}
        return ACCEPTED if (end, scout.flip, scout.insert_at) in scouts else ILLEGAL
    both = action.scout_and_show
    scout, show = both.scout, both.show  # a missing part reads as END_UNSPECIFIED / length 0
    if scout.end not in (END_LEFT, END_RIGHT) or not 0 <= scout.insert_at <= n:
        return MALFORMED
    if show.length < 1 or show.start < 0 or show.start + show.length > n + 1:
        return MALFORMED
    if not oracle.may_scout_and_show(obs.num_players, obs.scout_show_tokens[obs.seat],
                                     len(obs.active_set)):
        return ILLEGAL
    new, rest = oracle.scouted([c.face for c in obs.hand], active_pairs(obs),
                               ORACLE_END[scout.end], scout.flip, scout.insert_at)
    legal = oracle.beats(new[show.start:show.start + show.length], rest)
    return ACCEPTED if legal else ILLEGAL


def decision_problems(request: arena_pb2.DecisionRequest, seat: int) -> list[str]:
    """Where a DecisionRequest departs from §4.3 and §6.1."""
    obs = request.observation
    faces = [c.face for c in obs.hand]
    problems = []
    if obs.match_id != request.match_id or obs.seat != seat or obs.current_seat != seat:
        problems.append(f"ids/seat: match {obs.match_id!r} seat {obs.seat} current "
                        f"{obs.current_seat}, expected seat {seat}")
    shows = [(s.start, s.length) for s in request.legal_shows]
    want = oracle.groups_beating(faces, [c.face for c in obs.active_set])
    if shows != want:
        problems.append(f"legal_shows {shows} != documented {want} (hand {faces}, active "
                        f"{[c.face for c in obs.active_set]})")
    scouts = [(s.end, s.flip, s.insert_at) for s in request.legal_scouts]
    if scouts != expected_scouts(request):
        problems.append(f"legal_scouts {scouts[:6]}... ({len(scouts)}) != documented "
                        f"({len(expected_scouts(request))})")
    available = next(scout_and_shows(request), None) is not None
    if request.scout_and_show_available != available:
        problems.append(f"scout_and_show_available {request.scout_and_show_available} but "
                        f"the documented enumeration says {available}")
    if not shows and not scouts:
        problems.append("neither a legal Show nor a legal Scout (§6.1 promises one)")
    return problems


# ----- raw wire data ----------------------------------------------------------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def sized(size: int, build: Any) -> bytes:
    """``build(n)`` (a message with an n-character string) serialized to exactly ``size``
    bytes, or as close as varint widths allow."""
    n = max(0, size - 16)
    data = b""
    for _ in range(8):
        data = build(n)
        if len(data) == size:
            break
        n = max(0, n + size - len(data))
    return bytes(data)


# ----- the event loop in a thread -------------------------------------------------------------


class LoopThread:
    """An asyncio loop in a daemon thread: the live clients stay up between hypothesis examples,
    which are plain synchronous calls."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="fuzz-loop")
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = EXAMPLE_S) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AssertionError(f"hang: no result within {timeout} s") from None

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.run(cancel_all(), 20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


# ----- the stateful fuzzing bot -----------------------------------------------------------------


@dataclass
class SeatView:
    """What the fuzzing bot knows of one of its matches."""

    match_id: str
    seat: int
    bots: list[str]
    started: bool = False
    open: arena_pb2.RefereeMessage | None = None  # the open rotation/decision request
    strikes: int = 0
    forfeited: bool = False
    ended: bool = False
    ended_while_away: bool = False

    @property
    def open_kind(self) -> str | None:
        return None if self.open is None else kind_of(self.open)

    @property
    def open_id(self) -> int:
        if self.open is None:
            return 0
        request: Any = getattr(self.open, kind_of(self.open) or "")
        return int(request.request_id)


class Failure(AssertionError):
    pass


class FuzzBot:
    """The fuzzing bot: one live Play stream (reopened whenever a frame ends it), its matches'
    state, and the oracle that says what the referee must answer to each frame."""

    def __init__(self, live: Live, name: str) -> None:
        self.live = live
        self.name = name
        self.token = TOKENS[name]
        self.channel = grpc.aio.insecure_channel(live.address, options=LOCAL_POOL)
        self.seats: dict[str, SeatView] = {}
        self.call: RawCall | None = None
        self.history: deque[str] = deque(maxlen=40)
        self.outcomes: Counter[str] = Counter()
        self.phase = ""  # which test is running, for the tallies
        self.reconnects = 0
        self.resumed_matches = 0
        self.rng = random.Random(20260101)
        self._tables = 0

    # --- bookkeeping ---

    def note(self, text: str) -> None:
        self.history.append(text if len(text) < 300 else text[:297] + "...")

    def fail(self, text: str) -> Failure:
        recent = "\n  ".join(self.history)
        return Failure(f"{text}\n recent history of the fuzzing bot:\n  {recent}")

    def running(self) -> list[SeatView]:
        return [s for s in self.seats.values() if not s.ended]

    def open_seats(self) -> list[SeatView]:
        return [s for s in self.running() if s.open is not None]

    def ended_ids(self) -> list[str]:
        return [s.match_id for s in self.seats.values() if s.ended]

    # --- connecting, and the resync of §10 ---

    async def connect(self) -> None:
        """Open a call, say Hello, and check the Welcome and the resync. An empty BotMessage
        right after the Hello is a marker: its ProtocolError{BAD_MESSAGE} follows everything
        the referee queued while attaching the stream (the resync), so the resync block is
        exactly what comes between the Welcome and that error."""
        call = RawCall(self.channel, self.token, bound=REACTION_S)
        await call.write(hello("fuzzer", version="0-fuzz",
                               max_matches=FUZZ_MAX_MATCHES).SerializeToString())
        await call.write(b"")
        block: list[arena_pb2.RefereeMessage] = []
        try:
            first = await call.next()
            while True:
                message = await call.next()
                if message is None:
                    raise self.fail(f"the call ended during the handshake: {call.code} "
                                    f"{call.details!r}")
                if kind_of(message) == "error":
                    if message.error.code != BAD_MESSAGE:
                        raise self.fail(f"marker answered with {message.error}")
                    break
                block.append(message)
        except TimeoutError:
            raise self.fail("no Welcome / marker error within the bound") from None
        if first is None or kind_of(first) != "welcome":
            raise self.fail(f"first message is not a Welcome: {first}")
        welcome = first.welcome
        if welcome.protocol_version != 1 or welcome.bot_name != self.name:
            raise self.fail(f"bad Welcome {welcome}")
        self.call = call
        self.reconnects += 1
        await self._resync(welcome, block)

    async def _resync(self, welcome: arena_pb2.Welcome,
                      block: list[arena_pb2.RefereeMessage]) -> None:
        running = {s.match_id: s for s in self.running()}
        resumed: list[str] = []
        index = 0
        while index < len(block) and kind_of(block[index]) == "match_start" \
                and block[index].match_start.resumed:
            start = block[index].match_start
            index += 1
            seat = running.get(start.match_id)
            if seat is None:
                raise self.fail(f"resumed a match the bot does not play: {start}")
            if (start.seat, list(start.player_names), start.strikes, start.time_bank_ms) != \
                    (seat.seat, seat.bots, seat.strikes, FUZZ_BANK_MS):
                raise self.fail(f"MatchStart{{resumed}} {start} disagrees with seat {seat.seat} "
                                f"strikes {seat.strikes}")
            resumed.append(start.match_id)
            seat.started = True
            following = block[index] if index < len(block) else None
            is_request = following is not None and \
                kind_of(following) in ("rotation_request", "decision_request") and \
                getattr(following, kind_of(following) or "").match_id == start.match_id
            if seat.open is not None:
                if not is_request:
                    raise self.fail(f"{start.match_id}: request {seat.open_id} was open but "
                                    f"the resync did not send it again")
                assert following is not None
                again = getattr(following, kind_of(following) or "")
                if (kind_of(following), again.request_id) != (seat.open_kind, seat.open_id):
                    raise self.fail(f"{start.match_id}: resync sent {kind_of(following)} "
                                    f"{again.request_id}, open was {seat.open_kind} "
                                    f"{seat.open_id}")
                if again.deadline_ms > FUZZ_DECISION_MS or again.time_bank_ms > FUZZ_BANK_MS:
                    raise self.fail(f"resync clock {again.deadline_ms}/{again.time_bank_ms}")
                if kind_of(following) == "decision_request":
                    old = seat.open.decision_request
                    if (list(again.legal_shows), list(again.legal_scouts),
                            again.observation.hand) != (list(old.legal_shows),
                                                        list(old.legal_scouts),
                                                        old.observation.hand):
                        raise self.fail(f"{start.match_id}: the re-sent decision differs")
                seat.open = following
                index += 1
            elif is_request:  # sent while the bot was away
                assert following is not None
                if seat.forfeited:
                    raise self.fail(f"{start.match_id}: a request for a forfeited seat")
                self._take_request(following, resent=True)
                index += 1
        if welcome.resumed != bool(resumed):
            raise self.fail(f"Welcome.resumed {welcome.resumed} but {len(resumed)} matches "
                            "were resumed")
        self.resumed_matches += len(resumed)
        for match_id, seat in running.items():
            if match_id in resumed:
                continue
            # Not resumed: it must have ended while the bot was away (its MatchEnded was lost).
            info = await self.live.get_match(match_id)
            if info.status == RUNNING:
                raise self.fail(f"{match_id} is running but was not resumed")
            if seat.open is not None:
                raise self.fail(f"{match_id} ended while request {seat.open_id} was open")
            seat.ended = seat.ended_while_away = True
        self.note(f"connected (resumed {resumed})")
        for message in block[index:]:
            self.apply(message)

    # --- messages that are not reactions ---

    def _take_request(self, message: arena_pb2.RefereeMessage, resent: bool = False) -> None:
        """A new open request; ``resent``: sent again by a resync, with the time left (§10)."""
        kind = kind_of(message)
        request: Any = getattr(message, kind or "")
        seat = self.seats.get(request.match_id)
        if seat is None or seat.ended or seat.forfeited:
            raise self.fail(f"{kind} for match {request.match_id!r} ({seat})")
        if seat.open is not None:
            raise self.fail(f"{kind} {request.request_id} while {seat.open_kind} "
                            f"{seat.open_id} is open")
        if kind == "decision_request":
            problems = decision_problems(request, seat.seat)
            if problems:
                raise self.fail(f"{request.match_id} request {request.request_id}: "
                                + "; ".join(problems))
        want_hand = {2: 11, 3: 12}[len(seat.bots)]
        if kind == "rotation_request" and len(request.hand) != want_hand:
            raise self.fail(f"rotation hand of {len(request.hand)} cards")
        clock = (request.deadline_ms, request.time_bank_ms)
        if clock != (FUZZ_DECISION_MS, FUZZ_BANK_MS) and not (
                resent and clock[0] <= FUZZ_DECISION_MS and clock[1] == FUZZ_BANK_MS):
            raise self.fail(f"request clock {request.deadline_ms}/{request.time_bank_ms}")
        seat.open = message
        self.note(f"<- {kind} {request.match_id} #{request.request_id}")

    def apply(self, message: arena_pb2.RefereeMessage) -> None:
        kind = kind_of(message)
        if kind == "match_start":
            start = message.match_start
            seat = self.seats.get(start.match_id)
            if seat is None or seat.started or start.resumed:
                raise self.fail(f"unexpected MatchStart {start}")
            if (start.seat, list(start.player_names), start.strikes) != \
                    (seat.seat, seat.bots, 0) or start.num_players != len(seat.bots):
                raise self.fail(f"MatchStart {start} for seat {seat.seat} of {seat.bots}")
            seat.started = True
            self.note(f"<- match_start {start.match_id} seat {start.seat}")
        elif kind in ("rotation_request", "decision_request"):
            self._take_request(message)
        elif kind in ("public_event", "round_ended"):
            match_id = getattr(message, kind).match_id
            if match_id not in self.seats or self.seats[match_id].ended:
                raise self.fail(f"{kind} about match {match_id!r}")
        elif kind == "match_ended":
            ended = message.match_ended
            seat = self.seats.get(ended.match_id)
            if seat is None or seat.ended:
                raise self.fail(f"MatchEnded for {ended.match_id!r}")
            if seat.open is not None:
                raise self.fail(f"{ended.match_id} ended with request {seat.open_id} open")
            if (seat.seat in ended.forfeited_seats) != seat.forfeited:
                raise self.fail(f"forfeited_seats {list(ended.forfeited_seats)}, the bot "
                                f"counted {seat.strikes} strikes")
            seat.ended = True
            self.note(f"<- match_ended {ended.match_id}")
        elif kind == "answer_result" and message.answer_result.status == TIMED_OUT:
            raise self.fail(f"TIMED_OUT with a {FUZZ_DECISION_MS} ms clock: "
                            f"{message.answer_result}")
        else:
            raise self.fail(f"unexpected {kind}: {message}")

    async def pump(self, timeout: float) -> bool:
        """Apply the next message; False if none came within ``timeout``."""
        assert self.call is not None
        try:
            message = await self.call.next(timeout)
        except TimeoutError:
            return False
        if message is None:
            raise self.fail(f"the call ended unprompted: {self.call.code} {self.call.details!r}")
        kind = kind_of(message)
        if kind == "error" or (kind == "answer_result"
                               and message.answer_result.status != TIMED_OUT):
            raise self.fail(f"unsolicited {kind}: {message}")
        self.apply(message)
        return True

    # --- matches to fuzz in ---

    async def ensure_target(self) -> None:
        """Make sure the bot has an open request (creating matches as needed)."""
        deadline = time.monotonic() + 60
        while not self.open_seats():
            if len(self.running()) < FUZZ_RUNNING:
                await self.create_match()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self.fail("no open request within 60 s")
            await self.pump(remaining)

    async def create_match(self) -> None:
        others = FUZZ_OPPONENTS[self._tables % len(FUZZ_OPPONENTS)]
        self._tables += 1
        bots = [self.name, *others]
        self.rng.shuffle(bots)
        request = matches_pb2.CreateMatchRequest(
            bots=bots, seed=self.rng.getrandbits(64),
            time_control=game_pb2.TimeControl(decision_ms=FUZZ_DECISION_MS,
                                              time_bank_ms=FUZZ_BANK_MS))
        info = await self.live.matches.CreateMatch(request, metadata=admin_metadata(), timeout=10)
        self.seats[info.match_id] = SeatView(info.match_id, list(info.bots).index(self.name),
                                             list(info.bots))
        self.live.fuzz_matches.append(info.match_id)
        self.note(f"created {info.match_id} {bots}")

    # --- frames and their reactions ---

    async def exchange(self, data: bytes, what: str) -> str:
        """Send one frame and check the referee's reaction; returns a label for statistics."""
        assert self.call is not None
        parsed = parse_bot_message(data) if len(data) <= LIMIT else None
        self.note(f"-> {what} ({len(data)} bytes): {data[:40]!r}")
        try:
            await self.call.write(data)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, TimeoutError) as exc:
            raise self.fail(f"could not write ({exc!r}); call {self.call.code} "
                            f"{self.call.details!r}") from None
        if len(data) > LIMIT or parsed is None:
            want = grpc.StatusCode.RESOURCE_EXHAUSTED if len(data) > LIMIT \
                else grpc.StatusCode.INVALID_ARGUMENT
            await self._expect_end(want)
            label = f"call ended {want.name}"
        else:
            label = await self._expect_reaction(parsed)
        self.outcomes[f"{self.phase}: {label}"] += 1
        return label

    async def _expect_end(self, want: grpc.StatusCode) -> None:
        assert self.call is not None
        call = self.call
        while True:
            try:
                message = await call.next()
            except TimeoutError:
                raise self.fail(f"hang: the call should end with {want.name}") from None
            if message is None:
                break
            kind = kind_of(message)
            if kind == "error" or (kind == "answer_result"
                                   and message.answer_result.status != TIMED_OUT):
                raise self.fail(f"a reaction ({message}) instead of the call ending with "
                                f"{want.name}")
            self.apply(message)
        if call.code != want:
            raise self.fail(f"the call ended with {call.code} {call.details!r}, expected "
                            f"{want.name}")
        self.note(f"<- call ended {call.code.name} {call.details[:80]!r}")
        await call.close()
        self.call = None
        await self.connect()

    async def _expect_reaction(self, parsed: arena_pb2.BotMessage) -> str:
        assert self.call is not None
        while True:
            try:
                message = await self.call.next()
            except TimeoutError:
                raise self.fail(f"hang: no reaction to {kind_of(parsed)}") from None
            if message is None:
                raise self.fail(f"the call ended ({self.call.code} {self.call.details!r}) "
                                f"instead of reacting to {kind_of(parsed)}")
            kind = kind_of(message)
            if kind == "error" or (kind == "answer_result"
                                   and message.answer_result.status != TIMED_OUT):
                break
            self.apply(message)
        body = kind_of(parsed)
        if body in (None, "hello") or (body == "bundle" and not parsed.bundle.messages):
            if kind != "error" or message.error.code != BAD_MESSAGE or not message.error.message:
                raise self.fail(f"{body or 'no body'}: expected ProtocolError{{BAD_MESSAGE}}, "
                                f"got {message}")
            self.note(f"<- error BAD_MESSAGE ({body or 'empty'})")
            return f"{body or 'empty'} -> BAD_MESSAGE"
        if kind != "answer_result":
            raise self.fail(f"{body}: expected an AnswerResult, got {message}")
        return self._check_result(parsed, message.answer_result)

    def _check_result(self, parsed: arena_pb2.BotMessage, result: arena_pb2.AnswerResult
                      ) -> str:
        body = kind_of(parsed)
        answer: Any = getattr(parsed, body or "")
        match_id, request_id = answer.match_id, answer.request_id
        seat = self.seats.get(match_id)
        expected_kind = "rotation_request" if body == "rotation" else "decision_request"
        if seat is None or seat.ended:
            want = UNKNOWN_MATCH
        elif seat.open is None or (seat.open_kind, seat.open_id) != (expected_kind, request_id):
            want = STALE
        elif body == "rotation":
            want = ACCEPTED
        else:
            assert seat.open is not None
            want = judge_action(seat.open.decision_request, parsed.action.action)
        problems = []
        if (result.match_id, result.request_id) != (match_id, request_id):
            problems.append(f"echo {result.match_id[:40]!r}/{result.request_id}")
        if result.status != want:
            problems.append(f"status {status_name(result.status)}, documented "
                            f"{status_name(want)}")
        if bool(result.reason) != (result.status != ACCEPTED):
            problems.append(f"reason {result.reason!r}")
        if seat is not None and not seat.ended and want in (ILLEGAL, MALFORMED):
            seat.strikes += 1
            if seat.strikes >= 3:
                seat.forfeited = True
                seat.open = None
        elif want == ACCEPTED:
            assert seat is not None
            seat.open = None
        if want == UNKNOWN_MATCH:
            if result.strikes != 0:
                problems.append(f"strikes {result.strikes} on UNKNOWN_MATCH")
        else:
            assert seat is not None
            if (result.strikes, result.time_bank_ms) != (seat.strikes, FUZZ_BANK_MS):
                problems.append(f"strikes/bank {result.strikes}/{result.time_bank_ms}, "
                                f"expected {seat.strikes}/{FUZZ_BANK_MS}")
        if problems:
            raise self.fail(f"{body} {match_id[:40]!r} #{request_id}: " + "; ".join(problems)
                            + f"\n  answer: {str(parsed)[:400]}\n  result: {result}")
        self.note(f"<- answer_result {status_name(result.status)} strikes {result.strikes}")
        return f"{body} -> {status_name(result.status)}"

    # --- building frames from the live state ---

    def target(self, pick: int) -> SeatView:
        seats = self.open_seats()
        assert seats
        return seats[pick % len(seats)]

    def legal_answer(self, seat: SeatView, pick: int) -> arena_pb2.BotMessage:
        assert seat.open is not None
        if seat.open_kind == "rotation_request":
            request = seat.open.rotation_request
            return rotation_choice(request.match_id, request.request_id, rotate=pick % 2 == 1)
        decision = seat.open.decision_request
        choices = [game_pb2.Action(show=s) for s in decision.legal_shows] + \
            [game_pb2.Action(scout=s) for s in decision.legal_scouts]
        if pick % 3 == 0 and decision.scout_and_show_available:
            combos = list(scout_and_shows(decision))
            choices = [wire_scout_and_show(*combos[pick % len(combos)])]
        return action_choice(decision.match_id, decision.request_id, choices[pick % len(choices)])

    async def advance(self, pick: int) -> None:
        """Answer one open request legally, so the matches move on (new positions to fuzz)."""
        seats = self.open_seats()
        if seats:
            seat = seats[pick % len(seats)]
            label = await self.exchange(self.legal_answer(seat, pick).SerializeToString(),
                                        "legal answer")
            if not label.endswith("ACCEPTED"):
                raise self.fail(f"a legal answer got {label}")

    async def settle(self) -> None:
        """Read whatever has arrived (bounded), so the state is current."""
        while await self.pump(0.05):
            pass


# ----- the live arena ---------------------------------------------------------------------------


@dataclass
class Keeper:
    """Matches of honest bots, created one after another for as long as the module runs."""

    bots: tuple[str, ...]
    created: list[str] = field(default_factory=list)
    finished: list[matches_pb2.MatchInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Live:
    def __init__(self, referee: RefereeProcess, loop: LoopThread) -> None:
        self.referee = referee
        self.address = referee.address
        self.loop = loop
        self.keepers = [Keeper(bots) for bots in HONEST_TABLES]
        self.fuzz_matches: list[str] = []
        self.silent_result: tuple[grpc.StatusCode | None, float] | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = False

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = EXAMPLE_S) -> T:
        return self.loop.run(coro, timeout)

    async def start(self) -> None:
        self.channel = grpc.aio.insecure_channel(self.address)
        self.matches = matches_pb2_grpc.MatchesStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.tasks = [asyncio.get_running_loop().create_task(self._keep(k))
                      for k in self.keepers]
        self.tasks.append(asyncio.get_running_loop().create_task(self._silent()))
        self.fuzz = FuzzBot(self, FUZZ)
        await self.fuzz.connect()
        self.shaker_channel = grpc.aio.insecure_channel(self.address, options=LOCAL_POOL)

    async def stop(self) -> None:
        self.stopping = True
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.fuzz.call is not None:
            await self.fuzz.call.close()
        await self.fuzz.channel.close(None)
        await self.shaker_channel.close(None)
        await self.channel.close(None)

    async def _keep(self, keeper: Keeper) -> None:
        seed = 7000 + len(keeper.bots)
        while not self.stopping:
            seed += 1
            try:
                info = await self.matches.CreateMatch(matches_pb2.CreateMatchRequest(
                    bots=list(keeper.bots), seed=seed,
                    time_control=game_pb2.TimeControl(decision_ms=HONEST_DECISION_MS)),
                    metadata=admin_metadata(), timeout=10)
                keeper.created.append(info.match_id)
                async for _ in self.matches.WatchMatch(
                        matches_pb2.WatchMatchRequest(match_id=info.match_id),
                        metadata=admin_metadata(), timeout=120):
                    pass
                final = await self.get_match(info.match_id)
                keeper.finished.append(final)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                keeper.errors.append(repr(exc))
                await asyncio.sleep(0.5)

    async def _silent(self) -> None:
        """A call that never sends anything: §3.3 ends it with DEADLINE_EXCEEDED after 10 s."""
        async with grpc.aio.insecure_channel(self.address, options=LOCAL_POOL) as channel:
            call = RawCall(channel, TOKENS[SILENT], bound=REACTION_S)
            opened = time.monotonic()
            try:
                code, _ = await call.wait_ended(HELLO_TIMEOUT_S + 30)
            except TimeoutError:
                code = None
            self.silent_result = (code, time.monotonic() - opened)
            await call.close()

    async def get_match(self, match_id: str) -> matches_pb2.MatchInfo:
        info: matches_pb2.MatchInfo = await self.matches.GetMatch(
            matches_pb2.GetMatchRequest(match_id=match_id), metadata=admin_metadata(), timeout=10)
        return info

    async def check_health(self) -> None:
        assert self.referee.process.poll() is None, "the referee process died"
        for service in ("", "scout.v1.Arena"):
            response = await self.health.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert response.status == SERVING, (service, response)

    async def honest_finished(self) -> int:
        response = await self.matches.ListMatches(
            matches_pb2.ListMatchesRequest(status=FINISHED, limit=1_000_000),
            metadata=admin_metadata(), timeout=10)
        return sum(1 for m in response.matches if not set(m.bots) & {FUZZ, SHAKER, SILENT})

    async def wait_more_honest(self, before: int, timeout: float = 90.0) -> int:
        """Wait (bounded) until more honest matches have finished than ``before``."""
        deadline = time.monotonic() + timeout
        while True:
            now = await self.honest_finished()
            if now > before:
                return now
            errors = [e for k in self.keepers for e in k.errors]
            assert not errors, f"honest keepers failed: {errors}"
            assert time.monotonic() < deadline, \
                f"no honest match finished within {timeout} s (still {now})"
            await asyncio.sleep(0.2)

    async def record(self, match_id: str) -> dict[str, Any]:
        response = await self.matches.GetRecord(matches_pb2.GetRecordRequest(match_id=match_id),
                                                metadata=admin_metadata(), timeout=10)
        record: dict[str, Any] = json.loads(response.record_json)
        return record


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


# ----- strategies -------------------------------------------------------------------------------


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each as often as its weight (``st.one_of`` would pick its
    branches evenly, and it merges repeated ones)."""
    slots = [index for index, (weight, _) in enumerate(choices) for _ in range(weight)]
    return st.sampled_from(slots).flatmap(lambda index: choices[index][1])


def _field_value(wire_type: int, nested: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    if wire_type == 0:
        return st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1)).map(varint)
    if wire_type == 1:
        return st.binary(min_size=8, max_size=8)
    if wire_type == 5:
        return st.binary(min_size=4, max_size=4)
    if wire_type == 2:
        payload = st.one_of(st.binary(max_size=40), nested,
                            st.text(max_size=20).map(lambda s: s.encode()))
        return payload.map(lambda p: varint(len(p)) + p)
    return st.binary(max_size=6)  # groups (3, 4) and the undefined 6, 7: anything


def wire_soup(depth: int = 2) -> st.SearchStrategy[bytes]:
    """Random but mostly well-formed protobuf wire data: fields of BotMessage's numbers (and
    others), every wire type, nested messages."""
    nested = wire_soup(depth - 1) if depth > 0 else st.just(b"")
    number = st.one_of(st.integers(1, 6), st.integers(1, 2**29 - 1))
    one_field = st.tuples(number, st.sampled_from([0, 1, 2, 5, 2, 2, 3, 4, 6, 7])).flatmap(
        lambda nw: _field_value(nw[1], nested).map(lambda v: tag(nw[0], nw[1]) + v))
    return st.lists(one_field, max_size=5).map(b"".join)


FRAMES = st.one_of(st.binary(max_size=512), wire_soup(), st.just(b""),
                   st.binary(min_size=1, max_size=8))

INT32 = st.one_of(st.integers(-3, 16),
                  st.sampled_from([-2**31, -2**31 + 1, -1, 2**31 - 1, 2**31 - 2, 1000]))
POSITION = weighted((2, INT32.map(lambda n: ("abs", n))),
                    (1, st.integers(-2, 2).map(lambda d: ("hand", d))),
                    (3, st.floats(0, 1, exclude_max=True).map(lambda f: ("frac", f))))
END_VALUE = st.sampled_from([0, 1, 2, 1, 2, 3, 7, -1, 2**31 - 1, -2**31])
SCOUT_SPEC = st.tuples(st.just("scout"), END_VALUE, st.booleans(), POSITION)
SHOW_SPEC = st.tuples(st.just("show"), POSITION, POSITION)
ACTION_SPEC = weighted(
    (1, st.none()),  # ActionChoice without its action
    (1, st.just(("empty",))),  # an Action with no oneof member
    (3, SHOW_SPEC), (3, SCOUT_SPEC),
    (3, st.tuples(st.just("sas"), st.none() | SCOUT_SPEC, st.none() | SHOW_SPEC)),
    (2, st.tuples(st.just("legal"), st.integers(0, 200))),
    (1, st.tuples(st.just("legal_sas"), st.integers(0, 2000))),
)
SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
MATCH_SPEC = weighted(
    (10, st.just(("target",))), (1, st.just(("other",))), (1, st.just(("foreign",))),
    (1, st.just(("ended",))), (1, st.just(("empty",))),
    (1, st.text(st.characters(blacklist_categories=SURROGATES), max_size=30).map(
        lambda s: ("text", s))),
    (1, st.sampled_from([-3, -2, -1, 0, 1, 2, -5000, 500]).map(lambda d: ("huge", d))),
)
REQUEST_SPEC = weighted(
    (8, st.just(("open",))),
    (2, st.sampled_from([-3, -2, -1, 1, 2, 3]).map(lambda k: ("offset", k))),
    (1, st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64 - 2, 2**32, 2**31]).map(
        lambda n: ("raw", n))),
    (1, st.integers(0, 2**64 - 1).map(lambda n: ("raw", n))),
)
HELLO = st.builds(
    arena_pb2.Hello,
    bot_name=st.text(st.characters(blacklist_categories=SURROGATES), max_size=20),
    bot_version=st.text(max_size=10),
    protocol_version=st.one_of(st.just(1), st.integers(0, 2**32 - 1)),
    max_concurrent_matches=st.one_of(st.integers(0, 5), st.integers(0, 2**32 - 1)),
    lean=st.booleans())
UNKNOWN_FIELDS = st.one_of(
    st.just(b""), st.just(b""),
    st.tuples(st.integers(6, 2**29 - 1), st.integers(0, 2**64 - 1)).map(
        lambda f: tag(f[0], 0) + varint(f[1])),
    st.tuples(st.integers(6, 5000), st.binary(max_size=30)).map(
        lambda f: tag(f[0], 2) + varint(len(f[1])) + f[1]))


@dataclass(frozen=True)
class Hostile:
    body: str
    match: tuple[Any, ...]
    request: tuple[Any, ...]
    rotate: bool
    action: Any
    hello: arena_pb2.Hello
    extra: bytes
    repeat: int


HOSTILE = st.builds(
    Hostile,
    # "answer": the kind the open request asks for; the others regardless of it.
    body=st.sampled_from(["answer"] * 6 + ["action", "rotation", "hello", "empty"]),
    match=MATCH_SPEC, request=REQUEST_SPEC, rotate=st.booleans(), action=ACTION_SPEC,
    hello=HELLO, extra=UNKNOWN_FIELDS, repeat=st.sampled_from([1, 1, 1, 2]))

MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("delete"), st.integers(0, 10_000), st.integers(1, 4)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("dup"), st.integers(0, 10_000), st.integers(1, 8)),
)


def mutate(data: bytes, ops: Sequence[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for op, where, value in ops:
        pos = where % (len(out) + 1)
        if op == "flip" and out:
            out[pos % len(out)] ^= 1 << value
        elif op == "set" and out:
            out[pos % len(out)] = value
        elif op == "truncate":
            del out[pos:]
        elif op == "delete":
            del out[pos:pos + value]
        elif op == "insert":
            out[pos:pos] = bytes([value])
        elif op == "dup":
            out[pos:pos] = out[pos:pos + value]
    return bytes(out)


# ----- building hostile frames from the live state ----------------------------------------------


def _position(spec: tuple[Any, ...], hand: int) -> int:
    """An absolute value, one relative to the hand size, or a fraction of it (in range)."""
    if spec[0] == "frac":
        return int(spec[1] * hand)
    value = spec[1] if spec[0] == "abs" else hand + spec[1]
    return int(max(-2**31, min(2**31 - 1, value)))


def build_action(spec: Any, seat: SeatView, hand: int) -> game_pb2.Action | None:
    if spec is None:
        return None
    kind = spec[0]
    if kind == "empty":
        return game_pb2.Action()
    if kind == "show":
        start = _position(spec[1], hand)
        length = _position(spec[2], hand - start) + 1 if spec[2][0] == "frac" \
            else _position(spec[2], hand)
        return game_pb2.Action(show=game_pb2.Show(start=start, length=length))
    if kind == "scout":
        return game_pb2.Action(scout=_scout(spec, hand))
    if kind == "sas":
        both = game_pb2.ScoutAndShow()
        if spec[1] is not None:
            both.scout.CopyFrom(_scout(spec[1], hand + 1))
        if spec[2] is not None:
            start = _position(spec[2][1], hand + 1)
            length = _position(spec[2][2], hand + 1 - start) + 1 if spec[2][2][0] == "frac" \
                else _position(spec[2][2], hand + 1)
            both.show.CopyFrom(game_pb2.Show(start=start, length=length))
        return game_pb2.Action(scout_and_show=both)
    decision = seat.open.decision_request \
        if seat.open is not None and seat.open_kind == "decision_request" else None
    if decision is None:
        return game_pb2.Action(show=game_pb2.Show(start=0, length=1))
    if kind == "legal_sas" and decision.scout_and_show_available:
        combos = list(scout_and_shows(decision))
        return wire_scout_and_show(*combos[spec[1] % len(combos)])
    listed = [game_pb2.Action(show=s) for s in decision.legal_shows] + \
        [game_pb2.Action(scout=s) for s in decision.legal_scouts]
    index: int = spec[1] % len(listed)
    return listed[index]


def _scout(spec: tuple[Any, ...], hand: int) -> game_pb2.Scout:
    scout = game_pb2.Scout(flip=spec[2], insert_at=_position(spec[3], hand))
    scout.end = spec[1]  # out-of-range values too: proto3 enums are open
    return scout


def hostile_frame(example: Hostile, bot: FuzzBot, seat: SeatView, live: Live) -> bytes:
    if example.body == "empty":
        return example.extra
    if example.body == "hello":
        return arena_pb2.BotMessage(hello=example.hello).SerializeToString() + example.extra
    body = example.body
    if body == "answer":
        body = "rotation" if seat.open_kind == "rotation_request" else "action"
    kind = example.match[0]
    others = [s.match_id for s in bot.running() if s is not seat]
    foreign = [m for k in live.keepers for m in k.created[-3:]]
    ended = bot.ended_ids()[-5:]
    match_id = {"target": seat.match_id, "other": (others or [seat.match_id])[0],
                "foreign": (foreign or ["m-000000000000"])[-1],
                "ended": (ended or ["m-ffffffffffff"])[-1], "empty": "",
                "text": example.match[1] if kind == "text" else "", "huge": ""}[kind]
    named = bot.seats.get(match_id, seat)
    if example.request[0] == "open":
        request_id = named.open_id
    elif example.request[0] == "offset":
        request_id = max(0, named.open_id + example.request[1])
    else:
        request_id = example.request[1]
    hand = 0
    if seat.open_kind == "decision_request":
        hand = len(seat.open.decision_request.observation.hand) if seat.open else 0
    action = build_action(example.action, seat, hand)

    def message(match: str) -> bytes:
        msg = rotation_choice(match, request_id, example.rotate) if body == "rotation" \
            else action_choice(match, request_id, action)
        return msg.SerializeToString() + example.extra

    if kind == "huge":
        return sized(LIMIT + example.match[1], lambda n: message("m" * n))
    return message(match_id)


# ----- (a) random bytes -------------------------------------------------------------------------


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


# ----- (b) mutated valid messages ---------------------------------------------------------------


@FUZZ_SETTINGS
@given(base=st.sampled_from(["legal", "legal", "legal", "hello", "stale", "foreign"]),
       ops=st.lists(MUTATION, min_size=1, max_size=3), pick=st.integers(0, 1000),
       advance=st.booleans())
def _mutated_frames(live: Live, base: str, ops: list[tuple[str, int, int]], pick: int,
                    advance: bool) -> None:
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


# ----- (c) valid messages, hostile values -------------------------------------------------------


@FUZZ_SETTINGS
@given(example=HOSTILE, pick=st.integers(0, 1000), advance=st.booleans())
def _hostile_values(live: Live, example: Hostile, pick: int, advance: bool) -> None:
    async def run_example() -> None:
        bot = live.fuzz
        await bot.ensure_target()
        seat = bot.target(pick)
        frame = hostile_frame(example, bot, seat, live)
        for _ in range(example.repeat):
            await bot.exchange(frame, f"hostile {example.body} {example.match[0]} "
                                      f"{example.request[0]} {str(example.action)[:60]}")
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
            frame = sized(size, lambda n: arena_pb2.BotMessage(rotation=arena_pb2.RotationChoice(
                match_id="m" * n, request_id=1)).SerializeToString())
            assert len(frame) == size
            labels.append(await bot.exchange(frame, f"{size}-byte rotation"))
        await live.check_health()
        return labels

    assert live.run(scenario()) == ["rotation -> ANSWER_STATUS_UNKNOWN_MATCH"] * 2 + \
        ["call ended RESOURCE_EXHAUSTED"]


# ----- first messages, tokens, silence ----------------------------------------------------------


FIRST_FRAMES = st.one_of(
    FRAMES,
    st.tuples(st.just(arena_pb2.BotMessage(hello=arena_pb2.Hello(
        bot_name="x", protocol_version=1, max_concurrent_matches=1)).SerializeToString()),
        st.lists(MUTATION, min_size=1, max_size=2)).map(lambda b: mutate(b[0], b[1])),
    HELLO.map(lambda h: arena_pb2.BotMessage(hello=h).SerializeToString()),
    st.builds(arena_pb2.RotationChoice, match_id=st.text(max_size=8),
              request_id=st.integers(0, 2**64 - 1)).map(
        lambda r: arena_pb2.BotMessage(rotation=r).SerializeToString()),
)


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
                assert (welcome.protocol_version, welcome.bot_name, welcome.resumed) == \
                    (1, SHAKER, False), welcome
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


@settings(max_examples=30, deadline=None, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(value=st.one_of(
    st.none(),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40).map(
        lambda t: f"Bearer {t}"),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
    st.sampled_from([f"Bearer {TOKENS[SHAKER]}x", f"bearer {TOKENS[SHAKER]}",
                     f"Basic {TOKENS[SHAKER]}", "Bearer", "Bearer ", TOKENS[SHAKER]])))
def _tokens(live: Live, value: str | None) -> None:
    assume(value is None or not any(value.startswith("Bearer ") and value[7:].strip() == t
                                    for t in TOKENS.values()))

    async def example() -> None:
        method = live.shaker_channel.stream_stream(PLAY, request_serializer=None,
                                                   response_deserializer=None)
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


# ----- the aftermath ----------------------------------------------------------------------------


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
                assert (stats["strikes"], stats["forfeited"]) == \
                    (seat.strikes, seat.forfeited), (match_id, stats, seat)
            else:
                assert stats["strikes"] == 0 and not stats["forfeited"], (match_id, stats)
        assert {n["seat"] for n in record["notes"]} <= {seat.seat}, record["notes"]
    log = live.referee.log()
    assert "crashed" not in log and "Traceback" not in log, log[-5000:]
    print(f"\nfuzzing bot: {sum(bot.outcomes.values())} frames, {bot.reconnects} connections, "
          f"{bot.resumed_matches} matches resumed, {len(live.fuzz_matches)} matches fuzzed, "
          f"{len(honest)} honest matches finished")
    for label, count in sorted(bot.outcomes.items()):
        print(f"  {count:5d}  {label}")
