"""Hostile HTTP/2 against a real grpc.aio server on 127.0.0.1, with `ServerLiveness` attached.

The reason for this file: grpc.aio decodes the ``:path`` of a call to an unregistered method
with a strict UTF-8 decode inside the server's main loop, so one HEADERS frame with a non-UTF-8
path kills the loop; the listener closes and the process lives on (see the docstring of
`scout_arena.server.hardening.liveness`). With the liveness guard the server must go on
serving: health SERVING from a new connection (the requirement is within 2 s; the tests allow
far more and assert no speed), calls already running unaffected. Where the guard cannot be had, the
detector must report the death and call ``on_dead``.

Every raw request comes from `support.http2` (h2 over a plain socket, in a thread) and is
followed by a health check on a new connection. The server is the smallest that shows the
fault: the health service, registered as grpc_health registers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from scout_arena.server.hardening.liveness import ServerLiveness, guard_unavailable_reason
from support.http2 import (
    CANCEL,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    PREFACE,
    RST_STREAM,
    Answer,
    frame,
    grpc_message,
    grpc_request_headers,
    rst_stream_flood,
    send_frames,
    send_raw_bytes,
    send_raw_headers,
)
from support.ports import free_port

pytestmark = pytest.mark.timeout(120)

HOST = "127.0.0.1"
BAD_PATH = b"/gr\x80\xffpc/\x01\x7f"
CHECK = b"/grpc.health.v1.Health/Check"
HEALTH_BUDGET_S = 10.0
"""How long a health check may take to pass; the requirement is 2 s, measured is ~10 ms."""
DEATH_BUDGET_S = 10.0
RAW_TIMEOUT_S = 2.0
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]
FRESH_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


@dataclass
class Served:
    server: grpc.aio.Server
    port: int
    health: health_aio.HealthServicer
    liveness: ServerLiveness
    deaths: list[str] = field(default_factory=list)
    died: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    async def raw(self, send: Callable[..., Answer], *args: object, **kwargs: object) -> Answer:
        """Run a blocking `support.http2` helper against this server, off the event loop."""
        kwargs.setdefault("timeout", RAW_TIMEOUT_S)
        return await asyncio.to_thread(send, HOST, self.port, *args, **kwargs)


@contextlib.asynccontextmanager
async def serving(*, guard: bool = True, probe_interval_s: float | None = 0.5,
                  liveness_address: str | None = None,
                  add: Callable[[grpc.aio.Server], None] | None = None,
                  ) -> AsyncIterator[Served]:
    """A started grpc.aio server with health, and its liveness watch started as the referee
    starts it: guard before ``server.start()``, watch after, watch stopped before the server."""
    server = grpc.aio.server()
    servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    if add is not None:
        add(server)
    port = server.add_insecure_port(f"{HOST}:0")
    served: Served

    async def on_dead(reason: str) -> None:
        served.deaths.append(reason)
        served.died.set()
        await served.liveness.stop()  # what an owner's stop does first; must not deadlock

    liveness = ServerLiveness(server, liveness_address or f"{HOST}:{port}", on_dead,
                              guard=guard, probe_interval_s=probe_interval_s,
                              probe_timeout_s=1.0, probe_failures=3)
    served = Served(server, port, servicer, liveness)
    liveness.install_guard()
    await server.start()
    await liveness.start()
    try:
        yield served
    finally:
        await liveness.stop()
        await server.stop(None)


async def health_status(port: int, service: str = "") -> int:
    """Health Check on a brand-new connection, retried until it passes or the budget is spent."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HEALTH_BUDGET_S
    while True:
        async with grpc.aio.insecure_channel(f"{HOST}:{port}", options=FRESH_CONNECTION) as ch:
            try:
                reply = await health_pb2_grpc.HealthStub(ch).Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=2.0)
                return int(reply.status)
            except grpc.aio.AioRpcError as exc:
                if loop.time() + 0.2 > deadline:
                    raise AssertionError(f"no health answer within {HEALTH_BUDGET_S} s: "
                                         f"{exc.code().name} {exc.details()}") from exc
        await asyncio.sleep(0.2)


