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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import NoReturn, ParamSpec, TypeVar, cast

import grpc
from google.protobuf.message import DecodeError
from scout_arena.server import RefereeFacade
from scout_arena.text import clip, echo

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


_NOT_FOUND: Mapping[type[StorageError], str] = {
    UnknownBotError: "no bot named", UnknownOwnerError: "no owner named",
    UnknownMatchError: "no match with id", UnknownChallengeError: "no challenge with id"}
"""What each lookup error's one argument (the name or id asked for) is."""


def _not_found(exc: StorageError) -> str:
    """Names what was looked for, the value asked for cut to `echo`'s 40 characters (an empty
    name is shown as ''; a 60,000-character one is not sent back)."""
    for cls, what in _NOT_FOUND.items():
        if isinstance(exc, cls) and len(exc.args) == 1:
            return f"not found: {what} {echo(exc.args[0])}"
    return f"not found: {str(exc) or type(exc).__name__}"


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
    """``message`` in at most `MESSAGE_LIMIT` characters, "..." included."""
    return clip(message, MESSAGE_LIMIT - 3)


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


class _UnreadableRequest:
    """What a ladder service's handler gets in place of a request whose bytes do not parse."""

    def __init__(self, message: str, error: str) -> None:
        self.text = bounded(f"the request could not be read as a {message} ({error})")


def _reading(deserializer: Callable[[bytes], object], name: str
             ) -> Callable[[bytes], object]:
    def read(data: bytes) -> object:
        try:
            return deserializer(data)
        except DecodeError as exc:
            return _UnreadableRequest(name, str(exc))

    return read


def _checked(handler: grpc.RpcMethodHandler[object, object], name: str
             ) -> grpc.RpcMethodHandler[object, object]:
    """``handler`` with its request read by `_reading` and an unreadable one answered
    INVALID_ARGUMENT before the method runs (only unary requests: the ladder's services have
    no request streams)."""
    if handler.request_deserializer is None or handler.request_streaming:
        return handler
    if handler.response_streaming:
        stream = cast(Callable[[object, Context], AsyncIterator[object]], handler.unary_stream)

        async def unary_stream(request: object, context: Context) -> AsyncIterator[object]:
            if isinstance(request, _UnreadableRequest):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.text)
            async for item in stream(request, context):
                yield item

        return handler._replace(  # type: ignore[attr-defined,no-any-return]
            unary_stream=unary_stream,
            request_deserializer=_reading(handler.request_deserializer, name))
    unary = cast(Callable[[object, Context], Awaitable[object]], handler.unary_unary)

    async def unary_unary(request: object, context: Context) -> object:
        if isinstance(request, _UnreadableRequest):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.text)
        return await unary(request, context)

    return handler._replace(  # type: ignore[attr-defined,no-any-return]
        unary_unary=unary_unary,
        request_deserializer=_reading(handler.request_deserializer, name))


class _Capture:
    """Stands in for the grpc server while a generated ``add_*Servicer_to_server`` runs, and
    keeps the method handlers it registers."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler[object, object]] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass  # the same handlers come again through add_registered_method_handlers

    def add_registered_method_handlers(
            self, service: str, handlers: dict[str, grpc.RpcMethodHandler[object, object]]
    ) -> None:
        self.handlers.update(handlers)


def _message_name(handler: grpc.RpcMethodHandler[object, object], method: str) -> str:
    """The full name of the request message a generated handler reads (its deserializer is
    the message class's ``FromString``)."""
    message = getattr(handler.request_deserializer, "__self__", None)
    descriptor = getattr(message, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", f"{method} request"))


def readable(registration: ServiceRegistration) -> ServiceRegistration:
    """``registration`` whose methods answer a request that does not parse (a string that is
    not UTF-8, corrupt bytes) with INVALID_ARGUMENT, as the Matches service does
    (docs/PROTOCOL.md §17), instead of UNKNOWN and a traceback in the log."""
    add, service = registration
    capture = _Capture()
    add(cast(grpc.aio.Server, capture))
    handlers = {method: _checked(handler, _message_name(handler, method))
                for method, handler in capture.handlers.items()}

    def add_checked(server: grpc.aio.Server) -> None:
        generic = grpc.method_handlers_generic_handler(service, handlers)
        server.add_generic_rpc_handlers((generic,))
        server.add_registered_method_handlers(service, handlers)  # type: ignore[attr-defined]

    return add_checked, service
