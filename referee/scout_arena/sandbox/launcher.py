"""Starting a hosted bot inside bubblewrap (:mod:`.process` watches it and says why it ended).

One :class:`Sandbox` per host process starts every bot with the same limits. A bot gets its own
network namespace with no interface but loopback (no network at all), its own PID, IPC and UTS
namespaces, a new session, the read-only view of :mod:`scout_arena.sandbox.mounts`, its code
read-only at ``/bot``, its data writable at ``/bot/data``, a private size-capped ``/tmp`` and
the referee's Unix socket at ``/run/scout/referee.sock``; its environment is built from nothing
(no variable of the host passes). bwrap dies with its parent, and the bot with bwrap.

The command line is ``prlimit`` (the rlimits of :class:`SandboxLimits`), ``bwrap`` (with the
seccomp filter of :mod:`.seccomp`), then as root ``setpriv`` to a uid leased for this bot alone,
then the bot's own argv.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from scout_arena.sandbox.identity import UID_BASE, UID_COUNT, UidLease, chown_tree, lease_uid
from scout_arena.sandbox.limits import DEFAULT_LIMITS, MiB, SandboxLimits
from scout_arena.sandbox.manifest import Manifest
from scout_arena.sandbox.mounts import (
    BOT_DIR,
    DATA_MOUNT,
    SOCKET_MOUNT,
    bind_args,
    runtime_env,
    runtime_view,
    system_args,
)
from scout_arena.sandbox.process import HostedProcess
from scout_arena.sandbox.seccomp import filter_program
from scout_arena.sandbox.support import namespace_args, probe, tool_paths


class SandboxUnavailable(RuntimeError):
    """This host cannot run sandboxes (see :func:`probe`)."""


class Sandbox:
    """Starts hosted bots, every one with the same :class:`SandboxLimits`."""

    def __init__(self, limits: SandboxLimits = DEFAULT_LIMITS, *, python: str = sys.executable,
                 uid_base: int = UID_BASE, uid_count: int = UID_COUNT) -> None:
        self.limits = limits
        self.python = python
        self.uid_base = uid_base
        self.uid_count = uid_count
        self.as_root = os.geteuid() == 0

    async def start(self, *, name: str, code_dir: Path, data_dir: Path, socket_path: Path,
                    manifest: Manifest, env: Mapping[str, str] = {}) -> HostedProcess:
        """Start the bot ``manifest`` describes; returns once its process is spawned."""
        support = await asyncio.to_thread(probe)
        if not support.available:
            raise SandboxUnavailable(support.reason)
        _check_env(name, env)
        code_dir, data_dir, socket_path = Path(code_dir), Path(data_dir), Path(socket_path)
        lease = await asyncio.to_thread(self._prepare, code_dir, data_dir, socket_path)
        read_fd, write_fd = os.pipe()
        filter_fd = _filter_fd()
        fds = (write_fd,) if filter_fd is None else (write_fd, filter_fd)
        try:
            argv = await asyncio.to_thread(self._argv, name, code_dir, data_dir, socket_path,
                                           manifest, env, lease, write_fd, filter_fd)
            process = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, pass_fds=fds, env={},
                start_new_session=True)
        except BaseException:
            os.close(read_fd)
            if lease is not None:
                lease.release()
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return HostedProcess(self.limits, process, read_fd, lease, data_dir)

    def _argv(self, name: str, code_dir: Path, data_dir: Path, socket_path: Path,
              manifest: Manifest, env: Mapping[str, str], lease: UidLease | None,
              info_fd: int, filter_fd: int | None) -> list[str]:
        """prlimit, then bwrap with the bot's view and environment, then (as root) setpriv to
        the bot's uid, then the bot's own argv."""
        view = runtime_view(manifest, self.python)
        variables = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
                     "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                     "SCOUT_ADDRESS": f"unix:{SOCKET_MOUNT}", "SCOUT_TOKEN": "hosted",
                     "SCOUT_BOT_NAME": name, "SCOUT_CONCURRENCY": "1",
                     "SCOUT_DATA_DIR": DATA_MOUNT,
                     **runtime_env(manifest, self.limits.memory_mb), **env}
        nproc = self.limits.processes
        if lease is None:
            nproc += _own_processes()
        tools = tool_paths()
        argv = [tools["prlimit"], *self.limits.rlimit_args(nproc), "--", tools["bwrap"],
                *namespace_args(self.as_root), "--die-with-parent", "--new-session",
                "--clearenv", "--hostname", "scout-bot", *system_args()]
        argv += [*bind_args(view.binds), "--proc", "/proc", "--dev", "/dev",
                 "--perms", "1777", "--size", str(self.limits.tmp_mb * MiB), "--tmpfs", "/tmp",
                 "--ro-bind", str(code_dir), BOT_DIR, "--bind", str(data_dir), DATA_MOUNT,
                 "--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", "/run/scout",
                 "--bind", str(socket_path), SOCKET_MOUNT, "--chdir", BOT_DIR,
                 "--info-fd", str(info_fd)]
        for key, value in variables.items():
            argv += ["--setenv", key, value]
        if filter_fd is not None:
            argv += ["--seccomp", str(filter_fd)]
        argv.append("--")
        if lease is not None:
            argv += [tools["setpriv"], f"--reuid={lease.uid}", f"--regid={lease.uid}",
                     "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
        argv += [view.program, *manifest.command[1:]]
        return argv

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


def _filter_fd() -> int | None:
    """The seccomp filter in a memory file bwrap reads from its start (None: no filter for this
    machine)."""
    program = filter_program()
    if program is None:
        return None
    fd = os.memfd_create("scout-sandbox-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


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


