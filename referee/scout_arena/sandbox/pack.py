"""The client side of an upload: a bot folder packed as a deterministic .tar.gz.

The same folder always gives the same bytes (sorted entries, no times, owners or user names,
modes 0644/0755), so an author can compare what they submit. ``data/`` at the top (the bot's
persistent folder lives on the ladder), ``__pycache__`` and ``.git`` anywhere are left out; links
and special files are refused here already, as the ladder would refuse them.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from pathlib import Path

from scout_arena.sandbox.archive import DATA_DIR, DEFAULT_UPLOAD_LIMITS, UploadLimits, archive_kind
from scout_arena.sandbox.errors import (
    LinkEntry,
    MissingManifest,
    SpecialEntry,
    TooManyFiles,
    UploadError,
    UploadTooLarge,
)
from scout_arena.sandbox.manifest import MANIFEST_NAME, parse_manifest

SKIPPED_ANYWHERE = frozenset({"__pycache__", ".git"})


def pack_folder(folder: Path, limits: UploadLimits = DEFAULT_UPLOAD_LIMITS) -> bytes:
    """``folder`` as the .tar.gz bytes to upload; :class:`UploadError` for what the ladder would
    refuse (no or bad manifest, links, special files, too many files or bytes)."""
    folder = Path(folder)
    manifest = folder / MANIFEST_NAME
    if not manifest.is_file():
        raise MissingManifest(f"{folder} has no {MANIFEST_NAME}")
    parse_manifest(manifest.read_text(encoding="utf-8"))
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
        total = 0
        for count, (relative, path) in enumerate(_entries(folder), start=1):
            if count > limits.max_files:
                raise TooManyFiles(f"{folder} holds more than {limits.max_files} files and "
                                   "folders")
            info = _info(relative, path)
            total += info.size
            if total > limits.max_unpacked_bytes:
                raise UploadTooLarge(f"{folder} holds more than {limits.max_unpacked_bytes} "
                                     "bytes")
            if info.isdir():
                archive.addfile(info)
            else:
                with path.open("rb") as source:
                    archive.addfile(info, source)
    data = buffer.getvalue()
    if len(data) > limits.max_upload_bytes:
        raise UploadTooLarge(f"{folder} packs to {len(data)} bytes, more than the limit of "
                             f"{limits.max_upload_bytes} bytes")
    return data


def _entries(folder: Path) -> list[tuple[str, Path]]:
    entries: list[tuple[str, Path]] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        top = here == folder
        dirs[:] = sorted(name for name in dirs
                         if name not in SKIPPED_ANYWHERE and not (top and name == DATA_DIR))
        for name in (*dirs, *sorted(files)):
            path = here / name
            entries.append((path.relative_to(folder).as_posix(), path))
    return sorted(entries)


def _info(relative: str, path: Path) -> tarfile.TarInfo:
    status = path.lstat()
    if stat.S_ISLNK(status.st_mode):
        raise LinkEntry(f"{relative} is a symbolic link; uploads hold no links (copy the file)")
    info = tarfile.TarInfo(relative)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if stat.S_ISDIR(status.st_mode):
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    elif stat.S_ISREG(status.st_mode):
        info.size = status.st_size
        info.mode = 0o755 if status.st_mode & 0o111 else 0o644
    else:
        raise SpecialEntry(f"{relative} is not a regular file or folder")
    return info


def load_upload(path: Path, limits: UploadLimits = DEFAULT_UPLOAD_LIMITS) -> bytes:
    """The bytes to upload for ``path``: a folder is packed, a .zip or .tar.gz read as it is
    (recognised by its content, whatever its name)."""
    path = Path(path)
    if path.is_dir():
        return pack_folder(path, limits)
    if not path.is_file():
        raise UploadError(f"{path} is neither a folder nor a file")
    size = path.stat().st_size
    if size > limits.max_upload_bytes:
        raise UploadTooLarge(f"{path} is {size} bytes, more than the limit of "
                             f"{limits.max_upload_bytes} bytes")
    data = path.read_bytes()
    archive_kind(data)
    return data


def pack_data(folder: Path, max_bytes: int) -> bytes:
    """A bot's data folder as a deterministic .tar.gz for its owner to download.

    The folder is the bot's to write, even while this runs: only regular files and folders are
    taken, links and special files it made are left out and never followed (the walk holds
    folder descriptors and opens with O_NOFOLLOW, so a folder swapped for a link mid-walk
    leads nowhere). More than ``max_bytes`` of files is :class:`UploadTooLarge`.
    """
    buffer = io.BytesIO()
    total = 0
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for root, dirs, files, root_fd in os.fwalk(folder, follow_symlinks=False):
            dirs[:] = sorted(name for name in dirs if _is_dir(name, root_fd))
            relative_root = os.path.relpath(root, folder)
            for name in dirs:
                archive.addfile(_data_info(os.path.join(relative_root, name), 0, dir=True))
            for name in sorted(files):
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                                 dir_fd=root_fd)
                except OSError:
                    continue
                with os.fdopen(fd, "rb") as source:
                    status = os.fstat(source.fileno())
                    if not stat.S_ISREG(status.st_mode):
                        continue
                    total += status.st_size
                    if total > max_bytes:
                        raise UploadTooLarge(f"{folder} holds more than {max_bytes} bytes")
                    info = _data_info(os.path.join(relative_root, name), status.st_size)
                    archive.addfile(info, source)
    return buffer.getvalue()


def _is_dir(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _data_info(relative: str, size: int, dir: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(os.path.normpath(relative))
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.DIRTYPE if dir else tarfile.REGTYPE
    info.mode = 0o755 if dir else 0o644
    info.size = size
    return info
