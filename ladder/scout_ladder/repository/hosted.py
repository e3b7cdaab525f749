"""Hosted bots: their uploaded versions and validation, their data folders, what their runs
left, and their pauses.

The life of an upload: ``submit_version`` stores it as ``validating`` (the row and the file in
one transaction, see :mod:`.files`); the ladder's validator runs it and calls
``finish_validation``, which makes it ``active`` (the previous active version ``superseded``,
``bots.version`` pointing at it, any pause lifted) or ``rejected`` with the reason and output.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import timedelta
from pathlib import Path

from scout_arena.text import echo
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scout_ladder.models import Bot, BotVersion, HostedRun

from .bots import hash_token
from .common import (
    bot_by_name,
    bot_info,
    check_bot_name,
    is_match_id,
    next_version,
    supersede_active,
    version_info,
)
from .database import Database
from .errors import (
    BotKindError,
    InvalidInputError,
    TooManySubmissionsError,
    UnknownBotError,
    UnknownVersionError,
    UploadTooLargeError,
    VersionStateError,
)
from .files import tail_text
from .owners import acting_owner, check_bot_room, check_reason, owned_bot
from .results import BotInfo, BotKind, BotVersionInfo, HostedRunInfo, VersionStatus

RUNTIMES = ("python", "binary", "java", "node")


def _version_row(session: Session, bot: Bot, version: int | None) -> BotVersion:
    query = select(BotVersion).where(BotVersion.bot_id == bot.id)
    if version is None:
        query = query.order_by(BotVersion.version.desc()).limit(1)
    else:
        query = query.where(BotVersion.version == version)
    row = session.scalars(query).first()
    if row is None:
        raise UnknownVersionError(f"{bot.name} has no version {version}" if version is not None
                                  else f"{bot.name} has no version yet")
    return row


def _run_info(run: HostedRun, bot: str) -> HostedRunInfo:
    return HostedRunInfo(bot=bot, match_id=run.match_id, version=run.version,
                         outcome_reason=run.outcome_reason, output_tail=run.output_tail,
                         created_at=run.created_at)


class HostedStore(Database):
    """The hosted-bot queries of :class:`~scout_ladder.repository.Repository`."""

    def submit_version(self, name: str, *, as_owner: str | None, archive: bytes,
                       runtime: str, command: tuple[str, ...]) -> BotVersionInfo:
        """Stores an upload (already unpacked and checked by the caller, and normalized to a
        .tar.gz) as the bot's next version, ``validating``. An owner's new name becomes a
        hosted bot of theirs; the admin uploads only for existing bots. Limits: the owner's
        bots, submissions in the last hour, the upload's size."""
        check_bot_name(name)
        if runtime not in RUNTIMES or not command:
            raise InvalidInputError(f"a version runs with one of {', '.join(RUNTIMES)} and a "
                                    f"command; got {echo(runtime)} {echo(command)}")
        if len(archive) > self.limits.max_upload_bytes:
            raise UploadTooLargeError(f"the upload has {len(archive)} bytes; this ladder takes "
                                      f"at most {self.limits.max_upload_bytes}")
        now = self._now()
        digest = hashlib.sha256(archive).hexdigest()
        for attempt in range(2):
            written: Path | None = None
            try:
                with self._transaction(write=True) as session:
                    bot = self._hosted_bot(session, name, as_owner)
                    number = next_version(session, bot.id)
                    row = BotVersion(
                        bot_id=bot.id, version=number, registered_at=now,
                        status=VersionStatus.VALIDATING, archive_sha256=digest,
                        archive_size=len(archive), runtime=runtime,
                        command_json=json.dumps(list(command)))
                    session.add(row)
                    session.flush()
                    written = self.files.write_upload(bot.id, number, archive)
                    return version_info(row, bot.name)
            except IntegrityError:
                if written is not None:
                    written.unlink(missing_ok=True)
                if attempt:  # two first uploads of one new name raced
                    raise
            except BaseException:
                if written is not None:
                    written.unlink(missing_ok=True)
                raise
        raise AssertionError("unreachable")

    def _hosted_bot(self, session: Session, name: str, as_owner: str | None) -> Bot:
        owner = acting_owner(session, as_owner, write=True)
        existing = session.scalars(select(Bot).where(Bot.name == name).with_for_update()
                                   ).one_or_none()
        if existing is None and owner is None:
            raise UnknownBotError(name)
        if owner is not None:
            hour_ago = self._now() - timedelta(hours=1)
            recent = session.scalar(
                select(func.count()).select_from(BotVersion).join(Bot)
                .where(Bot.owner_id == owner.id, BotVersion.archive_sha256.is_not(None),
                       BotVersion.registered_at > hour_ago)) or 0
            if recent >= self.limits.submissions_per_hour:
                raise TooManySubmissionsError(
                    f"{echo(owner.name)} submitted {recent} versions in the last hour, the "
                    f"most this ladder takes ({self.limits.submissions_per_hour}); try later")
        if existing is None:
            assert owner is not None
            check_bot_room(session, owner, self.limits.bots_per_owner)
            bot = Bot(name=name, owner=owner.name, owner_id=owner.id, account=owner,
                      version=0, token_hash=hash_token(secrets.token_urlsafe(32)), retired=False,
                      created_at=self._now(), kind=BotKind.HOSTED)
            session.add(bot)
            session.flush()
            return bot
        bot = owned_bot(session, name, as_owner, write=True)
        if bot.kind != BotKind.HOSTED:
            raise BotKindError(f"{name} is a remote bot: its owner runs it (uploads are for "
                               "hosted bots)")
        if bot.retired:
            if owner is not None:
                check_bot_room(session, owner, self.limits.bots_per_owner)
            bot.retired = False
        return bot

    def finish_validation(self, name: str, version: int, *, passed: bool, reason: str,
                          output: str) -> BotVersionInfo:
        """The validator's verdict on a ``validating`` version (see the module docstring).
        Deciding a version again the same way is a no-op; the other way is refused."""
        with self._transaction(write=True) as session:
            bot = bot_by_name(session, name, lock=True)
            row = _version_row(session, bot, version)
            wanted = VersionStatus.ACTIVE if passed else VersionStatus.REJECTED
            if row.status != VersionStatus.VALIDATING:
                decided_as = (VersionStatus.ACTIVE, VersionStatus.SUPERSEDED) if passed \
                    else (VersionStatus.REJECTED,)
                if row.status in decided_as:
                    return version_info(row, bot.name)
                raise VersionStateError(f"{name} version {version} is {row.status}, not "
                                        f"validating: it was decided already")
            if passed:
                supersede_active(session, bot.id)
                bot.version = version
                bot.paused_reason = None
            row.status = wanted
            row.reason = None if passed else (reason or "it failed validation")
            row.validation_output = tail_text(output)
            row.decided_at = self._now()
            return version_info(row, bot.name)

    def get_version(self, name: str, version: int | None, *,
                    as_owner: str | None) -> BotVersionInfo:
        """A version (None: the newest), for its owner or the admin."""
        with self._transaction(write=False) as session:
            bot = owned_bot(session, name, as_owner, write=False)
            return version_info(_version_row(session, bot, version), bot.name)

    def list_versions(self, name: str, *, as_owner: str | None) -> list[BotVersionInfo]:
        """Every version of the bot, newest first, for its owner or the admin."""
        with self._transaction(write=False) as session:
            bot = owned_bot(session, name, as_owner, write=False)
            rows = session.scalars(select(BotVersion).where(BotVersion.bot_id == bot.id)
                                   .order_by(BotVersion.version.desc()))
            return [version_info(row, bot.name) for row in rows]

    def versions_validating(self) -> list[BotVersionInfo]:
        """Every version waiting for a verdict, oldest first (a restarted ladder hands them
        to its validator again)."""
        with self._transaction(write=False) as session:
            rows = session.execute(
                select(BotVersion, Bot.name).join(Bot)
                .where(BotVersion.status == VersionStatus.VALIDATING)
                .order_by(BotVersion.registered_at, BotVersion.bot_id, BotVersion.version))
            return [version_info(row, bot) for row, bot in rows]

    def upload_path(self, name: str, version: int) -> Path:
        """Where a stored version's upload (.tar.gz) is, for the hosting code."""
        with self._transaction(write=False) as session:
            bot = bot_by_name(session, name)
            _version_row(session, bot, version)
            return self.files.upload_path(bot.id, version)

    def data_dir(self, name: str, *, as_owner: str | None = None) -> Path:
        """The bot's persistent data folder (which may not exist yet). With ``as_owner``,
        only that owner's bot's."""
        with self._transaction(write=False) as session:
            bot = owned_bot(session, name, as_owner, write=False)
            return self.files.data_dir(bot.id)

    def record_hosted_run(self, name: str, match_id: str, version: int, outcome_reason: str,
                          output_tail: str) -> HostedRunInfo:
        """Keeps what a hosted run left (the output's last 64 KiB); recording a match again
        replaces it. Only the newest ``limits.runs_kept_per_bot`` runs of a bot are kept."""
        if not is_match_id(match_id):
            raise InvalidInputError(f"not a match id: {echo(match_id)}")
        with self._transaction(write=True) as session:
            bot = bot_by_name(session, name, lock=True)
            run = session.scalars(select(HostedRun).where(
                HostedRun.bot_id == bot.id, HostedRun.match_id == match_id)).one_or_none()
            if run is None:
                run = HostedRun(bot_id=bot.id, match_id=match_id)
                session.add(run)
            run.version = version
            run.outcome_reason = tail_text(outcome_reason, 4096)
            run.output_tail = tail_text(output_tail)
            run.created_at = self._now()
            session.flush()
            keep = select(HostedRun.id).where(HostedRun.bot_id == bot.id).order_by(
                HostedRun.id.desc()).limit(self.limits.runs_kept_per_bot).scalar_subquery()
            session.execute(delete(HostedRun).where(HostedRun.bot_id == bot.id,
                                                    HostedRun.id.not_in(keep)))
            return _run_info(run, bot.name)

    def hosted_runs(self, name: str, *, as_owner: str | None,
                    limit: int = 50) -> list[HostedRunInfo]:
        """The bot's hosted runs, newest first, for its owner or the admin."""
        with self._transaction(write=False) as session:
            bot = owned_bot(session, name, as_owner, write=False)
            runs = session.scalars(select(HostedRun).where(HostedRun.bot_id == bot.id)
                                   .order_by(HostedRun.id.desc()).limit(max(1, limit)))
            return [_run_info(run, bot.name) for run in runs]

    def set_paused(self, name: str, reason: str | None) -> BotInfo:
        """Pauses a hosted bot (it kept crashing...) or, with None, lifts the pause. A version
        that passes validation lifts it too."""
        if reason is not None:
            check_reason(reason)
        with self._transaction(write=True) as session:
            bot = bot_by_name(session, name, lock=True)
            bot.paused_reason = reason
            return bot_info(bot)

    def unschedulable_bots(self) -> dict[str, str]:
        """Every bot the matchmaker must not seat, whatever its connection, with why
        (:attr:`BotInfo.unschedulable_reason`): retired, its owner suspended, paused, or a
        hosted bot with no version that passed."""
        with self._transaction(write=False) as session:
            reasons = {}
            for bot in session.scalars(select(Bot)):
                reason = bot_info(bot).unschedulable_reason
                if reason is not None:
                    reasons[bot.name] = reason
            return reasons

