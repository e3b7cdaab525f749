"""The ladder's `scout.v1.Owners` service over a real ladder on 127.0.0.1 (issue 27): signup
under each registration policy, invites, who may act on which bot, suspension, limits, and
uploads, each refusal with its status and a clear message."""

from __future__ import annotations

import asyncio
import contextlib
import io
import tarfile
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from scout.v1 import ladder_pb2, ladder_pb2_grpc, owners_pb2, owners_pb2_grpc
from scout_ladder.owners_service import Registration
from scout_ladder.repository import OwnerLimits, Repository, hash_token
from scout_ladder.service import Ladder, LadderConfig
from scout_ladder.web_source import LadderSource
from sqlalchemy import create_engine, text
from support.validators import RecordingValidator, VerdictValidator

ADMIN = "admin-secret"
Code = grpc.StatusCode


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repository]:
    with Repository(f"sqlite:///{tmp_path / 'ladder.db'}", storage=tmp_path / "storage",
                    limits=OwnerLimits(bots_per_owner=2, submissions_per_hour=3,
                                       max_upload_bytes=64 * 1024)) as repository:
        repository.migrate()
        yield repository


@contextlib.asynccontextmanager
async def serving(repo: Repository, registration: Registration = Registration.OPEN,
                  validator: Any = None) -> AsyncIterator[tuple[Ladder, Any]]:
    ladder = Ladder(repo, LadderConfig(port=0, admin_token=ADMIN, registration=registration,
                                       version_validator=validator))
    await ladder.start()
    try:
        async with grpc.aio.insecure_channel(ladder.address) as channel:
            yield ladder, owners_pb2_grpc.OwnersStub(channel)
    finally:
        await ladder.stop()


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


async def refused(call: Any) -> tuple[grpc.StatusCode, str]:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or ""
    raise AssertionError("the call succeeded")


async def signup(stub: Any, name: str, invite: str = "", metadata: Any = ()) -> str:
    answer = await stub.Signup(owners_pb2.SignupRequest(name=name, invite_code=invite),
                               metadata=metadata, timeout=30)
    assert answer.owner.name == name
    token: str = answer.owner_token
    return token


def tar_gz(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in files.items():
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data))
    return out.getvalue()


MANIFEST = b'runtime = "python"\ncommand = ["python", "bot.py"]\n'
GOOD_BOT = {"scout-bot.toml": MANIFEST, "bot.py": b"print('hello')\n"}


def chunks(bot: str, data: bytes, size: int = 1000) -> Iterator[owners_pb2.SubmitVersionChunk]:
    yield owners_pb2.SubmitVersionChunk(bot=bot)
    for start in range(0, len(data), size):
        yield owners_pb2.SubmitVersionChunk(data=data[start:start + size])


