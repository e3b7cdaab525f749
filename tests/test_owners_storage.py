"""Owner accounts, invites, hosted versions, runs and pauses in the ladder's storage (issue 27),
on SQLite and PostgreSQL (the ``repository`` and ``ladder_url`` fixtures of conftest.py)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from scout_ladder.repository import (
    BotKind,
    BotKindError,
    BotOwnerError,
    InvalidInputError,
    InviteError,
    NotYourBotError,
    OwnerExistsError,
    OwnerLimits,
    OwnerSuspendedError,
    Repository,
    TooManyBotsError,
    TooManySubmissionsError,
    UnknownBotError,
    UnknownOwnerError,
    UploadTooLargeError,
    VersionStateError,
    VersionStatus,
    alembic_config,
    default_storage,
    hash_token,
    tail_text,
)
from sqlalchemy import Engine, create_engine, text

COMMAND = ("python", "bot.py")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def repo(ladder_url: str, tmp_path: Path, clock: Clock) -> Iterator[Repository]:
    with Repository(ladder_url, clock=clock, storage=tmp_path / "storage",
                    limits=OwnerLimits(bots_per_owner=3, submissions_per_hour=4,
                                       max_upload_bytes=1000, runs_kept_per_bot=3)) as r:
        r.migrate()
        yield r


@pytest.fixture
def raw(ladder_url: str) -> Iterator[Engine]:
    engine = create_engine(ladder_url)
    yield engine
    engine.dispose()


def submit(repo: Repository, bot: str, owner: str | None = "alice", data: bytes = b"x") -> int:
    return repo.submit_version(bot, as_owner=owner, archive=data, runtime="python",
                               command=COMMAND).version


def test_owner_tokens_are_shown_once_and_stored_as_hashes(repo: Repository, raw: Engine) -> None:
    owner, token = repo.create_owner("alice")
    assert owner.name == "alice" and not owner.suspended
    assert repo.authenticate_owner(token) == owner
    assert repo.authenticate_owner(token + "x") is None
    assert repo.authenticate_owner("") is None
    with raw.connect() as connection:
        stored = connection.execute(text("SELECT token_hash FROM owners")).scalar_one()
    assert stored == hash_token(token) and token not in stored


def test_owner_names_are_unique_and_checked(repo: Repository) -> None:
    repo.create_owner("alice")
    with pytest.raises(OwnerExistsError):
        repo.create_owner("alice")
    with pytest.raises(InvalidInputError):
        repo.create_owner("bad\nname")
    with pytest.raises(InvalidInputError):
        repo.create_owner("")


def test_invites_are_hashed_and_single_use(repo: Repository, raw: Engine) -> None:
    code = repo.create_invite()
    with raw.connect() as connection:
        assert connection.execute(text("SELECT code_hash FROM invites")).scalar_one() == \
            hash_token(code)
    with pytest.raises(InviteError):
        repo.create_owner("mallory", "not-a-code")
    repo.create_owner("alice", code)
    with pytest.raises(InviteError, match="used already"):
        repo.create_owner("bob", code)
    # A refused signup leaves no account behind.
    assert [o.name for o in repo.list_owners()] == ["alice"]


def test_a_signup_cannot_take_the_name_of_an_operators_bots(repo: Repository) -> None:
    repo.register_bot("old", "carol")
    with pytest.raises(OwnerExistsError, match="operator"):
        repo.create_owner("carol")
    owner, _ = repo.create_owner("carol", by_admin=True)
    assert [b.name for b in repo.get_owner("carol").bots] == ["old"]
    assert owner.name == "carol"


def test_owners_register_remote_bots_and_act_only_on_their_own(repo: Repository) -> None:
    repo.create_owner("alice")
    repo.create_owner("bob")
    bot, token = repo.register_owned_bot("a1", owner="alice", kind=BotKind.REMOTE)
    assert token is not None and repo.authenticate(token) == bot
    assert bot.version == 1 and bot.kind == "remote" and bot.owner == "alice"
    with pytest.raises(BotOwnerError):
        repo.register_owned_bot("a1", owner="bob", kind=BotKind.REMOTE)
    for act in (lambda: repo.rotate_bot_token("a1", as_owner="bob"),
                lambda: repo.retire_owned_bot("a1", as_owner="bob"),
                lambda: repo.list_versions("a1", as_owner="bob"),
                lambda: repo.hosted_runs("a1", as_owner="bob"),
                lambda: repo.data_dir("a1", as_owner="bob")):
        with pytest.raises(NotYourBotError):
            act()
    _, rotated = repo.rotate_bot_token("a1", as_owner="alice")
    assert repo.authenticate(token) is None and repo.authenticate(rotated) is not None
    assert repo.get_bot("a1").version == 1  # type: ignore[union-attr]
    _, admin_token = repo.rotate_bot_token("a1", as_owner=None)  # the admin acts on any bot
    assert repo.authenticate(admin_token) is not None
    again, _ = repo.register_owned_bot("a1", owner="alice", kind=BotKind.REMOTE)
    assert again.version == 2 and repo.authenticate(admin_token) is None
    assert [v.status for v in repo.list_versions("a1", as_owner="alice")] == [
        VersionStatus.ACTIVE, VersionStatus.SUPERSEDED]
    assert repo.retire_owned_bot("a1", as_owner="alice").retired


def test_operator_registered_bots_are_no_owners(repo: Repository) -> None:
    repo.register_bot("legacy", "alice")
    repo.create_owner("dave")
    with pytest.raises(NotYourBotError):
        repo.retire_owned_bot("legacy", as_owner="dave")
    assert repo.get_bot("legacy").kind == "remote"  # type: ignore[union-attr]


def test_limits_refuse_by_cause(repo: Repository, clock: Clock) -> None:
    repo.create_owner("alice")
    for name in ("a", "b", "c"):
        repo.register_owned_bot(name, owner="alice", kind=BotKind.REMOTE)
    with pytest.raises(TooManyBotsError):
        repo.register_owned_bot("d", owner="alice", kind=BotKind.REMOTE)
    with pytest.raises(TooManyBotsError):
        submit(repo, "hosted")
    repo.retire_owned_bot("c", as_owner="alice")
    for _ in range(4):
        submit(repo, "h")
    with pytest.raises(TooManySubmissionsError):
        submit(repo, "h")
    clock.now += timedelta(hours=1, seconds=1)
    assert submit(repo, "h") == 5
    with pytest.raises(UploadTooLargeError):
        submit(repo, "h", data=b"x" * 1001)
    submit(repo, "h", owner=None)  # the admin is not limited


def test_submissions_are_numbered_stored_and_decided(repo: Repository, tmp_path: Path) -> None:
    repo.create_owner("alice")
    assert submit(repo, "h", data=b"one") == 1
    bot = repo.get_bot("h")
    assert bot is not None and bot.kind == "hosted" and bot.version == 0
    assert bot.unschedulable_reason == "no version of it has passed validation yet"
    path = repo.upload_path("h", 1)
    assert path.read_bytes() == b"one" and path.is_relative_to(tmp_path / "storage")
    version = repo.get_version("h", None, as_owner="alice")
    assert version.archive_sha256 == hashlib.sha256(b"one").hexdigest()
    assert (version.archive_size, version.runtime, version.command) == (3, "python", COMMAND)
    assert [v.version for v in repo.versions_validating()] == [1]

    repo.finish_validation("h", 1, passed=True, reason="", output="ok")
    assert repo.get_bot("h").version == 1  # type: ignore[union-attr]
    assert repo.unschedulable_bots() == {}
    submit(repo, "h", data=b"two")
    rejected = repo.finish_validation("h", 2, passed=False, reason="it never connected",
                                      output="Traceback...\n" * 10_000)
    assert rejected.status == VersionStatus.REJECTED and rejected.reason == "it never connected"
    assert len(rejected.validation_output.encode()) <= 64 * 1024  # type: ignore[union-attr]
    assert repo.get_bot("h").version == 1  # type: ignore[union-attr]
    submit(repo, "h", data=b"three")
    repo.set_paused("h", "it crashed in 5 matches in a row")
    assert repo.unschedulable_bots() == {"h": "paused: it crashed in 5 matches in a row"}
    repo.finish_validation("h", 3, passed=True, reason="", output="")
    assert [(v.version, v.status) for v in repo.list_versions("h", as_owner="alice")] == [
        (3, "active"), (2, "rejected"), (1, "superseded")]
    bot = repo.get_bot("h")
    assert bot is not None and bot.version == 3 and bot.paused_reason is None
    # Deciding again the same way is a no-op; the other way is refused.
    assert repo.finish_validation("h", 3, passed=True, reason="", output="").status == "active"
    with pytest.raises(VersionStateError):
        repo.finish_validation("h", 2, passed=True, reason="", output="")


def test_upload_kinds_do_not_mix(repo: Repository) -> None:
    repo.create_owner("alice")
    repo.register_owned_bot("remote1", owner="alice", kind=BotKind.REMOTE)
    with pytest.raises(BotKindError):
        submit(repo, "remote1")
    submit(repo, "hosted1")
    with pytest.raises(BotKindError):
        repo.rotate_bot_token("hosted1", as_owner="alice")
    with pytest.raises(BotKindError):
        repo.register_owned_bot("hosted1", owner="alice", kind=BotKind.REMOTE)
    with pytest.raises(UnknownBotError):
        submit(repo, "nobody", owner=None)  # the admin uploads for existing bots only


def test_a_suspended_owner_reads_but_changes_nothing(repo: Repository) -> None:
    repo.create_owner("alice")
    submit(repo, "h")
    repo.finish_validation("h", 1, passed=True, reason="", output="")
    repo.register_owned_bot("r", owner="alice", kind=BotKind.REMOTE)
    owner = repo.suspend_owner("alice", "cheating")
    assert owner.suspended_reason == "cheating"
    assert repo.unschedulable_bots() == {"h": "its owner is suspended: cheating",
                                         "r": "its owner is suspended: cheating"}
    assert repo.get_bot("r").suspended_reason == "cheating"  # type: ignore[union-attr]
    for act in (lambda: submit(repo, "h"),
                lambda: repo.rotate_bot_token("r", as_owner="alice"),
                lambda: repo.register_owned_bot("new", owner="alice", kind=BotKind.REMOTE)):
        with pytest.raises(OwnerSuspendedError):
            act()
    assert len(repo.list_versions("h", as_owner="alice")) == 1
    with pytest.raises(InvalidInputError):
        repo.suspend_owner("alice", "")
    with pytest.raises(UnknownOwnerError):
        repo.suspend_owner("nobody", "x")
    repo.reinstate_owner("alice")
    assert repo.unschedulable_bots() == {}


def test_hosted_runs_keep_the_newest_output_tails(repo: Repository) -> None:
    repo.create_owner("alice")
    repo.create_owner("bob")
    submit(repo, "h")
    for i in range(5):
        repo.record_hosted_run("h", f"m-{i}", 1, "exited with status 1", "x" * 100_000 + str(i))
    repo.record_hosted_run("h", "m-4", 1, "killed: out of memory", "again")
    runs = repo.hosted_runs("h", as_owner="alice")
    assert [r.match_id for r in runs] == ["m-4", "m-3", "m-2"]
    assert runs[0].outcome_reason == "killed: out of memory" and runs[0].output_tail == "again"
    assert len(runs[1].output_tail.encode()) <= 64 * 1024 and runs[1].output_tail.endswith("3")
    with pytest.raises(NotYourBotError):
        repo.hosted_runs("h", as_owner="bob")


def test_data_folders_are_per_bot_under_the_storage(repo: Repository, tmp_path: Path) -> None:
    repo.create_owner("alice")
    submit(repo, "h1")
    submit(repo, "h2")
    one, two = repo.data_dir("h1"), repo.data_dir("h2")
    assert one != two and one.is_relative_to(tmp_path / "storage") and not one.exists()
    assert repo.data_dir("h1", as_owner="alice") == one


def test_the_default_storage_is_beside_a_sqlite_file(tmp_path: Path) -> None:
    with Repository(f"sqlite:///{tmp_path / 'ladder.db'}") as repo:
        assert repo.files.root == tmp_path / "ladder.db-storage"
    from sqlalchemy.engine import make_url

    assert default_storage(make_url("postgresql+psycopg://u@h/db")) == Path("ladder-storage")


def test_two_signups_with_one_invite_take_one_account(repo: Repository) -> None:
    code = repo.create_invite()

    def signup(name: str) -> bool:
        try:
            repo.create_owner(name, code)
        except InviteError:
            return False
        return True

    with ThreadPoolExecutor(max_workers=4) as pool:
        taken = list(pool.map(signup, ["a", "b", "c", "d"]))
    assert taken.count(True) == 1 and len(repo.list_owners()) == 1


def test_tail_text_keeps_the_end_within_the_bound() -> None:
    assert tail_text("short") == "short"
    cut = tail_text("é" * 100, 50)
    assert len(cut.encode()) <= 50 and cut.endswith("é") and cut.startswith("[...")
    assert tail_text("a\x00b") == "a\ufffdb"


def test_migration_0002_keeps_existing_bots_working(ladder_url: str) -> None:
    command.upgrade(alembic_config(ladder_url), "0001")
    engine = create_engine(ladder_url)
    try:
        with engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO bots (id, name, owner, version, token_hash, retired, created_at) "
                "VALUES (1, 'old', 'alice', 2, :hash, false, :now)"),
                {"hash": hash_token("secret"), "now": datetime.now(UTC)})
            for version in (1, 2):
                connection.execute(text(
                    "INSERT INTO bot_versions (bot_id, version, registered_at) "
                    "VALUES (1, :v, :now)"), {"v": version, "now": datetime.now(UTC)})
    finally:
        engine.dispose()
    with Repository(ladder_url) as repo:
        repo.migrate()
        bot = repo.authenticate("secret")
        assert bot is not None and bot.kind == "remote" and bot.version == 2
        assert [(v.version, v.status) for v in repo.bot_versions("old")] == [
            (1, "superseded"), (2, "active")]
        again, _ = repo.register_bot("old", "alice")
        assert again.version == 3


def test_new_tokens_never_start_with_a_dash_that_argparse_would_read_as_an_option(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--owner-token TOKEN` failed for one token in 64 (argparse: "expected one argument")."""
    from scout_ladder.repository import bots as bot_store

    drawn = iter(["-starts-with-a-dash", "fine-token"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda nbytes: next(drawn))
    assert bot_store.new_token() == "fine-token"
