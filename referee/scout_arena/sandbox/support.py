"""Can this host run sandboxes, and with which mechanisms (asked once per process)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from scout_arena.sandbox.mounts import system_args

#: The tools the launcher runs, all from Debian's essential packages but bwrap.
TOOLS = ("bwrap", "prlimit", "setpriv")


@dataclass(frozen=True)
class SandboxSupport:
    available: bool
    reason: str
    cgroups: bool


def namespace_args(as_root: bool) -> list[str]:
    """Every namespace bwrap supports, user namespace included when not root (``--unshare-all``).

    As root, no user namespace: inside one, the bot's uid would map back to root on the host,
    where RLIMIT_NPROC does not apply; the bot is instead switched to a uid of its own by
    ``setpriv`` after bwrap has built its mounts.
    """
    if as_root:
        return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try"]
    return ["--unshare-all"]


def tool_paths() -> dict[str, str]:
    found = {name: shutil.which(name, path="/usr/local/bin:/usr/bin:/bin") for name in TOOLS}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not found (Debian: apt-get install "
                                "bubblewrap util-linux)")
    return {name: path for name, path in found.items() if path is not None}


def delegated_cgroup() -> Path | None:
    """This process's cgroup v2 folder when it is writable and offers the memory and pids
    controllers (a delegated subtree), else None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    mount = next((line.split()[1] for line in mounts if line.split()[2:3] == ["cgroup2"]), None)
    if relative is None or mount is None:
        return None
    folder = Path(mount) / relative.lstrip("/")
    try:
        controllers = set((folder / "cgroup.controllers").read_text().split())
    except OSError:
        return None
    if {"memory", "pids"} <= controllers and os.access(folder, os.W_OK):
        return folder
    return None


@functools.cache
def probe() -> SandboxSupport:
    """Start one empty sandbox the way :class:`Sandbox` does, and say what worked."""
    cgroups = delegated_cgroup() is not None
    try:
        tools = tool_paths()
    except FileNotFoundError as error:
        return SandboxSupport(False, str(error), cgroups)
    as_root = os.geteuid() == 0
    argv = [tools["bwrap"], *namespace_args(as_root), "--die-with-parent", "--new-session",
            *system_args(), "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--"]
    if as_root:
        argv += [tools["setpriv"], "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    argv += ["/usr/bin/true"]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={})
    except (OSError, subprocess.TimeoutExpired) as error:
        return SandboxSupport(False, f"bwrap does not start: {error}", cgroups)
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()[-1:] or [f"status {result.returncode}"]
        return SandboxSupport(False, f"bwrap cannot build a sandbox here: {detail[0]}", cgroups)
    mode = ("root: each bot runs under a uid of its own" if as_root
            else "not root: bots run in a user namespace under the host's uid")
    limits = ("cgroup v2 delegated" if cgroups else
              "rlimits per process and a watchdog on the whole sandbox (no delegated cgroup v2)")
    return SandboxSupport(True, f"bubblewrap works; {mode}; {limits}", cgroups)
