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
        servicer = NodesServicer(NodeRegistry(), events, "node-token")
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


def test_a_nodes_heartbeat_timeout_stretches_to_its_late_heartbeats_within_a_bound() -> None:
    """Issue 30: a loaded but healthy node was dropped for "no heartbeat for 8.0 s". The
    timeout follows the node's recent heartbeat gaps (3x the longest), from the configured
    one up to 4x it: late but steady heartbeats keep a node, silence still loses it."""
    from scout_ladder.nodes import NodeSession

    registry = NodeRegistry(heartbeat_s=1.0, heartbeat_timeout_s=5.0)
    node = NodeSession(node_id="n", address="a:1", name="a", capacity=4, version="t",
                       tls=False, attached_at=0.0)
    assert registry.timeout_for(node) == 5.0  # no heartbeat seen yet: as configured
    node.gaps.extend([1.0, 1.1, 0.9])
    assert registry.timeout_for(node) == 5.0  # prompt heartbeats: as configured
    node.gaps.append(2.5)  # the host got busy
    assert registry.timeout_for(node) == 7.5
    node.gaps.append(30.0)
    assert registry.timeout_for(node) == 20.0  # never past 4x the configured timeout
    node.gaps.extend([1.0] * 30)  # the old gaps age out
    assert registry.timeout_for(node) == 5.0


def test_a_node_with_late_steady_heartbeats_stays_and_a_silent_one_is_lost() -> None:
    """The watchdog over a real `NodesServicer` handler: heartbeats every 0.5 s then
    every 1.2 s (past the configured 1 s timeout) keep the node; silence loses it, with the
    timeout it had in the reason."""

    class Events:
        def __init__(self) -> None:
            self.lost: list[str] = []

        def node_attached(self, *args: Any) -> None: ...

        def node_lost(self, node: Any, reason: str) -> None:
            self.lost.append(reason)

    class Context:
        def invocation_metadata(self) -> list[tuple[str, str]]:
            return [("authorization", "Bearer node-token")]

    async def main() -> tuple[list[str], list[str]]:
        events = Events()
        registry = NodeRegistry(heartbeat_s=0.25, heartbeat_timeout_s=1.0)
        servicer = NodesServicer(registry, events, "node-token")  # type: ignore[arg-type]
        incoming: asyncio.Queue[nodes_pb2.NodeMessage | None] = asyncio.Queue()

        async def messages() -> Any:
            while (message := await incoming.get()) is not None:
                yield message

        incoming.put_nowait(nodes_pb2.NodeMessage(hello=nodes_pb2.NodeHello(
            address="127.0.0.1:1", capacity=2, name="busy")))
        stream = servicer.Attach(messages(), Context())  # type: ignore[arg-type]
        welcome = await stream.__anext__()
        assert welcome.WhichOneof("body") == "welcome"
        drain = asyncio.ensure_future(stream.__anext__())
        beat = nodes_pb2.NodeMessage(heartbeat=nodes_pb2.NodeHeartbeat(rss_bytes=1))
        for gap in [0.5] * 3 + [1.2] * 4:
            await asyncio.sleep(gap)
            incoming.put_nowait(beat)
        await asyncio.sleep(0.1)
        lost_while_beating = list(events.lost)
        await asyncio.wait_for(asyncio.gather(drain, return_exceptions=True), 30)
        return lost_while_beating, events.lost

    while_beating, lost = asyncio.run(main())
    assert while_beating == []
    assert len(lost) == 1 and lost[0].startswith("no heartbeat for "), lost
    timeout = float(lost[0].split("(its timeout ")[1].removesuffix(" s)"))
    assert 3.6 <= timeout <= 4.0, lost  # 3x the 1.2 s gaps, within 4x the configured 1 s
