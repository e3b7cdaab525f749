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
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from scout.v1 import arena_pb2, arena_pb2_grpc, matches_pb2, matches_pb2_grpc

from ..record import record_to_json
from .connections import BotConnection
from .convert import (
    PROTOCOL_VERSION,
    ProtobufWire,
    match_info,
    match_status_from_pb,
    read_answer,
    spectator_event,
    time_control_from_pb,
    varint,
)
from .errors import (
    BotAtCapacity,
    BotNotConnected,
    InvalidTable,
    InvalidTimeControl,
    MatchRequestError,
    RefereeClosing,
    UnknownBot,
)
from .match import MatchRunner
from .referee import Referee

log = logging.getLogger("scout_arena.referee")

MAX_BOT_MESSAGE_BYTES = 64 * 1024
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


MAX_BATCH = 256


def encode(message: bytes | arena_pb2.RefereeMessage) -> bytes:
    """Messages broadcast to several seats are serialized once, upstream, and travel as bytes."""
    return message if isinstance(message, bytes) else message.SerializeToString()


def batch_bytes(parts: Sequence[bytes]) -> bytes:
    """A serialized RefereeMessage{batch: RefereeBatch{messages: parts}}, built from the parts'
    bytes without parsing them again (field 10 and field 1, both length-delimited)."""
    inner = b"".join([b"\x0a" + varint(len(p)) + p for p in parts])
    return b"\x52" + varint(len(inner)) + inner


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
    pre-serialized bytes through (see `encode`)."""
    handler = grpc.method_handlers_generic_handler("scout.v1.Arena", {
        "Play": grpc.stream_stream_rpc_method_handler(
            servicer.Play, request_deserializer=read_bot_message,
            response_serializer=encode),
    })
    server.add_generic_rpc_handlers((handler,))


async def _let_writer_finish(writer: asyncio.Task[None]) -> None:
    """Wait up to WRITER_STOP_S for a stream's writer to end, even if the handler is cancelled
    meanwhile (superseded, shutdown). A write cancelled midway leaves grpc unable to send the
    call's status (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS) and the bot's call never ends; only a
    writer stuck on a bot that stopped reading is cancelled."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WRITER_STOP_S
    while not writer.done() and (remaining := deadline - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(writer), remaining)
    if not writer.done():
        writer.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await writer


class ArenaServicer(arena_pb2_grpc.ArenaServicer):
    """The bot stream: authenticate, greet, then route answers until the stream ends."""

    def __init__(self, referee: Referee) -> None:
        self.referee = referee

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
        connection = BotConnection(bot, secrets.token_hex(8),
                                   max(1, min(hello.max_concurrent_matches or 1, 1000)),
                                   hello.bot_version)
        connection.handler_task = asyncio.current_task()
        connection.accepts_batches = hello.accepts_batches
        self.referee.attach(connection)
        log.info("bot %s connected (session %s)", bot.name, connection.session_id)
        stopping = asyncio.Event()
        writer = asyncio.get_running_loop().create_task(
            self._write(connection, context, stopping))
        try:
            while True:
                message = await context.read()
                if message is EOF:
                    break
                if isinstance(message, Unreadable):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message.abort_text())
                assert isinstance(message, arena_pb2.BotMessage)
                answer = read_answer(message)
                if isinstance(answer, arena_pb2.RefereeMessage):
                    connection.send(answer.SerializeToString())
                else:
                    self.referee.route(connection, answer)
        except asyncio.CancelledError:
            if not connection.superseded:
                raise
        finally:
            stopping.set()
            connection.close()
            await _let_writer_finish(writer)
            self.referee.detach(connection)
            log.info("bot %s disconnected (session %s)", bot.name, connection.session_id)
        if connection.superseded:
            await context.abort(grpc.StatusCode.ABORTED,
                                "superseded by a newer connection with the same token")

    @staticmethod
    async def _write(connection: BotConnection, context: Context,
                     stopping: asyncio.Event) -> None:
        outbox = connection.outbox
        while True:
            message = await outbox.get()
            if message is None or stopping.is_set():
                return
            if not connection.accepts_batches or outbox.empty():
                await context.write(message)
                continue
            # Everything already queued goes out as one batch: one write, one read.
            parts = [encode(message)]
            done = False
            while not outbox.empty() and len(parts) < MAX_BATCH:
                queued = outbox.get_nowait()
                if queued is None:
                    done = True
                    break
                parts.append(encode(queued))
            await context.write(batch_bytes(parts))
            if done:
                return


