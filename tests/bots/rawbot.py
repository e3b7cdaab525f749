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

import grpc
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2


def illegal_show(hand: list[int]) -> game_pb2.Show:
    for i in range(len(hand) - 1):
        a, b = hand[i], hand[i + 1]
        if a != b and abs(a - b) != 1:
            return game_pb2.Show(start=i, length=2)
    return game_pb2.Show(start=0, length=len(hand) + 1)


async def main(mode: str) -> None:
    address, token = os.environ["SCOUT_ADDRESS"], os.environ["SCOUT_TOKEN"]
    concurrency = int(os.environ.get("SCOUT_CONCURRENCY", "8"))
    async with grpc.aio.insecure_channel(address) as channel:
        call = arena_pb2_grpc.ArenaStub(channel).Play(
            metadata=[("authorization", f"Bearer {token}")])
        await call.write(arena_pb2.BotMessage(hello=arena_pb2.Hello(
            bot_name=f"raw-{mode}", protocol_version=1, max_concurrent_matches=concurrency)))
        answered = 0
        async for message in call:
            if mode == "hang":
                continue
            kind = message.WhichOneof("body")
            if kind == "rotation_request":
                r = message.rotation_request
                await call.write(arena_pb2.BotMessage(rotation=arena_pb2.RotationChoice(
                    match_id=r.match_id, request_id=r.request_id, rotate=False)))
            elif kind == "decision_request":
                d = message.decision_request
                if mode == "illegal":
                    action = game_pb2.Action(show=illegal_show(
                        [c.face for c in d.observation.hand]))
                elif d.legal_shows:
                    action = game_pb2.Action(show=d.legal_shows[0])
                else:
                    action = game_pb2.Action(scout=d.legal_scouts[0])
                if mode == "crash" and answered == 2:
                    os._exit(3)
                answered += 1
                await call.write(arena_pb2.BotMessage(action=arena_pb2.ActionChoice(
                    match_id=d.match_id, request_id=d.request_id, action=action)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
