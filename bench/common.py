"""What the benchmark scripts share: writing their figures as JSON, warning that the machine
was busy while they measured, a free loopback port for a child server, and a child's memory.

The benchmarks run as scripts (``python bench/engine.py``), so this folder is ``sys.path[0]`` and
they import this file as the sibling module ``common``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

JSON = dict[str, Any]


#: Where each of the project's Python packages lives in a checkout (proto's, the rules engine's,
#: the referee's, the SDK's): all of them go on the path of a run against another revision.
SOURCE_ROOTS = ("proto/python/src", "referee/rules/src", "referee", "clients/python/src")


ROOT = Path(__file__).resolve().parent.parent


def build_native(checkout: Path) -> None:
    """Build ``checkout``'s optional C extension of the rules engine in place, as ``pip
    install`` builds it, so that a run on its sources is not a run of the pure-Python engine."""
    rules = checkout / "referee/rules"
    if (rules / "setup.py").exists():
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=rules,
                       check=False, capture_output=True)


def worktree(revision: str, into: Path) -> Path:
    """REV checked out under ``into``, its C extension built (see `build_native`)."""
    path = into / "against"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path),
                    revision], check=True, capture_output=True)
    build_native(path)
    return path


def source_path(checkout: Path, inherited: str | None = None) -> str:
    """A PYTHONPATH running ``checkout``'s packages (ahead of ``inherited``)."""
    return os.pathsep.join([*(str(checkout / root) for root in SOURCE_ROOTS),
                            *filter(None, [inherited])])


def write_json(path: str | Path, data: JSON, console: Console | None = None) -> Path:
    """Write every figure to ``path`` (making its folder), and say so on ``console``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    if console is not None:
        console.print(f"[dim]wrote {path}[/]")
    return path


def warn_busy_machine(console: Console, evidence: str, advice: str) -> None:
    """Other load on the machine skewed the measurements: what shows it, and which figures
    still hold."""
    console.print(f"[yellow]warning: {evidence}; {advice}[/]")


def free_port() -> int:
    """A loopback port that is free now (so a child server and its clients can start together)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_status_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process in kB (empty once it is gone)."""
    out = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out