async def assert_serving(served: Served) -> None:
    assert await health_status(served.port) == health_pb2.HealthCheckResponse.SERVING
    assert not served.liveness.dead, served.liveness.reason
    assert served.deaths == []


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


# -- the fault: a :path that is not UTF-8 ---------------------------------------------------------

NON_UTF8_PATHS = {
    "the reported one": BAD_PATH,
    "lone 0xff": b"/\xff",
    "continuation byte first": b"/grpc.health.v1.Health/\x80Check",
    "truncated sequence": b"/grpc.health.v1.Health/Check\xe2\x82",
    "UTF-16 surrogate": b"/\xed\xa0\x80/x",
    "overlong slash": b"/\xc0\xaf",
    "8 KiB of 0xff": b"/" + b"\xff" * 8192,
}


@pytest.mark.parametrize("path", NON_UTF8_PATHS.values(), ids=NON_UTF8_PATHS.keys())
def test_non_utf8_path_is_refused_and_the_server_keeps_serving(path: bytes) -> None:
    async def main() -> None:
        async with serving() as served:
            assert served.liveness.guarded, served.liveness.guard_problem
            answer = await served.raw(send_raw_headers, grpc_request_headers(path))
            assert answer.grpc_status == UNIMPLEMENTED, answer
            await assert_serving(served)
            assert served.liveness.rejected_calls >= 1

    run(main())


def test_many_non_utf8_requests_then_health() -> None:
    async def main() -> None:
        async with serving() as served:
            for n in range(10):
                answer = await served.raw(send_raw_headers,
                                          grpc_request_headers(BAD_PATH + bytes([n])))
                assert answer.grpc_status == UNIMPLEMENTED, answer
            await assert_serving(served)

    run(main())


def test_second_path_header_with_non_utf8_bytes() -> None:
    """grpc core keeps the last of two :path headers; the bad one must not get through."""
    async def main() -> None:
        async with serving() as served:
            await served.raw(send_raw_headers,
                             [*grpc_request_headers(CHECK), (b":path", b"/gr\xff")])
            await assert_serving(served)

    run(main())


def test_non_utf8_path_on_streams_reset_at_once() -> None:
    """Core hands the call to the application even when the client reset it right away."""
    async def main() -> None:
        async with serving() as served:
            await served.raw(rst_stream_flood, 5, b"/\xff\xfe")
            await assert_serving(served)

    run(main())


def test_running_call_is_unaffected_by_a_non_utf8_path() -> None:
    """A health Watch stream stands for a running match: opened before the hostile request,
    it must still deliver updates after it, while new connections are served too."""
    async def main() -> None:
        async with serving() as served:
            await served.health.set("match", health_pb2.HealthCheckResponse.SERVING)
            async with grpc.aio.insecure_channel(served.address) as channel:
                watch = health_pb2_grpc.HealthStub(channel).Watch(
                    health_pb2.HealthCheckRequest(service="match"))
                first = await asyncio.wait_for(watch.read(), HEALTH_BUDGET_S)
                assert first.status == health_pb2.HealthCheckResponse.SERVING
                await served.raw(send_raw_headers, grpc_request_headers(BAD_PATH))
                await assert_serving(served)
                await served.health.set("match", health_pb2.HealthCheckResponse.NOT_SERVING)
                update = await asyncio.wait_for(watch.read(), HEALTH_BUDGET_S)
                assert update.status == health_pb2.HealthCheckResponse.NOT_SERVING
                watch.cancel()

    run(main())


# -- what the guard leaves as it was ----------------------------------------------------------

