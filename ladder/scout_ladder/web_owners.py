"""The owner's web page's operations (`scout_arena.web.OwnerSource`) over the ladder.

The same calls the `scout.v1.Owners` service makes: the owner token checked by the
repository (stored hashed), the bot's ownership checked in the repository's transaction,
uploads through the one submission path (`submissions.Submissions`). Each refusal becomes the
web layer's error of the matching HTTP status.
"""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import Iterator
from datetime import datetime

from scout_arena.record import JSON
from scout_arena.web import (
    BadRequest,
    Caller,
    Conflict,
    Forbidden,
    NotFound,
    OwnerApiError,
    TooLarge,
    TooMany,
    Unavailable,
)

from .datafolder import DataTooLargeError, pack_data_folder
from .repository import (
    BotInfo,
    BotKindError,
    BotOwnerError,
    BotRetiredError,
    BotVersionInfo,
    InvalidInputError,
    InviteError,
    LimitError,
    NotYourBotError,
    OwnerSuspendedError,
    Repository,
    UnknownBotError,
    UnknownOwnerError,
    UnknownVersionError,
    UploadTooLargeError,
    VersionStateError,
    is_transient,
)
from .submissions import NoHostingError, Submissions, UploadRefused

_REFUSALS: tuple[tuple[tuple[type[Exception], ...], type[OwnerApiError], str], ...] = (
    ((UploadTooLargeError,), TooLarge, ""),
    ((LimitError,), TooMany, ""),
    ((NotYourBotError, BotOwnerError, InviteError), Forbidden, ""),
    ((UnknownBotError, UnknownOwnerError, UnknownVersionError), NotFound, "not found: "),
    ((UploadRefused,), BadRequest, "upload refused: "),
    ((InvalidInputError,), BadRequest, ""),
    ((OwnerSuspendedError, BotKindError, BotRetiredError, VersionStateError, NoHostingError,
      DataTooLargeError), Conflict, ""),
)
"""Which web error each refusal becomes (first match wins), with its message's prefix: the
statuses of the gRPC service's table (`rpc.STATUS_OF_ERROR`), in HTTP."""


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    try:
        yield
    except OwnerApiError:
        raise
    except Exception as exc:
        for kinds, error, prefix in _REFUSALS:
            if isinstance(exc, kinds):
                raise error(prefix + str(exc)) from None
        if is_transient(exc):
            raise Unavailable("the ladder's database is not answering; try again shortly"
                              ) from exc
        raise


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def bot_json(bot: BotInfo) -> JSON:
    return {"bot": bot.name, "kind": bot.kind, "version": bot.version, "retired": bot.retired,
            "probation_reason": bot.probation_reason, "paused_reason": bot.paused_reason,
            "suspended_reason": bot.suspended_reason}


def version_json(v: BotVersionInfo) -> JSON:
    return {"bot": v.bot, "version": v.version, "status": v.status, "reason": v.reason,
            "validation_output": v.validation_output, "archive_sha256": v.archive_sha256,
            "archive_size": v.archive_size, "runtime": v.runtime, "command": list(v.command),
            "created_at": _iso(v.registered_at), "decided_at": _iso(v.decided_at)}


class LadderOwners:
    """`scout_arena.web.OwnerSource` over the repository and the ladder's submissions."""

    def __init__(self, repo: Repository, submissions: Submissions,
                 admin_token: str | None) -> None:
        self.repo = repo
        self.submissions = submissions
        self.admin_token = admin_token

    @property
    def max_upload_bytes(self) -> int:
        return self.submissions.max_upload_bytes

    def authenticate(self, token: str) -> Caller | None:
        # No admin token configured: nobody is the admin (as in the Owners service).
        if self.admin_token and hmac.compare_digest(token.encode("utf-8", "replace"),
                                                    self.admin_token.encode("utf-8")):
            return Caller(None)
        with _refusals():
            owner = self.repo.authenticate_owner(token)
        return None if owner is None else Caller(owner.name, owner.suspended_reason)

    def check_submit(self, caller: Caller, bot: str) -> None:
        with _refusals():
            owner = None if caller.owner is None else self.repo.get_owner(caller.owner).owner
            self.submissions.check_submitter(owner)
            self.submissions.check_name(bot)
            existing = self.repo.get_bot(bot)
            if existing is not None and caller.owner is not None \
                    and existing.owner != caller.owner:
                raise Forbidden(f"{bot} is not a bot of {caller.owner}'s")

    def account(self, caller: Caller, owner: str | None) -> JSON:
        name = owner or caller.owner
        if caller.owner is not None and name != caller.owner:
            raise Forbidden("an owner sees only their own account")
        common: JSON = {"admin": caller.owner is None, "hosting": self.submissions.hosting,
                        "max_upload_bytes": self.max_upload_bytes}
        if name is None:
            return {**common, "owner": None, "suspended_reason": None, "created_at": None,
                    "bots": []}
        with _refusals():
            profile = self.repo.get_owner(name)
        return {**common, "owner": profile.owner.name,
                "suspended_reason": profile.owner.suspended_reason,
                "created_at": _iso(profile.owner.created_at),
                "bots": [bot_json(b) for b in profile.bots]}

    def versions(self, caller: Caller, bot: str, limit: int) -> list[JSON]:
        with _refusals():
            versions = self.repo.list_versions(bot, as_owner=caller.owner)
        return [version_json(v) for v in versions[:limit]]

    def runs(self, caller: Caller, bot: str, limit: int) -> list[JSON]:
        with _refusals():
            runs = self.repo.hosted_runs(bot, as_owner=caller.owner, limit=limit)
        return [{"match_id": r.match_id, "version": r.version,
                 "outcome_reason": r.outcome_reason, "output_tail": r.output_tail,
                 "created_at": _iso(r.created_at)} for r in runs]

    def data_archive(self, caller: Caller, bot: str) -> bytes:
        with _refusals():
            return pack_data_folder(self.repo.data_dir(bot, as_owner=caller.owner))

    async def submit(self, caller: Caller, bot: str, data: bytes) -> JSON:
        with _refusals():
            version = await self.submissions.submit(bot, data, as_owner=caller.owner)
        return version_json(version)
