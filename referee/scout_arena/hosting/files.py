"""A hosted bot's files on the host: its code (cached by the archive's SHA-256) and its
``data/`` folder, which travels as a size-capped tar.gz between its matches.

The data folder is written by the bot, so its archive is hostile input both ways: packing
follows no link and stops at the cap; unpacking takes regular files and directories only,
each inside the folder, up to the cap.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from ..sandbox import Manifest, Runtime, UploadError, UploadLimits, unpack_upload
from ..sandbox import pack_data as sandbox_pack_data

DEFAULT_DATA_LIMIT_BYTES = 16 * 2**20
"""The most a bot's data folder may hold (unpacked) for it to be kept between matches."""
MAX_DATA_FILES = 2000


class DataFolderError(ValueError):
    """A data folder that cannot be kept (too large, too many files, unreadable)."""


def pack_data(folder: Path, limit_bytes: int = DEFAULT_DATA_LIMIT_BYTES) -> bytes:
    """The folder as tar.gz (`scout_arena.sandbox.pack_data`: regular files and folders only,
    no link followed); b"" when it is empty. Raises `DataFolderError` past ``limit_bytes``."""
    if not folder.is_dir() or not any(folder.iterdir()):
        return b""
    try:
        return sandbox_pack_data(folder, limit_bytes)
    except UploadError as exc:
        raise DataFolderError(str(exc)) from None


def unpack_data(data: bytes, folder: Path, limit_bytes: int = DEFAULT_DATA_LIMIT_BYTES) -> None:
    """Fill the (new, empty) ``folder`` from a tar.gz made by `pack_data`; b"": empty. Raises
    `DataFolderError` for anything but regular files and directories inside the folder, or
    past the cap."""
    folder.mkdir(parents=True, exist_ok=True)
    if not data:
        return
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for count, member in enumerate(tar, 1):
                if count > MAX_DATA_FILES:
                    raise DataFolderError(f"more than {MAX_DATA_FILES} entries")
                parts = PurePosixPath(member.name).parts
                if member.name.startswith("/") or ".." in parts or not parts:
                    raise DataFolderError(f"entry {member.name!r} points outside the folder")
                target = folder.joinpath(*parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if not member.isfile():
                    raise DataFolderError(f"entry {member.name!r} is not a regular file")
                total += member.size
                if total > limit_bytes:
                    raise DataFolderError(f"more than {limit_bytes // 2**20} MiB")
                source = tar.extractfile(member)
                assert source is not None
                target.parent.mkdir(parents=True, exist_ok=True)
                with target.open("wb") as handle:
                    shutil.copyfileobj(source, handle)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataFolderError(f"the data archive cannot be read: {exc}") from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class CodeCache:
    """Unpacked versions by their archive's SHA-256: each is unpacked (by
    `scout_arena.sandbox.unpack_upload`, which refuses hostile archives) once per host."""

    def __init__(self, root: Path, limits: UploadLimits | None = None) -> None:
        self.root = root
        self.limits = limits or UploadLimits()

    def get(self, sha256: str) -> tuple[Path, Manifest] | None:
        """The code folder and manifest of a cached version, or None."""
        folder = self.root / sha256
        try:
            saved = json.loads((self.root / f"{sha256}.json").read_text(encoding="utf-8"))
            manifest = Manifest(Runtime(saved["runtime"]), tuple(saved["command"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return (folder, manifest) if folder.is_dir() else None

    def put(self, sha256: str, archive: bytes) -> tuple[Path, Manifest]:
        """Unpack ``archive`` (checked against ``sha256``) into the cache."""
        if sha256_hex(archive) != sha256:
            raise DataFolderError("the bot's archive does not match its SHA-256")
        cached = self.get(sha256)
        if cached is not None:
            return cached
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=self.root))
        try:
            manifest = unpack_upload(archive, staging / "code", self.limits)
            (staging / "code").rename(self.root / sha256)
            (staging / "manifest").write_text(json.dumps(
                {"runtime": manifest.runtime.value, "command": list(manifest.command)}),
                encoding="utf-8")
            (staging / "manifest").rename(self.root / f"{sha256}.json")
        except OSError:
            if self.get(sha256) is None:  # not a race with another unpack of the same code
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self.root / sha256, manifest
