"""The client processes of bench/nodes.py (a child mode of it): bots from a tokens file,
each on its own connection, reporting when they are seated and what they played."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import JSON, proc_status_kb
from procs import (
    raise_nofile,
)
from trivial_bot import serve_commands

# ----- the client processes (child mode) ----------------------------------------------------------


def client_main(args: argparse.Namespace) -> int:
    """``--count`` bots from ``--first`` of the tokens file, each a `run_bot` on its own
    connection. Prints ``R {json}`` once every bot has its Welcome (or failed), ``M {json}`` once
    every connected bot has had a MatchStart; answers ``stats T0 T1`` with ``S {json}``."""
    import scout_client.connection as connection
    from scout_client import RandomBot, run_bot
    from scout_client.matches import Matches

    raise_nofile()
    own_connection = connection.channel_options

    def channel_options() -> list[tuple[str, int]]:
        return [*own_connection(), ("grpc.use_local_subchannel_pool", 1)]

    connection.channel_options = channel_options  # what open_channel calls, for every channel
    resync = Matches.resync

    def on_welcome(self: Matches, welcome: Any) -> None:
        bot = getattr(getattr(self, "_calls", None), "bot", None)
        if isinstance(bot, PromptBot) and not bot.welcomed.is_set():
            bot.welcomed_at = time.monotonic()
            bot.welcomed.set()
        resync(self, welcome)

    Matches.resync = on_welcome  # type: ignore[method-assign]
    think_s = args.think_ms / 1000

    class PromptBot(RandomBot):
        """The random bot, on the event loop (no thread hop), after ``think_s``."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name
            self.welcomed = asyncio.Event()
            self.welcomed_at: float | None = None
            self.seated_at: float | None = None
            self.decisions = 0

        async def act(self, observation: Any) -> Any:  # type: ignore[override]
            if think_s:
                await asyncio.sleep(think_s)
            self.decisions += 1
            return RandomBot.act(self, observation)

        async def choose_rotation(self, request: Any) -> bool:  # type: ignore[override]
            return RandomBot.choose_rotation(self, request)

        async def on_match_start(self, start: Any) -> None:
            if self.seated_at is None:
                self.seated_at = time.monotonic()
                client.check()

        async def on_match_end(self, ended: Any) -> None:  # type: ignore[override]
            RandomBot.on_match_end(self, ended)

    class Client:
        def __init__(self, bots: list[tuple[PromptBot, str]]) -> None:
            self.bots = bots
            self.failed: Counter[str] = Counter()
            self.ready_sent = self.seated_sent = False

        def check(self) -> None:
            bots = [b for b, _ in self.bots]
            welcomed = [b.welcomed_at for b in bots if b.welcomed_at is not None]
            failed = sum(self.failed.values())
            if not self.ready_sent and len(welcomed) + failed >= len(bots):
                self.ready_sent = True
                emit(
                    "R",
                    {
                        "connected": len(welcomed),
                        "failed": dict(self.failed),
                        "last_at": max(welcomed, default=None),
                    },
                )
            seated = [b.seated_at for b in bots if b.seated_at is not None]
            if self.ready_sent and not self.seated_sent and len(seated) >= len(welcomed):
                self.seated_sent = True
                emit("M", {"seated": len(seated), "last_at": max(seated, default=None)})

        def stats(self, _t0: float, _t1: float) -> JSON:
            bots = [b for b, _ in self.bots]
            return {
                "welcomed_at": [b.welcomed_at for b in bots if b.welcomed_at is not None],
                "seated_at": [b.seated_at for b in bots if b.seated_at is not None],
                "decisions": sum(b.decisions for b in bots),
                "failed": dict(self.failed),
                "rss_kb": proc_status_kb(os.getpid()).get("VmRSS", 0),
            }

    def emit(kind: str, figures: JSON) -> None:
        sys.stdout.write(f"{kind} {json.dumps(figures)}\n")
        sys.stdout.flush()

    tokens = json.loads(Path(args.tokens).read_text())[args.first : args.first + args.count]
    client = Client([(PromptBot(name), token) for name, token in tokens])

    async def main() -> int:
        stop = asyncio.Event()
        gate = asyncio.Semaphore(args.connect_concurrency)

        async def one(bot: PromptBot, token: str) -> None:
            async with gate:
                task = asyncio.create_task(
                    run_bot(
                        bot,
                        args.client,
                        token,
                        max_concurrent_matches=args.concurrency,
                        stop_event=stop,
                    )
                )
                welcomed = asyncio.create_task(bot.welcomed.wait())
                await asyncio.wait(
                    [task, welcomed],
                    timeout=args.connect_timeout,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                welcomed.cancel()
            if not bot.welcomed.is_set():
                if task.done() and task.exception() is not None:
                    client.failed[type(task.exception()).__name__] += 1
                else:
                    client.failed["no Welcome in time"] += 1
                client.check()
            with contextlib.suppress(Exception):
                await task

        tasks = [asyncio.create_task(one(bot, token)) for bot, token in client.bots]
        await serve_commands(client.stats)
        stop.set()
        _, pending = await asyncio.wait(tasks, timeout=10)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return 0

    return asyncio.run(main())
