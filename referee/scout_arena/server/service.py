"""gRPC servicers (Arena for bots, Matches for organisers) and the server around them.

Here and in `convert` the referee meets gRPC and scout.v1; the match logic below knows
neither. The servicers read messages into the referee's values (through `convert`), hand them
to the `Referee`, and write out what it queued; each kind of `MatchRequestError` becomes its
status code here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, cast

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from scout.v1 import arena_pb2, arena_pb2_grpc, matches_pb2, matches_pb2_grpc

from ..record import record_to_json
from .book import KnownMatch
from .connections import (
    BotConnection,
    BotEntry,
    GoodbyeMessage,
    Handoff,
    payload,
    tokens_equal,
)
from .convert import (
    MAX_BUNDLE_BYTES,
    MAX_BUNDLE_MESSAGES,
    PROTOCOL_VERSION,
    ProtobufWire,
    bundle_bytes,
    match_info,
    match_status_from_pb,
    read_answers,
    spectator_event,
    time_control_from_pb,
)
from .cqdrain import drain_completion_notifications
from .errors import (
    BotAtCapacity,
    BotNotConnected,
    IdempotencyKeyReused,
    InvalidBotName,
    InvalidIdempotencyKey,
    InvalidTable,
    InvalidTimeControl,
    MatchRequestError,
    RefereeClosing,
    UnknownBot,
    quoted,
)
from .events import Goodbye, GoodbyeReason, MatchStatus
from .idempotency import CreateRequest, IdempotencyKeys
from .limits import FdLimit, raise_fd_limit
from .liveness import ServerLiveness
from .match import MatchRunner
from .referee import Referee

log = logging.getLogger("scout_arena.referee")

MAX_BOT_MESSAGE_BYTES = 64 * 1024
MAX_STREAMS_PER_CONNECTION = 1000
"""HTTP/2 streams (calls) one connection may have open at once (grpc.max_concurrent_streams).
A bot needs one Play stream, but an organiser's channel carries a WatchMatch per match it shows
and its CreateMatch calls: near the cap, a call the client opens as another ends (which the
server, busy, has not yet seen end) is refused (REFUSED_STREAM, UNAVAILABLE to the caller), as
the soak bench saw at 100 with 200 matches kept running. 1,000 streams cost ~26 MB at most."""
MAX_STREAMS_PER_TOKEN = 4
"""Play streams one bot token may have open at once; more are refused RESOURCE_EXHAUSTED."""
GOODBYE_RETRY_AFTER_MS = 2000
"""How long a Goodbye{SHUTDOWN} asks bots to wait before they reconnect."""
GOODBYE_LINGER_S = 0.5
"""After its Goodbye, how long a stream waits for the bot to half-close before the referee
ends it (with OK)."""
GOODBYE_WAIT_S = 2.0
"""How long stopping waits for the streams told Goodbye to end before grpc cancels them."""
DEATH_DRAIN_S = 5.0
"""How long a referee whose grpc server died drains before it exits non-zero."""
DEATH_EXIT_STATUS = 3
LOW_CONNECTIONS = 1000
"""Fewer bot connections than this fit in the open-file limit: say so as a warning."""
MAX_SEND_MESSAGE_BYTES = 4 * 1024 * 1024
HELLO_TIMEOUT_S = 10.0
WRITER_STOP_S = 1.0
EOF: object = getattr(grpc.aio, "EOF")  # noqa: B009 - missing from grpc's type stubs
Context = grpc.aio.ServicerContext[Any, Any]

SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_BOT_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_SEND_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    # Two referees on one port would silently split the bots between them: fail to bind instead.
    ("grpc.so_reuseport", 0),
]


ExtraService = tuple[Callable[[grpc.aio.Server], None], str]
"""(function adding a servicer to the server, full service name): a service sharing the port."""


def bearer_token(context: Context) -> str:
    """The token of a call's ``authorization: Bearer <token>`` metadata, or "" without one."""
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer "):].strip()
    return ""


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


