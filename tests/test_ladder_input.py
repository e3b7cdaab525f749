"""Bad input at the ladder's edges: the CLI answers with one line and an exit status, the gRPC
Ladder service with the right status code and a bounded message, owners are printable, a
read-only command never creates a database, the admin token is compared in constant time, and
a table size the bots cannot fill is said out loud, not played around."""

from __future__ import annotations

import asyncio
import hmac
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor
from scout.v1 import ladder_pb2, ladder_pb2_grpc, owners_pb2
from scout_ladder.matchmaker import (
    Candidate,
    MatchmakerConfig,
    choose_table,
    choose_tables,
    why_no_table,
)
from scout_ladder.repository import InvalidInputError, Repository
from scout_ladder.service import Ladder, LadderConfig
from sqlalchemy import create_engine, inspect

CLI = [sys.executable, "-m", "scout_arena.cli"]
LONG = "x" * 10_000


def ladder_cli(*args: str, database: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*CLI, "ladder", *args] + ([] if database is None else ["--database", database])
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def one_line_error(done: subprocess.CompletedProcess[str], status: int) -> str:
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, done.stderr
    return lines[0]


# --- the command line --------------------------------------------------------------------


@pytest.fixture
def sqlite_ladder(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'ladder.db'}"
    with Repository(url) as repo:
        repo.migrate()
        repo.register_bot("taken", "alice")
    yield url


@pytest.mark.parametrize(("args", "status", "says"), [
    (["register", "", "--owner", "me"], 2, "a bot name is"),
    (["register", "\n", "--owner", "me"], 2, "a bot name is"),
    (["register", "bad\nname", "--owner", "me"], 2, "a bot name is"),
    (["register", LONG, "--owner", "me"], 2, "(10000 characters)"),
    (["register", "fine", "--owner", "bad\nowner"], 2, "control"),
    (["register", "fine", "--owner", "\x1b[31mred"], 2, "control"),
    (["register", "fine", "--owner", " me"], 2, "white space"),
    (["register", "fine", "--owner", ""], 2, "an owner"),
    (["register", "taken", "--owner", "bob"], 1, "belongs to 'alice'"),
    (["retire", "NOSUCH"], 1, "no bot named 'NOSUCH'"),
    (["serve", "--table-sizes", "a"], 2, "--table-sizes"),
    (["serve", "--table-sizes", "4,6"], 2, "--table-sizes"),
    (["serve", "--table-sizes", ""], 2, "--table-sizes"),
])
def test_the_cli_refuses_bad_input_in_one_line(
        sqlite_ladder: str, args: list[str], status: int, says: str) -> None:
    line = one_line_error(ladder_cli(*args, database=sqlite_ladder), status)
    assert says in line
    with Repository(sqlite_ladder) as repo:
        assert [b.name for b in repo.list_bots()] == ["taken"]
        assert repo.get_bot("taken").owner == "alice"  # type: ignore[union-attr]


@pytest.mark.parametrize("command", [["leaderboard"], ["matches"], ["bot", "x"], ["recompute"],
                                     ["retire", "x"]])
def test_read_only_commands_refuse_a_url_with_no_ladder_database(
        ladder_url: str, tmp_path: Path, command: list[str]) -> None:
    line = one_line_error(ladder_cli(*command, database=ladder_url), 1)
    assert "no ladder database at" in line
    if ladder_url.startswith("sqlite"):
        assert list(tmp_path.iterdir()) == []  # not even an empty file
    else:
        engine = create_engine(ladder_url)
        try:
            assert inspect(engine).get_table_names() == []
        finally:
            engine.dispose()


def test_register_creates_the_database_and_then_the_others_read_it(
        ladder_url: str) -> None:
    assert ladder_cli("register", "mine", "--owner", "me", database=ladder_url).returncode == 0
    for command in (["leaderboard"], ["matches"], ["bot", "mine"], ["recompute"]):
        done = ladder_cli(*command, database=ladder_url)
        assert done.returncode == 0, done.stderr


