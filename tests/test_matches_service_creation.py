"""The Matches service against hostile, late and repeated calls: real servers on 127.0.0.1 (the
harness is tests/support/matches_harness.py). CreateMatch honours its caller's deadline and
idempotency keys, and a finished match is freed without the cyclic garbage collector."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

import grpc
from scout.v1 import matches_pb2
from scout_arena.server import Referee
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.events import MatchSnapshot, MatchStatus
from scout_arena.server.idempotency import CreateRequest, IdempotencyKeys
from scout_rules.protocol import TimeControl
from support.matches_harness import (
    ADMIN,
    FINISHED,
    LONG,
    MAX_DETAILS,
    QUICK,
    RUNNING,
    TOKENS,
    create_request,
    rpc_error,
    serving,
    wait_until,
)


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
            late = await rpc_error(
                stub.CreateMatch(
                    create_request(["a", "b"], seed=1, time_control=LONG),
                    metadata=ADMIN,
                    timeout=0.2,
                )
            )
            assert late.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            referee.delay_s = 0.0
            await asyncio.sleep(0.2)  # the late handler has run by now
            # the caller gave up: no match was made and both bots are still free
            assert list(referee.matches) == []
            assert [referee.bots.get(n).free_slots for n in ("a", "b")] == [1, 1]  # type: ignore[union-attr]
            made = await stub.CreateMatch(
                create_request(["a", "b"], seed=1, time_control=LONG), metadata=ADMIN, timeout=5
            )
            assert list(referee.matches) == [made.match_id]

    asyncio.run(main())


def test_a_create_matches_call_that_reaches_creation_after_its_deadline_makes_nothing() -> None:
    async def main() -> None:
        referee = BusyReferee(TOKENS, wire=ProtobufWire())
        async with serving(referee, ["a", "b", "c", "d"]) as (_, stub, _bots):
            referee.delay_s = 0.5
            late = await rpc_error(
                stub.CreateMatches(
                    matches_pb2.CreateMatchesRequest(
                        matches=[
                            create_request(["a", "b"], time_control=LONG),
                            create_request(["c", "d"], time_control=LONG),
                        ]
                    ),
                    metadata=ADMIN,
                    timeout=0.2,
                )
            )
            assert late.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            referee.delay_s = 0.0
            await asyncio.sleep(1.2)  # the late handler has gone through both requests
            assert list(referee.matches) == []

    asyncio.run(main())


def test_create_matches_makes_each_request_in_order_and_says_why_for_those_it_could_not() -> None:
    async def main() -> None:
        referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=QUICK)
        async with serving(referee, ["a", "b", "c", "d", "e"]) as (_, stub, _bots):
            asked = matches_pb2.CreateMatchesRequest(
                matches=[
                    create_request(["a", "b"], seed=1, key="batch-1", time_control=LONG),
                    create_request(["c", "nobody"], time_control=LONG),
                    create_request(["a", "c"], time_control=LONG),  # a's one slot is taken by now
                    create_request(["c", "d"], seed=2, time_control=LONG),
                ]
            )
            reply = await stub.CreateMatches(asked, metadata=ADMIN, timeout=5)
            assert [r.WhichOneof("outcome") for r in reply.results] == [
                "match",
                "error",
                "error",
                "match",
            ]
            first, missing, busy, second = reply.results
            assert list(first.match.bots) == ["a", "b"] and first.match.status == RUNNING
            assert list(second.match.bots) == ["c", "d"]
            assert (missing.error.code, busy.error.code) == ("NOT_FOUND", "FAILED_PRECONDITION")
            assert "nobody" in missing.error.message and "'a'" in busy.error.message
            made = sorted([first.match.match_id, second.match.match_id])
            assert sorted(referee.matches) == made
            # a retry with the key, in a batch or alone, names the first match and makes none
            again = await stub.CreateMatches(
                matches_pb2.CreateMatchesRequest(matches=[asked.matches[0]]),
                metadata=ADMIN,
                timeout=5,
            )
            assert again.results[0].match.match_id == first.match.match_id
            alone = await stub.CreateMatch(asked.matches[0], metadata=ADMIN, timeout=5)
            assert alone.match_id == first.match.match_id
            too_many = await rpc_error(
                stub.CreateMatches(
                    matches_pb2.CreateMatchesRequest(matches=[create_request(["e", "a"])] * 1001),
                    metadata=ADMIN,
                    timeout=5,
                )
            )
            assert too_many.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "at most 1000" in (too_many.details() or "")
            no_token = await rpc_error(stub.CreateMatches(asked, timeout=5))
            assert no_token.code() == grpc.StatusCode.UNAUTHENTICATED
            assert sorted(referee.matches) == made

    asyncio.run(main())


def test_a_create_match_retried_with_its_idempotency_key_returns_the_first_match() -> None:
    async def main() -> None:
        referee = Referee(
            TOKENS,
            wire=ProtobufWire(),
            default_time_control=QUICK,
            reconnect_grace_s=0.1,
            keep_finished=0,
        )
        async with serving(referee, list(TOKENS)) as (_, stub, bots):

            async def create(request: matches_pb2.CreateMatchRequest) -> matches_pb2.MatchInfo:
                info: matches_pb2.MatchInfo = await stub.CreateMatch(
                    request, metadata=ADMIN, timeout=5
                )
                return info

            asked = create_request(["a", "b"], seed=5, key="retry-1", time_control=LONG)
            first = await create(asked)
            # the retry (a and b now have no free slot) gets the same match; none is made
            again = await create(asked)
            assert again.match_id == first.match_id and again.status == RUNNING
            assert list(referee.matches) == [first.match_id]
            # the same key for another request is refused and makes nothing
            for other in (
                create_request(["c", "d"], seed=5, key="retry-1", time_control=LONG),
                create_request(["a", "b"], seed=6, key="retry-1", time_control=LONG),
                create_request(["a", "b"], key="retry-1", time_control=LONG),
                create_request(["b", "a"], seed=5, key="retry-1", time_control=LONG),
                create_request(["a", "b"], seed=5, key="retry-1"),
            ):
                refused = await rpc_error(create(other))
                assert refused.code() == grpc.StatusCode.ALREADY_EXISTS
                details = refused.details() or ""
                assert "retry-1" in details and first.match_id in details
            assert list(referee.matches) == [first.match_id]
            # a call that makes no match takes no key
            missing = await rpc_error(create(create_request(["c", "nobody"], key="retry-2")))
            assert missing.code() == grpc.StatusCode.NOT_FOUND
            second = await create(create_request(["c", "d"], key="retry-2", time_control=LONG))
            assert (
                await create(create_request(["c", "d"], key="retry-2", time_control=LONG))
            ).match_id == second.match_id
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
        return MatchSnapshot(
            match_id, MatchStatus.RUNNING, ("a", "b"), 1, TimeControl(), 0, (0, 0), (), ()
        )

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
    ended = MatchSnapshot(
        "m4", MatchStatus.FINISHED, ("a", "b"), 1, TimeControl(), 1, (3, 1), (), (1, 2)
    )
    keys.match_ended(ended)
    assert keys.find("k4", asked) == ("m4", ended)


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
