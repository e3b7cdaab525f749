"""Referee CPU per decision, in process: this tree against another revision, side by side.

``bench/referee.py`` measures the referee as bots see it, over gRPC on a shared, noisy machine,
where one run's figures move by 10 % and more. This benchmark takes the transport out to see
the referee's own cost: a real `Referee` plays 4-player matches (``--concurrency`` at once, as
many as ``--matches`` in all) against four in-process bots on lean, bundled connections. Each
bot's connection behaves as the stream writer does: what the referee queued in one pass of the
event loop goes out as one bundle, its requests are handed off, and the bot answers all of them
in one BotBundle, which the referee reads (`read_answers`) and routes as it does off the wire.
The bots' own work (parsing requests, choosing the first legal Show or Scout, serializing the
answers) is timed and taken out: what is left is the referee's CPU per accepted answer.

Every run is a fresh process with the garbage collector off and a fixed hash seed, so the same
code costs the same instructions; with ``--against REV`` the runs alternate between this tree
and REV (checked out in a temporary git worktree) and the table gives medians and their ratio.
``valgrind --tool=callgrind`` over ``--child`` runs of two sizes gives instruction counts that
do not move at all, for changes too small for the clock.

    .venv/bin/python bench/referee_cpu.py --against HEAD~3 --json bench/results/referee_cpu.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import source_path, worktree, write_json
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
JSON = dict[str, Any]


# ----- the child: one in-process run ---------------------------------------------------------

def child_main(matches: int, concurrency: int) -> JSON:
    from scout.v1 import arena_pb2, game_pb2
    from scout_arena.server.connections import BotConnection, Handoff, payload
    from scout_arena.server.convert import ProtobufWire, bundle_bytes, read_answers
    from scout_arena.server.events import ActionAnswer, RotationAnswer
    from scout_arena.server.referee import Referee

    bot_s = [0.0]
    answers = [0]

    class BundlingOutbox:
        """A bot's stream: everything queued in one loop pass is written (handed off) as one
        message at the start of the next, and the bot's answers come back one pass later."""

        def __init__(self, streams: Any, connection: BotConnection,
                     loop: asyncio.AbstractEventLoop) -> None:
            self.items: list[Any] = []
            self.streams, self.connection, self.loop = streams, connection, loop
            self.scheduled = False

        def put(self, item: Any) -> None:
            if item is None:
                return
            self.items.append(item)
            if not self.scheduled:
                self.scheduled = True
                self.loop.call_soon(self.write)

        def __len__(self) -> int:
            return len(self.items)

        def write(self) -> None:
            self.scheduled = False
            items, self.items = self.items, []
            data = bundle_bytes([payload(i) for i in items]) if len(items) > 1 \
                else payload(items[0])
            for item in items:
                if isinstance(item, Handoff):
                    item.on_write()
            started = time.perf_counter()
            reply = self.answer(data)
            bot_s[0] += time.perf_counter() - started
            if reply is not None:
                self.loop.call_soon(self.read, reply)

        @staticmethod
        def answer(data: bytes) -> bytes | None:
            message = arena_pb2.RefereeMessage.FromString(data)
            inner = message.bundle.messages if message.WhichOneof("body") == "bundle" \
                else [message]
            out = []
            for each in inner:
                kind = each.WhichOneof("body")
                reply = arena_pb2.BotMessage()
                if kind == "decision_request":
                    request = each.decision_request
                    action = game_pb2.Action()
                    if request.legal_shows:
                        action.show.CopyFrom(request.legal_shows[0])
                    else:
                        action.scout.CopyFrom(request.legal_scouts[0])
                    reply.action.match_id = request.match_id
                    reply.action.request_id = request.request_id
                    reply.action.action.CopyFrom(action)
                elif kind == "rotation_request":
                    rotation = each.rotation_request
                    reply.rotation.match_id = rotation.match_id
                    reply.rotation.request_id = rotation.request_id
                else:
                    continue
                out.append(reply)
            answers[0] += len(out)
            if not out:
                return None
            if len(out) == 1:
                return out[0].SerializeToString()
            return arena_pb2.BotMessage(
                bundle=arena_pb2.BotBundle(messages=out)).SerializeToString()

        def read(self, data: bytes) -> None:
            received_at = time.monotonic()
            for answer in read_answers(arena_pb2.BotMessage.FromString(data)):
                if not isinstance(answer, ActionAnswer | RotationAnswer):
                    raise SystemExit(f"the referee refused a bot message: {answer}")
                self.streams.route(self.connection, answer, received_at)

    async def play() -> None:
        names = [f"bot{i}" for i in range(4)]
        tokens = {f"token-{n}": n for n in names}
        try:
            referee = Referee(tokens, wire=ProtobufWire())
        except TypeError:  # --against a revision whose referee had its wire set afterwards
            referee = Referee(tokens)  # type: ignore[call-arg]
            referee.wire = ProtobufWire()
        # attach and route: the referee's own before it was split, its Streams' since.
        streams: Any = getattr(referee, "streams", referee)
        loop = asyncio.get_running_loop()
        for name in names:
            connection = BotConnection(referee.bots.entry(name), f"session-{name}", 1000, "v")
            connection.lean = connection.accepts_bundles = True
            connection.outbox = BundlingOutbox(streams, connection, loop)  # type: ignore[assignment]
            streams.attach(connection)
        done = asyncio.Event()
        counts = {"created": 0, "ended": 0}

        def start() -> None:
            counts["created"] += 1
            runner = referee.create_match(names, seed=counts["created"])
            assert runner.task is not None
            runner.task.add_done_callback(ended)

        def ended(_: object) -> None:
            counts["ended"] += 1
            if counts["created"] < matches:
                start()
            elif counts["ended"] == matches:
                done.set()

        for _ in range(min(concurrency, matches)):
            start()
        await done.wait()

    gc.disable()
    started = time.process_time()
    asyncio.run(play())
    cpu_s = time.process_time() - started
    return {"matches": matches, "answers": answers[0], "cpu_s": cpu_s, "bot_s": bot_s[0],
            "referee_us_per_answer": 1e6 * (cpu_s - bot_s[0]) / max(1, answers[0])}


