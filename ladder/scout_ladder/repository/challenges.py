"""Challenges: an owner asks for a number of matches of a bot against chosen opponents, and
the matchmaker serves the open ones, oldest first, until they are played or cancelled.

A game of a challenge is counted (:func:`count_challenge_game`) by
:meth:`~.matches.MatchStore.finish_match`, in the same transaction as its result, so that a
repeated finish can never count it twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from scout_ladder.models import Bot, Challenge, Match

from .common import bot_by_name, check_owner
from .database import Database
from .errors import BotRetiredError, InvalidInputError, UnknownChallengeError
from .results import ChallengeInfo


def _challenge_for_update(session: Session, challenge_id: int) -> Challenge:
    challenge = session.scalars(
        select(Challenge).where(Challenge.id == challenge_id).with_for_update()
    ).one_or_none()
    if challenge is None:
        raise UnknownChallengeError(challenge_id)
    return challenge


def count_challenge_game(session: Session, challenge_id: int) -> None:
    """One more game of a challenge, in the transaction that finishes the match; the
    challenge is done once its games are played (unless it was cancelled)."""
    challenge = session.scalars(
        select(Challenge).where(Challenge.id == challenge_id).with_for_update()
    ).one()
    challenge.games_played += 1
    if challenge.status == "open" and challenge.games_played >= challenge.games_requested:
        challenge.status = "done"
    session.flush()


def _challenge_infos(session: Session, challenges: Sequence[Challenge]) -> list[ChallengeInfo]:
    ids = [challenge.id for challenge in challenges]
    names = dict(
        session.execute(
            select(Bot.id, Bot.name).where(
                Bot.id.in_({challenge.bot_id for challenge in challenges})
            )
        ).all()
    )
    in_flight = dict(
        session.execute(
            select(Match.challenge_id, func.count())
            .where(Match.challenge_id.in_(ids), Match.status == "in_flight")
            .group_by(Match.challenge_id)
        ).all()
    )
    return [
        ChallengeInfo(
            id=challenge.id,
            owner=challenge.owner,
            bot=names[challenge.bot_id],
            opponents=tuple(json.loads(challenge.opponents_json)),
            games_requested=challenge.games_requested,
            games_played=challenge.games_played,
            games_in_flight=int(in_flight.get(challenge.id, 0)),
            status=challenge.status,
            created_at=challenge.created_at,
        )
        for challenge in challenges
    ]


class ChallengeStore(Database):
    """The challenge queries of :class:`~scout_ladder.repository.Repository`."""

    def create_challenge(
        self, owner: str, bot: str, opponents: Sequence[str], games: int
    ) -> ChallengeInfo:
        """An owner asks for ``games`` matches of ``bot`` against ``opponents`` (names)."""
        check_owner(owner)
        if games < 1:
            raise InvalidInputError(f"a challenge asks for at least one game, not {games}")
        if not opponents or len(set(opponents)) != len(opponents) or bot in opponents:
            raise InvalidInputError(f"opponents must be distinct other bots: {list(opponents)}")
        if len(opponents) > 4:
            raise InvalidInputError("a SCOUT table seats at most 5")
        now = self._now()
        with self._transaction(write=True) as session:
            challenger = bot_by_name(session, bot)
            for name in (bot, *opponents):
                if bot_by_name(session, name).retired:
                    raise BotRetiredError(name)
            challenge = Challenge(
                owner=owner,
                bot_id=challenger.id,
                opponents_json=json.dumps(list(opponents)),
                games_requested=games,
                games_played=0,
                created_at=now,
                status="open",
            )
            session.add(challenge)
            session.flush()
            return _challenge_infos(session, [challenge])[0]

    def get_challenge(self, challenge_id: int) -> ChallengeInfo | None:
        with self._transaction(write=False) as session:
            challenge = session.get(Challenge, challenge_id)
            return None if challenge is None else _challenge_infos(session, [challenge])[0]

    def open_challenges(self) -> list[ChallengeInfo]:
        """Open challenges, oldest first: the matchmaker serves them in that order."""
        with self._transaction(write=False) as session:
            challenges = list(
                session.scalars(
                    select(Challenge)
                    .where(Challenge.status == "open")
                    .order_by(Challenge.created_at, Challenge.id)
                )
            )
            return _challenge_infos(session, challenges)

    def cancel_challenge(self, challenge_id: int) -> ChallengeInfo:
        """Stops an open challenge; its matches in flight still finish and count."""
        with self._transaction(write=True) as session:
            challenge = _challenge_for_update(session, challenge_id)
            if challenge.status == "open":
                challenge.status = "cancelled"
            session.flush()
            return _challenge_infos(session, [challenge])[0]
