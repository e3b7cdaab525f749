"""The Arena service: the bots' Play streams.

A stream is authenticated (by its bearer token, or by where it came in: `Authenticator`),
greeted, attached to the referee's `Streams`, and then read: each answer is routed to its seat
as it arrives, while a `StreamWriter` drains what the referee queued for the bot onto the call.
Messages are read into the referee's values and written from its serialized bytes by
`convert`; the match logic below knows no gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol, cast

import grpc
from google.protobuf.message import DecodeError
from scout.v1 import arena_pb2, arena_pb2_grpc
from scout_rules.protocol import PROTOCOL_VERSION

from .calls import EOF, ArenaContext, bearer_token
from .connections import BotConnection, BotEntry, GoodbyeMessage, Handoff, payload
from .convert import (
    MAX_BUNDLE_BYTES,
    MAX_BUNDLE_MESSAGES,
    bundle_bytes,
    read_answers,
)
from .streams import Streams

log = logging.getLogger("scout_arena.referee")

MAX_STREAMS_PER_TOKEN = 4
"""Play streams one bot token may have open at once; more are refused RESOURCE_EXHAUSTED."""
GOODBYE_LINGER_S = 0.5
"""After its Goodbye, how long a stream waits for the bot to half-close before the referee
ends it (with OK)."""
HELLO_TIMEOUT_S = 10.0
WRITER_STOP_S = 1.0


def encode(message: bytes | arena_pb2.RefereeMessage) -> bytes:
    """Messages broadcast to several seats are serialized once, upstream, and travel as bytes."""
    return message if isinstance(message, bytes) else message.SerializeToString()


class Unreadable:
    """What arrives in place of a BotMessage whose bytes do not parse: the handler ends the call
    with INVALID_ARGUMENT instead of grpc logging a traceback per hostile message."""

    def __init__(self, error: str) -> None:
        self.error = error

    def abort_text(self) -> str:
        return f"a message could not be read as a scout.v1.BotMessage ({self.error})"


def read_bot_message(data: bytes) -> arena_pb2.BotMessage | Unreadable:
    try:
        return arena_pb2.BotMessage.FromString(data)
    except DecodeError as exc:
        return Unreadable(str(exc))


class Authenticator(Protocol):
    """Says which bot a Play call is, or that it is none (the call ends UNAUTHENTICATED)."""

    refusal: str
    """The status message of a call that is no bot's."""

    async def bot_for(self, context: ArenaContext) -> BotEntry | None: ...


class BearerTokens:
    """The bot whose token (or live ticket) the call's ``authorization: Bearer`` metadata
    carries: every stream that comes in over the network."""

    refusal = ("unknown bot token: send metadata 'authorization: Bearer <token>' with the "
               "token the organiser gave you")

    def __init__(self, authenticate: Callable[[str], Awaitable[BotEntry | None]]) -> None:
        self._authenticate = authenticate

    async def bot_for(self, context: ArenaContext) -> BotEntry | None:
        return await self._authenticate(bearer_token(context))


class FixedBot:
    """One bot, whatever the call carries: for a listener only that bot can reach (a hosted
    bot's own Unix socket), where the way in is the credential."""

    refusal = "this listener serves one bot only"

    def __init__(self, bot: BotEntry) -> None:
        self.bot = bot

    async def bot_for(self, context: ArenaContext) -> BotEntry | None:
        return self.bot


def _end_after_goodbye(handler: asyncio.Task[None]) -> None:
    """Stop a Play handler's wait for the bot (see `StreamWriter.say_goodbye`); it then ends
    the call with OK."""
    if not handler.done():
        handler.cancel()


async def _until_eof(context: ArenaContext) -> None:
    """Read (and drop) what a bot still sends until it half-closes."""
    while await context.read() is not EOF:
        pass


