"""Connects a Bot to a referee and plays until told to stop.

One gRPC channel and one `Arena.Play` stream carry every match the bot is seated in. Incoming
messages are routed to one worker per match, so each match sees its hooks and requests in the
order the referee sent them while matches proceed independently. Each request is answered in its
own task: a plain `act` runs in a worker thread, and the task answers with the fallback itself
when the bot is late, raises, or returns something that is not a legal answer, so a buggy or slow
bot loses a decision rather than a strike. Answers go through one queue that feeds the stream.

When the stream is lost the runner reconnects with backoff and the referee resumes the running
matches (resending open requests with the same request_id); requests already answered are not
put to the bot again. Rejections that retrying cannot fix (bad token, wrong protocol, a newer
connection with the same token) raise `ConnectionRejected`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import os
import random
import signal
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc import aio
from scout.v1 import arena_pb2, arena_pb2_grpc

from . import convert
from .bot import Bot
from .types import (
    PROTOCOL_VERSION,
    ActionChoice,
    AnswerResult,
    AnswerStatus,
    BotMessage,
    Hello,
    MatchEnded,
    MatchStart,
    Observation,
    ProtocolError,
    PublicEvent,
    RefereeMessage,
    RotationChoice,
    RotationRequest,
    RoundEnded,
    Scout,
    ScoutAndShow,
    Show,
    Welcome,
)

__all__ = [
    "DEFAULT_SAFETY_MARGIN_MS",
    "ConnectionLost",
    "ConnectionRejected",
    "PemSource",
    "ScoutClientError",
    "backoff_delay",
    "channel_options",
    "run",
    "run_bot",
]

log = logging.getLogger("scout_client")

DEFAULT_SAFETY_MARGIN_MS = 100
"""How long before the referee's limit the SDK sends the fallback, to cover network latency."""

MAX_SEND_BYTES = 64 * 1024
"""The referee refuses bot messages above 64 KiB; failing locally gives a clearer error."""
MAX_RECEIVE_BYTES = 16 * 1024 * 1024
"""Observations carry a round's history; 16 MiB leaves ample room."""
KEEPALIVE_MS = 20_000
"""Ping every 20 s: the referee permits one every >= 10 s, and NATs drop idle streams."""

BACKOFF_INITIAL_S = 0.2
BACKOFF_MAX_S = 5.0
CLOSE_GRACE_S = 1.0
"""On stop, how long to wait for the referee to end the call after the half-close."""

_ENDED_MATCHES_REMEMBERED = 1024
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


class ScoutClientError(Exception):
    """Base class of the SDK's errors."""


class ConnectionRejected(ScoutClientError):
    """The referee refused the bot for a reason reconnecting cannot fix (unknown token, wrong
    protocol, superseded by a newer connection with the same token)."""

    def __init__(
        self, code: grpc.StatusCode, details: str, protocol_error: ProtocolError | None = None
    ) -> None:
        self.code = code
        self.details = details
        self.protocol_error = protocol_error
        message = f"the referee rejected the connection ({code.name}): {details or 'no details'}"
        if protocol_error is not None and protocol_error.message not in message:
            message += f" [{protocol_error.code.name}: {protocol_error.message}]"
        super().__init__(message)


class ConnectionLost(ScoutClientError):
    """The stream ended and `reconnect=False` was asked for."""


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


