"""The link to the referee: a gRPC channel, and `Arena.Play` streams over it one after another.

Each stream opens with Hello and carries every match the bot is seated in. When one is lost the
next follows after a backoff, and the referee resumes the running matches on it; rejections that
retrying cannot fix (bad token, wrong protocol, a newer connection with the same token) raise
`ConnectionRejected` instead. A stream the referee ends on purpose says so first with a Goodbye:
then the SDK either stops (`run` returns) or comes back after the wait the referee asked for,
without counting a failure. What a stream brings in is handed on (Welcome and each match's
messages); what goes out is queued in the `Outbox`, which outlives the streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from grpc import aio
from scout.v1 import arena_pb2, arena_pb2_grpc

from . import convert
from .errors import ConnectionLost, ConnectionRejected, InvalidToken
from .types import (
    PROTOCOL_VERSION,
    Assignment,
    BotMessage,
    Goodbye,
    GoodbyeReason,
    Hello,
    MatchMessage,
    Probation,
    ProtocolError,
    RefereeMessage,
    Welcome,
)

__all__ = [
    "Connection",
    "Outbox",
    "PemSource",
    "backoff_delay",
    "bearer_metadata",
    "channel_options",
    "goodbye_delay",
    "open_channel",
    "validate_token",
]

log = logging.getLogger("scout_client")

MAX_SEND_BYTES = 64 * 1024
"""The referee refuses bot messages above 64 KiB; failing locally gives a clearer error."""
MAX_RECEIVE_BYTES = 16 * 1024 * 1024
"""Observations carry a round's history; 16 MiB leaves ample room."""
KEEPALIVE_MS = 20_000
"""Ping every 20 s: the referee permits one every >= 10 s, and NATs drop idle streams."""

BACKOFF_INITIAL_S = 0.2
BACKOFF_MAX_S = 5.0
GIVE_UP_AFTER_SHUTDOWN_S = 15 * 60.0
"""After a Goodbye{SHUTDOWN}, how long the SDK keeps trying to reconnect before it gives up
(PROTOCOL.md §10.1): a referee that is not back by then was stopped for good."""
CLOSE_GRACE_S = 1.0
"""On stop, how long to wait for the referee to end the call after the half-close."""

_JITTER = random.Random()

PemSource = bytes | str | os.PathLike[str]
"""PEM data as bytes, or the path of a PEM file."""

_NEVER_RETRY = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
"""Statuses a retry would only repeat: the bot's configuration must change first."""


def channel_options() -> list[tuple[str, int]]:
    """gRPC channel options: keepalive pings the referee accepts, even while no match runs, and
    message limits matching the referee's."""
    return [
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # Without this, gRPC stops pinging after two pings on a stream that carries no data,
        # which is the normal state of a bot waiting for its next match.
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.max_send_message_length", MAX_SEND_BYTES),
        ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
        ("grpc.initial_reconnect_backoff_ms", int(BACKOFF_INITIAL_S * 1000)),
        ("grpc.min_reconnect_backoff_ms", int(BACKOFF_INITIAL_S * 1000)),
        ("grpc.max_reconnect_backoff_ms", int(BACKOFF_MAX_S * 1000)),
    ]


def _read_pem(source: PemSource | None) -> bytes | None:
    if source is None or isinstance(source, bytes):
        return source
    return Path(source).read_bytes()


def open_channel(
    address: str,
    *,
    tls: bool,
    ca_cert: PemSource | None,
    client_cert: PemSource | None,
    client_key: PemSource | None,
) -> aio.Channel:
    """A channel to `address`, over TLS when asked for or when any certificate is given."""
    options = channel_options()
    if tls or ca_cert is not None or client_cert is not None:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_pem(ca_cert),
            private_key=_read_pem(client_key),
            certificate_chain=_read_pem(client_cert),
        )
        return aio.secure_channel(address, credentials, options=options)
    return aio.insecure_channel(address, options=options)


