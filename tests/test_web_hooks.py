"""The hooks that serve the web pages: the ladder process (in its own loop, and on nodes with its
node report) and `scout-arena web` for a tournament directory."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from support.ports import free_port
from support.web_site import (  # noqa: F401  (the *_fixture names: pytest fixtures)
    SCOUT_ARENA,
    ladder_repo_fixture,
    tournament_dir_fixture,
)


def test_ladder_serves_the_pages_in_its_own_loop(ladder_repo: Any) -> None:
    import asyncio

    import httpx
    from scout_ladder.service import Ladder, LadderConfig

    async def main() -> tuple[Any, Any]:
        ladder = Ladder(ladder_repo, LadderConfig(port=0, web_port=0))
        await ladder.start()
        try:
            assert ladder.web_address is not None
            async with httpx.AsyncClient(base_url=f"http://{ladder.web_address}") as client:
                board = (await client.get("/api/leaderboard")).json()
                replay = (await client.get("/api/matches/m-0001/replay")).json()
        finally:
            await ladder.stop()
        return board, replay

    board, replay = asyncio.run(main())
    assert {row["bot"] for row in board} == {"alpha", "bravo", "charlie", "delta"}
    assert replay["players"] == ["alpha", "bravo"]


def test_ladder_on_nodes_serves_its_node_report(ladder_repo: Any) -> None:
    import asyncio

    import httpx
    from scout.v1 import nodes_pb2
    from scout_ladder.nodes import NodeSession
    from scout_ladder.service import Ladder, LadderConfig

    async def fetch(config: LadderConfig) -> tuple[Any, Any]:
        ladder = Ladder(ladder_repo, config)
        await ladder.start()
        try:
            assert ladder.web_address is not None
            async with httpx.AsyncClient(base_url=f"http://{ladder.web_address}") as client:
                info = (await client.get("/api/info")).json()
                got = await client.get("/api/nodes")
                if ladder.nodes is not None:
                    assert got.json() == {"nodes": []}
                    # a node attached (full, so the scheduler leaves it alone)
                    ladder.nodes.nodes["10.1.1.1:7000"] = NodeSession(
                        "n-1",
                        "10.1.1.1:7000",
                        "rack-1",
                        2,
                        "0.9.1",
                        False,
                        time.time(),
                        matches={"x-1", "x-2"},
                        last_heartbeat=time.monotonic(),
                        heartbeat=nodes_pb2.NodeHeartbeat(
                            running_matches=2,
                            connected_bots=5,
                            rss_bytes=64 * 2**20,
                            cpu_seconds=7.25,
                        ),
                    )
                    report = ladder.node_report()
                    got = await client.get("/api/nodes")
                    return info, (report, got.json())
                return info, got.status_code
        finally:
            await ladder.stop()

    info, status = asyncio.run(fetch(LadderConfig(port=0, web_port=0)))
    assert info["nodes"] is False and status == 404
    info, (report, got) = asyncio.run(fetch(LadderConfig(port=0, web_port=0, node_token="secret")))
    assert info["nodes"] is True
    [node] = got["nodes"]
    assert {k: v for k, v in node.items() if k not in ("attached_at_iso", "heartbeat_age_s")} == {
        k: v for k, v in report[0].items() if k != "heartbeat_age_s"
    }
    assert (
        node["name"],
        node["matches"],
        node["capacity"],
        node["connected_bots"],
        node["rss_mb"],
        node["cpu_s"],
    ) == ("rack-1", 2, 2, 5, 64.0, 7.2)
    assert 0 <= node["heartbeat_age_s"] < 5 and node["attached_at_iso"].endswith("+00:00")


def test_cli_serves_a_tournament_dir(tournament_dir: Path) -> None:
    import httpx

    port = free_port()
    process = subprocess.Popen(
        [str(SCOUT_ARENA), "web", str(tournament_dir), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                board = httpx.get(f"http://127.0.0.1:{port}/api/leaderboard").json()
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stdout and process.stdout.read()
                assert time.monotonic() < deadline, "scout-arena web did not start"
                time.sleep(0.1)
        assert [row["bot"] for row in board] == [
            s["bot"] for s in json.loads((tournament_dir / "summary.json").read_text())["standings"]
        ]
    finally:
        process.terminate()
        process.wait(10)
