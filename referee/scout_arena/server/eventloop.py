"""Which asyncio event loop a server process runs on: uvloop where it is installed, else stock.

uvloop (libuv) cuts the loop's own cost per callback, which is most of what a referee under load
does besides grpc and the rules: `bench/referee.py` measures it against the stock loop side by
side. Stock asyncio stays a choice (``--event-loop asyncio``), and the fallback where uvloop
cannot be installed (it has no Windows build).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

EVENT_LOOPS = ("auto", "uvloop", "asyncio")
"""``auto``: uvloop if it can be imported, else stock asyncio."""
ENV_VAR = "SCOUT_EVENT_LOOP"
"""Overrides the default choice ``auto`` for every command that does not get a flag."""


class EventLoopUnavailable(RuntimeError):
    """``uvloop`` was asked for and cannot be imported."""


def loop_factory(choice: str | None = None) -> tuple[Callable[[], asyncio.AbstractEventLoop],
                                                   str]:
    """The factory of the chosen loop and its name (``uvloop`` or ``asyncio``)."""
    choice = choice or os.environ.get(ENV_VAR) or "auto"
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


def run(main: Coroutine[Any, Any, T], choice: str | None = None) -> T:
    """`asyncio.run` on the chosen loop."""
    factory, _ = loop_factory(choice)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
