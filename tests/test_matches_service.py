"""The Matches service against hostile, late and repeated calls: real servers on 127.0.0.1.

CreateMatch honours its caller's deadline and idempotency keys; the seed of a running match
reaches nobody; an empty admin token is refused; every error that echoes what a caller sent is
short, and nothing a caller sends makes the referee answer UNKNOWN or log a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import subprocess
import sys
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from referee_support import (
    ADMIN_TOKEN,
    admin_metadata,
    running_referee,
    start_bot,
    wait_connected,
)
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.server import Referee, RefereeFacade, RefereeServer, TimeControl
from scout_arena.server.calls import EOF
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.events import MatchSnapshot, MatchStatus
from scout_arena.server.idempotency import CreateRequest, IdempotencyKeys

T = TypeVar("T")
ADMIN = tuple(admin_metadata())
RUNNING = matches_pb2.MATCH_STATUS_RUNNING
FINISHED = matches_pb2.MATCH_STATUS_FINISHED
ABORTED = matches_pb2.MATCH_STATUS_ABORTED
LONG = game_pb2.TimeControl(decision_ms=60_000, time_bank_ms=1000)
"""A match that stays in its first rotation while the test looks at it."""
QUICK = TimeControl(20, 1)
"""A referee default under which bots that never answer forfeit in a few hundred ms and the
fallback plays the match out."""
TOKENS = {name: f"token-{name}" for name in ("a", "b", "c", "d", "e", "f")}
MAX_DETAILS = 400


# ----- in-process harness -------------------------------------------------------------------


class RawBot:
    """A bot stream that says Hello and then never answers (matches it sits in are played
    out by timeouts, forfeits and the fallback)."""

    def __init__(self, channel: grpc.aio.Channel, call: Any) -> None:
        self.channel = channel
        self.call = call

    @classmethod
    async def connect(cls, address: str, token: str, max_matches: int = 1) -> RawBot:
        channel = grpc.aio.insecure_channel(address)
        call = arena_pb2_grpc.ArenaStub(channel).Play(
            None, metadata=(("authorization", f"Bearer {token}"),))
        await call.write(arena_pb2.BotMessage(hello=arena_pb2.Hello(
            protocol_version=1, max_concurrent_matches=max_matches)))
        welcome = await call.read()
        assert isinstance(welcome, arena_pb2.RefereeMessage), welcome
        assert welcome.WhichOneof("body") == "welcome", welcome
        return cls(channel, call)

    async def close(self) -> None:
        await self.channel.close(None)


@contextlib.asynccontextmanager
async def serving(referee: Referee, bots: Sequence[str] = ()
                  ) -> AsyncIterator[tuple[RefereeServer, matches_pb2_grpc.MatchesAsyncStub,
                                           dict[str, RawBot]]]:
    server = RefereeServer(referee, admin_token=ADMIN_TOKEN)
    await server.start()
    connected: dict[str, RawBot] = {}
    channel = grpc.aio.insecure_channel(server.address)
    try:
        for name in bots:
            connected[name] = await RawBot.connect(server.address, TOKENS[name])
        yield server, matches_pb2_grpc.MatchesStub(channel), connected
    finally:
        await channel.close(None)
        for bot in connected.values():
            await bot.close()
        await server.stop()


async def rpc_error(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def wait_until(condition: Callable[[], Awaitable[T | None]], timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await condition()
        if value is not None:
            return value
        await asyncio.sleep(0.02)
    raise TimeoutError("condition not met in time")


def create_request(bots: Sequence[str], seed: int | None = None, key: str = "",
                   time_control: game_pb2.TimeControl | None = None
                   ) -> matches_pb2.CreateMatchRequest:
    request = matches_pb2.CreateMatchRequest(bots=list(bots), idempotency_key=key)
    if seed is not None:
        request.seed = seed
    if time_control is not None:
        request.time_control.CopyFrom(time_control)
    return request


# ----- 1a. the caller's deadline ---------------------------------------------------------------


class BusyReferee(Referee):
    """A referee whose event loop is so busy that a CreateMatch reaches the moment of
    creation only after its caller's deadline: once ``delay_s`` is set, reading the default
    time control (which CreateMatch does after its request has arrived, before it makes the
    match) blocks the loop that long, as a loop saturated by match traffic would."""

    delay_s = 0.0

    @property
    def default_time_control(self) -> TimeControl:
        if self.delay_s:
            time.sleep(self.delay_s)
        return self._default_tc

    @default_time_control.setter
    def default_time_control(self, value: TimeControl) -> None:
        self._default_tc = value


def test_a_create_match_that_reaches_creation_after_its_deadline_makes_no_match() -> None:
    async def main() -> None:
        referee = BusyReferee(TOKENS, wire=ProtobufWire())
        async with serving(referee, ["a", "b"]) as (_, stub, _bots):
            referee.delay_s = 0.5
            late = await rpc_error(stub.CreateMatch(
                create_request(["a", "b"], seed=1, time_control=LONG), metadata=ADMIN,
                timeout=0.2))
            assert late.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            referee.delay_s = 0.0
            await asyncio.sleep(0.2)  # the late handler has run by now
            # the caller gave up: no match was made and both bots are still free
            assert list(referee.matches) == []
            assert [referee.bots.get(n).free_slots for n in ("a", "b")] == [1, 1]  # type: ignore[union-attr]
            made = await stub.CreateMatch(create_request(["a", "b"], seed=1, time_control=LONG),
                                          metadata=ADMIN, timeout=5)
            assert list(referee.matches) == [made.match_id]

    asyncio.run(main())


def test_a_create_matches_call_that_reaches_creation_after_its_deadline_makes_nothing() -> None:
    async def main() -> None:
        referee = BusyReferee(TOKENS, wire=ProtobufWire())
        async with serving(referee, ["a", "b", "c", "d"]) as (_, stub, _bots):
            referee.delay_s = 0.5
            late = await rpc_error(stub.CreateMatches(matches_pb2.CreateMatchesRequest(matches=[
                create_request(["a", "b"], time_control=LONG),
                create_request(["c", "d"], time_control=LONG)]), metadata=ADMIN, timeout=0.2))
            assert late.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            referee.delay_s = 0.0
            await asyncio.sleep(1.2)  # the late handler has gone through both requests
            assert list(referee.matches) == []

    asyncio.run(main())


def test_create_matches_makes_each_request_in_order_and_says_why_for_those_it_could_not(
        ) -> None:
    async def main() -> None:
        referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=QUICK)
        async with serving(referee, ["a", "b", "c", "d", "e"]) as (_, stub, _bots):
            asked = matches_pb2.CreateMatchesRequest(matches=[
                create_request(["a", "b"], seed=1, key="batch-1", time_control=LONG),
                create_request(["c", "nobody"], time_control=LONG),
                create_request(["a", "c"], time_control=LONG),  # a's one slot is taken by now
                create_request(["c", "d"], seed=2, time_control=LONG),
            ])
            reply = await stub.CreateMatches(asked, metadata=ADMIN, timeout=5)
            assert [r.WhichOneof("outcome") for r in reply.results] == [
                "match", "error", "error", "match"]
            first, missing, busy, second = reply.results
            assert list(first.match.bots) == ["a", "b"] and first.match.status == RUNNING
            assert list(second.match.bots) == ["c", "d"]
            assert (missing.error.code, busy.error.code) == ("NOT_FOUND", "FAILED_PRECONDITION")
            assert "nobody" in missing.error.message and "'a'" in busy.error.message
            made = sorted([first.match.match_id, second.match.match_id])
            assert sorted(referee.matches) == made
            # a retry with the key, in a batch or alone, names the first match and makes none
            again = await stub.CreateMatches(
                matches_pb2.CreateMatchesRequest(matches=[asked.matches[0]]), metadata=ADMIN,
                timeout=5)
            assert again.results[0].match.match_id == first.match.match_id
            alone = await stub.CreateMatch(asked.matches[0], metadata=ADMIN, timeout=5)
            assert alone.match_id == first.match.match_id
            too_many = await rpc_error(stub.CreateMatches(matches_pb2.CreateMatchesRequest(
                matches=[create_request(["e", "a"])] * 1001), metadata=ADMIN, timeout=5))
            assert too_many.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "at most 1000" in (too_many.details() or "")
            no_token = await rpc_error(stub.CreateMatches(asked, timeout=5))
            assert no_token.code() == grpc.StatusCode.UNAUTHENTICATED
            assert sorted(referee.matches) == made

    asyncio.run(main())


# ----- 1b. idempotency keys ----------------------------------------------------------------------


def test_a_create_match_retried_with_its_idempotency_key_returns_the_first_match() -> None:
    async def main() -> None:
        referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=QUICK,
                          reconnect_grace_s=0.1,
                          keep_finished=0)
        async with serving(referee, list(TOKENS)) as (_, stub, bots):
            async def create(request: matches_pb2.CreateMatchRequest) -> matches_pb2.MatchInfo:
                info: matches_pb2.MatchInfo = await stub.CreateMatch(request, metadata=ADMIN,
                                                                     timeout=5)
                return info

            asked = create_request(["a", "b"], seed=5, key="retry-1", time_control=LONG)
            first = await create(asked)
            # the retry (a and b now have no free slot) gets the same match; none is made
            again = await create(asked)
            assert again.match_id == first.match_id and again.status == RUNNING
            assert list(referee.matches) == [first.match_id]
            # the same key for another request is refused and makes nothing
            for other in (create_request(["c", "d"], seed=5, key="retry-1", time_control=LONG),
                          create_request(["a", "b"], seed=6, key="retry-1", time_control=LONG),
                          create_request(["a", "b"], key="retry-1", time_control=LONG),
                          create_request(["b", "a"], seed=5, key="retry-1", time_control=LONG),
                          create_request(["a", "b"], seed=5, key="retry-1")):
                refused = await rpc_error(create(other))
                assert refused.code() == grpc.StatusCode.ALREADY_EXISTS
                details = refused.details() or ""
                assert "retry-1" in details and first.match_id in details
            assert list(referee.matches) == [first.match_id]
            # a call that makes no match takes no key
            missing = await rpc_error(create(create_request(["c", "nobody"], key="retry-2")))
            assert missing.code() == grpc.StatusCode.NOT_FOUND
            second = await create(create_request(["c", "d"], key="retry-2", time_control=LONG))
            assert (await create(create_request(["c", "d"], key="retry-2",
                                                time_control=LONG))).match_id == second.match_id
            # without a key every call is a new request: c and d are busy now
            busy = await rpc_error(create(create_request(["c", "d"], time_control=LONG)))
            assert busy.code() == grpc.StatusCode.FAILED_PRECONDITION
            # keys no call may use
            for key in ("k" * 129, "line\nbreak", "nul\x00"):
                bad = await rpc_error(create(create_request(["e", "f"], key=key)))
                assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "idempotency key" in (bad.details() or "")
                assert len(bad.details() or "") <= MAX_DETAILS

            # a retry after the match ended, once the referee keeps nothing of it (keep_finished
            # is 0 here), still names it, as it ended
            quick = create_request(["e", "f"], seed=77, key="retry-3")
            made = await create(quick)
            for name in ("e", "f"):
                await bots.pop(name).close()  # the seats forfeit after the grace

            async def ended() -> matches_pb2.MatchInfo | None:
                info = await create(quick)
                return info if info.status != RUNNING else None

            final = await wait_until(ended)
            assert final.match_id == made.match_id and final.status == FINISHED
            assert made.match_id not in referee.matches and final.seed == 77
            assert sorted(final.forfeited_seats) == [0, 1]

    asyncio.run(main())


def test_idempotency_keys_expire_after_their_window_and_are_bounded_in_number() -> None:
    now = [0.0]
    keys = IdempotencyKeys(window_s=60.0, max_keys=3, clock=lambda: now[0])

    def made(match_id: str) -> MatchSnapshot:
        return MatchSnapshot(match_id, MatchStatus.RUNNING, ("a", "b"), 1, TimeControl(), 0,
                             (0, 0), (), ())

    asked = CreateRequest(("a", "b"), 1, TimeControl())
    keys.remember("k0", asked, made("m0"))
    assert keys.find("k0", asked) is not None
    now[0] = 59.9
    assert keys.find("k0", asked) is not None
    now[0] = 60.0
    assert keys.find("k0", asked) is None and len(keys) == 0  # the window has passed
    for i in range(1, 5):
        keys.remember(f"k{i}", asked, made(f"m{i}"))
    assert len(keys) == 3 and keys.find("k1", asked) is None  # the oldest went first
    assert not keys.holds("m1") and keys.holds("m4")
    ended = MatchSnapshot("m4", MatchStatus.FINISHED, ("a", "b"), 1, TimeControl(), 1,
                          (3, 1), (), (1, 2))
    keys.match_ended(ended)
    assert keys.find("k4", asked) == ("m4", ended)


# ----- 1c. what a finished match leaves behind ------------------------------------------------


def test_a_finished_match_is_freed_without_the_cyclic_garbage_collector() -> None:
    """A runner that only a full collection could free (~1,200 objects a match) makes the
    full collections that stop the loop for most of a second at 10,000 bots come often."""
    async def main() -> None:
        referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=QUICK)
        async with serving(referee):
            runner = referee.create_match(["a", "b", "c"], seed=9, absent_ok=True)
            ref = weakref.ref(runner)
            task = runner.task
            assert task is not None
            del runner
            gc.collect()
            gc.disable()
            try:
                await asyncio.wait_for(task, 20)
                del task
                await asyncio.sleep(0.05)
                assert ref() is None, "the finished runner is kept alive by a reference cycle"
            finally:
                gc.enable()

    asyncio.run(main())


# ----- 2. the seed, and the admin token ----------------------------------------------------------


async def first_watch_event(stub: matches_pb2_grpc.MatchesAsyncStub, match_id: str
                            ) -> matches_pb2.SpectatorEvent:
    call = stub.WatchMatch(matches_pb2.WatchMatchRequest(match_id=match_id), metadata=ADMIN,
                           timeout=5)
    event = await call.read()
    call.cancel()
    assert isinstance(event, matches_pb2.SpectatorEvent), event
    return event


def test_the_seed_is_told_only_once_a_match_has_ended() -> None:
    async def main() -> None:
        referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=QUICK,
                          reconnect_grace_s=0.1)
        async with contextlib.AsyncExitStack() as stack:
            server, stub, bots = await stack.enter_async_context(
                serving(referee, ["a", "b", "c", "d"]))

            async def get(match_id: str) -> matches_pb2.MatchInfo:
                info: matches_pb2.MatchInfo = await stub.GetMatch(
                    matches_pb2.GetMatchRequest(match_id=match_id), metadata=ADMIN, timeout=5)
                return info

            async def listed(match_id: str) -> matches_pb2.MatchInfo:
                response = await stub.ListMatches(matches_pb2.ListMatchesRequest(),
                                                  metadata=ADMIN, timeout=5)
                [info] = [m for m in response.matches if m.match_id == match_id]
                return info

            held = await stub.CreateMatch(create_request(["a", "b"], seed=1234,
                                                         time_control=LONG),
                                          metadata=ADMIN, timeout=5)
            running = [held, await get(held.match_id), await listed(held.match_id),
                       (await first_watch_event(stub, held.match_id)).match_info]
            for info in running:
                assert info.match_id == held.match_id and info.status == RUNNING
                assert info.seed == 0

            # a match that finishes (its bots leave; the fallback plays it out)
            done = await stub.CreateMatch(create_request(["c", "d"], seed=4321), metadata=ADMIN,
                                          timeout=5)
            assert done.seed == 0
            for name in ("c", "d"):
                await bots.pop(name).close()

            async def finished() -> matches_pb2.MatchInfo | None:
                info = await get(done.match_id)
                return info if info.status != RUNNING else None

            assert (await wait_until(finished)).status == FINISHED
            ended = [await get(done.match_id), await listed(done.match_id),
                     (await first_watch_event(stub, done.match_id)).match_info]
            for info in ended:
                assert info.status == FINISHED and info.seed == 4321

            # a match aborted by the shutdown: its spectators' last event tells the seed
            watch = stub.WatchMatch(matches_pb2.WatchMatchRequest(match_id=held.match_id),
                                    metadata=ADMIN, timeout=20)
            first = await watch.read()
            assert isinstance(first, matches_pb2.SpectatorEvent), first
            assert first.match_info.seed == 0

            async def rest() -> list[matches_pb2.SpectatorEvent]:
                events: list[matches_pb2.SpectatorEvent] = []
                while (event := await watch.read()) is not EOF:
                    assert isinstance(event, matches_pb2.SpectatorEvent), event
                    events.append(event)
                return events

            reading = asyncio.ensure_future(rest())
            await asyncio.sleep(0.1)
            await server.stop()
            events = await asyncio.wait_for(reading, 20)
            last = events[-1]
            assert last.WhichOneof("body") == "match_info"
            assert last.match_info.status == ABORTED and last.match_info.seed == 1234
            assert all(e.match_info.seed == 0 for e in events[:-1]
                       if e.WhichOneof("body") == "match_info")

    asyncio.run(main())


@pytest.mark.parametrize("token", ["", " padded", "tab\t", "non-ascii-é"])
def test_an_admin_token_no_caller_could_send_is_refused_at_start(tmp_path: Path,
                                                                 token: str) -> None:
    with pytest.raises(ValueError, match="admin token"):
        RefereeServer(Referee({}, wire=ProtobufWire()), admin_token=token)
    with pytest.raises(ValueError, match="admin token"):
        RefereeFacade({}, admin_token=token)
    result = subprocess.run(
        [sys.executable, "-m", "scout_arena.cli", "referee", "serve", "--port", "0",
         "--records", str(tmp_path / "records"), "--admin-token", token],
        capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "--admin-token" in result.stderr and "admin token" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "records").exists()  # refused before it started anything


# ----- 3. hostile values to every Matches RPC ----------------------------------------------------

OFFLINE = "offline-" + "y" * 150
"""A registered bot with a long name that never connects."""


def test_hostile_values_to_every_matches_rpc_end_with_a_documented_status_and_no_traceback(
        tmp_path: Path) -> None:
    tokens = {"b0": "tok-b0", "b1": "tok-b1", OFFLINE: "tok-offline"}
    with running_referee(tmp_path, tokens) as referee:
        start_bot(referee, "random", "tok-b0")
        start_bot(referee, "random", "tok-b1")
        wait_connected(referee, ["b0", "b1"])
        with grpc.insecure_channel(referee.address) as channel:
            stub = matches_pb2_grpc.MatchesStub(channel)
            calls: list[tuple[str, grpc.StatusCode, Callable[[], Any]]] = []

            def create(label: str, code: grpc.StatusCode,
                       request: matches_pb2.CreateMatchRequest,
                       metadata: Sequence[tuple[str, str]] = ADMIN) -> None:
                calls.append((label, code, lambda: stub.CreateMatch(
                    request, metadata=tuple(metadata), timeout=10)))

            def raw(method: str, data: bytes, stream: bool = False) -> Callable[[], Any]:
                path = f"/scout.v1.Matches/{method}"
                if stream:
                    return lambda: list(channel.unary_stream(path, None, None)(
                        data, metadata=ADMIN, timeout=10))
                return lambda: channel.unary_unary(path, None, None)(data, metadata=ADMIN,
                                                                     timeout=10)

            def watch_all(request: matches_pb2.WatchMatchRequest) -> list[Any]:
                return list(stub.WatchMatch(request, metadata=ADMIN, timeout=10))

            bad = grpc.StatusCode
            create("10,000-character name", bad.NOT_FOUND, create_request(["x" * 10_000, "b0"]))
            create("registered, offline", bad.FAILED_PRECONDITION,
                   create_request([OFFLINE, "b0"]))
            for name in ("a\x00b", "tab\tname", "line\nname", "del\x7f", "c1\u0085"):
                create(f"control characters {name!r}", bad.INVALID_ARGUMENT,
                       create_request(["b0", name]))
            create("1,000 seats", bad.INVALID_ARGUMENT,
                   create_request([f"n{i}" for i in range(1000)]))
            create("one seat", bad.INVALID_ARGUMENT, create_request(["b0"]))
            create("two empty names", bad.INVALID_ARGUMENT, create_request(["", ""]))
            create("an empty name", bad.NOT_FOUND, create_request(["", "b0"]))
            for tc in (game_pb2.TimeControl(decision_ms=2**32 - 1),
                       game_pb2.TimeControl(time_bank_ms=2**32 - 1)):
                create(f"time control {tc}", bad.INVALID_ARGUMENT,
                       create_request(["b0", "b1"], time_control=tc))
            create("largest seed, unknown bot", bad.NOT_FOUND,
                   create_request(["nobody", "b0"], seed=2**64 - 1))
            create("10,000-character key", bad.INVALID_ARGUMENT,
                   create_request(["b0", "b1"], key="k" * 10_000))
            create("key with a newline", bad.INVALID_ARGUMENT,
                   create_request(["b0", "b1"], key="k\n"))
            create("message over 64 KiB", bad.RESOURCE_EXHAUSTED,
                   create_request(["z" * 70_000, "b0"]))
            create("long admin token", bad.UNAUTHENTICATED, create_request(["b0", "b1"]),
                   metadata=[("authorization", "Bearer " + "t" * 4000)])
            # over grpc's metadata limits (8 KiB soft, where calls are refused at random, and
            # 16 KiB hard): refused by the transport
            create("metadata over 16 KiB", bad.RESOURCE_EXHAUSTED, create_request(["b0", "b1"]),
                   metadata=[("authorization", "Bearer " + "t" * 20_000)])
            create("no Bearer scheme", bad.UNAUTHENTICATED, create_request(["b0", "b1"]),
                   metadata=[("authorization", ADMIN_TOKEN)])
            not_utf8 = b"\x0a\x02\xff\xfe"  # field 1 (a string) of bytes that are not UTF-8
            truncated = b"\x0a\x05ab"
            for method, stream in (("CreateMatch", False), ("CreateMatches", False),
                                   ("GetMatch", False),
                                   ("GetRecord", False), ("WatchMatch", True)):
                for label, data in (("not UTF-8", not_utf8), ("truncated", truncated)):
                    calls.append((f"{method} {label}", bad.INVALID_ARGUMENT,
                                  raw(method, data, stream)))
            for label, data in (("truncated varint", b"\x10"), ("truncated", truncated)):
                calls.append((f"ListMatches {label}", bad.INVALID_ARGUMENT,
                              raw("ListMatches", data)))
            for match_id in ("x" * 10_000, "\x00", "../../etc/passwd", "", "m-" + "\u202e" * 50):
                get = matches_pb2.GetMatchRequest(match_id=match_id)
                calls.append((f"GetMatch {match_id[:20]!r}", bad.NOT_FOUND,
                              partial(stub.GetMatch, get, metadata=ADMIN, timeout=10)))
                record = matches_pb2.GetRecordRequest(match_id=match_id)
                calls.append((f"GetRecord {match_id[:20]!r}", bad.NOT_FOUND,
                              partial(stub.GetRecord, record, metadata=ADMIN, timeout=10)))
                watch = matches_pb2.WatchMatchRequest(match_id=match_id)
                calls.append((f"WatchMatch {match_id[:20]!r}", bad.NOT_FOUND,
                              partial(watch_all, watch)))
            for limit, status in ((-1, 0), (2**31 - 1, 0), (0, 99), (5, -7)):
                listing = matches_pb2.ListMatchesRequest(
                    limit=limit, status=matches_pb2.MatchStatus.ValueType(status))
                calls.append((f"ListMatches limit={limit} status={status}", bad.OK,
                              partial(stub.ListMatches, listing, metadata=ADMIN, timeout=10)))

            for label, code, call in calls:
                try:
                    call()
                except grpc.RpcError as exc:
                    got, details = exc.code(), exc.details() or ""
                else:
                    got, details = grpc.StatusCode.OK, ""
                assert got == code, f"{label}: {got} ({details[:200]})"
                assert len(details) <= MAX_DETAILS, f"{label}: {len(details)}-character message"
            # the referee still makes matches
            made = stub.CreateMatch(create_request(["b0", "b1"], seed=3), metadata=ADMIN,
                                    timeout=10)
            assert made.status == RUNNING
        log = referee.log()
    problems = [line for line in log.splitlines()
                if "Traceback" in line or " ERROR " in line or "CRITICAL" in line]
    assert not problems, "\n".join(problems[:10])


def test_list_limits_read_zero_or_less_as_the_default_and_cap_a_large_one() -> None:
    """ListMatches (default 100, at most 1000) and ListLadderMatches (50, 500) as their protos
    say (issue 28)."""
    from scout_arena.server import list_limit
    from scout_arena.server.matches_service import LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
    from scout_ladder import ladder_api

    asked = (-5, 0, 1, 100, 1000, 1001, 2**31 - 1)
    assert [list_limit(n, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX) for n in asked] == \
        [100, 100, 1, 100, 1000, 1000, 1000]
    assert [list_limit(n, ladder_api.LIST_LIMIT_DEFAULT, ladder_api.LIST_LIMIT_MAX)
            for n in asked] == [50, 50, 1, 100, 500, 500, 500]
