"""Which host uid a bot runs under when the host runs as root.

RLIMIT_NPROC is not enforced for uid 0 and counts per uid, so each running bot gets a uid of its
own from a fixed range (not a real account: no name, no home). A uid is leased with an exclusive
lock on a file named after it, so that several referee processes on one host (``ladder serve
--nodes N``) never hand the same uid to two bots at once; the lock goes with the lease's file
descriptor, even when its process dies. A uid that still has processes (a finished bot's,
still being torn down) is passed over, as they would count against the next bot's limit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

UID_BASE = 1_600_000_000
UID_COUNT = 4096


def lock_folder() -> Path:
    for candidate in (Path("/run/scout-arena/sandbox-uids"),
                      Path(tempfile.gettempdir()) / "scout-arena-sandbox-uids"):
        try:
            candidate.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(candidate, os.W_OK) and not candidate.is_symlink():
            return candidate
    raise OSError("no writable folder for the sandbox uid locks")


class UidLease:
    """A uid held until :meth:`release` (or the process's end)."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def uids_with_processes() -> set[int]:
    """The uids that own a process now (zombies included: they still count for RLIMIT_NPROC)."""
    owners: set[int] = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                owners.add(entry.stat().st_uid)
    return owners


def lease_uid(base: int = UID_BASE, count: int = UID_COUNT) -> UidLease:
    folder = lock_folder()
    busy = uids_with_processes()
    for uid in range(base, base + count):
        if uid in busy:
            continue
        fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidLease(uid, fd)
    raise OSError(f"all {count} sandbox uids from {base} are in use")


def chown_tree(folder: Path, uid: int) -> None:
    """Give ``folder`` and everything below it to ``uid`` (links themselves, never followed).

    The folder is a bot's to write: the walk holds folder descriptors (``fwalk``), so a folder
    swapped for a link to the host's files while this runs is not entered.
    """
    os.chown(folder, uid, uid, follow_symlinks=False)
    for _root, dirs, files, root_fd in os.fwalk(folder, follow_symlinks=False):
        for name in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                os.chown(name, uid, uid, dir_fd=root_fd, follow_symlinks=False)