def add_arena_to_server(servicer: ArenaServicer, server: grpc.aio.Server) -> None:
    """Like the generated add_ArenaServicer_to_server, but the response serializer lets
    pre-serialized bytes through (see `encode`). Registered as well as generic, as the
    generated code does it: the liveness guard answers every unregistered call UNIMPLEMENTED."""
    play = grpc.stream_stream_rpc_method_handler(
        servicer.Play, request_deserializer=read_bot_message, response_serializer=encode)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("scout.v1.Arena", {"Play": play}),))
    server.add_registered_method_handlers("scout.v1.Arena", {"Play": play})  # type: ignore[attr-defined]


def _end_after_goodbye(handler: asyncio.Task[None]) -> None:
    """Stop a Play handler's wait for the bot (see `ArenaServicer._say_goodbye`); it then ends
    the call with OK."""
    if not handler.done():
        handler.cancel()


async def _until_eof(context: Context) -> None:
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


class ArenaServicer(arena_pb2_grpc.ArenaServicer):
    """The bot stream: authenticate, greet, then route answers until the stream ends."""

    handoff_delay_s: float = 0.0
    """Tests only: how long the writer holds each request before it hands it to the transport
    (a deliberately slow referee, whose delay must never be charged to the bot)."""

    def __init__(self, referee: Referee,
                 max_streams_per_token: int = MAX_STREAMS_PER_TOKEN) -> None:
        if max_streams_per_token < 1:
            raise ValueError("max_streams_per_token must be at least 1")
        self.referee = referee
        self.max_streams_per_token = max_streams_per_token

    async def Play(  # type: ignore[override]
        self, request_iterator: AsyncIterator[arena_pb2.BotMessage], context: Context
    ) -> None:
        """Uses context.read()/write() rather than iterators: measurably faster (grpc-notes)."""
        bot = await self.referee.authenticate(bearer_token(context))
        if bot is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "unknown bot token: send metadata 'authorization: Bearer "
                                "<token>' with the token the organiser gave you")
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

    async def _farewell(self, context: Context) -> bool:
        """Send the Goodbye of a referee that is closing, if it is, and let the bot half-close
        for up to GOODBYE_LINGER_S: True when the call is to end (with OK) now."""
        farewell = self.referee.farewell
        if farewell is None:
            return False
        with contextlib.suppress(Exception):
            await context.write(farewell)
            await asyncio.wait_for(_until_eof(context), GOODBYE_LINGER_S)
        return True

    async def _play(self, bot: BotEntry, context: Context) -> None:
        if await self._farewell(context):
            return
        try:
            first = await asyncio.wait_for(context.read(), HELLO_TIMEOUT_S)
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"no Hello within {HELLO_TIMEOUT_S:g} s")
            return
        if first is EOF:
            return
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
            return
        connection = BotConnection(bot, secrets.token_hex(8),
                                   max(1, min(hello.max_concurrent_matches or 1, 1000)),
                                   hello.bot_version)
        connection.handler_task = asyncio.current_task()
        connection.lean = hello.lean
        connection.accepts_bundles = hello.accepts_bundles
        self.referee.attach(connection)
        log.info("bot %s connected (session %s)", bot.name, connection.session_id)
        stopping = asyncio.Event()
        writer = asyncio.get_running_loop().create_task(
            self._write(connection, context, stopping))
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
                        self.referee.route(connection, answer, received_at)
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
                self.referee.detach(connection)
                log.info("bot %s disconnected (session %s)", bot.name, connection.session_id)
        if unreadable is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, unreadable.abort_text())
        if connection.superseded:
            await context.abort(grpc.StatusCode.ABORTED,
                                "superseded by a newer connection with the same token")

    @staticmethod
    async def _write(connection: BotConnection, context: Context,
                     stopping: asyncio.Event) -> None:
        """Drain the outbox. To a stream that accepts bundles, what piled up while the last
        write was in flight goes as one RefereeBundle: no message waits for a bundle to fill.
        A request's clock starts once its write has completed (`Handoff`)."""
        outbox = connection.outbox
        most = MAX_BUNDLE_MESSAGES if connection.accepts_bundles else 1
        while True:
            items = await outbox.take(most, MAX_BUNDLE_BYTES)
            first = items[0]
            if first is None or stopping.is_set():
                return
            if isinstance(first, GoodbyeMessage):
                await ArenaServicer._say_goodbye(connection, context, first)
                return
            if ArenaServicer.handoff_delay_s > 0 and any(  # tests only: slow to hand off
                    isinstance(item, Handoff) for item in items):
                await asyncio.sleep(ArenaServicer.handoff_delay_s)
            if len(items) == 1:
                await context.write(payload(first))
            else:
                await context.write(bundle_bytes([payload(cast(bytes | Handoff, item))
                                                  for item in items]))
            for item in items:
                if isinstance(item, Handoff):
                    item.on_write()

    @staticmethod
    async def _say_goodbye(connection: BotConnection, context: Context,
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


def admin_token_problem(token: str) -> str | None:
    """Why ``token`` cannot be the referee's admin token, or None if it can. Without a token the
    Matches service is open to every caller; an empty one would be the same, unannounced (a
    call that sends no token has the empty one), and one that no caller can send would shut
    the organisers out."""
    if not token:
        return ("the admin token is empty, which would let in every call that sends no token; "
                "give a token (or none at all, which leaves the Matches service open)")
    if token != token.strip():
        return ("the admin token begins or ends with whitespace, which the Bearer metadata "
                "cannot carry")
    if not all(" " <= c <= "~" for c in token):
        return ("the admin token has characters gRPC metadata cannot carry: printable ASCII "
                "only")
    return None


class UnreadableRequest:
    """What arrives in place of a Matches request whose bytes do not parse (e.g. a string that
    is not UTF-8): the call ends with INVALID_ARGUMENT, not UNKNOWN with a server traceback."""

    def __init__(self, message: str, error: str) -> None:
        self.text = f"the request could not be read as a {message} ({error})"


def _reader(message_type: Any) -> Callable[[bytes], Any]:
    name = message_type.DESCRIPTOR.full_name

    def read(data: bytes) -> Any:
        try:
            return message_type.FromString(data)
        except DecodeError as exc:
            return UnreadableRequest(name, str(exc))

    return read


def _checked_unary(method: Callable[[Any, Context], Awaitable[Any]]
                   ) -> Callable[[Any, Context], Awaitable[Any]]:
    async def handle(request: Any, context: Context) -> Any:
        if isinstance(request, UnreadableRequest):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.text)
        return await method(request, context)

    return handle


