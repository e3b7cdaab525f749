"""The public ladder API (`scout.v1.Ladder`) over the same repository the CLI and web pages
read: registration (admin token), standings, profiles, matches, records and challenges."""

from __future__ import annotations

import grpc
from scout.v1 import ladder_pb2, ladder_pb2_grpc
from scout_arena.server import RefereeFacade, list_limit

from . import messages
from .repository import Repository, echo
from .rpc import Context, ServiceRegistration, abort, call, readable, require_admin

LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 500
"""ListLadderMatches lists ``limit`` matches a page: 0 or negative means the default, more the
maximum (each row carries its seats: an unbounded list is an unbounded answer); the pages
after the first follow ``next_page_token``."""


class LadderServicer(ladder_pb2_grpc.LadderServicer):
    """Each call: its checks, one repository call (`rpc.call`), its message."""

    def __init__(self, repo: Repository, admin_token: str | None) -> None:
        self.repo = repo
        self.admin_token = admin_token

    async def RegisterBot(self, request: ladder_pb2.RegisterBotRequest,
                          context: Context) -> ladder_pb2.RegisterBotResponse:
        await require_admin(context, self.admin_token)
        bot, token = await call(context, self.repo.register_bot, request.name, request.owner)
        return ladder_pb2.RegisterBotResponse(bot=messages.bot_summary(bot), token=token)

    async def RetireBot(self, request: ladder_pb2.RetireBotRequest,
                        context: Context) -> ladder_pb2.BotSummary:
        await require_admin(context, self.admin_token)
        bot = await call(context, self.repo.retire_bot, request.name)
        return messages.bot_summary(bot)

    async def GetLeaderboard(self, request: ladder_pb2.GetLeaderboardRequest,
                             context: Context) -> ladder_pb2.Leaderboard:
        rows = await call(context, self.repo.leaderboard)
        return ladder_pb2.Leaderboard(entries=[messages.leaderboard_entry(row) for row in rows])

    async def GetBotProfile(self, request: ladder_pb2.GetBotProfileRequest,
                            context: Context) -> ladder_pb2.BotProfile:
        profile = await call(context, self.repo.bot_profile, request.name)
        if profile is None:
            await abort(context, grpc.StatusCode.NOT_FOUND, f"no bot named {echo(request.name)}")
        return messages.bot_profile(profile)

    async def ListLadderMatches(
            self, request: ladder_pb2.ListLadderMatchesRequest, context: Context
    ) -> ladder_pb2.ListLadderMatchesResponse:
        after = None
        if request.page_token:
            after = messages.page_position(request.page_token)
            if after is None:
                await abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                            f"page_token {echo(request.page_token)} is not in the form of a "
                            "next_page_token of this ladder")
        limit = list_limit(request.limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX)
        matches = await call(context, self.repo.list_matches, request.bot or None,
                             request.table_size or None, limit + 1, after=after)
        return ladder_pb2.ListLadderMatchesResponse(
            matches=[messages.ladder_match(m) for m in matches[:limit]],
            next_page_token=messages.page_token(matches[limit - 1])
            if len(matches) > limit else "")

    async def GetLadderRecord(self, request: ladder_pb2.GetLadderRecordRequest,
                              context: Context) -> ladder_pb2.GetLadderRecordResponse:
        record = await call(context, self.repo.get_record, request.match_id)
        if record is None:
            await abort(context, grpc.StatusCode.NOT_FOUND,
                        f"no finished match with id {echo(request.match_id)}")
        return ladder_pb2.GetLadderRecordResponse(record_json=record)

    async def Challenge(self, request: ladder_pb2.ChallengeRequest,
                        context: Context) -> ladder_pb2.ChallengeResponse:
        bot = await call(context, self.repo.authenticate, RefereeFacade.bearer_token(context))
        if bot is None:
            await abort(context, grpc.StatusCode.UNAUTHENTICATED,
                        "a challenge is made with the challenging bot's own token")
        if not 1 <= len(request.opponents) <= 4 or not 1 <= request.games <= 1000:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                        "a challenge names 1 to 4 opponents and 1 to 1000 games")
        challenge = await call(context, self.repo.create_challenge, bot.owner, bot.name,
                               list(request.opponents), request.games)
        return ladder_pb2.ChallengeResponse(challenge_id=challenge.id)


def ladder_service(repo: Repository, admin_token: str | None) -> ServiceRegistration:
    servicer = LadderServicer(repo, admin_token)
    return readable((lambda server: ladder_pb2_grpc.add_LadderServicer_to_server(
        servicer, server), "scout.v1.Ladder"))
