"""A scripted referee: a main and a node `scout.v1.Arena/Play` server that a test drives step by
step, to put a real bot process through messages a real referee sends only in rare states (a
ladder's Probation, an aborted or voided MatchEnded, a MatchAssignment re-sent after a Welcome).

Both servers run on one grpc.aio event loop in a thread of the test's process. Every Play call
becomes a `Call` as the bot opens it: the test reads what the bot sent (its Hello, its answers)
and says what the referee sends next, or ends the call (OK, or an error status). With
`refuse_main` set, new calls to the main server fail with UNAVAILABLE before any Welcome (a
referee that is down but whose port still answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2

EOF_: object = getattr(grpc.aio, "EOF")  # noqa: B009 - missing from grpc's type stubs
_END = object()


class Call:
    """One Play call, as the scripted referee sees it. Times are time.monotonic()."""

    def __init__(self, server: ScriptedReferee, role: str, authorization: str) -> None:
        self.server = server
        self.role = role
        self.authorization = authorization
        self.opened = time.monotonic()
        self.hello: arena_pb2.BotMessage | None = None
        self.received: list[arena_pb2.BotMessage] = []
        #: When the bot half-closed its side (the server read end of stream), if it did.
        self.half_closed: float | None = None
        #: When the call ended on the server's side (returned, aborted or cancelled).
        self.ended: float | None = None
        self._outbox: asyncio.Queue[Any] = asyncio.Queue()

    def __repr__(self) -> str:
        return (
            f"Call({self.role}, {self.authorization!r}, hello={self.hello is not None}, "
            f"received={len(self.received)}, half_closed={self.half_closed is not None}, "
            f"ended={self.ended is not None})"
        )

    # --- what the test says ----------------------------------------------------------------

    def send(self, *messages: arena_pb2.RefereeMessage) -> None:
        for message in messages:
            self.server.loop.call_soon_threadsafe(self._outbox.put_nowait, message)

    def abort(self, code: grpc.StatusCode, details: str = "scripted fault") -> None:
        """End the call with an error status (a fault: no Goodbye)."""
        self.server.loop.call_soon_threadsafe(self._outbox.put_nowait, (code, details))

    def end(self) -> None:
        """End the call with status OK (as a referee does after its Goodbye)."""
        self.server.loop.call_soon_threadsafe(self._outbox.put_nowait, _END)

    # --- what the test waits for -----------------------------------------------------------

    def wait_hello(self, timeout: float) -> arena_pb2.BotMessage:
        self.server.wait(lambda: self.hello is not None, timeout, f"no Hello on {self}")
        assert self.hello is not None
        return self.hello

    def wait_answer(self, match_id: str, request_id: int, timeout: float) -> arena_pb2.BotMessage:
        """The bot's answer (rotation or action) to request `request_id` of `match_id`."""
        found: list[arena_pb2.BotMessage] = []

        def answered() -> bool:
            found[:] = [m for m in self.received if answers(m, match_id, request_id)]
            return bool(found)

        self.server.wait(answered, timeout, f"no answer to {match_id}/{request_id} on {self}")
        return found[0]

    def wait_half_closed(self, timeout: float) -> float:
        self.server.wait(
            lambda: self.half_closed is not None or self.ended is not None,
            timeout,
            f"the bot did not half-close {self}",
        )
        assert self.half_closed is not None, f"the bot cancelled {self} instead of half-closing"
        return self.half_closed

    def answered(self, match_id: str, request_id: int) -> bool:
        with self.server.changed:
            return any(answers(m, match_id, request_id) for m in self.received)


def answers(message: arena_pb2.BotMessage, match_id: str, request_id: int) -> bool:
    kind = message.WhichOneof("body")
    if kind not in ("rotation", "action"):
        return False
    body = getattr(message, kind)
    return bool(body.match_id == match_id and body.request_id == request_id)


