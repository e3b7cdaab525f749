"""A running hosted bot: its output read through a pipe (the last 64 KiB kept), a watchdog on
its process tree and folders, and the words that say why it ended."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from scout_arena.sandbox.identity import UidLease
from scout_arena.sandbox.limits import OUTPUT_TAIL_BYTES, MiB, SandboxLimits, size_text
from scout_arena.sandbox.monitor import folder_usage, sandbox_usage, tmpfs_used

#: How often the watchdog measures the process tree; the folders every DISK_EVERY ticks.
TICK_S = 0.2
DISK_EVERY = 3
STOPPED = "stopped after its match"


@dataclass(frozen=True)
class RunOutcome:
    exit_code: int | None
    signal: int | None
    reason: str
    output_tail: str


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
        self._init_pid: int | None = None
        self._cpu_seconds = 0.0
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
            return await asyncio.shield(self._done)

    def output_tail(self) -> str:
        return self._tail.decode("utf-8", "replace")

    def _kill(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()

    async def _signal_bot(self, signum: int) -> None:
        """``signum`` to every process of the bot (not bwrap's init), each addressed by its
        folder in the sandbox's procfs, a handle no reused pid can redirect."""
        if self._init_pid is None:
            self._kill(self._reason or STOPPED)
            return
        await asyncio.to_thread(_signal_sandbox, self._init_pid, signum)

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
            self._init_pid = await asyncio.to_thread(_read_child_pid, info_fd)
        finally:
            os.close(info_fd)
        limits = self.limits
        tick = 0
        while self._process.returncode is None:
            await asyncio.sleep(TICK_S)
            if self._init_pid is None:
                continue
            usage = await asyncio.to_thread(sandbox_usage, self._init_pid)
            if usage is None:
                continue
            self._cpu_seconds = max(self._cpu_seconds, usage.cpu_seconds)
            if usage.threads >= limits.processes:
                self._kill(f"killed: reached the limit of {limits.processes} processes "
                           "and threads")
            elif usage.rss_bytes > limits.memory_mb * MiB:
                self._kill(f"killed: memory limit of {limits.memory_mb} MB")
            elif usage.cpu_seconds > limits.cpu_seconds:
                self._kill(f"killed: CPU time limit of {limits.cpu_seconds} s")
            tick += 1
            if tick % DISK_EVERY == 0:
                await self._check_folders()

    async def _check_folders(self) -> None:
        limits = self.limits
        size, entries = await asyncio.to_thread(folder_usage, self._data_dir, limits.data_files)
        used = None if self._init_pid is None else await asyncio.to_thread(
            tmpfs_used, self._init_pid)
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
        finally:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watchdog
            if self._lease is not None:
                self._lease.release()
        return self._outcome(code)

    def _outcome(self, code: int) -> RunOutcome:
        tail = self.output_tail()
        signum: int | None = None
        exit_code: int | None = code
        if code < 0:
            signum, exit_code = -code, None
        elif 128 < code <= 128 + 64:
            signum, exit_code = code - 128, None
        if self._reason is not None:
            return RunOutcome(exit_code, signum, self._reason, tail)
        if signum in (signal.SIGXCPU, signal.SIGKILL) and (
                signum == signal.SIGXCPU or self._cpu_seconds >= self.limits.cpu_seconds - 1):
            return RunOutcome(exit_code, signum,
                              f"killed: CPU time limit of {self.limits.cpu_seconds} s", tail)
        if signum is not None:
            return RunOutcome(exit_code, signum, f"killed by {_signal_name(signum)}", tail)
        return RunOutcome(exit_code, None, f"exited with status {code}", tail)


def _signal_sandbox(init_pid: int, signum: int) -> None:
    proc = f"/proc/{init_pid}/root/proc"
    with contextlib.suppress(OSError):
        for name in os.listdir(proc):
            if name.isdigit() and name != "1":
                with contextlib.suppress(OSError):
                    fd = os.open(f"{proc}/{name}", os.O_RDONLY | os.O_DIRECTORY)
                    try:
                        signal.pidfd_send_signal(fd, signum)
                    finally:
                        os.close(fd)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _read_child_pid(fd: int) -> int | None:
    """bwrap's ``--info-fd`` JSON: the pid (on the host) of the sandbox's init."""
    text = b""
    while not text.rstrip().endswith(b"}"):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        text += chunk
    try:
        value = json.loads(text).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None