async def _let_writer_finish(writer: asyncio.Task[None]) -> None:
    """Wait up to WRITER_STOP_S for a stream's writer to end, even if the handler is cancelled
    meanwhile (superseded, shutdown). A write cancelled midway leaves grpc unable to send the
    call's status (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS) and the bot's call never ends; only a
    writer stuck on a bot that stopped reading is cancelled."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WRITER_STOP_S
    while not writer.done() and (remaining := deadline - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((writer,), timeout=remaining)  # never raises the writer's error
    if not writer.done():
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((writer,), timeout=WRITER_STOP_S)
    if writer.done() and not writer.cancelled() and writer.exception() is not None:
        log.debug("stream writer ended with %r", writer.exception())


class StreamWriter:
    """Drains a connection's outbox onto its call. To a stream that accepts bundles, what piled
    up while the last write was in flight goes as one RefereeBundle: no message waits for a
    bundle to fill. A request's clock starts once its write has completed (`Handoff`)."""

    async def run(self, connection: BotConnection, context: ArenaContext,
                  stopping: asyncio.Event) -> None:
        outbox = connection.outbox
        write = self.transport(context)
        most = MAX_BUNDLE_MESSAGES if connection.accepts_bundles else 1
        while True:
            items = await outbox.take(most, MAX_BUNDLE_BYTES)
            first = items[0]
            if first is None or stopping.is_set():
                return
            if isinstance(first, GoodbyeMessage):
                await self.say_goodbye(connection, context, first)
                return
            if len(items) == 1:
                await write(payload(first))
            else:
                await write(bundle_bytes([payload(cast(bytes | Handoff, item))
                                          for item in items]))
            for item in items:
                if isinstance(item, Handoff):
                    item.on_write()

    def transport(self, context: ArenaContext) -> Callable[[bytes], Awaitable[None]]:
        """What hands a stream's messages to gRPC: the call's own ``write``. A request's clock
        starts once it returns. (Tests stand a slow one in between, to show that a referee
        slow to hand a request over never charges the bot for it.)"""
        return context.write

    @staticmethod
    async def say_goodbye(connection: BotConnection, context: ArenaContext,
                          message: GoodbyeMessage) -> None:
        """Write the Goodbye on its own (the stream's last message). The call then ends with
        OK when the bot half-closes (clients do on a Goodbye), or else from our side after
        GOODBYE_LINGER_S: not at once, because a grpc.aio client that is not inside a read
        when the status arrives never sees the message before it."""
        await context.write(bytes(message))
        connection.said_goodbye = True
        handler = connection.handler_task
        if handler is not None and not handler.done():
            asyncio.get_running_loop().call_later(GOODBYE_LINGER_S, _end_after_goodbye, handler)


class ArenaServicer(arena_pb2_grpc.ArenaServicer):
    """The bot stream: authenticate, greet, then route answers until the stream ends.

    ``authenticator``: who a call is (default: its bearer token, `BearerTokens`);
    ``writer``: what drains each stream's outbox onto its call."""

    def __init__(self, streams: Streams, authenticator: Authenticator, *,
                 max_streams_per_token: int = MAX_STREAMS_PER_TOKEN,
                 writer: StreamWriter | None = None) -> None:
        if max_streams_per_token < 1:
            raise ValueError("max_streams_per_token must be at least 1")
        self.streams = streams
        self.authenticator = authenticator
        self.max_streams_per_token = max_streams_per_token
        self.writer = writer if writer is not None else StreamWriter()

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """Like the generated add_ArenaServicer_to_server, but the response serializer lets
        pre-serialized bytes through (see `encode`). Registered as well as generic, as the
        generated code does it: the liveness guard answers every unregistered call
        UNIMPLEMENTED."""
        play = grpc.stream_stream_rpc_method_handler(
            self.Play, request_deserializer=read_bot_message, response_serializer=encode)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("scout.v1.Arena", {"Play": play}),))
        server.add_registered_method_handlers("scout.v1.Arena", {"Play": play})  # type: ignore[attr-defined]

    async def Play(  # type: ignore[override]
        self, request_iterator: AsyncIterator[arena_pb2.BotMessage], context: ArenaContext
    ) -> None:
        """Uses context.read()/write() rather than iterators: measurably faster (grpc-notes)."""
        bot = await self.authenticator.bot_for(context)
        if bot is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, self.authenticator.refusal)
        assert bot is not None
        if bot.open_streams >= self.max_streams_per_token:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"this bot token already has {bot.open_streams} Play streams open, the most "
                f"the referee allows at once; a bot needs one (a newer stream replaces the "
                f"older, PROTOCOL.md §3.4): close the others before opening more")
        bot.open_streams += 1
        try:
            await self._play(bot, context)
        finally:
            bot.open_streams -= 1

    async def _farewell(self, context: ArenaContext) -> bool:
        """Send the Goodbye of a referee that is closing, if it is, and let the bot half-close
        for up to GOODBYE_LINGER_S: True when the call is to end (with OK) now."""
        farewell = self.streams.farewell
        if farewell is None:
            return False
        with contextlib.suppress(Exception):
            await context.write(farewell)
            await asyncio.wait_for(_until_eof(context), GOODBYE_LINGER_S)
        return True

    async def _greeted(self, bot: BotEntry, context: ArenaContext) -> BotConnection | None:
        """The stream's Hello read and checked, as a connection; None when the call is over."""
        if await self._farewell(context):
            return None
        try:
            first = await asyncio.wait_for(context.read(), HELLO_TIMEOUT_S)
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"no Hello within {HELLO_TIMEOUT_S:g} s")
            return None
        if first is EOF:
            return None
        if isinstance(first, Unreadable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, first.abort_text())
        assert isinstance(first, arena_pb2.BotMessage)
        if first.WhichOneof("body") != "hello":
            await context.write(arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
                code=arena_pb2.ERROR_CODE_EXPECTED_HELLO,
                message="the first message of a stream must be Hello")))
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "the first message of a stream must be Hello")
        hello = first.hello
        if hello.protocol_version != PROTOCOL_VERSION:
            text = (f"protocol version {hello.protocol_version} is not supported; this referee "
                    f"speaks version {PROTOCOL_VERSION}")
            await context.write(arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
                code=arena_pb2.ERROR_CODE_UNSUPPORTED_PROTOCOL, message=text)))
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, text)
        if await self._farewell(context):
            return None
        connection = BotConnection(bot, secrets.token_hex(8),
                                   max(1, min(hello.max_concurrent_matches or 1, 1000)),
                                   hello.bot_version)
        connection.handler_task = asyncio.current_task()
        connection.lean = hello.lean
        connection.accepts_bundles = hello.accepts_bundles
        return connection

    async def _play(self, bot: BotEntry, context: ArenaContext) -> None:
        connection = await self._greeted(bot, context)
        if connection is None:
            return
        streams = self.streams
        route = streams.route
        streams.attach(connection)
        log.info("bot %s connected (session %s)", bot.name, connection.session_id)
        stopping = asyncio.Event()
        writer = asyncio.get_running_loop().create_task(
            self.writer.run(connection, context, stopping))
        unreadable: Unreadable | None = None
        try:
            while True:
                message = await context.read()
                received_at = time.monotonic()  # the answer's clock stops here (clock.py)
                if message is EOF:
                    break
                if isinstance(message, Unreadable):
                    # Ended below, once the writer has stopped: a status sent while one of its
                    # writes is in flight fails (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS) and the
                    # call would never end.
                    unreadable = message
                    break
                assert isinstance(message, arena_pb2.BotMessage)
                for answer in read_answers(message):
                    if isinstance(answer, arena_pb2.RefereeMessage):
                        connection.send(answer.SerializeToString())
                    else:
                        route(connection, answer, received_at)
        except asyncio.CancelledError:
            # Superseded (ends ABORTED below), or the writer has sent a Goodbye (ends OK).
            if not (connection.superseded or connection.said_goodbye):
                raise
        finally:
            stopping.set()
            connection.close()
            try:
                await _let_writer_finish(writer)
            finally:  # whatever the writer did: a stream that is over leaves its seats' clocks
                streams.detach(connection)
                log.info("bot %s disconnected (session %s)", bot.name, connection.session_id)
        if unreadable is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, unreadable.abort_text())
        if connection.superseded:
            await context.abort(grpc.StatusCode.ABORTED,
                                "superseded by a newer connection with the same token")