def test_signup_follows_the_registration_policy(repo: Repository) -> None:
    async def scenario() -> None:
        async with serving(repo, Registration.CLOSED) as (_, stub):
            code, says = await refused(stub.Signup(owners_pb2.SignupRequest(name="alice"),
                                                   timeout=30))
            assert code == Code.PERMISSION_DENIED and "closed" in says
            await signup(stub, "alice", metadata=bearer(ADMIN))  # the operator still can
        async with serving(repo, Registration.INVITE) as (_, stub):
            code, says = await refused(stub.Signup(owners_pb2.SignupRequest(name="bob"),
                                                   timeout=30))
            assert code == Code.PERMISSION_DENIED and "invite" in says
            code, says = await refused(stub.CreateInvite(owners_pb2.CreateInviteRequest(),
                                                         timeout=30))
            assert code == Code.UNAUTHENTICATED
            invite = (await stub.CreateInvite(owners_pb2.CreateInviteRequest(),
                                              metadata=bearer(ADMIN), timeout=30)).invite_code
            await signup(stub, "bob", invite)
            code, says = await refused(stub.Signup(
                owners_pb2.SignupRequest(name="carol", invite_code=invite), timeout=30))
            assert code == Code.PERMISSION_DENIED and "used already" in says
            code, says = await refused(stub.Signup(
                owners_pb2.SignupRequest(name="carol", invite_code="guess"), timeout=30))
            assert code == Code.PERMISSION_DENIED and "unknown" in says
        async with serving(repo, Registration.OPEN) as (_, stub):
            token = await signup(stub, "carol")
            code, says = await refused(stub.Signup(owners_pb2.SignupRequest(name="carol"),
                                                   timeout=30))
            assert code == Code.ALREADY_EXISTS
            code, says = await refused(stub.Signup(owners_pb2.SignupRequest(name="x\ny"),
                                                   timeout=30))
            assert code == Code.INVALID_ARGUMENT and "owner" in says
            profile = await stub.GetOwner(owners_pb2.GetOwnerRequest(), metadata=bearer(token),
                                          timeout=30)
            assert profile.owner.name == "carol" and not profile.owner.suspended_reason
        assert [o.name for o in repo.list_owners()] == ["alice", "bob", "carol"]
        # Shown once, stored hashed: the database holds the hash, never the token.
        engine = create_engine(repo._url)
        with engine.connect() as connection:
            hashes = connection.execute(text("SELECT token_hash FROM owners")).scalars().all()
        engine.dispose()
        assert hash_token(token) in hashes and token not in hashes

    run(scenario)


def test_calls_without_a_valid_token_are_unauthenticated(repo: Repository) -> None:
    async def scenario() -> None:
        async with serving(repo) as (_, stub):
            for metadata in ((), bearer("nobody's"), bearer(ADMIN + "x")):
                code, says = await refused(stub.GetOwner(owners_pb2.GetOwnerRequest(),
                                                         metadata=metadata, timeout=30))
                assert code == Code.UNAUTHENTICATED, says
            token = await signup(stub, "alice")
            code, says = await refused(stub.SuspendOwner(
                owners_pb2.SuspendOwnerRequest(name="alice", reason="x"),
                metadata=bearer(token), timeout=30))
            assert code == Code.PERMISSION_DENIED and "admin token" in says

    run(scenario)


def test_an_owner_acts_on_their_own_bots_only_and_the_admin_on_any(repo: Repository) -> None:
    async def scenario() -> None:
        async with serving(repo) as (ladder, stub):
            alice, bob = await signup(stub, "alice"), await signup(stub, "bob")
            registered = await stub.RegisterBot(owners_pb2.RegisterOwnedBotRequest(name="a1"),
                                                metadata=bearer(alice), timeout=30)
            assert registered.token and registered.bot.kind == owners_pb2.BOT_KIND_REMOTE
            assert repo.authenticate(registered.token) is not None
            code, _ = await refused(stub.RegisterBot(
                owners_pb2.RegisterOwnedBotRequest(name="a1"), metadata=bearer(bob), timeout=30))
            assert code == Code.ALREADY_EXISTS
            for call in (stub.RotateBotToken(owners_pb2.RotateBotTokenRequest(name="a1"),
                                             metadata=bearer(bob), timeout=30),
                         stub.RetireBot(owners_pb2.RetireOwnedBotRequest(name="a1"),
                                        metadata=bearer(bob), timeout=30),
                         stub.ListVersions(owners_pb2.ListVersionsRequest(bot="a1"),
                                           metadata=bearer(bob), timeout=30),
                         stub.GetRunLogs(owners_pb2.GetRunLogsRequest(bot="a1"),
                                         metadata=bearer(bob), timeout=30),
                         stub.GetOwner(owners_pb2.GetOwnerRequest(name="alice"),
                                       metadata=bearer(bob), timeout=30)):
                code, says = await refused(call)
                assert code == Code.PERMISSION_DENIED, says
            code, _ = await refused(stub.DownloadData(owners_pb2.DownloadDataRequest(bot="a1"),
                                                      metadata=bearer(bob), timeout=30).read())
            assert code == Code.PERMISSION_DENIED
            rotated = await stub.RotateBotToken(owners_pb2.RotateBotTokenRequest(name="a1"),
                                                metadata=bearer(ADMIN), timeout=30)
            assert repo.authenticate(registered.token) is None
            assert repo.authenticate(rotated.token) is not None
            code, _ = await refused(stub.RetireBot(
                owners_pb2.RetireOwnedBotRequest(name="ghost"), metadata=bearer(alice),
                timeout=30))
            assert code == Code.NOT_FOUND
            retired = await stub.RetireBot(owners_pb2.RetireOwnedBotRequest(name="a1"),
                                           metadata=bearer(alice), timeout=30)
            assert retired.retired
            profile = await stub.GetOwner(owners_pb2.GetOwnerRequest(name="alice"),
                                          metadata=bearer(ADMIN), timeout=30)
            assert [(b.name, b.retired) for b in profile.bots] == [("a1", True)]
            assert ladder.address

    run(scenario)


