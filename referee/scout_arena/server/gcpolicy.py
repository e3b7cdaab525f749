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
* sets the thresholds to `THRESHOLDS`: generation 0 is collected after 5,000 net allocations
  and each second young collection is one of generation 1, so generation 1 never holds more
  than one collection's survivors; a full collection waits for 10,000 of those (~30 a minute
  under that load): hours apart, not seconds.

Measured side by side (bench/soak.py, 10,000 bots, 300 matches, 60 s window; CreateMatch p99
while replacing ended matches / referee time in young collections): (700, 10, 1000) 58.6 ms /
8.3 s; (700, 1, 100000) 46.8 ms / 6.8 s; (1500, 1, 100000) 33.9 ms / 6.7 s; (5000, 1, 10000)
29.8-39.0 ms over four runs / 2.7-3.3 s. Fewer collections walk each survivor fewer times.

The price: cyclic garbage that reaches the oldest generation waits longer to be freed. The
referee makes little of it; a finished match, the bulk, is freed by reference counting
(`MatchRunner._finish` breaks its one cycle).
"""

from __future__ import annotations

import functools
import gc
import time
from collections.abc import Callable
from typing import Any

THRESHOLDS = (5000, 1, 10_000)
"""`gc.set_threshold` arguments: net allocations before a generation-0 collection (CPython's
default: 700), generation-0 collections per generation-1 one (10), generation-1 collections per
full one (10)."""


@functools.cache
def tune_gc() -> None:
    """Apply the policy above to this process (once; later calls do nothing)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


def watch_gc_pauses(observe: Callable[[int, float], None]) -> Callable[[], None]:
    """Call ``observe(generation, seconds)`` after every collection of this process (a full
    collection stops the event loop, and every bot's clock is then the referee's problem);
    returns what stops the watching."""
    started = [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            observe(int(info.get("generation", 0)), time.perf_counter() - started[0])

    gc.callbacks.append(callback)
    return lambda: gc.callbacks.remove(callback)
