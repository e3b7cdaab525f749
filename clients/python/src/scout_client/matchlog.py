"""One log line when a match starts and one when it ends, with the bot's result: what a bot's
author reads to know the bot is playing (the Go kit logs the same two lines).

`default_logging` gives a plain script that calls `run()` these lines on stderr at INFO, unless
the program configured logging itself.
"""

from __future__ import annotations

import logging

from .types import MatchEnded, MatchStart

__all__ = ["default_logging", "log_match_end", "log_match_start"]

log = logging.getLogger("scout_client")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def default_logging() -> None:
    """INFO lines of the SDK on stderr, when nothing configured logging (no root handler and
    no level set for the SDK's logger): a quiet default that still says what the bot does."""
    if logging.getLogger().handlers or log.level != logging.NOTSET:
        return
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    log.setLevel(logging.INFO)


def log_match_start(message: MatchStart) -> None:
    others = [name for seat, name in enumerate(message.player_names) if seat != message.seat]
    log.info("match %s started: seat %d of %d, against %s", message.match_id, message.seat,
             message.num_players, ", ".join(others) or "nobody")


def log_match_end(message: MatchEnded, seat: int | None) -> None:
    """``seat``: the bot's seat in the match, when its start was seen on this stream."""
    if not message.ranks:
        log.info("match %s ended without a result", message.match_id)
        return
    if seat is None or not 0 <= seat < len(message.ranks):
        log.info("match %s ended: ranks %s, scores %s", message.match_id, list(message.ranks),
                 list(message.totals))
        return
    won = " (won)" if message.ranks[seat] == 1 else ""
    forfeit = ", forfeited" if seat in message.forfeited_seats else ""
    score = f", score {message.totals[seat]:+d}" if seat < len(message.totals) else ""
    log.info("match %s ended: rank %d of %d%s%s%s", message.match_id, message.ranks[seat],
             len(message.ranks), won, score, forfeit)
