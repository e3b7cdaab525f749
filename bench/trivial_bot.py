"""A trivial Scout Arena bot for benchmarks: a raw grpc.aio client, no SDK, no thinking.

Run as ``.venv/bin/python bench/trivial_bot.py --address HOST:PORT --token TOKEN --name NAME``
(``bench/referee.py`` starts several of these, each in its own process).

It opens one ``Arena.Play`` stream, says Hello with a large ``max_concurrent_matches`` and then
answers at once: every rotation with ``false``, every decision with the first legal Show, else
the first legal Scout. It counts what it receives. By default its stream is lean, as the SDK's
and every kit's are (no PublicEvents, no AnswerResult for an accepted answer): it then logs
when it wrote each answer and when each request arrived (``time.monotonic``, which is one clock
for every process on Linux), and the benchmark joins the logs of all four bots into the
referee's turnaround, from one seat's answer to the match's next request reaching the next
seat. With ``--full`` it asks for everything and measures, per answer, the time from just
before writing it to reading its ``AnswerResult``.

It is driven over stdin/stdout by one-line commands, so the benchmark can ask for figures of a
time window without stopping the bot:

* stdout ``R`` once the referee's Welcome came; ``E`` for each MatchEnded (with
  ``--report-ends``); ``S {json}`` in answer to a stats command.
* stdin ``stats T0 T1``: figures for the answers whose AnswerResult came in [T0, T1];
  ``pause``: hold every answer back (the bot's matches stand still, costing the referee
  nothing); ``resume``: send the held answers and answer at once again (both acknowledged
  with ``P``); ``quit``: close the stream and exit.

``Recorder`` and ``serve_commands`` are shared with the raw ping-pong clients of
``bench/referee.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import json
import sys
import time
from array import array
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2
from scout_arena.server.eventloop import run as run_on_loop

JSON = dict[str, Any]
BUNDLED = "bundled:"
"""Prefix of the received counts of messages that came inside a RefereeBundle (the bundle
itself is counted as one ``bundle``)."""
EOF: object = getattr(grpc.aio, "EOF")  # noqa: B009 - missing from grpc's type stubs
CLIENT_OPTIONS = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
]


class Recorder:
    """Completion times and latencies (seconds) of answered requests, appended in time order."""

    def __init__(self) -> None:
        self.times = array("d")
        self.latencies = array("d")

    def add(self, done: float, latency: float) -> None:
        self.times.append(done)
        self.latencies.append(latency)

    def window(self, t0: float, t1: float) -> tuple[int, list[int]]:
        """How many completed in [t0, t1], and their latencies in whole microseconds."""
        lo = bisect.bisect_left(self.times, t0)
        hi = bisect.bisect_right(self.times, t1)
        return hi - lo, [round(x * 1e6) for x in self.latencies[lo:hi]]


async def serve_commands(stats: Callable[[float, float], JSON],
                         other: Callable[[list[str]], Awaitable[None]] | None = None) -> None:
    """Answer ``stats T0 T1`` lines on stdin with ``S {json}`` on stdout until ``quit`` or
    EOF; hand any other command line (split in words) to ``other``."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = (await reader.readline()).decode().split()
        if not line or line[0] == "quit":
            return
        if line[0] == "stats" and len(line) == 3:
            figures = stats(float(line[1]), float(line[2]))
            sys.stdout.write("S " + json.dumps(figures, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        elif other is not None:
            await other(line)


class TurnLog:
    """(match id, request id) pairs by time, appended in time order."""

    def __init__(self) -> None:
        self.times = array("d")
        self.keys: list[tuple[str, int]] = []

    def add(self, at: float, key: tuple[str, int]) -> None:
        self.times.append(at)
        self.keys.append(key)

    def window(self, t0: float, t1: float) -> list[tuple[str, int, float]]:
        lo = bisect.bisect_left(self.times, t0)
        hi = bisect.bisect_right(self.times, t1)
        return [(m, r, t) for (m, r), t in zip(self.keys[lo:hi], self.times[lo:hi],
                                               strict=True)]


def settle_collector() -> None:
    """Freeze what the process holds once it is set up and leave full collections out. A
    load generator is an instrument: a full collection in one bot stops every match it sits in
    (10-36 ms measured in these bots, as their logs grow), and the referee's p99 would be the
    bots'. Young collections still run. The raw ping-pong clients do the same, so both sides of
    the comparison are measured alike; the referee has its own policy (`gcpolicy`)."""
    gc.freeze()
    gc.set_threshold(700, 10, 1 << 30)


def turnarounds_us(per_bot: Any) -> list[int]:
    """Lean bots: from each decision answer of the window to the match's next request reaching
    a seat (the next request id of that match), in whole microseconds; ``per_bot`` holds the
    ``answers`` and ``requests`` logs of every bot (`TurnLog.window`). The referee's share of
    a decision, as a raw ping-pong's round trip is the raw server's."""
    arrived = {(m, r): t for s in per_bot for m, r, t in s.get("requests", ())}
    return [round((arrived[(m, r + 1)] - t) * 1e6) for s in per_bot
            for m, r, t in s.get("answers", ()) if (m, r + 1) in arrived]


class TrivialBot:
    """One Play stream; answers every request at once."""

    def __init__(self, name: str, report_ends: bool, lean: bool = True,
                 bundles: bool = True) -> None:
        self.name = name
        self.report_ends = report_ends
        self.lean = lean
        self.bundles = bundles
        """Hello.accepts_bundles, and the answers to one bundle go back as one BotBundle."""
        self.answer_log = TurnLog()
        """Lean: (match, request id) of every decision answered, by the time it was written."""
        self.request_log = TurnLog()
        """Lean: (match, request id) of every decision request, by the time it arrived."""
        self.decisions = Recorder()
        self.rotations = Recorder()
        self.received: Counter[str] = Counter()
        self.problems: Counter[str] = Counter()
        self.matches_ended = 0
        self.pending: dict[tuple[str, int], tuple[float, bool]] = {}
        self.paused = False
        self.held: list[tuple[tuple[str, int], bool, arena_pb2.BotMessage]] = []
        self.write_lock = asyncio.Lock()
        self.outgoing: list[tuple[tuple[str, int], bool, arena_pb2.BotMessage]] = []
        self.writer: asyncio.Future[None] | None = None
        self.call: grpc.aio.StreamStreamCall[arena_pb2.BotMessage,
                                             arena_pb2.RefereeMessage] | None = None

    def stats(self, t0: float, t1: float) -> JSON:
        count, latencies = self.decisions.window(t0, t1)
        rotations, _ = self.rotations.window(t0, t1)
        figures: JSON = {"decisions": count, "latencies_us": latencies, "rotations": rotations,
                         "received": dict(self.received), "problems": dict(self.problems),
                         "matches_ended": self.matches_ended}
        if self.lean:
            answers = self.answer_log.window(t0, t1)
            figures["decisions"] = len(answers)
            figures["answers"] = answers
            # a request that follows an answer of the window may arrive a little after it
            figures["requests"] = self.request_log.window(t0, t1 + 5.0)
        return figures

    async def play(self, address: str, token: str, max_matches: int) -> None:
        async with grpc.aio.insecure_channel(address, options=CLIENT_OPTIONS) as channel:
            stub = arena_pb2_grpc.ArenaStub(channel)
            # wait_for_ready: the benchmark may start the bot before the referee listens.
            call = stub.Play(None, metadata=(("authorization", f"Bearer {token}"),),
                             wait_for_ready=True)
            await call.write(arena_pb2.BotMessage(hello=arena_pb2.Hello(
                bot_name=self.name, bot_version="bench-trivial", protocol_version=1,
                max_concurrent_matches=max_matches, lean=self.lean,
                accepts_bundles=self.bundles)))
            welcome = await call.read()
            if welcome is EOF or not isinstance(welcome, arena_pb2.RefereeMessage) \
                    or welcome.WhichOneof("body") != "welcome":
                raise SystemExit(f"{self.name}: no Welcome: {welcome!r}")
            self.call = call
            settle_collector()
            sys.stdout.write("R\n")
            sys.stdout.flush()
            await self._loop(call)

    async def _answer_all(self, answers: list[tuple[tuple[str, int], bool,
                                                    arena_pb2.BotMessage]]) -> None:
        """Write ``answers`` (one BotBundle when there are several and the bot bundles)."""
        if self.paused:
            self.held.extend(answers)
            return
        assert self.call is not None
        async with self.write_lock:
            now = time.monotonic()
            for key, decision, _ in answers:
                if not self.lean:
                    self.pending[key] = (now, decision)
                elif decision:
                    self.answer_log.add(now, key)
                else:
                    self.rotations.add(now, 0.0)
            if len(answers) == 1 or not self.bundles:
                for _, _, answer in answers:
                    await self.call.write(answer)
            else:
                await self.call.write(arena_pb2.BotMessage(bundle=arena_pb2.BotBundle(
                    messages=[answer for _, _, answer in answers])))

    async def command(self, words: list[str]) -> None:
        """``pause`` / ``resume`` (see the module docstring)."""
        if words[0] == "pause":
            self.paused = True
        elif words[0] == "resume":
            self.paused = False
            held, self.held = self.held, []
            if held:
                await self._answer_all(held)
        else:
            return
        sys.stdout.write("P\n")
        sys.stdout.flush()

    async def _loop(
        self, call: grpc.aio.StreamStreamCall[arena_pb2.BotMessage, arena_pb2.RefereeMessage]
    ) -> None:
        received = self.received
        while True:
            read = await call.read()
            if read is EOF:
                return
            assert isinstance(read, arena_pb2.RefereeMessage)
            kind = read.WhichOneof("body")
            assert kind is not None
            received[kind] += 1
            answers: list[tuple[tuple[str, int], bool, arena_pb2.BotMessage]] = []
            if kind == "bundle":
                for inner in read.bundle.messages:
                    inner_kind = inner.WhichOneof("body")
                    assert inner_kind is not None
                    received[BUNDLED + inner_kind] += 1
                    self._handle(inner, inner_kind, answers)
            else:
                self._handle(read, kind, answers)
            if answers:
                self._queue(answers)

    def _queue(self, answers: list[tuple[tuple[str, int], bool,
                                         arena_pb2.BotMessage]]) -> None:
        """Hand ``answers`` to the writer task and go on reading, as the SDK does: the answers
        that pile up while a write is in flight go out together in the next one."""
        self.outgoing.extend(answers)
        if self.writer is None or self.writer.done():
            self.writer = asyncio.ensure_future(self._write_queued())

    async def _write_queued(self) -> None:
        while self.outgoing:
            answers, self.outgoing = self.outgoing, []
            await self._answer_all(answers)

    def _handle(self, message: arena_pb2.RefereeMessage, kind: str,
                answers: list[tuple[tuple[str, int], bool, arena_pb2.BotMessage]]) -> None:
        pending = self.pending
        monotonic = time.monotonic
        respond = answers.append
        accepted = arena_pb2.ANSWER_STATUS_ACCEPTED
        if kind == "decision_request":
            request = message.decision_request
            if self.lean:
                self.request_log.add(monotonic(), (request.match_id, request.request_id))
            if request.legal_shows:
                action = game_pb2.Action(show=request.legal_shows[0])
            elif request.legal_scouts:
                action = game_pb2.Action(scout=request.legal_scouts[0])
            else:
                action = game_pb2.Action(scout=game_pb2.Scout(end=game_pb2.END_LEFT))
            answer = arena_pb2.BotMessage(action=arena_pb2.ActionChoice(
                match_id=request.match_id, request_id=request.request_id, action=action))
            respond(((request.match_id, request.request_id), True, answer))
        elif kind == "rotation_request":
            rotation = message.rotation_request
            answer = arena_pb2.BotMessage(rotation=arena_pb2.RotationChoice(
                match_id=rotation.match_id, request_id=rotation.request_id, rotate=False))
            respond(((rotation.match_id, rotation.request_id), False, answer))
        elif kind == "answer_result":
            now = monotonic()
            result = message.answer_result
            sent = pending.pop((result.match_id, result.request_id), None)
            if result.status != accepted or sent is None:
                self.problems[arena_pb2.AnswerStatus.Name(result.status)] += 1
            elif sent[1]:
                self.decisions.add(now, now - sent[0])
            else:
                self.rotations.add(now, now - sent[0])
        elif kind == "match_ended":
            self.matches_ended += 1
            if self.report_ends:
                sys.stdout.write("E\n")
                sys.stdout.flush()
        elif kind == "error":
            self.problems["PROTOCOL_ERROR"] += 1


async def run(args: argparse.Namespace) -> int:
    bot = TrivialBot(args.name, args.report_ends, lean=not args.full,
                     bundles=not args.no_bundles)
    player = asyncio.create_task(bot.play(args.address, args.token, args.max_matches))
    commands = asyncio.create_task(serve_commands(bot.stats, bot.command))
    done, _ = await asyncio.wait({player, commands}, return_when=asyncio.FIRST_COMPLETED)
    for task in (player, commands):
        task.cancel()
    await asyncio.gather(player, commands, return_exceptions=True)
    if player in done and not player.cancelled() and player.exception() is not None:
        print(f"{args.name}: {player.exception()!r}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="referee HOST:PORT")
    parser.add_argument("--token", required=True, help="the bot's token")
    parser.add_argument("--name", default="trivial", help="bot name sent in Hello")
    parser.add_argument("--max-matches", type=int, default=1000,
                        help="max_concurrent_matches in Hello (the referee caps it at 1000)")
    parser.add_argument("--full", action="store_true",
                        help="ask for PublicEvents and every AnswerResult (not lean)")
    parser.add_argument("--no-bundles", action="store_true",
                        help="one message each way per request (no Hello.accepts_bundles)")
    parser.add_argument("--report-ends", action="store_true",
                        help="print E on stdout for every MatchEnded")
    return run_on_loop(run(parser.parse_args()))  # $SCOUT_EVENT_LOOP picks the loop


if __name__ == "__main__":
    sys.exit(main())
