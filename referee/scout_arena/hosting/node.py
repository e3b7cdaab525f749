"""Hosting on a referee node (``referee serve --join``): the node fetches a hosted seat's
files from its ladder (`Nodes.FetchBotFiles`: code by SHA-256, cached; the data folder for
each match), runs the bot (`host.Host`), and sends each run's report and data folder back
(`Nodes.ReportHostedRun`), retrying while the link is down.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc
from scout.v1 import nodes_pb2, nodes_pb2_grpc

from ..sandbox import SandboxSupport
from ..server.node import LinkDown, NodeLink
from ..server.referee import Referee
from .files import CodeCache, DataFolderError
from .host import Host, HostedBot, Launcher, RunReport

log = logging.getLogger("scout_arena.hosting")

CHUNK_BYTES = 32 * 1024
"""Chunks of files on the node link: well under the ladder's 64 KiB message limit."""
REPORT_TAIL_CHARS = 32 * 1024
REPORT_RETRIES = 8
MAX_FETCH_BYTES = 64 * 2**20


class NodeHosting:
    """The `server.node.NodeHosting` seam of a node that can run sandboxes."""

    def __init__(self, referee: Referee, launcher: Launcher, workdir: Path,
                 support: SandboxSupport, data_limit_bytes: int, *,
                 remove_workdir: bool = False) -> None:
        self.support = support
        self.workdir = workdir
        self.remove_workdir = remove_workdir
        """Remove ``workdir`` at `close` (a temporary one)."""
        self.cache = CodeCache(workdir / "code")
        self.host = Host(referee, launcher, workdir, on_report=self._report,
                         data_limit_bytes=data_limit_bytes)
        self.link: NodeLink | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def can_host(self) -> bool:
        return self.support.available

    @property
    def problem(self) -> str:
        return "" if self.support.available else self.support.reason

    def assigned(self, link: NodeLink, assign: nodes_pb2.AssignMatch) -> None:
        self.link = link
        seats = [seat for seat in assign.seats if seat.HasField("hosted")]
        task = asyncio.get_running_loop().create_task(
            self._prepare(link, assign.match_id, seats), name=f"host {assign.match_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancelled(self, match_id: str) -> None:
        self.host.release(match_id)

    async def _prepare(self, link: NodeLink, match_id: str,
                       seats: Sequence[nodes_pb2.SeatTicket]) -> None:
        bots = []
        for seat in seats:
            try:
                bots.append(await self._files(link, match_id, seat))
            except (grpc.aio.AioRpcError, LinkDown, DataFolderError, OSError, ValueError) as exc:
                # The node's trouble, not the bot's: its seat plays absent, no run is reported.
                log.error("cannot get the files of hosted bot %s for match %s: %s",
                          seat.bot_name, match_id, exc)
        await self.host.start(match_id, bots)

    async def _files(self, link: NodeLink, match_id: str,
                     seat: nodes_pb2.SeatTicket) -> HostedBot:
        sha = seat.hosted.code_sha256
        cached = self.cache.get(sha)
        if cached is None:
            archive = await self._fetch(link, match_id, seat.bot_name,
                                        nodes_pb2.BOT_FILES_KIND_CODE)
            cached = await asyncio.to_thread(self.cache.put, sha, archive)
        data = b""
        if seat.hosted.data_size:
            data = await self._fetch(link, match_id, seat.bot_name,
                                     nodes_pb2.BOT_FILES_KIND_DATA)
        return HostedBot(seat.bot_name, cached[0], cached[1], data)

    async def _fetch(self, link: NodeLink, match_id: str, bot: str,
                     kind: nodes_pb2.BotFilesKind.ValueType) -> bytes:
        stub = nodes_pb2_grpc.NodesStub(link.channel())
        parts = []
        size = 0
        call = stub.FetchBotFiles(nodes_pb2.FetchBotFilesRequest(
            match_id=match_id, bot_name=bot, kind=kind), metadata=link.metadata(), timeout=60)
        async for chunk in call:
            size += len(chunk.data)
            if size > MAX_FETCH_BYTES:
                call.cancel()
                raise ValueError(f"the ladder sent more than {MAX_FETCH_BYTES} bytes")
            parts.append(chunk.data)
        return b"".join(parts)

    async def _report(self, report: RunReport) -> None:
        link = self.link
        if link is None:
            return
        header = nodes_pb2.HostedRunReport(
            match_id=report.match_id, bot_name=report.bot_name, connected=report.connected,
            ended_early=report.ended_early,
            exit_code=-1 if report.outcome.exit_code is None else report.outcome.exit_code,
            signal=report.outcome.signal or 0, reason=report.outcome.reason[:1000],
            output_tail=report.outcome.output_tail[-REPORT_TAIL_CHARS:],
            data_size=len(report.data or b""), data_problem=report.data_problem,
            interrupted=report.interrupted)
        delay = 0.2
        for attempt in range(REPORT_RETRIES):
            try:
                await self._send(link, header, report.data or b"")
                return
            except (grpc.aio.AioRpcError, LinkDown) as exc:
                log.warning("report of hosted bot %s in match %s not sent (attempt %d): %s",
                            report.bot_name, report.match_id, attempt + 1, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        log.error("gave up sending the report of hosted bot %s in match %s", report.bot_name,
                  report.match_id)

    @staticmethod
    async def _send(link: NodeLink, header: nodes_pb2.HostedRunReport, data: bytes) -> None:
        async def parts() -> AsyncIterator[nodes_pb2.HostedRunPart]:
            yield nodes_pb2.HostedRunPart(report=header)
            for start in range(0, len(data), CHUNK_BYTES):
                yield nodes_pb2.HostedRunPart(
                    data=nodes_pb2.FileChunk(data=data[start:start + CHUNK_BYTES]))

        stub = nodes_pb2_grpc.NodesStub(link.channel())
        reply = await stub.ReportHostedRun(parts(), metadata=link.metadata(), timeout=60)
        if not reply.stored:
            log.warning("the ladder did not store the run of %s in match %s: %s",
                        header.bot_name, header.match_id, reply.note)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.host.close()
        if self.remove_workdir:
            await asyncio.to_thread(shutil.rmtree, self.workdir, True)


