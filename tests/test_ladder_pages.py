"""ListLadderMatches in pages (§17): every match once, newest first, while matches start."""

from __future__ import annotations

import asyncio
import base64

import grpc
from scout.v1 import ladder_pb2, ladder_pb2_grpc
from scout_ladder.repository import Repository
from scout_ladder.service import Ladder, LadderConfig
from sqlalchemy import create_engine, text

SEATS = [("p1", 1), ("p2", 1)]


def _token(micros: str, match_id: str) -> str:
    """A token built by hand: well-formed base64 around a position that is not one."""
    return base64.urlsafe_b64encode(f"{micros}/{match_id}".encode()).decode()


def _start(repo: Repository, count: int, first: int = 0) -> list[str]:
    ids = [f"m-{i:016x}" for i in range(first, first + count)]
    for match_id in ids:
        repo.start_match(match_id, 2, 7, SEATS, True)
    return ids


def test_pages_list_every_match_once_newest_first_while_new_ones_start(
        ladder_url: str) -> None:
    repo = Repository(ladder_url)
    repo.migrate()
    repo.register_bot("p1", "olga")
    repo.register_bot("p2", "olga")
    ids = _start(repo, 23)
    engine = create_engine(ladder_url)
    with engine.begin() as connection:  # ten share one creation time: the id breaks the tie
        created = connection.execute(text("SELECT created_at FROM matches WHERE id = :id"),
                                     {"id": ids[0]}).scalar_one()
        connection.execute(text("UPDATE matches SET created_at = :created WHERE id <= :last"),
                           {"created": created, "last": ids[9]})
    engine.dispose()
    newest_first = [m.match_id for m in repo.list_matches(limit=100)]
    assert sorted(newest_first) == sorted(ids)

    async def scenario() -> tuple[list[list[str]], list[str], list[tuple[grpc.StatusCode, str]]]:
        ladder = Ladder(repo, LadderConfig(port=0, admin_token="adm"))
        await ladder.start()
        try:
            async with grpc.aio.insecure_channel(ladder.address) as channel:
                stub = ladder_pb2_grpc.LadderStub(channel)
                pages: list[list[str]] = []
                token = ""
                while True:
                    page = await stub.ListLadderMatches(ladder_pb2.ListLadderMatchesRequest(
                        limit=5, page_token=token), timeout=60)
                    pages.append([m.match_id for m in page.matches])
                    if len(pages) == 1:
                        await asyncio.to_thread(_start, repo, 2, 100)  # arrive meanwhile
                    token = page.next_page_token
                    if not token:
                        break
                first = await stub.ListLadderMatches(
                    ladder_pb2.ListLadderMatchesRequest(limit=5), timeout=60)
                refused: list[tuple[grpc.StatusCode, str]] = []
                for bad in ("not-a-token!", "y" * 60_000, _token("9" * 30, "m-0"),
                            _token("-12", "m-0"), _token("12", "")):
                    try:
                        await stub.ListLadderMatches(ladder_pb2.ListLadderMatchesRequest(
                            page_token=bad), timeout=60)
                        refused.append((grpc.StatusCode.OK, bad))
                    except grpc.aio.AioRpcError as error:
                        refused.append((error.code(), error.details() or ""))
                return pages, [m.match_id for m in first.matches], refused
        finally:
            await ladder.stop()

    pages, first, refused = asyncio.run(scenario())
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert [m for page in pages for m in page] == newest_first
    assert first[:2] == ["m-0000000000000065", "m-0000000000000064"]
    for code, details in refused:  # §17: a clear refusal, at most 300 characters
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details[:300])
        assert "page_token" in details and len(details) <= 300 and "y" * 41 not in details
    repo.close()
