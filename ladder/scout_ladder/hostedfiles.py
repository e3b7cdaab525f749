"""The hosting calls of `scout.v1.Nodes` (nodes.proto): a node fetches a hosted seat's files
(`FetchBotFiles`) and reports how its run went with the data folder (`ReportHostedRun`).

Both take the node token, like `Attach`, and only for a hosted bot seated in a match the
ladder has in flight on a node: a node (or whoever holds the node token) cannot read any bot's
files but those it is playing now. Files go in 32 KiB chunks, under the 64 KiB message limit
the ladder's server keeps for everything it reads.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Callable

import grpc
from scout.v1 import nodes_pb2
from scout_arena.hosting import RunReport
from scout_arena.sandbox import RunOutcome
from scout_arena.server import RefereeFacade

from .hosted import HostedBots

log = logging.getLogger("scout_ladder.hosted")

Context = grpc.aio.ServicerContext[object, object]

CHUNK_BYTES = 32 * 1024
MAX_DATA_BYTES = 64 * 2**20


class HostedFiles:
    """The servicer methods; ``on_node(match_id)`` says whether a match is in flight on a
    node (which node does not matter: they share the token)."""

    def __init__(self, hosted: HostedBots, token: str,
                 on_node: Callable[[str], bool]) -> None:
        self.hosted = hosted
        self.token = token
        self.on_node = on_node

    async def _authorise(self, context: Context) -> None:
        if not RefereeFacade.tokens_equal(RefereeFacade.bearer_token(context), self.token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "hosting calls carry 'authorization: Bearer <node token>'")

    async def FetchBotFiles(self, request: nodes_pb2.FetchBotFilesRequest,
                            context: Context) -> AsyncIterator[nodes_pb2.FileChunk]:
        await self._authorise(context)
        name = request.bot_name
        if self.hosted.busy.get(name) != request.match_id or not self.on_node(request.match_id) \
                or name not in self.hosted.entries:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                f"{name!r} is not a hosted bot seated in match "
                                f"{request.match_id!r} on a node")
        if request.kind == nodes_pb2.BOT_FILES_KIND_CODE:
            data = await asyncio.to_thread(self.hosted.code, name)
        elif request.kind == nodes_pb2.BOT_FILES_KIND_DATA:
            data = await asyncio.to_thread(self.hosted.data, name)
        else:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "kind: CODE or DATA")
            raise AssertionError("abort raises")
        for start in range(0, len(data), CHUNK_BYTES):
            yield nodes_pb2.FileChunk(data=data[start:start + CHUNK_BYTES])

    async def ReportHostedRun(self, request_iterator: AsyncIterator[nodes_pb2.HostedRunPart],
                              context: Context) -> nodes_pb2.HostedRunStored:
        await self._authorise(context)
        header: nodes_pb2.HostedRunReport | None = None
        chunks = []
        size = 0
        async for part in request_iterator:
            if part.WhichOneof("body") == "report":
                if header is not None:
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "one report per call")
                header = part.report
            elif header is None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the report comes first")
            else:
                size += len(part.data.data)
                if size > min(header.data_size, MAX_DATA_BYTES):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                        "more data than the report announced")
                chunks.append(part.data.data)
        if header is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no report")
            raise AssertionError("abort raises")
        if self.hosted.busy.get(header.bot_name) != header.match_id:
            return nodes_pb2.HostedRunStored(stored=False, note="no such hosted run in flight")
        data = b"".join(chunks)
        if len(data) != header.data_size:
            return nodes_pb2.HostedRunStored(stored=False, note="the data is incomplete")
        report = RunReport(
            header.match_id, header.bot_name, header.connected, header.ended_early,
            RunOutcome(None if header.exit_code < 0 else header.exit_code,
                       header.signal or None, header.reason, header.output_tail),
            data if not header.data_problem else None, header.data_problem,
            interrupted=header.interrupted)
        note = await self.hosted.run_ended(report)
        log.info("hosted run of %s in match %s reported (%s, data %s)", header.bot_name,
                 header.match_id, report.why or "played", hashlib.sha256(data).hexdigest()[:8])
        return nodes_pb2.HostedRunStored(stored=True, note=note)
