"""What the ladder's gRPC services share: repository calls off the loop, the one table that
turns the repository's errors into status codes, and the admin token check.

Only the errors listed in `STATUS_OF_ERROR` (and a database that does not answer) become a
status of their own; anything else, a builtin ``KeyError`` or ``ValueError`` from a bug
included, is logged and answered INTERNAL (see docs/PROTOCOL.md, the Ladder service).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NoReturn, ParamSpec, TypeVar

import grpc
from scout_arena.server import RefereeFacade
from scout_arena.text import clip

from .repository import (
    BotKindError,
    BotOwnerError,
    BotRetiredError,
    DuplicateMatchError,
    InvalidInputError,
    InviteError,
    LimitError,
    MatchStateError,
    NotYourBotError,
    OwnerExistsError,
    OwnerSuspendedError,
    StorageError,
    UnknownBotError,
    UnknownChallengeError,
    UnknownMatchError,
    UnknownOwnerError,
    UnknownVersionError,
    VersionStateError,
    is_transient,
)

log = logging.getLogger("scout_ladder")

P = ParamSpec("P")
T = TypeVar("T")

Context = grpc.aio.ServicerContext[object, object]
ServiceRegistration = tuple[Callable[[grpc.aio.Server], None], str]
"""(function adding a servicer to the server, full service name): one service the ladder
serves on its referee's port (`RefereeFacade`'s ``extra_services``)."""

MESSAGE_LIMIT = 300
"""Longest status message a ladder service sends (a message echoing a huge request would not
fit in the status trailer, and the client would see RESOURCE_EXHAUSTED instead)."""
UNAVAILABLE_MESSAGE = "the ladder's database is not answering; try again shortly"
INTERNAL_MESSAGE = "the ladder failed on this call; its log has the details"


@dataclass(frozen=True)
class ErrorStatus:
    code: grpc.StatusCode
    message: Callable[[StorageError], str] = str


def _not_found(exc: StorageError) -> str:
    return f"not found: {str(exc) or 'no such thing'}"


STATUS_OF_ERROR: Mapping[type[object], ErrorStatus] = {
    UnknownBotError: ErrorStatus(grpc.StatusCode.NOT_FOUND, _not_found),
    UnknownMatchError: ErrorStatus(grpc.StatusCode.NOT_FOUND, _not_found),
    UnknownChallengeError: ErrorStatus(grpc.StatusCode.NOT_FOUND, _not_found),
    BotOwnerError: ErrorStatus(grpc.StatusCode.ALREADY_EXISTS),
    DuplicateMatchError: ErrorStatus(grpc.StatusCode.ALREADY_EXISTS),
    BotRetiredError: ErrorStatus(grpc.StatusCode.FAILED_PRECONDITION, lambda e: f"{e} is retired"),
    MatchStateError: ErrorStatus(grpc.StatusCode.FAILED_PRECONDITION),
    InvalidInputError: ErrorStatus(grpc.StatusCode.INVALID_ARGUMENT),
    # Owner accounts and hosted bots (the Owners service, docs/PROTOCOL.md §19).
    UnknownOwnerError: ErrorStatus(grpc.StatusCode.NOT_FOUND, _not_found),
    UnknownVersionError: ErrorStatus(grpc.StatusCode.NOT_FOUND, _not_found),
    NotYourBotError: ErrorStatus(grpc.StatusCode.PERMISSION_DENIED),
    InviteError: ErrorStatus(grpc.StatusCode.PERMISSION_DENIED),
    OwnerExistsError: ErrorStatus(grpc.StatusCode.ALREADY_EXISTS),
    OwnerSuspendedError: ErrorStatus(grpc.StatusCode.FAILED_PRECONDITION),
    BotKindError: ErrorStatus(grpc.StatusCode.FAILED_PRECONDITION),
    VersionStateError: ErrorStatus(grpc.StatusCode.FAILED_PRECONDITION),
    LimitError: ErrorStatus(grpc.StatusCode.RESOURCE_EXHAUSTED),
}
"""The status each repository error becomes, by its class (a subclass takes its nearest
listed base's); the other repository errors (a lease, a missing database) are INTERNAL."""


def status_of(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The status a failed repository call answers with; None: an internal error."""
    if isinstance(exc, StorageError):
        for cls in type(exc).__mro__:
            status = STATUS_OF_ERROR.get(cls)
            if status is not None:
                return status.code, status.message(exc)
    if is_transient(exc):
        return grpc.StatusCode.UNAVAILABLE, UNAVAILABLE_MESSAGE
    return None


def bounded(message: str) -> str:
    return clip(message, MESSAGE_LIMIT)


async def abort(context: Context, code: grpc.StatusCode, message: str) -> NoReturn:
    await context.abort(code, bounded(message))
    raise AssertionError("abort returned")


async def call(context: Context, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args)`` in a thread; a failure aborts the call with its status (`status_of`)."""
    try:
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))
    except Exception as exc:
        status = status_of(exc)
        if status is None:
            log.error("Ladder call %s failed", getattr(fn, "__name__", fn), exc_info=exc)
            status = grpc.StatusCode.INTERNAL, INTERNAL_MESSAGE
    await abort(context, *status)


async def require_admin(context: Context, token: str | None) -> None:
    """Aborts the call UNAUTHENTICATED unless it bears ``token`` (None: no token needed)."""
    if token is None:
        return
    if not RefereeFacade.tokens_equal(RefereeFacade.bearer_token(context), token):
        await abort(context, grpc.StatusCode.UNAUTHENTICATED,
                    "this call needs 'authorization: Bearer <admin token>'")