def _checked_stream(method: Callable[[Any, Context], AsyncIterator[Any]]
                    ) -> Callable[[Any, Context], AsyncIterator[Any]]:
    async def handle(request: Any, context: Context) -> AsyncIterator[Any]:
        if isinstance(request, UnreadableRequest):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.text)
        async for item in method(request, context):
            yield item

    return handle


def add_matches_to_server(servicer: MatchesServicer, server: grpc.aio.Server) -> None:
    """Like the generated add_MatchesServicer_to_server (registered as well as generic), but a
    request that does not parse ends its call with INVALID_ARGUMENT (`UnreadableRequest`)."""
    pb = matches_pb2

    def unary(method: Callable[[Any, Context], Awaitable[Any]], request: Any,
              response: Any) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(
            _checked_unary(method), request_deserializer=_reader(request),
            response_serializer=response.SerializeToString)

    handlers = {
        "CreateMatch": unary(servicer.CreateMatch, pb.CreateMatchRequest, pb.MatchInfo),
        "CreateMatches": unary(servicer.CreateMatches, pb.CreateMatchesRequest,
                               pb.CreateMatchesResponse),
        "GetMatch": unary(servicer.GetMatch, pb.GetMatchRequest, pb.MatchInfo),
        "GetRecord": unary(servicer.GetRecord, pb.GetRecordRequest, pb.GetRecordResponse),
        "WatchMatch": grpc.unary_stream_rpc_method_handler(
            _checked_stream(servicer.WatchMatch),
            request_deserializer=_reader(pb.WatchMatchRequest),
            response_serializer=pb.SpectatorEvent.SerializeToString),
        "ListMatches": unary(servicer.ListMatches, pb.ListMatchesRequest,
                             pb.ListMatchesResponse),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("scout.v1.Matches", handlers),))
    server.add_registered_method_handlers("scout.v1.Matches", handlers)  # type: ignore[attr-defined]


