"""The errors `run_bot` raises, so a bot's owner can tell a configuration to fix from a
connection that was merely lost."""

from __future__ import annotations

import grpc

from .types import ProtocolError

__all__ = ["ConnectionLost", "ConnectionRejected", "ScoutClientError"]


class ScoutClientError(Exception):
    """Base class of the SDK's errors."""


class ConnectionRejected(ScoutClientError):
    """The referee refused the bot for a reason reconnecting cannot fix (unknown token, wrong
    protocol, superseded by a newer connection with the same token)."""

    def __init__(
        self, code: grpc.StatusCode, details: str, protocol_error: ProtocolError | None = None
    ) -> None:
        self.code = code
        self.details = details
        self.protocol_error = protocol_error
        message = f"the referee rejected the connection ({code.name}): {details or 'no details'}"
        if protocol_error is not None and protocol_error.message not in message:
            message += f" [{protocol_error.code.name}: {protocol_error.message}]"
        super().__init__(message)


class ConnectionLost(ScoutClientError):
    """The stream ended and `reconnect=False` was asked for."""
