"""The referee's grpc server wired to `scout_arena.server.hardening.liveness`: `referee serve` and
`ladder serve` keep serving through a request whose ``:path`` is not UTF-8 (grpc.aio 1.85
would otherwise lose its listener), and a referee whose server dies anyway exits non-zero.

Real processes on 127.0.0.1: the referee (or the ladder), two bot programs playing a match,
and raw HTTP/2 from `support.http2`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from referee_support import (
    admin_metadata,
    create_match,
    running_referee,
    start_bot,
    stop,
    wait_connected,
    wait_finished,
)
from scout.v1 import ladder_pb2, ladder_pb2_grpc, matches_pb2
from scout_arena.server import Referee, RefereeServer
from scout_arena.server.convert import ProtobufWire
from support.http2 import grpc_request_headers, send_raw_headers

pytestmark = pytest.mark.timeout(180)

TESTS = Path(__file__).resolve().parent
SLOW_BOT = TESTS / "bots" / "slow_bot.py"
BAD_PATH = b"/gr\x80\xffpc/\x01\x7f"
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]
FRESH_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def health_from_a_new_channel(address: str) -> int:
    """One health Check on a connection of its own, with the 2 s the requirement allows."""
    with grpc.insecure_channel(address, options=FRESH_CONNECTION) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                         timeout=2.0)
        return int(reply.status)


def bad_path(address: str) -> int | None:
    host, port = address.rsplit(":", 1)
    answer = send_raw_headers(host, int(port), grpc_request_headers(BAD_PATH), timeout=5.0)
    return answer.grpc_status


def test_referee_serve_survives_a_non_utf8_path_while_a_match_is_played(
        tmp_path: Path) -> None:
    tokens = {"quick": "token-quick", "slow": "token-slow"}
    os.environ["SLOW_BOT_DELAY_S"] = "0.2"
    try:
        with running_referee(tmp_path, tokens) as referee:
            start_bot(referee, "greedy", tokens["quick"])
            start_bot(referee, f"{SLOW_BOT}:SlowBot", tokens["slow"])
            wait_connected(referee, list(tokens))
            channel, stub = referee.matches_stub()
            with channel:
                info = create_match(stub, ["quick", "slow"], seed=4)
                status = stub.GetMatch(matches_pb2.GetMatchRequest(match_id=info.match_id),
                                       metadata=admin_metadata(), timeout=5).status
                assert status == matches_pb2.MATCH_STATUS_RUNNING
                assert bad_path(referee.address) == UNIMPLEMENTED
                assert health_from_a_new_channel(referee.address) == \
                    health_pb2.HealthCheckResponse.SERVING
                done = wait_finished(stub, info.match_id, timeout=120)
                assert done.status == matches_pb2.MATCH_STATUS_FINISHED
                assert list(done.forfeited_seats) == []
            # Still serving new connections after the match, and the process is up.
            assert health_from_a_new_channel(referee.address) == \
                health_pb2.HealthCheckResponse.SERVING
            assert referee.process.poll() is None
            log = referee.log()
            assert "answered a call to an unregistered method UNIMPLEMENTED" in log, log
            assert "no guard" not in log and "is dead" not in log, log
            # The bots kept their streams: neither disconnected during the match.
            assert "disconnected" not in log, log
    finally:
        del os.environ["SLOW_BOT_DELAY_S"]
    record = json.loads((referee.records / f"{info.match_id}.json").read_text())
    assert record["meta"]["status"] == "finished"
    assert not [n for n in record["notes"] if n["kind"] == "disconnect"], record["notes"]


def _listening_address(process: subprocess.Popen[str], log: Path) -> str:
    """The address a starting `ladder serve` prints on stdout."""
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        assert line, f"the ladder did not start:\n{log.read_text()}"
        found = re.search(r"listening on (\S+)", line)
        if found:
            return found.group(1)


def test_ladder_serve_is_guarded_too(tmp_path: Path) -> None:
    """The ladder hosts a referee with its own Ladder service beside Arena and Matches: the
    guard must answer the hostile call and leave every registered service served."""
    log = tmp_path / "ladder.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "scout_arena.cli", "ladder", "serve", "--database",
         f"sqlite:///{tmp_path / 'ladder.db'}", "--port", "0", "--admin-token", "adm", "-v"],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    try:
        address = _listening_address(process, log)
        assert bad_path(address) == UNIMPLEMENTED
        assert health_from_a_new_channel(address) == health_pb2.HealthCheckResponse.SERVING
        with grpc.insecure_channel(address, options=FRESH_CONNECTION) as channel:
            board = ladder_pb2_grpc.LadderStub(channel).GetLeaderboard(
                ladder_pb2.GetLeaderboardRequest(), timeout=5)
            assert list(board.entries) == []
            registered = ladder_pb2_grpc.LadderStub(channel).RegisterBot(
                ladder_pb2.RegisterBotRequest(name="newbot", owner="me"),
                metadata=(("authorization", "Bearer adm"),), timeout=5)
            assert registered.token and registered.bot.name == "newbot"
        assert process.poll() is None
        text = log.read_text()
        assert "no guard" not in text and "is dead" not in text, text
    finally:
        assert stop(process, timeout=60) == 0, log.read_text()


# What a referee does when its server dies after all: here the guard is switched off (as on
# a grpc whose internals it does not recognise), so the hostile path kills the listener for
# real; the crash watch must see it and serve_forever must exit non-zero. The crash is not
# memory-safe (see liveness), hence a child process.
DYING_REFEREE = """
import asyncio, sys
from scout_arena.server import Referee, RefereeServer, serve_forever
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.hardening.liveness import ServerLiveness
from support.http2 import grpc_request_headers, send_raw_headers

