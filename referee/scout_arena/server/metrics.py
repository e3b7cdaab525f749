"""Prometheus metrics of one referee: bots, matches, answers, clocks, forfeits, the process.

Each referee has its own `CollectorRegistry` (several referees in one process, as in tests,
never clash). The counters are incremented on the event loop where the referee already has
the facts (`match`, `referee`): one ``inc`` or ``observe`` per event, nothing allocated. The
two gauges are read when scraped, from ``len()`` of the referee's own dictionaries or a count
kept on the event loop, so collection never touches the loop. `serve_metrics` exposes the
registry over HTTP (`metrics_http`), in a daemon thread of its own: scrapes never
block the event loop (docs/deploy.md, "Metrics").
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from .metrics_http import MetricsAccess, MetricsServer, Probes

__all__ = ["MetricsAccess", "MetricsServer", "RefereeMetrics", "serve_metrics"]

DECISION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                      10.0, 30.0, 60.0)
"""Bounds of the decision latency histogram, in seconds (a decision time is 1 s by default)."""

LOOP_LAG_BUCKETS_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""Bounds of the loop lag histogram, in seconds."""

REQUEST_KINDS = ("rotation", "decision")

_BOUND_TEXTS = (*map(repr, DECISION_BUCKETS_S), "+Inf")
"""The histogram's ``le`` labels, as prometheus_client writes them."""


