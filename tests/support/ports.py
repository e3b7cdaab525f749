"""A loopback port for a server a test starts as a separate process (which must be told its port
before it binds)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port free now (bound once, then closed): nothing listens on it until used."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
