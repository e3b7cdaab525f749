"""Conformance: every starter kit builds from proto/ and plays real matches on the referee.

Each kit is built once per session with its own Makefile (the same command its README gives;
tests/support/kits.py, shared by every test module that starts a kit),
then plays 2- to 5-player matches at mixed tables with the Python bots, misses deadlines on
purpose, and survives its connection being cut mid-match.

Every kit and the Python SDK ask for a lean stream by default (Hello.lean, PROTOCOL.md §3.6.1:
no PublicEvent, no ACCEPTED AnswerResult), so the deadline and reconnect tests play lean
streams; the mixed tables are played twice, lean and with SCOUT_PUBLIC_EVENTS=1 (the full
stream) set for every bot process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from referee_support import (
    DroppingProxy,
    RefereeProcess,
    create_match,
    fetch_record,
    running_referee,
    start_bot,
    stop,
    wait_connected,
    wait_finished,
)
from scout_arena.cli import main as cli_main
from scout_arena.record import replay
from scout_arena.sandbox import UploadLimits, load_upload, unpack_upload
from support import kits
from support.kits import KITS, ROOT, Kit, package_path, require

# The session's kit builds (tests/conftest.py registers the fixtures for every module); named
# here too for the modules that import them from this one (tests/test_ladder_nodes.py).
built_kits = kits.built_kits


# The first test that needs a kit builds every kit the session needs, side by side (cold: minutes;
# tests/support/kits.py).
pytestmark = pytest.mark.timeout(1200)
TOKENS = {name: f"{name}-token" for name in KITS} | {"py-greedy": "pyg", "py-random": "pyr"}
#: The runtime each kit's `make package` declares in its scout-bot.toml.
PACKAGE_RUNTIMES = {"go": "binary", "typescript": "node", "rust": "binary", "java": "java",
                    "cpp": "binary"}
#: The SDK's ready-to-submit examples of the bundled bots (clients/python/examples/).
PYTHON_EXAMPLES = ("greedy", "random")
#: The shared libraries a hosted binary may take from the host (glibc's and gcc's runtime);
#: a sandbox shows the host's /usr and /lib, never its other libraries for certain.
HOST_LIBRARIES = ("libc.so", "libm.so", "libmvec.so", "libpthread.so", "libdl.so", "librt.so",
                  "libresolv.so", "libutil.so", "libgcc_s.so", "ld-linux")


@dataclass(frozen=True)
class Upload:
    """An unpacked submission: its folder and its manifest's runtime and command."""

    folder: Path
    runtime: str
    command: tuple[str, ...]

    def entry(self) -> Path:
        """The file the command runs: the binary, the script, or the jar."""
        if self.runtime == "binary":
            return self.folder / self.command[0]
        if self.runtime == "java":
            return self.folder / self.command[self.command.index("-jar") + 1]
        return self.folder / self.command[1]

    def argv(self) -> list[str]:
        """The command as a host runs it: `python` is the host's own interpreter."""
        if self.runtime == "python" and self.command[0] in ("python", "python3"):
            return [sys.executable, *self.command[1:]]
        return list(self.command)


def unpack(path: Path, dest: Path) -> Upload:
    """What `ladder submit` uploads for ``path`` (an archive, or a folder it packs), unpacked
    as the ladder unpacks it, within the ladder's default limits."""
    manifest = unpack_upload(load_upload(path), dest)
    return Upload(dest, str(manifest.runtime), manifest.command)


def foreign_libraries(executable: Path, folder: Path) -> list[str]:
    """The shared libraries `executable` would load from outside `folder`, glibc's aside."""
    done = subprocess.run(["ldd", str(executable)], capture_output=True, text=True, timeout=30)
    if "not a dynamic executable" in done.stdout + done.stderr:
        return []
    found = []
    for line in done.stdout.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        path = rest.split(" (")[0] if arrow else ""
        if path.startswith(str(folder)) or any(lib in name for lib in HOST_LIBRARIES):
            continue
        if arrow or name.startswith("/"):
            found.append(line.strip())
    return found


def start_kit(referee: RefereeProcess, kit: Kit, *extra: str, address: str | None = None,
              log_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "SCOUT_ADDRESS": address or referee.address,
           "SCOUT_TOKEN": TOKENS[kit.name], "SCOUT_BOT_NAME": kit.name,
           "SCOUT_CONCURRENCY": "8"}
    log = (log_dir / f"{kit.name}-{time.monotonic_ns()}.log").open("w")
    process = subprocess.Popen([*kit.command, *extra], cwd=ROOT, env=env,
                               stdout=log, stderr=subprocess.STDOUT, text=True)
    referee.bots.append(process)
    return process


