"""Unpacking an uploaded bot (.zip or .tar.gz) as hostile input.

Everything is decided by what the bytes hold, never by what the archive claims: the format by its
magic bytes, sizes by counting what decompresses (header sizes are not trusted, neither for the
total nor for the ratio). Entries are read one at a time and written as they stream, so a bomb is
stopped at the limit, not after. The strict choices:

* links (symbolic or hard) are refused wherever they point: a bot folder never holds one;
* devices, fifos and sockets are refused;
* a path that is absolute, holds ``..``, a backslash or a NUL is refused (nothing is rewritten);
* the same path twice is refused;
* ``scout-bot.toml`` must be at the root or inside a single top-level folder (whose content then
  becomes the root, as zipping a folder produces);
* files get mode 0644, or 0755 when the archive gave them any executable bit; folders 0755; no
  setuid, setgid or sticky bit survives.

Nothing is written outside ``dest``, and on any refusal ``dest`` is removed.
"""

from __future__ import annotations

import gzip
import io
import os
import secrets
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from scout_arena.sandbox.errors import (
    ArchiveBomb,
    DuplicateEntry,
    LinkEntry,
    MalformedArchive,
    ManifestError,
    MissingManifest,
    MissingProgram,
    SpecialEntry,
    TooManyFiles,
    UnsafePath,
    UploadTooLarge,
)
from scout_arena.sandbox.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    Manifest,
    Runtime,
    parse_manifest,
    relative_program_path,
)

MiB = 1024 * 1024
CHUNK = 64 * 1024
#: The folder each bot keeps between runs is mounted here; an upload may not put a file there.
DATA_DIR = "data"
#: Below this many unpacked bytes a file's compression ratio is not judged.
RATIO_FLOOR = 1 * MiB
MAX_NAME_CHARS = 1024


@dataclass(frozen=True)
class UploadLimits:
    max_upload_bytes: int = 50 * MiB
    max_unpacked_bytes: int = 200 * MiB
    max_files: int = 5000
    #: Unpacked over compressed size allowed per file (.zip) or for the whole stream (.tar.gz),
    #: for anything larger than 1 MiB unpacked.
    max_ratio: int = 200


DEFAULT_UPLOAD_LIMITS = UploadLimits()


def archive_kind(data: bytes) -> str:
    """``"zip"`` or ``"tar.gz"`` by the magic bytes, or :class:`MalformedArchive`."""
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if data[:2] == b"\x1f\x8b":
        return "tar.gz"
    raise MalformedArchive("the upload is neither a .zip nor a .tar.gz (by its first bytes)")


def unpack_upload(data: bytes, dest: Path,
                  limits: UploadLimits = DEFAULT_UPLOAD_LIMITS) -> Manifest:
    """Unpack ``data`` into ``dest`` (created; must not exist or be empty) and return its manifest.

    Raises an :class:`UploadError` subclass naming the cause and the entry; ``dest`` is then
    removed.
    """
    if len(data) > limits.max_upload_bytes:
        raise UploadTooLarge(f"the upload is {len(data)} bytes, more than the limit of "
                             f"{limits.max_upload_bytes} bytes")
    kind = archive_kind(data)
    dest = Path(dest)
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise FileExistsError(f"{dest} exists and is not an empty folder")
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(0o755)
    try:
        writer = _Writer(dest, limits)
        if kind == "zip":
            _unpack_zip(data, writer)
        else:
            _unpack_tar(data, writer, limits)
        return _finish(dest)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def entry_path(name: str) -> PurePosixPath:
    """The relative path an entry called ``name`` may be written at, or :class:`UnsafePath`."""
    if "\x00" in name:
        raise UnsafePath(f"entry {name!r}: the name holds a NUL character")
    if "\\" in name:
        raise UnsafePath(f"entry {name!r}: backslashes are not allowed in names")
    if name.startswith("/") or (name[:1].isalpha() and name[1:3] == ":/"):
        raise UnsafePath(f"entry {name!r}: absolute paths are not allowed")
    if len(name) > MAX_NAME_CHARS:
        raise UnsafePath(f"entry {name[:64]!r}...: the name is longer than {MAX_NAME_CHARS}")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafePath(f"entry {name!r}: '..' would climb out of the bot's folder")
    if any(len(part.encode("utf-8", "surrogateescape")) > 255 for part in parts):
        raise UnsafePath(f"entry {name!r}: a name part is longer than 255 bytes")
    return PurePosixPath(*parts)


