"""What the referee's servicers share about a gRPC call: the context types and the caller's
bearer token."""

from __future__ import annotations

from typing import TypeVar

import grpc
from scout.v1 import arena_pb2

Q = TypeVar("Q")
R = TypeVar("R")

ArenaContext = grpc.aio.ServicerContext[object, bytes | arena_pb2.RefereeMessage]
"""A Play call: it reads BotMessages (or what stands for one that does not parse, or EOF) and
writes serialized RefereeMessages (or messages, serialized by the handler's serializer)."""

OrganiserContext = grpc.aio.ServicerContext[object, object]
"""A call of the Matches service (unary, or a stream of spectator events)."""

EOF: object = getattr(grpc.aio, "EOF")  # noqa: B009 - missing from grpc's type stubs


def bearer_token(context: grpc.aio.ServicerContext[Q, R]) -> str:
    """The token of a call's ``authorization: Bearer <token>`` metadata, or "" without one."""
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer "):].strip()
    return ""
