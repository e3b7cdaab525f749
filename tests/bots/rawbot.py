"""A raw-protocol bot for tournament tests: misbehaves on purpose.

Usage: python rawbot.py MODE   with SCOUT_ADDRESS / SCOUT_TOKEN set. MODE:
  hang     connect, say Hello, then never answer anything
  illegal  answer every decision with a Show that is not a set or run (or out of range)
  crash    play the first legal move twice, then exit with status 3 mid-match
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import grpc
from scout.v1 import arena_pb2_grpc, game_pb2

# Run as a program: its folder is sys.path[0]; the shared test helpers are one level up.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
from support.oracle import strength
from support.rawbot import (
    action_choice,
    bearer,
    first_legal_action,
    hello,
    rotation_choice,
)


def illegal_show(hand: list[int]) -> game_pb2.Show:
    for i in range(len(hand) - 1):
        if strength(hand[i : i + 2]) is None:
            return game_pb2.Show(start=i, length=2)
    return game_pb2.Show(start=0, length=len(hand) + 1)


async def main(mode: str) -> None:
    address, token = os.environ["SCOUT_ADDRESS"], os.environ["SCOUT_TOKEN"]
    concurrency = int(os.environ.get("SCOUT_CONCURRENCY", "8"))
    async with grpc.aio.insecure_channel(address) as channel:
        call = arena_pb2_grpc.ArenaStub(channel).Play(None, metadata=bearer(token))
        await call.write(hello(f"raw-{mode}", version="", max_matches=concurrency))
        answered = 0
        async for message in call:
            if mode == "hang":
                continue
            kind = message.WhichOneof("body")
            if kind == "rotation_request":
                r = message.rotation_request
                await call.write(rotation_choice(r.match_id, r.request_id))
            elif kind == "decision_request":
                d = message.decision_request
                if mode == "illegal":
                    action = game_pb2.Action(show=illegal_show(
                        [c.face for c in d.observation.hand]))
                else:
                    action = first_legal_action(d)
                if mode == "crash" and answered == 2:
                    print("rawbot: crashing on purpose", file=sys.stderr, flush=True)
                    os._exit(3)
                answered += 1
                await call.write(action_choice(d.match_id, d.request_id, action))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