class _Writer:
    """Creates the entries inside ``dest``, counting files and bytes against the limits."""

    def __init__(self, dest: Path, limits: UploadLimits) -> None:
        self.dest = dest
        self.limits = limits
        self.entries = 0
        self.unpacked = 0
        self.files: set[PurePosixPath] = set()
        self.dirs: set[PurePosixPath] = {PurePosixPath()}

    def count(self, name: str) -> None:
        self.entries += 1
        if self.entries > self.limits.max_files:
            raise TooManyFiles(f"entry {name!r}: the upload holds more than "
                               f"{self.limits.max_files} entries")

    def add_dir(self, path: PurePosixPath, name: str) -> None:
        for ancestor in (*reversed(path.parents), path):
            if ancestor in self.dirs:
                continue
            if ancestor in self.files:
                raise DuplicateEntry(f"entry {name!r}: {ancestor} is both a file and a folder")
            (self.dest / ancestor).mkdir()
            (self.dest / ancestor).chmod(0o755)  # whatever the umask: the bot's uid reads it
            self.dirs.add(ancestor)

    def add_file(self, path: PurePosixPath, name: str, chunks: Iterator[bytes],
                 executable: bool, compressed: int | None) -> None:
        if path == PurePosixPath():
            raise UnsafePath(f"entry {name!r}: a file without a name")
        if path in self.files or path in self.dirs:
            raise DuplicateEntry(f"entry {name!r}: {path} appears twice")
        self.add_dir(path.parent, name)
        self.files.add(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        mode = 0o755 if executable else 0o644
        written = 0
        fd = os.open(self.dest / path, flags, mode)
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                written += len(chunk)
                self.unpacked += len(chunk)
                if self.unpacked > self.limits.max_unpacked_bytes:
                    raise ArchiveBomb(f"entry {name!r}: the upload unpacks to more than "
                                      f"{self.limits.max_unpacked_bytes} bytes")
                if (compressed is not None and written > RATIO_FLOOR
                        and written > self.limits.max_ratio * max(compressed, 1)):
                    raise ArchiveBomb(f"entry {name!r}: expands more than "
                                      f"{self.limits.max_ratio} times its compressed size")
                out.write(chunk)
        os.chmod(self.dest / path, mode)


def _read_chunks(source: IO[bytes], name: str) -> Iterator[bytes]:
    while True:
        try:
            chunk = source.read(CHUNK)
        except (OSError, EOFError, zlib.error, zipfile.BadZipFile, tarfile.TarError,
                NotImplementedError, RuntimeError) as error:
            raise MalformedArchive(f"entry {name!r} does not read: {error}") from None
        if not chunk:
            return
        yield chunk


def _unpack_zip(data: bytes, writer: _Writer) -> None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as error:
        raise MalformedArchive(f"the .zip does not read: {error}") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > writer.limits.max_files:
            raise TooManyFiles(f"the upload holds {len(infos)} entries, more than "
                               f"{writer.limits.max_files}")
        for info in infos:
            name = info.filename
            writer.count(name)
            path = entry_path(name)
            mode = info.external_attr >> 16 if info.create_system == 3 else 0
            kind = stat.S_IFMT(mode)
            if kind == stat.S_IFLNK:
                raise LinkEntry(f"entry {name!r} is a symbolic link; links are not allowed")
            if info.is_dir() or kind == stat.S_IFDIR:
                writer.add_dir(path, name)
                continue
            if kind not in (0, stat.S_IFREG):
                raise SpecialEntry(f"entry {name!r} is not a regular file or folder")
            if info.flag_bits & 0x1:
                raise MalformedArchive(f"entry {name!r} is encrypted")
            try:
                source = archive.open(info)
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError,
                    zlib.error, ValueError) as error:
                raise MalformedArchive(f"entry {name!r} does not read: {error}") from None
            with source:
                writer.add_file(path, name, _read_chunks(source, name),
                                bool(mode & 0o111), info.compress_size)


class _Budget(io.RawIOBase):
    """The decompressed tar stream, refused once it is larger than the unpacking allows (so even
    tar's own metadata, long names and pax headers, cannot make it read without end)."""

    def __init__(self, source: gzip.GzipFile, budget: int, compressed: int, ratio: int) -> None:
        self.source = source
        self.budget = budget
        self.compressed = compressed
        self.ratio = ratio
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            chunk = self.source.read(len(buffer))
        except (OSError, EOFError, zlib.error) as error:
            raise MalformedArchive(f"the .tar.gz does not decompress: {error}") from None
        self.read_bytes += len(chunk)
        if self.read_bytes > self.budget:
            raise ArchiveBomb(f"the upload unpacks to more than {self.budget} bytes")
        if self.read_bytes > RATIO_FLOOR and self.read_bytes > self.ratio * self.compressed:
            raise ArchiveBomb(f"the .tar.gz expands more than {self.ratio} times its size")
        buffer[:len(chunk)] = chunk
        return len(chunk)


