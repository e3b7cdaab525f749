"""A raw bot: one `Arena.Play` call driven by a test, written with the generated stubs only (no
SDK), and the BotMessages it sends.

`PlayCall` is the call itself: every RefereeMessage the referee sends is appended to `messages`
by a reader task, and when the call ends `code` and `details` say how. Two ways to read it:
`RawCall` takes the messages in arrival order and can carry bytes both ways (frames that need
not parse, for fuzzing); `RawBot` has a channel of its own and takes the first message not yet
taken that a predicate accepts, so several coroutines (one per match) can share the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2

PLAY = "/scout.v1.Arena/Play"
# A channel of its own TCP connection (channels with equal options would share one).
LOCAL_POOL = [("grpc.use_local_subchannel_pool", 1)]
EOF: object = getattr(grpc.aio, "EOF")  # noqa: B009 - missing from grpc's type stubs
MessagePredicate = Callable[[arena_pb2.RefereeMessage], bool]

# What an AnswerResult can say (PROTOCOL.md §8.1).
ACCEPTED = arena_pb2.ANSWER_STATUS_ACCEPTED
ILLEGAL = arena_pb2.ANSWER_STATUS_ILLEGAL
MALFORMED = arena_pb2.ANSWER_STATUS_MALFORMED
STALE = arena_pb2.ANSWER_STATUS_STALE
UNKNOWN_MATCH = arena_pb2.ANSWER_STATUS_UNKNOWN_MATCH
TIMED_OUT = arena_pb2.ANSWER_STATUS_TIMED_OUT


# ----- messages ---------------------------------------------------------------------------------


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def kind_of(message: Any) -> str | None:
    """The body's name of a RefereeMessage or BotMessage (None: no body)."""
    kind: str | None = message.WhichOneof("body")
    return kind


def body(message: arena_pb2.RefereeMessage) -> Any:
    kind = kind_of(message)
    return getattr(message, kind) if kind else None


def is_request(message: arena_pb2.RefereeMessage, match_id: str) -> bool:
    return (kind_of(message) in ("rotation_request", "decision_request")
            and body(message).match_id == match_id)


def hello(name: str = "hostile", *, version: str = "0.0-test", protocol_version: int = 1,
          max_matches: int = 4) -> arena_pb2.BotMessage:
    return arena_pb2.BotMessage(hello=arena_pb2.Hello(
        bot_name=name, bot_version=version, protocol_version=protocol_version,
        max_concurrent_matches=max_matches))


def rotation_choice(match_id: str, request_id: int, rotate: bool = False) -> arena_pb2.BotMessage:
    return arena_pb2.BotMessage(rotation=arena_pb2.RotationChoice(
        match_id=match_id, request_id=request_id, rotate=rotate))


def action_choice(match_id: str, request_id: int,
                  action: game_pb2.Action | None) -> arena_pb2.BotMessage:
    choice = arena_pb2.ActionChoice(match_id=match_id, request_id=request_id)
    if action is not None:
        choice.action.CopyFrom(action)
    return arena_pb2.BotMessage(action=choice)


def first_legal_action(request: arena_pb2.DecisionRequest) -> game_pb2.Action:
    """The first listed legal Show, else the first listed Scout."""
    if request.legal_shows:
        return game_pb2.Action(show=request.legal_shows[0])
    return game_pb2.Action(scout=request.legal_scouts[0])


def legal_action(request: arena_pb2.DecisionRequest) -> game_pb2.Action:
    """A listed legal action: the longest Show (sheds cards, so matches end fast), else the
    first Scout."""
    if request.legal_shows:
        show = max(request.legal_shows, key=lambda s: s.length)
        return game_pb2.Action(show=show)
    return game_pb2.Action(scout=request.legal_scouts[0])


def legal_answer(message: arena_pb2.RefereeMessage) -> arena_pb2.BotMessage:
    """A legal answer to a rotation or decision request (no rotation; `legal_action`)."""
    kind = kind_of(message)
    if kind == "rotation_request":
        request = message.rotation_request
        return rotation_choice(request.match_id, request.request_id)
    assert kind == "decision_request", kind
    decision = message.decision_request
    return action_choice(decision.match_id, decision.request_id, legal_action(decision))


# ----- the call ---------------------------------------------------------------------------------


