"""A child process that dies with its parent: the parent's death is a signal to the child.

A supervisor killed with SIGKILL runs no cleanup, so whatever children it started would carry
on unsupervised (a ladder's local nodes re-attaching to the next ladder, a worker's bots
reconnecting forever). Two ties, each enough on its own:

- Linux ``prctl(PR_SET_PDEATHSIG)``: the kernel signals the child when the thread that
  started it ends (`parent_death_preexec`, before exec, or `hold_lifeline`, after it, for a
  child that checks it was not orphaned meanwhile);
- a pipe (`LIFELINE_ENV` naming the child's read end, its stdin by default): the parent never
  writes to it and the kernel closes its end when the parent dies, so the child reads EOF
  (`hold_lifeline`); portable, and it also holds where the signal was reset.

A child that handles the signal (a graceful stop) but does not end within `ORPHAN_EXIT_S`
writes its threads' stacks to stderr and exits with `ORPHAN_EXIT_STATUS`: a hang in a
shutdown must not leave it running unsupervised.

Standard library only, like the rest of the sandbox package.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping

LIFELINE_ENV = "SCOUT_LIFELINE"
"""``<parent pid>:<fd>``: the parent's pid and the child's read end of the lifeline pipe."""
PR_SET_PDEATHSIG = 1
ORPHAN_EXIT_S = 20.0
ORPHAN_EXIT_STATUS = 70


def _prctl() -> Callable[..., int] | None:
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def parent_death_preexec(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A pre-exec function making the child get ``sig`` when its parent dies; None where
    prctl is not available. libc is looked up here, in the parent: the child only calls it."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def set_signal() -> None:
        prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # the parent died before the signal was set
            os._exit(1)

    return set_signal


def lifeline_env(read_fd: int = 0) -> dict[str, str]:
    """The environment entry telling a child started now to `hold_lifeline` on ``read_fd``."""
    return {LIFELINE_ENV: f"{os.getpid()}:{read_fd}"}


def hold_lifeline(environ: Mapping[str, str] | None = None,
                  sig: int = signal.SIGTERM, exit_after_s: float = ORPHAN_EXIT_S) -> bool:
    """In a child started with `lifeline_env`: get ``sig`` when the parent dies (at once if
    it already has). The pipe is watched by a daemon thread that sends ``sig`` to this process
    on EOF, so the child stops the way it does on ``kill``, and that ends it ``exit_after_s``
    later if it has not stopped. False when there is no lifeline."""
    spec = (os.environ if environ is None else environ).get(LIFELINE_ENV, "")
    if environ is None:
        os.environ.pop(LIFELINE_ENV, None)  # not for this child's own children
    parent_text, _, fd_text = spec.partition(":")
    if not parent_text.isdigit() or not fd_text.isdigit():
        return False
    parent, fd = int(parent_text), int(fd_text)
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)
    threading.Thread(target=_watch_pipe, args=(fd, sig, exit_after_s), name="lifeline",
                     daemon=True).start()
    return True


def _watch_pipe(fd: int, sig: int, exit_after_s: float) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), sig)
    time.sleep(exit_after_s)
    with contextlib.suppress(Exception):
        sys.stderr.write(f"pid {os.getpid()}: the parent is gone and this process did not stop "
                         f"within {exit_after_s:g} s of {signal.Signals(sig).name}; its threads "
                         f"were:\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(all_threads=True)
    os._exit(ORPHAN_EXIT_STATUS)