@pytest.fixture(params=["lean", "public-events"])
def stream_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The launch convention's SCOUT_PUBLIC_EVENTS for every bot started afterwards (kits and
    Python bots inherit this process's environment): unset asks for a lean stream, "1" for the
    full one."""
    if request.param == "lean":
        monkeypatch.delenv("SCOUT_PUBLIC_EVENTS", raising=False)
    else:
        monkeypatch.setenv("SCOUT_PUBLIC_EVENTS", "1")
    return str(request.param)


@pytest.fixture
def referee(tmp_path: Path) -> Iterator[RefereeProcess]:
    with running_referee(tmp_path, TOKENS, "--reconnect-grace", "15") as process:
        yield process


def test_every_kit_builds_from_proto(built_kits: dict[str, str]) -> None:
    failed = {name: built_kits[name] for name in KITS if built_kits[name]}
    assert not failed, "\n\n".join(failed.values())


def test_kits_play_two_to_five_player_matches_at_mixed_tables(
        built_kits: dict[str, str], referee: RefereeProcess, stream_mode: str,
        tmp_path: Path) -> None:
    expected = "1" if stream_mode == "public-events" else None
    assert os.environ.get("SCOUT_PUBLIC_EVENTS") == expected  # what every bot below inherits
    for name in KITS:
        start_kit(referee, require(built_kits, name), log_dir=tmp_path)
    start_bot(referee, "greedy", "pyg")
    start_bot(referee, "random", "pyr")
    wait_connected(referee, [*KITS, "py-greedy", "py-random"], timeout=60)
    tables = [
        ["go", "py-greedy"], ["typescript", "rust"], ["java", "cpp"],
        ["rust", "py-random", "go"], ["cpp", "typescript", "py-greedy"],
        ["java", "go", "typescript", "py-random"], ["cpp", "rust", "py-greedy", "java"],
        ["go", "typescript", "rust", "java", "cpp"],
        ["py-greedy", "cpp", "java", "py-random", "typescript"],
    ]
    channel, stub = referee.matches_stub()
    with channel:
        infos = [create_match(stub, table, seed=1000 + i) for i, table in enumerate(tables)]
        for info, table in zip(infos, tables, strict=True):
            finished = wait_finished(stub, info.match_id, timeout=180)
            record = fetch_record(stub, info.match_id)
            assert finished.status == 2, (table, finished)
            assert record["notes"] == [] and record["forfeits"] == [], (table, record["notes"])
            replay(record)
            assert [p["name"] for p in record["players"]] == table


@pytest.mark.parametrize("name", list(KITS))
def test_kit_that_misses_its_deadline_on_purpose_times_out_and_is_played_by_fallback(
        name: str, built_kits: dict[str, str], referee: RefereeProcess, tmp_path: Path) -> None:
    kit = require(built_kits, name)
    start_kit(referee, kit, *kit.miss_deadline, log_dir=tmp_path)
    start_bot(referee, "greedy", "pyg")
    wait_connected(referee, [name, "py-greedy"], timeout=60)
    channel, stub = referee.matches_stub()
    with channel:
        info = create_match(stub, [name, "py-greedy"], seed=77, decision_ms=150, time_bank_ms=200)
        wait_finished(stub, info.match_id, timeout=120)
        record = fetch_record(stub, info.match_id)
    kinds = [n["kind"] for n in record["notes"] if n["seat"] == 0 and n["kind"] != "strike"]
    assert kinds[:3] == ["timeout"] * 3 and "forfeit" in kinds, record["notes"]
    assert record["forfeits"] == [0] and record["ranks"][0] == 2
    replay(record)


@pytest.mark.parametrize("name", list(KITS))
def test_kit_reconnects_after_its_connection_is_cut_and_finishes_the_match(
        name: str, built_kits: dict[str, str], referee: RefereeProcess, tmp_path: Path) -> None:
    kit = require(built_kits, name)
    proxy = DroppingProxy(referee.address)
    try:
        start_kit(referee, kit, "--slow-ms", "200", address=proxy.address, log_dir=tmp_path)
        start_bot(referee, "greedy", "pyg")
        wait_connected(referee, [name, "py-greedy"], timeout=60)
        channel, stub = referee.matches_stub()
        with channel:
            info = create_match(stub, [name, "py-greedy"], seed=5, decision_ms=2000,
                                time_bank_ms=5000)
            time.sleep(1.0)
            proxy.drop_all()
            finished = wait_finished(stub, info.match_id, timeout=120)
            record = fetch_record(stub, info.match_id)
        assert finished.status == 2
        assert proxy.connections >= 2, "the kit never reconnected"
        kinds = [n["kind"] for n in record["notes"] if n["seat"] == 0]
        assert "reconnect" in kinds, record["notes"]
        assert record["forfeits"] == [], record["notes"]
        replay(record)
    finally:
        proxy.close()
        for process in referee.bots:
            stop(process)


@pytest.mark.parametrize("name", list(KITS))
def test_kit_package_is_an_upload_whose_command_runs_a_file_inside_it(
        name: str, kit_packages: dict[str, str], tmp_path: Path) -> None:
    assert not kit_packages[name], kit_packages[name]
    archive = package_path(name)
    assert archive.stat().st_size <= UploadLimits().max_upload_bytes
    upload = unpack(archive, tmp_path / "bot")
    assert upload.runtime == PACKAGE_RUNTIMES[name]
    entry = upload.entry()
    assert entry.is_file() and entry.resolve().is_relative_to(upload.folder.resolve()), upload
    if upload.runtime == "binary":
        assert os.access(entry, os.X_OK), entry
        assert foreign_libraries(entry, upload.folder) == []


def test_python_examples_are_uploads_of_the_bundled_bots(tmp_path: Path) -> None:
    for example in (*PYTHON_EXAMPLES, "search"):
        upload = unpack(ROOT / "clients" / "python" / "examples" / example, tmp_path / example)
        assert (upload.runtime, upload.command) == ("python", ("python", "bot.py"))
        assert upload.entry().is_file()


@pytest.mark.parametrize("path", ["/no/such/directory/referee.sock", "/" + "x" * 120,
                                  "/etc/passwd"])
def test_referee_serve_refuses_a_unix_socket_it_cannot_listen_on(
        path: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main(["referee", "serve", "--port", "0", "--unix-socket", path])
    assert exited.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("scout-arena referee serve: error: argument --unix-socket: "), error


def test_packaged_kits_and_python_examples_play_over_a_unix_socket(
        kit_packages: dict[str, str], tmp_path: Path) -> None:
    """Each kit's package and the SDK's examples, unpacked outside the repository and started
    as a ladder starts a hosted bot (from its folder, with nothing but the launch convention),
    play full matches on a referee they reach only through its Unix socket, half of them
    writing the address unix:/PATH and half unix:///PATH."""
    failed = {name: kit_packages[name] for name in KITS if kit_packages[name]}
    assert not failed, "\n\n".join(failed.values())
    # A socket path must fit in 107 bytes, which pytest's tmp_path may not.
    socket_dir = Path(tempfile.mkdtemp(prefix="scout-", dir="/tmp"))
    socket = socket_dir / "referee.sock"
    uploads = {name: unpack(package_path(name), tmp_path / name) for name in KITS}
    for example in PYTHON_EXAMPLES:
        uploads[f"py-{example}"] = unpack(ROOT / "clients" / "python" / "examples" / example,
                                          tmp_path / f"py-{example}")
    launch = {key: value for key, value in os.environ.items()
              if not key.startswith("SCOUT_")} | {"SCOUT_CONCURRENCY": "1"}
    try:
        with running_referee(tmp_path, TOKENS, "--unix-socket", str(socket)) as referee:
            for i, (name, upload) in enumerate(uploads.items()):
                address = f"unix:{socket}" if i % 2 else f"unix://{socket}"
                log = (tmp_path / f"{name}.log").open("w")
                referee.bots.append(subprocess.Popen(
                    upload.argv(), cwd=upload.folder, stdout=log, stderr=subprocess.STDOUT,
                    text=True, env=launch | {"SCOUT_ADDRESS": address, "SCOUT_TOKEN": TOKENS[name],
                                  "SCOUT_BOT_NAME": name}))
            wait_connected(referee, list(uploads), timeout=60)
            tables = [["go", "typescript", "rust", "java", "cpp"],
                      ["py-greedy", "cpp", "py-random", "go"]]
            channel, stub = referee.matches_stub()
            with channel:
                for i, table in enumerate(tables):  # one at a time: SCOUT_CONCURRENCY is 1
                    info = create_match(stub, table, seed=31 + i)
                    finished = wait_finished(stub, info.match_id, timeout=180)
                    record = fetch_record(stub, info.match_id)
                    assert finished.status == 2, (table, finished)
                    assert record["notes"] == [] and record["forfeits"] == [], record["notes"]
                    assert [p["name"] for p in record["players"]] == table
                    replay(record)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
