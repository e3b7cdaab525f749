"""How a ladder command fails: one line on stderr and an exit status, never a traceback.

Shared by `cli` (the database commands) and `serve_cli` (``ladder serve``)."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import NoReturn

from scout_arena.text import echo


class CommandExit(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turns the errors a user can cause into one line on stderr and an exit status."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        from sqlalchemy.exc import ArgumentError, SQLAlchemyError

        from .repository import InvalidInputError, StorageError, UnknownBotError

        try:
            return command(args)
        except CommandExit as exc:
            message, status = str(exc), exc.status
        except InvalidInputError as exc:
            message, status = str(exc), 2
        except UnknownBotError as exc:
            message, status = f"no bot named {echo(str(exc))}", 1
        except StorageError as exc:
            message, status = str(exc), 1
        except ArgumentError as exc:
            message, status = f"--database is not a database URL: {one_line(exc)}", 2
        except SQLAlchemyError as exc:
            message, status = f"the database failed: {one_line(exc)}", 1
        except ValueError as exc:  # e.g. a URL of a database the ladder does not support
            message, status = one_line(exc), 2
        except OSError as exc:  # a port in use, a folder that cannot be made
            message = exc.strerror or one_line(exc)
            if exc.filename is not None:
                message = f"{str(exc.filename)[:100]!r}: {message}"
            status = 1
        print(f"scout-arena ladder {args.ladder_command}: {message}", file=sys.stderr)
        return status

    return run


class LadderParser(argparse.ArgumentParser):
    """A ladder command's parser: a usage error is one line (and status 2), not a usage
    block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