MATCH_REQUEST_STATUS: dict[type[MatchRequestError], grpc.StatusCode] = {
    RefereeClosing: grpc.StatusCode.UNAVAILABLE,
    InvalidTable: grpc.StatusCode.INVALID_ARGUMENT,
    UnknownBot: grpc.StatusCode.NOT_FOUND,
    BotNotConnected: grpc.StatusCode.FAILED_PRECONDITION,
    BotAtCapacity: grpc.StatusCode.FAILED_PRECONDITION,
    InvalidTimeControl: grpc.StatusCode.INVALID_ARGUMENT,
    InvalidBotName: grpc.StatusCode.INVALID_ARGUMENT,
    InvalidIdempotencyKey: grpc.StatusCode.INVALID_ARGUMENT,
    IdempotencyKeyReused: grpc.StatusCode.ALREADY_EXISTS,
}


def match_request_status(error: MatchRequestError) -> grpc.StatusCode:
    """The status a CreateMatch ends with for ``error`` (by its type, or the nearest base)."""
    for kind in type(error).__mro__:
        status = MATCH_REQUEST_STATUS.get(kind)
        if status is not None:
            return status
    return grpc.StatusCode.FAILED_PRECONDITION


MAX_MATCHES_PER_CALL = 1000
"""The most matches one CreateMatches call may ask for."""


class _DeadlinePassed(Exception):
    """A CreateMatch request reached the moment of creation after its call's deadline."""


