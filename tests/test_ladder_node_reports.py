"""A node's report is settled even when the node's stream is cut while the ladder stores it."""

from __future__ import annotations

import asyncio
from typing import Any

from scout.v1 import nodes_pb2
from scout_ladder.nodes import NodeRegistry, NodesServicer


class SlowEvents:
    """Stores a report in two steps (the database, then the ladder's memory) with a wait
    between them, as `LadderService._record_result` awaits its database write."""

    def __init__(self) -> None:
        self.in_database: list[str] = []
        self.in_memory: list[str] = []
        self.writing = asyncio.Event()
        self.release = asyncio.Event()

    async def node_match_ended(self, node: Any, match_id: str, record_json: str | None,
                               failure: str) -> tuple[bool, str]:
        self.in_database.append(match_id)
        self.writing.set()
        await self.release.wait()
        self.in_memory.append(match_id)
        return True, "rated"

    def node_attached(self, *args: Any) -> None: ...

    def node_lost(self, *args: Any) -> None: ...


class Node:
    name = "n1"

    def __init__(self) -> None:
        self.matches = {"m-1"}
        self.sent: list[Any] = []

    def send(self, message: Any) -> None:
        self.sent.append(message)


def test_a_report_is_settled_in_full_when_the_nodes_stream_is_cancelled_meanwhile() -> None:
    async def main() -> SlowEvents:
        events = SlowEvents()
        servicer = NodesServicer(NodeRegistry(), events, "node-token")  # type: ignore[arg-type]
        handler = asyncio.ensure_future(servicer._ended(  # the stream's handler, in effect
            Node(), nodes_pb2.NodeMatchEnded(match_id="m-1")))  # type: ignore[arg-type]
        await events.writing.wait()
        handler.cancel()  # grpc cancels the handler when the node's connection drops
        await asyncio.gather(handler, return_exceptions=True)
        assert handler.cancelled()
        events.release.set()
        for _ in range(100):
            if events.in_memory:
                break
            await asyncio.sleep(0.01)
        return events

    events = asyncio.run(main())
    assert events.in_database == events.in_memory == ["m-1"]
