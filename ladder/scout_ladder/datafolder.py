"""A hosted bot's data folder as a .tar.gz: packed by the ladder for its owner's download.

The folder is written by the bot, so it is hostile input: it is walked with ``os.fwalk``
(directory file descriptors, symbolic links never followed, so a link swapped in meanwhile
cannot lead out of it) and only directories and regular files go into the archive (no links,
devices or FIFOs). The archive is built in a spooled temporary file, never whole in memory.
"""

from __future__ import annotations

import os
import stat
import tarfile
import tempfile
from pathlib import Path
from typing import IO

MiB = 1024 * 1024
DATA_DOWNLOAD_LIMIT = 256 * MiB
"""Most file bytes a download packs (the sandbox caps a data folder far below this)."""


class DataTooLargeError(Exception):
    """The data folder holds more than the download takes."""


def _add_file(archive: tarfile.TarFile, name: str, fd: int) -> int:
    info = os.fstat(fd)
    entry = tarfile.TarInfo(name)
    entry.size = info.st_size
    entry.mtime = int(info.st_mtime)
    entry.mode = 0o644
    with os.fdopen(os.dup(fd), "rb") as source:
        archive.addfile(entry, source)
    return info.st_size


def pack_data_folder(folder: Path, limit: int = DATA_DOWNLOAD_LIMIT) -> IO[bytes]:
    """The folder's directories and regular files as a .tar.gz (names relative to it), in a
    temporary file positioned at its start; an empty archive when the folder does not exist.
    Raises :class:`DataTooLargeError` past ``limit`` file bytes."""
    out = tempfile.SpooledTemporaryFile(max_size=4 * MiB)  # noqa: SIM115 - returned open
    try:
        with tarfile.open(fileobj=out, mode="w:gz") as archive:
            if folder.is_dir() and not folder.is_symlink():
                _pack(archive, folder, limit)
        out.seek(0)
    except BaseException:
        out.close()
        raise
    return out


def _pack(archive: tarfile.TarFile, folder: Path, limit: int) -> None:
    total = 0
    for top, dirs, files, top_fd in os.fwalk(folder, follow_symlinks=False):
        relative = os.path.relpath(top, folder)
        prefix = "" if relative == "." else relative + "/"
        for name in sorted(dirs):
            entry = tarfile.TarInfo(prefix + name)
            entry.type = tarfile.DIRTYPE
            entry.mode = 0o755
            archive.addfile(entry)
        dirs.sort()
        for name in sorted(files):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=top_fd)
            except OSError:
                continue  # a link (O_NOFOLLOW refuses it), or gone meanwhile
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                total += _add_file(archive, prefix + name, fd)
            finally:
                os.close(fd)
            if total > limit:
                raise DataTooLargeError(f"the data folder holds more than {limit} bytes")