def backoff_delay(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before reconnect `attempt` (0-based): 0.2 s doubling up to 5 s, with
    jitter (half to all of the step) so many bots of one host do not reconnect in lockstep."""
    step = min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * (1 << min(attempt, 16)))
    return step * (rng if rng is not None else _JITTER).uniform(0.5, 1.0)


def _is_rejection(code: grpc.StatusCode, details: str) -> bool:
    if code in _NEVER_RETRY:
        return True
    # Another process took over this token; reconnecting would just take it back and forth.
    return code is grpc.StatusCode.ABORTED and "superseded" in details.lower()


def _read_pem(source: PemSource | None) -> bytes | None:
    if source is None or isinstance(source, bytes):
        return source
    return Path(source).read_bytes()


@dataclass(eq=False)
class _OpenRequest:
    """What the runner remembers of one request until its match ends, so that a request
    resent after a reconnect is answered without asking the bot twice."""

    match_id: str
    request_id: int
    expires_at: float | None  # event-loop time the SDK must answer by; None: no deadline
    fallback: BotMessage
    answer: BotMessage | None = None
    sent_on: int | None = None  # number of the connection the answer went out on
    fallback_sent: bool = False
    closed: bool = False
    task: asyncio.Task[None] | None = None


@dataclass(eq=False)
class _Match:
    match_id: str
    inbox: asyncio.Queue[tuple[float, RefereeMessage]] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None


async def _outgoing(
    outbox: asyncio.Queue[BotMessage | None],
) -> AsyncIterator[arena_pb2.BotMessage]:
    """The request stream: everything put in `outbox`, until None half-closes the stream."""
    while (message := await outbox.get()) is not None:
        yield convert.bot_message_to_proto(message)


class _Runner:
    """The state of one `run_bot` call; lives across reconnects."""

    def __init__(
        self,
        bot: Bot,
        *,
        max_concurrent_matches: int,
        max_matches: int | None,
        safety_margin_ms: int,
        use_time_bank: bool,
        executor: ThreadPoolExecutor,
    ) -> None:
        self._bot = bot
        self._hello = Hello(
            bot_name=getattr(bot, "name", "") or type(bot).__name__,
            bot_version=str(getattr(bot, "version", "0")),
            protocol_version=PROTOCOL_VERSION,
            max_concurrent_matches=max_concurrent_matches,
        )
        self._max_matches = max_matches
        self._margin_ms = safety_margin_ms
        self._use_time_bank = use_time_bank
        self._executor = executor
        self.stop = asyncio.Event()
        self.finished = 0
        self._matches: dict[str, _Match] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._requests: dict[tuple[str, int], _OpenRequest] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._outbox: asyncio.Queue[BotMessage | None] | None = None
        self._connection = 0
        self._welcomed = False
        self._last_error: ProtocolError | None = None

    # --- connection -----------------------------------------------------------------------------

    async def run(
        self, channel: aio.Channel, metadata: tuple[tuple[str, str], ...], reconnect: bool
    ) -> int:
        rng = random.Random()
        attempt = 0
        try:
            while not self.stop.is_set():
                try:
                    await self._session(channel, metadata)
                    problem = "the referee ended the stream"
                except aio.AioRpcError as error:
                    code, details = error.code(), error.details() or ""
                    if _is_rejection(code, details):
                        raise ConnectionRejected(code, details, self._last_error) from None
                    problem = f"{code.name}: {details}" if details else code.name
                except Exception as error:  # keep playing through anything else, but say so
                    log.exception("the stream failed unexpectedly")
                    problem = f"{type(error).__name__}: {error}"
                if self.stop.is_set():
                    break
                if not reconnect:
                    raise ConnectionLost(f"connection to the referee lost ({problem})")
                if self._welcomed:
                    attempt = 0
                delay = backoff_delay(attempt, rng)
                attempt += 1
                log.warning("connection lost (%s); reconnecting in %.2f s", problem, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), delay)
        finally:
            await self._shutdown()
        return self.finished

    async def _session(self, channel: aio.Channel, metadata: tuple[tuple[str, str], ...]) -> None:
        """One Play stream, until the referee ends it (returns, or raises AioRpcError with the
        status) or `stop` is set (closes it gracefully and returns)."""
        self._connection += 1
        self._welcomed = False
        self._last_error = None
        outbox: asyncio.Queue[BotMessage | None] = asyncio.Queue()
        outbox.put_nowait(self._hello)
        stub = arena_pb2_grpc.ArenaStub(channel)
        log.debug("connecting (attempt %d)", self._connection)
        call = stub.Play(_outgoing(outbox), metadata=metadata)
        self._outbox = outbox
        reader = asyncio.ensure_future(self._read(call))
        stopper = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                reader.result()
                return
            # Stopping: half-close after the answers already queued and give the referee a
            # moment to end the call on its side, then hang up.
            self._outbox = None
            outbox.put_nowait(None)
            await asyncio.wait({reader}, timeout=CLOSE_GRACE_S)
        finally:
            if self._outbox is outbox:
                self._outbox = None
            call.cancel()
            for task in (reader, stopper):
                task.cancel()
            await asyncio.gather(reader, stopper, return_exceptions=True)

    async def _read(
        self, call: aio.StreamStreamCall[arena_pb2.BotMessage, arena_pb2.RefereeMessage]
    ) -> None:
        loop = asyncio.get_running_loop()
        async for received in call:
            received_at = loop.time()
            # A batch (we accept them in Hello) is several messages in their queued order.
            batch = (received.batch.messages if received.WhichOneof("body") == "batch"
                     else (received,))
            for raw in batch:
                try:
                    message = convert.referee_message_from_proto(raw)
                except ValueError as error:
                    log.warning("ignoring an unreadable message from the referee: %s", error)
                    continue
                if message is None:
                    log.warning("ignoring a message from the referee with no body this SDK "
                                "knows")
                    continue
                self._receive(message, received_at)

    def _receive(self, message: RefereeMessage, received_at: float) -> None:
        if isinstance(message, Welcome):
            self._on_welcome(message)
            return
        if isinstance(message, ProtocolError):
            self._last_error = message
            log.warning("protocol error from the referee: %s: %s", message.code.name,
                        message.message)
            return
        match_id = message.match_id
        if match_id in self._ended:
            log.debug("match %s: ignoring %s after the match ended", match_id,
                      type(message).__name__)
            return
        match = self._matches.get(match_id)
        if match is None:
            if isinstance(message, AnswerResult):
                log.warning("match %s: answer to request %d: %s %s", match_id,
                            message.request_id, message.status.name, message.reason)
                return
            match = self._open_match(match_id)
        match.inbox.put_nowait((received_at, message))

    def _on_welcome(self, welcome: Welcome) -> None:
        self._welcomed = True
        log.info("connected to the referee as %r (session %s%s)", welcome.bot_name,
                 welcome.session_id, ", resumed" if welcome.resumed else "")
        if welcome.protocol_version != PROTOCOL_VERSION:
            log.warning("the referee speaks protocol %d, this SDK %d", welcome.protocol_version,
                        PROTOCOL_VERSION)
        if not welcome.resumed and self._matches:
            # The reconnect came after the grace: the referee forfeited these seats and will
            # say nothing more about them.
            lost = sorted(self._matches)
            log.warning("the referee did not resume %d running match(es): %s", len(lost),
                        ", ".join(lost))
            for match_id in lost:
                self._end_match(match_id)

    # --- matches --------------------------------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _open_match(self, match_id: str) -> _Match:
        match = _Match(match_id)
        self._matches[match_id] = match
        match.worker = self._spawn(self._play_match(match))
        return match

    def _end_match(self, match_id: str) -> None:
        match = self._matches.pop(match_id, None)
        if match is None:
            return
        self._ended[match_id] = None
        while len(self._ended) > _ENDED_MATCHES_REMEMBERED:
            self._ended.popitem(last=False)
        current = asyncio.current_task()
        if match.worker is not None and match.worker is not current:
            match.worker.cancel()
        for key in [key for key in self._requests if key[0] == match_id]:
            pending = self._requests.pop(key)
            if pending.task is not None and pending.task is not current:
                pending.task.cancel()
        self.finished += 1
        if self._max_matches is not None and self.finished >= self._max_matches:
            log.info("played %d match(es); stopping", self.finished)
            self.stop.set()

    async def _play_match(self, match: _Match) -> None:
        """One match's messages in order: hooks are awaited so the bot sees events before the
        next request; requests get their own task so a slow bot never delays reading."""
        while True:
            received_at, message = await match.inbox.get()
            if isinstance(message, MatchStart):
                if message.resumed:
                    log.info("match %s resumed (seat %d, bank %d ms, %d strikes)",
                             message.match_id, message.seat, message.time_bank_ms,
                             message.strikes)
                await self._call_hook("on_match_start", message)
            elif isinstance(message, RotationRequest | Observation):
                self._open_request(message, received_at)
            elif isinstance(message, AnswerResult):
                await self._on_answer_result(message)
            elif isinstance(message, PublicEvent):
                await self._call_hook("on_event", message)
            elif isinstance(message, RoundEnded):
                await self._call_hook("on_round_end", message)
            elif isinstance(message, MatchEnded):
                await self._call_hook("on_match_end", message)
                self._end_match(match.match_id)
                return

    async def _invoke(self, method: Callable[[Any], object], argument: object) -> object:
        """Call a bot method: `async def` on the event loop, plain ones in a worker thread."""
        result: object
        if inspect.iscoroutinefunction(method):
            result = method(argument)
        else:
            loop = asyncio.get_running_loop()
            context = contextvars.copy_context()
            call = functools.partial(context.run, method, argument)
            result = await loop.run_in_executor(self._executor, call)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _call_hook(self, name: str, argument: object) -> None:
        method = getattr(self._bot, name, None)
        if method is None or getattr(type(self._bot), name, None) is getattr(Bot, name, None):
            return  # not overridden: skip the thread hop
        try:
            await self._invoke(method, argument)
        except Exception:
            log.exception("the bot's %s raised", name)

    # --- requests -------------------------------------------------------------------------------

    def _time_limit_s(self, deadline_ms: int, time_bank_ms: int) -> float | None:
        if deadline_ms <= 0:
            return None  # the referee set no deadline
        bank = time_bank_ms if self._use_time_bank else 0
        return (deadline_ms + bank - self._margin_ms) / 1000

    def _open_request(self, request: RotationRequest | Observation, received_at: float) -> None:
        key = (request.match_id, request.request_id)
        pending = self._requests.get(key)
        if pending is not None:
            if pending.answer is not None and not pending.closed and (
                pending.sent_on != self._connection
            ):
                # The referee asks again after a reconnect: our answer was lost with the old
                # stream (or never sent). Resend it rather than ask the bot twice.
                log.info("match %s: resending the answer to request %d", request.match_id,
                         request.request_id)
                self._send(pending, pending.answer)
            else:
                log.debug("match %s: ignoring repeated request %d", request.match_id,
                          request.request_id)
            return
        limit = self._time_limit_s(request.deadline_ms, request.time_bank_ms)
        fallback: BotMessage
        if isinstance(request, RotationRequest):
            fallback = RotationChoice(request.match_id, request.request_id, rotate=False)
        else:
            fallback = ActionChoice(request.match_id, request.request_id, request.fallback())
        pending = _OpenRequest(
            match_id=request.match_id,
            request_id=request.request_id,
            expires_at=None if limit is None else received_at + limit,
            fallback=fallback,
        )
        self._requests[key] = pending
        pending.task = self._spawn(self._answer(pending, request))

    async def _answer(self, pending: _OpenRequest, request: RotationRequest | Observation) -> None:
        what = "choose_rotation" if isinstance(request, RotationRequest) else "act"
        where = f"match {pending.match_id}, request {pending.request_id}"
        loop = asyncio.get_running_loop()
        remaining = None if pending.expires_at is None else pending.expires_at - loop.time()
        if remaining is not None and remaining <= 0:
            log.warning("%s: no time left to ask the bot (deadline %d ms, bank %d ms, margin "
                        "%d ms); sending the fallback", where, request.deadline_ms,
                        request.time_bank_ms, self._margin_ms)
            self._send(pending, pending.fallback)
            return
        job = asyncio.ensure_future(self._invoke(getattr(self._bot, what), request))
        try:
            done, _ = await asyncio.wait({job}, timeout=remaining)
        finally:
            if not job.done():
                job.cancel()  # a worker thread cannot be stopped; its result is dropped
        if not done:
            log.warning("%s: the bot's %s did not return within %.0f ms; sending the fallback",
                        where, what, (remaining or 0) * 1000)
            self._send(pending, pending.fallback)
            return
        error = job.exception()
        if error is not None:
            log.error("%s: the bot's %s raised; sending the fallback", where, what,
                      exc_info=error)
            self._send(pending, pending.fallback)
            return
        self._send(pending, self._check_answer(request, job.result(), where) or pending.fallback)

    def _check_answer(
        self, request: RotationRequest | Observation, result: object, where: str
    ) -> BotMessage | None:
        """The bot's result as an answer, or None (after a warning) when it surely would be
        rejected, so the caller sends the fallback instead of earning a strike."""
        if isinstance(request, RotationRequest):
            if not isinstance(result, bool):
                log.warning("%s: choose_rotation returned %r, not a bool", where, result)
            return RotationChoice(request.match_id, request.request_id, bool(result))
        if not isinstance(result, Show | Scout | ScoutAndShow):
            return self._refuse(where, result, "is not an Action (Show, Scout or ScoutAndShow)")
        if isinstance(result, Show):
            if result not in request.legal_shows:
                return self._refuse(where, result, "is not among the legal shows")
        elif isinstance(result, Scout):
            if result not in request.legal_scouts:
                return self._refuse(where, result, "is not among the legal scouts")
        elif not request.scout_and_show_available:
            return self._refuse(where, result, "is not available now")
        elif result.scout not in request.legal_scouts:
            return self._refuse(where, result, "has a Scout part not among the legal scouts")
        # A Scout & Show's Show part is left to the referee, which has the last word.
        return ActionChoice(request.match_id, request.request_id, result)

    @staticmethod
    def _refuse(where: str, result: object, problem: str) -> None:
        log.warning("%s: act returned %r, which %s; sending the fallback", where, result, problem)
        return None

    def _send(self, pending: _OpenRequest, answer: BotMessage) -> None:
        pending.answer = answer
        outbox = self._outbox
        if outbox is None:
            pending.sent_on = None
            log.info("match %s: not connected; request %d is answered when the referee asks "
                     "again", pending.match_id, pending.request_id)
            return
        outbox.put_nowait(answer)
        pending.sent_on = self._connection

    async def _on_answer_result(self, result: AnswerResult) -> None:
        pending = self._requests.get((result.match_id, result.request_id))
        where = f"match {result.match_id}, request {result.request_id}"
        if result.status is AnswerStatus.ACCEPTED:
            if pending is not None:
                pending.closed = True
            return
        if result.rejected:
            log.warning("%s: answer %s: %s (strikes: %d)", where, result.status.name,
                        result.reason, result.strikes)
            loop = asyncio.get_running_loop()
            if (
                pending is not None
                and not pending.closed
                and not pending.fallback_sent
                and pending.answer != pending.fallback
                and (pending.expires_at is None or loop.time() < pending.expires_at)
            ):
                # The request stays open after a rejection: the fallback is always legal.
                pending.fallback_sent = True
                log.warning("%s: sending the fallback", where)
                self._send(pending, pending.fallback)
            await self._call_hook("on_rejected", result)
            return
        if pending is not None:
            pending.closed = True
        if result.status is AnswerStatus.TIMED_OUT:
            log.warning("%s: timed out; the referee played the fallback (strikes: %d)", where,
                        result.strikes)
        else:
            log.info("%s: answer %s %s", where, result.status.name, result.reason)

    async def _shutdown(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def run_bot(
    bot: Bot,
    address: str,
    token: str,
    *,
    tls: bool = False,
    ca_cert: PemSource | None = None,
    client_cert: PemSource | None = None,
    client_key: PemSource | None = None,
    max_concurrent_matches: int = 8,
    reconnect: bool = True,
    stop_event: asyncio.Event | None = None,
    max_matches: int | None = None,
    safety_margin_ms: int = DEFAULT_SAFETY_MARGIN_MS,
    use_time_bank: bool = True,
) -> int:
    """Play on the referee at `address` (host:port) until `stop_event` is set or `max_matches`
    matches have ended; returns the number of matches that ended.

    `tls` (implied by any certificate) uses TLS, with `ca_cert` to trust a private CA and
    `client_cert` + `client_key` when the referee requires client certificates; each is PEM
    bytes or a file path. The SDK answers with the fallback when the bot has not answered
    `safety_margin_ms` before the referee's limit: deadline + bank, or the deadline alone when
    `use_time_bank` is False. Raises ConnectionRejected when the referee refuses the bot, and
    ConnectionLost when the stream ends and `reconnect` is False.
    """
    if max_concurrent_matches < 1:
        raise ValueError("max_concurrent_matches must be at least 1")
    if max_matches is not None and max_matches < 1:
        raise ValueError("max_matches must be at least 1 (or None for no limit)")
    if (client_cert is None) != (client_key is None):
        raise ValueError("client_cert and client_key go together")
    options = channel_options()
    if tls or ca_cert is not None or client_cert is not None:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_pem(ca_cert),
            private_key=_read_pem(client_key),
            certificate_chain=_read_pem(client_cert),
        )
        channel = aio.secure_channel(address, credentials, options=options)
    else:
        channel = aio.insecure_channel(address, options=options)
    executor = ThreadPoolExecutor(
        max_workers=max(4, 2 * max_concurrent_matches), thread_name_prefix="scout-bot"
    )
    runner = _Runner(
        bot,
        max_concurrent_matches=max_concurrent_matches,
        max_matches=max_matches,
        safety_margin_ms=safety_margin_ms,
        use_time_bank=use_time_bank,
        executor=executor,
    )
    watcher: asyncio.Task[None] | None = None
    if stop_event is not None:
        watcher = asyncio.ensure_future(_relay(stop_event, runner.stop))
    try:
        return await runner.run(channel, (("authorization", f"Bearer {token}"),), reconnect)
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await channel.close(None)
        # Threads of bots that overran cannot be stopped; do not wait for them.
        executor.shutdown(wait=False, cancel_futures=True)


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


def run(
    bot: Bot,
    address: str,
    token: str,
    *,
    tls: bool = False,
    ca_cert: PemSource | None = None,
    client_cert: PemSource | None = None,
    client_key: PemSource | None = None,
    max_concurrent_matches: int = 8,
    reconnect: bool = True,
    max_matches: int | None = None,
    safety_margin_ms: int = DEFAULT_SAFETY_MARGIN_MS,
    use_time_bank: bool = True,
    handle_signals: bool = True,
) -> int:
    """`run_bot` for plain scripts: runs its own event loop and, with `handle_signals`, stops
    gracefully on the first SIGINT/SIGTERM (a second Ctrl-C interrupts as usual)."""

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []

        def on_signal() -> None:
            log.info("stopping")
            stop.set()
            for signum in installed:
                loop.remove_signal_handler(signum)

        if handle_signals:
            for signum in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(signum, on_signal)
                except (NotImplementedError, RuntimeError, ValueError):
                    continue  # not the main thread, or a platform without signal handlers
                installed.append(signum)
        try:
            return await run_bot(
                bot,
                address,
                token,
                tls=tls,
                ca_cert=ca_cert,
                client_cert=client_cert,
                client_key=client_key,
                max_concurrent_matches=max_concurrent_matches,
                reconnect=reconnect,
                stop_event=stop,
                max_matches=max_matches,
                safety_margin_ms=safety_margin_ms,
                use_time_bank=use_time_bank,
            )
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    return asyncio.run(main())
