"""`scout_arena.server.hardening`: the grpc patches apply only on the grpcio releases they were
measured with, and the dependency bound in pyproject.toml says the same."""

from __future__ import annotations

import asyncio
import logging
import re
import tomllib
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from scout_arena.server.hardening import (
    MEASURED_GRPCIO,
    Hardening,
    grpcio_measured,
)

ROOT = Path(__file__).resolve().parent.parent


def drained_readers(loop: asyncio.AbstractEventLoop) -> int:
    return len([key for key in loop._selector.get_map().values()  # type: ignore[attr-defined]
                if key.data[0] is not None
                and getattr(key.data[0]._callback, "_scout_drained", False)])


async def started(version: str) -> tuple[Hardening, bool, int, int]:
    """A hardened health-only server as if grpcio were ``version``: (its hardening, whether
    the guard was on, readers drained on the loop, the health status a new connection
    gets)."""
    from grpc_health.v1 import _async as health_aio

    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    hardening = Hardening(server, f"127.0.0.1:{port}", probe_interval_s=None,
                          grpc_version=version)
    await hardening.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10)
        return (hardening, hardening.liveness.guarded,
                drained_readers(asyncio.get_running_loop()), reply.status)
    finally:
        await hardening.stop()
        await server.stop(None)


def test_the_grpc_patches_apply_on_the_grpcio_release_they_were_measured_with() -> None:
    assert grpcio_measured(grpc.__version__), "the installed grpcio is outside the bound"
    hardening, guarded, drained, status = asyncio.run(started(grpc.__version__))
    assert hardening.patches_grpc and guarded, hardening.liveness.guard_problem
    assert drained == 1
    assert status == health_pb2.HealthCheckResponse.SERVING


def test_on_another_grpcio_the_patches_are_off_with_a_warning_and_the_server_still_serves(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="scout_arena.referee"):
        hardening, guarded, drained, status = asyncio.run(started("1.99.0"))
    assert not hardening.patches_grpc and not guarded
    assert "1.99.0" in (hardening.liveness.guard_problem or "")
    assert drained == 0
    assert status == health_pb2.HealthCheckResponse.SERVING
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("grpcio 1.99.0" in text and "OFF" in text for text in warnings), warnings


@pytest.mark.parametrize(("version", "measured"), [
    ("1.85.0", True), ("1.85.3", True), ("1.85.0rc1", True), ("1.86.0", False),
    ("1.84.9", False), ("2.85.0", False), ("", False), ("1", False), ("x.y.z", False)])
def test_a_grpcio_version_is_measured_by_its_major_and_minor_release(
        version: str, measured: bool) -> None:
    assert grpcio_measured(version) is measured


def test_the_grpcio_dependency_stops_below_the_first_release_not_measured() -> None:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [grpcio] = [d for d in project["project"]["dependencies"] if re.match(r"grpcio\b[<>=]", d)]
    upper = re.search(r"<(\d+)\.(\d+)\b", grpcio)
    assert upper is not None, grpcio
    major, minor = max(MEASURED_GRPCIO)
    assert (int(upper[1]), int(upper[2])) == (major, minor + 1), grpcio