class PlayCall:
    """One Play call on ``channel`` (with ``token`` as bearer; None: no authorization).

    ``frames``: carry bytes both ways (`send` takes bytes; a frame from the referee that does not
    parse as a RefereeMessage goes to `unreadable`); otherwise BotMessage and RefereeMessage
    through the generated stub."""

    def __init__(self, channel: grpc.aio.Channel, token: str | None, *,
                 frames: bool = False) -> None:
        metadata = bearer(token) if token is not None else None
        if frames:
            method = channel.stream_stream(PLAY, request_serializer=None,
                                           response_deserializer=None)
            self.call: Any = method(None, metadata=metadata)
        else:
            self.call = arena_pb2_grpc.ArenaStub(channel).Play(None, metadata=metadata)
        self.messages: list[arena_pb2.RefereeMessage] = []
        """Every message received, a RefereeBundle's one by one in its place."""
        self.bundle_sizes: list[int] = []
        """How many messages each RefereeBundle received held."""
        self.unreadable: list[bytes] = []
        self.ended = False
        self.code: grpc.StatusCode | None = None
        self.details = ""
        self._changed = asyncio.Event()
        self._closed = False
        self._writing = asyncio.Lock()
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            while True:
                data = await self.call.read()
                if data is EOF:
                    break
                if isinstance(data, bytes):
                    try:
                        message = arena_pb2.RefereeMessage.FromString(data)
                    except DecodeError:
                        self.unreadable.append(data)
                        continue
                else:
                    assert isinstance(data, arena_pb2.RefereeMessage)
                    message = data
                if message.WhichOneof("body") == "bundle":
                    self.bundle_sizes.append(len(message.bundle.messages))
                    self.messages.extend(message.bundle.messages)
                else:
                    self.messages.append(message)
                self._notify()
        except grpc.aio.AioRpcError:
            pass
        except asyncio.CancelledError:
            self.ended = True
            self._notify()
            raise
        self.code = await self.call.code()
        self.details = await self.call.details() or ""
        self.ended = True
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _wait_change(self, timeout: float) -> None:
        """Wait until a message arrives or the call ends, ``timeout`` seconds at most."""
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout)

    async def send(self, message: arena_pb2.BotMessage | bytes,
                   timeout: float | None = None) -> None:
        """Write one message (bytes for a ``frames`` call); ``timeout``: at most this long."""
        async with self._writing:  # grpc allows one write in flight per call
            await asyncio.wait_for(self.call.write(message), timeout)

    async def wait_ended(self, timeout: float = 15.0) -> tuple[grpc.StatusCode | None, str]:
        """Wait (``timeout`` seconds at most) for the call to end; how it ended."""
        await asyncio.wait_for(asyncio.shield(self._reader), timeout)
        return self.code, self.details

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.call.cancel()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await self._reader


class RawCall(PlayCall):
    """A PlayCall carrying bytes both ways, its messages read in arrival order; ``bound``:
    how long `write` and `next` wait at most unless told."""

    def __init__(self, channel: grpc.aio.Channel, token: str | None, *, bound: float) -> None:
        super().__init__(channel, token, frames=True)
        self.bound = bound
        self.cursor = 0

    async def write(self, data: bytes) -> None:
        await self.send(data, self.bound)

    async def next(self, timeout: float | None = None) -> arena_pb2.RefereeMessage | None:
        """The next message, or None once the call has ended and everything was read. Raises
        TimeoutError when nothing comes within ``timeout`` (default: `bound`)."""
        deadline = time.monotonic() + (self.bound if timeout is None else timeout)
        while self.cursor >= len(self.messages):
            if self.ended:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            await self._wait_change(remaining)
        message = self.messages[self.cursor]
        self.cursor += 1
        return message


