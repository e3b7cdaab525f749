"""The HTTP server beside a referee or ladder: Prometheus metrics on ``/metrics``, and the
probes ``/livez`` and ``/readyz`` (`health`), in a daemon thread of its own so that scrapes and
probes never wait for the event loop (docs/deploy.md, "Metrics" and "Probes").

``/metrics`` may ask for a bearer token (``Authorization: Bearer <token>``, compared in
constant time); the probes never do, and say no more than a status and a short reason, so
that a kubelet or load balancer needs no secret. The server speaks TLS when given a
certificate and key, as the gRPC ports do.
"""

from __future__ import annotations

import hmac
import socket
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

PROBE_PATHS = ("/livez", "/readyz")
REQUEST_TIMEOUT_S = 10.0
"""A client silent this long (in the TLS handshake or its request) is hung up on."""


class Probes(Protocol):
    """What the probes read (`health.Health`); called from the HTTP thread."""

    def live_problem(self) -> str | None: ...

    def ready_problem(self) -> str | None: ...


@dataclass(frozen=True)
class MetricsAccess:
    """Who may read ``/metrics`` and how: ``token`` (None: anyone who reaches the port) and
    TLS (``cert`` and ``key``, PEM files; None: plain HTTP)."""

    token: str | None = None
    cert: Path | None = None
    key: Path | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("--metrics-tls-cert and --metrics-tls-key go together")
        if self.token is not None and (not self.token or not self.token.isprintable()
                                       or self.token != self.token.strip()):
            raise ValueError("--metrics-token: printable characters, no surrounding spaces")

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.cert is None or self.key is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in PROBE_PATHS:
            probes = self.server.probes
            problem = None if probes is None else (
                probes.live_problem() if path == "/livez" else probes.ready_problem())
            self._send(503 if problem else 200, f"{problem or 'ok'}\n".encode(),
                       "text/plain; charset=utf-8")
        elif path in ("/metrics", "/"):
            if not self._authorized():
                self._send(401, b"this endpoint needs 'Authorization: Bearer <metrics token>'\n",
                           "text/plain; charset=utf-8",
                           [("WWW-Authenticate", 'Bearer realm="metrics"')])
                return
            self._send(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        else:
            self._send(404, b"not found: /metrics, /livez or /readyz\n",
                       "text/plain; charset=utf-8")

    def _authorized(self) -> bool:
        token = self.server.token
        if token is None:
            return True
        scheme, _, given = (self.headers.get("Authorization") or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(errors="replace"), token.encode())

    def _send(self, status: int, body: bytes, content_type: str,
              headers: list[tuple[str, str]] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers or []:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # scrapes every few seconds would drown the log


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], registry: CollectorRegistry,
                 probes: Probes | None, access: MetricsAccess) -> None:
        self.address_family = _family(address[0])
        super().__init__(address, _Handler)
        self.registry = registry
        self.probes = probes
        self.token = access.token
        self.context = access.ssl_context()
        self.tls = self.context is not None

    def finish_request(self, request: object, client_address: object) -> None:
        """In the request's own thread: the TLS handshake (a client that stalls in it holds
        up only its thread), then the request."""
        assert isinstance(request, socket.socket)
        request.settimeout(REQUEST_TIMEOUT_S)
        if self.context is not None:
            request = self.context.wrap_socket(request, server_side=True)
        super().finish_request(request, client_address)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a failed handshake or a client that went away: nothing to tell the log


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class MetricsServer:
    """The metrics and probes server of one registry, in a daemon thread, until `close`."""

    def __init__(self, registry: CollectorRegistry, host: str = "127.0.0.1", port: int = 0,
                 probes: Probes | None = None, access: MetricsAccess | None = None) -> None:
        self._server = _Server((host, port), registry, probes, access or MetricsAccess())
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="metrics http", daemon=True)
        self._thread.start()
        self.host = host
        self.port: int = self._server.server_address[1]

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._server.tls else 'http'}://{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