def test_unknown_method_is_still_unimplemented_for_a_grpc_client() -> None:
    async def main() -> None:
        async with serving() as served, grpc.aio.insecure_channel(served.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await channel.unary_unary("/nowhere.Service/Nothing", None, None)(b"", timeout=5.0)
            assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
            await assert_serving(served)

    run(main())


async def _echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    return request


ECHO = grpc.unary_unary_rpc_method_handler(_echo)


def _add_echo_generic_only(server: grpc.aio.Server) -> None:
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.Echo", {"Say": ECHO}),))


def _add_echo_registered(server: grpc.aio.Server) -> None:
    _add_echo_generic_only(server)
    server.add_registered_method_handlers("test.Echo", {"Say": ECHO})  # type: ignore[attr-defined]


async def _say(served: Served) -> bytes:
    async with grpc.aio.insecure_channel(served.address) as channel:
        say = channel.unary_unary("/test.Echo/Say", None, None)
        reply: bytes = await say(b"hello", timeout=5.0)
        return reply


def test_registered_method_is_served_under_the_guard() -> None:
    async def main() -> None:
        async with serving(add=_add_echo_registered) as served:
            assert await _say(served) == b"hello"
            await served.raw(send_raw_headers, grpc_request_headers(BAD_PATH))
            assert await _say(served) == b"hello"
            await assert_serving(served)

    run(main())


def test_generic_only_method_is_unimplemented_under_the_guard() -> None:
    """The guard's contract: it cannot read the path of an unregistered call, so it answers
    every one UNIMPLEMENTED. A service only in a generic handler must be registered too."""
    async def main() -> None:
        async with serving(add=_add_echo_generic_only) as served:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _say(served)
            assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
        async with serving(add=_add_echo_generic_only, guard=False) as unguarded:
            assert await _say(unguarded) == b"hello"

    run(main())


def test_the_guard_is_available_with_this_grpc() -> None:
    """A grpc upgrade that changes the internals the guard needs must fail here, not fall back
    to detection unnoticed."""
    async def main() -> None:
        server = grpc.aio.server()
        assert guard_unavailable_reason(server) is None
        await server.stop(None)

    run(main())


def test_stop_removes_the_guard() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert loop.get_task_factory() is None
        async with serving() as served:
            assert loop.get_task_factory() is not None
            assert served.liveness.guarded
        assert loop.get_task_factory() is None

    run(main())


# -- detection, for when the guard is not there ------------------------------------------------

# The crash itself is not memory-safe: the dying main loop frees the state of the calls it had
# asked core for, core still writes into it, and a busy process may segfault later (seen here).
# So the detector is tested in a child process, as the referee would meet it: report, exit.
CRASH_CHILD = """
import asyncio, sys
import grpc
from grpc_health.v1 import _async as health_aio, health_pb2_grpc
from scout_arena.server.hardening.liveness import ServerLiveness
from support.http2 import grpc_request_headers, send_raw_headers

async def main() -> int:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    died = asyncio.Event()

    async def on_dead(reason: str) -> None:
        print("ON_DEAD", reason, flush=True)
        await liveness.stop()
        died.set()

    liveness = ServerLiveness(server, f"127.0.0.1:{port}", on_dead, guard=False)
    assert not liveness.install_guard()
    await server.start()
    await liveness.start()
    print("SERVING", flush=True)
    await asyncio.to_thread(send_raw_headers, "127.0.0.1", port,
                            grpc_request_headers(@BAD_PATH@), timeout=1.0)
    await asyncio.wait_for(died.wait(), @DEATH_BUDGET_S@)
    print("DEAD", liveness.dead, liveness.reason, flush=True)
    await server.stop(0)
    return 3

sys.exit(asyncio.run(main()))
""".replace("@BAD_PATH@", repr(BAD_PATH)).replace("@DEATH_BUDGET_S@", repr(DEATH_BUDGET_S))


def test_without_the_guard_the_crash_is_reported_and_the_process_exits() -> None:
    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tests), *filter(None, [os.environ.get("PYTHONPATH")])])}
    child = subprocess.run([sys.executable, "-c", CRASH_CHILD], capture_output=True, text=True,
                           timeout=60, env=env, cwd=tests)
    out, err = child.stdout, child.stderr
    assert "SERVING" in out, err
    # The CRITICAL report comes before grpc's shutdown touches freed memory, so it is always
    # there; on_dead and the orderly exit (3) are, unless that memory kills the child first.
    assert "is dead: the grpc server's main loop crashed: UnicodeDecodeError" in err, (out, err)
    assert child.returncode != 0
    if child.returncode == 3:
        assert "ON_DEAD the grpc server's main loop crashed: UnicodeDecodeError" in out, out
        assert "DEAD True" in out, out
    else:
        assert child.returncode < 0, (child.returncode, out, err)  # killed by a signal


