"""Hosted seats on a referee node (``referee serve --join``), a real node process against the
ladder's real Nodes service (NodesServicer with the hosting calls, over a stand-in repository):
the node says it can host, fetches the bot's code once and its data folder for each match,
runs it in its sandbox and sends back the run's report and data folder."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from scout.v1 import game_pb2, nodes_pb2, nodes_pb2_grpc
from scout_arena.hosting import sha256_hex
from scout_arena.sandbox import pack_folder
from scout_ladder.hosted import HostedBots
from scout_ladder.hostedfiles import HostedFiles
from scout_ladder.nodes import NodeRegistry, NodeSession, NodesServicer
from support.hosting import bot_folder, run_async, stop_processes

TOKEN = "node-token-for-tests"
TC = game_pb2.TimeControl(decision_ms=1000, time_bank_ms=5000)


@dataclass
class Store:
    """The repository's hosting calls, on files under a temporary folder."""

    root: Path
    runs: list[tuple[str, str, str, str]] = field(default_factory=list)
    paused: dict[str, str | None] = field(default_factory=dict)

    def upload_path(self, name: str, version: int) -> Path:
        return self.root / "uploads" / f"{name}-{version}.tar.gz"

    def data_dir(self, name: str, *, as_owner: str | None = None) -> Path:
        return self.root / "data" / name

    def record_hosted_run(self, name: str, match_id: str, version: int, outcome_reason: str,
                          output_tail: str) -> object:
        self.runs.append((name, match_id, outcome_reason, output_tail))
        return None

    def set_paused(self, name: str, reason: str | None) -> object:
        self.paused[name] = reason
        return None


@dataclass
class Row:
    name: str
    version: int = 1
    retired: bool = False
    kind: str = "hosted"
    paused_reason: str | None = None
    suspended_reason: str | None = None


@dataclass
class Version:
    version: int
    archive_sha256: str | None
    archive_size: int | None


class Events:
    def __init__(self) -> None:
        self.ended: dict[str, asyncio.Future[str | None]] = {}

    def node_attached(self, node: NodeSession, running: Sequence[str],
                      previous: NodeSession | None) -> None:
        pass

    def node_lost(self, node: NodeSession, reason: str) -> None:
        pass

    async def node_match_ended(self, node: NodeSession, match_id: str, record_json: str | None,
                               failure: str) -> tuple[bool, str]:
        future = self.ended.get(match_id)
        if future is not None and not future.done():
            future.set_result(record_json)
        return False, "test"


async def _ladder(store: Store, hosted: HostedBots
                  ) -> tuple[grpc.aio.Server, str, NodeRegistry, Events]:
    registry = NodeRegistry(0.5, 10.0)
    events = Events()
    servicer = NodesServicer(registry, events, TOKEN, HostedFiles(hosted, TOKEN, lambda m: True))
    server = grpc.aio.server()
    nodes_pb2_grpc.add_NodesServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}", registry, events


async def _node(address: str, tmp: Path, *extra: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "SCOUT_NODE_TOKEN": TOKEN}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scout_arena.cli", "referee", "serve", "--port", "0",
        "--records", str(tmp / "records"), "--join", address, "--node-name", "n1", *extra,
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)


async def _attached(registry: NodeRegistry) -> NodeSession:
    while not registry.live():
        await asyncio.sleep(0.05)
    return registry.live()[0]


async def _greedy(address: str, ticket: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": ticket,
           "SCOUT_CONCURRENCY": "1"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scout_client", "run", "greedy", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)


@run_async
async def test_a_node_runs_a_hosted_seat_and_sends_back_its_run_and_data(tmp_path: Path) -> None:
    store = Store(tmp_path / "ladder")
    archive = pack_folder(bot_folder("counter", tmp_path))
    store.upload_path("counter", 1).parent.mkdir(parents=True)
    store.upload_path("counter", 1).write_bytes(archive)
    hosted = HostedBots(store)
    hosted.refresh([Row("counter")], {"counter": Version(1, sha256_hex(archive), len(archive))})
    server, address, registry, events = await _ladder(store, hosted)
    node = await _node(address, tmp_path)
    remote = None
    try:
        session = await asyncio.wait_for(_attached(registry), 60)
        assert session.can_host, session.host_problem
        for index in range(2):
            match_id = f"m-hosted-{index}"
            events.ended[match_id] = asyncio.get_running_loop().create_future()
            hosted.seat(match_id, ["counter", "remote"])
            ticket = secrets.token_urlsafe(16)
            reply = await session.assign(
                match_id, [("counter", secrets.token_urlsafe(16)), ("remote", ticket)], index,
                TC, 30, {"counter": hosted.seat_message("counter")})
            assert reply.accepted, reply.reason
            remote = await _greedy(session.address, ticket)
            record = await asyncio.wait_for(events.ended[match_id], 60)
            assert record is not None and '"finished"' in record
            while "counter" in hosted.busy:  # freed by the run's report
                await asyncio.sleep(0.05)
            await stop_processes(remote)
            remote = None
            name, reported, reason, tail = store.runs[-1]
            assert (name, reported) == ("counter", match_id)
            assert f"run number {index + 1}" in tail, (reason, tail)
            assert (store.data_dir("counter") / "count").read_text() == str(index + 1)
    finally:
        await stop_processes(node, *([remote] if remote is not None else []))
        await server.stop(None)


@run_async
async def test_a_node_without_hosting_says_so_and_refuses_hosted_seats(tmp_path: Path) -> None:
    store = Store(tmp_path / "ladder")
    hosted = HostedBots(store)
    server, address, registry, _ = await _ladder(store, hosted)
    node = await _node(address, tmp_path, "--no-hosting")
    try:
        session = await asyncio.wait_for(_attached(registry), 60)
        assert not session.can_host and session.host_problem
        reply = await session.assign(
            "m-refused", [("h", "t" * 20), ("r", "u" * 20)], 1, TC, 5,
            {"h": nodes_pb2.HostedSeat(code_sha256="0" * 64, code_size=1, version=1)})
        assert not reply.accepted
        assert reply.reason == "this node does not host bots"
    finally:
        await stop_processes(node)
        await server.stop(None)


@run_async
async def test_the_hosting_calls_serve_only_seated_bots_and_only_with_the_node_token(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "ladder")
    archive = pack_folder(bot_folder("counter", tmp_path))
    store.upload_path("counter", 1).parent.mkdir(parents=True)
    store.upload_path("counter", 1).write_bytes(archive)
    hosted = HostedBots(store)
    hosted.refresh([Row("counter")], {"counter": Version(1, sha256_hex(archive), len(archive))})
    server, address, _, _ = await _ladder(store, hosted)
    request = nodes_pb2.FetchBotFilesRequest(match_id="m-1", bot_name="counter",
                                             kind=nodes_pb2.BOT_FILES_KIND_CODE)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = nodes_pb2_grpc.NodesStub(channel)
            node = (("authorization", f"Bearer {TOKEN}"),)
            for metadata, code in ((node, grpc.StatusCode.PERMISSION_DENIED),
                                   ((("authorization", "Bearer wrong"),),
                                    grpc.StatusCode.UNAUTHENTICATED)):
                try:
                    async for _ in stub.FetchBotFiles(request, metadata=metadata):
                        pass
                    raise AssertionError("files were sent")
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == code
            hosted.seat("m-1", ["counter"])
            chunks = [c.data async for c in stub.FetchBotFiles(request, metadata=node)]
            assert b"".join(chunks) == archive
    finally:
        await server.stop(None)