def test_a_suspended_owner_is_told_why_and_their_bots_are_not_scheduled(
        repo: Repository) -> None:
    async def scenario() -> None:
        async with serving(repo) as (ladder, stub):
            alice = await signup(stub, "alice")
            await stub.RegisterBot(owners_pb2.RegisterOwnedBotRequest(name="a1"),
                                   metadata=bearer(alice), timeout=30)
            suspended = await stub.SuspendOwner(
                owners_pb2.SuspendOwnerRequest(name="alice", reason="colluding bots"),
                metadata=bearer(ADMIN), timeout=30)
            assert suspended.suspended_reason == "colluding bots"
            code, says = await refused(stub.RegisterBot(
                owners_pb2.RegisterOwnedBotRequest(name="a2"), metadata=bearer(alice),
                timeout=30))
            assert code == Code.FAILED_PRECONDITION and "colluding bots" in says
            code, says = await refused(stub.SubmitVersion(chunks("a3", b"x"),
                                                          metadata=bearer(alice), timeout=30))
            assert code == Code.FAILED_PRECONDITION and "suspended" in says
            own = await stub.GetOwner(owners_pb2.GetOwnerRequest(), metadata=bearer(alice),
                                      timeout=30)
            assert own.owner.suspended_reason == "colluding bots"
            code, _ = await refused(stub.SuspendOwner(
                owners_pb2.SuspendOwnerRequest(name="alice", reason=""),
                metadata=bearer(ADMIN), timeout=30))
            assert code == Code.INVALID_ARGUMENT
            async with grpc.aio.insecure_channel(ladder.address) as channel:
                profile = await ladder_pb2_grpc.LadderStub(channel).GetBotProfile(
                    ladder_pb2.GetBotProfileRequest(name="a1"), timeout=30)
            assert profile.bot.suspended_reason == "colluding bots"
            assert profile.bot.kind == "remote"
            page = LadderSource(repo).bot_profile("a1")
            assert page is not None and page["suspended_reason"] == "colluding bots"
            assert (page["kind"], page["paused_reason"]) == ("remote", None)
            await ladder.roster.refresh()
            assert ladder.roster.unschedulable["a1"] == "its owner is suspended: colluding bots"
            await stub.ReinstateOwner(owners_pb2.ReinstateOwnerRequest(name="alice"),
                                      metadata=bearer(ADMIN), timeout=30)
            await ladder.roster.refresh()
            assert "a1" not in ladder.roster.unschedulable

    run(scenario)


