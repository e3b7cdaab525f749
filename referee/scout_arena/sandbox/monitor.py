"""What the watchdog measures: a bot's process tree (from /proc) and its folders' sizes.

The process table is read once per tick for every bot of a :class:`ProcessTable` owner (a
``Sandbox``), in a worker thread; a bot's tree is every process below its ``bwrap``.
"""

from __future__ import annotations

import asyncio
import os
import time
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
    #: Private resident memory (see :func:`private_bytes`).
    rss_bytes: int
    cpu_seconds: float


def read_stat(pid: int) -> ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return ProcStat(pid, int(fields[1]), int(fields[17]), int(fields[21]) * PAGE_SIZE,
                    ticks / CLOCK_TICKS)


def scan_processes() -> dict[int, ProcStat]:
    table: dict[int, ProcStat] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None:
                table[stat.pid] = stat
    return table


def tree_usage(table: dict[int, ProcStat], root: int) -> TreeUsage:
    """The processes strictly below ``root`` (bwrap's own memory and CPU are the host's)."""
    children: dict[int, list[int]] = {}
    for stat in table.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    below: list[ProcStat] = []
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        below.append(table[pid])
        stack.extend(children.get(pid, ()))
    return TreeUsage(len(below), sum(stat.threads for stat in below),
                     sum(private_bytes(stat) for stat in below),
                     sum(stat.cpu_seconds for stat in below))


def private_bytes(stat: ProcStat) -> int:
    """Resident memory that is not file-backed or shared memory (RssAnon): what the process
    itself allocated. Pages a fork still shares with its parent count in both, which errs on the
    side of the limit."""
    try:
        with open(f"/proc/{stat.pid}/statm", "rb") as file:
            fields = file.read().split()
    except OSError:
        return 0
    return max(int(fields[1]) - int(fields[2]), 0) * PAGE_SIZE


def children_of(table: dict[int, ProcStat], parent: int) -> list[int]:
    return [stat.pid for stat in table.values() if stat.ppid == parent]


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


def tmpfs_used(init_pid: int) -> int | None:
    """Bytes used on the sandbox's private /tmp, seen through its init's root."""
    try:
        status = os.statvfs(f"/proc/{init_pid}/root/tmp")
    except OSError:
        return None
    return (status.f_blocks - status.f_bfree) * status.f_frsize


class ProcessTable:
    """One /proc scan shared by every watchdog of a tick."""

    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._table: dict[int, ProcStat] = {}
        self._taken = 0.0
        self._lock = asyncio.Lock()

    async def snapshot(self) -> dict[int, ProcStat]:
        async with self._lock:
            if time.monotonic() - self._taken > self.max_age_s:
                self._table = await asyncio.to_thread(scan_processes)
                self._taken = time.monotonic()
            return self._table
