"""The operating system's limit on open files, which bounds how many bots a referee can hold.

Every bot connection is one socket, so one file descriptor; the referee also needs a few for
its listener, grpc's event machinery, the records it writes, its logs and its self-probe
(`FD_RESERVE`). Linux starts most processes with a soft limit of 1024 open files and a hard
limit far above; a referee that kept the soft one would refuse (or fail on) its ~1000th bot.
So the referee raises the soft limit to the hard one as it starts and reports what that
leaves room for.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

FD_RESERVE = 64
"""Descriptors kept for everything but bot connections (listener, epoll and wakeup fds,
records being written, logs, the liveness probe, a database)."""

_NR_OPEN = Path("/proc/sys/fs/nr_open")
_DARWIN_OPEN_MAX = 10240  # OPEN_MAX: what macOS accepts when the hard limit is "unlimited"


@dataclass(frozen=True, slots=True)
class FdLimit:
    """The open-file limit before and after the referee raised it."""

    before: int
    soft: int
    hard: int
    """-1 when unlimited."""
    reserve: int = FD_RESERVE
    problem: str = ""
    """Why the soft limit could not be raised to the hard one, if it could not."""

    @property
    def connections(self) -> int:
        """How many bot connections fit: the soft limit less the reserve."""
        return max(0, self.soft - self.reserve)

    def describe(self) -> str:
        hard = "unlimited" if self.hard < 0 else str(self.hard)
        if self.soft > self.before:
            change = f"raised from {self.before} to {self.soft} (hard limit {hard})"
        else:
            change = f"{self.soft} (hard limit {hard})"
        text = (f"open-file limit {change}: room for about {self.connections} bot connections "
                f"({self.reserve} descriptors kept for the referee itself)")
        return f"{text}; {self.problem}" if self.problem else text


def _ceiling(hard: int, infinity: int) -> int:
    """The most the soft limit may be set to when the hard limit is ``hard``."""
    if hard != infinity:
        return hard
    with contextlib.suppress(OSError, ValueError):
        return int(_NR_OPEN.read_text().strip())
    return _DARWIN_OPEN_MAX if sys.platform == "darwin" else 1 << 20


def raise_fd_limit(reserve: int = FD_RESERVE) -> FdLimit | None:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; None where there is no
    such limit (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    infinity = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = _ceiling(hard, infinity)
    problem = ""
    if soft != infinity and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
        except (OSError, ValueError) as exc:
            problem = f"could not raise it to {ceiling}: {exc}"
            if sys.platform == "darwin" and ceiling > _DARWIN_OPEN_MAX:
                with contextlib.suppress(OSError, ValueError):
                    resource.setrlimit(resource.RLIMIT_NOFILE, (_DARWIN_OPEN_MAX, hard))
    now, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def finite(value: int) -> int:
        return ceiling if value == infinity else value

    return FdLimit(before=finite(soft), soft=finite(now),
                   hard=-1 if hard == infinity else hard, reserve=reserve, problem=problem)