def test_limits_are_refused_as_resource_exhausted(repo: Repository) -> None:
    async def scenario() -> None:
        async with serving(repo, validator=RecordingValidator()) as (_, stub):
            alice = await signup(stub, "alice")
            for name in ("a1", "a2"):
                await stub.RegisterBot(owners_pb2.RegisterOwnedBotRequest(name=name),
                                       metadata=bearer(alice), timeout=30)
            code, says = await refused(stub.RegisterBot(
                owners_pb2.RegisterOwnedBotRequest(name="a3"), metadata=bearer(alice),
                timeout=30))
            assert code == Code.RESOURCE_EXHAUSTED and "retire one" in says
            bob = await signup(stub, "bob")
            code, says = await refused(stub.SubmitVersion(chunks("x" * 10_000, b"x"),
                                                          metadata=bearer(bob), timeout=30))
            assert code == Code.INVALID_ARGUMENT and "not a bot name" in says and len(says) < 300
            code, says = await refused(stub.SubmitVersion(
                chunks("big", b"x" * (64 * 1024 + 1), 16 * 1024), metadata=bearer(bob),
                timeout=30))
            assert code == Code.RESOURCE_EXHAUSTED and "larger" in says
            for _ in range(3):
                await stub.SubmitVersion(chunks("hb", tar_gz(GOOD_BOT)), metadata=bearer(bob),
                                         timeout=30)
            code, says = await refused(stub.SubmitVersion(
                chunks("hb", tar_gz(GOOD_BOT)), metadata=bearer(bob), timeout=30))
            assert code == Code.RESOURCE_EXHAUSTED and "last hour" in says

    run(scenario)


def test_uploads_are_stored_validated_and_read_back_by_their_owner(repo: Repository) -> None:
    async def scenario() -> None:
        validator = VerdictValidator(repo)
        async with serving(repo, validator=validator) as (_, stub):
            alice = await signup(stub, "alice")
            bob = await signup(stub, "bob")
            stored = await stub.SubmitVersion(chunks("hb", tar_gz(GOOD_BOT)),
                                              metadata=bearer(alice), timeout=30)
            assert (stored.bot, stored.version) == ("hb", 1)
            assert stored.status == owners_pb2.VERSION_STATUS_VALIDATING
            assert (stored.runtime, list(stored.command)) == ("python", ["python", "bot.py"])
            assert validator.submitted == [("hb", 1)]
            while validator.tasks:
                await asyncio.gather(*validator.tasks)
            got = await stub.GetVersion(owners_pb2.GetVersionRequest(bot="hb"),
                                        metadata=bearer(alice), timeout=30)
            assert got.status == owners_pb2.VERSION_STATUS_ACTIVE and got.validation_output
            crash = {"scout-bot.toml": b'runtime = "python"\ncommand = ["python", "crash.py"]\n',
                     "crash.py": b"raise RuntimeError('crash')\n"}
            await stub.SubmitVersion(chunks("hb", tar_gz(crash)), metadata=bearer(alice),
                                     timeout=30)
            while validator.tasks:
                await asyncio.gather(*validator.tasks)
            listed = await stub.ListVersions(owners_pb2.ListVersionsRequest(bot="hb"),
                                             metadata=bearer(alice), timeout=30)
            assert [(v.version, v.status) for v in listed.versions] == [
                (2, owners_pb2.VERSION_STATUS_REJECTED), (1, owners_pb2.VERSION_STATUS_ACTIVE)]
            assert "exited before" in listed.versions[0].reason
            assert "RuntimeError: crash" in listed.versions[0].validation_output
            logs = await stub.GetRunLogs(owners_pb2.GetRunLogsRequest(bot="hb"),
                                         metadata=bearer(alice), timeout=30)
            assert [r.version for r in logs.runs] == [2, 1]
            data = b"".join([chunk.data async for chunk in stub.DownloadData(
                owners_pb2.DownloadDataRequest(bot="hb"), metadata=bearer(alice), timeout=30)])
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                assert sorted(archive.getnames()) == ["notes", "notes/v1.txt", "notes/v2.txt"]
            code, _ = await refused(stub.SubmitVersion(chunks("hb", tar_gz(GOOD_BOT)),
                                                       metadata=bearer(bob), timeout=30))
            assert code == Code.PERMISSION_DENIED

    run(scenario)