# --- owners ------------------------------------------------------------------------------


@pytest.mark.parametrize("owner", ["a\nb", "a\rb", "a\x00b", "tab\there", "\x1b[31mred",
                                   "zero\u200bwidth", "rtl\u202eoverride", "line\u2028sep",
                                   " lead", "trail ", "del\x7f"])
def test_owners_with_control_or_invisible_characters_are_refused(
        repository: Repository, owner: str) -> None:
    with pytest.raises(InvalidInputError):
        repository.register_bot("fine", owner)
    assert repository.list_bots() == []


@pytest.mark.parametrize("owner", ["Alice Smith", "ü-owner", "o" * 128, "x@example.org"])
def test_printable_owners_are_stored_as_given(repository: Repository, owner: str) -> None:
    bot, _ = repository.register_bot("fine", owner)
    assert bot.owner == owner == repository.get_bot("fine").owner  # type: ignore[union-attr]


# --- the gRPC Ladder service ---------------------------------------------------------------


async def status_of(awaitable: Any) -> tuple[grpc.StatusCode, str]:
    try:
        await awaitable
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or ""
    raise AssertionError("the call succeeded")


def test_the_ladder_service_answers_bad_calls_with_their_codes(
        ladder_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real_compare = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real_compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    repo = Repository(ladder_url)
    repo.migrate()
    challenger_token = repo.register_bot("challenger", "carol")[1]
    repo.register_bot("taken", "alice")
    repo.register_bot("gone", "dave")
    repo.retire_bot("gone")
    admin = (("authorization", "Bearer adm"),)

    async def scenario() -> None:
        ladder = Ladder(repo, LadderConfig(port=0, admin_token="adm"))
        await ladder.start()
        try:
            async with grpc.aio.insecure_channel(ladder.address) as channel:
                stub = ladder_pb2_grpc.LadderStub(channel)

                def register(name: str, owner: str, metadata: Any = admin) -> Any:
                    return stub.RegisterBot(ladder_pb2.RegisterBotRequest(name=name, owner=owner),
                                            metadata=metadata, timeout=60)

                expectations: list[tuple[Any, grpc.StatusCode, str]] = [
                    (register("taken", "bob"), grpc.StatusCode.ALREADY_EXISTS, "belongs to"),
                    (register(LONG, "bob"), grpc.StatusCode.INVALID_ARGUMENT, "a bot name"),
                    (register("fine", "bad\nowner"), grpc.StatusCode.INVALID_ARGUMENT, "owner"),
                    (register("fine", LONG), grpc.StatusCode.INVALID_ARGUMENT, "owner"),
                    (register("fine", "me", (("authorization", "Bearer adm2"),)),
                     grpc.StatusCode.UNAUTHENTICATED, "admin token"),
                    (register("fine", "me", ()), grpc.StatusCode.UNAUTHENTICATED, "admin token"),
                    (stub.RetireBot(ladder_pb2.RetireBotRequest(name="NOSUCH"), metadata=admin,
                                    timeout=60), grpc.StatusCode.NOT_FOUND, "NOSUCH"),
                    (stub.RetireBot(ladder_pb2.RetireBotRequest(name=""), metadata=admin,
                                    timeout=60), grpc.StatusCode.NOT_FOUND, "no bot named ''"),
                    (stub.GetBotProfile(ladder_pb2.GetBotProfileRequest(name=LONG), timeout=60),
                     grpc.StatusCode.NOT_FOUND, "no bot named"),
                    (stub.GetBotProfile(ladder_pb2.GetBotProfileRequest(name="a\x00b"),
                                        timeout=60), grpc.StatusCode.NOT_FOUND, "no bot named"),
                    (stub.GetLadderRecord(ladder_pb2.GetLadderRecordRequest(match_id=LONG),
                                          timeout=60), grpc.StatusCode.NOT_FOUND, "no finished"),
                    (stub.GetLadderRecord(ladder_pb2.GetLadderRecordRequest(match_id="m\x00"),
                                          timeout=60), grpc.StatusCode.NOT_FOUND, "no finished"),
                ]
                bearer = (("authorization", f"Bearer {challenger_token}"),)
                for opponents, code, says in [(["gone"], grpc.StatusCode.FAILED_PRECONDITION,
                                               "gone is retired"),
                                              ([LONG], grpc.StatusCode.NOT_FOUND, "not found"),
                                              (["a\x00b"], grpc.StatusCode.NOT_FOUND,
                                               "not found")]:
                    expectations.append((stub.Challenge(
                        ladder_pb2.ChallengeRequest(opponents=opponents, games=1),
                        metadata=bearer, timeout=60), code, says))
                listed = await stub.ListLadderMatches(
                    ladder_pb2.ListLadderMatchesRequest(bot="a\x00b"), timeout=60)
                assert list(listed.matches) == []
                huge = "y" * 60_000
                expectations.append((stub.Challenge(
                    ladder_pb2.ChallengeRequest(opponents=[huge], games=1), metadata=bearer,
                    timeout=60), grpc.StatusCode.NOT_FOUND, "(60000 characters)"))
                for call, code, says in expectations:
                    got, details = await status_of(call)
                    assert (got, says in details) == (code, True), (got, details[:300])
                    # §17: at most 300 characters, a refused value cut to 40
                    assert len(details) <= 300 and "y" * 41 not in details
        finally:
            await ladder.stop()

    asyncio.run(scenario())
    repo.close()
    # (The patch is process-wide: bot token digests are compared through it too.)
    assert (b"adm2", b"adm") in compared and (b"", b"adm") in compared


def test_unreadable_request_bytes_are_invalid_argument_on_every_ladder_and_owners_call(
        ladder_url: str) -> None:
    """PROTOCOL.md §17: a request that does not parse is the caller's error (as on the
    Matches service), not UNKNOWN with a traceback in the ladder's log."""
    repo = Repository(ladder_url)
    repo.migrate()
    not_utf8 = b"\x0a\x02\xff\xfe"  # field 1 (a string) of bytes that are not UTF-8
    truncated = b"\x0a\x05ab"
    owners = owners_pb2.DESCRIPTOR.services_by_name["Owners"]

    def string_first(service: Any) -> list[str]:
        """The methods whose request's field 1 is a string (which both byte strings break;
        a request without fields parses them as unknown fields)."""
        return [m.name for m in service.methods
                if not m.client_streaming and m.input_type.fields
                and m.input_type.fields_by_number.get(1) is not None
                and m.input_type.fields_by_number[1].type == FieldDescriptor.TYPE_STRING]

    ladder_methods = string_first(ladder_pb2.DESCRIPTOR.services_by_name["Ladder"])
    owners_methods = string_first(owners)

    async def scenario() -> list[tuple[str, grpc.StatusCode, str]]:
        ladder = Ladder(repo, LadderConfig(port=0, admin_token="adm"))
        await ladder.start()
        answers = []
        try:
            async with grpc.aio.insecure_channel(ladder.address) as channel:
                for service, methods in (("Ladder", ladder_methods), ("Owners", owners_methods)):
                    for method in methods:
                        for label, data in (("not UTF-8", not_utf8), ("truncated", truncated)):
                            path = f"/scout.v1.{service}/{method}"
                            desc = (owners if service == "Owners" else
                                    ladder_pb2.DESCRIPTOR.services_by_name["Ladder"]
                                    ).methods_by_name[method]
                            call: Any = channel.unary_stream(path, None, None) \
                                if desc.server_streaming else channel.unary_unary(path, None, None)
                            try:
                                reply = call(data, metadata=(("authorization", "Bearer adm"),),
                                             timeout=30)
                                if desc.server_streaming:
                                    async for _ in reply:
                                        pass
                                else:
                                    await reply
                                answers.append((f"{method} {label}", grpc.StatusCode.OK, ""))
                            except grpc.aio.AioRpcError as exc:
                                answers.append((f"{method} {label}", exc.code(),
                                                exc.details() or ""))
        finally:
            await ladder.stop()
        return answers

    answers = asyncio.run(scenario())
    repo.close()
    assert len(owners_methods) >= 3 and "GetBotProfile" in ladder_methods
    wrong = [(name, code) for name, code, _ in answers
             if code != grpc.StatusCode.INVALID_ARGUMENT]
    assert wrong == []
    assert all("could not be read" in details and len(details) <= 300
               for _, _, details in answers)


def test_a_stray_builtin_error_in_a_ladder_call_is_internal_not_a_status_of_its_own(
        ladder_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the repository's own errors have a status of their own: a KeyError or ValueError
    raised by a bug is INTERNAL, not NOT_FOUND or INVALID_ARGUMENT."""
    repo = Repository(ladder_url)
    repo.migrate()

    def stray_key_error(self: Repository) -> None:
        raise KeyError("leaderboard")

    def stray_value_error(self: Repository, *args: object) -> None:
        raise ValueError("a bug")

    monkeypatch.setattr(Repository, "leaderboard", stray_key_error)
    monkeypatch.setattr(Repository, "list_matches", stray_value_error)

    async def scenario() -> list[tuple[grpc.StatusCode, str]]:
        ladder = Ladder(repo, LadderConfig(port=0))
        await ladder.start()
        try:
            async with grpc.aio.insecure_channel(ladder.address) as channel:
                stub = ladder_pb2_grpc.LadderStub(channel)
                return [
                    await status_of(stub.GetLeaderboard(ladder_pb2.GetLeaderboardRequest(),
                                                        timeout=60)),
                    await status_of(stub.ListLadderMatches(
                        ladder_pb2.ListLadderMatchesRequest(), timeout=60)),
                    await status_of(stub.RetireBot(ladder_pb2.RetireBotRequest(name="nosuch"),
                                                   timeout=60)),
                ]
        finally:
            await ladder.stop()

    got = asyncio.run(scenario())
    repo.close()
    assert [code for code, _ in got] == [grpc.StatusCode.INTERNAL, grpc.StatusCode.INTERNAL,
                                         grpc.StatusCode.NOT_FOUND]
    assert all("its log has the details" in details for _, details in got[:2])
    assert "nosuch" in got[2][1]


# --- table sizes the bots cannot fill ------------------------------------------------------


def test_the_matchmaker_seats_only_allowed_sizes() -> None:
    rng = random.Random(5)
    for _ in range(300):
        sizes = tuple(sorted(rng.sample([2, 3, 4, 5], rng.randint(1, 3))))
        owners = rng.randint(1, 6)
        candidates = [Candidate(f"b{i}", f"o{rng.randrange(owners)}", rng.gauss(25, 3), 5.0,
                                rng.randrange(20), rng.random() * 60)
                      for i in range(rng.randint(0, 9))]
        config = MatchmakerConfig(table_sizes=sizes)
        table = choose_table(candidates, config, rng)
        distinct = len({c.owner for c in candidates})
        if distinct < min(sizes):
            assert table is None
            bots = {c.name: c.owner for c in candidates}
            assert why_no_table(bots, config) is not None
        else:
            assert table is not None and len(table) in sizes
            assert len({c.owner for c in table}) == len(table)


def test_a_pass_seats_every_bot_it_can_once_in_allowed_tables_of_distinct_owners() -> None:
    rng = random.Random(7)
    for _ in range(200):
        sizes = tuple(sorted(rng.sample([2, 3, 4, 5], rng.randint(1, 3))))
        owners = rng.randint(1, 40)
        candidates = [Candidate(f"b{i}", f"o{rng.randrange(owners)}", rng.gauss(25, 3), 5.0,
                                rng.randrange(20), rng.random() * 60)
                      for i in range(rng.randint(0, 200))]
        config = MatchmakerConfig(table_sizes=sizes)
        limit = rng.choice([None, 1, 3])
        tables = choose_tables(candidates, config, rng, limit)
        seated = [c.name for table in tables for c in table]
        assert len(seated) == len(set(seated)), "a bot at two tables"
        assert limit is None or len(tables) <= limit
        for table in tables:
            assert len(table) in sizes
            assert len({c.owner for c in table}) == len(table)
        if limit is None:  # what is left cannot fill a table any more
            rest = {c.name: c.owner for c in candidates if c.name not in set(seated)}
            assert not rest or why_no_table(rest, config) is not None


def test_a_pass_draws_seeds_by_weight_and_pairs_neighbours_in_mu() -> None:
    rng = random.Random(3)
    # One bot waits long: seed weight 21.4 against 1.42 for each of 60 others, so it seeds the
    # first table with probability 21.4 / (21.4 + 60 x 1.42) = 0.20 (uniform: 0.016).
    first_has_waiter = 0
    for _ in range(200):
        candidates = [Candidate(f"b{i}", f"o{i}", 25.0, 8.3, 50, 0.0) for i in range(60)]
        candidates.append(Candidate("waiter", "ow", 25.0, 8.3, 50, 600.0))
        tables = choose_tables(candidates, MatchmakerConfig(table_sizes=(2,)), rng)
        first_has_waiter += tables[0][0].name == "waiter"
    assert 20 <= first_has_waiter <= 70
    # Far apart in mu, with no blur: a seed meets its nearest free bot (random pairs of these
    # would be about 133 apart).
    ladder = [Candidate(f"b{i}", f"o{i}", 10.0 * i, 1.0, 5, 0.0) for i in range(40)]
    tables = choose_tables(ladder, MatchmakerConfig(table_sizes=(2,), spread=0.0), rng)
    gaps = [abs(a.mu - b.mu) for a, b in tables]
    assert len(gaps) == 20
    assert sum(gaps) / len(gaps) <= 30.0
    assert sum(gap == 10.0 for gap in gaps) >= 12


def test_serve_says_when_the_bots_cannot_fill_any_allowed_table(
        sqlite_ladder: str, tmp_path: Path) -> None:
    repo = Repository(sqlite_ladder)
    tokens = {name: repo.register_bot(name, owner)[1]
              for name, owner in (("a", "o1"), ("b", "o2"), ("c", "o3"), ("d", "o3"))}
    repo.retire_bot("taken")
    log = tmp_path / "serve.err"
    serve = subprocess.Popen(
        [*CLI, "ladder", "serve", "--database", sqlite_ladder, "--port", "0",
         "--table-sizes", "4", "--admin-token", "adm"],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    bots: list[subprocess.Popen[bytes]] = []
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        while "listening on" not in line:
            assert line, log.read_text()
            line = serve.stdout.readline()
        address = line.split("listening on", 1)[1].strip()
        assert "no match can start even with every registered bot connected: 4 bots but of " \
            "only 3 owners (o1 1, o2 1, o3 2)" in log.read_text()
        bots = [subprocess.Popen([*CLI, "bot", "run", "random"],
                                 env={**os.environ, "SCOUT_ADDRESS": address,
                                      "SCOUT_TOKEN": token},
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for token in tokens.values()]
        deadline = time.monotonic() + 300
        said = "the connected bots cannot fill any allowed table size: 4 bots but of only 3"
        while said not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        # Nothing is played around the rule (no table of 3 when tables of 4 are asked for).
        assert repo.list_matches(limit=100) == []
    finally:
        processes: list[subprocess.Popen[Any]] = [*bots, serve]
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(120)
    assert serve.returncode == 0
    board = subprocess.run([*CLI, "ladder", "leaderboard", "--database", sqlite_ladder],
                           capture_output=True, text=True, timeout=300)
    assert "4 bots of 3 owners" in board.stdout
    repo.close()