def backoff_delay(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before reconnect `attempt` (0-based): 0.2 s doubling up to 5 s, with
    jitter (half to all of the step) so many bots of one host do not reconnect in lockstep."""
    step = min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * (1 << min(attempt, 16)))
    return step * (rng if rng is not None else _JITTER).uniform(0.5, 1.0)


def goodbye_delay(retry_after_ms: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before reconnecting after a Goodbye that asks for it: the referee's
    `retry_after_ms` plus a little jitter (up to a tenth of it, plus 0.1 s) so that the bots of
    a restarted referee do not all come back at the same instant."""
    base = max(0, retry_after_ms) / 1000
    return base + (base / 10 + 0.1) * (rng if rng is not None else _JITTER).random()


_NAMED_CHARACTERS = {"\n": "line feed", "\r": "carriage return", "\t": "tab", " ": "space"}


def _describe(character: str) -> str:
    """A character by code point and name, never printed itself: it may be unprintable, and it
    is part of a secret."""
    name = _NAMED_CHARACTERS.get(character) or unicodedata.name(character, "")
    return f"U+{ord(character):04X}" + (f" ({name.lower()})" if name else "")


def validate_token(token: str) -> None:
    """Raise InvalidToken unless `token` can go out as `authorization: Bearer <token>`: it must
    be non-empty printable ASCII (0x20-0x7E, all a gRPC header value may hold) with no
    whitespace at either end. gRPC would refuse anything else on every attempt, and whitespace
    at the ends is nearly always a newline or space copied along with the token."""
    if not isinstance(token, str):
        raise InvalidToken(f"invalid bot token: expected a str, got {type(token).__name__}")
    if not token:
        raise InvalidToken("invalid bot token: it is empty")
    for end, character in (("starts", token[0]), ("ends", token[-1])):
        if character.isspace():
            raise InvalidToken(
                f"invalid bot token: it {end} with whitespace, {_describe(character)}; remove "
                "it (often a newline or space copied along with the token)"
            )
    for position, character in enumerate(token, start=1):
        if not " " <= character <= "~":
            raise InvalidToken(
                f"invalid bot token: character {position} of {len(token)} is "
                f"{_describe(character)}, but a token may only hold printable ASCII "
                "(0x20-0x7E), which is all a gRPC header can carry; copy the token again "
                "exactly as the organisers gave it"
            )


def bearer_metadata(token: str) -> tuple[tuple[str, str], ...]:
    """The call metadata of a Play stream; raises InvalidToken for a token it cannot carry."""
    validate_token(token)
    return (("authorization", f"Bearer {token}"),)


def _is_local_metadata_error(code: grpc.StatusCode, details: str) -> bool:
    # gRPC's own refusal to send a header value it cannot encode: the same on every attempt.
    return code is grpc.StatusCode.INTERNAL and "invalid metadata" in details.lower()


def _is_rejection(code: grpc.StatusCode, details: str) -> bool:
    if code in _NEVER_RETRY or _is_local_metadata_error(code, details):
        return True
    # Another process took over this token; reconnecting would just take it back and forth.
    return code is grpc.StatusCode.ABORTED and "superseded" in details.lower()


class Outbox:
    """Where answers go: the send queue of the open stream, or nowhere between streams. Streams
    are numbered so that an answer can be known to have gone out on the stream now open rather
    than lost with an earlier one."""

    def __init__(self) -> None:
        self.stream = 0
        """The number of the latest stream (1 for the first)."""
        self._queue: asyncio.Queue[BotMessage | None] | None = None

    def send(self, message: BotMessage) -> int | None:
        """Queue `message` on the open stream and return its number; None when no stream is
        open, in which case the referee asks again after the reconnect."""
        if self._queue is None:
            return None
        self._queue.put_nowait(message)
        return self.stream

    def open_stream(self, hello: Hello) -> asyncio.Queue[BotMessage | None]:
        """A new stream's queue, Hello first; later `send`s go to it."""
        self.stream += 1
        queue: asyncio.Queue[BotMessage | None] = asyncio.Queue()
        queue.put_nowait(hello)
        self._queue = queue
        return queue

    def close_stream(self, queue: asyncio.Queue[BotMessage | None], *, half_close: bool) -> None:
        """Stop sending to `queue`; with `half_close`, end the stream after what it holds."""
        if self._queue is queue:
            self._queue = None
        if half_close:
            queue.put_nowait(None)


async def _write_outgoing(
    call: aio.StreamStreamCall[arena_pb2.BotMessage, arena_pb2.RefereeMessage],
    queue: asyncio.Queue[BotMessage | None],
) -> None:
    """The request side of a Play stream: everything put in `queue`, until None half-closes
    the stream. Answers that piled up while the last write was in flight go as one BotBundle
    (PROTOCOL.md §3.6.2); nothing waits for a bundle to fill, and the Hello always goes alone.

    Written by the SDK's own task, which its session cancels and awaits, rather than handed to
    grpc as a request iterator: grpc's task that reads one stays pending when a call fails
    before it starts, and was destroyed with the call at every failed reconnect ("Task was
    destroyed but it is pending", then "aclose(): asynchronous generator is already
    running")."""
    while (message := await queue.get()) is not None:
        if queue.empty() or isinstance(message, Hello):
            await call.write(convert.bot_message_to_proto(message))
            continue
        batch: list[BotMessage] = [message]
        closing = False
        while not queue.empty() and len(batch) < convert.MAX_BUNDLE_MESSAGES:
            more = queue.get_nowait()
            if more is None:
                closing = True
                break
            batch.append(more)
        await call.write(convert.bot_messages_to_proto(batch))
        if closing:
            break
    await call.done_writing()


async def _no_hook(goodbye: Goodbye) -> None:
    return None


def _log_probation(probation: Probation) -> None:
    if probation.active:
        log.warning("the ladder put the bot on probation: %s%s", probation.reason,
                    " (a new stream lifts it: restart the bot once it is fixed)"
                    if probation.lifted_by_reconnect else "")
    else:
        log.info("the bot's probation is over: %s", probation.reason)


def _no_assignments(assignment: Assignment) -> None:
    log.warning("ignoring an assignment to match %s on %s: this stream takes none",
                assignment.match_id, assignment.address)


class Connection:
    """The Play streams of one `run_bot` call. Welcome and every match's messages are handed to
    `on_welcome` and `on_match_message` (with the event-loop time they arrived, from which
    deadlines count); protocol errors are logged and kept to explain a rejection. A Goodbye is
    awaited in `on_goodbye` once its stream has ended, before `run` stops or reconnects."""

    def __init__(
        self,
        channel: aio.Channel,
        metadata: tuple[tuple[str, str], ...],
        hello: Hello,
        outbox: Outbox,
        *,
        on_welcome: Callable[[Welcome], None],
        on_match_message: Callable[[MatchMessage, float], None],
        on_goodbye: Callable[[Goodbye], Awaitable[None]] = _no_hook,
        on_assignment: Callable[[Assignment], None] = _no_assignments,
        on_probation: Callable[[Probation], None] = lambda probation: None,
        stop: asyncio.Event,
        peer: str = "the referee",
        give_up_after_s: float = GIVE_UP_AFTER_SHUTDOWN_S,
    ) -> None:
        self._channel = channel
        self._metadata = metadata
        self._hello = hello
        self._outbox = outbox
        self._on_welcome = on_welcome
        self._on_match_message = on_match_message
        self._on_goodbye = on_goodbye
        self._on_assignment = on_assignment
        self._on_probation = on_probation
        self._give_up_after_s = give_up_after_s
        self._stop = stop
        self._peer = peer
        self._welcomed = False
        self._last_error: ProtocolError | None = None
        self._goodbye: Goodbye | None = None
        self._said_goodbye = asyncio.Event()

    async def run(self, reconnect: bool) -> None:
        """Stream until `stop` is set or the referee says Goodbye without asking the bot back.
        A stream that ends without a Goodbye is a fault: the next one follows after a backoff.
        A Goodbye with `reconnect` is not: the next stream follows after its `retry_after_ms`,
        and the backoff starts again from its first step. Raises ConnectionRejected when the
        referee refuses the bot, and ConnectionLost when a stream ends and `reconnect` is
        False."""
        rng = random.Random()
        attempt = 0
        loop = asyncio.get_running_loop()
        shut_down_at: float | None = None  # since the last Goodbye{reconnect}, unwelcomed
        while not self._stop.is_set():
            try:
                await self._session()
                problem = "the referee ended the stream"
            except aio.AioRpcError as error:
                self._raise_if_rejected(error)
                code, details = error.code(), error.details() or ""
                problem = f"{code.name}: {details}" if details else code.name
            except Exception as error:  # keep playing through anything else, but say so
                log.exception("the stream failed unexpectedly")
                problem = f"{type(error).__name__}: {error}"
            if (goodbye := self._goodbye) is not None:
                await self._on_goodbye(goodbye)
                if self._stop.is_set() or not goodbye.reconnect:
                    break
                if not reconnect:
                    raise ConnectionLost(
                        f"the referee closed the stream and asks the bot to reconnect in "
                        f"{goodbye.retry_after_ms} ms ({goodbye.reason.name}"
                        f"{': ' + goodbye.message if goodbye.message else ''})",
                        goodbye,
                    )
                attempt = 0  # the referee was there and well: not a failure
                shut_down_at = loop.time()
                delay = goodbye_delay(goodbye.retry_after_ms, rng)
                log.info("reconnecting in %.2f s, as the referee asked", delay)
            else:
                if self._stop.is_set():
                    break
                if not reconnect:
                    raise ConnectionLost(f"connection to the referee lost ({problem})")
                if self._welcomed:
                    attempt, shut_down_at = 0, None
                elif shut_down_at is not None and \
                        loop.time() - shut_down_at >= self._give_up_after_s:
                    raise ConnectionLost(
                        f"the referee shut down and has not come back within "
                        f"{self._give_up_after_s:g} s ({problem}); giving up")
                delay = backoff_delay(attempt, rng)
                attempt += 1
                log.warning("connection lost (%s); reconnecting in %.2f s", problem, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def session(self) -> Goodbye | None:
        """One stream (see `_session`), for a caller with its own reconnect policy (a node's
        stream, `nodes`): returns the Goodbye it ended with, if any; raises
        ConnectionRejected when the referee refused the bot and aio.AioRpcError when the
        stream failed."""
        try:
            await self._session()
        except aio.AioRpcError as error:
            self._raise_if_rejected(error)
            if self._goodbye is None:
                raise
        return self._goodbye

    def _raise_if_rejected(self, error: aio.AioRpcError) -> None:
        """ConnectionRejected for a status that retrying cannot fix."""
        code, details = error.code(), error.details() or ""
        if _is_rejection(code, details):
            raise ConnectionRejected(
                code, details, self._last_error,
                local=_is_local_metadata_error(code, details),
            ) from None

    async def _session(self) -> None:
        """One Play stream, until the referee ends it (returns, or raises AioRpcError with the
        status) or `stop` is set (closes it gracefully and returns). After a Goodbye the status
        the stream ends with does not matter (the session returns), and a referee that keeps
        the stream open after it is given a moment before the SDK hangs up."""
        self._welcomed = False
        self._last_error = None
        self._goodbye = None
        self._said_goodbye.clear()
        queue = self._outbox.open_stream(self._hello)
        stub = arena_pb2_grpc.ArenaStub(self._channel)
        log.debug("connecting (attempt %d)", self._outbox.stream)
        call = stub.Play(None, metadata=self._metadata)  # written by `_write_outgoing`
        writer = asyncio.ensure_future(_write_outgoing(call, queue))
        reader = asyncio.ensure_future(self._read(call))
        stopper = asyncio.ensure_future(self._stop.wait())
        farewell = asyncio.ensure_future(self._said_goodbye.wait())
        try:
            await asyncio.wait({reader, stopper, farewell}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done() and self._goodbye is None:
                reader.result()
                return
            # Stopping, or the referee said goodbye: half-close after the answers already
            # queued and give the referee a moment to end the call on its side, then hang up.
            self._outbox.close_stream(queue, half_close=True)
            await asyncio.wait({reader}, timeout=CLOSE_GRACE_S)
        finally:
            self._outbox.close_stream(queue, half_close=False)
            call.cancel()
            for task in (writer, reader, stopper, farewell):
                task.cancel()
            await asyncio.gather(writer, reader, stopper, farewell, return_exceptions=True)

    async def _read(
        self, call: aio.StreamStreamCall[arena_pb2.BotMessage, arena_pb2.RefereeMessage]
    ) -> None:
        loop = asyncio.get_running_loop()
        histories = convert.RoundHistories()
        async for received in call:
            received_at = loop.time()
            try:
                messages = convert.referee_messages_from_proto(received, histories)
            except ValueError as error:
                log.warning("ignoring an unreadable message from the referee: %s", error)
                continue
            for message in messages:
                if message is None:
                    log.warning("ignoring a message from the referee with no body this SDK "
                                "knows")
                    continue
                self._receive(message, received_at)

    def _receive(self, message: RefereeMessage, received_at: float) -> None:
        if isinstance(message, Welcome):
            self._welcomed = True
            log.info("connected to %s as %r (session %s%s)", self._peer, message.bot_name,
                     message.session_id, ", resumed" if message.resumed else "")
            if message.protocol_version != PROTOCOL_VERSION:
                log.warning("the referee speaks protocol %d, this SDK %d",
                            message.protocol_version, PROTOCOL_VERSION)
            self._on_welcome(message)
        elif isinstance(message, ProtocolError):
            self._last_error = message
            log.warning("protocol error from the referee: %s: %s", message.code.name,
                        message.message)
        elif isinstance(message, Assignment):
            self._on_assignment(message)
        elif isinstance(message, Probation):
            _log_probation(message)
            self._on_probation(message)
        elif isinstance(message, Goodbye):
            self._goodbye = message
            self._said_goodbye.set()
            said = f": {message.message}" if message.message else ""
            if message.reconnect:
                log.info("the referee is closing the stream (%s%s); it asks the bot to come "
                         "back in %d ms", message.reason.name, said, message.retry_after_ms)
            elif message.reason is GoodbyeReason.FINISHED:
                log.info("the referee has finished (%s%s); not reconnecting",
                         message.reason.name, said)
            else:
                log.warning("the referee closed the stream and does not want the bot back "
                            "(%s%s); not reconnecting", message.reason.name, said)
        else:
            self._on_match_message(message, received_at)
