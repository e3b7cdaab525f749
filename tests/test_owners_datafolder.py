"""A hosted bot's data folder is hostile (its bot wrote it): the owner's download packs only its
files and folders, never what a link points at, and the CLI writes a downloaded archive only
inside the folder it was given (issue 27)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from scout_arena.sandbox import UploadError
from scout_ladder.datafolder import DataTooLargeError, pack_data_folder, unpack_data_archive


def names(archive: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return sorted(member.name for member in tar)


def test_the_download_holds_files_and_folders_never_what_links_point_at(tmp_path: Path) -> None:
    secret = tmp_path / "ladder.db"
    secret.write_text("the database")
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "model.bin").write_bytes(b"weights")
    (data / "sub" / "notes.txt").write_text("notes")
    (data / "link-to-db").symlink_to(secret)
    (data / "link-to-root").symlink_to("/")
    os.mkfifo(data / "fifo")
    assert names(pack_data_folder(data)) == ["model.bin", "sub", "sub/notes.txt"]
    assert names(pack_data_folder(tmp_path / "missing")) == []


def test_a_data_folder_past_the_limit_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 2000)
    with pytest.raises(DataTooLargeError):
        pack_data_folder(tmp_path, limit=1000)


def tar_gz(entries: list[tarfile.TarInfo], payload: bytes = b"x") -> io.BytesIO:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for entry in entries:
            if entry.isfile():
                entry.size = len(payload)
                tar.addfile(entry, io.BytesIO(payload))
            else:
                tar.addfile(entry)
    out.seek(0)
    return out


def link(name: str, target: str) -> tarfile.TarInfo:
    entry = tarfile.TarInfo(name)
    entry.type = tarfile.SYMTYPE
    entry.linkname = target
    return entry


@pytest.mark.parametrize("entry", [tarfile.TarInfo("../escape"), tarfile.TarInfo("/abs/x"),
                                   link("ln", "/etc/passwd")], ids=["dotdot", "absolute", "link"])
def test_the_cli_writes_nothing_outside_the_folder(tmp_path: Path, entry: tarfile.TarInfo) -> None:
    dest = tmp_path / "out" / "data"
    with pytest.raises(UploadError):
        unpack_data_archive(tar_gz([tarfile.TarInfo("fine.txt"), entry]), dest)
    assert not (tmp_path / "out" / "escape").exists() and not Path("/abs/x").exists()
    assert sorted(p.name for p in dest.rglob("*")) in ([], ["fine.txt"])


def test_a_good_archive_is_written_whole(tmp_path: Path) -> None:
    folder = tarfile.TarInfo("sub")
    folder.type = tarfile.DIRTYPE
    archive = tar_gz([folder, tarfile.TarInfo("sub/a.txt"), tarfile.TarInfo("b.txt")], b"hi")
    assert unpack_data_archive(archive, tmp_path / "d") == 2
    assert (tmp_path / "d" / "sub" / "a.txt").read_bytes() == b"hi"
