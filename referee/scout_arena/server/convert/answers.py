"""Bots' messages read into the referee's answers: the one way in from a bot.

Whatever a bot sends becomes a `RotationAnswer`, an `ActionAnswer` (its action in engine types,
or why it could not be read, in words a bot author can act on) or the ProtocolError to send
back; a bundle of answers is read in order, each answer in its own right.
"""

from __future__ import annotations

from scout.v1 import arena_pb2
from scout_rules import MalformedAction

from ..events import ActionAnswer, RotationAnswer
from .objects import action_from_pb

MAX_BUNDLE_MESSAGES = 1000
"""The most messages one bundle may hold, either way (PROTOCOL.md §3.6.2)."""
MAX_BUNDLE_BYTES = 1 << 20
"""The referee's bundles stay under this size, far below a client's 4 MiB receive limit."""


def read_answers(message: arena_pb2.BotMessage
                 ) -> list[RotationAnswer | ActionAnswer | arena_pb2.RefereeMessage]:
    """What a message from a bot says, in order: one `read_answer` for a single message, one
    per message of a BotBundle (a Hello or a bundle inside one is answered with a ProtocolError
    in its place, and an empty bundle or one of more than `MAX_BUNDLE_MESSAGES` with one error
    alone: every message a bot sends gets a reaction)."""
    if message.WhichOneof("body") != "bundle":
        return [read_answer(message)]
    inner = message.bundle.messages
    if not inner:
        return [arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
            code=arena_pb2.ERROR_CODE_BAD_MESSAGE,
            message="the BotBundle is empty: a bundle holds the answers it carries, at "
                    "least one"))]
    if len(inner) > MAX_BUNDLE_MESSAGES:
        return [arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
            code=arena_pb2.ERROR_CODE_BAD_MESSAGE,
            message=f"a BotBundle holds at most {MAX_BUNDLE_MESSAGES} messages, this one "
                    f"{len(inner)}: none of them was read"))]
    return [read_answer(each, in_bundle=True) for each in inner]


def read_answer(message: arena_pb2.BotMessage, in_bundle: bool = False
                ) -> RotationAnswer | ActionAnswer | arena_pb2.RefereeMessage:
    """A bot's answer, or the ProtocolError to send back when the message is not an answer."""
    kind = message.WhichOneof("body")
    if kind == "action":
        choice = message.action
        try:
            action = action_from_pb(choice.action)
        except MalformedAction as exc:
            return ActionAnswer(choice.match_id, choice.request_id, None, str(exc))
        return ActionAnswer(choice.match_id, choice.request_id, action)
    if kind == "rotation":
        rotation = message.rotation
        return RotationAnswer(rotation.match_id, rotation.request_id, rotation.rotate)
    if kind == "hello":
        text = "Hello is sent once, first, on its own"
    elif kind == "bundle":
        text = ("a BotBundle inside a BotBundle is not read: put every message in one bundle"
                if in_bundle else "a BotBundle is read by read_answers")
    else:
        text = "a BotMessage needs a body: rotation, action or bundle"
    return arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
        code=arena_pb2.ERROR_CODE_BAD_MESSAGE, message=text))
