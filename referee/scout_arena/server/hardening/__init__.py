"""The referee's runtime patches of grpc.aio and CPython, in one place, behind one call.

Three measures reach past the referee's own code:

* `liveness`: a guard (a task factory) that keeps a hostile HTTP/2 ``:path`` from crashing
  grpc.aio's server loop, with a crash watch and a self-probe that make a death loud;
* `cqdrain`: a wrapper of grpc.aio's completion reader that keeps its notification socket
  from backing up under load;
* `gcpolicy`: CPython's collector tuned for a process that holds many long-lived objects.

The guard and the drain depend on private internals of grpc.aio; each checks them as it is
installed, and both were measured with the grpcio releases in `MEASURED_GRPCIO` only. With
any other grpcio they are not applied: `harden_runtime` says so in a warning, and the crash
watch and self-probe (public API) still run. The GC policy uses CPython's public `gc` API and
applies on any version; being process-wide, it is applied only when asked (``gc_policy``, by
a command that owns its process), never by a server a test or an app starts in its own.

`harden_runtime` is the one call: made with the server, its `Hardening.start` stands in for
``server.start()`` and its `Hardening.stop` comes before ``server.stop()``.
"""

from __future__ import annotations

import asyncio
import functools
import logging

import grpc

from .cqdrain import drain_completion_notifications
from .gcpolicy import tune_gc, watch_gc_pauses
from .liveness import ServerLiveness

log = logging.getLogger("scout_arena.referee")

MEASURED_GRPCIO = ((1, 85),)
"""(major, minor) of the grpcio releases the grpc patches were measured with; the upper bound
on grpcio in pyproject.toml follows it."""


def grpc_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a grpcio version string ("1.85.3" -> (1, 85)); None if unreadable."""
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def grpcio_measured(version: str = grpc.__version__) -> bool:
    """Whether the grpc patches were measured with this grpcio release."""
    return grpc_release(version) in MEASURED_GRPCIO


@functools.cache
def _warn_unmeasured(version: str) -> None:
    log.warning(
        "grpcio %s is not a release the referee's grpc patches were measured with (%s): the "
        "liveness guard against hostile HTTP/2 paths and the completion-queue drain are OFF. "
        "A hostile call can then stop the server (the crash watch and the health self-probe "
        "still report it) and under load grpc's completions reach the event loop more slowly. "
        "Install a measured grpcio, or measure this one (tests/test_hostile_http2.py, "
        "tests/test_referee_turns.py) and add it to MEASURED_GRPCIO.",
        version, ", ".join(f"{major}.{minor}.x" for major, minor in MEASURED_GRPCIO))


class Hardening:
    """The runtime hardening of one grpc.aio server listening on ``address`` (and, with
    ``gc_policy``, of the process). ``liveness`` is its death watch (`ServerLiveness`);
    ``probe_interval_s=None`` turns the self-probe off (TLS listeners)."""

    def __init__(self, server: grpc.aio.Server, address: str, *,
                 probe_interval_s: float | None = 0.5, gc_policy: bool = False,
                 grpc_version: str = grpc.__version__) -> None:
        self.server = server
        self.grpc_version = grpc_version
        self.patches_grpc = grpcio_measured(grpc_version)
        """Whether the guard and the drain are applied (this grpcio was measured)."""
        self.gc_policy = gc_policy
        self.liveness = ServerLiveness(server, address, probe_interval_s=probe_interval_s,
                                       guard=self.patches_grpc)
        if not self.patches_grpc:
            self.liveness.guard_problem = (f"grpcio {grpc_version} is not a release the guard "
                                           "was measured with")

    async def start(self) -> None:
        """Start the server hardened: the guard is installed before it starts (it screens the
        first call the server asks for), the drain and the watch once it runs."""
        if not self.patches_grpc:
            _warn_unmeasured(self.grpc_version)
        self.liveness.install_guard()
        await self.server.start()
        if self.patches_grpc:
            drain_completion_notifications(asyncio.get_running_loop())
        if self.gc_policy:
            tune_gc()
        await self.liveness.start()

    async def stop(self) -> None:
        """Stop watching and remove the guard: call it before ``server.stop()``."""
        await self.liveness.stop()


def harden_runtime(server: grpc.aio.Server, address: str, *,
                   probe_interval_s: float | None = 0.5, gc_policy: bool = False) -> Hardening:
    """The runtime patches for ``server`` (see the module docstring): start the server with
    the returned `Hardening.start`, and call its `Hardening.stop` before stopping it."""
    return Hardening(server, address, probe_interval_s=probe_interval_s, gc_policy=gc_policy)


__all__ = ["MEASURED_GRPCIO", "Hardening", "ServerLiveness", "grpcio_measured",
           "harden_runtime", "tune_gc", "watch_gc_pauses"]
