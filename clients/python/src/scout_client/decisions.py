"""Asking the bot, and answering the referee whatever the bot does.

Each request is answered in its own task: a plain `act` runs in a worker thread, and the task
answers with the fallback itself when the bot is late, raises, or returns something that is not
a legal answer, so a buggy or slow bot loses a decision rather than a strike. Answers are kept
until their match ends: the referee resends open requests after a reconnect (with the same
request_id), and those are answered again without asking the bot twice.

Nothing here waits for an ACCEPTED verdict, which a lean stream (PROTOCOL.md §3.6.1) never
sends: an answered request counts as open until a verdict closes it (TIMED_OUT, STALE, ...) or
the match moves on, that is its next request, its RoundEnded or its MatchEnded arrives (a seat
has at most one open request at a time). A rejection (ILLEGAL, MALFORMED) keeps it open.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Never, TypeVar

from .bot import Bot
from .connection import Outbox
from .types import (
    ActionChoice,
    AnswerResult,
    AnswerStatus,
    BotMessage,
    Observation,
    RotationChoice,
    RotationRequest,
    Scout,
    ScoutAndShow,
    Show,
)

__all__ = ["DEFAULT_SAFETY_MARGIN_MS", "BotCalls", "Decisions"]

log = logging.getLogger("scout_client")

T = TypeVar("T")
R = TypeVar("R", bound=RotationRequest | Observation)

DEFAULT_SAFETY_MARGIN_MS = 100
"""How long before the referee's limit the SDK sends the fallback, to cover network latency."""


class BotCalls:
    """Runs the bot's methods: `async def` ones on the event loop, plain ones in a worker
    thread, so a slow bot in one match never stalls the others."""

    def __init__(self, bot: Bot, executor: ThreadPoolExecutor) -> None:
        self.bot = bot
        self._executor = executor

    def inline(self, method: Callable[[Never], object]) -> bool:
        """Whether `method` is called on the event loop: a plain method of a `Bot.quick`
        bot."""
        return self.bot.quick and not inspect.iscoroutinefunction(method)

    def overrides(self, name: str) -> bool:
        """Whether the bot has its own hook `name` (the base class's do nothing)."""
        return getattr(type(self.bot), name, None) is not getattr(Bot, name, None)

    def hook_now(self, name: str, argument: object) -> Awaitable[object] | None:
        """Call hook `name` at once; for hooks the bot does not override or runs `inline`.
        None when done (an exception is logged), else what is left to await."""
        if not self.overrides(name):
            return None
        method = getattr(self.bot, name)
        try:
            result = method(argument)
        except Exception:
            log.exception("the bot's %s raised", name)
            return None
        return result if inspect.isawaitable(result) else None

    async def invoke(self, method: Callable[[T], object], argument: T) -> object:
        result: object
        if inspect.iscoroutinefunction(method) or self.bot.quick:
            result = method(argument)
        else:
            loop = asyncio.get_running_loop()
            context = contextvars.copy_context()
            call = functools.partial(context.run, method, argument)
            result = await loop.run_in_executor(self._executor, call)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def hook(self, name: str, argument: object) -> None:
        """Call the hook `name` if the bot overrides it; an exception is logged, not raised,
        so a broken hook does not stop the match."""
        method = getattr(self.bot, name, None)
        if method is None or not self.overrides(name):
            return  # not overridden: skip the thread hop
        try:
            await self.invoke(method, argument)
        except Exception:
            log.exception("the bot's %s raised", name)


@dataclass(eq=False)
class _OpenRequest:
    """What is remembered of one request until its match ends, so that a request resent after
    a reconnect is answered without asking the bot twice."""

    match_id: str
    request_id: int
    expires_at: float | None  # event-loop time the SDK must answer by; None: no deadline
    fallback: BotMessage
    answer: BotMessage | None = None
    sent_on: int | None = None  # number of the stream the answer went out on
    fallback_sent: bool = False
    closed: bool = False
    task: asyncio.Task[None] | None = None


