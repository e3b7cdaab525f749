"""Raw HTTP/2 for hostile-input tests: requests no grpc client would send.

Everything here talks to a server on this machine over a plain blocking socket (the tests run
these helpers in a thread, off the event loop of the server under test). `h2` builds the
frames; its outbound validation and normalisation are switched off so that any header bytes,
pseudo-headers included, go out as given. Every read has a timeout and every helper returns
what the server answered, so that a test can assert on it as well as on the server's health
afterwards.

- `send_raw_headers`: one request whose header block is exactly the given (name, value) bytes.
- `send_raw_bytes`: bytes in place of the connection preface (or anything else).
- `send_frames`: the preface and SETTINGS, then hand-made frames (`frame` builds one).
- `rst_stream_flood`: open streams and reset each at once ("rapid reset", bounded).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types and flags (RFC 9113 §6) for `frame`.
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = range(8)
WINDOW_UPDATE, CONTINUATION = 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
CANCEL = 0x8  # RST_STREAM error code

Header = tuple[bytes, bytes]


def grpc_request_headers(path: bytes, authority: bytes = b"127.0.0.1",
                         extra: Sequence[Header] = ()) -> list[Header]:
    """The header block of a gRPC call to ``path``, as a grpc client sends it."""
    return [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", path),
        (b":authority", authority),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        *extra,
    ]


def grpc_message(payload: bytes = b"") -> bytes:
    """One length-prefixed, uncompressed gRPC message."""
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame, built by hand so that it may break any rule."""
    if len(payload) >= 1 << 24:
        raise ValueError("an HTTP/2 frame payload is at most 2**24 - 1 bytes")
    return (struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream_id)
            + payload)


@dataclass
class Answer:
    """What the server did with a raw request."""

    headers: list[Header] = field(default_factory=list)
    """Response headers and trailers of the first stream, in order."""
    data: bytes = b""
    ended: bool = False
    """The first stream ended normally (END_STREAM from the server)."""
    reset: int | None = None
    """The RST_STREAM error code the server sent for the first stream."""
    goaway: int | None = None
    """The GOAWAY error code, if the server closed the connection that way."""
    closed: bool = False
    """The server closed the socket (or reset the TCP connection)."""
    send_error: str | None = None
    """Why sending failed part-way (the server hung up first), if it did."""
    raw: bytes = b""
    """Every byte received, for helpers that do not parse it."""

    def header(self, name: bytes) -> bytes | None:
        return next((value for key, value in self.headers if key == name), None)

    @property
    def grpc_status(self) -> int | None:
        value = self.header(b"grpc-status")
        return int(value) if value is not None else None


class _PlainEncoder(hpack.Encoder):
    """HPACK without Huffman coding: the header bytes appear on the wire as given, and a
    megabyte of header encodes in milliseconds (hpack's Huffman coder takes minutes)."""

    def encode(self, headers: Any, huffman: bool = False) -> bytes:
        return super().encode(headers, huffman=False)


def _connection() -> h2.connection.H2Connection:
    conn = h2.connection.H2Connection(_config())
    conn.encoder = _PlainEncoder()
    return conn


def _config() -> h2.config.H2Configuration:
    return h2.config.H2Configuration(
        client_side=True, header_encoding=None, validate_outbound_headers=False,
        normalize_outbound_headers=False, validate_inbound_headers=False,
        normalize_inbound_headers=False)


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _send(sock: socket.socket, data: bytes, answer: Answer) -> bool:
    if not data or answer.send_error is not None:
        return answer.send_error is None
    try:
        sock.sendall(data)
    except OSError as exc:
        answer.send_error = f"{type(exc).__name__}: {exc}"
        return False
    return True


