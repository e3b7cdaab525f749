"""Bad input on the command line ends in one line on stderr, never a traceback: exit status 2
for a usage error (a bad option or value, a file that is not what it should be), 1 for a
refusal (a port in use, a server that cannot start). tests/test_cli_bad_input.py tries every
command with bad values.

`OneLineParser` makes argparse's own errors one line; the option types here (`port_number`,
`host_port`, `positive_ms`...) refuse bad values as they are parsed; `guarded_main` turns what
a command still raises about the files and ports it was given into one line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from collections.abc import Callable
from typing import NoReturn

USAGE = 2
REFUSED = 1


class OneLineParser(argparse.ArgumentParser):
    """A parser whose usage error is one line (and status 2), not a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message} (see --help)\n")


class CommandError(Exception):
    """A command refuses its input: ``message`` on one line, exit ``status``."""

    def __init__(self, message: str, status: int = USAGE) -> None:
        super().__init__(message)
        self.status = status


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}..."


def port_number(text: str) -> int:
    """A TCP port: 0 (pick a free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"a port is 0 to 65535 (0: a free one), got {_shown(text)}")
    return value


def host_port(text: str) -> str:
    """HOST:PORT (a port from 1), [IPv6]:PORT, or unix:/path."""
    if text.startswith(("unix:", "unix-abstract:")):
        return text
    host, sep, port = text.rpartition(":")
    if host.startswith("dns:"):
        host = host.removeprefix("dns:").lstrip("/")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535 \
            or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"HOST:PORT with a port from 1 to 65535, got "
                                         f"{_shown(text)}")
    return text


def _whole(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"{what} from {least}, got {_shown(text)}")
    return value


def _number(text: str, within: Callable[[float], bool], what: str) -> float:
    """A float ``within`` accepts (NaN never is: every comparison with it is false)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not within(value):
        raise argparse.ArgumentTypeError(f"{what}, got {_shown(text)}")
    return value


def positive_ms(text: str) -> int:
    """A whole number of milliseconds from 1."""
    return _whole(text, 1, "a whole number of milliseconds")


def nonnegative_int(text: str) -> int:
    return _whole(text, 0, "a whole number")


def positive_int(text: str) -> int:
    return _whole(text, 1, "a whole number")


def share(text: str) -> float:
    """A fraction from 0 to 1."""
    return _number(text, lambda v: 0.0 <= v <= 1.0, "a share from 0 to 1")


def positive_rate(text: str) -> float:
    """A finite number above 0."""
    return _number(text, lambda v: 0.0 < v < math.inf, "a number above 0")


def seconds(text: str) -> float:
    """A duration in seconds, 0 or more (not NaN, not infinite)."""
    return _number(text, lambda v: 0.0 <= v < math.inf, "a number of seconds from 0")


def positive_seconds(text: str) -> float:
    return _number(text, lambda v: 0.0 < v < math.inf, "a number of seconds above 0")


def describe_os_error(exc: OSError) -> str:
    """An OSError about a path or a port, in a few words."""
    reason = exc.strerror or (str(exc) or type(exc).__name__)
    where = exc.filename if exc.filename is not None else None
    if where is not None:
        return f"{_shown(str(where))}: {reason}"
    return reason


def guarded_main(command: str, run: Callable[[], int]) -> int:
    """``run()``, with the errors bad input can still cause turned into one line on stderr:
    a file or folder that is missing or of the wrong kind, a port that cannot be bound, a
    file that is not JSON, TOML or text."""
    try:
        return run()
    except CommandError as exc:
        message, status = str(exc), exc.status
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError,
            PermissionError) as exc:
        message, status = describe_os_error(exc), USAGE
    except OSError as exc:  # a port in use, a disk full: refused, not the caller's typo
        message, status = describe_os_error(exc), REFUSED
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        message, status = f"cannot read a file it was given: {str(exc).splitlines()[0][:200]}", \
            USAGE
    except KeyboardInterrupt:
        return 130
    print(f"scout-arena {command}: error: {message}", file=sys.stderr)
    return status
