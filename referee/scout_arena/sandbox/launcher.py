"""Starting a hosted bot inside bubblewrap, watching it, and saying why it ended.

One :class:`Sandbox` per host process starts every bot with the same limits. A bot gets its own
network namespace with no interface but loopback (no network at all), its own PID, IPC and UTS
namespaces, a new session, the read-only view of :mod:`scout_arena.sandbox.mounts`, its code
read-only at ``/bot``, its data writable at ``/bot/data``, a private size-capped ``/tmp`` and
the referee's Unix socket at ``/run/scout/referee.sock``; its environment is built from nothing
(no variable of the host passes). bwrap dies with its parent, and the bot with bwrap.

The host reads the bot's output (stdout and stderr merged) through a pipe, keeping the last
64 KiB, and a watchdog measures the process tree and the folders every tick; past a limit the
bot is killed and :class:`RunOutcome` says which limit in words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from scout_arena.sandbox.identity import UID_BASE, UID_COUNT, UidLease, chown_tree, lease_uid
from scout_arena.sandbox.limits import (
    DEFAULT_LIMITS,
    OUTPUT_TAIL_BYTES,
    MiB,
    SandboxLimits,
    size_text,
)
from scout_arena.sandbox.manifest import Manifest
from scout_arena.sandbox.monitor import (
    ProcessTable,
    children_of,
    folder_usage,
    scan_processes,
    tmpfs_used,
    tree_usage,
)
from scout_arena.sandbox.mounts import (
    BOT_DIR,
    DATA_MOUNT,
    SOCKET_MOUNT,
    bind_args,
    runtime_env,
    runtime_view,
    system_args,
)
from scout_arena.sandbox.support import namespace_args, probe, tool_paths

#: How often the watchdog measures the process tree; the folders every DISK_EVERY ticks.
TICK_S = 0.1
DISK_EVERY = 5
STOPPED = "stopped after its match"


class SandboxUnavailable(RuntimeError):
    """This host cannot run sandboxes (see :func:`probe`)."""


@dataclass(frozen=True)
class RunOutcome:
    exit_code: int | None
    signal: int | None
    reason: str
    output_tail: str


class Sandbox:
    """Starts hosted bots, every one with the same :class:`SandboxLimits`."""

    def __init__(self, limits: SandboxLimits = DEFAULT_LIMITS, *, python: str = sys.executable,
                 uid_base: int = UID_BASE, uid_count: int = UID_COUNT) -> None:
        self.limits = limits
        self.python = python
        self.uid_base = uid_base
        self.uid_count = uid_count
        self.as_root = os.geteuid() == 0
        self._table = ProcessTable(TICK_S / 2)

    async def start(self, *, name: str, code_dir: Path, data_dir: Path, socket_path: Path,
                    manifest: Manifest, env: Mapping[str, str] = {}) -> HostedProcess:
        """Start the bot ``manifest`` describes; returns once its process is spawned."""
        support = probe()
        if not support.available:
            raise SandboxUnavailable(support.reason)
        _check_env(name, env)
        view = runtime_view(manifest, self.python)
        lease = await asyncio.to_thread(self._prepare, Path(code_dir), Path(data_dir),
                                        Path(socket_path))
        read_fd, write_fd = os.pipe()
        try:
            variables = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
                         "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                         "SCOUT_ADDRESS": f"unix:{SOCKET_MOUNT}", "SCOUT_TOKEN": "hosted",
                         "SCOUT_BOT_NAME": name, "SCOUT_CONCURRENCY": "1",
                         "SCOUT_DATA_DIR": DATA_MOUNT,
                         **runtime_env(manifest, self.limits.memory_mb), **env}
            nproc = self.limits.processes
            if lease is None:
                nproc += await asyncio.to_thread(_own_processes)
            tools = tool_paths()
            argv = [tools["prlimit"], *self.limits.rlimit_args(nproc), "--", tools["bwrap"],
                    *namespace_args(self.as_root), "--die-with-parent", "--new-session",
                    "--clearenv", "--hostname", "scout-bot", *system_args()]
            argv += [*bind_args(view.binds), "--proc", "/proc", "--dev", "/dev",
                     "--perms", "1777", "--size", str(self.limits.tmp_mb * MiB), "--tmpfs", "/tmp",
                     "--ro-bind", str(code_dir), BOT_DIR, "--bind", str(data_dir), DATA_MOUNT,
                     "--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", "/run/scout",
                     "--bind", str(socket_path), SOCKET_MOUNT, "--chdir", BOT_DIR,
                     "--info-fd", str(write_fd)]
            for key, value in variables.items():
                argv += ["--setenv", key, value]
            argv.append("--")
            if lease is not None:
                argv += [tools["setpriv"], f"--reuid={lease.uid}", f"--regid={lease.uid}",
                         "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
            argv += [view.program, *manifest.command[1:]]
            process = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, pass_fds=(write_fd,), env={},
                start_new_session=True)
        except BaseException:
            os.close(read_fd)
            if lease is not None:
                lease.release()
            raise
        finally:
            os.close(write_fd)
        return HostedProcess(self.limits, self._table, process, read_fd, lease, Path(data_dir))

    def _prepare(self, code_dir: Path, data_dir: Path, socket_path: Path) -> UidLease | None:
        """Make the mount points and, as root, lease the bot's uid and give it its data folder
        and its socket (nothing else of the host is the bot's)."""
        if not code_dir.is_dir():
            raise FileNotFoundError(f"{code_dir} is not a folder")
        if not socket_path.exists():
            raise FileNotFoundError(f"the referee's socket {socket_path} does not exist")
        (code_dir / "data").mkdir(exist_ok=True)
        data_dir.mkdir(parents=True, exist_ok=True)
        if not self.as_root:
            return None
        lease = lease_uid(self.uid_base, self.uid_count)
        try:
            chown_tree(data_dir, lease.uid)
            os.chown(socket_path, lease.uid, lease.uid)
        except BaseException:
            lease.release()
            raise
        return lease


def _check_env(name: str, env: Mapping[str, str]) -> None:
    if not name or "\x00" in name:
        raise ValueError(f"bad bot name {name!r}")
    for key, value in env.items():
        if not key or "=" in key or "\x00" in key or "\x00" in value:
            raise ValueError(f"bad environment variable {key!r}")


def _own_processes() -> int:
    """Processes of this uid (RLIMIT_NPROC counts them all when there is no uid per bot)."""
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                count += 1
    return count


class HostedProcess:
    """A running hosted bot: its outcome, its output, and the means to stop it."""

    def __init__(self, limits: SandboxLimits, table: ProcessTable,
                 process: asyncio.subprocess.Process, info_fd: int, lease: UidLease | None,
                 data_dir: Path) -> None:
        self.limits = limits
        self.pid = process.pid
        self._table = table
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
        if self._init_pid is None:
            self._kill(self._reason or STOPPED)
            return
        table = await asyncio.to_thread(scan_processes)
        for pid in children_of(table, self._init_pid):
            with contextlib.suppress(OSError):
                fd = os.pidfd_open(pid)
                try:
                    signal.pidfd_send_signal(fd, signum)
                finally:
                    os.close(fd)

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
            usage = tree_usage(await self._table.snapshot(), self.pid)
            self._cpu_seconds = max(self._cpu_seconds, usage.cpu_seconds)
            if usage.rss_bytes > limits.memory_mb * MiB:
                self._kill(f"killed: memory limit of {limits.memory_mb} MB")
            elif usage.cpu_seconds > limits.cpu_seconds:
                self._kill(f"killed: CPU time limit of {limits.cpu_seconds} s")
            elif usage.threads - 1 >= limits.processes:
                self._kill(f"killed: reached the limit of {limits.processes} processes "
                           "and threads")
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