def _unpack_tar(data: bytes, writer: _Writer, limits: UploadLimits) -> None:
    # Headers take 512 bytes (more with pax or long names) and files are padded to 512 bytes.
    budget = limits.max_unpacked_bytes + (limits.max_files + 2) * 2048
    stream = _Budget(gzip.GzipFile(fileobj=io.BytesIO(data)), budget, len(data),
                     limits.max_ratio)
    try:
        archive = tarfile.open(fileobj=io.BufferedReader(stream, CHUNK),  # noqa: SIM115
                               mode="r|")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise MalformedArchive(f"the .tar.gz does not read: {error}") from None
    with archive:
        for member in _members(archive):
            name = member.name
            writer.count(name)
            path = entry_path(name)
            if member.issym() or member.islnk():
                raise LinkEntry(f"entry {name!r} is a {'symbolic' if member.issym() else 'hard'}"
                                f" link to {member.linkname!r}; links are not allowed")
            if member.isdir():
                writer.add_dir(path, name)
                continue
            if member.issparse():
                raise MalformedArchive(f"entry {name!r} is a sparse file (not supported)")
            if not member.isreg():
                raise SpecialEntry(f"entry {name!r} is not a regular file or folder "
                                   "(device, fifo or other special entry)")
            source = archive.extractfile(member)
            if source is None:
                raise MalformedArchive(f"entry {name!r} has no content")
            writer.add_file(path, name, _read_chunks(source, name), bool(member.mode & 0o111),
                            None)


def _members(archive: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    iterator = iter(archive)
    while True:
        try:
            member = next(iterator)
        except StopIteration:
            return
        except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
            raise MalformedArchive(f"the .tar.gz does not read: {error}") from None
        yield member


def _finish(dest: Path) -> Manifest:
    """Find the manifest (flattening a single top-level folder), read it, check its program."""
    if not (dest / MANIFEST_NAME).is_file():
        children = list(dest.iterdir())
        if not (len(children) == 1 and children[0].is_dir()
                and (children[0] / MANIFEST_NAME).is_file()):
            raise MissingManifest(f"no {MANIFEST_NAME} at the root of the upload or inside its "
                                  "single top-level folder")
        _flatten(dest, children[0])
    manifest_file = dest / MANIFEST_NAME
    if manifest_file.stat().st_size > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{MANIFEST_NAME} is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = manifest_file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ManifestError(f"{MANIFEST_NAME} is not UTF-8 text") from None
    manifest = parse_manifest(text)
    _check_files(dest, manifest)
    data = dest / DATA_DIR
    if data.exists() and not data.is_dir():
        raise UnsafePath(f"entry {DATA_DIR!r}: the name is kept for the bot's data folder")
    data.mkdir(exist_ok=True)
    data.chmod(0o755)
    return manifest


def _flatten(dest: Path, top: Path) -> None:
    moved = dest / f".scout-unpack-{secrets.token_hex(8)}"
    top.rename(moved)
    for child in moved.iterdir():
        child.rename(dest / child.name)
    moved.rmdir()


def _check_files(dest: Path, manifest: Manifest) -> None:
    """The program (binary) or script (interpreted runtimes) the command names is in the upload;
    a binary program is made executable."""
    if manifest.runtime is Runtime.BINARY:
        program = dest / relative_program_path(manifest.program)
        if not program.is_file():
            raise MissingProgram(f"{MANIFEST_NAME}: the program {manifest.program!r} is not a "
                                 "file of the upload")
        program.chmod(0o755)
        return
    script = _script(manifest)
    if script is not None and not (dest / relative_program_path(script)).is_file():
        raise MissingProgram(f"{MANIFEST_NAME}: {script!r} is not a file of the upload")


def _script(manifest: Manifest) -> str | None:
    args = manifest.command[1:]
    if manifest.runtime is Runtime.JAVA:
        if "-jar" in args and args.index("-jar") + 1 < len(args):
            return args[args.index("-jar") + 1]
        return None
    suffixes: dict[Runtime, tuple[str, ...]] = {Runtime.PYTHON: (".py",),
                                                 Runtime.NODE: (".js", ".mjs", ".cjs")}
    if args and not args[0].startswith("-") and args[0].endswith(suffixes[manifest.runtime]):
        return args[0]
    return None