class MatchesServicer(matches_pb2_grpc.MatchesServicer):
    """The organisers' API. Needs the admin token when the referee has one."""

    def __init__(self, referee: Referee, admin_token: str | None,
                 keys: IdempotencyKeys | None = None) -> None:
        if admin_token is not None:
            problem = admin_token_problem(admin_token)
            if problem is not None:
                raise ValueError(problem)
        self.referee = referee
        self.admin_token = admin_token
        self.keys = keys if keys is not None else IdempotencyKeys()
        """CreateMatch idempotency keys (`idempotency`)."""
        referee.on_match_finished.append(self._match_finished)

    def _match_finished(self, match: MatchRunner) -> None:
        if self.keys.holds(match.match_id):
            self.keys.match_ended(match.snapshot())

    async def _authorise(self, context: Context) -> None:
        if self.admin_token is None:
            return
        if not tokens_equal(bearer_token(context), self.admin_token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "the Matches service needs 'authorization: Bearer <admin token>'")

    async def _runner(self, match_id: str, context: Context) -> KnownMatch:
        runner = self.referee.matches.get(match_id)
        if runner is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no match with id {quoted(match_id)}")
            raise AssertionError("abort raises")
        return runner

    async def CreateMatch(
        self, request: matches_pb2.CreateMatchRequest,
        context: Context,
    ) -> matches_pb2.MatchInfo:
        await self._authorise(context)
        try:
            return self._make(request, context)
        except MatchRequestError as exc:
            await context.abort(match_request_status(exc), str(exc))
            raise
        except _DeadlinePassed as exc:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, str(exc))
            raise

    async def CreateMatches(
        self, request: matches_pb2.CreateMatchesRequest,
        context: Context,
    ) -> matches_pb2.CreateMatchesResponse:
        """Many CreateMatch requests in one call, made one after the other with no await in
        between: grpc.aio accepts the calls of one method one at a time, an event-loop round
        trip each, so a busy referee makes matches far faster in one call than in many."""
        await self._authorise(context)
        if len(request.matches) > MAX_MATCHES_PER_CALL:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{len(request.matches)} matches in one CreateMatches call; "
                                f"at most {MAX_MATCHES_PER_CALL}")
        results = []
        for item in request.matches:
            try:
                result = matches_pb2.CreateMatchResult(match=self._make(item, context))
            except (MatchRequestError, _DeadlinePassed) as exc:
                code = (grpc.StatusCode.DEADLINE_EXCEEDED if isinstance(exc, _DeadlinePassed)
                        else match_request_status(exc))
                result = matches_pb2.CreateMatchResult(error=matches_pb2.CreateMatchError(
                    code=code.name, message=str(exc)))
            results.append(result)
        return matches_pb2.CreateMatchesResponse(results=results)

    def _make(self, request: matches_pb2.CreateMatchRequest,
              context: Context) -> matches_pb2.MatchInfo:
        """The match ``request`` asks for, made now; or, for a retry with its idempotency key,
        the one the first call made, as it is now. Raises MatchRequestError, or _DeadlinePassed
        when the call's deadline passed before the moment of creation (nothing is made)."""
        key = request.idempotency_key
        tc = time_control_from_pb(request, self.referee.default_time_control)
        asked = CreateRequest(tuple(request.bots),
                              request.seed if request.HasField("seed") else None, tc)
        if key:
            earlier = self.keys.find(key, asked)
            if earlier is not None:  # a retry: the match the first call made, as it is now
                match_id, last = earlier
                known = self.referee.matches.get(match_id)
                return match_info(known.snapshot() if known is not None else last)
        # The moment of creation, with no await between here and the match being made: a
        # caller that has given up (its deadline passed while the call waited on a busy
        # referee) would never learn of the match nor of the seats it takes.
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            log.info("CreateMatch for %d bots came after its deadline; no match made",
                     len(asked.bots))
            raise _DeadlinePassed("the call's deadline passed before the referee came to make "
                                  "the match; no match was made (retry, with the same "
                                  "idempotency key)")
        snapshot = self.referee.create_match(list(asked.bots), asked.seed, tc).snapshot()
        if key:
            self.keys.remember(key, asked, snapshot)
        return match_info(snapshot)

    async def GetMatch(
        self, request: matches_pb2.GetMatchRequest,
        context: Context,
    ) -> matches_pb2.MatchInfo:
        await self._authorise(context)
        runner = await self._runner(request.match_id, context)
        return match_info(runner.snapshot())

    async def GetRecord(
        self, request: matches_pb2.GetRecordRequest,
        context: Context,
    ) -> matches_pb2.GetRecordResponse:
        await self._authorise(context)
        match = self.referee.matches.get(request.match_id)
        if match is not None and match.status is MatchStatus.RUNNING:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                f"match {request.match_id} is still running; its record is "
                                "written when it ends")
        record = await self.referee.find_record(request.match_id)
        if record is None:
            if match is None:
                await context.abort(grpc.StatusCode.NOT_FOUND,
                                    f"no match with id {quoted(request.match_id)}")
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"the record of match {request.match_id} is no longer kept: "
                                "this referee has no records directory and keeps only the "
                                f"last {self.referee.matches.keep_records} records in memory")
            raise AssertionError("abort raises")
        return matches_pb2.GetRecordResponse(record_json=json.dumps(record_to_json(record)))

    async def WatchMatch(
        self, request: matches_pb2.WatchMatchRequest,
        context: Context,
    ) -> AsyncIterator[matches_pb2.SpectatorEvent]:
        await self._authorise(context)
        runner = await self._runner(request.match_id, context)
        async for event in runner.watch():
            yield spectator_event(event)

    async def ListMatches(
        self, request: matches_pb2.ListMatchesRequest,
        context: Context,
    ) -> matches_pb2.ListMatchesResponse:
        await self._authorise(context)
        wanted = match_status_from_pb(request.status)
        limit = request.limit if request.limit > 0 else 100
        runners = sorted(self.referee.matches.values(), key=lambda m: m.created_at, reverse=True)
        chosen = [m for m in runners if wanted is None or m.status is wanted][:limit]
        return matches_pb2.ListMatchesResponse(matches=[match_info(m.snapshot()) for m in chosen])


@dataclass(frozen=True)
class TlsConfig:
    cert: Path
    key: Path
    client_ca: Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        root = self.client_ca.read_bytes() if self.client_ca else None
        return grpc.ssl_server_credentials(
            [(self.key.read_bytes(), self.cert.read_bytes())], root_certificates=root,
            require_client_auth=root is not None)


class _Registrations:
    """Stands in for the grpc server while services are added to it, noting which services
    register their methods (``add_registered_method_handlers``); everything else goes to the
    server as is."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server
        self.registered: set[str] = set()

    def add_registered_method_handlers(self, service: str, handlers: Any) -> None:
        self.registered.add(service)
        self._server.add_registered_method_handlers(service, handlers)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class RefereeServer:
    """A grpc.aio server with the Arena and Matches services, health and reflection, guarded
    and watched by `ServerLiveness` (see `liveness`)."""

    def __init__(self, referee: Referee, *, host: str = "127.0.0.1", port: int = 0,
                 admin_token: str | None = None, tls: TlsConfig | None = None,
                 extra_services: Sequence[ExtraService] = (),
                 max_streams_per_connection: int = MAX_STREAMS_PER_CONNECTION,
                 max_streams_per_token: int = MAX_STREAMS_PER_TOKEN,
                 goodbye_retry_after_ms: int = GOODBYE_RETRY_AFTER_MS,
                 ) -> None:
        """``extra_services``: services that share this server (the ladder's); each must
        register its methods (the generated ``add_*Servicer_to_server`` do)."""
        if admin_token is not None and (problem := admin_token_problem(admin_token)):
            raise ValueError(problem)
        if max_streams_per_connection < 1:
            raise ValueError("max_streams_per_connection must be at least 1")
        self.referee = referee
        if not referee.has_wire:
            referee.wire = ProtobufWire()
        self.max_streams_per_connection = max_streams_per_connection
        self.goodbye_retry_after_ms = goodbye_retry_after_ms
        self.server = grpc.aio.server(options=[
            *SERVER_OPTIONS, ("grpc.max_concurrent_streams", max_streams_per_connection)])
        registrations = _Registrations(self.server)
        adding = cast(grpc.aio.Server, registrations)
        for add, _ in extra_services:
            add(adding)
        add_arena_to_server(ArenaServicer(referee, max_streams_per_token), adding)
        add_matches_to_server(MatchesServicer(referee, admin_token), adding)
        self.health = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, adding)
        names = (
            arena_pb2.DESCRIPTOR.services_by_name["Arena"].full_name,
            matches_pb2.DESCRIPTOR.services_by_name["Matches"].full_name,
            *(name for _, name in extra_services),
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        )
        self.service_names = names
        reflection.enable_server_reflection(names, adding)
        unregistered = [name for name in names if name not in registrations.registered]
        if unregistered:
            raise ValueError(
                f"services {unregistered} do not register their methods "
                "(server.add_registered_method_handlers): the liveness guard would answer "
                "every call to them UNIMPLEMENTED")
        address = f"{host}:{port}"
        if tls is None:
            self.port = self.server.add_insecure_port(address)
        else:
            self.port = self.server.add_secure_port(address, tls.credentials())
        if self.port == 0:
            raise OSError(f"cannot listen on {address}")
        self.address = f"{host}:{self.port}"
        # The self-probe speaks plaintext; a TLS referee (maybe with client certificates)
        # relies on the guard and the crash watch.
        self.liveness = ServerLiveness(self.server, self.address,
                                       probe_interval_s=None if tls else 0.5)
        self.fd_limit: FdLimit | None = None
        self._stopped = False

    async def start(self) -> None:
        self.fd_limit = raise_fd_limit()
        if self.fd_limit is not None:
            level = logging.WARNING if self.fd_limit.connections < LOW_CONNECTIONS \
                else logging.INFO
            log.log(level, "%s", self.fd_limit.describe())
        self.liveness.install_guard()
        await self.server.start()
        drain_completion_notifications(asyncio.get_running_loop())
        for name in ("", *self.service_names[:2]):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        await self.liveness.start()

    def shutdown_goodbye(self) -> Goodbye:
        """The Goodbye of a referee that stops to come back (a restart, maintenance)."""
        return Goodbye(GoodbyeReason.SHUTDOWN, "the referee is shutting down; reconnect after "
                       f"{self.goodbye_retry_after_ms} ms", reconnect=True,
                       retry_after_ms=self.goodbye_retry_after_ms)

    async def stop(self, drain_s: float = 0.0, goodbye: Goodbye | None = None) -> None:
        """Graceful: report NOT_SERVING, stop matches (records written in full), tell every
        connected bot ``goodbye`` (default: `shutdown_goodbye`) and end its stream with OK,
        then close the server."""
        await self.liveness.stop()
        if self._stopped:
            return
        self._stopped = True
        for name in ("", *self.service_names[:2]):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.referee.shutdown(drain_s)
        await self.referee.say_goodbye(goodbye or self.shutdown_goodbye(), GOODBYE_WAIT_S)
        await self.server.stop(grace=1.0)


async def serve_forever(server: RefereeServer, drain_s: float = 0.0,
                        ready: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM, then shut down gracefully (bots are told Goodbye{SHUTDOWN}).
    If the grpc server dies meanwhile (`ServerLiveness`), drain for at most `DEATH_DRAIN_S`
    and raise SystemExit(3), so that a supervisor starts a healthy referee."""
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    reason = await wait_stopped_or_dead(stop, server.liveness)
    if reason is not None:
        await exit_dead(server.address, reason, server.stop(min(drain_s, DEATH_DRAIN_S)))
    log.info("shutting down")
    await server.stop(drain_s)


async def wait_stopped_or_dead(stop: asyncio.Event, liveness: ServerLiveness) -> str | None:
    """Wait until ``stop`` is set (returns None) or the server is found dead (its reason)."""
    stopped = asyncio.ensure_future(stop.wait())
    dead = asyncio.ensure_future(liveness.wait_dead())
    try:
        await asyncio.wait({stopped, dead}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (stopped, dead):
            task.cancel()
        await asyncio.gather(stopped, dead, return_exceptions=True)
    return liveness.reason if liveness.dead else None


async def exit_dead(address: str, reason: str, drain: Awaitable[None]) -> NoReturn:
    """After the grpc server died: run ``drain`` (bounded by DEATH_DRAIN_S plus the goodbye
    and grpc's grace), say so loudly and exit non-zero. The process is not to be trusted for
    long after grpc's crash, so nothing here waits without a bound."""
    log.critical("the referee's grpc server on %s is dead (%s); draining for at most %g s, "
                 "then exiting with status %d so that a supervisor restarts it",
                 address, reason, DEATH_DRAIN_S, DEATH_EXIT_STATUS)
    try:
        await asyncio.wait_for(drain, DEATH_DRAIN_S + GOODBYE_WAIT_S + 2.0)
    except Exception:
        log.exception("draining the dead referee failed")
    log.critical("exiting with status %d: the grpc server on %s died (%s)",
                 DEATH_EXIT_STATUS, address, reason)
    raise SystemExit(DEATH_EXIT_STATUS)