MATCH_REQUEST_STATUS: dict[type[MatchRequestError], grpc.StatusCode] = {
    RefereeClosing: grpc.StatusCode.UNAVAILABLE,
    InvalidTable: grpc.StatusCode.INVALID_ARGUMENT,
    UnknownBot: grpc.StatusCode.NOT_FOUND,
    BotNotConnected: grpc.StatusCode.FAILED_PRECONDITION,
    BotAtCapacity: grpc.StatusCode.FAILED_PRECONDITION,
    InvalidTimeControl: grpc.StatusCode.INVALID_ARGUMENT,
}


def match_request_status(error: MatchRequestError) -> grpc.StatusCode:
    """The status a CreateMatch ends with for ``error`` (by its type, or the nearest base)."""
    for kind in type(error).__mro__:
        status = MATCH_REQUEST_STATUS.get(kind)
        if status is not None:
            return status
    return grpc.StatusCode.FAILED_PRECONDITION


class MatchesServicer(matches_pb2_grpc.MatchesServicer):
    """The organisers' API. Needs the admin token when the referee has one."""

    def __init__(self, referee: Referee, admin_token: str | None) -> None:
        self.referee = referee
        self.admin_token = admin_token

    async def _authorise(self, context: Context) -> None:
        if self.admin_token is None:
            return
        if not secrets.compare_digest(bearer_token(context), self.admin_token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "the Matches service needs 'authorization: Bearer <admin token>'")

    async def _runner(self, match_id: str, context: Context) -> MatchRunner:
        runner = self.referee.matches.get(match_id)
        if runner is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no match with id {match_id!r}")
            raise AssertionError("abort raises")
        return runner

    async def CreateMatch(
        self, request: matches_pb2.CreateMatchRequest,
        context: Context,
    ) -> matches_pb2.MatchInfo:
        await self._authorise(context)
        tc = time_control_from_pb(request, self.referee.default_time_control)
        try:
            runner = self.referee.create_match(
                list(request.bots), request.seed if request.HasField("seed") else None, tc)
        except MatchRequestError as exc:
            await context.abort(match_request_status(exc), str(exc))
            raise
        return match_info(runner.snapshot())

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
        runner = await self._runner(request.match_id, context)
        if runner.record is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                f"match {request.match_id} is still running; its record is "
                                "written when it ends")
        return matches_pb2.GetRecordResponse(record_json=json.dumps(record_to_json(runner.record)))

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


class RefereeServer:
    """A grpc.aio server with the Arena and Matches services, health and reflection."""

    def __init__(self, referee: Referee, *, host: str = "127.0.0.1", port: int = 0,
                 admin_token: str | None = None, tls: TlsConfig | None = None,
                 extra_services: Sequence[ExtraService] = (),
                 ) -> None:
        """``extra_services``: services that share this server (the ladder's)."""
        self.referee = referee
        if not referee.has_wire:
            referee.wire = ProtobufWire()
        self.server = grpc.aio.server(options=SERVER_OPTIONS)
        for add, _ in extra_services:
            add(self.server)
        add_arena_to_server(ArenaServicer(referee), self.server)
        matches_pb2_grpc.add_MatchesServicer_to_server(MatchesServicer(referee, admin_token),
                                                      self.server)
        self.health = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        names = (
            arena_pb2.DESCRIPTOR.services_by_name["Arena"].full_name,
            matches_pb2.DESCRIPTOR.services_by_name["Matches"].full_name,
            *(name for _, name in extra_services),
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        )
        self.service_names = names
        reflection.enable_server_reflection(names, self.server)
        address = f"{host}:{port}"
        if tls is None:
            self.port = self.server.add_insecure_port(address)
        else:
            self.port = self.server.add_secure_port(address, tls.credentials())
        if self.port == 0:
            raise OSError(f"cannot listen on {address}")
        self.address = f"{host}:{self.port}"

    async def start(self) -> None:
        await self.server.start()
        for name in ("", *self.service_names[:2]):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, drain_s: float = 0.0) -> None:
        """Graceful: report NOT_SERVING, stop matches (records written in full), close."""
        for name in ("", *self.service_names[:2]):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.referee.shutdown(drain_s)
        await self.server.stop(grace=1.0)


async def serve_forever(server: RefereeServer, drain_s: float = 0.0,
                        ready: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM, then shut down gracefully."""
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("shutting down")
    await server.stop(drain_s)
