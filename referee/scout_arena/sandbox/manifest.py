"""``scout-bot.toml``: which runtime starts the bot and with which argv.

The command is an argv executed directly (never through a shell), so quoting and shell
metacharacters mean nothing; what is checked is *which program* runs. For ``python``, ``java``
and ``node`` the program is the host's interpreter (``python``/``python3``, ``java``, ``node``
exactly); for ``binary`` it is a file of the bot's own folder, named by a relative path without
``..``. Unknown keys are refused rather than ignored, so that a misspelt key (``comand``) is an
error the author sees at submission, not a bot that silently starts differently.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath

from scout_arena.sandbox.errors import ManifestError

MANIFEST_NAME = "scout-bot.toml"
MAX_MANIFEST_BYTES = 16 * 1024
MAX_ARGS = 64
MAX_ARG_CHARS = 1024
KEYS = ("runtime", "command")


class Runtime(StrEnum):
    PYTHON = "python"
    BINARY = "binary"
    JAVA = "java"
    NODE = "node"


#: The program names each interpreted runtime accepts as ``command[0]``.
INTERPRETERS: dict[Runtime, tuple[str, ...]] = {
    Runtime.PYTHON: ("python", "python3"),
    Runtime.JAVA: ("java",),
    Runtime.NODE: ("node",),
}


@dataclass(frozen=True)
class Manifest:
    runtime: Runtime
    command: tuple[str, ...]

    @property
    def program(self) -> str:
        return self.command[0]


def parse_manifest(text: str) -> Manifest:
    """The manifest ``text`` holds, or :class:`ManifestError` saying what is wrong with it."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{MANIFEST_NAME} is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{MANIFEST_NAME} is not valid TOML: {error}") from None
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ManifestError(f"{MANIFEST_NAME}: unknown key(s) {', '.join(unknown)} "
                            f"(allowed: {', '.join(KEYS)})")
    runtime = _runtime(table.get("runtime"))
    command = _command(table.get("command"))
    _check_program(runtime, command[0])
    return Manifest(runtime, command)


def _runtime(value: object) -> Runtime:
    choices = ", ".join(runtime.value for runtime in Runtime)
    if value is None:
        raise ManifestError(f"{MANIFEST_NAME}: 'runtime' is missing (one of {choices})")
    if not isinstance(value, str) or value not in {runtime.value for runtime in Runtime}:
        raise ManifestError(f"{MANIFEST_NAME}: unknown runtime {value!r} (one of {choices})")
    return Runtime(value)


def _command(value: object) -> tuple[str, ...]:
    if value is None:
        raise ManifestError(f"{MANIFEST_NAME}: 'command' is missing "
                            "(a list of strings, e.g. [\"python\", \"bot.py\"])")
    if not isinstance(value, list) or not value:
        raise ManifestError(f"{MANIFEST_NAME}: 'command' must be a non-empty list of strings, "
                            f"not {value!r}")
    if len(value) > MAX_ARGS:
        raise ManifestError(f"{MANIFEST_NAME}: 'command' has more than {MAX_ARGS} arguments")
    for index, arg in enumerate(value):
        if not isinstance(arg, str):
            raise ManifestError(f"{MANIFEST_NAME}: command[{index}] is not a string: {arg!r}")
        if "\x00" in arg:
            raise ManifestError(f"{MANIFEST_NAME}: command[{index}] holds a NUL character")
        if len(arg) > MAX_ARG_CHARS:
            raise ManifestError(f"{MANIFEST_NAME}: command[{index}] is longer than "
                                f"{MAX_ARG_CHARS} characters")
    if not value[0]:
        raise ManifestError(f"{MANIFEST_NAME}: command[0] (the program) is empty")
    return tuple(value)


def _check_program(runtime: Runtime, program: str) -> None:
    if runtime is Runtime.BINARY:
        relative_program_path(program)
        return
    allowed = INTERPRETERS[runtime]
    if program not in allowed:
        names = " or ".join(repr(name) for name in allowed)
        raise ManifestError(
            f"{MANIFEST_NAME}: runtime {runtime.value} runs {names}, not {program!r} (the "
            "command is run as an argv, never by a shell; use runtime 'binary' for a program "
            "of your own)")


def relative_program_path(program: str) -> PurePosixPath:
    """``program`` as a path inside the bot's folder, or :class:`ManifestError`."""
    if program.startswith("/") or "\\" in program:
        raise ManifestError(f"{MANIFEST_NAME}: the program {program!r} must be a relative path "
                            "inside the bot's folder (e.g. \"./bot\" or \"bin/bot\")")
    path = PurePosixPath(program)
    if ".." in path.parts:
        raise ManifestError(f"{MANIFEST_NAME}: the program {program!r} climbs out of the bot's "
                            "folder with '..'")
    if path.parts in ((), (".",)):
        raise ManifestError(f"{MANIFEST_NAME}: the program {program!r} names no file")
    return path