class Decisions:
    """The requests of every running match, from the referee's question to its verdict."""

    def __init__(
        self, calls: BotCalls, outbox: Outbox, *, safety_margin_ms: int, use_time_bank: bool
    ) -> None:
        self._calls = calls
        self._outbox = outbox
        self._margin_ms = safety_margin_ms
        self._use_time_bank = use_time_bank
        self._requests: dict[tuple[str, int], _OpenRequest] = {}
        self._latest: dict[str, _OpenRequest] = {}
        """Each match's most recent request: the only one that can still be open."""
        self._tasks: set[asyncio.Task[None]] = set()

    def _time_limit_s(self, deadline_ms: int, time_bank_ms: int) -> float | None:
        if deadline_ms <= 0:
            return None  # the referee set no deadline
        bank = time_bank_ms if self._use_time_bank else 0
        return (deadline_ms + bank - self._margin_ms) / 1000

    def open(self, request: RotationRequest | Observation, received_at: float) -> None:
        """Start answering `request`, which arrived at event-loop time `received_at`."""
        key = (request.match_id, request.request_id)
        pending = self._requests.get(key)
        if pending is not None:
            if pending.answer is not None and not pending.closed and (
                pending.sent_on != self._outbox.stream
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
        # A new request means the match moved on: the previous one was accepted (a lean stream
        # does not say so) or closed otherwise.
        self._close(self._latest.get(request.match_id))
        self._requests[key] = pending
        self._latest[request.match_id] = pending
        what = "choose_rotation" if isinstance(request, RotationRequest) else "act"
        method = getattr(self._calls.bot, what)
        if self._calls.inline(method):
            result = self._answer_now(pending, request, method, what)
            if result is None:
                return
            pending.task = asyncio.ensure_future(self._answer(pending, request, result))
        else:
            pending.task = asyncio.ensure_future(self._answer(pending, request))
        self._tasks.add(pending.task)
        pending.task.add_done_callback(self._tasks.discard)

    def _no_time_left(self, pending: _OpenRequest, request: RotationRequest | Observation,
                      where: str) -> bool:
        """Whether the request is already past the SDK's limit (the fallback is then sent)."""
        if pending.expires_at is None or asyncio.get_running_loop().time() < pending.expires_at:
            return False
        log.warning("%s: no time left to ask the bot (deadline %d ms, bank %d ms, margin "
                    "%d ms); sending the fallback", where, request.deadline_ms,
                    request.time_bank_ms, self._margin_ms)
        self._send(pending, pending.fallback)
        return True

    def _answer_now(self, pending: _OpenRequest, request: R,
                    method: Callable[[R], object], what: str) -> Awaitable[object] | None:
        """Ask a quick bot on the event loop and send its answer: no task, no thread. Returns
        what is left to await if the plain method returned an awaitable."""
        where = f"match {pending.match_id}, request {pending.request_id}"
        if self._no_time_left(pending, request, where):
            return None
        try:
            result = method(request)
        except Exception:
            log.exception("%s: the bot's %s raised; sending the fallback", where, what)
            self._send(pending, pending.fallback)
            return None
        if inspect.isawaitable(result):
            return result
        if pending.expires_at is not None and asyncio.get_running_loop().time() >= \
                pending.expires_at:
            log.warning("%s: the bot's %s returned after the SDK's time limit; sending the "
                        "fallback", where, what)
            self._send(pending, pending.fallback)
            return None
        self._send(pending, self._check_answer(request, result, where) or pending.fallback)
        return None

    async def _answer(self, pending: _OpenRequest, request: RotationRequest | Observation,
                      started: Awaitable[object] | None = None) -> None:
        """Ask the bot (or await what its quick method ``started``) within the time left."""
        what = "choose_rotation" if isinstance(request, RotationRequest) else "act"
        where = f"match {pending.match_id}, request {pending.request_id}"
        loop = asyncio.get_running_loop()
        if self._no_time_left(pending, request, where):
            if inspect.iscoroutine(started):
                started.close()  # never to be awaited: say so, not "never awaited"
            return
        remaining = None if pending.expires_at is None else pending.expires_at - loop.time()
        job = asyncio.ensure_future(
            started if started is not None
            else self._calls.invoke(getattr(self._calls.bot, what), request))
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
        if pending.closed:
            log.debug("match %s: request %d is closed; not answering it", pending.match_id,
                      pending.request_id)
            return
        pending.answer = answer
        pending.sent_on = self._outbox.send(answer)
        if pending.sent_on is None:
            log.info("match %s: not connected; request %d is answered when the referee asks "
                     "again", pending.match_id, pending.request_id)

    def settle(self, result: AnswerResult) -> None:
        """Take in the referee's verdict on an answer. A rejected answer (a strike) leaves the
        request open, so the always-legal fallback is sent if time remains; the caller then
        tells the bot through `on_rejected`. ACCEPTED (full streams only) closes the request;
        nothing depends on it coming."""
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
                pending.fallback_sent = True
                log.warning("%s: sending the fallback", where)
                self._send(pending, pending.fallback)
            return
        if pending is not None:
            pending.closed = True
        if result.status is AnswerStatus.TIMED_OUT:
            log.warning("%s: timed out; the referee played the fallback (strikes: %d)", where,
                        result.strikes)
        else:
            log.info("%s: answer %s %s", where, result.status.name, result.reason)

    def close_match(self, match_id: str) -> None:
        """The match moved on without a new request for this seat (its round ended): its
        latest request is closed, answered or not."""
        self._close(self._latest.get(match_id))

    def _close(self, pending: _OpenRequest | None) -> None:
        if pending is None or pending.closed:
            return
        pending.closed = True
        if pending.task is not None and pending.task is not asyncio.current_task():
            pending.task.cancel()  # a bot still thinking about it has lost the decision

    def forget(self, match_id: str) -> None:
        """Drop a finished match's requests, stopping any answer still being worked out."""
        self._latest.pop(match_id, None)
        current = asyncio.current_task()
        for key in [key for key in self._requests if key[0] == match_id]:
            pending = self._requests.pop(key)
            if pending.task is not None and pending.task is not current:
                pending.task.cancel()

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel every answer being worked out; returns the tasks for the caller to await."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks
