"""A new version of a hosted bot, from the owner's upload to the validator: the one path the
`scout.v1.Owners` service and the owner's web page both take.

Uploads are hostile input: they are unpacked and checked by ``scout_arena.sandbox`` in a
scratch folder (``unpack_upload``: traversal, links, bombs, manifest), repacked into a
normalized .tar.gz, stored as a ``validating`` version, and handed to the ladder's
:class:`VersionValidator` (the hosting code), which runs it and records the verdict. Each
refusal is an exception by cause; each front end turns it into its own status.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .repository import (
    BotVersionInfo,
    InvalidInputError,
    OwnerInfo,
    OwnerSuspendedError,
    Repository,
    UploadTooLargeError,
    echo,
)
from .repository.common import is_bot_name

log = logging.getLogger("scout_ladder.owners")


class VersionValidator(Protocol):
    """Validates stored versions: the hosting code implements it.

    ``submit`` is called on the ladder's event loop once a version is stored as
    ``validating`` (and again for each version still validating when the ladder starts), so
    it must return at once (start a task). It records the verdict with
    ``Repository.finish_validation``.
    """

    def submit(self, bot: str, version: int) -> None: ...

    @property
    def unavailable(self) -> str:
        """Why no version can be validated here now ("" when it can): submissions are then
        refused rather than left ``validating``."""
        ...


class UploadRefused(Exception):
    """The upload is not a bot the ladder can take (the sandbox package's message)."""


class NoHostingError(Exception):
    """This ladder was started without hosting: it takes no upload."""


@dataclass(frozen=True)
class NormalizedUpload:
    runtime: str
    command: tuple[str, ...]
    archive: bytes
    """The .tar.gz the ladder stores."""


def normalize_upload(data: bytes, max_upload_bytes: int) -> NormalizedUpload:
    """Unpacks an upload in a scratch folder with the sandbox package's checks and repacks it
    as the .tar.gz the ladder stores (so that every stored version has one format, made by
    us); raises :class:`UploadRefused` with the sandbox's message."""
    from scout_arena.sandbox import (
        ManifestError,
        UploadError,
        UploadLimits,
        pack_folder,
        unpack_upload,
    )

    limits = UploadLimits(max_upload_bytes=max_upload_bytes)
    with tempfile.TemporaryDirectory(prefix="scout-upload-") as scratch:
        folder = Path(scratch) / "bot"
        folder.mkdir()
        try:
            manifest = unpack_upload(data, folder, limits)
            return NormalizedUpload(str(manifest.runtime), tuple(manifest.command),
                                    pack_folder(folder, limits))
        except (UploadError, ManifestError) as exc:
            raise UploadRefused(str(exc)) from None


class Submissions:
    """Checks, stores and queues uploaded versions. The checks that need no byte of the
    upload (:meth:`check_submitter`, :meth:`check_name`, :meth:`check_size`) come first, so
    that a front end refuses before it reads the body."""

    def __init__(self, repo: Repository, validator: VersionValidator | None) -> None:
        self.repo = repo
        self.validator = validator

    @property
    def max_upload_bytes(self) -> int:
        return self.repo.limits.max_upload_bytes

    @property
    def hosting(self) -> bool:
        return self.validator is not None

    def check_submitter(self, owner: OwnerInfo | None) -> None:
        """Raises unless this caller (None: the admin) may submit on this ladder."""
        if owner is not None and owner.suspended:
            raise OwnerSuspendedError(f"the owner {echo(owner.name)} is suspended: "
                                      f"{owner.suspended_reason}")
        if self.validator is None:
            raise NoHostingError("this ladder hosts no bots (it was started without hosting): "
                                 "register a remote bot instead")
        if reason := self.validator.unavailable:
            raise NoHostingError(f"this ladder cannot run hosted bots now ({reason}): "
                                 "register a remote bot instead")

    @staticmethod
    def check_name(name: str) -> None:
        if not is_bot_name(name):
            raise InvalidInputError(f"not a bot name: {echo(name)}")

    def check_size(self, size: int) -> None:
        """Raises once an upload is known to be larger than the ladder takes."""
        if size > self.max_upload_bytes:
            raise UploadTooLargeError(f"the upload is larger than this ladder takes "
                                      f"({self.max_upload_bytes} bytes)")

    async def submit(self, name: str, data: bytes, *, as_owner: str | None) -> BotVersionInfo:
        """Stores ``data`` as the bot's next version and queues its validation; called on the
        ladder's event loop (the disk and database work runs in threads)."""
        self.check_name(name)
        self.check_size(len(data))
        if not data:
            raise UploadRefused("the upload is empty")
        if self.validator is None:
            raise NoHostingError("this ladder hosts no bots")
        upload = await asyncio.to_thread(normalize_upload, data, self.max_upload_bytes)
        version = await asyncio.to_thread(
            lambda: self.repo.submit_version(name, as_owner=as_owner, archive=upload.archive,
                                             runtime=upload.runtime, command=upload.command))
        log.info("%s version %d uploaded (%d bytes); validating", name, version.version,
                 len(upload.archive))
        self.validator.submit(name, version.version)
        return version
