"""The Matches service against hostile, late and repeated calls: real servers on 127.0.0.1 (the
harness is tests/support/matches_harness.py). The seed of a running match reaches nobody; an
empty admin token is refused; every error that echoes what a caller sent is short, and nothing a
caller sends makes the referee answer UNKNOWN or log a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from referee_support import (
    ADMIN_TOKEN,
    running_referee,
    start_bot,
    wait_connected,
)
from scout.v1 import game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.server import Referee, RefereeFacade, RefereeServer
from scout_arena.server.calls import EOF
from scout_arena.server.convert import ProtobufWire
from support.matches_harness import (
    ABORTED,
    ADMIN,
    FINISHED,
    LONG,
    MAX_DETAILS,
    QUICK,
    RUNNING,
    TOKENS,
    create_request,
    serving,
    wait_until,
)


async def first_watch_event(
    stub: matches_pb2_grpc.MatchesAsyncStub, match_id: str
) -> matches_pb2.SpectatorEvent:
    call = stub.WatchMatch(
        matches_pb2.WatchMatchRequest(match_id=match_id), metadata=ADMIN, timeout=5
    )
    event = await call.read()
    call.cancel()
    assert isinstance(event, matches_pb2.SpectatorEvent), event
    return event


def test_the_seed_is_told_only_once_a_match_has_ended() -> None:
    async def main() -> None:
        referee = Referee(
            TOKENS, wire=ProtobufWire(), default_time_control=QUICK, reconnect_grace_s=0.1
        )
        async with contextlib.AsyncExitStack() as stack:
            server, stub, bots = await stack.enter_async_context(
                serving(referee, ["a", "b", "c", "d"])
            )

            async def get(match_id: str) -> matches_pb2.MatchInfo:
                info: matches_pb2.MatchInfo = await stub.GetMatch(
                    matches_pb2.GetMatchRequest(match_id=match_id), metadata=ADMIN, timeout=5
                )
                return info

            async def listed(match_id: str) -> matches_pb2.MatchInfo:
                response = await stub.ListMatches(
                    matches_pb2.ListMatchesRequest(), metadata=ADMIN, timeout=5
                )
                [info] = [m for m in response.matches if m.match_id == match_id]
                return info

            held = await stub.CreateMatch(
                create_request(["a", "b"], seed=1234, time_control=LONG), metadata=ADMIN, timeout=5
            )
            running = [
                held,
                await get(held.match_id),
                await listed(held.match_id),
                (await first_watch_event(stub, held.match_id)).match_info,
            ]
            for info in running:
                assert info.match_id == held.match_id and info.status == RUNNING
                assert info.seed == 0

            # a match that finishes (its bots leave; the fallback plays it out)
            done = await stub.CreateMatch(
                create_request(["c", "d"], seed=4321), metadata=ADMIN, timeout=5
            )
            assert done.seed == 0
            for name in ("c", "d"):
                await bots.pop(name).close()

            async def finished() -> matches_pb2.MatchInfo | None:
                info = await get(done.match_id)
                return info if info.status != RUNNING else None

            assert (await wait_until(finished)).status == FINISHED
            ended = [
                await get(done.match_id),
                await listed(done.match_id),
                (await first_watch_event(stub, done.match_id)).match_info,
            ]
            for info in ended:
                assert info.status == FINISHED and info.seed == 4321

            # a match aborted by the shutdown: its spectators' last event tells the seed
            watch = stub.WatchMatch(
                matches_pb2.WatchMatchRequest(match_id=held.match_id), metadata=ADMIN, timeout=20
            )
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
            assert all(
                e.match_info.seed == 0 for e in events[:-1] if e.WhichOneof("body") == "match_info"
            )

    asyncio.run(main())


@pytest.mark.parametrize("token", ["", " padded", "tab\t", "non-ascii-é"])
def test_an_admin_token_no_caller_could_send_is_refused_at_start(
    tmp_path: Path, token: str
) -> None:
    with pytest.raises(ValueError, match="admin token"):
        RefereeServer(Referee({}, wire=ProtobufWire()), admin_token=token)
    with pytest.raises(ValueError, match="admin token"):
        RefereeFacade({}, admin_token=token)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scout_arena.cli",
            "referee",
            "serve",
            "--port",
            "0",
            "--records",
            str(tmp_path / "records"),
            "--admin-token",
            token,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "--admin-token" in result.stderr and "admin token" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "records").exists()  # refused before it started anything


OFFLINE = "offline-" + "y" * 150


"""A registered bot with a long name that never connects."""


def test_hostile_values_to_every_matches_rpc_end_with_a_documented_status_and_no_traceback(
    tmp_path: Path,
) -> None:
    tokens = {"b0": "tok-b0", "b1": "tok-b1", OFFLINE: "tok-offline"}
    with running_referee(tmp_path, tokens) as referee:
        start_bot(referee, "random", "tok-b0")
        start_bot(referee, "random", "tok-b1")
        wait_connected(referee, ["b0", "b1"])
        with grpc.insecure_channel(referee.address) as channel:
            stub = matches_pb2_grpc.MatchesStub(channel)
            calls: list[tuple[str, grpc.StatusCode, Callable[[], Any]]] = []

            def create(
                label: str,
                code: grpc.StatusCode,
                request: matches_pb2.CreateMatchRequest,
                metadata: Sequence[tuple[str, str]] = ADMIN,
            ) -> None:
                calls.append(
                    (
                        label,
                        code,
                        lambda: stub.CreateMatch(request, metadata=tuple(metadata), timeout=10),
                    )
                )

            def raw(method: str, data: bytes, stream: bool = False) -> Callable[[], Any]:
                path = f"/scout.v1.Matches/{method}"
                if stream:
                    return lambda: list(
                        channel.unary_stream(path, None, None)(data, metadata=ADMIN, timeout=10)
                    )
                return lambda: channel.unary_unary(path, None, None)(
                    data, metadata=ADMIN, timeout=10
                )

            def watch_all(request: matches_pb2.WatchMatchRequest) -> list[Any]:
                return list(stub.WatchMatch(request, metadata=ADMIN, timeout=10))

            bad = grpc.StatusCode
            create("10,000-character name", bad.NOT_FOUND, create_request(["x" * 10_000, "b0"]))
            create("registered, offline", bad.FAILED_PRECONDITION, create_request([OFFLINE, "b0"]))
            for name in ("a\x00b", "tab\tname", "line\nname", "del\x7f", "c1\u0085"):
                create(
                    f"control characters {name!r}",
                    bad.INVALID_ARGUMENT,
                    create_request(["b0", name]),
                )
            create(
                "1,000 seats", bad.INVALID_ARGUMENT, create_request([f"n{i}" for i in range(1000)])
            )
            create("one seat", bad.INVALID_ARGUMENT, create_request(["b0"]))
            create("two empty names", bad.INVALID_ARGUMENT, create_request(["", ""]))
            create("an empty name", bad.NOT_FOUND, create_request(["", "b0"]))
            for tc in (
                game_pb2.TimeControl(decision_ms=2**32 - 1),
                game_pb2.TimeControl(time_bank_ms=2**32 - 1),
            ):
                create(
                    f"time control {tc}",
                    bad.INVALID_ARGUMENT,
                    create_request(["b0", "b1"], time_control=tc),
                )
            create(
                "largest seed, unknown bot",
                bad.NOT_FOUND,
                create_request(["nobody", "b0"], seed=2**64 - 1),
            )
            create(
                "10,000-character key",
                bad.INVALID_ARGUMENT,
                create_request(["b0", "b1"], key="k" * 10_000),
            )
            create(
                "key with a newline", bad.INVALID_ARGUMENT, create_request(["b0", "b1"], key="k\n")
            )
            create(
                "message over 64 KiB", bad.RESOURCE_EXHAUSTED, create_request(["z" * 70_000, "b0"])
            )
            create(
                "long admin token",
                bad.UNAUTHENTICATED,
                create_request(["b0", "b1"]),
                metadata=[("authorization", "Bearer " + "t" * 4000)],
            )
            # over grpc's metadata limits (8 KiB soft, where calls are refused at random, and
            # 16 KiB hard): refused by the transport
            create(
                "metadata over 16 KiB",
                bad.RESOURCE_EXHAUSTED,
                create_request(["b0", "b1"]),
                metadata=[("authorization", "Bearer " + "t" * 20_000)],
            )
            create(
                "no Bearer scheme",
                bad.UNAUTHENTICATED,
                create_request(["b0", "b1"]),
                metadata=[("authorization", ADMIN_TOKEN)],
            )
            not_utf8 = b"\x0a\x02\xff\xfe"  # field 1 (a string) of bytes that are not UTF-8
            truncated = b"\x0a\x05ab"
            for method, stream in (
                ("CreateMatch", False),
                ("CreateMatches", False),
                ("GetMatch", False),
                ("GetRecord", False),
                ("WatchMatch", True),
            ):
                for label, data in (("not UTF-8", not_utf8), ("truncated", truncated)):
                    calls.append(
                        (f"{method} {label}", bad.INVALID_ARGUMENT, raw(method, data, stream))
                    )
            for label, data in (("truncated varint", b"\x10"), ("truncated", truncated)):
                calls.append(
                    (f"ListMatches {label}", bad.INVALID_ARGUMENT, raw("ListMatches", data))
                )
            for match_id in ("x" * 10_000, "\x00", "../../etc/passwd", "", "m-" + "\u202e" * 50):
                get = matches_pb2.GetMatchRequest(match_id=match_id)
                calls.append(
                    (
                        f"GetMatch {match_id[:20]!r}",
                        bad.NOT_FOUND,
                        partial(stub.GetMatch, get, metadata=ADMIN, timeout=10),
                    )
                )
                record = matches_pb2.GetRecordRequest(match_id=match_id)
                calls.append(
                    (
                        f"GetRecord {match_id[:20]!r}",
                        bad.NOT_FOUND,
                        partial(stub.GetRecord, record, metadata=ADMIN, timeout=10),
                    )
                )
                watch = matches_pb2.WatchMatchRequest(match_id=match_id)
                calls.append(
                    (f"WatchMatch {match_id[:20]!r}", bad.NOT_FOUND, partial(watch_all, watch))
                )
            for limit, status in ((-1, 0), (2**31 - 1, 0), (0, 99), (5, -7)):
                listing = matches_pb2.ListMatchesRequest(
                    limit=limit, status=matches_pb2.MatchStatus.ValueType(status)
                )
                calls.append(
                    (
                        f"ListMatches limit={limit} status={status}",
                        bad.OK,
                        partial(stub.ListMatches, listing, metadata=ADMIN, timeout=10),
                    )
                )

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
            made = stub.CreateMatch(
                create_request(["b0", "b1"], seed=3), metadata=ADMIN, timeout=10
            )
            assert made.status == RUNNING
        log = referee.log()
    problems = [
        line
        for line in log.splitlines()
        if "Traceback" in line or " ERROR " in line or "CRITICAL" in line
    ]
    assert not problems, "\n".join(problems[:10])


def test_list_limits_read_zero_or_less_as_the_default_and_cap_a_large_one() -> None:
    """ListMatches (default 100, at most 1000) and ListLadderMatches (50, 500) as their protos
    say (issue 28)."""
    from scout_arena.server import list_limit
    from scout_arena.server.matches_service import LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
    from scout_ladder import ladder_api

    asked = (-5, 0, 1, 100, 1000, 1001, 2**31 - 1)
    assert [list_limit(n, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX) for n in asked] == [
        100,
        100,
        1,
        100,
        1000,
        1000,
        1000,
    ]
    assert [
        list_limit(n, ladder_api.LIST_LIMIT_DEFAULT, ladder_api.LIST_LIMIT_MAX) for n in asked
    ] == [50, 50, 1, 100, 500, 500, 500]