ServerLiveness.install_guard = lambda self: False

async def main() -> None:
    server = RefereeServer(Referee({}, wire=ProtobufWire()), port=0)
    ready = asyncio.Event()
    task = asyncio.create_task(serve_forever(server, 0.0, ready))
    await ready.wait()
    print("SERVING", flush=True)
    await asyncio.to_thread(send_raw_headers, "127.0.0.1", server.port,
                            grpc_request_headers(@BAD_PATH@), timeout=1.0)
    await task
    print("serve_forever returned", flush=True)

asyncio.run(main())
""".replace("@BAD_PATH@", repr(BAD_PATH))


def test_a_referee_whose_server_dies_drains_and_exits_non_zero() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])])}
    child = subprocess.run([sys.executable, "-c", DYING_REFEREE], capture_output=True,
                           text=True, timeout=90, env=env, cwd=TESTS)
    out, err = child.stdout, child.stderr
    assert "SERVING" in out, err
    assert "serve_forever returned" not in out
    assert "is dead: the grpc server's main loop crashed: UnicodeDecodeError" in err, err
    assert child.returncode != 0
    if child.returncode > 0:  # else grpc's freed memory killed it first (see liveness)
        assert child.returncode == 3, (child.returncode, err)
        assert "exiting with status 3" in err, err


UNGUARDED_CLI = """
import sys
from scout_arena.server.hardening.liveness import ServerLiveness

ServerLiveness.install_guard = lambda self: False
from scout_arena.cli import main

sys.exit(main(sys.argv[1:]))
"""


def test_a_ladder_whose_server_dies_exits_non_zero(tmp_path: Path) -> None:
    """`ladder serve` with the guard switched off: the hostile path kills its listener, and
    the ladder must notice, drain and exit with status 3 rather than live on deaf."""
    log = tmp_path / "ladder.log"
    process = subprocess.Popen(
        [sys.executable, "-c", UNGUARDED_CLI, "ladder", "serve", "--database",
         f"sqlite:///{tmp_path / 'ladder.db'}", "--port", "0", "-v"],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    try:
        address = _listening_address(process, log)
        bad_path(address)
        code = process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log.read_text()
    assert "is dead: the grpc server's main loop crashed: UnicodeDecodeError" in text, text
    assert code != 0, text
    if code > 0:  # else grpc's freed memory killed it first (see liveness)
        assert code == 3 and "exiting with status 3" in text, (code, text)


def test_every_service_of_the_server_must_be_registered() -> None:
    """The guard answers unregistered methods UNIMPLEMENTED, so a service added only as a
    generic handler would be silently unreachable: the server refuses to be built."""
    def generic_only(server: grpc.aio.Server) -> None:
        handler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("test.Generic", {"Say": handler}),))

    async def main() -> None:
        with pytest.raises(ValueError, match=r"test\.Generic.*add_registered_method_handlers"):
            RefereeServer(Referee({}, wire=ProtobufWire()),
                          extra_services=[(generic_only, "test.Generic")])
        server = RefereeServer(Referee({}, wire=ProtobufWire()))
        await server.start()
        try:
            assert server.liveness.guarded, server.liveness.guard_problem
        finally:
            await server.stop()
        assert not server.liveness.guarded  # stop() removed it

    asyncio.run(main())


def test_a_tls_referee_has_the_guard_but_no_plaintext_probe(tmp_path: Path) -> None:
    from scout_arena.server import TlsConfig

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                           "-keyout", str(key), "-out", str(cert), "-days", "1",
                           "-subj", "/CN=localhost"], capture_output=True)
    if made.returncode != 0:
        pytest.skip("openssl is not available")

    async def main() -> None:
        server = RefereeServer(Referee({}, wire=ProtobufWire()), tls=TlsConfig(cert, key))
        assert server.liveness.probe_interval_s is None
        await server.start()
        try:
            assert server.liveness.guarded, server.liveness.guard_problem
        finally:
            await server.stop()
        plain = RefereeServer(Referee({}, wire=ProtobufWire()))
        assert plain.liveness.probe_interval_s == 0.5

    asyncio.run(main())
