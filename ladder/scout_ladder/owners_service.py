"""The ladder's `scout.v1.Owners` service: owner accounts, their bots and hosted versions.

A thin servicer: every call authenticates its caller, runs one repository call in a thread
(``asyncio.to_thread``: the database never blocks the loop) and maps the repository's errors
to statuses by the ladder's one table (`rpc.STATUS_OF_ERROR`, plus :data:`OWN_STATUS_OF` for
the upload's own refusals; docs/PROTOCOL.md §19). Who acts is passed to the repository (an
owner's name, or None for the admin), which checks in the same transaction that the bot is
theirs.

Uploads take the path the owner's web page takes too (`submissions.Submissions`: checked by
``scout_arena.sandbox``, repacked, stored as ``validating``, handed to the validator).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Never, ParamSpec, TypeVar, TypeVarTuple

import grpc
from scout.v1 import owners_pb2, owners_pb2_grpc
from scout_arena.server import bearer_token, tokens_equal

from . import rpc
from .datafolder import DataTooLargeError, pack_data_folder
from .repository import (
    BotInfo,
    BotKind,
    BotVersionInfo,
    OwnerInfo,
    Repository,
    VersionStatus,
)
from .submissions import (
    NoHostingError,
    Submissions,
    UploadRefused,
    VersionValidator,
)

log = logging.getLogger("scout_ladder.owners")

Context = rpc.Context
T = TypeVar("T")
P = ParamSpec("P")
Ts = TypeVarTuple("Ts")

CHUNK_BYTES = 256 * 1024
"""DownloadData's chunk size."""
RUN_LOGS_DEFAULT, RUN_LOGS_MAX = 20, 100


class Registration(StrEnum):
    """Who may sign up (``ladder serve --registration``). The admin token makes accounts
    whatever the policy."""

    OPEN = "open"
    """Anybody."""
    INVITE = "invite"
    """With a single-use invite code the admin made (CreateInvite, `ladder invite`)."""
    CLOSED = "closed"
    """Nobody but the admin: the ladder as it was before owner accounts (the default)."""


@dataclass(frozen=True)
class _Caller:
    owner: OwnerInfo | None
    """None: the admin."""

    @property
    def as_owner(self) -> str | None:
        return None if self.owner is None else self.owner.name


OWN_STATUS_OF: tuple[tuple[type[Exception], grpc.StatusCode, str], ...] = (
    (UploadRefused, grpc.StatusCode.INVALID_ARGUMENT, "upload refused: "),
    (NoHostingError, grpc.StatusCode.FAILED_PRECONDITION, ""),
    (DataTooLargeError, grpc.StatusCode.RESOURCE_EXHAUSTED, ""),
)
"""The statuses of this service's own refusals (not the repository's): exception type, code,
message prefix. The repository's errors go through `rpc.STATUS_OF_ERROR`, the ladder's one
table (the owner errors included)."""


def status_of(exc: Exception) -> tuple[grpc.StatusCode, str] | None:
    for kind, code, prefix in OWN_STATUS_OF:
        if isinstance(exc, kind):
            return code, prefix + str(exc)
    return rpc.status_of(exc)