class _Arena(arena_pb2_grpc.ArenaServicer):
    def __init__(self, server: ScriptedReferee, role: str) -> None:
        self.server = server
        self.role = role

    # override: it writes through context.write() and returns None, as grpc.aio allows.
    async def Play(  # type: ignore[override]
        self, request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        metadata = dict(context.invocation_metadata() or ())
        call = Call(self.server, self.role, str(metadata.get("authorization")))
        refused = self.role == "main" and self.server.refuse_main
        self.server.record(call, refused)
        if refused:
            call.ended = time.monotonic()
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the scripted referee is down")
        reader = asyncio.ensure_future(self._read(call, context))
        try:
            while True:
                step = await call._outbox.get()
                if step is _END:
                    return
                if isinstance(step, tuple):
                    await context.abort(*step)
                await context.write(step)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            call.ended = time.monotonic()
            self.server.notify()

    async def _read(self, call: Call, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        while True:
            message = await context.read()
            with self.server.changed:
                if message is EOF_:
                    call.half_closed = time.monotonic()
                elif call.hello is None and message.WhichOneof("body") == "hello":
                    call.hello = message
                else:
                    call.received.append(message)
                self.server.changed.notify_all()
            if message is EOF_:
                return


class ScriptedReferee:
    """The main and node servers on 127.0.0.1, and every call they took, by role."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.calls: dict[str, list[Call]] = {"main": [], "node": []}
        #: Calls to the main server refused (UNAVAILABLE) while `refuse_main` was set.
        self.refused: list[Call] = []
        self.refuse_main = False
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        ports = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        self.main_address, self.node_address = (f"127.0.0.1:{port}" for port in ports)

    async def _start(self) -> tuple[int, int]:
        ports = []
        self._servers = []
        for role in ("main", "node"):
            server = grpc.aio.server()
            arena_pb2_grpc.add_ArenaServicer_to_server(_Arena(self, role), server)
            ports.append(server.add_insecure_port("127.0.0.1:0"))
            await server.start()
            self._servers.append(server)
        return ports[0], ports[1]

    def close(self) -> None:
        async def stop() -> None:
            await asyncio.gather(*(server.stop(None) for server in self._servers))

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def record(self, call: Call, refused: bool) -> None:
        with self.changed:
            (self.refused if refused else self.calls[call.role]).append(call)
            self.changed.notify_all()

    def notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(predicate, timeout):
                raise AssertionError(f"{what} within {timeout:.0f} s")

    def call(self, role: str, index: int, timeout: float) -> Call:
        """The `index`-th call (0-based) the bot opened to the `role` server."""
        self.wait(
            lambda: len(self.calls[role]) > index,
            timeout,
            f"no {role} call #{index + 1} (calls: {self.calls})",
        )
        return self.calls[role][index]


# --- the referee's messages ------------------------------------------------------------------


def welcome(name: str, session: str, resumed: bool = False) -> arena_pb2.RefereeMessage:
    return arena_pb2.RefereeMessage(
        welcome=arena_pb2.Welcome(
            protocol_version=1, bot_name=name, session_id=session, resumed=resumed
        )
    )


def match_start(match_id: str, name: str, resumed: bool = False) -> arena_pb2.RefereeMessage:
    return arena_pb2.RefereeMessage(
        match_start=arena_pb2.MatchStart(
            match_id=match_id,
            seat=0,
            player_names=[name, "other"],
            num_players=2,
            num_rounds=2,
            time_control=game_pb2.TimeControl(decision_ms=5000, time_bank_ms=10_000),
            resumed=resumed,
            time_bank_ms=10_000,
        )
    )


def rotation_request(match_id: str, request_id: int) -> arena_pb2.RefereeMessage:
    hand = [game_pb2.Card(face=face, other=face + 1) for face in range(1, 10)]
    return arena_pb2.RefereeMessage(
        rotation_request=arena_pb2.RotationRequest(
            match_id=match_id,
            request_id=request_id,
            round_index=0,
            hand=hand,
            deadline_ms=5000,
            time_bank_ms=10_000,
        )
    )


def assignment(match_id: str, address: str, ticket: str) -> arena_pb2.RefereeMessage:
    return arena_pb2.RefereeMessage(
        assignment=arena_pb2.MatchAssignment(match_id=match_id, address=address, ticket=ticket)
    )


def probation(
    active: bool, reason: str = "", lifted_by_reconnect: bool = False
) -> arena_pb2.RefereeMessage:
    return arena_pb2.RefereeMessage(
        probation=arena_pb2.Probation(
            active=active, reason=reason, lifted_by_reconnect=lifted_by_reconnect
        )
    )


def match_ended(
    match_id: str, status: arena_pb2.MatchEndStatus.ValueType, reason: str = ""
) -> arena_pb2.RefereeMessage:
    """A MatchEnded as a referee sends it: a result only when the match was played out."""
    played = status in (arena_pb2.MATCH_END_STATUS_UNSPECIFIED, arena_pb2.MATCH_END_STATUS_FINISHED)
    ended = arena_pb2.MatchEnded(match_id=match_id, status=status, reason=reason)
    if played:
        ended.totals.extend([7, 3])
        ended.ranks.extend([1, 2])
        ended.record_id = match_id
    return arena_pb2.RefereeMessage(match_ended=ended)


def goodbye(
    reason: arena_pb2.GoodbyeReason.ValueType,
    message: str,
    reconnect: bool,
    retry_after_ms: int = 0,
) -> arena_pb2.RefereeMessage:
    return arena_pb2.RefereeMessage(
        goodbye=arena_pb2.Goodbye(
            reason=reason,
            message=message,
            reconnect=reconnect,
            retry_after_ms=retry_after_ms,
        )
    )