# ----- the parent: runs side by side -----------------------------------------------------------

def run_child(source: Path, matches: int, concurrency: int) -> JSON:
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=source_path(source))
    out = subprocess.run([sys.executable, __file__, "--child", "--matches", str(matches),
                          "--concurrency", str(concurrency)],
                         env=env, check=True, capture_output=True, text=True, timeout=600)
    result: JSON = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="a git revision to measure side by side")
    parser.add_argument("--matches", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each side (alternating)")
    parser.add_argument("--quick", action="store_true", help="200 matches, 3 runs a side")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child_main(args.matches, args.concurrency)))
        return 0
    if args.quick:
        args.matches, args.repeat = 200, 3
    console = Console()
    with tempfile.TemporaryDirectory(prefix="scout-referee-cpu-") as tmp:
        sides: dict[str, Path] = {"this tree": ROOT}
        if args.against:
            sides[args.against] = worktree(args.against, Path(tmp))
        try:
            runs: dict[str, list[JSON]] = {name: [] for name in sides}
            for _ in range(args.repeat):
                for name, source in sides.items():
                    runs[name].append(run_child(source, args.matches, args.concurrency))
        finally:
            if args.against:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(sides[args.against])], check=False, capture_output=True)
    medians = {name: statistics.median(r["referee_us_per_answer"] for r in rs)
               for name, rs in runs.items()}
    table = Table(title=f"Referee CPU per accepted answer, in process: {args.matches} 4-player "
                        f"matches, {args.concurrency} at once, {args.repeat} runs a side")
    table.add_column("code")
    table.add_column("answers", justify="right")
    table.add_column("µs/answer, each run", justify="right")
    table.add_column("median µs", justify="right")
    table.add_column("vs this tree", justify="right")
    ours = medians["this tree"]
    for name, rs in runs.items():
        table.add_row(name, f"{rs[0]['answers']:,}",
                      " ".join(f"{r['referee_us_per_answer']:.1f}" for r in rs),
                      f"{medians[name]:.1f}", f"{medians[name] / ours:.3f}")
    console.print(table)
    console.print("[dim]the bots' own time (timed in process) is taken out; garbage collector "
                  "off; every run a fresh process with PYTHONHASHSEED=0[/dim]")
    if args.json:
        write_json(args.json, {"matches": args.matches, "concurrency": args.concurrency,
                               "runs": runs, "median_us_per_answer": medians}, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
