"""End-to-end tests of the referee that start their own `scout-arena referee serve` process on
127.0.0.1: TLS (a full match, plaintext refused) and a graceful shutdown mid-match."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from referee_support import (
    admin_metadata,
    create_match,
    fetch_record,
    running_referee,
    start_bot,
    wait_connected,
    wait_finished,
)
from scout.v1 import matches_pb2, matches_pb2_grpc
from scout_arena.record import (
    replay,
)
from support.referee_e2e import FINISHED, RUNNING, SLOW_BOT, expect_rpc_error, make_self_signed


def test_tls_referee_plays_full_match_and_refuses_plaintext(tmp_path: Path) -> None:
    cert, key = make_self_signed(tmp_path)
    tokens = {"t0": "token-t0", "t1": "token-t1"}
    with running_referee(
        tmp_path, tokens, "--tls-cert", str(cert), "--tls-key", str(key)
    ) as referee:
        start_bot(referee, "greedy", tokens["t0"], "--tls", "--ca-cert", str(cert))
        start_bot(referee, "random", tokens["t1"], "--tls", "--ca-cert", str(cert))
        wait_connected(referee, list(tokens))
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(referee.address, credentials) as channel:
            stub = matches_pb2_grpc.MatchesStub(channel)
            info = create_match(stub, ["t0", "t1"], seed=99, decision_ms=1000, time_bank_ms=5000)
            assert wait_finished(stub, info.match_id, timeout=30).status == FINISHED
            record = fetch_record(stub, info.match_id)
            assert record["finished"] and record["notes"] == []
            replay(record)
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="scout.v1.Arena"), timeout=5
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING

        with grpc.insecure_channel(referee.address) as plain:
            expect_rpc_error(
                grpc.StatusCode.UNAVAILABLE,
                lambda: health_pb2_grpc.HealthStub(plain).Check(
                    health_pb2.HealthCheckRequest(), timeout=3
                ),
            )
            expect_rpc_error(
                grpc.StatusCode.UNAVAILABLE,
                lambda: matches_pb2_grpc.MatchesStub(plain).ListMatches(
                    matches_pb2.ListMatchesRequest(), metadata=admin_metadata(), timeout=3
                ),
            )
        # TLS without trusting the self-signed certificate fails too
        with grpc.secure_channel(referee.address, grpc.ssl_channel_credentials()) as untrusted:
            expect_rpc_error(
                grpc.StatusCode.UNAVAILABLE,
                lambda: health_pb2_grpc.HealthStub(untrusted).Check(
                    health_pb2.HealthCheckRequest(), timeout=3
                ),
            )


def test_sigterm_mid_match_exits_zero_and_writes_aborted_replayable_record(tmp_path: Path) -> None:
    tokens = {"quick": "token-quick", "slow": "token-slow"}
    with running_referee(tmp_path, tokens) as referee:
        start_bot(referee, "greedy", tokens["quick"])
        start_bot(referee, f"{SLOW_BOT}:SlowBot", tokens["slow"])
        wait_connected(referee, list(tokens))
        channel, stub = referee.matches_stub()
        with channel:
            # quick (seat 0) starts round 0; then slow thinks far longer than the test runs
            info = create_match(
                stub, ["quick", "slow"], seed=5, decision_ms=60_000, time_bank_ms=1000
            )
            watch = stub.WatchMatch(
                matches_pb2.WatchMatchRequest(match_id=info.match_id),
                metadata=admin_metadata(),
                timeout=20,
            )
            for event in watch:
                if event.WhichOneof("body") == "public_event":
                    assert event.public_event.action.seat == 0
                    break
            watch.cancel()
            time.sleep(0.3)  # the slow seat's DecisionRequest is out and unanswered
            status = stub.GetMatch(
                matches_pb2.GetMatchRequest(match_id=info.match_id),
                metadata=admin_metadata(),
                timeout=5,
            ).status
            assert status == RUNNING
        began = time.monotonic()
        referee.process.send_signal(signal.SIGTERM)
        code = referee.process.wait(timeout=15)
        elapsed = time.monotonic() - began
        assert code == 0, referee.log()
        assert elapsed < 5, f"the referee took {elapsed:.1f} s to stop"

        path = referee.records / f"{info.match_id}.json"
        assert path.is_file(), os.listdir(referee.records)
        assert not [name for name in os.listdir(referee.records) if name.endswith(".tmp")]
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["match_id"] == info.match_id and record["seed"] == 5
        assert record["finished"] is False
        assert record["totals"] is None and record["ranks"] is None
        assert record["meta"]["status"] == "aborted"
        assert len(record["rounds"]) == 1
        assert [a["seat"] for a in record["rounds"][0]["actions"]] == [0]
        assert "end_reason" not in record["rounds"][0]
        result = replay(record)
        assert not result.state.is_over and result.state.current_seat == 1