class AnswerTallies(Collector):
    """``scout_decisions_answered_total{kind}``, ``scout_decision_latency_seconds{kind}`` and
    ``scout_bank_draws_total``, kept as plain numbers on the event loop and turned into
    metrics when scraped. Every accepted answer counts in all three, and prometheus_client's
    own Counter and Histogram take a lock each time and search the buckets in Python, which
    was a measurable share of what a decision costs the referee."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._counts = {kind: [0] * (len(DECISION_BUCKETS_S) + 1) for kind in REQUEST_KINDS}
        """Per kind, how many answers fell in each bucket (the last: above every bound)."""
        self._sums = dict.fromkeys(REQUEST_KINDS, 0.0)
        self.bank_draws = 0
        registry.register(self)

    def add(self, kind: str, seconds: float, bank_draw: bool) -> None:
        self._counts[kind][bisect.bisect_left(DECISION_BUCKETS_S, seconds)] += 1
        self._sums[kind] += seconds
        if bank_draw:
            self.bank_draws += 1

    def collect(self) -> Iterator[Metric]:
        answered = CounterMetricFamily(
            "scout_decisions_answered", "Requests answered with an accepted answer, by kind "
            "(rotation: the round's rotation choice; decision: an action).", labels=["kind"])
        latency = HistogramMetricFamily(
            "scout_decision_latency_seconds", "Seconds from a request's hand-off to the "
            "transport to its accepted answer, as the bot's clock measured it (the referee's "
            "own lag credited back), by kind.", labels=["kind"])
        for kind in REQUEST_KINDS:
            counts = list(self._counts[kind])  # one snapshot: buckets and count agree
            cumulative = list(itertools.accumulate(counts))
            answered.add_metric([kind], cumulative[-1])
            latency.add_metric(
                [kind], [(_BOUND_TEXTS[i], float(n)) for i, n in enumerate(cumulative)],
                self._sums[kind])
        yield answered
        yield latency
        yield CounterMetricFamily(
            "scout_bank_draws", "Accepted answers that took longer than the decision time, "
            "so drew on the seat's time bank.", value=self.bank_draws)


class _CounterReading(Collector):
    """A counter whose value something else keeps as a plain number, read when scraped."""

    def __init__(self, name: str, documentation: str, read: Callable[[], int]) -> None:
        self._name, self._documentation, self._read = name, documentation, read

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self._name, self._documentation, value=self._read())


class RefereeMetrics:
    """The metrics of one referee, in a registry of their own (``registry``)."""

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry()
        # What prometheus_client's default registry has: process_* (RSS, CPU, open file
        # descriptors; Linux only), python_info and python_gc_*.
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        self.connected_bots = Gauge(
            "scout_connected_bots", "Bots with a live Play stream.", registry=registry)
        self.running_matches = Gauge(
            "scout_running_matches", "Matches being played (until their record is stored).",
            registry=registry)
        self.matches_finished = Counter(
            "scout_matches_finished", "Matches that ended, by status (finished: with a "
            "result; aborted: stopped without one).", ["status"], registry=registry)
        self.answers = AnswerTallies(registry)
        """Accepted answers: counts, latency histogram and bank draws (`answered_request`)."""
        self.time_losses = Counter(
            "scout_time_losses", "Requests that timed out (decision time and bank spent): "
            "a strike each, and the referee played the fallback.", registry=registry)
        self.loop_lag = Histogram(
            "scout_event_loop_lag_seconds", "How late the referee's event loop ran, sampled "
            "every 5 ms while matches run: the time the referee itself adds to every message "
            "(credited back to the bots' clocks).", buckets=LOOP_LAG_BUCKETS_S, registry=registry)
        gc_pauses = Histogram(
            "scout_gc_pause_seconds", "How long each cyclic garbage collection stopped the "
            "process, by generation (a full, generation 2, collection stops every match).",
            ["generation"], buckets=LOOP_LAG_BUCKETS_S, registry=registry)
        self.record_write_failures = Counter(
            "scout_record_write_failures", "Ended matches whose record could not be written "
            "to the records directory (the match ends all the same; see the log).",
            registry=registry)
        self.waiting_turns = Gauge(
            "scout_waiting_turns", "Match turns waiting for a pass of the event loop now.",
            registry=registry)
        self.forfeits = Counter(
            "scout_forfeits", "Seats that forfeited (strikes, a disconnection past the "
            "grace, or absent when the match began).", registry=registry)
        # The labelled children, looked up once: the hot path allocates nothing.
        for status in ("finished", "aborted"):
            self.matches_finished.labels(status)
        self.gc_pauses = {generation: gc_pauses.labels(str(generation))
                          for generation in range(3)}

    def add_gauge(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """A gauge of the app around the referee (the ladder's nodes), read when scraped."""
        Gauge(name, documentation, registry=self.registry).set_function(read)

    def count_deferred_turns(self, count: Callable[[], int]) -> None:
        """Let ``scout_deferred_turns_total`` read ``count()`` (the turn gate's own tally)
        when scraped."""
        self.registry.register(_CounterReading(
            "scout_deferred_turns", "Match turns that waited for a later pass of the event "
            "loop, which lets turns into a pass up to a time budget so that other calls are "
            "not held up (their bots' clocks were already stopped).", count))

    def count_running_matches(self, count: Callable[[], int]) -> None:
        """Let the running matches gauge read ``count()`` (a ``len()``) when scraped."""
        self.running_matches.set_function(lambda: float(count()))

    def gc_paused(self, generation: int, seconds: float) -> None:
        """A garbage collection of ``generation`` stopped the process ``seconds``
        (`hardening.watch_gc_pauses` calls it after each one)."""
        self.gc_pauses[generation].observe(seconds)

    def answered_request(self, kind: str, seconds: float, decision_s: float) -> None:
        """An accepted answer to a ``kind`` request, ``seconds`` after its hand-off."""
        self.answers.add(kind, seconds, seconds > decision_s)


def serve_metrics(metrics: RefereeMetrics, host: str = "127.0.0.1", port: int = 0, *,
                  probes: Probes | None = None,
                  access: MetricsAccess | None = None) -> MetricsServer:
    """Serve ``metrics`` on http://host:port/metrics (port 0 picks a free one), with the
    probes /livez and /readyz when ``probes`` is given, until `MetricsServer.close` (or the
    process ends: the thread is a daemon)."""
    return MetricsServer(metrics.registry, host, port, probes, access)
