"""Python SDK for SCOUT bots on a Scout Arena referee.

Subclass `Bot`, write `act`, and hand it to `run` (or `await run_bot(...)`)::

    from scout_client import Bot, Observation, Action, run

    class MyBot(Bot):
        name = "my-bot"

        def act(self, observation: Observation) -> Action:
            return observation.legal_shows[0] if observation.legal_shows else \\
                observation.legal_scouts[0]

    run(MyBot(), "localhost:50051", token="...")

or from a shell: `scout-bot run my_bot.py:MyBot --address HOST:PORT --token T`.
"""

from scout_rules import beats, group_strength, groups_in, hand_potential

from .bot import Bot
from .bots import GreedyBot, RandomBot
from .errors import ConnectionLost, ConnectionRejected, InvalidToken, ScoutClientError
from .runner import run, run_bot
from .types import (
    Action,
    ActionChoice,
    ActionKind,
    AnswerResult,
    AnswerStatus,
    Assignment,
    Card,
    End,
    ErrorCode,
    Goodbye,
    GoodbyeReason,
    Hello,
    MatchEnded,
    MatchEndStatus,
    MatchStart,
    Observation,
    Probation,
    ProtocolError,
    PublicAction,
    PublicEvent,
    RotationChoice,
    RotationRequest,
    RoundEnded,
    RoundEndReason,
    Scout,
    ScoutAndShow,
    Show,
    TimeControl,
    Welcome,
)

__version__ = "0.1.0"

__all__ = [
    "Action",
    "ActionChoice",
    "ActionKind",
    "AnswerResult",
    "AnswerStatus",
    "Bot",
    "Card",
    "ConnectionLost",
    "ConnectionRejected",
    "End",
    "ErrorCode",
    "Assignment",
    "Goodbye",
    "GoodbyeReason",
    "GreedyBot",
    "Hello",
    "InvalidToken",
    "MatchEndStatus",
    "MatchEnded",
    "MatchStart",
    "Observation",
    "Probation",
    "ProtocolError",
    "PublicAction",
    "PublicEvent",
    "RandomBot",
    "RotationChoice",
    "RotationRequest",
    "RoundEndReason",
    "RoundEnded",
    "Scout",
    "ScoutAndShow",
    "ScoutClientError",
    "Show",
    "TimeControl",
    "Welcome",
    "beats",
    "group_strength",
    "groups_in",
    "hand_potential",
    "run",
    "run_bot",
]