class RawBot(PlayCall):
    """One raw `Play` stream on a channel of its own, driven step by step by a test.

    Every message received is kept in `messages`; `expect` returns the first one not yet taken
    that matches, so several coroutines (one per match) can share the stream."""

    def __init__(self, address: str, token: str | None) -> None:
        self.channel = grpc.aio.insecure_channel(address, options=LOCAL_POOL)
        super().__init__(self.channel, token)
        self.taken: set[int] = set()

    @classmethod
    async def connect(cls, address: str, token: str, max_matches: int = 4
                      ) -> tuple[RawBot, arena_pb2.Welcome]:
        bot = cls(address, token)
        await bot.send(hello(max_matches=max_matches))
        welcome = await bot.expect("welcome")
        assert welcome.protocol_version == 1
        return bot, welcome

    async def next(self, predicate: MessagePredicate, what: str,
                   timeout: float = 20.0) -> arena_pb2.RefereeMessage:
        deadline = time.monotonic() + timeout
        while True:
            for index, message in enumerate(self.messages):
                if index not in self.taken and predicate(message):
                    self.taken.add(index)
                    return message
            remaining = deadline - time.monotonic()
            if self.ended or remaining <= 0:
                seen = [kind_of(m) for m in self.messages[-12:]]
                raise AssertionError(f"no {what} (stream ended: {self.ended}, {self.code}: "
                                     f"{self.details!r}); last messages: {seen}")
            await self._wait_change(remaining)

    async def expect(self, kind: str, match_id: str | None = None, timeout: float = 20.0,
                     **fields: Any) -> Any:
        """The next `kind` message (about `match_id`, with these field values), unwrapped."""
        def predicate(message: arena_pb2.RefereeMessage) -> bool:
            if kind_of(message) != kind:
                return False
            inner = body(message)
            if match_id is not None and inner.match_id != match_id:
                return False
            return all(getattr(inner, key) == value for key, value in fields.items())

        what = f"{kind} {match_id or ''} {fields or ''}"
        return body(await self.next(predicate, what, timeout))

    async def result(self, match_id: str, request_id: int,
                     timeout: float = 20.0) -> arena_pb2.AnswerResult:
        result: arena_pb2.AnswerResult = await self.expect(
            "answer_result", match_id, timeout, request_id=request_id)
        return result

    async def request(self, match_id: str, timeout: float = 20.0) -> arena_pb2.RefereeMessage:
        """The match's next request, or its MatchEnded."""
        def predicate(message: arena_pb2.RefereeMessage) -> bool:
            return is_request(message, match_id) or (
                kind_of(message) == "match_ended" and message.match_ended.match_id == match_id)

        return await self.next(predicate, f"request of {match_id}", timeout)

    async def decision(self, match_id: str) -> arena_pb2.DecisionRequest:
        """Answer rotation requests legally until a DecisionRequest comes."""
        while True:
            message = await self.request(match_id)
            kind = kind_of(message)
            assert kind != "match_ended", "the match ended before a decision came"
            if kind == "decision_request":
                decision: arena_pb2.DecisionRequest = message.decision_request
                return decision
            await self.send(legal_answer(message))

    async def play_to_end(self, match_id: str, timeout: float = 30.0) -> arena_pb2.MatchEnded:
        """Answer every request of the match legally at once until it ends."""
        deadline = time.monotonic() + timeout
        while True:
            message = await self.request(match_id, max(0.1, deadline - time.monotonic()))
            if kind_of(message) == "match_ended":
                ended: arena_pb2.MatchEnded = message.match_ended
                return ended
            await self.send(legal_answer(message))

    def index(self, target: Any) -> int:
        """Position in `messages` of a message (or unwrapped body) received earlier."""
        for i, message in enumerate(self.messages):
            if message is target or body(message) is target or message == target:
                return i
        raise ValueError("message not received")

    async def close(self) -> None:
        if self._closed:
            return
        await super().close()
        await self.channel.close(None)


async def rejected(address: str, token: str | None, *messages: arena_pb2.BotMessage
                   ) -> tuple[list[arena_pb2.RefereeMessage], grpc.StatusCode | None, str]:
    """Open Play, send `messages`, and return what came back and how the call ended."""
    bot = RawBot(address, token)
    try:
        for message in messages:
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                await bot.send(message)
        code, details = await bot.wait_ended()
        return bot.messages, code, details
    finally:
        await bot.close()


async def greeted(address: str, token: str, name: str, *, lean: bool, bundles: bool = False,
                  max_matches: int = 4) -> RawBot:
    """A `RawBot` that has said Hello (with ``lean`` and ``accepts_bundles`` as given) and got
    its Welcome."""
    bot = RawBot(address, token)
    message = hello(name, max_matches=max_matches)
    message.hello.lean = lean
    message.hello.accepts_bundles = bundles
    await bot.send(message)
    await bot.expect("welcome")
    return bot
