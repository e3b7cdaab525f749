"""The Matches service: the organisers' API (create, look up, watch and list matches, read
records), behind the admin token when the referee has one.

Requests are read into the referee's values by `convert`; each kind of `MatchRequestError`
becomes its status code here (`MATCH_REQUEST_STATUS`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message
from scout.v1 import matches_pb2, matches_pb2_grpc

from scout_arena.text import echo

from ..record import record_to_json
from .book import KnownMatch
from .calls import OrganiserContext, bearer_token
from .connections import tokens_equal
from .convert import match_info, match_status_from_pb, requested_time_control, spectator_event
from .errors import (
    ECHO_LIMIT,
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
)
from .events import MatchStatus
from .idempotency import CreateRequest, IdempotencyKeys
from .match import MatchRunner
from .referee import Referee

log = logging.getLogger("scout_arena.referee")

Context = OrganiserContext


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


Q = TypeVar("Q", bound=Message)
R = TypeVar("R", bound=Message)


def _reader(message_type: type[Q]) -> Callable[[bytes], Q | UnreadableRequest]:
    name = message_type.DESCRIPTOR.full_name

    def read(data: bytes) -> Q | UnreadableRequest:
        try:
            return message_type.FromString(data)
        except DecodeError as exc:
            return UnreadableRequest(name, str(exc))

    return read


def _checked_unary(method: Callable[[Q, Context], Awaitable[R]]
                   ) -> Callable[[Q | UnreadableRequest, Context], Awaitable[R]]:
    async def handle(request: Q | UnreadableRequest, context: Context) -> R:
        if isinstance(request, UnreadableRequest):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.text)
        return await method(request, context)

    return handle


def _checked_stream(method: Callable[[Q, Context], AsyncIterator[R]]
                    ) -> Callable[[Q | UnreadableRequest, Context], AsyncIterator[R]]:
    async def handle(request: Q | UnreadableRequest, context: Context) -> AsyncIterator[R]:
        if isinstance(request, UnreadableRequest):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.text)
        async for item in method(request, context):
            yield item

    return handle


def _unary(method: Callable[[Q, Context], Awaitable[R]], request: type[Q], response: type[R]
           ) -> grpc.RpcMethodHandler[Q | UnreadableRequest, R]:
    return grpc.unary_unary_rpc_method_handler(
        _checked_unary(method),
        request_deserializer=_reader(request), response_serializer=response.SerializeToString)


def _unary_stream(method: Callable[[Q, Context], AsyncIterator[R]], request: type[Q],
                  response: type[R]) -> grpc.RpcMethodHandler[Q | UnreadableRequest, R]:
    return grpc.unary_stream_rpc_method_handler(
        _checked_stream(method),
        request_deserializer=_reader(request), response_serializer=response.SerializeToString)


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
LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 1000
"""ListMatches lists ``limit`` matches: 0 or negative means the default, more the maximum."""


def list_limit(limit: int, default: int, maximum: int) -> int:
    """How many rows a list call with ``limit`` gets (as its proto says): 0 or negative means
    ``default``, more than ``maximum`` means ``maximum``."""
    return default if limit <= 0 else min(limit, maximum)


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

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """Like the generated add_MatchesServicer_to_server (registered as well as generic),
        but a request that does not parse ends its call with INVALID_ARGUMENT
        (`UnreadableRequest`)."""
        pb = matches_pb2
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {  # Any: types per method
            "CreateMatch": _unary(self.CreateMatch, pb.CreateMatchRequest, pb.MatchInfo),
            "CreateMatches": _unary(self.CreateMatches, pb.CreateMatchesRequest,
                                    pb.CreateMatchesResponse),
            "GetMatch": _unary(self.GetMatch, pb.GetMatchRequest, pb.MatchInfo),
            "GetRecord": _unary(self.GetRecord, pb.GetRecordRequest, pb.GetRecordResponse),
            "WatchMatch": _unary_stream(self.WatchMatch, pb.WatchMatchRequest,
                                        pb.SpectatorEvent),
            "ListMatches": _unary(self.ListMatches, pb.ListMatchesRequest,
                                  pb.ListMatchesResponse),
        }
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("scout.v1.Matches", handlers),))
        server.add_registered_method_handlers("scout.v1.Matches", handlers)  # type: ignore[attr-defined]

    async def _authorise(self, context: Context) -> None:
        if self.admin_token is None:
            return
        if not tokens_equal(bearer_token(context), self.admin_token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "the Matches service needs 'authorization: Bearer <admin token>'")

    async def _runner(self, match_id: str, context: Context) -> KnownMatch:
        runner = self.referee.matches.get(match_id)
        if runner is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"no match with id {echo(match_id, ECHO_LIMIT)}")
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
        tc = requested_time_control(request, self.referee.default_time_control)
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
                                    f"no match with id {echo(request.match_id, ECHO_LIMIT)}")
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
        limit = list_limit(request.limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX)
        runners = sorted(self.referee.matches.values(), key=lambda m: m.created_at, reverse=True)
        chosen = [m for m in runners if wanted is None or m.status is wanted][:limit]
        return matches_pb2.ListMatchesResponse(matches=[match_info(m.snapshot()) for m in chosen])


