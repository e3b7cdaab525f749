"""A hosted bot's data folder as a .tar.gz: packed by the ladder for its owner's download, and
written back by the owner's CLI.

The folder is written by the bot, so it is hostile input: the sandbox package's ``pack_data``
takes only its regular files and folders, never following a link. The archive is hostile to
the CLI in turn (a ladder could be anyone's): it is written with the sandbox's name checks.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import IO

MiB = 1024 * 1024
DATA_DOWNLOAD_LIMIT = 256 * MiB
"""Most file bytes a download packs (the sandbox caps a data folder far below this)."""


class DataTooLargeError(Exception):
    """The data folder holds more than the download takes."""


def pack_data_folder(folder: Path, limit: int = DATA_DOWNLOAD_LIMIT) -> bytes:
    """The folder's directories and regular files as a .tar.gz (names relative to it); an
    empty archive when the folder does not exist. :class:`DataTooLargeError` past ``limit``
    file bytes."""
    from scout_arena.sandbox import UploadTooLarge, pack_data

    if not folder.is_dir() or folder.is_symlink():  # no run has made it yet
        with tarfile.open(fileobj=(empty := io.BytesIO()), mode="w:gz"):
            pass
        return empty.getvalue()
    try:
        return pack_data(folder, limit)
    except UploadTooLarge as exc:
        raise DataTooLargeError(str(exc)) from None


def unpack_data_archive(archive: IO[bytes], dest: Path, *, max_bytes: int = DATA_DOWNLOAD_LIMIT,
                        max_files: int = 100_000) -> int:
    """Writes a downloaded data folder (.tar.gz) into ``dest`` (created; must be missing or
    empty) with the sandbox package's name checks (``entry_path``: no absolute paths, no
    ``..``, no NULs), directories and regular files only, nothing written outside ``dest``
    and within the limits; returns the number of files. Raises ``UploadError`` subclasses
    (the sandbox's) for what it refuses."""
    from scout_arena.sandbox.archive import entry_path
    from scout_arena.sandbox.errors import (
        MalformedArchive,
        SpecialEntry,
        TooManyFiles,
        UploadTooLarge,
    )

    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise FileExistsError(f"{dest} exists and is not an empty folder")
    dest.mkdir(parents=True, exist_ok=True)
    files = total = 0
    try:
        with tarfile.open(fileobj=archive, mode="r:gz") as tar:
            for member in tar:
                relative = entry_path(member.name)
                if not relative.parts:
                    continue
                target = dest.joinpath(*relative.parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if not member.isfile():
                    raise SpecialEntry(f"entry {member.name!r} is not a file or folder")
                files += 1
                total += member.size
                if files > max_files:
                    raise TooManyFiles(f"the data folder holds more than {max_files} files")
                if total > max_bytes:
                    raise UploadTooLarge(f"the data folder holds more than {max_bytes} bytes")
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as out:
                    while block := source.read(MiB):
                        out.write(block)
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, FileExistsError):
            raise MalformedArchive(f"the data archive names a file twice: {exc}") from None
        if isinstance(exc, tarfile.TarError | EOFError):
            raise MalformedArchive(f"the data archive does not read: {exc}") from None
        raise
    return files
