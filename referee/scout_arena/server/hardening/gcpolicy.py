"""The referee process's garbage-collection policy: keep full collections rare.

CPython's cyclic collector walks every tracked object in a full (generation 2) collection, with
the event loop stopped. A referee holds ~80 tracked objects per connected bot (the grpc state
of its stream, tasks, queues) besides every running match: with 10,000 bots connected a full
collection walked ~900,000 objects and stopped the loop for 0.6-1.4 s, and with the default
thresholds one ran every ~6 s under match traffic (bench/soak.py, 10,000 bots, 100 matches).
Every call in flight waited for each of them, CreateMatch's included.

Young collections cost more than their thresholds suggest. CPython counts a young
generation's size as allocations minus deallocations, and a deallocation of an *old* object
counts too. A referee's old objects are mostly grpc's waiting state for each connected bot (its
pending read's coroutines, futures and callbacks), replaced at every decision: each time one dies
old, a new one is born young, and the count stays put while generation 0 grows. With 10,000 bots
generation 0 held 30,000-42,000 objects when its count reached 5,000 (7 times the count), and
at CPython's thresholds (700, 10) generation 1 collections walked 35,000-40,000 objects, 35-48 ms
with the loop stopped, ~110 of them a minute: every slow CreateMatch held one.

`tune_gc`, called once as the referee's process starts serving:

* freezes what exists by then (modules, classes, protobuf descriptors: tens of thousands of
  objects that live as long as the process) into the permanent generation, which no
  collection walks again;
* collects the young generations by the clock (`_TimedCollections`): generation 0 every
  `YOUNG_PERIOD_S`, every second time with generation 1, so each walks at most that long's
  survivors; a full collection waits for `FULL_AFTER` generation-1 collections, hours;
* keeps collections by the count as a net (`THRESHOLDS`: 5,000 net allocations, each second
  one with generation 1) for bursts and for a loop too busy for its timer.

Measured side by side (bench/soak.py; referee time in young collections in the window, the
longest one's histogram bucket, CreateMatch p99 while replacing ended matches):

| policy | 10,000 bots, 300 matches, 60 s | 4,000 bots, 1,000 matches, 180 s |
|---|---|---|
| count (700, 10, 1000) | 8.3 s, p99 58.6 ms | 24.5 s, <= 200 ms |
| count (5000, 1, 10000) | 2.7-3.3 s, <= 500 ms, p99 29.8-39.0 ms | 12.4 s, <= 1000 ms |
| clock, 0.1 s | 6.3 s, <= 50 ms, p99 42.3 / 43.4 ms | 18.8 s, <= 50 ms |

The clock's price is CPU: an object that lives longer than a period is walked, where the
count's long gaps let most of them die unwalked. With 1,000 bots in 200 2-player matches the
young collections took 6.5 % of the referee's time by the clock against 0.7 % by the count
(5000); under full load (1,000 matches) 10 % against 7 %, decisions/s the same.

The price of rare full collections: cyclic garbage that reaches the oldest generation waits
longer to be freed. The referee makes little of it; a finished match, the bulk, is freed by
reference counting (`MatchRunner._finish` breaks its one cycle): over 15,000 finished matches
its RSS grew 0.2 kB a match.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import time
from collections.abc import Callable

YOUNG_PERIOD_S = 0.1
"""How often `tune_gc`'s timer collects the young generations, 0 and 1 by turns."""

FULL_AFTER = 100_000
"""Generation-1 collections between two full ones (CPython's default: 10): ~5 hours at the
timer's pace."""

THRESHOLDS = (5000, 1, FULL_AFTER)
"""`gc.set_threshold` arguments, for collections by the count: net allocations before a
generation-0 collection (CPython's default: 700), generation-0 collections per generation-1
one (10), generation-1 collections per full one."""


@functools.cache
def tune_gc() -> None:
    """Apply the policy above to this process (once; later calls do nothing). Called with an
    event loop running, it also starts that loop's timed young collections."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    _TimedCollections(loop).schedule()


class _TimedCollections:
    """Young collections by the clock, not by the count. In a steady state the old objects that
    die (a bot's waiting state, replaced at each decision) match the young ones that survive, so
    generation 0's count hardly rises however long its list grows: with 1,000 matches running,
    collections triggered by the count came about a second apart (165 in 180 s) and walked up
    to a second's survivors each (the longest 0.5-1 s with the loop stopped). Collected every
    `YOUNG_PERIOD_S`, generation 0 holds at most that long's survivors, and each second
    collection takes in generation 1 as well. The count's thresholds stay as the net for
    bursts and for a stalled loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._ticks = 0

    def schedule(self) -> None:
        self._loop.call_later(YOUNG_PERIOD_S, self._collect)

    def _collect(self) -> None:
        self._ticks += 1
        if gc.get_count()[2] >= FULL_AFTER:
            gc.collect(2)
        else:
            gc.collect(self._ticks & 1)
        self.schedule()


def watch_gc_pauses(observe: Callable[[int, float], None]) -> Callable[[], None]:
    """Call ``observe(generation, seconds)`` after every collection of this process (a full
    collection stops the event loop, and every bot's clock is then the referee's problem);
    returns what stops the watching."""
    started = [0.0]

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            observe(int(info.get("generation", 0)), time.perf_counter() - started[0])

    gc.callbacks.append(callback)
    return lambda: gc.callbacks.remove(callback)
