"""Every command of `scout-arena`, tried with bad values as an operator would: each case ends
with one line on stderr, exit status 2 for bad input and 1 for a refusal (a port in use, an
address that is not this machine's), never a traceback or a signal.

The cases run in this process (`scout_arena.cli.main`), for speed; the few where a signal or a
crash at exit is the risk (a server that fails while its grpc threads run) run as processes.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from scout_arena.cli import main
from scout_ladder.repository import Repository

SCOUT_ARENA = [sys.executable, "-m", "scout_arena.cli"]
USAGE, REFUSED = 2, 1


@dataclass(frozen=True)
class Files:
    """Things on disk and on the network a bad command line points at."""

    root: Path
    taken_port: int

    @property
    def a_file(self) -> str:
        return str(self.root / "a-file.txt")

    @property
    def binary(self) -> str:
        return str(self.root / "binary.bin")

    @property
    def bad_json(self) -> str:
        return str(self.root / "bad.json")

    @property
    def bad_toml(self) -> str:
        return str(self.root / "bad.toml")

    @property
    def bad_pem(self) -> str:
        return str(self.root / "bad.pem")

    @property
    def empty_dir(self) -> str:
        return str(self.root / "empty")

    @property
    def missing(self) -> str:
        return str(self.root / "no-such-thing")

    @property
    def db(self) -> str:
        return f"sqlite:///{self.root / 'ladder.db'}"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Files]:
    root = tmp_path_factory.mktemp("bad-input")
    (root / "a-file.txt").write_text("not a folder\n")
    (root / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (root / "bad.json").write_text("{not json")
    (root / "bad.toml").write_text("this = is = not toml\n")
    (root / "bad.pem").write_text("-----BEGIN CERTIFICATE-----\nnonsense\n")
    (root / "empty").mkdir()
    with Repository(f"sqlite:///{root / 'ladder.db'}") as repo:
        repo.migrate()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield Files(root, taken.getsockname()[1])


def cases(f: Files) -> list[tuple[str, list[str], int]]:
    """(label, argv, exit status): every command and option with bad values."""
    ref = ["referee", "serve", "--port", "0", "--admin-token", "adm", "--records",
           str(f.root / "records")]
    lad = ["ladder", "serve", "--database", f.db, "--port", "0", "--no-hosting"]
    table: list[tuple[str, list[str], int]] = [
        ("no command", [], USAGE),
        ("unknown command", ["nope"], USAGE),
        ("unknown option", ["play", "--nope"], USAGE),
        # play
        ("play --players 1", ["play", "--players", "1"], USAGE),
        ("play --players x", ["play", "--players", "x"], USAGE),
        ("play --seed -1", ["play", "--seed", "-1"], USAGE),
        ("play --seed 2**64", ["play", "--seed", str(2**64)], USAGE),
        ("play --bot unknown", ["play", "--bot", "nobody"], USAGE),
        ("play --record into a missing folder", ["play", "--quiet", "--record",
                                                 f"{f.missing}/match.json"], USAGE),
        ("play --record a folder", ["play", "--quiet", "--record", str(f.root)], USAGE),
        ("play 3 bots for 4 seats", ["play", "--bot", "random", "--bot", "random", "--bot",
                                     "greedy"], USAGE),
        # replay
        ("replay a missing file", ["replay", f.missing], REFUSED),
        ("replay a binary file", ["replay", f.binary], REFUSED),
        ("replay bad JSON", ["replay", f.bad_json], REFUSED),
        ("replay a folder", ["replay", f.empty_dir], REFUSED),
        ("replay nothing", ["replay"], USAGE),
        # deal
        ("deal --players 6", ["deal", "--players", "6"], USAGE),
        ("deal --seed x", ["deal", "--seed", "x"], USAGE),
        # web
        ("web of a folder with no tournament", ["web", f.empty_dir, "--port", "0"], USAGE),
        ("web of a missing folder", ["web", f.missing, "--port", "0"], USAGE),
        ("web --port 99999", ["web", f.empty_dir, "--port", "99999"], USAGE),
        ("web --port -1", ["web", f.empty_dir, "--port", "-1"], USAGE),
        # demo
        ("demo --games x", ["demo", "--games", "x"], USAGE),
        # bot run
        ("bot run without a spec", ["bot", "run"], USAGE),
        ("bot run an unknown bot", ["bot", "run", "no_such_module:Bot", "--address",
                                    "127.0.0.1:1", "--token", "t"], USAGE),
        ("bot run --address with no port", ["bot", "run", "random", "--address",
                                            "no-port-here", "--token", "t"], USAGE),
        ("bot run --address port 0", ["bot", "run", "random", "--address", "h:0", "--token",
                                      "t"], USAGE),
        ("bot run no token", ["bot", "run", "random", "--address", "127.0.0.1:1"], USAGE),
        ("bot run --think-ms with --iterations", ["bot", "run", "search", "--think-ms", "5",
                                                  "--iterations", "5"], USAGE),
        ("bot run --think-ms for random", ["bot", "run", "random", "--think-ms", "5"], USAGE),
        ("bot run --max-concurrent x", ["bot", "run", "random", "--max-concurrent", "x"],
         USAGE),
        # referee serve: values
        ("referee serve --port 99999", [*ref, "--port", "99999"], USAGE),
        ("referee serve --port -1", [*ref, "--port", "-1"], USAGE),
        ("referee serve --port x", [*ref, "--port", "x"], USAGE),
        ("referee serve --decision-ms 0", [*ref, "--decision-ms", "0"], USAGE),
        ("referee serve --decision-ms -5", [*ref, "--decision-ms", "-5"], USAGE),
        ("referee serve --time-bank-ms -1", [*ref, "--time-bank-ms", "-1"], USAGE),
        ("referee serve --reconnect-grace -1", [*ref, "--reconnect-grace", "-1"], USAGE),
        ("referee serve --reconnect-grace nan", [*ref, "--reconnect-grace", "nan"], USAGE),
        ("referee serve --drain-seconds x", [*ref, "--drain-seconds", "x"], USAGE),
        ("referee serve --max-streams-per-token 0", [*ref, "--max-streams-per-token", "0"],
         USAGE),
        ("referee serve --max-streams-per-connection 0",
         [*ref, "--max-streams-per-connection", "0"], USAGE),
        ("referee serve --pass-budget-ms 0", [*ref, "--pass-budget-ms", "0"], USAGE),
        ("referee serve --goodbye-retry-ms -1", [*ref, "--goodbye-retry-ms", "-1"], USAGE),
        ("referee serve --capacity 0", [*ref, "--capacity", "0"], USAGE),
        ("referee serve --event-loop nope", [*ref, "--event-loop", "nope"], USAGE),
        ("referee serve --metrics-port 70000", [*ref, "--metrics-port", "70000"], USAGE),
        ("referee serve --hosted-data-mb 0", [*ref, "--hosted-data-mb", "0"], USAGE),
        ("referee serve --unix-socket in a missing folder",
         [*ref, "--unix-socket", f"{f.missing}/s.sock"], USAGE),
        ("referee serve --unix-socket on a file", [*ref, "--unix-socket", f.a_file], USAGE),
        # referee serve: files
        ("referee serve --tokens missing", [*ref, "--tokens", f.missing], USAGE),
        ("referee serve --tokens not JSON", [*ref, "--tokens", f.bad_json], USAGE),
        ("referee serve --tokens binary", [*ref, "--tokens", f.binary], USAGE),
        ("referee serve --tokens a folder", [*ref, "--tokens", f.empty_dir], USAGE),
        ("referee serve --bot-token without =", [*ref, "--bot-token", "nameonly"], USAGE),
        ("referee serve --records a file", [*ref, "--records", f.a_file], USAGE),
        ("referee serve --tls-cert alone", [*ref, "--tls-cert", f.bad_pem], USAGE),
        ("referee serve --tls-key alone", [*ref, "--tls-key", f.bad_pem], USAGE),
        ("referee serve --tls-cert missing", [*ref, "--tls-cert", f.missing, "--tls-key",
                                              f.missing], USAGE),
        ("referee serve --tls-cert not PEM", [*ref, "--tls-cert", f.bad_pem, "--tls-key",
                                              f.bad_pem], USAGE),
        ("referee serve --tls-client-ca alone", [*ref, "--tls-client-ca", f.bad_pem], USAGE),
        ("referee serve --admin-token empty", [*ref, "--admin-token", ""], USAGE),
        ("referee serve --admin-token with a newline", [*ref, "--admin-token", "a\nb"], USAGE),
        ("referee serve --metrics-tls-cert alone", [*ref, "--metrics-port", "0",
                                                    "--metrics-tls-cert", f.bad_pem], USAGE),
        ("referee serve --metrics-tls-cert missing", [*ref, "--metrics-port", "0",
                                                      "--metrics-tls-cert", f.missing,
                                                      "--metrics-tls-key", f.missing], USAGE),
        ("referee serve --metrics-token empty", [*ref, "--metrics-token", ""], USAGE),
        ("referee serve --config missing", [*ref, "--config", f.missing], USAGE),
        ("referee serve --config bad TOML", [*ref, "--config", f.bad_toml], USAGE),
        ("referee serve --config binary", [*ref, "--config", f.binary], USAGE),
        ("referee serve --config a folder", [*ref, "--config", f.empty_dir], USAGE),
        # referee serve: a node
        ("referee serve --join with no port", [*ref, "--join", "nohostport"], USAGE),
        ("referee serve --join port 99999", [*ref, "--join", "h:99999"], USAGE),
        ("referee serve --join without a node token", [*ref, "--join", "127.0.0.1:1"], USAGE),
        ("referee serve --advertise with no port", [*ref, "--advertise", "x"], USAGE),
        ("referee serve --ladder-ca missing", [*ref, "--join", "127.0.0.1:1", "--node-token",
                                               "n", "--ladder-ca", f.missing], USAGE),
        ("referee serve --ladder-ca not PEM", [*ref, "--join", "127.0.0.1:1", "--node-token",
                                               "n", "--ladder-ca", f.bad_pem], USAGE),
        # referee serve: refused
        ("referee serve on a port in use", [*ref, "--port", str(f.taken_port)], REFUSED),
        ("referee serve on host 999.1.1.1", [*ref, "--host", "999.1.1.1"], REFUSED),
        ("referee serve metrics on a port in use",
         [*ref, "--metrics-port", str(f.taken_port)], REFUSED),
        # ladder serve
        ("ladder serve --port 99999", [*lad, "--port", "99999"], USAGE),
        ("ladder serve --port -1", [*lad, "--port", "-1"], USAGE),
        ("ladder serve --web-port 70000", [*lad, "--web-port", "70000"], USAGE),
        ("ladder serve --metrics-port -3", [*lad, "--metrics-port", "-3"], USAGE),
        ("ladder serve --decision-ms 0", [*lad, "--decision-ms", "0"], USAGE),
        ("ladder serve --decision-ms -5", [*lad, "--decision-ms", "-5"], USAGE),
        ("ladder serve --table-sizes 6", [*lad, "--table-sizes", "6"], USAGE),
        ("ladder serve --table-sizes x", [*lad, "--table-sizes", "x"], USAGE),
        ("ladder serve --seed x", [*lad, "--seed", "x"], USAGE),
        ("ladder serve --nodes 0", [*lad, "--nodes", "0"], USAGE),
        ("ladder serve --node-capacity 0", [*lad, "--node-capacity", "0"], USAGE),
        ("ladder serve --join-timeout 0", [*lad, "--join-timeout", "0"], USAGE),
        ("ladder serve --node-heartbeat-timeout -1", [*lad, "--node-heartbeat-timeout", "-1"],
         USAGE),
        ("ladder serve --reconnect-grace x", [*lad, "--reconnect-grace", "x"], USAGE),
        ("ladder serve --registration nope", [*lad, "--registration", "nope"], USAGE),
        ("ladder serve --max-bots-per-owner 0", [*lad, "--max-bots-per-owner", "0"], USAGE),
        ("ladder serve --max-upload-mb x", [*lad, "--max-upload-mb", "x"], USAGE),
        ("ladder serve --storage a file", [*lad, "--storage", f.a_file], USAGE),
        ("ladder serve --tls-cert alone", [*lad, "--tls-cert", f.bad_pem], USAGE),
        ("ladder serve --tls-cert not PEM", [*lad, "--tls-cert", f.bad_pem, "--tls-key",
                                             f.bad_pem], USAGE),
        ("ladder serve --tls-cert missing", [*lad, "--tls-cert", f.missing, "--tls-key",
                                             f.missing], USAGE),
        ("ladder serve --database not a URL", [*lad, "--database", "not a url"], USAGE),
        ("ladder serve --database mysql", [*lad, "--database", "mysql://x/y"], USAGE),
        ("ladder serve --config bad TOML", [*lad, "--config", f.bad_toml], USAGE),
        ("ladder serve --config missing", [*lad, "--config", f.missing], USAGE),
        ("ladder serve --metrics-tls-key alone", [*lad, "--metrics-tls-key", f.bad_pem],
         USAGE),
        ("ladder serve on a port in use", [*lad, "--port", str(f.taken_port)], REFUSED),
        ("ladder serve on host 999.1.1.1", [*lad, "--host", "999.1.1.1"], REFUSED),
        # ladder: the other commands
        ("ladder register no owner", ["ladder", "register", "x", "--database", f.db], USAGE),
        ("ladder register a bad name", ["ladder", "register", "a b\n", "--owner", "o",
                                        "--database", f.db], USAGE),
        ("ladder register a bad owner", ["ladder", "register", "x", "--owner", "o\x00",
                                         "--database", f.db], USAGE),
        ("ladder leaderboard no database", ["ladder", "leaderboard", "--database",
                                            f"sqlite:///{f.missing}.db"], REFUSED),
        ("ladder matches --limit 0", ["ladder", "matches", "--limit", "0", "--database", f.db],
         USAGE),
        ("ladder matches --table-size 9", ["ladder", "matches", "--table-size", "9",
                                           "--database", f.db], USAGE),
        ("ladder bot unknown", ["ladder", "bot", "nobody", "--database", f.db], REFUSED),
        ("ladder retire unknown", ["ladder", "retire", "nobody", "--database", f.db], REFUSED),
        ("ladder recompute no database", ["ladder", "recompute", "--database",
                                          f"sqlite:///{f.missing}.db"], REFUSED),
        ("ladder signup no address", ["ladder", "signup", "me"], USAGE),
        ("ladder unknown subcommand", ["ladder", "nope"], USAGE),
        # tournament and sprt
        ("tournament no bots", ["tournament", "--out", str(f.root / "t1")], USAGE),
        ("tournament --bot without =", ["tournament", "--bot", "x"], USAGE),
        ("tournament --players 9", ["tournament", "--bot", "a=random", "--bot", "b=random",
                                    "--players", "9", "--out", str(f.root / "t2")], USAGE),
        ("tournament --decision-ms 0", ["tournament", "--bot", "a=random", "--decision-ms",
                                        "0"], USAGE),
        ("tournament --resume a missing folder", ["tournament", "--resume", f.missing], USAGE),
        ("tournament --config bad TOML", ["tournament", "--config", f.bad_toml], USAGE),
        ("tournament --config missing", ["tournament", "--config", f.missing], USAGE),
        ("tournament --nodes 0", ["tournament", "--bot", "a=random", "--bot", "b=random",
                                  "--nodes", "0", "--out", str(f.root / "t3")], USAGE),
        ("tournament --seed x", ["tournament", "--seed", "x"], USAGE),
        ("tournament --out a file", ["tournament", "--bot", "a=random", "--bot", "b=random",
                                     "--games", "1", "--no-progress", "--out", f.a_file], USAGE),
        ("sprt without --new", ["sprt", "--base", "random"], USAGE),
        ("sprt --alpha x", ["sprt", "--new", "random", "--base", "greedy", "--alpha", "x"],
         USAGE),
        ("sprt --metric nope", ["sprt", "--new", "random", "--base", "greedy", "--metric",
                                "nope"], USAGE),
        ("sprt --decision-ms -5", ["sprt", "--new", "random", "--base", "greedy",
                                   "--decision-ms", "-5"], USAGE),
        # train (each refused before any match is played)
        *((f"train {flag} {value}", ["train", flag, value, "--out", str(f.root / "net.npz")],
           USAGE)
          for flag, value in (("--iterations", "0"), ("--games", "-1"), ("--search-games", "x"),
                              ("--search-iterations", "-1"), ("--players", "1,4"),
                              ("--players", "6"), ("--players", ""), ("--epsilon", "1.5"),
                              ("--keep", "nan"), ("--window", "0"), ("--epochs", "0"),
                              ("--learning-rate", "0"), ("--learning-rate", "inf"),
                              ("--net-weight", "-0.1"), ("--eval-players", "7"),
                              ("--eval-deals", "0"), ("--eval-iterations", "-3"),
                              ("--opponent", "nobody"), ("--opponent", "search:nope=1"),
                              ("--workers", "0"), ("--seed", "x"))),
        ("train --out a folder", ["train", "--out", f.empty_dir], USAGE),
    ]
    return table


CASE_LABELS = [label for label, _, _ in cases(Files(Path("/nonexistent"), 1))]


@pytest.mark.parametrize("label", CASE_LABELS)
def test_bad_input_is_one_line_and_the_right_status(
        label: str, files: Files, capsys: pytest.CaptureFixture[str]) -> None:
    argv, status = next((argv, status) for name, argv, status in cases(files) if name == label)
    try:
        got = main(argv)
    except SystemExit as exc:  # argparse, and a command's own exit
        code = exc.code
        got = code if isinstance(code, int) else (print(code, file=sys.stderr) or 1)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    assert len(lines[0]) < 400, lines[0]
    assert got == status, (got, lines[0])


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCOUT_ARENA, *args], capture_output=True, text=True,
                          timeout=timeout)


def assert_one_line(done: subprocess.CompletedProcess[str], status: int) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert done.returncode == status, (done.returncode, done.stderr)  # never a signal (< 0)
    return lines[0]


def test_ladder_serve_with_its_web_port_taken_says_so_and_exits_without_a_crash(
        files: Files) -> None:
    """It used to print "address already in use", then die of SIGSEGV (exit 139) with the
    gRPC server's threads alive: uvicorn's sys.exit() from inside the event loop."""
    for _ in range(3):
        done = run_cli("ladder", "serve", "--database", files.db, "--port", "0",
                       "--no-hosting", "--web-port", str(files.taken_port))
        line = assert_one_line(done, REFUSED)
        assert f"--web-port: cannot listen on 127.0.0.1:{files.taken_port}" in line


@pytest.mark.parametrize("command", [
    ["referee", "serve", "--admin-token", "adm"],
    ["ladder", "serve", "--no-hosting"],
])
def test_a_server_on_a_port_in_use_exits_with_one_line_as_a_process(
        command: list[str], files: Files, tmp_path: Path) -> None:
    done = run_cli(*command, "--port", str(files.taken_port), "--database" if
                   command[0] == "ladder" else "--records",
                   files.db if command[0] == "ladder" else str(tmp_path / "r"))
    line = assert_one_line(done, REFUSED)
    assert f"cannot listen on 127.0.0.1:{files.taken_port}" in line


def test_a_bot_given_an_address_with_no_port_is_refused_not_retried_for_ever() -> None:
    done = run_cli("bot", "run", "random", "--address", "no-port-here", "--token", "t",
                   timeout=60)
    assert "names no port" in assert_one_line(done, USAGE)
