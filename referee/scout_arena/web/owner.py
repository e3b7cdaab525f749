"""The owner's part of the JSON API: their bots, new versions, validation results, hosted runs'
output and the data folder, behind the owner token (docs/web-api.md, "Owners").

The app knows no database and no referee: the ladder hands it an :class:`OwnerSource`, and
refusals come back as the :class:`OwnerApiError` subclasses below, one per HTTP status. The
token travels only in the ``Authorization: Bearer`` header, never in a URL, and is never
logged. An upload is the request's raw body (a .zip or .tar.gz), refused by its declared
length before it is read, and by its size as it streams in.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..record import JSON

log = logging.getLogger("scout_arena.web")


class OwnerApiError(Exception):
    """A refused owner call; ``status`` is its HTTP status, the message its JSON ``error``."""

    status: ClassVar[int] = 400


class BadRequest(OwnerApiError):
    """A malformed request or a refused upload (not a bot name, an archive the ladder refuses)."""


class Unauthenticated(OwnerApiError):
    status = 401


class Forbidden(OwnerApiError):
    """Another owner's bot."""

    status = 403


class NotFound(OwnerApiError):
    status = 404


class Conflict(OwnerApiError):
    """The call does not apply now (a suspended account, a remote bot, no hosting)."""

    status = 409


class TooLarge(OwnerApiError):
    """The upload is larger than the ladder takes."""

    status = 413


class TooMany(OwnerApiError):
    """A per-owner limit (bots, submissions per hour)."""

    status = 429


class Unavailable(OwnerApiError):
    status = 503


@dataclass(frozen=True)
class Caller:
    """Who a valid token belongs to."""

    owner: str | None
    """The owner's name; None: the ladder's admin, who may act on any bot."""
    suspended_reason: str | None = None


class OwnerSource(Protocol):
    """The owner operations the pages offer; the ladder implements it
    (``scout_ladder.web_source.LadderOwners``). The synchronous methods are called in a
    worker thread; ``submit`` on the event loop that serves the app (the ladder's own).
    Every method raises :class:`OwnerApiError` subclasses for what it refuses."""

    @property
    def max_upload_bytes(self) -> int: ...

    def authenticate(self, token: str) -> Caller | None:
        """The caller this token is, or None for an unknown token."""
        ...

    def check_submit(self, caller: Caller, bot: str) -> None:
        """Refuses, before the upload is read, what no upload can change (a suspended owner,
        no hosting, not a bot name, another owner's bot)."""
        ...

    def account(self, caller: Caller, owner: str | None) -> JSON:
        """The caller's account and bots (the admin names the owner, or gets no bots)."""
        ...

    def versions(self, caller: Caller, bot: str, limit: int) -> list[JSON]:
        """The newest ``limit`` versions, newest first."""
        ...

    def runs(self, caller: Caller, bot: str, limit: int) -> list[JSON]: ...

    def data_archive(self, caller: Caller, bot: str) -> bytes:
        """The bot's data folder as a .tar.gz."""
        ...

    async def submit(self, caller: Caller, bot: str, data: bytes) -> JSON:
        """Stores ``data`` as the bot's next version (new name: a new hosted bot of the
        caller's) and starts its validation; the version as stored (``validating``)."""
        ...


RUNS_DEFAULT, RUNS_MAX = 20, 100
VERSIONS_DEFAULT, VERSIONS_MAX = 50, 200
Handler = Callable[[Request], Awaitable[Response]]


def _error(exc: OwnerApiError) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=headers)


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("this page needs 'Authorization: Bearer <owner token>'")
    return token.strip()


def owner_routes(owners: OwnerSource) -> list[Route]:
    """The /api/owner endpoints over ``owners``."""

    async def caller_of(request: Request) -> Caller:
        caller = await run_in_threadpool(owners.authenticate, _bearer(request))
        if caller is None:
            raise Unauthenticated("unknown owner token")
        return caller

    def guarded(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except OwnerApiError as exc:
                return _error(exc)
            except Exception:
                log.exception("owner call %s %s failed", request.method, request.url.path)
                return JSONResponse({"error": "the server failed on this call; its log has "
                                              "the details"}, status_code=500)
        return endpoint

    def limit_of(request: Request, default: int, most: int) -> int:
        raw = request.query_params.get("limit") or str(default)
        try:
            return min(max(int(raw), 1), most)
        except ValueError:
            raise BadRequest("limit must be an integer") from None

    async def account(request: Request) -> Response:
        caller = await caller_of(request)
        owner = request.query_params.get("owner") or None
        return JSONResponse(await run_in_threadpool(owners.account, caller, owner))

    async def versions(request: Request) -> Response:
        caller = await caller_of(request)
        bot = request.path_params["bot"]
        limit = limit_of(request, VERSIONS_DEFAULT, VERSIONS_MAX)
        return JSONResponse(await run_in_threadpool(owners.versions, caller, bot, limit))

    async def runs(request: Request) -> Response:
        caller = await caller_of(request)
        limit = limit_of(request, RUNS_DEFAULT, RUNS_MAX)
        bot = request.path_params["bot"]
        return JSONResponse(await run_in_threadpool(owners.runs, caller, bot, limit))

    async def data(request: Request) -> Response:
        caller = await caller_of(request)
        bot = request.path_params["bot"]
        archive = await run_in_threadpool(owners.data_archive, caller, bot)
        return Response(archive, media_type="application/gzip", headers={
            "Content-Disposition": f'attachment; filename="{bot}-data.tar.gz"',
            "Cache-Control": "no-store"})

    async def submit(request: Request) -> Response:
        caller = await caller_of(request)
        bot = request.path_params["bot"]
        await run_in_threadpool(owners.check_submit, caller, bot)
        limit = owners.max_upload_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                raise BadRequest("Content-Length must be an integer") from None
            if length > limit:
                raise TooLarge(f"the upload is larger than this ladder takes ({limit} bytes)")
        parts: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the upload is larger than this ladder takes ({limit} bytes)")
            parts.append(chunk)
        if not size:
            raise BadRequest("the request body is the archive (.zip or .tar.gz); it is empty")
        version = await owners.submit(caller, bot, b"".join(parts))
        return JSONResponse(version, status_code=201)

    return [
        Route("/api/owner", guarded(account)),
        Route("/api/owner/bots/{bot}/versions", guarded(versions), methods=["GET"]),
        Route("/api/owner/bots/{bot}/versions", guarded(submit), methods=["POST"]),
        Route("/api/owner/bots/{bot}/runs", guarded(runs)),
        Route("/api/owner/bots/{bot}/data", guarded(data)),
    ]