def _pump(sock: socket.socket, conn: h2.connection.H2Connection, answer: Answer,
          stream_id: int, timeout: float) -> None:
    """Read until the first stream ends or is reset, the connection closes, or ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return
        except OSError:
            answer.closed = True
            return
        if not chunk:
            answer.closed = True
            return
        answer.raw += chunk
        try:
            events = conn.receive_data(chunk)
        except h2.exceptions.ProtocolError:
            return
        for event in events:
            if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived |
                          h2.events.InformationalResponseReceived):
                if event.stream_id == stream_id and event.headers is not None:
                    answer.headers.extend((bytes(k), bytes(v)) for k, v in event.headers)
            elif isinstance(event, h2.events.DataReceived):
                if event.stream_id == stream_id and event.data is not None:
                    answer.data += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream_id:
                answer.ended = True
            elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream_id:
                answer.reset = int(event.error_code) if event.error_code is not None else 0
            elif isinstance(event, h2.events.ConnectionTerminated):
                answer.goaway = int(event.error_code) if event.error_code is not None else 0
        _send(sock, conn.data_to_send(), answer)
        if answer.ended or answer.reset is not None or answer.goaway is not None:
            return


def send_raw_headers(host: str, port: int, headers: Sequence[Header], *,
                     body: bytes | None = None, timeout: float = 5.0) -> Answer:
    """Open a connection, send one request with exactly ``headers`` (then ``body`` as DATA,
    if given, ending the stream), and return what the server answered within ``timeout``.

    Without a body the HEADERS frame itself carries END_STREAM. A header block larger than the
    server's frame size goes out as HEADERS plus CONTINUATION frames."""
    answer = Answer()
    conn = _connection()
    with _connect(host, port, timeout) as sock:
        conn.initiate_connection()
        if not _send(sock, conn.data_to_send(), answer):
            return answer
        stream_id = conn.get_next_available_stream_id()
        conn.send_headers(stream_id, list(headers), end_stream=body is None)
        if body is not None:
            conn.send_data(stream_id, body, end_stream=True)
        if _send(sock, conn.data_to_send(), answer):
            _pump(sock, conn, answer, stream_id, timeout)
    return answer


def send_raw_bytes(host: str, port: int, data: bytes, *, timeout: float = 5.0) -> Answer:
    """Send ``data`` as the first bytes of a connection (no preface unless it holds one) and
    collect what comes back until the server closes the socket or ``timeout`` passes."""
    answer = Answer()
    with _connect(host, port, timeout) as sock:
        if not _send(sock, data, answer):
            return answer
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except OSError:
                answer.closed = True
                break
            if not chunk:
                answer.closed = True
                break
            answer.raw += chunk
    return answer


def send_frames(host: str, port: int, frames: Sequence[bytes], *,
                timeout: float = 5.0) -> Answer:
    """Send the connection preface and an empty SETTINGS frame, then ``frames`` as given (see
    `frame`), and collect the answer as `send_raw_bytes` does."""
    return send_raw_bytes(host, port, PREFACE + frame(SETTINGS, 0, 0) + b"".join(frames),
                          timeout=timeout)


def rst_stream_flood(host: str, port: int, streams: int, path: bytes, *,
                     timeout: float = 5.0) -> Answer:
    """On one connection, open ``streams`` gRPC calls to ``path`` and cancel each with
    RST_STREAM right after its HEADERS, all in one write; then read the answer. ``streams`` is
    bounded by the caller (a handful, not a load test)."""
    answer = Answer()
    conn = _connection()
    with _connect(host, port, timeout) as sock:
        conn.initiate_connection()
        stream_id = 0
        for _ in range(streams):
            stream_id = conn.get_next_available_stream_id()
            conn.send_headers(stream_id, grpc_request_headers(path), end_stream=False)
            conn.reset_stream(stream_id, error_code=CANCEL)
        if _send(sock, conn.data_to_send(), answer):
            # Nothing answers a reset stream; read until the server goes quiet or hangs up.
            _pump(sock, conn, answer, stream_id, min(timeout, 1.0))
    return answer