HOSTILE: list[tuple[str, dict[str, bytes]]] = [
    ("traversal", {"scout-bot.toml": MANIFEST, "../escape.py": b"x"}),
    ("absolute path", {"scout-bot.toml": MANIFEST, "/tmp/owners-test-absolute": b"x"}),
    ("no manifest", {"bot.py": b"x"}),
    ("unknown runtime", {"scout-bot.toml": b'runtime = "cobol"\ncommand = ["run"]\n'}),
]


@pytest.mark.parametrize(("case", "files"), HOSTILE, ids=[case for case, _ in HOSTILE])
def test_hostile_uploads_are_refused_with_the_sandboxs_message(
        repo: Repository, tmp_path: Path, case: str, files: dict[str, bytes]) -> None:
    async def scenario() -> None:
        validator = RecordingValidator()
        async with serving(repo, validator=validator) as (_, stub):
            alice = await signup(stub, "alice")
            code, says = await refused(stub.SubmitVersion(chunks("hb", tar_gz(files)),
                                                          metadata=bearer(alice), timeout=30))
            assert code == Code.INVALID_ARGUMENT and says.startswith("upload refused: "), says
            assert len(says) > len("upload refused: ") + 10
            code, says = await refused(stub.SubmitVersion(chunks("hb", b"not an archive"),
                                                          metadata=bearer(alice), timeout=30))
            assert code == Code.INVALID_ARGUMENT, says
        assert validator.submitted == []
        assert repo.get_bot("hb") is None
        assert not Path("/tmp/owners-test-absolute").exists()
        assert not (tmp_path / "storage").exists() or not any(
            (tmp_path / "storage").rglob("*.tar.gz"))

    run(scenario)


def test_a_ladder_without_hosting_refuses_hosted_bots(repo: Repository) -> None:
    async def scenario() -> None:
        async with serving(repo) as (_, stub):
            alice = await signup(stub, "alice")
            code, says = await refused(stub.SubmitVersion(chunks("hb", tar_gz(GOOD_BOT)),
                                                          metadata=bearer(alice), timeout=30))
            assert code == Code.FAILED_PRECONDITION and "hosts no bots" in says
            code, says = await refused(stub.RegisterBot(
                owners_pb2.RegisterOwnedBotRequest(name="h", kind=owners_pb2.BOT_KIND_HOSTED),
                metadata=bearer(alice), timeout=30))
            assert code == Code.FAILED_PRECONDITION

    run(scenario)


def test_a_ladder_that_cannot_run_the_sandbox_refuses_uploads_instead_of_keeping_them(
        repo: Repository) -> None:
    validator = RecordingValidator()
    validator.unavailable = "bwrap not found"

    async def scenario() -> None:
        async with serving(repo, validator=validator) as (_, stub):
            alice = await signup(stub, "alice")
            code, says = await refused(stub.SubmitVersion(chunks("hb", tar_gz(GOOD_BOT)),
                                                          metadata=bearer(alice), timeout=30))
            assert code == Code.FAILED_PRECONDITION and "bwrap not found" in says
            assert validator.submitted == []
            validator.unavailable = ""
            stored = await stub.SubmitVersion(chunks("hb", tar_gz(GOOD_BOT)),
                                              metadata=bearer(alice), timeout=30)
            assert stored.version == 1 and validator.submitted == [("hb", 1)]

    run(scenario)


def test_versions_left_validating_are_handed_over_again_at_start(repo: Repository) -> None:
    repo.create_owner("alice")
    repo.submit_version("hb", as_owner="alice", archive=b"x", runtime="python",
                        command=("python", "bot.py"))

    async def scenario() -> None:
        validator = RecordingValidator()
        async with serving(repo, validator=validator):
            assert validator.submitted == [("hb", 1)]

    run(scenario)