def _iso(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat()


_KINDS = {BotKind.REMOTE: owners_pb2.BOT_KIND_REMOTE, BotKind.HOSTED: owners_pb2.BOT_KIND_HOSTED}
_STATUSES = {
    VersionStatus.VALIDATING: owners_pb2.VERSION_STATUS_VALIDATING,
    VersionStatus.ACTIVE: owners_pb2.VERSION_STATUS_ACTIVE,
    VersionStatus.REJECTED: owners_pb2.VERSION_STATUS_REJECTED,
    VersionStatus.SUPERSEDED: owners_pb2.VERSION_STATUS_SUPERSEDED,
}


def _owner(owner: OwnerInfo) -> owners_pb2.OwnerSummary:
    return owners_pb2.OwnerSummary(name=owner.name, suspended_reason=owner.suspended_reason or "",
                                   created_at=_iso(owner.created_at))


def _bot(bot: BotInfo) -> owners_pb2.OwnedBot:
    return owners_pb2.OwnedBot(name=bot.name, kind=_KINDS[BotKind(bot.kind)], version=bot.version,
                               retired=bot.retired, probation_reason=bot.probation_reason or "",
                               paused_reason=bot.paused_reason or "")


def _version(v: BotVersionInfo) -> owners_pb2.VersionInfo:
    return owners_pb2.VersionInfo(
        bot=v.bot, version=v.version, status=_STATUSES[VersionStatus(v.status)],
        reason=v.reason or "", validation_output=v.validation_output or "",
        archive_sha256=v.archive_sha256 or "", archive_size=v.archive_size or 0,
        runtime=v.runtime or "", command=list(v.command), created_at=_iso(v.registered_at),
        decided_at=_iso(v.decided_at))


class OwnersServicer(owners_pb2_grpc.OwnersServicer):
    """`scout.v1.Owners` over the ladder's repository."""

    def __init__(self, repo: Repository, *, admin_token: str | None,
                 registration: Registration = Registration.CLOSED,
                 validator: VersionValidator | None = None) -> None:
        self.repo = repo
        self.admin_token = admin_token
        self.registration = Registration(registration)
        self.validator = validator
        self.submissions = Submissions(repo, validator)

    async def resume_validations(self) -> int:
        """Hands the versions still ``validating`` (the ladder stopped before a verdict) to
        the validator again; returns how many."""
        if self.validator is None:
            return 0
        pending = await asyncio.to_thread(self.repo.versions_validating)
        for version in pending:
            self.validator.submit(version.bot, version.version)
        return len(pending)

    # ----- plumbing ---------------------------------------------------------------------------

    def _is_admin(self, token: str) -> bool:
        # No admin token configured: nobody is the admin here (unlike the Ladder service, an
        # open admin would let any caller act on every owner's bots).
        return bool(self.admin_token and token) and tokens_equal(token, self.admin_token or "")

    async def _caller(self, context: Context) -> _Caller:
        token = bearer_token(context)
        if not token:
            await rpc.abort(context, grpc.StatusCode.UNAUTHENTICATED,
                            "this call needs 'authorization: Bearer <owner token>'")
        if self._is_admin(token):
            return _Caller(None)
        owner = await self._call(context, self.repo.authenticate_owner, token)
        if owner is None:
            await rpc.abort(context, grpc.StatusCode.UNAUTHENTICATED,
                            "unknown owner token (sign up for one, or check "
                            "SCOUT_OWNER_TOKEN)")
        return _Caller(owner)

    async def _admin(self, context: Context) -> None:
        token = bearer_token(context)
        if not self._is_admin(token):
            await rpc.abort(context, grpc.StatusCode.PERMISSION_DENIED if token else
                            grpc.StatusCode.UNAUTHENTICATED,
                            "this call needs 'authorization: Bearer <admin token>'"
                            + ("" if self.admin_token else
                               " and this ladder was started without one"))

    async def _call(self, context: Context, fn: Callable[P, T], *args: P.args,
                    **kwargs: P.kwargs) -> T:
        try:
            return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))
        except Exception as exc:
            await self._failed(context, exc, getattr(fn, "__name__", str(fn)))

    async def _failed(self, context: Context, exc: Exception, what: str) -> Never:
        status = status_of(exc)
        if status is None:
            log.error("Owners call %s failed", what, exc_info=exc)
            status = (grpc.StatusCode.INTERNAL, rpc.INTERNAL_MESSAGE)
        await rpc.abort(context, *status)

    async def _check(self, context: Context, check: Callable[[*Ts], None],
                     *args: *Ts) -> None:
        """A check of `Submissions` that needs no database: run here, on the loop."""
        try:
            check(*args)
        except Exception as exc:
            await self._failed(context, exc, check.__name__)

    async def _await(self, context: Context, work: Awaitable[T]) -> T:
        """``_call`` for a coroutine that runs its blocking parts in threads itself."""
        try:
            return await work
        except Exception as exc:
            await self._failed(context, exc, "submit")

    async def _refuse_suspended(self, caller: _Caller, context: Context) -> None:
        if caller.owner is not None and caller.owner.suspended:
            await self._check(context, self.submissions.check_submitter, caller.owner)

    async def _need_hosting(self, context: Context) -> None:
        if not self.submissions.hosting:
            await self._check(context, self.submissions.check_submitter, None)

    # ----- accounts ---------------------------------------------------------------------------

    async def Signup(self, request: owners_pb2.SignupRequest,
                     context: Context) -> owners_pb2.SignupResponse:
        invite = request.invite_code or None
        if self._is_admin(bearer_token(context)):
            owner, token = await self._call(context, self.repo.create_owner, request.name,
                                             invite, by_admin=True)
            return owners_pb2.SignupResponse(owner=_owner(owner), owner_token=token)
        if self.registration == Registration.CLOSED:
            await rpc.abort(context, grpc.StatusCode.PERMISSION_DENIED,
                            "this ladder's registration is closed: its operator makes "
                            "owner accounts")
        if self.registration == Registration.INVITE and invite is None:
            await rpc.abort(context, grpc.StatusCode.PERMISSION_DENIED,
                            "this ladder signs up by invite: pass an invite code from its "
                            "operator")
        owner, token = await self._call(context, self.repo.create_owner, request.name, invite)
        log.info("owner %s signed up", owner.name)
        return owners_pb2.SignupResponse(owner=_owner(owner), owner_token=token)

    async def CreateInvite(self, request: owners_pb2.CreateInviteRequest,
                           context: Context) -> owners_pb2.CreateInviteResponse:
        await self._admin(context)
        code = await self._call(context, self.repo.create_invite)
        return owners_pb2.CreateInviteResponse(invite_code=code)

    async def SuspendOwner(self, request: owners_pb2.SuspendOwnerRequest,
                           context: Context) -> owners_pb2.OwnerSummary:
        await self._admin(context)
        owner = await self._call(context, self.repo.suspend_owner, request.name, request.reason)
        log.warning("owner %s suspended: %s", owner.name, owner.suspended_reason)
        return _owner(owner)

    async def ReinstateOwner(self, request: owners_pb2.ReinstateOwnerRequest,
                             context: Context) -> owners_pb2.OwnerSummary:
        await self._admin(context)
        return _owner(await self._call(context, self.repo.reinstate_owner, request.name))

    async def GetOwner(self, request: owners_pb2.GetOwnerRequest,
                       context: Context) -> owners_pb2.OwnerProfile:
        caller = await self._caller(context)
        name = request.name or caller.as_owner
        if name is None:
            await rpc.abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                            "the admin names the owner to show")
        if caller.as_owner is not None and name != caller.as_owner:
            await rpc.abort(context, grpc.StatusCode.PERMISSION_DENIED,
                            "an owner sees only their own account")
        profile = await self._call(context, self.repo.get_owner, name)
        return owners_pb2.OwnerProfile(owner=_owner(profile.owner),
                                       bots=[_bot(b) for b in profile.bots])

    # ----- bots -------------------------------------------------------------------------------

    async def RegisterBot(self, request: owners_pb2.RegisterOwnedBotRequest,
                          context: Context) -> owners_pb2.RegisterOwnedBotResponse:
        caller = await self._caller(context)
        if caller.owner is None:
            await rpc.abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                            "a bot is registered with its owner's token (the admin uses "
                            "Ladder.RegisterBot, which names the owner)")
        assert caller.owner is not None
        await self._refuse_suspended(caller, context)
        kind = BotKind.HOSTED if request.kind == owners_pb2.BOT_KIND_HOSTED else BotKind.REMOTE
        if kind == BotKind.HOSTED:
            await self._need_hosting(context)
        bot, token = await self._call(context, self.repo.register_owned_bot, request.name,
                                      owner=caller.owner.name, kind=kind)
        return owners_pb2.RegisterOwnedBotResponse(bot=_bot(bot), token=token or "")

    async def RotateBotToken(self, request: owners_pb2.RotateBotTokenRequest,
                             context: Context) -> owners_pb2.RotateBotTokenResponse:
        caller = await self._caller(context)
        bot, token = await self._call(context, self.repo.rotate_bot_token, request.name,
                                      as_owner=caller.as_owner)
        return owners_pb2.RotateBotTokenResponse(bot=_bot(bot), token=token)

    async def RetireBot(self, request: owners_pb2.RetireOwnedBotRequest,
                        context: Context) -> owners_pb2.OwnedBot:
        caller = await self._caller(context)
        bot = await self._call(context, self.repo.retire_owned_bot, request.name,
                               as_owner=caller.as_owner)
        return _bot(bot)

    # ----- versions ---------------------------------------------------------------------------

    async def SubmitVersion(self, request_iterator: AsyncIterator[owners_pb2.SubmitVersionChunk],
                            context: Context) -> owners_pb2.VersionInfo:
        caller = await self._caller(context)
        await self._check(context, self.submissions.check_submitter, caller.owner)
        name: str | None = None
        parts: list[bytes] = []
        size = 0
        async for chunk in request_iterator:
            part = chunk.WhichOneof("part")
            if name is None:
                if part != "bot":
                    await rpc.abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                                    "the first message of an upload names the bot")
                name = chunk.bot
                # said before the bytes are read, not after
                await self._check(context, self.submissions.check_name, name)
                continue
            if part != "data":
                await rpc.abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                                "after the bot's name, an upload is data messages only")
            size += len(chunk.data)
            await self._check(context, self.submissions.check_size, size)
            parts.append(chunk.data)
        if name is None or not parts:
            await rpc.abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                            "an upload is the bot's name, then the archive's bytes")
        assert name is not None
        version = await self._await(context, self.submissions.submit(
            name, b"".join(parts), as_owner=caller.as_owner))
        return _version(version)

    async def GetVersion(self, request: owners_pb2.GetVersionRequest,
                         context: Context) -> owners_pb2.VersionInfo:
        caller = await self._caller(context)
        version = await self._call(context, self.repo.get_version, request.bot,
                                   request.version or None, as_owner=caller.as_owner)
        return _version(version)

    async def ListVersions(self, request: owners_pb2.ListVersionsRequest,
                           context: Context) -> owners_pb2.ListVersionsResponse:
        caller = await self._caller(context)
        versions = await self._call(context, self.repo.list_versions, request.bot,
                                    as_owner=caller.as_owner)
        return owners_pb2.ListVersionsResponse(versions=[_version(v) for v in versions])

    # ----- what only the owner sees -----------------------------------------------------------

    async def GetRunLogs(self, request: owners_pb2.GetRunLogsRequest,
                         context: Context) -> owners_pb2.GetRunLogsResponse:
        caller = await self._caller(context)
        limit = min(max(request.limit, 0) or RUN_LOGS_DEFAULT, RUN_LOGS_MAX)
        runs = await self._call(context, self.repo.hosted_runs, request.bot,
                                as_owner=caller.as_owner, limit=limit)
        return owners_pb2.GetRunLogsResponse(runs=[
            owners_pb2.HostedRun(match_id=r.match_id, version=r.version,
                                 outcome_reason=r.outcome_reason, output_tail=r.output_tail,
                                 created_at=_iso(r.created_at)) for r in runs])

    async def DownloadData(self, request: owners_pb2.DownloadDataRequest,
                           context: Context) -> AsyncIterator[owners_pb2.DataChunk]:
        caller = await self._caller(context)
        folder = await self._call(context, self.repo.data_dir, request.bot,
                                  as_owner=caller.as_owner)
        archive = await self._call(context, pack_data_folder, folder)
        for start in range(0, len(archive), CHUNK_BYTES):
            yield owners_pb2.DataChunk(data=archive[start:start + CHUNK_BYTES])


def owners_service(servicer: OwnersServicer) -> rpc.ServiceRegistration:
    return rpc.readable((lambda server: owners_pb2_grpc.add_OwnersServicer_to_server(
        servicer, server), "scout.v1.Owners"))
