"""The owner's commands end to end (issue 27): `scout-arena ladder signup|invite|register-bot|
submit|versions|logs|data|retire --address|suspend` as subprocesses against a real ladder on
127.0.0.1, whose version validator is the trivial one of tests/support (the sandboxed one is
the hosting code's)."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from scout_ladder.owners_service import Registration
from scout_ladder.repository import Repository
from scout_ladder.service import Ladder, LadderConfig
from support.validators import VerdictValidator

CLI = [sys.executable, "-m", "scout_arena.cli", "ladder"]
ADMIN = "cli-admin"


class LadderThread:
    """A ladder on its own event loop in a thread, until ``stop``."""

    def __init__(self, repo: Repository, registration: Registration) -> None:
        self.repo = repo
        self.registration = registration
        self.address = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        ladder = Ladder(self.repo, LadderConfig(
            port=0, admin_token=ADMIN, registration=self.registration,
            version_validator=VerdictValidator(self.repo)))
        try:
            await ladder.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            raise
        self.address = ladder.address
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await ladder.stop()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None or not self.address:
            raise RuntimeError(f"the ladder did not start: {self._error!r}")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repository]:
    with Repository(f"sqlite:///{tmp_path / 'ladder.db'}", storage=tmp_path / "storage") as r:
        r.migrate()
        yield r


@pytest.fixture
def ladder(repo: Repository) -> Iterator[LadderThread]:
    served = LadderThread(repo, Registration.INVITE)
    served.start()
    yield served
    served.stop()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("SCOUT_OWNER_TOKEN", "SCOUT_LADDER_ADMIN_TOKEN",
                                "SCOUT_LADDER_ADDRESS")}
    environment.update(env or {})
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300,
                          env=environment)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


def one_line_error(done: subprocess.CompletedProcess[str], status: int) -> str:
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def bot_folder(root: Path, script: str = "bot.py") -> Path:
    root.mkdir(parents=True)
    (root / "scout-bot.toml").write_text(f'runtime = "python"\ncommand = ["python", "{script}"]\n')
    (root / script).write_text("print('hello')\n")
    return root


def test_an_owner_signs_up_submits_and_reads_their_hosted_bot(
        ladder: LadderThread, tmp_path: Path) -> None:
    address = ["--address", ladder.address]
    invite = ok(cli("invite", *address, env={"SCOUT_LADDER_ADMIN_TOKEN": ADMIN}))
    code = invite.strip().splitlines()[-1]
    signed = ok(cli("signup", "alice", *address, "--invite", code))
    token = signed.strip().splitlines()[-1]
    assert ladder.repo.authenticate_owner(token) is not None
    reused = one_line_error(cli("signup", "bob", *address, "--invite", code), 1)
    assert "PERMISSION_DENIED" in reused and "used already" in reused
    owner = {"SCOUT_OWNER_TOKEN": token}

    # A folder (larger than one message: the upload goes in chunks), then the same bot as a
    # .tar.gz.
    folder = bot_folder(tmp_path / "bot")
    (folder / "weights.bin").write_bytes(os.urandom(300 * 1024))
    submitted = ok(cli("submit", "hb", str(folder), *address, env=owner))
    assert "hb version 1" in submitted and "passed validation: active" in submitted
    archive = tmp_path / "bot.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "bot", arcname=".")
    assert "version 2" in ok(cli("submit", "hb", str(archive), *address, env=owner))

    crashing = bot_folder(tmp_path / "crash", "crash.py")
    rejected = cli("submit", "hb", str(crashing), *address, "--owner-token", token)
    assert rejected.returncode == 1, rejected.stderr
    assert "hb version 3 was rejected: it exited before it connected" in rejected.stderr
    assert "RuntimeError: crash" in rejected.stderr

    versions = ok(cli("versions", "hb", *address, env=owner)).splitlines()
    assert [line.split()[:2] for line in versions] == [
        ["v3", "rejected"], ["v2", "active"], ["v1", "superseded"]]
    logs = ok(cli("logs", "hb", *address, env=owner))
    assert logs.index("validate-hb-1") < logs.index("validate-hb-3")
    assert "RuntimeError: crash" in logs

    data = tmp_path / "data"
    assert "wrote 3 files" in ok(cli("data", "hb", str(data), *address, env=owner))
    assert (data / "notes" / "v3.txt").read_text() == "version 3 was here\n"
    again = one_line_error(cli("data", "hb", str(data), *address, env=owner), 2)
    assert "not an empty folder" in again

    registered = ok(cli("register-bot", "remote1", *address, env=owner))
    bot_token = registered.strip().splitlines()[-1]
    assert ladder.repo.authenticate(bot_token) is not None
    rotated = ok(cli("rotate-token", "remote1", *address, env=owner)).strip().splitlines()[-1]
    assert ladder.repo.authenticate(bot_token) is None
    assert ladder.repo.authenticate(rotated) is not None
    assert "retired remote1" in ok(cli("retire", "remote1", *address, env=owner))

    ok(cli("suspend", "alice", "--reason", "testing suspension", *address,
           "--admin-token", ADMIN))
    refused = one_line_error(cli("submit", "hb", str(tmp_path / "bot"), *address, env=owner), 1)
    assert "FAILED_PRECONDITION" in refused and "testing suspension" in refused


def test_another_owner_is_refused_and_hostile_uploads_say_why(
        ladder: LadderThread, tmp_path: Path) -> None:
    address = ["--address", ladder.address]
    admin = {"SCOUT_LADDER_ADMIN_TOKEN": ADMIN}
    alice = ok(cli("signup", "alice", *address, env=admin)).strip().splitlines()[-1]
    bob = ok(cli("signup", "bob", *address, env=admin)).strip().splitlines()[-1]
    ok(cli("submit", "hb", str(bot_folder(tmp_path / "bot")), *address, "--owner-token", alice))
    for command in (["logs", "hb"], ["versions", "hb"], ["data", "hb", str(tmp_path / "d")],
                    ["submit", "hb", str(tmp_path / "bot")], ["retire", "hb"]):
        line = one_line_error(cli(*command, *address, "--owner-token", bob), 1)
        assert "PERMISSION_DENIED" in line, line
    hostile = io.BytesIO()
    with tarfile.open(fileobj=hostile, mode="w:gz") as tar:
        for name, data in (("scout-bot.toml", b'runtime = "python"\ncommand = ["python", '
                                               b'"bot.py"]\n'), ("../../evil.py", b"x")):
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    (tmp_path / "hostile.tar.gz").write_bytes(hostile.getvalue())
    line = one_line_error(cli("submit", "hb", str(tmp_path / "hostile.tar.gz"), *address,
                              "--owner-token", alice), 2)
    assert "INVALID_ARGUMENT: upload refused:" in line and "'..'" in line, line


@pytest.mark.parametrize(("args", "says"), [
    (["signup", "x"], "--address"),
    (["submit", "hb", "/nonexistent/folder", "--address", "127.0.0.1:1", "--owner-token", "t"],
     "neither a folder nor a file"),
    (["submit", "hb", ".", "--address", "127.0.0.1:1"], "no owner token"),
    (["invite", "--address", "127.0.0.1:1"], "admin token"),
    (["logs", "hb", "--address", "127.0.0.1:1", "--limit", "0"], "--limit"),
    (["submit", "hb", ".", "--address", "127.0.0.1:1", "--wait", "-3"], "--wait"),
    (["logs", "hb", "--address", "127.0.0.1:1", "--timeout", "abc"], "--timeout"),
    (["serve", "--registration", "sometimes"], "--registration"),
    (["serve", "--max-upload-mb", "0"], "--max-upload-mb"),
    (["serve", "--max-bots-per-owner", "many"], "--max-bots-per-owner"),
    (["serve", "--max-submissions-per-hour", "-1"], "--max-submissions-per-hour"),
    (["serve", "--storage", "/dev/null"], "--storage"),
    (["suspend", "bob", "--reason", " ", "--address", "127.0.0.1:1"], "--reason"),
])
def test_bad_values_are_one_line_and_status_2(args: list[str], says: str) -> None:
    assert says in one_line_error(cli(*args), 2)


def test_a_name_the_ladder_refuses_is_a_usage_error(ladder: LadderThread) -> None:
    line = one_line_error(cli("signup", "bad\nname", "--address", ladder.address,
                              "--admin-token", ADMIN), 2)
    assert "INVALID_ARGUMENT" in line and "owner" in line


def test_an_unreachable_ladder_is_one_line(tmp_path: Path) -> None:
    line = one_line_error(cli("logs", "hb", "--address", "127.0.0.1:1", "--owner-token", "t",
                              "--timeout", "5"), 1)
    assert "UNAVAILABLE" in line


def test_closed_registration_lets_only_the_admin_sign_up(repo: Repository) -> None:
    served = LadderThread(repo, Registration.CLOSED)
    served.start()
    try:
        line = one_line_error(cli("signup", "alice", "--address", served.address), 1)
        assert "PERMISSION_DENIED" in line and "closed" in line
        token = ok(cli("signup", "alice", "--address", served.address, "--admin-token", ADMIN))
        assert repo.authenticate_owner(token.strip().splitlines()[-1]) is not None
    finally:
        served.stop()
