"""A running hosted bot: its output read through a pipe (the last 64 KiB kept), a watchdog on
its process tree and folders, and the words that say why it ended."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from scout_arena.sandbox.identity import UidLease
from scout_arena.sandbox.limits import OUTPUT_TAIL_BYTES, MiB, SandboxLimits, size_text
from scout_arena.sandbox.monitor import (
    folder_usage,
    proportional_memory,
    read_stat,
    sandbox_procfs,
    sandbox_usage,
    tmpfs_used,
)

#: How often the watchdog measures the process tree; the folders every DISK_EVERY ticks.
TICK_S = 0.2
DISK_EVERY = 3
STOPPED = "stopped after its match"
#: How long a kill waits for bwrap to name the sandbox's init before it kills bwrap alone; and
#: how long the pipe may outlive a killed sandbox before it is closed and the leak is logged.
INIT_WAIT_S = 2.0
PIPE_GRACE_S = 5.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    exit_code: int | None
    signal: int | None
    reason: str
    output_tail: str
    #: As the watchdog last measured them (every 0.2 s while the bot ran): the CPU time of the
    #: whole sandbox and the peak of its resident memory.
    cpu_seconds: float = 0.0
    peak_memory_bytes: int = 0


class HostedProcess:
    """A running hosted bot: its outcome, its output, and the means to stop it."""

    def __init__(self, limits: SandboxLimits, process: asyncio.subprocess.Process, info_fd: int,
                 lease: UidLease | None, data_dir: Path) -> None:
        self.limits = limits
        self.pid = process.pid
        self._process = process
        self._lease = lease
        self._data_dir = data_dir
        self._tail = bytearray()
        self._output = 0
        self._reason: str | None = None
        #: The sandbox init's /proc folder, through a descriptor held open: once the init is
        #: gone, nothing resolves through it (its pid may be reused, the descriptor is not).
        self._init: str | None = None
        self._init_fd: int | None = None
        #: Held while a worker thread reads through ``_init``, so that it is never closed under
        #: one (a reused descriptor number would lead elsewhere).
        self._init_users = asyncio.Lock()
        self._ended = asyncio.Event()
        #: Set once bwrap has said (or can no longer say) which process is the sandbox's init.
        self._init_known = False
        self._kill_wanted = False
        self._cpu_seconds = 0.0
        self._peak_memory = 0
        self._reader = asyncio.create_task(self._read_output())
        self._watchdog = asyncio.create_task(self._watch(info_fd))
        self._done = asyncio.create_task(self._finish())

    async def wait(self) -> RunOutcome:
        return await asyncio.shield(self._done)

    async def stop(self, grace_s: float = 2.0) -> RunOutcome:
        """SIGTERM to the bot's processes, SIGKILL to the sandbox after ``grace_s``."""
        if self._done.done():
            return self._done.result()
        if self._reason is None:
            self._reason = STOPPED
        await self._signal_bot(signal.SIGTERM)
        try:
            return await asyncio.wait_for(asyncio.shield(self._done), grace_s)
        except TimeoutError:
            self._kill(STOPPED)
        try:
            return await asyncio.wait_for(asyncio.shield(self._done), INIT_WAIT_S + PIPE_GRACE_S)
        except TimeoutError:
            log.error("sandbox %d: killed, yet its output pipe is still open after %.0f s; "
                      "closing it (a process of the sandbox may have escaped the kill)",
                      self.pid, INIT_WAIT_S + PIPE_GRACE_S)
            self._close_pipes()
            return await asyncio.shield(self._done)

    def output_tail(self) -> str:
        return self._tail.decode("utf-8", "replace")

    def _kill(self, reason: str) -> None:
        """SIGKILL to the sandbox's init (which ends every process in its PID namespace), then
        to bwrap. bwrap is never killed before it has named the init: its child sets its own
        parent-death signal a moment after it is cloned, and one orphaned in that moment would
        run on with our pipe."""
        if self._reason is None:
            self._reason = reason
        first = not self._kill_wanted
        self._kill_wanted = True
        if not self._init_known:
            if first:
                asyncio.get_running_loop().call_later(INIT_WAIT_S, self._kill_bwrap)
            return
        if self._init_fd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._init_fd, signal.SIGKILL)
        self._kill_bwrap()

    def _kill_bwrap(self) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()

    def _close_pipes(self) -> None:
        transport = getattr(self._process, "_transport", None)
        if isinstance(transport, asyncio.SubprocessTransport):
            transport.close()

    async def _signal_bot(self, signum: int) -> None:
        """``signum`` to every process of the bot (not bwrap's init), each addressed by its
        folder in the sandbox's procfs, a handle no reused pid can redirect. A sandbox not yet
        standing is killed instead."""
        async with self._init_users:
            sent = self._init is not None and await asyncio.to_thread(
                _signal_sandbox, self._init, signum)
        if not sent:
            self._kill(self._reason or STOPPED)

    async def _read_output(self) -> None:
        stream = self._process.stdout
        assert stream is not None
        while chunk := await stream.read(OUTPUT_TAIL_BYTES):
            self._output += len(chunk)
            self._tail += chunk
            del self._tail[:-OUTPUT_TAIL_BYTES]
            if self._output > self.limits.output_bytes:
                self._kill(f"killed: more than {size_text(self.limits.output_bytes)} of output")

    async def _watch(self, info_fd: int) -> None:
        try:
            init_pid = await _read_child_pid(info_fd)
        finally:
            with contextlib.suppress(OSError):
                os.close(info_fd)
        if init_pid is not None:
            self._init_fd = await asyncio.to_thread(_open_init, init_pid, self.pid)
            if self._init_fd is not None:
                self._init = f"/proc/self/fd/{self._init_fd}"
        self._init_known = True
        if self._kill_wanted:
            self._kill(self._reason or STOPPED)
        limits = self.limits
        tick = 0
        while not self._ended.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), TICK_S)
                return
            async with self._init_users:
                usage = None if self._init is None else await asyncio.to_thread(
                    sandbox_usage, self._init)
            if usage is None:
                continue
            memory = usage.rss_bytes
            if memory > limits.memory_mb * MiB and usage.processes > 1:
                # Forked processes count the pages they share once each: ask for the exact sum.
                async with self._init_users:
                    if self._init is not None:
                        memory = await asyncio.to_thread(proportional_memory, self._init)
            self._cpu_seconds = max(self._cpu_seconds, usage.cpu_seconds)
            self._peak_memory = max(self._peak_memory, memory)
            if usage.threads >= limits.processes:
                self._kill(f"killed: reached the limit of {limits.processes} processes "
                           "and threads")
            elif memory > limits.memory_mb * MiB:
                self._kill(f"killed: memory limit of {limits.memory_mb} MB")
            elif usage.cpu_seconds > limits.cpu_seconds:
                self._kill(f"killed: CPU time limit of {limits.cpu_seconds} s")
            tick += 1
            if tick % DISK_EVERY == 0:
                await self._check_folders()

    async def _check_folders(self) -> None:
        limits = self.limits
        async with self._init_users:
            init = self._init
            size, entries, used = await asyncio.to_thread(
                lambda: (*folder_usage(self._data_dir, limits.data_files),
                         None if init is None else tmpfs_used(init)))
        if size > limits.data_mb * MiB:
            self._kill(f"killed: data/ over {limits.data_mb} MB")
        elif entries > limits.data_files:
            self._kill(f"killed: data/ holds more than {limits.data_files} files")
        elif used is not None and used >= limits.tmp_mb * MiB - 64 * 1024:
            self._kill(f"killed: /tmp over {limits.tmp_mb} MB")

    async def _finish(self) -> RunOutcome:
        try:
            code = await self._process.wait()
            try:
                await asyncio.wait_for(asyncio.shield(self._reader), 5.0)
            except TimeoutError:
                self._reader.cancel()
            self._ended.set()
            with contextlib.suppress(Exception):
                await self._watchdog  # ends within one measurement, never cut inside one
            async with self._init_users:
                if self._init_fd is not None:
                    os.close(self._init_fd)
                    self._init, self._init_fd = None, None
        finally:
            self._ended.set()
            if self._lease is not None:
                self._lease.release()
        return self._outcome(code)

    def _outcome(self, code: int) -> RunOutcome:
        signum: int | None = None
        exit_code: int | None = code
        if code < 0:
            signum, exit_code = -code, None
        elif 128 < code <= 128 + 64:
            signum, exit_code = code - 128, None
        return RunOutcome(exit_code, signum, self._reason or self._ending(code, signum),
                          self.output_tail(), self._cpu_seconds, self._peak_memory)

    def _ending(self, code: int, signum: int | None) -> str:
        """Why the bot ended when no limit of the watchdog's and no stop did it."""
        if signum == signal.SIGXCPU or (
                signum == signal.SIGKILL and self._cpu_seconds >= self.limits.cpu_seconds - 1):
            return f"killed: CPU time limit of {self.limits.cpu_seconds} s"
        if signum == signal.SIGXFSZ:
            return f"killed: file size limit of {self.limits.file_size_mb} MB"
        if signum is not None:
            return f"killed by {_signal_name(signum)}"
        return f"exited with status {code}"


