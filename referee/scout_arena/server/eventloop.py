"""Which asyncio event loop a server process runs on: stock asyncio unless uvloop is asked for.

uvloop (libuv) cuts the loop's own cost per callback: `bench/referee.py` measures it against
the stock loop side by side (~10-15 % more decisions/s at 1-10 matches, none at 100). That
gain is small beside grpc's own cost, and stock asyncio is what the whole test suite runs on,
so ``uvloop`` (or ``auto``: uvloop where installed) is a choice, by flag or
``SCOUT_EVENT_LOOP``, not the default.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import TypeVar

T = TypeVar("T")

EVENT_LOOPS = ("asyncio", "uvloop", "auto")
"""``auto``: uvloop if it can be imported, else stock asyncio."""
ENV_VAR = "SCOUT_EVENT_LOOP"
"""Overrides the default choice ``asyncio`` for every command that does not get a flag."""


class EventLoopUnavailable(RuntimeError):
    """``uvloop`` was asked for and cannot be imported."""


def loop_factory(choice: str | None = None) -> tuple[Callable[[], asyncio.AbstractEventLoop],
                                                   str]:
    """The factory of the chosen loop and its name (``uvloop`` or ``asyncio``)."""
    choice = choice or os.environ.get(ENV_VAR) or "asyncio"
    if choice not in EVENT_LOOPS:
        raise ValueError(f"event loop {choice!r} is not one of {', '.join(EVENT_LOOPS)}")
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise EventLoopUnavailable(
                    "--event-loop uvloop: uvloop is not installed (pip install uvloop)"
                ) from None
        else:
            return uvloop.new_event_loop, "uvloop"
    return asyncio.new_event_loop, "asyncio"


def run(main: Coroutine[object, None, T], choice: str | None = None) -> T:
    """`asyncio.run` on the chosen loop."""
    factory, _ = loop_factory(choice)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
