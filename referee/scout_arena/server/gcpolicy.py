"""The referee process's garbage-collection policy: keep full collections rare.

CPython's cyclic collector walks every tracked object in a full (generation 2) collection, with
the event loop stopped. A referee holds ~80 tracked objects per connected bot (the grpc state
of its stream, tasks, queues) besides every running match: with 10,000 bots connected a full
collection walked ~900,000 objects and stopped the loop for 0.6-1.4 s, and with the default
thresholds one ran every ~6 s under match traffic (bench/soak.py, 10,000 bots, 100 matches).
Every call in flight waited for each of them, CreateMatch's included.

`tune_gc`, called once as the referee's process starts serving:

* freezes what exists by then (modules, classes, protobuf descriptors: tens of thousands of
  objects that live as long as the process) into the permanent generation, which no
  collection walks again;
* keeps the young generations' thresholds (their collections walk only recent objects and stay
  short) and raises the oldest one's from 10 to `FULL_COLLECTION_THRESHOLD` collections of
  generation 1, so that under load a full collection runs every few minutes, not seconds.

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

FULL_COLLECTION_THRESHOLD = 1000
"""Collections of generation 1 between two full collections (CPython's default: 10)."""


@functools.cache
def tune_gc() -> None:
    """Apply the policy above to this process (once; later calls do nothing)."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_THRESHOLD)


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