def _open_init(init_pid: int, bwrap_pid: int) -> int | None:
    """A descriptor of the init's /proc folder, kept only if it is bwrap's child indeed."""
    try:
        fd = os.open(f"/proc/{init_pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    stat = read_stat(f"/proc/self/fd/{fd}")
    if stat is None or stat.ppid != bwrap_pid:
        os.close(fd)
        return None
    return fd


def _signal_sandbox(init: str, signum: int) -> bool:
    """False, signalling nothing, while the sandbox is still being built (its init's /proc is
    then the host's)."""
    proc = sandbox_procfs(init)
    if proc is None:
        return False
    with contextlib.suppress(OSError):
        for name in os.listdir(proc):
            if name.isdigit() and name != "1":
                with contextlib.suppress(OSError):
                    fd = os.open(f"{proc}/{name}", os.O_RDONLY | os.O_DIRECTORY)
                    try:
                        signal.pidfd_send_signal(fd, signum)
                    finally:
                        os.close(fd)
    return True


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


async def _read_child_pid(fd: int) -> int | None:
    """bwrap's ``--info-fd`` JSON (one flat object): the pid (on the host) of the sandbox's
    init. Read on the loop, no thread held: bwrap writes it as soon as the sandbox exists, and
    the pipe ends with bwrap at the latest."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(fd), "rb", buffering=0))
    try:
        text = await reader.readuntil(b"}")
    except asyncio.IncompleteReadError as error:
        text = error.partial
    except asyncio.LimitOverrunError:
        return None
    finally:
        transport.close()
    try:
        value = json.loads(text).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None
