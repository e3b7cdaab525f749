"""The errors `run_bot` raises, so a bot's owner can tell a configuration to fix from a
connection that was merely lost."""

from __future__ import annotations

import grpc

from .types import Goodbye, ProtocolError

__all__ = ["ConnectionLost", "ConnectionRejected", "InvalidToken", "ScoutClientError"]


class ScoutClientError(Exception):
    """Base class of the SDK's errors."""


class InvalidToken(ScoutClientError, ValueError):
    """The bot token cannot be sent at all: it is empty, has whitespace at either end, or holds
    a character outside printable ASCII (0x20-0x7E), which a gRPC header cannot carry. Raised
    before anything is sent; the message names the problem but never the token."""


class ConnectionRejected(ScoutClientError):
    """The referee refused the bot for a reason reconnecting cannot fix (unknown token, wrong
    protocol, superseded by a newer connection with the same token), or gRPC itself refused to
    send the call (`local`, e.g. metadata it cannot encode)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        protocol_error: ProtocolError | None = None,
        *,
        local: bool = False,
    ) -> None:
        self.code = code
        self.details = details
        self.protocol_error = protocol_error
        self.local = local
        who = "gRPC refused to send the call" if local else "the referee rejected the connection"
        message = f"{who} ({code.name}): {details or 'no details'}"
        if protocol_error is not None and protocol_error.message not in message:
            message += f" [{protocol_error.code.name}: {protocol_error.message}]"
        super().__init__(message)


class ConnectionLost(ScoutClientError):
    """The stream ended and `reconnect=False` was asked for. `goodbye` is the referee's Goodbye
    when it ended the stream on purpose and asked the bot to come back later (after
    `goodbye.retry_after_ms`)."""

    def __init__(self, message: str, goodbye: Goodbye | None = None) -> None:
        super().__init__(message)
        self.goodbye = goodbye