def test_probe_reports_a_server_that_stops_answering() -> None:
    """The probe on its own (crash watch silent): here it probes a port where nothing listens,
    as it would find the server's own port after its listener died."""
    async def main() -> None:
        with socket_closed_port() as closed:
            async with serving(liveness_address=f"{HOST}:{closed}",
                               probe_interval_s=0.2) as served:
                await asyncio.wait_for(served.died.wait(), DEATH_BUDGET_S)
                assert "health probes" in served.liveness.reason
                assert "UNAVAILABLE" in served.liveness.reason

    run(main())


def test_stopping_the_server_is_not_a_death() -> None:
    async def main() -> None:
        async with serving(probe_interval_s=0.1) as served:
            await asyncio.sleep(0.3)
        assert not served.liveness.dead
        assert served.deaths == []
        # The owner forgot liveness.stop(): the main loop's normal end tells the watch.
        async with serving(probe_interval_s=0.1) as served:
            await served.server.stop(None)
            await asyncio.sleep(1.0)
            assert not served.liveness.dead, served.liveness.reason

    run(main())


@contextlib.contextmanager
def socket_closed_port() -> Iterator[int]:
    """A loopback port that nothing listens on (bound once, then closed)."""
    yield free_port()


# -- other malformed HTTP/2, each followed by a health check -----------------------------------

def _huge_header_block() -> list[tuple[bytes, bytes]]:
    return grpc_request_headers(CHECK, extra=[(b"x-big", b"a" * 1_000_000)])


MALFORMED: dict[str, Callable[[Served], object]] = {
    "garbage instead of the preface":
        lambda s: s.raw(send_raw_bytes, bytes(range(256)) * 4),
    "an HTTP/1.1 request":
        lambda s: s.raw(send_raw_bytes, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    "a truncated preface":
        lambda s: s.raw(send_raw_bytes, PREFACE[:10]),
    "a header block that is not HPACK":
        lambda s: s.raw(send_frames, [frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                            b"\xff" * 64)]),
    "a 1 MB header block":
        lambda s: s.raw(send_raw_headers, _huge_header_block()),
    "an unknown pseudo-header":
        lambda s: s.raw(send_raw_headers, [(b":foo", b"bar"), *grpc_request_headers(CHECK)]),
    "no :path":
        lambda s: s.raw(send_raw_headers,
                        [h for h in grpc_request_headers(CHECK) if h[0] != b":path"]),
    "a pseudo-header after a regular one":
        lambda s: s.raw(send_raw_headers, [*grpc_request_headers(CHECK), (b":method", b"GET")]),
    "an upper-case header name":
        lambda s: s.raw(send_raw_headers, grpc_request_headers(CHECK, extra=[(b"X-Up", b"v")])),
    "non-UTF-8 :authority":
        lambda s: s.raw(send_raw_headers, grpc_request_headers(CHECK, authority=b"\xff\xfe")),
    "non-UTF-8 metadata value":
        lambda s: s.raw(send_raw_headers, grpc_request_headers(CHECK, extra=[(b"x-v", b"\xff")]),
                        body=grpc_message()),
    "non-UTF-8 metadata key":
        lambda s: s.raw(send_raw_headers, grpc_request_headers(CHECK, extra=[(b"x-\xff", b"v")]),
                        body=grpc_message()),
    "a bad grpc-timeout":
        lambda s: s.raw(send_raw_headers,
                        grpc_request_headers(CHECK, extra=[(b"grpc-timeout", b"\xff")]),
                        body=grpc_message()),
    "a path without a slash":
        lambda s: s.raw(send_raw_headers, grpc_request_headers(b"grpc")),
    "RST_STREAM flood of 20 streams":
        lambda s: s.raw(rst_stream_flood, 20, CHECK),
    "RST_STREAM for streams never opened":
        lambda s: s.raw(send_frames, [frame(RST_STREAM, 0, n, CANCEL.to_bytes(4, "big"))
                                      for n in range(1, 40, 2)]),
}


@pytest.mark.parametrize("attack", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_http2_then_health(attack: Callable[[Served], object]) -> None:
    async def main() -> None:
        async with serving() as served:
            await attack(served)  # type: ignore[misc]
            await assert_serving(served)

    run(main())
