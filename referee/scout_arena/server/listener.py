"""One grpc.aio server on one address, with its services, health and reflection, guarded by
the runtime hardening (`hardening`).

The referee's network listener carries the Arena and Matches services (and the ladder's, when
it shares the port); a listener may carry any set of services, so long as each registers its
methods: the liveness guard answers every call to an unregistered method UNIMPLEMENTED.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import grpc
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from .hardening import harden_runtime

MAX_BOT_MESSAGE_BYTES = 64 * 1024
MAX_SEND_MESSAGE_BYTES = 4 * 1024 * 1024
MAX_STREAMS_PER_CONNECTION = 1000
"""HTTP/2 streams (calls) one connection may have open at once (grpc.max_concurrent_streams).
A bot needs one Play stream, but an organiser's channel carries a WatchMatch per match it shows
and its CreateMatch calls: near the cap, a call the client opens as another ends (which the
server, busy, has not yet seen end) is refused (REFUSED_STREAM, UNAVAILABLE to the caller), as
the soak bench saw at 100 with 200 matches kept running. 1,000 streams cost ~26 MB at most."""

SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_BOT_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_SEND_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    # Two referees on one port would silently split the bots between them: fail to bind instead.
    ("grpc.so_reuseport", 0),
]

Service = tuple[Callable[[grpc.aio.Server], None], str]
"""(function adding a servicer to a server, full service name)."""
ExtraService = Service
"""A service sharing the referee's port (the ladder's)."""


@dataclass(frozen=True)
class TlsConfig:
    cert: Path
    key: Path
    client_ca: Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        root = self.client_ca.read_bytes() if self.client_ca else None
        return grpc.ssl_server_credentials(
            [(self.key.read_bytes(), self.cert.read_bytes())], root_certificates=root,
            require_client_auth=root is not None)


class _Registrations:
    """Stands in for the grpc server while services are added to it, noting which services
    register their methods (``add_registered_method_handlers``); everything else goes to the
    server as is."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server
        self.registered: set[str] = set()

    def add_registered_method_handlers(
            self, service: str, handlers: dict[str, grpc.RpcMethodHandler[object, object]]
    ) -> None:
        self.registered.add(service)
        self._server.add_registered_method_handlers(service, handlers)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._server, name)


def check_bindable(address: str) -> None:
    """OSError, with the reason in a few words, when ``host:port`` cannot be listened on
    (grpc would log a C-core error line and say only "Failed to bind")."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        socket.create_server((host, int(port)), family=family).close()
    except socket.gaierror as exc:
        raise OSError(errno.EADDRNOTAVAIL, f"cannot listen on {address}: the host is not an "
                      f"address ({exc.strerror})") from None
    except OSError as exc:
        if exc.errno is not None and exc.errno < 0:  # getaddrinfo's (socket.create_server)
            raise OSError(errno.EADDRNOTAVAIL, f"cannot listen on {address}: the host is not "
                          "an address of this machine") from None
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise OSError(exc.errno, f"cannot listen on {address}: {reason}") from None


class Listener:
    """A grpc.aio server on ``address`` (``host:port``, port 0 picks a free one, or
    ``unix:/absolute/path``) with ``services``, health and reflection. ``serving`` names the
    services health reports SERVING while it runs (besides the server as a whole, "").
    ``gc_policy``: also apply the process's garbage-collection policy as it starts (for the
    command that owns the process, `hardening`)."""

    def __init__(self, services: Sequence[Service], address: str, *,
                 tls: TlsConfig | None = None,
                 max_streams_per_connection: int = MAX_STREAMS_PER_CONNECTION,
                 serving: Sequence[str] = (), gc_policy: bool = False) -> None:
        if max_streams_per_connection < 1:
            raise ValueError("max_streams_per_connection must be at least 1")
        self.server = grpc.aio.server(options=[
            *SERVER_OPTIONS, ("grpc.max_concurrent_streams", max_streams_per_connection)])
        registrations = _Registrations(self.server)
        adding = cast(grpc.aio.Server, registrations)
        for add, _ in services:
            add(adding)
        self.health = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, adding)
        names = (*(name for _, name in services),
                 health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                 reflection.SERVICE_NAME)
        self.service_names = names
        self.serving = ("", *serving)
        reflection.enable_server_reflection(names, adding)
        unregistered = [name for name in names if name not in registrations.registered]
        if unregistered:
            raise ValueError(
                f"services {unregistered} do not register their methods "
                "(server.add_registered_method_handlers): the liveness guard would answer "
                "every call to them UNIMPLEMENTED")
        if not address.startswith("unix:"):
            check_bindable(address)
        try:
            if tls is None:
                bound = self.server.add_insecure_port(address)
            else:
                bound = self.server.add_secure_port(address, tls.credentials())
        except RuntimeError:  # grpc's "Failed to bind": in use, or no such local address
            bound = 0
        if bound == 0:
            raise OSError(errno.EADDRINUSE, f"cannot listen on {address} (the port is in use, "
                          "or the host is not an address of this machine)")
        if address.startswith("unix:"):
            self.port = 0
            self.address = address
        else:
            self.port = bound
            self.address = f"{address.rpartition(':')[0]}:{bound}"
        # The self-probe speaks plaintext; a TLS listener (maybe with client certificates)
        # relies on the guard and the crash watch.
        self.hardening = harden_runtime(self.server, self.address,
                                        probe_interval_s=None if tls else 0.5,
                                        gc_policy=gc_policy)
        self.liveness = self.hardening.liveness

    async def start(self) -> None:
        await self.hardening.start()
        await self.report(serving=True)

    async def report(self, serving: bool) -> None:
        """What health says of the server and of the ``serving`` services."""
        status = health_pb2.HealthCheckResponse.SERVING if serving \
            else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in self.serving:
            await self.health.set(name, status)

    async def stop(self, grace_s: float = 1.0) -> None:
        """Close the server: calls still running get ``grace_s`` to end."""
        await self.hardening.stop()
        await self.server.stop(grace=grace_s)
