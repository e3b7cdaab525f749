"""The SDK's node streams (PROTOCOL.md §3.8) on their own: what is not seen from the kits'
conformance test (tests/test_kit_assignments.py), such as a node that never answers."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from grpc import aio
from scout_client import Assignment, RandomBot
from scout_client.decisions import BotCalls
from scout_client.matches import Tally
from scout_client.nodes import NodeStreams
from scout_client.types import PROTOCOL_VERSION, Hello
from support.ports import free_port


def test_a_node_unreachable_past_the_limit_loses_its_tickets_and_its_stream_is_let_go() -> None:
    async def scenario() -> tuple[list[str], list[str], bool]:
        stop = asyncio.Event()
        with ThreadPoolExecutor(2) as executor:
            nodes = NodeStreams(
                BotCalls(RandomBot(), executor), Tally(None, stop),
                Hello("b", "1", PROTOCOL_VERSION, 1, True),
                lambda address, tls: aio.insecure_channel(address), stop,
                safety_margin_ms=100, use_time_bank=True, unreachable_after_s=0.6)
            address = f"127.0.0.1:{free_port()}"
            nodes.assign(Assignment("m-1", address, "ticket-1"))
            nodes.assign(Assignment("m-2", address, "ticket-2"))
            at_first = nodes.open_addresses
            for _ in range(100):
                await asyncio.sleep(0.1)
                if not nodes.open_addresses:
                    break
            after = nodes.open_addresses
            await nodes.close()
            return at_first, after, stop.is_set()

    at_first, after, stopped = asyncio.run(scenario())
    assert at_first and not after, "the unreachable node was never let go"
    assert not stopped, "giving up on a node must not stop the bot"
