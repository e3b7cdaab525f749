"""The file system a sandboxed bot sees: only what its runtime needs, read-only.

Never the host's ``/`` as a whole: ``/usr`` and the ``/lib*``/``/bin`` links, a handful of
``/etc`` files the dynamic loader and the JDK read, the runtime's own prefix when it lives outside
``/usr`` (a pyenv Python, the referee's virtualenv and the source folders of the editable SDK,
stubs and rules packages; a JDK or Node.js under /opt), the bot's code at ``/bot`` and its data
at ``/bot/data``. The ladder's database, records and other bots' folders are not mounted, so they
do not exist inside.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from scout_arena.sandbox.manifest import Manifest, Runtime, relative_program_path

BOT_DIR = "/bot"
DATA_MOUNT = "/bot/data"
SOCKET_MOUNT = "/run/scout/referee.sock"
SYSTEM_TOPS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
             "/etc/localtime", "/etc/ssl/openssl.cnf")
#: The packages a hosted Python bot imports from the referee's environment besides
#: site-packages: the SDK, the generated stubs and the rules.
PYTHON_PACKAGES = ("scout_client", "scout", "scout_rules")


@dataclass(frozen=True)
class RuntimeView:
    """The host paths a runtime needs (bound read-only at the same place) and its program."""

    binds: tuple[str, ...]
    program: str


def system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in SYSTEM_TOPS:
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    return args + bind_args(tuple(name for name in ETC_FILES if os.path.exists(name)))


def bind_args(paths: tuple[str, ...]) -> list[str]:
    """Read-only binds of ``paths`` at the same place, their parent folders made first with mode
    0755 (bwrap would make them 0700, closed to the bot's uid)."""
    args: list[str] = []
    made: set[str] = set()
    for path in paths:
        for parent in reversed(PurePosixPath(path).parents):
            if str(parent) != "/" and str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", path, path]
    return args


def _outside_usr(paths: list[str]) -> tuple[str, ...]:
    kept: list[str] = []
    for path in sorted(set(paths)):
        if path == "/usr" or path.startswith("/usr/") or not os.path.isdir(path):
            continue
        if any(path.startswith(parent + "/") for parent in kept):
            continue
        kept.append(path)
    return tuple(kept)


def python_view(python: str) -> RuntimeView:
    """The referee's own interpreter (so the SDK and grpcio are there) and where it lives."""
    paths = [os.path.realpath(sys.base_prefix), sys.prefix, os.path.realpath(sys.prefix),
             os.path.dirname(os.path.dirname(os.path.realpath(python)))]
    for package in PYTHON_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            location = next(iter(spec.submodule_search_locations))
            paths.append(os.path.dirname(os.path.realpath(location)))
    return RuntimeView(_outside_usr(paths), python)


def tool_view(name: str) -> RuntimeView:
    """``java`` or ``node`` as found on the host's PATH, with the prefix it lives in."""
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed on this host")
    real = os.path.realpath(found)
    prefix = os.path.dirname(os.path.dirname(real))
    binds = [prefix]
    if name == "java":
        binds += glob.glob("/etc/java-*")
    return RuntimeView(_outside_usr(binds), real)


def runtime_view(manifest: Manifest, python: str) -> RuntimeView:
    if manifest.runtime is Runtime.PYTHON:
        return python_view(python)
    if manifest.runtime is Runtime.BINARY:
        relative = relative_program_path(manifest.program)
        return RuntimeView((), str(PurePosixPath(BOT_DIR) / relative))
    return tool_view(manifest.runtime.value)


def runtime_env(manifest: Manifest, memory_mb: int) -> dict[str, str]:
    """Runtime settings that keep a JVM or V8 heap inside the memory limit."""
    heap = max(memory_mb * 3 // 4, 16)
    if manifest.runtime is Runtime.JAVA:
        return {"JAVA_TOOL_OPTIONS": f"-Xmx{heap}m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"}
    if manifest.runtime is Runtime.NODE:
        return {"NODE_OPTIONS": f"--max-old-space-size={heap}"}
    if manifest.runtime is Runtime.PYTHON:
        return {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
    return {}
