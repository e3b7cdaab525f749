"""What the watchdog measures: a sandbox's processes (from its own procfs) and its folders.

Called in a worker thread, never on the event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    threads: int
    rss_bytes: int
    #: User and system time, its own and that of the children it reaped.
    cpu_seconds: float


@dataclass(frozen=True)
class TreeUsage:
    processes: int
    threads: int
    #: Resident memory the bot allocated (see :func:`private_bytes`).
    rss_bytes: int
    cpu_seconds: float


def read_stat(folder: str) -> ProcStat | None:
    """The ``stat`` file of the process ``folder`` (a /proc/PID path) holds."""
    try:
        with open(f"{folder}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return ProcStat(int(text.split(b" ", 1)[0]), int(fields[1]), int(fields[17]),
                    int(fields[21]) * PAGE_SIZE, ticks / CLOCK_TICKS)


def sandbox_procfs(init: str) -> str | None:
    """The sandbox's own procfs as its init sees it, or None while the init's root is still the
    host's (bwrap builds the sandbox's root first, then moves into it): before that move, the
    /proc under the init's root lists every process of the host. It is the sandbox's when its
    pid 1 shares the init's PID namespace, one that is not ours."""
    proc = f"{init}/root/proc"
    try:
        namespace = os.readlink(f"{init}/ns/pid")
        if namespace == os.readlink("/proc/self/ns/pid"):
            return None
        return proc if os.readlink(f"{proc}/1/ns/pid") == namespace else None
    except OSError:
        return None


def sandbox_usage(init: str) -> TreeUsage | None:
    """What the processes of one sandbox use, read from the sandbox's own procfs through the
    root of its init (``init``: the init's /proc folder). That procfs lists exactly the
    sandbox's processes (PID namespaces nest, so even a process in a namespace of the bot's own
    shows there), in a few reads however busy the host is. bwrap's init (pid 1 inside) is not
    the bot's, except for the CPU of the orphans it reaped, which is. None until the sandbox
    stands (see :func:`sandbox_procfs`)."""
    proc = sandbox_procfs(init)
    if proc is None:
        return None
    try:
        names = [name for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return None
    processes = threads = memory = 0
    cpu = 0.0
    for name in names:
        stat = read_stat(f"{proc}/{name}")
        if stat is None:
            continue
        cpu += stat.cpu_seconds
        if name != "1":
            processes += 1
            threads += stat.threads
            memory += private_bytes(f"{proc}/{name}")
    return TreeUsage(processes, threads, memory, cpu)


def private_bytes(folder: str) -> int:
    """Resident anonymous and shared memory (RssAnon + RssShmem): what the process allocated,
    shared mappings included (RLIMIT_DATA does not count those), library and file pages not.
    Pages a fork still shares with its parent count in both, which errs on the side of the
    limit."""
    try:
        with open(f"{folder}/status", "rb") as file:
            text = file.read()
    except OSError:
        return 0
    total = 0
    for key in (b"RssAnon:", b"RssShmem:"):
        start = text.find(key)
        if start >= 0:
            total += int(text[start + len(key):text.index(b"kB", start)]) * 1024
    return total


def proportional_memory(init: str) -> int:
    """The sandbox's allocated memory without counting a page twice: the proportional share
    (PSS) of anonymous and shared memory of each process, summed. Exact for forked workers that
    share their parent's pages, but the kernel walks every page table to tell it (tens of ms for
    a few hundred MB), so the watchdog asks only when the cheap sum is over the limit."""
    proc = sandbox_procfs(init)
    if proc is None:
        return 0
    total = 0
    try:
        names = [name for name in os.listdir(proc) if name.isdigit() and name != "1"]
    except OSError:
        return 0
    for name in names:
        try:
            with open(f"{proc}/{name}/smaps_rollup", "rb") as file:
                text = file.read()
        except OSError:
            continue
        for key in (b"Pss_Anon:", b"Pss_Shmem:"):
            start = text.find(key)
            if start >= 0:
                total += int(text[start + len(key):text.index(b"kB", start)]) * 1024
    return total


def folder_usage(folder: Path, stop_after: int) -> tuple[int, int]:
    """Apparent bytes and entries below ``folder`` (links not followed); stops counting entries
    past ``stop_after`` so that a folder of millions of files costs one bounded scan."""
    total = 0
    entries = 0
    stack = [str(folder)]
    while stack and entries <= stop_after:
        try:
            scanner = os.scandir(stack.pop())
        except OSError:
            continue
        with scanner:
            for entry in scanner:
                entries += 1
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
    return total, entries


def tmpfs_used(init: str) -> int | None:
    """Bytes used on the sandbox's private /tmp, seen through its init's root (None until the
    sandbox stands)."""
    if sandbox_procfs(init) is None:
        return None
    try:
        status = os.statvfs(f"{init}/root/tmp")
    except OSError:
        return None
    return (status.f_blocks - status.f_bfree) * status.f_frsize
